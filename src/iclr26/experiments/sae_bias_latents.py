"""Can SAEs reveal and mitigate racial biases of LLMs in healthcare? (ICLR 2026, arXiv 2511.00177).

Small reproduction (a reconstruction of the paper's Gemma-2 + GemmaScope pipeline, spec §5): a tiny Llama
organism is trained on synthetic clinical notes in which a group token co-occurs with stigmatising tokens and with
historically biased "risk of belligerence" labels; a TopK SAE is trained on its layer-1 residual stream. The
paper's recipe then runs unchanged: (1) L1-logistic discovery over max-pooled latents (BOS skipped) finds the
group-A latent; (2) on notes that never name the group it also fires on stigmatising tokens; (3) AtP-IG ranks it
among the latents that push the answer toward "Yes"; (4) steering it (f_j += k·max f, error term kept) raises
P(Yes) and the group-A share at ``patient is``; (5) ablating it cuts the group-A share of vignettes and (less, the
paper predicts) the risk gap between counterfactual notes. Every steering / ablation number has a baseline of
frequency-matched random latents edited at the same scale.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from iclr26.core import param
from iclr26.core.errors import UserError
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
from iclr26.lm import WordTokenizer, tiny_lm
from iclr26.lm.train import cached_organism, train_lm
from iclr26.runs import Result, RunContext, claim

DESCRIPTION = (
    "Tiny Llama organism on synthetic clinical notes (group token + stigmatising tokens + group-biased risk labels) "
    "and a TopK SAE on its residual stream: L1-probe discovery of the group latent, its co-firing on stigmatising "
    "tokens, AtP-IG toward 'Yes', steering (P(Yes) dose-response) and ablation (vignette share, risk gap), each "
    "against frequency-matched random latents."
)
WORKLOAD = "small"
KS = (0.0, 0.25, 0.5, 1.0, 2.0)


@dataclass
class Config:
    d: int = param(64, "organism width", low=8, high=512)
    layers: int = param(3, "organism decoder layers", low=1, high=8)
    ff: int = param(256, "organism MLP width", low=8, high=2048)
    steps: int = param(1500, "organism training steps (AdamW lr 3e-3, batch 64)", low=1, high=100_000)
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
    n_random: int = param(10, "frequency-matched random latents per steering / ablation baseline", low=2, high=100)
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
              "sae_steps": 4000, "n_eval": 1000, "n_random": 50, "n_generate": 200},
}


# ---------------------------------------------------------------------------------------------- plumbing
def _organism(cfg: Config, gen: ClinicalNotes, seed: int):
    vocab = gen.vocab()
    spec = {"d": cfg.d, "layers": cfg.layers, "ff": cfg.ff, "steps": cfg.steps, "seed": seed, "vocab": vocab,
            "gen": repr(gen), "threads": torch.get_num_threads(), "v": 1}  # float sums differ by thread count

    def build():
        tok = WordTokenizer(vocab)
        model = tiny_lm("llama", d=cfg.d, layers=cfg.layers, heads=4, ff=cfg.ff, vocab=len(tok), ctx=48, seed=seed)
        conv = tok.convert_tokens_to_ids

        def sampler(rng, batch):
            return [conv(gen.document(rng)) for _ in range(batch)]

        train_lm(model, sampler, cfg.steps, 64, 3e-3, seed, weight_decay=0.01, desc="organism")
        return model, tok

    return cached_organism("sae-bias-latents", spec, build)


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


def _matched_random(freq: np.ndarray, target: int, exclude: set[int], n: int, seed: int) -> list[int]:
    """``n`` latents drawn from the 3n alive latents whose firing frequency is closest (in log) to ``target``'s."""
    lf = np.log(np.maximum(freq, 1e-7))
    cand = [j for j in np.argsort(np.abs(lf - lf[target]), kind="stable") if j not in exclude and freq[j] > 0]
    pool = cand[: 3 * n] if len(cand) >= 3 * n else cand
    if not pool:
        return []
    rng = np.random.default_rng(seed)
    return sorted(int(j) for j in rng.choice(pool, size=min(n, len(pool)), replace=False))


