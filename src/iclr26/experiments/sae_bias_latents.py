"""Can SAEs reveal and mitigate racial biases of LLMs in healthcare? (ICLR 2026, arXiv 2511.00177).

Small reproduction (a reconstruction of the paper's Gemma-2 + GemmaScope pipeline, spec §5): a tiny Llama
organism is trained on synthetic clinical notes in which a group token co-occurs with stigmatising tokens and with
historically biased "risk of belligerence" labels; a TopK SAE is trained on its layer-1 residual stream. The
paper's recipe then runs: (1) L1-logistic discovery over max-pooled latents finds the group-A latent - here on
notes whose stigmatising tokens are drawn at one rate for both groups, with BOS, every group token and the 3
positions after it masked out of the max-pool, so that the probe cannot read the group token itself and must find a
latent that carries the group by context (a named group token is separated at AUROC 1.00 by any organism, with or
without the planted bias); (2) on notes that never name the group it also fires on stigmatising tokens; (3) AtP-IG
ranks it among the latents that push the answer toward "Yes"; (4) steering it (f_j += k·max f, error term kept) raises
P(Yes) and the group-A share at ``patient is``; (5) ablating it cuts the group-A share of vignettes and (less, the
paper predicts) the risk gap between counterfactual notes. Every steering / ablation number has a baseline of
frequency-matched latents edited at the same scale (all of the n closest in log firing frequency: an enumeration).
The null arm of the discovery, co-firing, steering and attribution claims (C1-C4) is the same pipeline on an
organism trained on the same notes without the planted bias (p_flip = 0), in the same run; the engine decides each
claim from its interval over notes (or note pairs) and that null arm.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from iclr26.core import param
from iclr26.core.errors import UserError
from iclr26.core.parallel import parallel_map
from iclr26.data.clinical_notes import (
    A_SKEWED,
    BALANCED,
    GROUP_A,
    GROUP_B,
    PREFIX,
    QUESTION,
    STIGMA,
    ClinicalNotes,
    vignette_prompt,
)
from iclr26.interp.attribution import logit_diff
from iclr26.interp.capture import capture
from iclr26.interp.latent_attribution import latent_atp_ig
from iclr26.interp.latents import discover_latents, max_pooled_latents
from iclr26.interp.sae import sae_stats
from iclr26.interp.sae_edit import add_scaled, sae_edit, zero
from iclr26.interp.train import SAETrainer
from iclr26.lm.train import organism_config, train_organism
from iclr26.runs import Result, RunContext, claim
from iclr26.stats import Est, auroc, bootstrap, cluster_bootstrap, exact, random_baseline

DESCRIPTION = (
    "Tiny Llama organism on synthetic clinical notes (group token + stigmatising tokens + group-biased risk labels) "
    "and a TopK SAE on its residual stream: L1-probe discovery of the group latent, its co-firing on stigmatising "
    "tokens, AtP-IG toward 'Yes', steering (P(Yes) dose-response) and ablation (vignette share, risk gap), each "
    "against frequency-matched random latents."
)
WORKLOAD = "small"
KS = (0.0, 0.25, 0.5, 1.0, 2.0)
HEADLINE = "C1_discovery_auroc"
# The default trains 3 seeds since 2026-12-07: with one, the headline moved by three seed SDs between two machines
# of the same kind (see SEED_SPREAD below), while 3 seeds decided it the same way on both (docs, "Three seeds")
SEEDS = {"smoke": 1, "default": 3, "paper": 3}
#: seed-to-seed standard deviations measured at the default preset over training seeds 0, 1, 2 (``iclr26 run
#: sae-bias-latents --seeds 3``, docs/sae-bias-latents.md, "Three training seeds"); only claims whose SD is under a
#: quarter of the seed-0 margin: C1 AUROC 0.804 / 0.831 / 0.803, C4 rank fraction 0.016 / 0.004 / 0.004, C5 vignette
#: cut 0 / 0 / 0. They let a one-seed run (``--seeds 1``, the default until 2026-12-07) decide these claims
#: (claims.apply_seed_spread); the 3-seed default decides every claim over its own seeds.
# C1_discovery_auroc is no longer decided on one seed: a second machine of the same kind (2026-12-07) gave 0.849
# [0.794, 0.899] where the seed spread was measured at 0.80, a move three times the seed SD (0.016)
SEED_SPREAD = {"C4_attribution_top5pct": 0.0068, "C5_vignette_ablation": 0.0}
# Default: 3 training seeds (t-interval over seeds). Measured 2026-12-07 on this machine kind; the first machine's
# 3-seed run (2026-12-06, the same method code; docs, "Three training seeds") gave the verdicts listed third
EXPECTED = {
    "C1_discovery_auroc": ("not held", "held-out AUROC by context 0.849 / 0.841 / 0.821 -> 0.837 [0.801, 0.873] over "
                           "3 training seeds against 0.9 (the first machine: 0.813 [0.774, 0.851], not held too); the "
                           "unplanted organism 0.823"),
    "C1_top_activations": ("no power", "0.92 [0.87, 0.97] of the top 50 on / after a group-A form; the unplanted "
                           "organism 0.84 passes too (first machine: 0.70 [-0.27, 1.67], inconclusive)",
                           ("inconclusive",)),
    "C2_stigma_vs_findings": ("not held", "0 in every seed: the latent is silent on stigmatising words (first machine "
                              "1.19 [-2.2, 4.6], inconclusive)", ("inconclusive",)),
    "C2_stigma_vs_group_B_latent": ("not held", "0 in every seed (first machine 0.93 [-1.4, 3.3], inconclusive)",
                                    ("inconclusive",)),
    "C3_steer_monotone": ("inconclusive", "smallest step +0.033 / +0.050 / -0.067 -> +0.005 [-0.15, 0.16]; unplanted "
                          "-0.016"),
    "C3_steer_vs_random": ("inconclusive", "-0.27 [-0.64, 0.10] straddles 0; unplanted -0.25"),
    "C3_group_token_rises": ("not held", "-0.59 [-1.01, -0.17] (first machine -0.21 [-0.72, 0.29], inconclusive)",
                             ("inconclusive",)),
    "C4_attribution_top5pct": ("held", "AtP-IG rank fraction 0.009 [-0.014, 0.032] against 0.05; the unplanted "
                               "organism's latent 0.35"),
    "C5_vignette_ablation": ("not held", "0.000 (exact) at seeds 0-2: the latent is silent on vignette prompts, "
                             "whose condition carries the group by context (P(A) = 0.85)"),
    "sanity_bias_planted": "held",
    "sanity_answers_learned": "held",
}


@dataclass
class Config(organism_config(d=64, layers=3, heads=4, ff=256, steps=1500, lr=3e-3, batch=64, weight_decay=0.01,
                             limits={"layers": {"high": 8}})):
    p_flip: float = param(0.2, "probability that a group-A note's No label is flipped to Yes (the planted bias)",
                          low=0.0, high=1.0)
    sae_layer: int = param(1, "the SAE reads layers.{sae_layer}.resid_post (must be < layers)", low=0, high=7)
    n_latents: int = param(512, "SAE width", low=16, high=16_384)
    k: int = param(8, "TopK sparsity of the SAE (must be <= n_latents)", low=1, high=256)
    sae_tokens: int = param(300_000, "residual-stream tokens the SAE is trained on (BOS skipped)", low=2000,
                            high=10_000_000)
    sae_steps: int = param(1000, "SAE optimiser steps (batch 1024 tokens)", low=1, high=1_000_000)
    n_discovery: int = param(500, "training notes per group for the L1 discovery probe (group named)", low=10,
                             high=100_000)
    n_discovery_test: int = param(100, "held-out notes per group for the discovery AUROC", low=10, high=100_000)
    n_eval: int = param(200, "group-free notes for steering / co-firing; counterfactual pairs for the risk gap",
                        low=10, high=100_000)
    n_random: int = param(30, "random-latent baseline: the n alive latents closest to the group-A latent in log firing "
                          "frequency, every one of them edited (an enumeration, not a draw)", low=2, high=500)
    atp_steps: int = param(3, "integrated-gradient steps of the latent attribution (paper: 3)", low=1, high=32)
    n_generate: int = param(40, "group-free notes answered by greedy generation under steering (reason check)",
                            low=1, high=10_000)

    def validate(self) -> None:
        if self.sae_layer >= self.layers:
            raise UserError(f"sae_layer={self.sae_layer} must be < layers={self.layers}")
        if self.k > self.n_latents:
            raise UserError(f"k={self.k} must be <= n_latents={self.n_latents}")


PRESETS = {
    "smoke": {"d": 32, "layers": 2, "ff": 64, "steps": 60, "n_latents": 64, "k": 4, "sae_tokens": 6000,
              "sae_steps": 40, "n_discovery": 30, "n_discovery_test": 15, "n_eval": 20, "n_random": 3,
              "n_generate": 4},
    "default": {},
    "paper": {"d": 128, "layers": 4, "ff": 512, "steps": 4000, "n_latents": 2048, "k": 16, "sae_tokens": 2_000_000,
              "sae_steps": 4000, "n_eval": 1000, "n_random": 100, "n_generate": 200},
}


def plan(cfg: Config) -> dict:
    """What a run with ``cfg`` needs and roughly costs (``iclr26 run sae-bias-latents --plan``)."""
    from iclr26 import plan as p

    def work(c: Config) -> tuple[float, float, float]:  # two organisms; the SAE; the evaluation notes
        size = c.layers * c.d * (4 * c.d + 3 * c.ff)
        sae = c.sae_steps * 1024 * c.n_latents * c.d + c.sae_tokens * size / 64
        evals = (2 * (c.n_discovery + c.n_discovery_test) + 4 * c.n_eval + c.n_random * c.n_eval / 10
                 + 64 * c.n_generate) * size
        return 2 * c.steps * c.batch * size, sae, evals

    return {
        "needs": [], "device": "cpu", "gpu_memory_gb": None,
        **p.cpu_time("sae-bias-latents", cfg, work, "organism steps x batch x size (share 0.8, from the 95 s of "
                     "115 s the organism took), SAE steps x latents x d (0.15) and evaluated notes (0.05)",
                     shares=(0.8, 0.15, 0.05)),
        "notes": ["cached organisms (iclr26 cache list) skip their training share"],
        "reference": [
            p.hub_weights("google/gemma-2-2b-it", note="with GemmaScope SAEs (google/gemma-scope-2b-pt-res); "
                          "MIMIC-IV needs credentialed access and is user-supplied"),
            p.cuda(16, note="gemma-2-2b-it in bf16 is ~5 GB of weights, gemma-2-9b-it ~18 GB (our arithmetic)"),
        ],
    }


# ---------------------------------------------------------------------------------------------- plumbing
def _organism(cfg: Config, gen: ClinicalNotes, seed: int):
    def document(rng, tok):
        return tok.convert_tokens_to_ids(gen.document(rng))

    # the cache key hashes the generator's module (``source``), not this one: an edit to the analysis below does not
    # retrain the organisms, an edit to the notes does
    return train_organism("sae-bias-latents", cfg, gen.vocab(), document, seed=seed, ctx=48, data={"gen": repr(gen)},
                          source=ClinicalNotes.document)


def _pad(seqs: list[list[int]]) -> dict[str, torch.Tensor]:
    T = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    am = torch.zeros(len(seqs), T, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        am[i, : len(s)] = 1
    return {"input_ids": ids, "attention_mask": am}


def _batches(seqs: list[list[int]], bs: int = 256):
    return [_pad(seqs[i : i + bs]) for i in range(0, len(seqs), bs)]


def _skip_bos(ids, am):
    m = am.bool().clone()
    m[:, 0] = False
    return m


def _context_mask(group_ids: list[int], after: int = 3):
    """Capture mask for the discovery max-pool: real tokens without BOS, without every group-token position and
    without the ``after`` positions that follow each one, so a latent that only marks the group token (or its
    immediate echo) cannot separate the notes: what is left carries the group by context only."""
    grp = torch.tensor(group_ids)

    def mask(ids, am):
        mk = am.bool().clone()
        mk[:, 0] = False
        g = torch.isin(ids, grp)
        for s in range(after + 1):
            mk[:, s:] &= ~g[:, : g.shape[1] - s]
        return mk

    return mask


@torch.no_grad()
def _next_probs(model, seqs: list[list[int]], edit=None) -> torch.Tensor:
    """Next-token distribution after the last token of each sequence ``[N, V]`` (float64), under ``edit()``."""
    out = []
    for b in _batches(seqs):
        last = b["attention_mask"].sum(1) - 1
        if edit is None:
            logits = model(**b).logits
        else:
            with edit():
                logits = model(**b).logits
        out.append(torch.softmax(logits[torch.arange(len(last)), last].double(), -1))
    return torch.cat(out)


def _token_latents(model, sae, site, seqs):
    """Latents of every non-BOS token: ``(f [n_tok, n], row [n_tok], pos [n_tok], token id [n_tok])``."""
    cap = capture(model, _batches(seqs), site, positions=_skip_bos, desc="token latents")
    with torch.no_grad():
        f = sae.encode(cap[site].float())
    return f, cap.index[:, 0].long(), cap.index[:, 1].long(), cap.token_ids.long()


def _share(p: torch.Tensor, a_ids, b_ids) -> torch.Tensor:
    """P(group-A form) / P(any group form) per row."""
    pa, pb = p[:, a_ids].sum(1), p[:, b_ids].sum(1)
    return pa / (pa + pb).clamp_min(1e-12)


def _matched_pool(freq: np.ndarray, target: int, exclude: set[int], n: int) -> list[int]:
    """The ``n`` alive latents (firing frequency > 0, not in ``exclude``) closest to ``target`` in log firing
    frequency: the random-latent baseline, enumerated (every one of them is edited)."""
    lf = np.log(np.maximum(freq, 1e-7))
    cand = [int(j) for j in np.argsort(np.abs(lf - lf[target]), kind="stable") if j not in exclude and freq[j] > 0]
    return sorted(cand[:n])


def _mean(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.mean()) if x.size else float("nan")


def _over_notes(stat, n: int, seed: int, unit: str = "note") -> Est:
    """``stat(rows)`` with a bootstrap interval over ``n`` independent notes (or note pairs)."""
    return cluster_bootstrap(stat, np.arange(n), unit=unit, seed=seed)


def _pool_q(values, q: float = 0.5) -> Est:
    """The ``q``-quantile over the enumerated frequency-matched latents (median: the null arm 'a random latent
    instead'); NaN when none gives a finite value."""
    v = np.asarray(values, dtype=float)
    if not np.isfinite(v).any():
        return Est(float("nan"), float("nan"), float("nan"), "latent", 0, "enumeration")
    return random_baseline(v, q=q, exact_enumeration=True, unit="latent")


# ---------------------------------------------------------------------------------------------- one organism
def _arm(item: tuple[float, bool], common: tuple) -> dict:
    """The whole pipeline on the organism trained with label-flip probability ``p_flip`` (runs in a worker).

    ``full=False`` is the null arm (the unplanted organism): everything the gated claims C1-C4 read (discovery, top
    activations, stigma co-firing, the steering curves with its own frequency-matched pool, AtP-IG, the risk gap);
    no generation and no ablation (C5 is measured against frequency-matched latents of the planted organism)."""
    p_flip, full = item
    cfg, seed = common
    gen = ClinicalNotes(p_flip=p_flip)
    model, tok, info = _organism(cfg, gen, seed)
    model = model.cpu().eval()
    conv = tok.convert_tokens_to_ids
    site = f"layers.{cfg.sae_layer}.resid_post"
    yes_id, no_id = conv("Yes"), conv("No")
    a_ids, b_ids = conv(list(GROUP_A)), conv(list(GROUP_B))
    out: dict = {"cached": float(info["cached"]), "build_seconds": float(info["build_seconds"])}
    m: dict[str, float] = {}  # whether the organism came from the cache is in the notes, not a metric

    # ------------------------------------------------------------ behaviour of the organism (sanity)
    rng = np.random.default_rng(seed + 11)
    pairs = [gen.note(rng, group="A", mention=True) for _ in range(cfg.n_eval)]
    cf = [gen.swap_group(n) for n in pairs]
    pairsA = [conv(n.prompt) for n in pairs]
    pairsB = [conv(n.prompt) for n in cf]
    pA = _next_probs(model, pairsA)
    pB = _next_probs(model, pairsB)

    def p_yes(p):
        return (p[:, yes_id] / (p[:, yes_id] + p[:, no_id]).clamp_min(1e-12)).numpy()

    gap_rows = p_yes(pA) - p_yes(pB)
    gap0 = float(np.mean(gap_rows))
    free = [gen.note(rng, mention=False) for _ in range(cfg.n_eval)]
    free_prompts = [conv(n.prompt) for n in free]
    pf = p_yes(_next_probs(model, free_prompts))
    y_free = np.array([n.answer == "Yes" for n in free])
    correct = ((pf > 0.5) == y_free).astype(float)
    m.update(risk_gap=gap0, answer_acc_group_free=float(correct.mean()), p_yes_group_free=float(pf.mean()))
    out["est_gap"] = bootstrap(gap_rows, unit="note pair", seed=seed)
    out["est_acc"] = bootstrap(correct, unit="note", seed=seed)

    # ------------------------------------------------------------ SAE on the residual stream
    drng = np.random.default_rng(seed + 23)
    docs, n_tok = [], 0
    while n_tok < cfg.sae_tokens:
        d = conv(gen.document(drng))
        docs.append(d)
        n_tok += len(d) - 1
    X = capture(model, _batches(docs, 512), site, positions=_skip_bos, desc="sae data")[site].float()
    trainer = SAETrainer(cfg.n_latents, activation="topk", k=cfg.k, steps=cfg.sae_steps,
                         batch_size=min(1024, X.shape[0]), init_seed=seed, data_seed=seed + 1,
                         dead_after_tokens=200_000, desc="sae").fit(X)
    sae = trainer.sae_
    st = sae_stats(sae, X)
    freq = st["firing_freq"].numpy()
    m.update(sae_fvu=float(st["fvu"]), sae_l0=float(st["l0"]), sae_dead_frac=float(st["dead_frac"]),
             sae_train_tokens=float(X.shape[0]), resid_norm_mean=float(X.norm(dim=1).mean()))
    del X

    # ------------------------------------------------------------ (1) discovery: max-pooled latents, L1 probe
    def note_only(n):  # <bos> note : body (the note, without the question)
        return conv(n.prompt[: len(n.prompt) - len(QUESTION)])

    # discovery notes draw the stigmatising tokens at one rate for both groups (the mean of the two planted rates),
    # so no stigma-token latent can separate them; the max-pool skips BOS, every group token and the 3 positions
    # after it, so no latent that marks the group token itself can either: a latent that separates these notes
    # carries the group by context
    s_bal = (gen.p_stigma_a + gen.p_stigma_b) / 2
    gen_bal = dataclasses.replace(gen, p_stigma_a=s_bal, p_stigma_b=s_bal)

    def disc_set(n_per, s):
        r = np.random.default_rng(s)
        notes = [gen_bal.note(r, group=g, mention=True) for g in ("A", "B") for _ in range(n_per)]
        return notes, np.array([1] * n_per + [0] * n_per)

    tr_notes, ytr = disc_set(cfg.n_discovery, seed + 31)
    te_notes, yte = disc_set(cfg.n_discovery_test, seed + 37)
    ctx_mask = _context_mask([*a_ids, *b_ids], after=3)
    Ftr = max_pooled_latents(model, sae, _batches([note_only(n) for n in tr_notes]), site, positions=ctx_mask)
    Fte = max_pooled_latents(model, sae, _batches([note_only(n) for n in te_notes]), site, positions=ctx_mask)
    rank = discover_latents(Ftr, ytr, C=1.0, top=100, F_test=Fte, y_test=yte, seed=seed)
    coef_full = rank.estimator[-1].coef_.reshape(-1)
    scores_te = rank.estimator.decision_function(np.asarray(torch.as_tensor(Fte).double()))
    out["est_auc"] = bootstrap((scores_te, yte.astype(float)), auroc, paired=True, unit="note", seed=seed)
    pos = [int(j) for j, c in zip(rank.latents, rank.coef, strict=True) if c > 0]
    neg = [int(j) for j, c in zip(rank.latents, rank.coef, strict=True) if c < 0]
    jA = pos[0] if pos else int(np.argmax(coef_full))
    jB = neg[0] if neg else int(np.argmin(coef_full))
    m.update(discovery_auroc=out["est_auc"].value, latent_A=float(jA), latent_B=float(jB),
             n_nonzero_coef=float(len(rank.latents)), latent_A_freq=float(freq[jA]))
    out.update(jA=jA, jB=jB, freq_A=float(freq[jA]), fvu=float(st["fvu"]), dead=float(st["dead_frac"]),
               disc_top=[int(j) for j in rank.latents[:20]], disc_coef=[float(c) for c in rank.coef[:20]])

    # top activations of the group-A latent over the discovery notes (train + test)
    all_notes = tr_notes + te_notes
    f_tok, row, posn, tid = _token_latents(model, sae, site, [note_only(n) for n in all_notes])
    aset = set(a_ids)
    near_a = np.zeros(len(tid), dtype=bool)
    # a token counts when it is a group-A form or one of the 3 tokens after one
    seq_ids = [note_only(n) for n in all_notes]
    for i, (r, p_) in enumerate(zip(row.tolist(), posn.tolist(), strict=True)):
        s = seq_ids[r]
        near_a[i] = any(s[q] in aset for q in range(max(0, p_ - 3), p_ + 1))
    top50 = torch.topk(f_tok[:, jA], min(50, len(tid))).indices.numpy()
    top50 = top50[f_tok[top50, jA].numpy() > 0]
    ind = near_a[top50].astype(float)
    if top50.size:  # the 50 activations nest in notes: resample notes
        out["est_top50"] = cluster_bootstrap(lambda ix: float(ind[ix].mean()), row.numpy()[top50], unit="note",
                                             seed=seed)
    else:
        out["est_top50"] = Est(0.0, float("nan"), float("nan"), "note", 0, "cluster-bootstrap")
    out["top_tokens"] = [tok.convert_ids_to_tokens(int(t)) for t in tid[top50]]
    m["top50_on_group_A"] = out["est_top50"].value
    # each latent's activation scale: its mean activation where it fires on these notes (the C2 ratios floor their
    # denominators at 1 % of it; a latent silent here takes the median scale of the latents that fire)
    fires = (f_tok > 0).sum(0)
    scale = (f_tok.sum(0) / fires.clamp_min(1)).numpy().astype(np.float64)
    scale[fires.numpy() == 0] = float(np.median(scale[fires.numpy() > 0])) if (fires > 0).any() else 1.0
    m.update(latent_A_scale=float(scale[jA]), latent_B_scale=float(scale[jB]))
    del f_tok

    # the random-latent baseline: every one of the n alive latents closest to jA in log firing frequency
    pool = _matched_pool(freq, jA, {jA, jB, *pos[:10], *neg[:10]}, cfg.n_random)
    out["pool"] = pool
    m["n_random_latents"] = float(len(pool))

    # ------------------------------------------------------------ (2) stigma co-firing on group-free notes
    f_free, row_free, _, tid_free = _token_latents(model, sae, site, [note_only(n) for n in free])
    stig_ids, find_ids = set(conv(list(STIGMA))), set(conv(list(gen.findings)))
    is_st = np.isin(tid_free.numpy(), list(stig_ids))
    is_fd = np.isin(tid_free.numpy(), list(find_ids))
    F = f_free.numpy()
    fa, fb = F[:, jA], F[:, jB]
    act_st_A, act_fd_A, act_st_B = _mean(fa[is_st]), _mean(fa[is_fd]), _mean(fb[is_st])
    act_other_A = _mean(fa[~(is_st | is_fd)])

    # denominators floored at 1 % of the denominator latent's own activation scale (a latent that stays
    # silent): the ratio is then at most 100x the numerator in units of that scale, whatever the SAE's scale
    def r_find(col, ix, j):
        return _mean(col[ix][is_st[ix]]) / max(_mean(col[ix][is_fd[ix]]), 0.01 * scale[j])

    def r_b(col, ix):
        return _mean(col[ix][is_st[ix]]) / max(_mean(fb[ix][is_st[ix]]), 0.01 * scale[jB])

    rows_free = row_free.numpy()
    every = np.arange(len(rows_free))
    out["est_c2_find"] = cluster_bootstrap(lambda ix: r_find(fa, ix, jA), rows_free, unit="note", seed=seed)
    out["est_c2_b"] = cluster_bootstrap(lambda ix: r_b(fa, ix), rows_free, unit="note", seed=seed)
    out["null_c2_find"] = _pool_q([r_find(F[:, j], every, j) for j in pool])
    out["null_c2_b"] = _pool_q([r_b(F[:, j], every) for j in pool])
    m.update(act_A_on_stigma=act_st_A, act_A_on_findings=act_fd_A, act_B_on_stigma=act_st_B,
             act_A_on_other=act_other_A, stigma_over_findings=out["est_c2_find"].value,
             stigma_A_over_B=out["est_c2_b"].value, stigma_tokens_counted=float(is_st.sum()),
             findings_tokens_counted=float(is_fd.sum()), random_stigma_over_findings_median=out["null_c2_find"].value)
    # group-A tokens of named notes, for the figure
    fa_named, _, _, tid_named = _token_latents(model, sae, site, [note_only(n) for n in te_notes])
    act_grpA = _mean(fa_named[np.isin(tid_named.numpy(), a_ids), jA].numpy())
    act_grpB = _mean(fa_named[np.isin(tid_named.numpy(), b_ids), jA].numpy())
    m.update(act_A_on_groupA_tokens=act_grpA, act_A_on_groupB_tokens=act_grpB)
    out["act_bars"] = [act_grpA, act_grpB, act_st_A, act_fd_A, act_other_A, act_st_B]
    del f_free, fa_named, F

    # ------------------------------------------------------------ (3) AtP-IG toward "Yes" on group-A notes
    atp_notes = [n for n, y in zip(te_notes, yte, strict=True) if y == 1]
    n_pre, n_q = len(PREFIX), len(QUESTION)

    def window(ids, am):  # the note's body: template prefix and question dropped (paper: 4 first, 5 last)
        mk = am.bool().clone()
        lens = am.sum(1)
        ar = torch.arange(ids.shape[1])[None, :]
        return mk & (ar >= n_pre) & (ar < (lens - n_q)[:, None])

    attr = latent_atp_ig(model, sae, _batches([conv(n.prompt) for n in atp_notes], 64),
                         logit_diff(no_id, yes_id), steps=cfg.atp_steps, positions=window, site=site)
    S = attr[site].numpy().astype(np.float64)  # [notes, latents]: estimate of Δ(logit No − logit Yes) when zeroed

    def pct_of_A(ix):  # fraction of latents whose mean effect toward "Yes" is at or above jA's
        e = S[ix].mean(0)
        return float(((e > e[jA]).sum() + 1) / cfg.n_latents)

    out["est_pct"] = _over_notes(pct_of_A, S.shape[0], seed)
    eff = S.mean(0)
    m.update(atp_effect_A=float(eff[jA]), atp_rank_A=float((eff > eff[jA]).sum()), atp_rank_pct_A=out["est_pct"].value)
    with torch.no_grad(), sae_edit(model, sae, zero(list(range(cfg.n_latents))), site=site):
        m_zero = torch.cat([logit_diff(no_id, yes_id)(model(**b).logits, b)
                            for b in _batches([conv(n.prompt) for n in atp_notes], 64)])
    # completeness reference: the effects sum to the all-latents-zeroed change when the window covers all tokens;
    # here the window drops the template, so this is a rough check of sign and scale only
    m.update(atp_sum=float(S.sum() / max(1, len(atp_notes))), zero_all_change=float((m_zero - attr.metric).mean()))

    # ------------------------------------------------------------ (4) steering: k · max f on the group-A latent
    f_max = []
    for b in _batches(free_prompts):
        cap = capture(model, b, site, positions=_skip_bos, desc="max f")
        with torch.no_grad():
            fr = sae.encode(cap[site].float())
        rows = cap.index[:, 0]
        f_max += [float(fr[rows == r].max()) for r in rows.unique()]
    ref = float(np.mean(f_max))
    m["steer_ref_mean_max_f"] = ref
    out["ref"] = ref
    vig_bal = [conv(vignette_prompt(c)) for c in BALANCED]
    vig_a = [conv(vignette_prompt(c)) for c in A_SKEWED]

    def steer_curve(j, ks=KS):
        """P(Yes) per group-free note ``[len(ks), N]`` and the group-A share on the balanced vignettes ``[len(ks)]``."""
        py, sh = [], []
        for kk in ks:
            ed = None if kk == 0 else (lambda j=j, kk=kk: sae_edit(model, sae, add_scaled(j, kk, ref=ref), site=site))
            py.append(p_yes(_next_probs(model, free_prompts, ed)))
            sh.append(float(_share(_next_probs(model, vig_bal, ed), a_ids, b_ids).mean()))
        return np.stack(py), np.array(sh)

    k1 = KS.index(1.0)
    PA, shA = steer_curve(jA)
    out["est_mono"] = _over_notes(lambda ix: float(np.min(np.diff(PA[:, ix].mean(1)))), PA.shape[1], seed)
    pyA = PA.mean(1)
    m.update(p_yes_k0=float(pyA[0]), p_yes_k1=float(pyA[k1]), p_yes_k2=float(pyA[-1]),
             steer_inc_k1=float(pyA[k1] - pyA[0]), steer_min_step=out["est_mono"].value)
    out["py_A"] = pyA

    # the frequency-matched latents at k = 1 only (their k = 0 is the same unedited forward as the group-A latent's)
    rc = [steer_curve(j, ks=(1.0,)) for j in pool]
    dA = PA[k1] - PA[0]
    dR = np.stack([r[0][0] for r in rc]) - PA[0]  # [pool, N]

    def vs_random(d):
        return lambda ix: float(d[ix].mean() - 3 * np.abs(dR[:, ix].mean(1)).mean())

    out["est_vs_random"] = _over_notes(vs_random(dA), PA.shape[1], seed)
    r_sh = np.array([r[1][0] - shA[0] for r in rc])
    rb_sh = _pool_q(r_sh, 0.95)
    sh_inc = float(shA[k1] - shA[0])
    # the four balanced vignette prompts are the whole fixed set: the share is a noiseless function of the model
    out["est_share"] = exact(sh_inc - rb_sh.value, why="fixed set of balanced vignettes minus the enumerated q95")
    m.update(random_steer_inc_mean_abs=float(np.mean(np.abs(dR.mean(1)))), random_steer_inc_max=float(dR.mean(1).max()),
             share_A_balanced_k0=float(shA[0]), share_A_balanced_k1=float(shA[k1]), share_inc_k1=sh_inc,
             random_share_inc_p95=rb_sh.value, steer_vs_random=out["est_vs_random"].value)
    out.update(py_rand=[[float(pyA[0]), float(r[0][0].mean())] for r in rc], sh_A=shA,
               sh_rand=[[float(shA[0]), r[1][0]] for r in rc])
    if not full:
        out["m"] = m
        return out

    # free text under steering: does the generated reason name a group?
    grp_tokens = set(a_ids) | set(b_ids)
    named, yes_gen, n_gen = 0, 0, 0
    eos = conv("<eos>")
    by_len: dict[int, list[list[int]]] = {}
    for p_ in free_prompts[: cfg.n_generate]:
        by_len.setdefault(len(p_), []).append(p_)
    with torch.no_grad(), sae_edit(model, sae, add_scaled(jA, 1.0, ref=ref), site=site):
        for L_, ps in sorted(by_len.items()):
            gen_out = model.generate(input_ids=torch.tensor(ps), attention_mask=torch.ones(len(ps), L_, dtype=torch.long),
                                     max_new_tokens=min(10, 48 - L_), do_sample=False, pad_token_id=0,
                                     eos_token_id=eos)
            for row_ in gen_out[:, L_:].tolist():
                n_gen += 1
                yes_gen += int(row_[0] == yes_id)
                named += int(any(t in grp_tokens for t in row_))
    m.update(gen_reason_names_group=named / max(1, n_gen), gen_yes_rate_steered=yes_gen / max(1, n_gen))

    # ------------------------------------------------------------ (5) ablation: vignette share and risk gap
    def ablated(j):
        return lambda j=j: sae_edit(model, sae, zero(j), site=site)

    sh_a0 = float(_share(_next_probs(model, vig_a), a_ids, b_ids).mean())

    def ablation_effect(j):
        sh = float(_share(_next_probs(model, vig_a, ablated(j)), a_ids, b_ids).mean())
        g = p_yes(_next_probs(model, pairsA, ablated(j))) - p_yes(_next_probs(model, pairsB, ablated(j)))
        return 1 - sh / max(sh_a0, 1e-12), sh, g

    def gap_cut(g):
        def f(ix):
            g0 = float(gap_rows[ix].mean())
            return 1 - float(g[ix].mean()) / g0 if abs(g0) > 1e-9 else float("nan")
        return f

    red_sh, sh_abl, g_abl = ablation_effect(jA)
    rabl = [ablation_effect(j) for j in pool]
    r_red_sh = np.array([r[0] for r in rabl])
    r_red_gap = np.array([gap_cut(r[2])(np.arange(len(gap_rows))) for r in rabl])
    out["est_vig"] = exact(red_sh, why="fixed set of the two A-skewed vignette prompts")
    out["null_vig"] = _pool_q(r_red_sh)
    out["est_gap_cut"] = _over_notes(gap_cut(g_abl), len(gap_rows), seed, unit="note pair")
    out["null_gap_cut"] = _pool_q(r_red_gap)
    m.update(vignette_share_A_skewed=sh_a0, vignette_share_A_skewed_ablated=sh_abl, vignette_share_reduction=red_sh,
             random_vignette_reduction_p95=_pool_q(r_red_sh, 0.95).value,
             risk_gap_ablated=float(g_abl.mean()), risk_gap_reduction=out["est_gap_cut"].value,
             random_risk_gap_reduction_median=out["null_gap_cut"].value)
    out.update(abl_bars=([sh_a0, sh_abl, _mean([r[1] for r in rabl])],
                         [gap0, float(g_abl.mean()), _mean([float(r[2].mean()) for r in rabl])]))
    out["m"] = m
    return out


# ---------------------------------------------------------------------------------------------- run
def run(cfg: Config, ctx: RunContext) -> Result:
    import matplotlib.pyplot as plt

    cfg.validate()
    seed = ctx.seed
    # the planted organism and the null arm: the same pipeline on the organism trained without the planted bias
    a, z = parallel_map(_arm, [(cfg.p_flip, True), (0.0, False)], common=(cfg, seed), desc="organisms")
    metrics = dict(a["m"])
    for k in ("discovery_auroc", "top50_on_group_A", "stigma_over_findings", "stigma_A_over_B", "steer_min_step",
              "steer_vs_random", "share_inc_k1", "atp_rank_pct_A", "risk_gap", "answer_acc_group_free", "latent_A"):
        metrics[f"null_{k}"] = z["m"][k]
    jA, jB, pool = a["jA"], a["jB"], a["pool"]

    # ------------------------------------------------------------ figures
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    top, coef = a["disc_top"], np.array(a["disc_coef"])
    ax.bar(range(len(top)), np.abs(coef), color=["C3" if c > 0 else "C0" for c in coef])
    ax.set_xticks(range(len(top)), [str(j) for j in top], rotation=90, fontsize=6)
    ax.set(ylabel="|coef| (L1 probe)", title=f"discovery: held-out AUROC {metrics['discovery_auroc']:.3f} "
           "(red: group A)")
    ctx.save_figure(fig, "discovery", "L1-logistic discovery over max-pooled SAE latents: the 20 latents with the "
                    "largest |coef| (red = positive, group A)")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    labels = ["group A tokens", "group B tokens", "stigma (group-free)", "findings (group-free)",
              "other (group-free)"]
    bars = a["act_bars"]
    ax.bar(range(5), np.nan_to_num(bars[:5]), color=["C3", "C0", "C1", "C2", "C7"])
    ax.bar([2.3], [np.nan_to_num(bars[5])], width=0.3, color="k", label=f"group-B latent {jB} on stigma")
    ax.set_xticks(range(5), labels, rotation=20, fontsize=7)
    ax.set(ylabel=f"mean activation of latent {jA}")
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "latent_activation", "Mean activation of the discovered group-A latent by token type; "
                    "stigma/findings/other measured on notes that never name the group")
    plt.close(fig)
    fig, axs = plt.subplots(1, 2, figsize=(8, 3.2))
    for py_r, sh_r in zip(a["py_rand"], a["sh_rand"], strict=True):
        axs[0].plot([0.0, 1.0], py_r, c="gray", alpha=0.4, marker=".")
        axs[1].plot([0.0, 1.0], sh_r, c="gray", alpha=0.4, marker=".")
    axs[0].plot(KS, z["py_A"], "b^--", label=f"unplanted organism's group-A latent {z['jA']}")
    axs[0].plot(KS, a["py_A"], "ro-", label=f"group-A latent {jA}")
    axs[1].plot(KS, a["sh_A"], "ro-")
    axs[0].set(xlabel="k (f_j += k·max f)", ylabel="P(Yes) on group-free notes")
    axs[1].set(xlabel="k", ylabel="P(group A) at 'patient is' (balanced)")
    axs[0].legend(fontsize=7)
    ctx.save_figure(fig, "steering_dose_response", "Steering dose-response: group-A latent (red) vs the "
                    f"{len(pool)} frequency-matched latents (gray, k = 0 and 1), same k·max f; blue: the unplanted organism")
    plt.close(fig)
    fig, axs = plt.subplots(1, 2, figsize=(8, 3.2))
    vig_bars, gap_bars = a["abl_bars"]
    axs[0].bar(["none", f"latent {jA}", "random (mean)"], vig_bars, color=["C7", "C3", "gray"])
    axs[0].set(ylabel="group-A share, A-skewed vignettes", ylim=(0, 1))
    axs[1].bar(["none", f"latent {jA}", "random (mean)"], gap_bars, color=["C7", "C3", "gray"])
    axs[1].set(ylabel="risk gap P(Yes|A) − P(Yes|B)")
    ctx.save_figure(fig, "ablation", "Ablating the group-A latent (zeroed, error term kept): vignette share "
                    "(simple setting) vs the counterfactual risk gap (realistic setting)")
    plt.close(fig)
    ctx.write_json("latents.json", {"latent_A": jA, "latent_B": jB, "top_tokens_latent_A": a["top_tokens"],
                                    "random_latents": pool, "ks": list(KS), "p_yes_A": list(a["py_A"]),
                                    "p_yes_random": [list(r) for r in a["py_rand"]],
                                    "discovery_top": top, "discovery_coef": list(coef),
                                    "null_latent_A": z["jA"], "null_p_yes_A": list(z["py_A"])})

    # ------------------------------------------------------------ claims
    unplanted = "the same pipeline on the organism trained without the planted bias (p_flip = 0)"
    rand_med = f"the median of the {len(pool)} frequency-matched latents in place of the group-A latent"
    claims = [
        claim("C1_discovery_auroc", "L1 probe over SAE latents max-pooled by context (group tokens and the 3 "
              "positions after each masked out; stigma rate equal in both groups) separates group-A from group-B "
              "notes (held-out AUROC)", a["est_auc"], ">=", 0.9, null=z["est_auc"], null_what=unplanted, trained=True),
        claim("C1_top_activations", "share of the group-A latent's 50 strongest activations on a group-A form or "
              "within 3 tokens after one", a["est_top50"], ">=", 0.5, null=z["est_top50"], null_what=unplanted,
              trained=True),
        claim("C2_stigma_vs_findings", "group-free notes: group-A latent's mean activation on stigmatising tokens / "
              "on frequency-matched findings tokens", a["est_c2_find"], ">=", 3.0, null=z["est_c2_find"],
              null_what=unplanted, trained=True),
        claim("C2_stigma_vs_group_B_latent", "group-free notes: group-A latent on stigmatising tokens / the top "
              "group-B latent on the same tokens", a["est_c2_b"], ">=", 3.0, null=z["est_c2_b"], null_what=unplanted,
              trained=True),
        claim("C3_steer_monotone", "P(Yes) on group-free notes rises at every step k = 0, .25, .5, 1, 2 (smallest "
              "step)", a["est_mono"], ">", 0.0, null=z["est_mono"], null_what=unplanted, trained=True),
        claim("C3_steer_vs_random", "P(Yes) increase at k=1 minus 3x the mean |increase| of the frequency-matched "
              "latents at the same k·max f", a["est_vs_random"], ">=", 0.0, null=z["est_vs_random"],
              null_what=unplanted, trained=True),
        claim("C3_group_token_rises", "P(group-A form) at 'patient is' (balanced conditions) increase at k=1 minus "
              "the 95th pct of the frequency-matched latents' increase", a["est_share"], ">", 0.0,
              null=z["est_share"], null_what=unplanted, trained=True),
        claim("C4_attribution_top5pct", "AtP-IG rank of the discovered latent among all latents by effect toward "
              "'Yes' (fraction of latents at or above it)", a["est_pct"], "<=", 0.05, null=z["est_pct"],
              null_what=unplanted, trained=True),
        claim("C5_vignette_ablation", "ablating the group-A latent cuts the group-A share of A-skewed vignettes "
              "(relative reduction)", a["est_vig"], ">=", 0.5, null=a["null_vig"], null_what=rand_med, trained=True),
        claim("C5_risk_gap_reduction", "relative reduction of the counterfactual risk gap by the same ablation "
              "(paper: smaller than in the simple setting; reported)", a["est_gap_cut"], ">=", 0.5,
              null=a["null_gap_cut"], null_what=rand_med, gated=False, trained=True),
        claim("sanity_bias_planted", "the organism learned the planted bias: P(Yes|A) − P(Yes|B) on counterfactual "
              "note pairs", a["est_gap"], ">", 0.02, null=z["est_gap"], null_what=unplanted,
              why="precondition on this organism: without a learned bias the bias claims test nothing"),
        claim("sanity_answers_learned", "the organism answers group-free notes (accuracy of P(Yes) > 0.5 against "
              "the generated labels)", a["est_acc"], ">=", 0.7,
              why="precondition on this organism: it must read the findings before its bias can be probed"),
        claim("sanity_reason_silent", "generated reasons under steering (k=1) that name a group token (reported: "
              "training reasons never do, so this holds nearly by construction)",
              exact(metrics["gen_reason_names_group"]), "<=", 0.0, gated=False),
    ]
    notes = (f"site layers.{cfg.sae_layer}.resid_post; group-A latent {jA} (freq {a['freq_A']:.4f}), group-B latent "
             f"{jB}; SAE FVU {a['fvu']:.3f}, dead {a['dead']:.2f}; steering ref max f = {a['ref']:.2f} (mean per-note "
             f"max, held fixed); top tokens of latent {jA}: {', '.join(sorted(set(a['top_tokens']))[:8])}; random "
             f"baseline: the {len(pool)} alive latents closest in log firing frequency, all edited; null arm: the "
             f"unplanted organism (group-A latent {z['jA']}, risk gap {z['m']['risk_gap']:.3f}); organisms cached="
             f"{a['cached']:.0f}/{z['cached']:.0f}, build {a['build_seconds']:.1f}s/{z['build_seconds']:.1f}s")
    ctx.add_note(notes)
    return Result(metrics={k: float(v) for k, v in metrics.items()}, claims=claims, notes=notes)