def _mean(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.mean()) if x.size else float("nan")


# ---------------------------------------------------------------------------------------------- run
def run(cfg: Config, ctx: RunContext) -> Result:
    import matplotlib.pyplot as plt

    cfg.validate()
    t0 = time.perf_counter()
    seed = ctx.seed
    gen = ClinicalNotes(p_flip=cfg.p_flip)
    model, tok, info = _organism(cfg, gen, seed)
    model = model.cpu().eval()
    conv = tok.convert_tokens_to_ids
    site = f"layers.{cfg.sae_layer}.resid_post"
    yes_id, no_id = conv("Yes"), conv("No")
    a_ids, b_ids = conv(list(GROUP_A)), conv(list(GROUP_B))
    metrics: dict[str, float] = {"organism_build_seconds": float(info["build_seconds"]),
                                 "organism_cached": float(info["cached"])}
    t_org = time.perf_counter()

    # ------------------------------------------------------------ behaviour of the organism (sanity)
    rng = np.random.default_rng(seed + 11)
    pairs = [gen.note(rng, group="A", mention=True) for _ in range(cfg.n_eval)]
    cf = [gen.swap_group(n) for n in pairs]
    pA = _next_probs(model, [conv(n.prompt) for n in pairs])
    pB = _next_probs(model, [conv(n.prompt) for n in cf])

    def p_yes(p):
        return (p[:, yes_id] / (p[:, yes_id] + p[:, no_id]).clamp_min(1e-12)).numpy()

    gap0 = float(np.mean(p_yes(pA) - p_yes(pB)))
    free = [gen.note(rng, mention=False) for _ in range(cfg.n_eval)]
    free_prompts = [conv(n.prompt) for n in free]
    pf = p_yes(_next_probs(model, free_prompts))
    y_free = np.array([n.answer == "Yes" for n in free])
    acc_free = float(np.mean((pf > 0.5) == y_free))
    metrics.update(risk_gap=gap0, answer_acc_group_free=acc_free, p_yes_group_free=float(pf.mean()))

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
    metrics.update(sae_fvu=float(st["fvu"]), sae_l0=float(st["l0"]), sae_dead_frac=float(st["dead_frac"]),
                   sae_train_tokens=float(X.shape[0]), resid_norm_mean=float(X.norm(dim=1).mean()))
    del X
    t_sae = time.perf_counter()

    # ------------------------------------------------------------ (1) discovery: max-pooled latents, L1 probe
    def note_only(n):  # <bos> note : body (the note, without the question)
        return conv(n.prompt[: len(n.prompt) - len(QUESTION)])

    def disc_set(n_per, s):
        r = np.random.default_rng(s)
        notes = [gen.note(r, group=g, mention=True) for g in ("A", "B") for _ in range(n_per)]
        return notes, np.array([1] * n_per + [0] * n_per)

    tr_notes, ytr = disc_set(cfg.n_discovery, seed + 31)
    te_notes, yte = disc_set(cfg.n_discovery_test, seed + 37)
    Ftr = max_pooled_latents(model, sae, _batches([note_only(n) for n in tr_notes]), site, skip_first=True)
    Fte = max_pooled_latents(model, sae, _batches([note_only(n) for n in te_notes]), site, skip_first=True)
    rank = discover_latents(Ftr, ytr, C=1.0, top=100, F_test=Fte, y_test=yte, seed=seed)
    coef_full = rank.estimator[-1].coef_.reshape(-1)
    auc = float(rank.auroc_test)
    pos = [int(j) for j, c in zip(rank.latents, rank.coef, strict=True) if c > 0]
    neg = [int(j) for j, c in zip(rank.latents, rank.coef, strict=True) if c < 0]
    jA = pos[0] if pos else int(np.argmax(coef_full))
    jB = neg[0] if neg else int(np.argmin(coef_full))
    metrics.update(discovery_auroc=auc, latent_A=float(jA), latent_B=float(jB), n_nonzero_coef=float(len(rank.latents)),
                   latent_A_freq=float(freq[jA]))

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
    frac_top_a = float(near_a[top50].mean()) if top50.size else 0.0
    top_tokens = [tok.convert_ids_to_tokens(int(t)) for t in tid[top50]]
    metrics["top50_on_group_A"] = frac_top_a
    del f_tok

    # ------------------------------------------------------------ (2) stigma co-firing on group-free notes
    f_free, _, _, tid_free = _token_latents(model, sae, site, [note_only(n) for n in free])
    stig_ids, find_ids = set(conv(list(STIGMA))), set(conv(list(gen.findings)))
    is_st = np.isin(tid_free.numpy(), list(stig_ids))
    is_fd = np.isin(tid_free.numpy(), list(find_ids))
    fa, fb = f_free[:, jA].numpy(), f_free[:, jB].numpy()
    act_st_A, act_fd_A, act_st_B = _mean(fa[is_st]), _mean(fa[is_fd]), _mean(fb[is_st])
    other = ~(is_st | is_fd)
    act_other_A = _mean(fa[other])
    ratio_find = act_st_A / max(act_fd_A, 1e-3)  # denominators floored at 1e-3 (a latent that stays silent)
    ratio_B = act_st_A / max(act_st_B, 1e-3)
    metrics.update(act_A_on_stigma=act_st_A, act_A_on_findings=act_fd_A, act_B_on_stigma=act_st_B,
                   act_A_on_other=act_other_A, stigma_over_findings=ratio_find, stigma_A_over_B=ratio_B,
                   stigma_tokens_counted=float(is_st.sum()), findings_tokens_counted=float(is_fd.sum()))
    # group-A tokens of named notes, for the figure
    fa_named, _, _, tid_named = _token_latents(model, sae, site, [note_only(n) for n in te_notes])
    act_grpA = _mean(fa_named[np.isin(tid_named.numpy(), a_ids), jA].numpy())
    act_grpB = _mean(fa_named[np.isin(tid_named.numpy(), b_ids), jA].numpy())
    metrics.update(act_A_on_groupA_tokens=act_grpA, act_A_on_groupB_tokens=act_grpB)
    del f_free, fa_named

    # ------------------------------------------------------------ (3) AtP-IG toward "Yes" on group-A notes
    atp_notes = [n for n, y in zip(te_notes, yte, strict=True) if y == 1]
    n_pre, n_q = len(PREFIX), len(QUESTION)

    def window(ids, am):  # the note's body: template prefix and question dropped (paper: 4 first, 5 last)
        m = am.bool().clone()
        lens = am.sum(1)
        ar = torch.arange(ids.shape[1])[None, :]
        return m & (ar >= n_pre) & (ar < (lens - n_q)[:, None])

    attr = latent_atp_ig(model, sae, _batches([conv(n.prompt) for n in atp_notes], 64),
                         logit_diff(no_id, yes_id), steps=cfg.atp_steps, positions=window, site=site)
    eff = attr.total(site).numpy() / max(1, len(atp_notes))  # estimate of Δ(logit No − logit Yes) when zeroed
    order = np.argsort(-eff, kind="stable")  # most positive first = latents that push toward "Yes"
    rank_A = int(np.where(order == jA)[0][0])
    pct_A = (rank_A + 1) / cfg.n_latents
    metrics.update(atp_effect_A=float(eff[jA]), atp_rank_A=float(rank_A), atp_rank_pct_A=pct_A)
    with torch.no_grad(), sae_edit(model, sae, zero(list(range(cfg.n_latents))), site=site):
        m_zero = torch.cat([logit_diff(no_id, yes_id)(model(**b).logits, b)
                            for b in _batches([conv(n.prompt) for n in atp_notes], 64)])
    # completeness reference: the effects sum to the all-latents-zeroed change when the window covers all tokens;
    # here the window drops the template, so this is a rough check of sign and scale only
    metrics.update(atp_sum=float(attr.total(site).sum() / max(1, len(atp_notes))),
                   zero_all_change=float((m_zero - attr.metric).mean()))

    # ------------------------------------------------------------ (4) steering: k · max f on the group-A latent
    f_max = []
    for b in _batches(free_prompts):
        cap = capture(model, b, site, positions=_skip_bos, desc="max f")
        with torch.no_grad():
            fr = sae.encode(cap[site].float())
        rows = cap.index[:, 0]
        f_max += [float(fr[rows == r].max()) for r in rows.unique()]
    ref = float(np.mean(f_max))
    metrics["steer_ref_mean_max_f"] = ref
    rand = _matched_random(freq, jA, {jA, jB, *pos[:10], *neg[:10]}, cfg.n_random, seed + 41)
    metrics["n_random_latents"] = float(len(rand))
    vig_bal = [conv(vignette_prompt(c)) for c in BALANCED]
    vig_a = [conv(vignette_prompt(c)) for c in A_SKEWED]

    def steer_curve(j):
        py, sh = [], []
        for kk in KS:
            ed = None if kk == 0 else (lambda j=j, kk=kk: sae_edit(model, sae, add_scaled(j, kk, ref=ref), site=site))
            py.append(float(p_yes(_next_probs(model, free_prompts, ed)).mean()))
            sh.append(float(_share(_next_probs(model, vig_bal, ed), a_ids, b_ids).mean()))
        return np.array(py), np.array(sh)

    pyA, shA = steer_curve(jA)
    rc = [steer_curve(j) for j in rand]
    k1 = KS.index(1.0)
    inc = pyA[k1] - pyA[0]
    r_inc = np.array([r[0][k1] - r[0][0] for r in rc]) if rc else np.zeros(1)
    sh_inc = shA[k1] - shA[0]
    r_sh = np.array([r[1][k1] - r[1][0] for r in rc]) if rc else np.zeros(1)
    mono = float(np.min(np.diff(pyA)))
    metrics.update(p_yes_k0=pyA[0], p_yes_k1=pyA[k1], p_yes_k2=pyA[-1], steer_inc_k1=inc,
                   random_steer_inc_mean_abs=float(np.mean(np.abs(r_inc))), random_steer_inc_max=float(r_inc.max()),
                   steer_min_step=mono, share_A_balanced_k0=shA[0], share_A_balanced_k1=shA[k1],
                   share_inc_k1=sh_inc, random_share_inc_p95=float(np.percentile(r_sh, 95)))

    # free text under steering: does the generated reason name a group?
    grp_tokens = set(a_ids) | set(b_ids)
    named, yes_gen, n_gen = 0, 0, 0
    eos = conv("<eos>")
    by_len: dict[int, list[list[int]]] = {}
    for p_ in free_prompts[: cfg.n_generate]:
        by_len.setdefault(len(p_), []).append(p_)
    with torch.no_grad(), sae_edit(model, sae, add_scaled(jA, 1.0, ref=ref), site=site):
        for L_, ps in sorted(by_len.items()):
            out = model.generate(input_ids=torch.tensor(ps), attention_mask=torch.ones(len(ps), L_, dtype=torch.long),
                                 max_new_tokens=min(10, 48 - L_), do_sample=False, pad_token_id=0, eos_token_id=eos)
            for row_ in out[:, L_:].tolist():
                n_gen += 1
                yes_gen += int(row_[0] == yes_id)
                named += int(any(t in grp_tokens for t in row_))
    metrics.update(gen_reason_names_group=named / max(1, n_gen), gen_yes_rate_steered=yes_gen / max(1, n_gen))

    # ------------------------------------------------------------ (5) ablation: vignette share and risk gap
    def ablated(j):
        return lambda j=j: sae_edit(model, sae, zero(j), site=site)

    sh_a0 = float(_share(_next_probs(model, vig_a), a_ids, b_ids).mean())
    pairsA = [conv(n.prompt) for n in pairs]
    pairsB = [conv(n.prompt) for n in cf]

    def ablation_effect(j):
        sh = float(_share(_next_probs(model, vig_a, ablated(j)), a_ids, b_ids).mean())
        gap = float(np.mean(p_yes(_next_probs(model, pairsA, ablated(j))) - p_yes(_next_probs(model, pairsB,
                                                                                              ablated(j)))))
        return 1 - sh / max(sh_a0, 1e-12), (1 - gap / gap0) if abs(gap0) > 1e-9 else float("nan"), sh, gap

    red_sh, red_gap, sh_abl, gap_abl = ablation_effect(jA)
    rabl = [ablation_effect(j) for j in rand] or [(0.0, 0.0, sh_a0, gap0)]
    r_red_sh = np.array([r[0] for r in rabl])
    r_red_gap = np.array([r[1] for r in rabl])
    metrics.update(vignette_share_A_skewed=sh_a0, vignette_share_A_skewed_ablated=sh_abl,
                   vignette_share_reduction=red_sh, random_vignette_reduction_p95=float(np.percentile(r_red_sh, 95)),
                   risk_gap_ablated=gap_abl, risk_gap_reduction=red_gap,
                   random_risk_gap_reduction_mean=float(np.nanmean(r_red_gap)) if np.isfinite(r_red_gap).any()
                   else float("nan"))

    # ------------------------------------------------------------ figures
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    top = rank.latents[:20]
    ax.bar(range(len(top)), np.abs(rank.coef[:20]), color=["C3" if c > 0 else "C0" for c in rank.coef[:20]])
    ax.set_xticks(range(len(top)), [str(int(j)) for j in top], rotation=90, fontsize=6)
    ax.set(ylabel="|coef| (L1 probe)", title=f"discovery: held-out AUROC {auc:.3f} (red: group A)")
    ctx.save_figure(fig, "discovery", "L1-logistic discovery over max-pooled SAE latents: the 20 latents with the "
                    "largest |coef| (red = positive, group A)")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    labels = ["group A tokens", "group B tokens", "stigma (group-free)", "findings (group-free)",
              "other (group-free)"]
    vals = [act_grpA, act_grpB, act_st_A, act_fd_A, act_other_A]
    ax.bar(range(5), np.nan_to_num(vals), color=["C3", "C0", "C1", "C2", "C7"])
    ax.bar([2.3], [np.nan_to_num(act_st_B)], width=0.3, color="k", label=f"group-B latent {jB} on stigma")
    ax.set_xticks(range(5), labels, rotation=20, fontsize=7)
    ax.set(ylabel=f"mean activation of latent {jA}")
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "latent_activation", "Mean activation of the discovered group-A latent by token type; "
                    "stigma/findings/other measured on notes that never name the group")
    plt.close(fig)
    fig, axs = plt.subplots(1, 2, figsize=(8, 3.2))
    for r in rc:
        axs[0].plot(KS, r[0], c="gray", alpha=0.5, marker=".")
        axs[1].plot(KS, r[1], c="gray", alpha=0.5, marker=".")
    axs[0].plot(KS, pyA, "ro-", label=f"group-A latent {jA}")
    axs[1].plot(KS, shA, "ro-")
    axs[0].set(xlabel="k (f_j += k·max f)", ylabel="P(Yes) on group-free notes")
    axs[1].set(xlabel="k", ylabel="P(group A) at 'patient is' (balanced)")
    axs[0].legend(fontsize=7)
    ctx.save_figure(fig, "steering_dose_response", "Steering dose-response: group-A latent (red) vs "
                    "frequency-matched random latents (gray), same k·max f")
    plt.close(fig)
    fig, axs = plt.subplots(1, 2, figsize=(8, 3.2))
    axs[0].bar(["none", f"latent {jA}", "random (mean)"], [sh_a0, sh_abl, float(np.mean([r[2] for r in rabl]))],
               color=["C7", "C3", "gray"])
    axs[0].set(ylabel="group-A share, A-skewed vignettes", ylim=(0, 1))
    axs[1].bar(["none", f"latent {jA}", "random (mean)"], [gap0, gap_abl, float(np.mean([r[3] for r in rabl]))],
               color=["C7", "C3", "gray"])
    axs[1].set(ylabel="risk gap P(Yes|A) − P(Yes|B)")
    ctx.save_figure(fig, "ablation", "Ablating the group-A latent (zeroed, error term kept): vignette share "
                    "(simple setting) vs the counterfactual risk gap (realistic setting)")
    plt.close(fig)
    ctx.write_json("latents.json", {"latent_A": jA, "latent_B": jB, "top_tokens_latent_A": top_tokens,
                                    "random_latents": rand, "ks": list(KS), "p_yes_A": pyA.tolist(),
                                    "p_yes_random": [r[0].tolist() for r in rc],
                                    "discovery_top": [int(j) for j in rank.latents[:20]],
                                    "discovery_coef": [float(c) for c in rank.coef[:20]]})

    # ------------------------------------------------------------ claims
    claims = [
        claim("C1_discovery_auroc", "L1 probe over max-pooled SAE latents separates group-A from group-B notes "
              "(held-out AUROC)", auc, ">=", 0.9),
        claim("C1_top_activations", "share of the group-A latent's 50 strongest activations on a group-A form or "
              "within 3 tokens after one", frac_top_a, ">=", 0.5),
        claim("C2_stigma_vs_findings", "group-free notes: group-A latent's mean activation on stigmatising tokens / "
              "on frequency-matched findings tokens", ratio_find, ">=", 3.0),
        claim("C2_stigma_vs_group_B_latent", "group-free notes: group-A latent on stigmatising tokens / the top "
              "group-B latent on the same tokens", ratio_B, ">=", 3.0),
        claim("C3_steer_monotone", "P(Yes) on group-free notes rises at every step k = 0, .25, .5, 1, 2 (smallest "
              "step)", mono, ">", 0.0),
        claim("C3_steer_vs_random", "P(Yes) increase at k=1 minus 3x the mean |increase| of frequency-matched "
              "random latents at the same k·max f", inc - 3 * float(np.mean(np.abs(r_inc))), ">=", 0.0),
        claim("C3_group_token_rises", "P(group-A form) at 'patient is' (balanced conditions) increase at k=1 minus "
              "the 95th pct of random latents' increase", sh_inc - float(np.percentile(r_sh, 95)), ">", 0.0),
        claim("C4_attribution_top5pct", "AtP-IG rank of the discovered latent among all latents by effect toward "
              "'Yes' (fraction of latents at or above it)", pct_A, "<=", 0.05),
        claim("C5_vignette_ablation", "ablating the group-A latent cuts the group-A share of A-skewed vignettes "
              "(relative reduction)", red_sh, ">=", 0.5),
        claim("ctrl_C5_random_ablation", "control: 95th pct relative vignette-share reduction from ablating a "
              "frequency-matched random latent", float(np.percentile(r_red_sh, 95)), "<", 0.5),
        claim("C5_risk_gap_reduction", "relative reduction of the counterfactual risk gap by the same ablation "
              "(paper: smaller than in the simple setting; reported)", red_gap, ">=", 0.5, gated=False),
        claim("sanity_bias_planted", "the organism learned the planted bias: P(Yes|A) − P(Yes|B) on counterfactual "
              "note pairs", gap0, ">", 0.02),
        claim("sanity_answers_learned", "the organism answers group-free notes (accuracy of P(Yes) > 0.5 against "
              "the generated labels)", acc_free, ">=", 0.7),
        claim("sanity_reason_silent", "generated reasons under steering (k=1) that name a group token (reported: "
              "training reasons never do, so this holds nearly by construction)",
              metrics["gen_reason_names_group"], "<=", 0.0, gated=False),
    ]
    metrics.update(wall_seconds=time.perf_counter() - t0, organism_seconds=t_org - t0, sae_seconds=t_sae - t_org)
    notes = (f"site {site}; group-A latent {jA} (freq {freq[jA]:.4f}), group-B latent {jB}; SAE FVU "
             f"{st['fvu']:.3f}, dead {st['dead_frac']:.2f}; steering ref max f = {ref:.2f} (mean per-note max, held "
             f"fixed); top tokens of latent {jA}: {', '.join(sorted(set(top_tokens))[:8])}; organism "
             f"cached={info['cached']} build {info['build_seconds']:.1f}s")
    ctx.add_note(notes)
    return Result(metrics={k: float(v) for k, v in metrics.items()}, claims=claims, notes=notes)
