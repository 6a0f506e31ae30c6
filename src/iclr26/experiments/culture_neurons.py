"""Neuron-Level Analysis of Cultural Understanding in Large Language Models (ICLR 2026, arXiv 2510.08284).

Default: CULNIG on Gemma 3 270M, no training. Units (18 layers of gate and q/k/v channels) are scored with
p · max_t a ⊙ ∂p/∂a on cloze questions about country capitals (the neuron split), minus a control with the country
removed and the top 1 % on reading passages that merely name countries; the culture-general units are zeroed and
accuracy is read on held-out country facts (currencies, languages), on frame-matched non-cultural facts and on
antonyms, against 20 equal-count random unit sets. ``model=organism`` runs the full pipeline (culture-specific units,
sibling countries, fine-tuning in the richest vs poorest layer) on a tiny Llama trained on 16 synthetic
countries' facts (12 topics, 192 facts) as multiple-choice questions; ``real_format=letter`` asks the paper's
lettered MCQs, which the 270M base model answers at chance.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from iclr26.core import param
from iclr26.core.errors import UserError
from iclr26.core.progress import progress
from iclr26.data.culture import (
    LETTERS,
    CultureWorld,
    antonym_cloze,
    country_cloze,
    country_mcqs,
    country_reading,
    encode_items,
    general_cloze,
    number_mcqs,
    reading_cloze,
)
from iclr26.interp.unit_scores import (
    edit_unit_set,
    random_units,
    select_general,
    select_specific,
    unit_kind,
    unit_scores,
    unit_sites,
)
from iclr26.lm.train import Stage, organism_config, train_lm, train_organism
from iclr26.runs import Result, RunContext, claim
from iclr26.stats import Est, bootstrap, cluster_bootstrap, mean_over, random_baseline

DESCRIPTION = (
    "Culture neurons (CULNIG) on Gemma 3 270M: p * max_t(a * dp/da) unit scores on gate and q/k/v channels, "
    "culture-general selection with the country-removed control and the reading-task filter, and suppression "
    "against 20 equal-count random unit sets on held-out country facts, frame-matched non-cultural facts and "
    "antonyms. The organism path (model=organism) adds culture-specific units and layer fine-tuning."
)
WORKLOAD = "small"
HEADLINE = "C1_selective"
# the default reads a pretrained model (nothing trained, one run); the organism path at the paper preset trains
# three organisms
SEEDS = {"smoke": 1, "default": 1, "paper": 3}
EXPECTED: dict[str, Any] = {
    "C1_selective": ("not held", "0.000 [-0.124, 0.118] over 49 countries and 120 non-cultural facts: the units "
                     "cost country facts (0.167) and non-cultural facts (0.167) alike"),
    "C1_cultural_drop": ("inconclusive", "0.167 [0.081, 0.253] over 49 countries straddles 0.15 (random sets: 0.001)"),
    "C1_above_random": "held",
    "C1_nlu_kept": ("not held", "antonyms lose 0.20 [0.075, 0.325] (random sets 0.0025)"),
    "sanity_R_clean_above_chance": "held",
    "sanity_R_general_known": "held",
}
RC_COUNTRIES = ("China", "Indonesia", "Iran", "Mexico", "South Korea", "Spain", "the United Kingdom",
                "the United States")


@dataclass
class Config(organism_config(d=64, layers=4, heads=4, ff=512, steps=3000, lr=3e-3, batch=256, weight_decay=0.01,
                             limits={"layers": {"low": 2, "high": 12, "doc": "organism decoder layers (the "
                                                "fine-tuning comparison needs >= 2)"},
                                     "ff": {"doc": "MLP width = gate channels per layer"}})):
    n_countries: int = param(16, "synthetic countries (even: sibling pairs)", low=4, high=32)
    n_topics: int = param(12, "topics per country (even: half scoring split, half test split); distinct facts = "
                          "countries x topics", low=2, high=12)
    n_values: int = param(8, "candidate values per topic", low=4, high=32)
    share: float = param(0.6, "fraction of topics on which sibling countries share the value", low=0.0, high=1.0)
    n_score_per: int = param(4, "scoring: MCQ shuffles per (country, neuron-split topic)", low=1, high=100)
    n_reading: int = param(8, "scoring: reading-task items per country", low=1, high=200)
    n_eval_per: int = param(10, "evaluation: MCQ shuffles per (country, test topic)", low=1, high=200)
    n_nlu: int = param(200, "evaluation: items per NLU task", low=4, high=5000)
    top_mlp: float = param(0.01, "culture-general: top fraction of MLP units", low=0.0, high=1.0, low_open=True)
    top_attn: float = param(0.002, "culture-general: top fraction of attention units", low=0.0, high=1.0,
                            low_open=True)
    reading_top: float = param(0.01, "reading-task filter: drop units in this top fraction by reading score",
                               low=0.0, high=1.0, low_open=True)
    top_specific: float = param(0.003, "culture-specific: top fraction of all units per country", low=0.0, high=1.0,
                                low_open=True)
    z_min: float = param(0.5, "culture-specific: minimum z-score across countries", low=-3.0, high=3.0)
    sens_factor: float = param(3.0, "sensitivity run (reported only): selection fractions times this (capped at 1)",
                               low=1.0, high=100.0)
    n_random: int = param(100, "random unit sets of equal count (>= 100: their 95th percentile is the baseline)",
                          low=100, high=5000)
    ft_steps: int = param(1000, "fine-tuning steps on the held-back NLU task (min; batch 32)", low=1, high=10_000)
    ft_lr: float = param(5e-3, "fine-tuning learning rate", low=0.0, high=0.01, low_open=True)
    ft_seeds: int = param(2, "fine-tuning seeds per arm", low=1, high=10)
    model: str = param("gemma-3-270m", "gemma-3-270m: scoring, selection and suppression vs random units on Gemma 3 "
                       "270M's country facts (the default reproduction, no training); organism: the trained tiny "
                       "Llama with the full CULNIG pipeline (specific units, siblings, fine-tuning)",
                       choices=["organism", "gemma-3-270m"])
    real_max_items: int = param(1000, "real-model path: at most this many items per relation", low=4, high=1000)
    real_n_random: int = param(20, "real-model path: random unit sets (the selected set must beat the largest of "
                               "the first n-1; the n-th is the null)", low=2, high=1000)
    real_batch: int = param(32, "real-model path: batch size for scoring and evaluation", low=1, high=256)
    real_format: str = param("cloze", "real-model path: cloze (the answer's first token after 'The capital city of "
                             "X is'; a 270M base model knows these) or letter (the paper's lettered MCQ, answered by "
                             "' A'..' D'; Gemma 3 270M is at chance there)", choices=["cloze", "letter"])

    def validate(self) -> None:
        if self.d % self.heads:
            raise UserError(f"d={self.d} must be divisible by heads={self.heads}")
        if self.n_countries % 2:
            raise UserError(f"n_countries={self.n_countries} must be even (sibling pairs)")
        if self.n_topics % 2:
            raise UserError(f"n_topics={self.n_topics} must be even (half scoring split, half test split)")


PRESETS = {
    "smoke": {"model": "organism", "d": 32, "layers": 2, "ff": 64, "steps": 60, "batch": 64, "n_countries": 4,
              "n_topics": 4, "n_score_per": 1, "n_reading": 2, "n_eval_per": 2, "n_nlu": 16, "n_random": 100,
              "ft_steps": 5, "ft_seeds": 1, "real_max_items": 6, "real_n_random": 2},
    "default": {},
    "paper": {"model": "organism", "d": 128, "layers": 8, "ff": 1024, "steps": 3000, "n_score_per": 10, "n_reading": 20,
              "n_eval_per": 20, "n_nlu": 500, "n_random": 200, "ft_seeds": 5},
}


def plan(cfg: Config) -> dict:
    """What a run with ``cfg`` needs and roughly costs (``iclr26 run culture-neurons --plan``)."""
    from iclr26 import plan as p

    if cfg.model == "gemma-3-270m":
        # cloze: 126 s at 20 random sets, 1 thread, quiet (2026-12-06), ~4 s per random set; letter: 327 s with 5
        # random sets before evaluation kept only the last position's logits (an upper bound, not re-measured)
        if cfg.real_format == "letter":
            secs, basis = 327 + 12 * max(0, cfg.real_n_random - 5), "letter format: 327 s measured with 5 random sets"
        else:
            # 126 s measured with 59 non-cultural facts; the 120-fact set makes each evaluation 232 items, not 171
            secs, basis = 46 + 5.5 * cfg.real_n_random, ("cloze: 126 s measured with 20 random sets and 59 "
                                                         "non-cultural facts, scaled to 120 facts")
        cost = p.measured_time(secs, f"docs/culture-neurons.md, {basis}, quiet 2-core machine, 1 thread, Gemma "
                               "already dequantized")
        needs, notes = [p.gemma_270m()], ["peak memory ~2.8 GB (cloze) / 3.9 GB (letter) of RAM, measured"]
    else:
        def work(c: Config) -> tuple[float, float]:  # organism + fine-tuning tokens x size; scoring and evaluation
            size = c.layers * c.d * (4 * c.d + 3 * c.ff)
            train = (c.steps * c.batch + 2 * c.ft_seeds * c.ft_steps * 32) * size
            h = c.n_topics // 2  # scoring on the neuron split; evaluation on both splits and the reading task
            evals = (c.n_countries * (h * (c.n_score_per + 2 * c.n_eval_per) + c.n_reading + c.n_eval_per)
                     + c.n_nlu) * c.n_random * size
            return train, evals

        # the organism path at its 2026-12-06 sizes (8 countries x 6 topics, 2000 steps of 64, 500 fine-tuning
        # steps) was the default preset until then: 183 s of make-test worker time, cold (BENCHMARKS.md); other
        # sizes scale from it
        ref = work(Config(n_countries=8, n_topics=6, steps=2000, batch=64, ft_steps=500))
        shares = (0.8, 0.2)
        ratio = sum(sh * t / r for sh, t, r in zip(shares, work(cfg), ref, strict=True))
        cost = p.measured_time(183, "organism path at 8 countries x 6 topics, BENCHMARKS.md, 2 CPU cores, cold cache",
                               ratio, "organism and fine-tuning steps x model size (share 0.8, from the 136 s of "
                               "165 s the organism took) and evaluated items x random sets x size")
        needs, notes = [], ["a cached organism (iclr26 cache list) skips its training share"]
    return {
        "needs": needs, "device": "cpu", "gpu_memory_gb": None, **cost, "notes": notes,
        "reference": [
            p.hub_weights("google/gemma-3-27b-it", note="the largest of the paper's six models (spec §3); "
                          "BLEnD, CountryRC and the benchmarks are user-supplied files"),
            p.cuda(80, note="spec §7: the six models in bf16 on one large GPU; 27B parameters are ~54 GB in bf16"),
        ],
    }


# ---------------------------------------------------------------------- organism
def _train_batch(tok, items):
    """Right-padded ``bos + prompt + gold`` rows with the loss on the gold token only."""
    batch, gold = encode_items(tok, [(w + [g], g) for w, g in items])
    lm = torch.zeros_like(batch["input_ids"], dtype=torch.bool)
    lm[torch.arange(len(items)), batch["attention_mask"].sum(1) - 1] = True
    return {**batch, "loss_mask": lm}


def _organism(cfg: Config, world: CultureWorld, seed: int):
    def sampler_for(tok):  # the loss is on the gold token only, so a stage builds whole batches
        def sampler(rng, batch):
            return _train_batch(tok, [world.pretrain_item(rng) for _ in range(batch)])

        return sampler

    return train_organism("culture-neurons", cfg, world.vocab(), seed=seed, ctx=32, kv_heads=cfg.heads,
                          stages=[Stage("organism", sampler_for, cfg.steps)],
                          data={"world": [world.n_countries, world.n_values, world.share, world.seed,
                                     world.n_topics]})


@torch.no_grad()
def _correct(model, batch, gold, choices=None, gaps: list | None = None) -> np.ndarray:
    """Greedy next token at each row's last real position == gold.

    ``choices``: argmax restricted to those ids, either one list for every row or one row of ids per example.
    ``gaps``: if given, each row's logit gap between its best and second-best choice is appended (how far the
    decision is from flipping under another machine's rounding)."""
    out = []
    B = 64
    n = batch["input_ids"].shape[0]
    ch_all = None if choices is None else torch.as_tensor(np.asarray(choices), dtype=torch.long)
    for s in range(0, n, B):
        ids, am = batch["input_ids"][s:s + B], batch["attention_mask"][s:s + B]
        row = _last_logits(model, ids, am)
        if ch_all is None:
            pred = row.argmax(-1).numpy()
        elif ch_all.dim() == 1:
            pred = ch_all[row[:, ch_all].argmax(-1)].numpy()
        else:
            ch = ch_all[s:s + B]
            pred = ch.gather(1, row.gather(1, ch).argmax(-1, keepdim=True)).squeeze(1).numpy()
        if gaps is not None and ch_all is not None:
            cl = row[:, ch_all] if ch_all.dim() == 1 else row.gather(1, ch_all[s:s + B])
            top2 = cl.topk(2, dim=-1).values
            gaps.append((top2[:, 0] - top2[:, 1]).numpy())
        out.append(pred == np.asarray(gold)[s:s + B])
    return np.concatenate(out)


def _last_logits(model, ids, am) -> torch.Tensor:
    """Logits ``[B, vocab]`` at each right-padded row's last real position.

    Only the distinct last positions go through the LM head (``logits_to_keep`` as indices): on Gemma 3 the head
    is a 262k-vocabulary matmul per position, which a full ``.logits`` pays for every padded position too. A model
    whose forward does not take ``logits_to_keep`` gets the full logits."""
    last = am.sum(1) - 1
    keep = torch.unique(last)
    try:
        logits = model(input_ids=ids, attention_mask=am, logits_to_keep=keep).logits
        col = torch.searchsorted(keep, last)
    except TypeError:
        logits, col = model(input_ids=ids, attention_mask=am).logits, last
    return logits[torch.arange(ids.shape[0]), col].float()


def _counts(layout, units, n_layers):
    """Selected units per (layer, module kind): ``{kind: [count per layer]}`` for gate / q / k / v."""
    out = {k: np.zeros(n_layers, dtype=int) for k in ("mlp.gate", "attn.q", "attn.k", "attn.v")}
    sel = set(np.asarray(units).tolist())
    for name, start, w in layout:
        layer, comp = int(name.split(".")[1]), name.split(".", 2)[2]
        out[comp][layer] += sum(1 for u in range(start, start + w) if u in sel)
    return out


def _ft_layers(counts: np.ndarray, score: np.ndarray, layout) -> tuple[int, int, np.ndarray, bool]:
    """The richest and the poorest layer for the fine-tuning comparison (C5), without ties.

    Layers are ranked by their count of culture-general MLP units; equal counts (several layers with none is the
    usual case on a small organism) are ordered by the layer's culture mass, the summed positive culture score
    ``S = D - C`` of its MLP units, a continuous quantity. Returns ``(richest, poorest, mass per layer, whether the
    mass decided between layers of equal count)``."""
    mass = np.zeros(len(counts))
    for name, start, w in layout:
        if name.endswith("mlp.gate"):
            mass[int(name.split(".")[1])] += float(np.clip(score[start:start + w], 0, None).sum())
    keys = list(zip(counts.tolist(), mass.tolist(), strict=True))
    layer_a = max(range(len(keys)), key=lambda i: keys[i])
    layer_b = min((i for i in range(len(keys)) if i != layer_a), key=lambda i: keys[i])
    tie = bool((counts == counts[layer_a]).sum() > 1 or (counts == counts[layer_b]).sum() > 1)
    return layer_a, layer_b, mass, tie


def run(cfg: Config, ctx: RunContext) -> Result:
    if cfg.model == "gemma-3-270m":
        return _run_real(cfg, ctx)
    import matplotlib.pyplot as plt

    seed = ctx.seed
    world = CultureWorld(cfg.n_countries, cfg.n_values, cfg.share, seed, n_topics=cfg.n_topics)
    model, tok, info = _organism(cfg, world, seed)
    model = model.cpu().eval()
    metrics: dict[str, float] = {}  # whether the organism came from the cache is in the notes, not a metric
    countries = world.countries
    rng = np.random.default_rng(seed + 101)

    # ---------------------------------------------------------------- scoring (neuron split only)
    sites = unit_sites(model)
    data, groups = world.mcq_set(rng, world.neuron_topics, cfg.n_score_per)
    ctrl = [world.control(it) for it in data]
    reading, rgroups = world.reading_set(rng, cfg.n_reading)
    (bd, gd), (bc, gc), (br, gr) = (encode_items(tok, x) for x in (data, ctrl, reading))
    D, layout = unit_scores(model, bd, gd, sites)
    C, _ = unit_scores(model, bc, gc, sites, clamp_nonnegative=True)
    R, _ = unit_scores(model, br, gr, sites)
    U = D.shape[1]
    kinds = np.array([0 if unit_kind(n) == "mlp" else 1 for n, _, w in layout for _ in range(w)])
    n_mlp, n_attn = int((kinds == 0).sum()), int((kinds == 1).sum())
    general = select_general(D, C, R, layout, top_mlp=cfg.top_mlp, top_attn=cfg.top_attn,
                             reading_top=cfg.reading_top)
    # without the reading filter (C2, reported): a "reading" score that ranks the *lowest*-S units on top, so the
    # filter removes nothing that the top-S rule keeps
    S_gen = (D.mean(0) - C.mean(0))[None]
    general_nofilter = select_general(D, C, -S_gen, layout, top_mlp=cfg.top_mlp, top_attn=cfg.top_attn,
                                      reading_top=min(cfg.reading_top, 0.5))
    f = cfg.sens_factor
    general_sens = select_general(D, C, R, layout, top_mlp=min(1.0, f * cfg.top_mlp),
                                  top_attn=min(1.0, f * cfg.top_attn), reading_top=cfg.reading_top)
    specific = select_specific(D, groups, C, groups, R, rgroups, layout, top=cfg.top_specific,
                               reading_top=cfg.reading_top, z_min=cfg.z_min)
    n_gen = int(general.numel())
    spec_all = sorted({u for v in specific.values() for u in v.tolist()})
    metrics.update(n_units=U, n_mlp_units=n_mlp, n_attn_units=n_attn, n_general=n_gen,
                   n_general_mlp=int((kinds[general.numpy()] == 0).sum()) if n_gen else 0,
                   n_general_nofilter=int(general_nofilter.numel()), n_general_sens=int(general_sens.numel()),
                   n_specific_total=len(spec_all),
                   frac_selected=(len(set(general.tolist()) | set(spec_all))) / U)
    for c in countries:
        metrics[f"n_specific_{c}"] = int(specific[c].numel())
    counts = _counts(layout, general, cfg.layers)
    mlp_layers = counts["mlp.gate"]
    early = max(1, int(np.ceil(0.75 * cfg.layers)))  # "early-to-middle" = all but the last quarter of layers
    metrics["general_mlp_share_early_mid"] = float(mlp_layers[:early].sum() / max(1, mlp_layers.sum()))
    metrics["general_mlp_share_early_mid_uniform"] = early / cfg.layers
    metrics["general_share_mlp"] = float(mlp_layers.sum() / max(1, n_gen))

    # ---------------------------------------------------------------- evaluation sets (test split)
    erng = np.random.default_rng(seed + 202)
    test, tgroups = world.mcq_set(erng, world.test_topics, cfg.n_eval_per)
    neur, _ = world.mcq_set(erng, world.neuron_topics, cfg.n_eval_per)
    rc, _ = world.reading_set(erng, cfg.n_eval_per)
    sets = {"cultural_test": test, "cultural_neuron_split": neur, "reading": rc,
            "nlu_cmp": [world.nlu(erng, "cmp") for _ in range(cfg.n_nlu)],
            "nlu_same": [world.nlu(erng, "same") for _ in range(cfg.n_nlu)]}
    enc = {k: encode_items(tok, v) for k, v in sets.items()}
    tg = np.array(tgroups)

    def evaluate(units=None, keys=None):
        keys = list(sets) if keys is None else keys
        if units is None or len(units) == 0:
            return {k: _correct(model, *enc[k]) for k in keys}
        with edit_unit_set(model, layout, units, factor=0.0):
            return {k: _correct(model, *enc[k]) for k in keys}

    def acc(res):
        return {k: float(v.mean()) for k, v in res.items()}

    clean_raw = evaluate()
    clean = acc(clean_raw)
    supp_raw = evaluate(general)
    supp = acc(supp_raw)
    drops = {k: clean[k] - supp[k] for k in sets}
    rand_drops: dict[str, list[float]] = {k: [] for k in sets}
    rand_rows = {k: np.zeros(len(v)) for k, v in sets.items()}  # per row: mean correctness over the random sets
    claim_sets = ("cultural_test", "nlu_cmp", "nlu_same")  # every random set; the other sets (reported) the first 20
    for r in range(cfg.n_random):
        ru = random_units(layout, n_gen, seed=seed * 1000 + r)
        res = evaluate(ru, None if r < 20 else claim_sets)
        for k, v in res.items():
            rand_drops[k].append(clean[k] - float(v.mean()))
            rand_rows[k] += v
    rd = {k: np.array(v) for k, v in rand_drops.items()}
    rand_rows = {k: v / len(rand_drops[k]) for k, v in rand_rows.items()}
    nofilt_raw = evaluate(general_nofilter)
    nofilt = acc(nofilt_raw)
    sens = acc(evaluate(general_sens))
    sens_r = acc(evaluate(random_units(layout, int(general_sens.numel()), seed=seed * 1000 + 999)))
    for k in sets:
        metrics[f"acc_clean_{k}"] = clean[k]
        metrics[f"acc_suppressed_{k}"] = supp[k]
        metrics[f"drop_{k}"] = drops[k]
        metrics[f"drop_random_mean_{k}"] = float(rd[k].mean())
        metrics[f"drop_random_p95_{k}"] = float(np.quantile(rd[k], 0.95))
        metrics[f"drop_nofilter_{k}"] = clean[k] - nofilt[k]
        metrics[f"drop_sens_{k}"] = clean[k] - sens[k]
        metrics[f"drop_sens_random_{k}"] = clean[k] - sens_r[k]
    # enhancement (x2) of the culture-general units, reported
    with edit_unit_set(model, layout, general, factor=2.0):
        metrics["acc_enhanced_cultural_test"] = float(_correct(model, *enc["cultural_test"]).mean())

    # ---------------------------------------------------------------- culture-specific units, per country
    G = len(countries)
    drop_mat = np.zeros((G, G))  # [suppressed country, evaluated country]
    rdrop_mat = np.zeros((G, G))
    clean_by = np.array([clean_raw["cultural_test"][tg == c].mean() for c in countries])
    for i, c in enumerate(countries):
        units = specific[c]
        if units.numel():
            with edit_unit_set(model, layout, units, factor=0.0):
                ok = _correct(model, *enc["cultural_test"])
            ru = random_units(layout, int(units.numel()), seed=seed * 1000 + 500 + i)
            with edit_unit_set(model, layout, ru, factor=0.0):
                rok = _correct(model, *enc["cultural_test"])
            drop_mat[i] = clean_by - np.array([ok[tg == e].mean() for e in countries])
            rdrop_mat[i] = clean_by - np.array([rok[tg == e].mean() for e in countries])
    has = np.array([specific[c].numel() > 0 for c in countries])
    eye = np.eye(G, dtype=bool)

    def target_minus_others(M) -> np.ndarray:  # one value per country that has culture-specific units
        return np.array([M[i, i] - M[i, ~eye[i]].mean() for i in range(G) if has[i]])

    def sibling_wins(M) -> np.ndarray:  # per country: its sibling drops more than the unrelated ones (no units: 0)
        out = []
        for i, c in enumerate(countries):
            j = countries.index(world.sibling(c))
            unrelated = [e for e in range(G) if e not in (i, j)]
            out.append(float(has[i] and M[i, j] > M[i, unrelated].mean()))
        return np.array(out)

    c3_v, c3_rand_v = target_minus_others(drop_mat), target_minus_others(rdrop_mat)
    c3 = float(c3_v.mean()) if c3_v.size else float("nan")
    c3_rand = float(c3_rand_v.mean()) if c3_rand_v.size else float("nan")
    wins, wins_rand = sibling_wins(drop_mat), sibling_wins(rdrop_mat)
    sib_wins = int(wins.sum())
    metrics.update(specific_target_minus_others=c3, specific_target_minus_others_random=c3_rand,
                   sibling_wins=float(sib_wins), sibling_wins_random=float(wins_rand.sum()),
                   countries_with_specific=float(has.sum()))

    # ---------------------------------------------------------------- fine-tuning on the held-back NLU task
    per_layer = np.asarray(mlp_layers)
    layer_a, layer_b, mass, tie_broken = _ft_layers(per_layer, S_gen[0].numpy(), layout)
    metrics["ft_layer_tie_broken"] = float(tie_broken)
    prng = np.random.default_rng(seed + 303)
    min_eval = encode_items(tok, [world.nlu(prng, "min") for _ in range(cfg.n_nlu)])
    metrics["min_acc_before"] = float(_correct(model, *min_eval).mean())
    ft: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    ft_rows: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"a": [], "b": []}  # (min task rows, cultural rows)
    for arm, L in (("a", layer_a), ("b", layer_b)):
        for s in range(cfg.ft_seeds):
            m2 = copy.deepcopy(model)
            params = [p for n, p in m2.named_parameters() if n.startswith(f"model.layers.{L}.mlp.")]
            for p in m2.parameters():
                p.requires_grad_(False)
            for p in params:
                p.requires_grad_(True)

            def sampler(r, batch):
                return _train_batch(tok, [world.nlu(r, "min") for _ in range(batch)])

            train_lm(m2, sampler, cfg.ft_steps, 32, cfg.ft_lr, seed * 100 + s, params=params, weight_decay=0.0,
                     desc=f"fine-tune L{L}")
            min_rows = _correct(m2, *min_eval).astype(float)
            cult_rows = _correct(m2, *enc["cultural_test"]).astype(float)
            ft_rows[arm].append((min_rows, cult_rows))
            ft[arm].append((float(min_rows.mean()), clean["cultural_test"] - float(cult_rows.mean())))
    fa, fb = np.array(ft["a"]), np.array(ft["b"])
    c5 = float(fa[:, 1].mean() - fb[:, 1].mean())
    metrics.update(ft_layer_richest=float(layer_a), ft_layer_poorest=float(layer_b),
                   ft_min_acc_a=float(fa[:, 0].mean()), ft_min_acc_b=float(fb[:, 0].mean()),
                   ft_cultural_drop_a=float(fa[:, 1].mean()), ft_cultural_drop_b=float(fb[:, 1].mean()),
                   ft_min_acc_min=float(min(fa[:, 0].min(), fb[:, 0].min())), ft_drop_gap=c5)

    # ---------------------------------------------------------------- figures
    fig, ax = plt.subplots(figsize=(5, 3.2))
    x = np.arange(cfg.layers)
    bottom = np.zeros(cfg.layers)
    for k, v in counts.items():
        ax.bar(x, v, bottom=bottom, label=k)
        bottom += v
    spec_counts = _counts(layout, spec_all, cfg.layers)
    ax.plot(x, sum(spec_counts.values()), "k^--", label="culture-specific (all countries)")
    ax.set(xlabel="layer", ylabel="selected units", xticks=x)
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "layer_histogram", "Culture-general units per layer and module (bars); culture-specific "
                    "units of all countries (line)")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    keys = list(sets)
    w = 0.27
    xs = np.arange(len(keys))
    ax.bar(xs - w, [clean[k] for k in keys], w, label="clean")
    ax.bar(xs, [supp[k] for k in keys], w, label=f"culture-general suppressed ({n_gen})")
    ax.bar(xs + w, [clean[k] - rd[k].mean() for k in keys], w, yerr=[rd[k].std() for k in keys],
           label=f"random {n_gen} (mean ± sd, {cfg.n_random} sets)")
    ax.set(xticks=xs, ylabel="greedy accuracy", ylim=(0, 1.05))
    ax.set_xticklabels(keys, rotation=20, fontsize=7)
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "accuracy_drop", "Accuracy clean / culture-general units suppressed / random units")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    im = ax.imshow(drop_mat, cmap="Reds", vmin=min(0, drop_mat.min()))
    ax.set(xticks=range(G), yticks=range(G), xlabel="evaluated country", ylabel="country whose units are zeroed")
    ax.set_xticklabels(countries, fontsize=7)
    ax.set_yticklabels(countries, fontsize=7)
    fig.colorbar(im, ax=ax, label="accuracy drop")
    ctx.save_figure(fig, "specific_heatmap", "Test-topic accuracy drop per country after suppressing each "
                    "country's culture-specific units (siblings: C0-C1, C2-C3, ...)")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for arm, arr, L in (("a", fa, layer_a), ("b", fb, layer_b)):
        ax.scatter(arr[:, 0], arr[:, 1], label=f"({arm}) MLP of layer {L} ({per_layer[L]} general units)")
    ax.set(xlabel="min accuracy after fine-tuning", ylabel="cultural test accuracy drop")
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "finetune", "Fine-tuning the held-back NLU task in one layer's MLP: task accuracy vs "
                    "cultural accuracy lost, per seed")
    plt.close(fig)
    ctx.write_json("selection.json", {"general": general.tolist(), "general_nofilter": general_nofilter.tolist(),
                                      "specific": {c: v.tolist() for c, v in specific.items()},
                                      "layout": [list(t) for t in layout],
                                      "drop_matrix": drop_mat.tolist(), "random_drops": {k: v.tolist()
                                                                                         for k, v in rd.items()}})

    # ---------------------------------------------------------------- claims: intervals over the independent unit
    # test-split MCQs are n_eval_per shuffles of each (country, topic) fact: the fact is the unit resampled
    facts = np.array([f"{w[1]}/{w[2]}" for w, _g in test])
    ct = clean_raw["cultural_test"].astype(float)

    def over_facts(rows: np.ndarray) -> Est:
        return cluster_bootstrap(lambda ix: float(rows[ix].mean()), facts, unit="fact", seed=seed)

    def item_boot(stat, *rows: np.ndarray, paired: bool = False) -> Est:
        return bootstrap(tuple(np.asarray(r, float) for r in rows), stat, unit="item", seed=seed, paired=paired)

    c1_est = over_facts(ct - supp_raw["cultural_test"])
    c1_null = over_facts(ct - rand_rows["cultural_test"])
    rb = random_baseline(rd["cultural_test"], unit="random set")
    c1_margin = Est(c1_est.value - rb.value, c1_est.lo - rb.hi, c1_est.hi - rb.lo, "fact", c1_est.n,
                    "cluster-bootstrap minus the random sets' 95th percentile")
    med = float(np.median(rd["cultural_test"])) - rb.value
    c1_margin_null = Est(med, med, med, "random set", int(rd["cultural_test"].size),
                         "median random set minus the 95th percentile")

    def worst_nlu(cmp_rows, same_rows):
        return max(float(np.mean(cmp_rows)), float(np.mean(same_rows)))

    nlu = {k: clean_raw[k].astype(float) for k in ("nlu_cmp", "nlu_same")}
    nlu_est = item_boot(worst_nlu, nlu["nlu_cmp"] - supp_raw["nlu_cmp"], nlu["nlu_same"] - supp_raw["nlu_same"])
    nlu_null = item_boot(worst_nlu, nlu["nlu_cmp"] - rand_rows["nlu_cmp"], nlu["nlu_same"] - rand_rows["nlu_same"])
    # selectivity, as on the Gemma path: cultural drop minus the larger NLU drop, facts and items resampled apart
    nf, nc = len(facts), len(nlu["nlu_cmp"])
    sel_lab = np.concatenate([facts, [f"cmp{i}" for i in range(nc)], [f"same{i}" for i in range(len(nlu["nlu_same"]))]])
    sel_side = np.array(["cult"] * nf + ["cmp"] * nc + ["same"] * len(nlu["nlu_same"]))

    def selectivity(after) -> Est:
        v = np.concatenate([ct - after["cultural_test"], nlu["nlu_cmp"] - after["nlu_cmp"],
                            nlu["nlu_same"] - after["nlu_same"]])

        def stat(ix):
            return float(v[ix[ix < nf]].mean() - max(v[ix[(ix >= nf) & (ix < nf + nc)]].mean(),
                                                     v[ix[ix >= nf + nc]].mean()))
        return cluster_bootstrap(stat, sel_lab, unit="fact/item", strata=sel_side, seed=seed)

    sel_est, sel_null = selectivity(supp_raw), selectivity(rand_rows)
    c2_est = item_boot(np.mean, supp_raw["reading"].astype(float) - nofilt_raw["reading"].astype(float))
    c3_est = mean_over(c3_v, unit="country")
    c3_null = mean_over(c3_rand_v, unit="country")
    c4_est = bootstrap(wins, np.mean, unit="country", seed=seed)
    c4_null = bootstrap(wins_rand, np.mean, unit="country", seed=seed)
    ft_min = [r for arm in ("a", "b") for r, _c in ft_rows[arm]]
    ft_est = item_boot(lambda *v: min(float(np.mean(x)) for x in v), *ft_min, paired=True)
    # C5: cultural drop (a) - (b) = mean correctness after (b) - after (a), per test row, mean over fine-tuning seeds
    after_a = np.mean([c for _m, c in ft_rows["a"]], axis=0)
    after_b = np.mean([c for _m, c in ft_rows["b"]], axis=0)
    c5_est = over_facts(after_b - after_a)
    if len(ft_rows["b"]) >= 2:  # null: two fine-tuning seeds of the same arm (b), drop(seed 1) - drop(seed 0)
        c5_null = over_facts(ft_rows["b"][0][1] - ft_rows["b"][1][1])
    else:
        c5_null = Est(float("nan"), float("nan"), float("nan"), "fact", 0, "needs ft_seeds >= 2")
    one_org = "depends on the one trained organism"
    claims = [
        claim("C1_cultural_drop", "suppressing the culture-general units lowers test-topic cultural accuracy "
              "(points, as a fraction)", c1_est, ">=", 0.15, null=c1_null,
              null_what=f"mean drop of {cfg.n_random} equal-count random unit sets", trained=True,
              detail=f"{n_gen} units; {len(set(facts))} facts x {cfg.n_eval_per} shuffles; {one_org}"),
        claim("C1_above_random", "that drop minus the 95th percentile of equal-count random unit sets", c1_margin,
              ">", 0.0, null=c1_margin_null, null_what="median random set's drop minus the 95th percentile",
              trained=True, detail=f"random p95 {rb.value:.4g} [{rb.lo:.4g}, {rb.hi:.4g}] over {rb.n} sets"),
        claim("C1_selective", "cultural test drop minus the larger NLU drop (cmp, same) >= 12 points (the spec's "
              "15-point damage with <= 3 points on NLU)", sel_est, ">=", 0.12, null=sel_null,
              null_what="the same under the random unit sets (mean per item)", trained=True),
        claim("C1_nlu_kept", "largest NLU accuracy drop (cmp, same) under the same suppression", nlu_est, "<=", 0.03,
              null=nlu_null, null_what="the same under the random unit sets (mean per item)", trained=True),
        claim("sanity_clean_cultural", "sanity: the organism answers the test-topic MCQs before any edit",
              over_facts(ct), ">=", 0.9, why="precondition: suppression can only remove knowledge the organism has"),
        claim("sanity_clean_nlu", "sanity: the organism solves both NLU tasks before any edit",
              item_boot(lambda a, b: min(float(np.mean(a)), float(np.mean(b))), nlu["nlu_cmp"], nlu["nlu_same"]),
              ">=", 0.9, why="precondition of C1_nlu_kept"),
        claim("sanity_fraction_selected", "sanity: selected units (general and specific) as a fraction of all "
              "units", Est(metrics["frac_selected"], metrics["frac_selected"], metrics["frac_selected"], "exact", U,
                           "count"), "<", 0.01, gated=False,
              detail="follows from the rule's fractions (1 % / 0.2 % / 0.3 % per country); reported only"),
        claim("C0_early_mid_mlp", "share of culture-general MLP units outside the last quarter of layers "
              f"(uniform: {early / cfg.layers:.2f})", Est(metrics["general_mlp_share_early_mid"],
                                                          metrics["general_mlp_share_early_mid"],
                                                          metrics["general_mlp_share_early_mid"], "exact", n_gen,
                                                          "count"), ">",
              early / cfg.layers, gated=False, detail="spec §5: 4 layers cannot test 'shallow-to-middle'; plotted"),
        claim("C2_reading_filter", "CountryRC drop without the reading filter minus with it (reported; gating it "
              "would be circular)", c2_est, ">=", 0.0, gated=False),
        claim("C3_specific", "culture-specific units: drop on the target country minus mean drop on the others",
              c3_est, ">=", 0.10, null=c3_null, null_what="the same with equal-count random units per country",
              trained=True,
              detail=f"each country's test accuracy rests on its {len(world.test_topics)} test-topic facts"),
        claim("C4_siblings", f"fraction of the {G} countries whose sibling drops more than the unrelated countries "
              "(countries without specific units count as misses)", c4_est, ">=", 0.75, null=c4_null,
              null_what="the same with equal-count random units per country", trained=True,
              detail=f"{sib_wins} of {G}"),
        claim("sanity_ft_learned", "sanity: both fine-tuning arms learn the new NLU task (min accuracy)",
              ft_est, ">=", 0.9, why="precondition of C5: both arms must learn the task they are fine-tuned on"),
        claim("C5_finetune", "cultural drop after fine-tuning the richest layer's MLP minus the poorest layer's "
              "(mean over fine-tuning seeds)", c5_est, ">=", 0.05, null=c5_null,
              null_what="two fine-tuning seeds of the poorest layer: drop(seed 1) - drop(seed 0)", trained=True,
              detail=f"layers a={layer_a} ({per_layer[layer_a]} units, culture mass {mass[layer_a]:.3g}), "
              f"b={layer_b} ({per_layer[layer_b]} units, mass {mass[layer_b]:.3g}); equal unit counts are ordered "
              f"by culture mass{' (used here)' if tie_broken else ''}"),
    ]
    note = (f"{n_gen} culture-general units ({metrics['n_general_mlp']} MLP) of {U}; per-layer MLP counts "
            f"{per_layer.tolist()}; fine-tuned layers a={layer_a}, b={layer_b}; organism cached={info['cached']} "
            f"build {info['build_seconds']:.1f}s")
    ctx.add_note(note)
    return Result(metrics={k: float(v) for k, v in metrics.items()}, claims=claims, notes=note)


# ---------------------------------------------------------------------- real-model path
def _real_batches(tok, texts, bs):
    """Right-padded batches (BOS from the tokenizer)."""
    rows = [tok(t)["input_ids"] for t in texts]
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    out = []
    for s in range(0, len(rows), bs):
        chunk = rows[s:s + bs]
        T = max(map(len, chunk))
        ids = torch.full((len(chunk), T), pad, dtype=torch.long)
        am = torch.zeros((len(chunk), T), dtype=torch.long)
        for i, r in enumerate(chunk):
            ids[i, : len(r)] = torch.tensor(r)
            am[i, : len(r)] = 1
        out.append({"input_ids": ids, "attention_mask": am})
    return out


def _next_token(tok, prompt: str, continuation: str) -> int:
    """The first token ``continuation`` adds after ``prompt`` (tokenized together, so merges are the tokenizer's)."""
    p = tok(prompt)["input_ids"]
    full = tok(prompt + continuation)["input_ids"]
    if full[:len(p)] != p or len(full) == len(p):
        raise UserError(f"{continuation!r} does not start a new token after {prompt!r} in this tokenizer")
    return full[len(p)]


def _real_items(tok, items, fmt, letter_ids):
    """``(prompts, controls, gold ids, choice ids per row)`` for lettered MCQs or cloze items."""
    if fmt == "letter":
        choice = [letter_ids[L] for L in LETTERS]
        return ([x.prompt for x in items], [x.control for x in items], np.array([letter_ids[x.gold] for x in items]),
                np.array([choice] * len(items)))
    rows = []
    for x in items:
        ids = [_next_token(tok, x.prompt, o) for o in x.options]
        if len(set(ids)) < len(ids):
            raise UserError(f"options {x.options} of {x.prompt!r} share a first token in this tokenizer; cloze "
                            "scoring needs distinct ones")
        rows.append(ids)
    rows = np.array(rows)
    return ([x.prompt for x in items], [x.control for x in items], rows[np.arange(len(items)), [x.gold for x in items]],
            rows)


def _run_real(cfg: Config, ctx: RunContext) -> Result:
    """Scoring -> culture-general selection -> suppression vs random units on Gemma 3 270M.

    Neuron split = capital questions, test split = currency and language questions (the paper splits BLEnD by
    topic); control = the question without its knowledge cue (letter: the options only; cloze: the prompt with the
    country replaced by "the country"); reading task = passages naming the eight CountryRC countries; NLU proxy =
    "which number is the largest" (letter) or antonyms (cloze). Accuracy is the argmax over the four letter tokens
    (letter) or over the four options' first tokens (cloze).
    """
    import matplotlib.pyplot as plt

    from iclr26.lm.loading import load_model

    model, tok = load_model("gemma-3-270m")  # MissingAssetError names the install command
    model.eval()
    letter_ids = {}
    for L in LETTERS:
        ids = tok(" " + L, add_special_tokens=False)["input_ids"]
        if len(ids) != 1 or tok.decode(ids) != " " + L:
            raise UserError(f"gold letter ' {L}' is not one token in this tokenizer: {ids}")
        letter_ids[L] = ids[0]

    def cap(items):
        by = {}
        for it in items:
            by.setdefault(it.relation, []).append(it)
        return [it for v in by.values() for it in v[: cfg.real_max_items]]

    if cfg.real_format == "letter":
        neuron = cap(country_mcqs("capital", seed=ctx.seed))
        test = cap(country_mcqs(("currency", "language"), seed=ctx.seed))
        reading = country_reading(RC_COUNTRIES, per=2, seed=ctx.seed)
        nlu = number_mcqs(max(8, min(100, cfg.real_max_items)), seed=ctx.seed)
    else:
        neuron = cap(country_cloze("capital", seed=ctx.seed))
        test = cap(country_cloze(("currency", "language"), seed=ctx.seed))
        reading = reading_cloze(RC_COUNTRIES, per=2, seed=ctx.seed)
        nlu = antonym_cloze(seed=ctx.seed)[: max(8, min(100, cfg.real_max_items))]
    general_set = cap(general_cloze(seed=ctx.seed))  # cloze in both formats (it has no lettered form)
    bs = cfg.real_batch
    sites = unit_sites(model)
    pn, cn, gn, _ = _real_items(tok, neuron, cfg.real_format, letter_ids)
    pr, _, gr, _ = _real_items(tok, reading, cfg.real_format, letter_ids)
    D, layout = unit_scores(model, _real_batches(tok, pn, bs), gn, sites)
    C, _ = unit_scores(model, _real_batches(tok, cn, bs), gn, sites, clamp_nonnegative=True)
    R, _ = unit_scores(model, _real_batches(tok, pr, bs), gr, sites)
    general = select_general(D, C, R, layout, top_mlp=cfg.top_mlp, top_attn=cfg.top_attn,
                             reading_top=cfg.reading_top)
    n_gen = int(general.numel())
    n_layers = len(sites) // 4
    counts = _counts(layout, general, n_layers)

    evalsets = {"test": test, "general": general_set, "nlu": nlu, "neuron_split": neuron}
    enc = {}
    for k, v in evalsets.items():
        prompts, _, gold, choices = _real_items(tok, v, "cloze" if k == "general" else cfg.real_format, letter_ids)
        enc[k] = (_real_batches(tok, prompts, bs), gold, choices)

    gaps: dict[tuple[str, str], np.ndarray] = {}  # (evaluation, set) -> each decision's gap between its best two

    def evaluate_rows(units=None, keys=tuple(evalsets), label="random"):  # per item: correct (1.0) or not
        def one():
            out = {}
            for k in keys:
                g: list[np.ndarray] = []
                out[k] = np.concatenate([_correct(model, b, enc[k][1][i * bs:(i + 1) * bs],
                                                  enc[k][2][i * bs:(i + 1) * bs], g)
                                         for i, b in enumerate(enc[k][0])]).astype(float)
                gaps[(label, k)] = np.concatenate([gaps.get((label, k), np.zeros(0)), *g])
            return out

        if units is None:
            return one()
        with edit_unit_set(model, layout, units, factor=0.0):
            return one()

    clean_rows = evaluate_rows(label="clean")
    supp_rows = evaluate_rows(general, label="selected")
    rnd_keys = ("test", "general", "nlu")  # the neuron split is reported for clean / suppressed only
    rnd_rows = [evaluate_rows(random_units(layout, n_gen, seed=ctx.seed * 1000 + r), rnd_keys)
                for r in progress(range(cfg.real_n_random), desc="random unit sets")]
    clean = {k: float(v.mean()) for k, v in clean_rows.items()}
    metrics: dict[str, float] = {"n_units": float(D.shape[1]), "n_general": float(n_gen),
                                 "n_neuron_items": float(len(neuron)), "n_test_items": float(len(test)),
                                 "n_general_items": float(len(general_set)),
                                 "general_mlp": float(counts["mlp.gate"].sum())}
    # Nothing is trained on this path, so another machine can change a verdict only by flipping a near-tied
    # decision (fp32 logits differ between kernels by ~1e-4). The headline rests on the clean and selected-units
    # decisions on the country and non-cultural facts; their smallest gap says how far it is from such a flip.
    allgaps = np.concatenate(list(gaps.values()))
    head = np.concatenate([gaps[(e, k)] for e in ("clean", "selected") for k in ("test", "general")])
    metrics.update({"decision_gap_min": float(allgaps.min()),
                    "decisions_gap_below_0.01": float((allgaps < 0.01).sum()),
                    "n_decisions": float(allgaps.size), "headline_decision_gap_min": float(head.min()),
                    "headline_decisions_gap_below_0.01": float((head < 0.01).sum()),
                    "n_headline_decisions": float(head.size)})
    drops = {k: clean_rows[k] - supp_rows[k] for k in evalsets}  # per item: 1 = lost, -1 = gained
    rdrops = {k: np.stack([clean_rows[k] - r[k] for r in rnd_rows]) for k in rnd_keys}  # [sets, items]
    for k in evalsets:
        metrics[f"acc_clean_{k}"] = clean[k]
        metrics[f"drop_{k}"] = float(drops[k].mean())
        if k in rdrops:
            metrics[f"drop_random_mean_{k}"] = float(rdrops[k].mean())
            metrics[f"drop_random_max_{k}"] = float(rdrops[k].mean(1).max())
    for i in range(n_layers):
        metrics[f"general_mlp_layer{i}"] = float(counts["mlp.gate"][i])

    fig, ax = plt.subplots(figsize=(6, 3.2))
    x = np.arange(n_layers)
    bottom = np.zeros(n_layers)
    for k, v in counts.items():
        ax.bar(x, v, bottom=bottom, label=k)
        bottom += v
    ax.set(xlabel="layer", ylabel="culture-general units")
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "layer_histogram", "Gemma 3 270M: culture-general units per layer and module")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    names = {"test": "country facts\n(held out)", "general": "non-cultural\nfacts", "nlu": "antonyms"}
    xs = np.arange(len(names))
    ax.bar(xs - 0.2, [metrics[f"drop_{k}"] for k in names], 0.4, label="culture-general units")
    per_set = [rdrops[k].mean(1) for k in names]
    ax.bar(xs + 0.2, [v.mean() for v in per_set], 0.4, label=f"{cfg.real_n_random} random sets (mean, range)",
           yerr=[[v.mean() - v.min() for v in per_set], [v.max() - v.mean() for v in per_set]], capsize=3)
    ax.axhline(0, c="gray", lw=0.5)
    ax.set_xticks(xs, list(names.values()))
    ax.set(ylabel="accuracy drop when zeroed")
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "accuracy_drop", "Gemma 3 270M: accuracy lost when the culture-general units or "
                    "equal-count random units are zeroed")
    plt.close(fig)

    # Intervals resample countries (each contributes its currency and language facts) and, for the control sets,
    # items. The random baseline is the rank test the spec's "95th percentile of 20 sets" amounts to: the selected
    # set must beat the largest of the first R-1 random sets (exchangeable sets beat it with probability 1/R);
    # the null is the R-th random set through the same comparison.
    boot = dict(seed=ctx.seed)
    country = np.array([f"c:{it.country}" for it in test] + [f"g:{i}" for i in range(len(general_set))])
    side = np.array(["test"] * len(test) + ["general"] * len(general_set))
    nt = len(test)

    def over_countries(stat) -> Est:
        return cluster_bootstrap(lambda ix: stat(ix[ix < nt]), country[:nt], unit="country", **boot)

    rd_t, rest = rdrops["test"], rdrops["test"][:-1]
    c1 = over_countries(lambda ix: float(drops["test"][ix].mean()))
    c1_null = over_countries(lambda ix: float(rd_t[:, ix].mean()))
    above = over_countries(lambda ix: float(drops["test"][ix].mean() - rest[:, ix].mean(1).max()))
    above_null = over_countries(lambda ix: float(rd_t[-1, ix].mean() - rest[:, ix].mean(1).max()))
    cult_minus_gen = np.concatenate([drops["test"], -drops["general"]])
    rnd_minus_gen = np.concatenate([rd_t.mean(0), -rdrops["general"].mean(0)])

    def selectivity(vec):
        def stat(ix):
            t, g = ix[ix < nt], ix[ix >= nt]
            return float(vec[t].mean() + vec[g].mean())
        return cluster_bootstrap(stat, country, unit="country/item", strata=side, **boot)

    sel, sel_null = selectivity(cult_minus_gen), selectivity(rnd_minus_gen)
    nlu_est = bootstrap(drops["nlu"], unit="item", **boot)
    nlu_null = bootstrap(rdrops["nlu"].mean(0), unit="item", **boot)
    metrics.update({"C1_drop": c1.value, "C1_above_random": above.value, "C1_selectivity": sel.value,
                    "drop_test_minus_random_mean": float(drops["test"].mean() - rd_t.mean())})
    claims = [
        claim("sanity_R_clean_above_chance", "sanity: clean held-out country-fact accuracy above chance (0.25) + 0.1",
              over_countries(lambda ix: float(clean_rows["test"][ix].mean())), ">=", 0.35,
              why="precondition: there is knowledge on the test split to suppress"),
        claim("sanity_R_general_known", "sanity: clean accuracy on the non-cultural facts above chance + 0.1",
              bootstrap(clean_rows["general"], unit="item", **boot), ">=", 0.35,
              why="precondition: the selectivity control has knowledge to lose"),
        claim("C1_cultural_drop", "zeroing the culture-general units lowers held-out country-fact accuracy by "
              ">= 15 points", c1, ">=", 0.15, null=c1_null,
              null_what=f"mean drop of {cfg.real_n_random} equal-count random unit sets",
              detail=f"{n_gen} units; {nt} facts of {len(set(country[:nt]))} countries"),
        claim("C1_above_random", f"that drop minus the largest drop of {cfg.real_n_random - 1} equal-count random "
              "sets (the rank test of a 95th percentile)", above, ">", 0.0, null=above_null,
              null_what=f"random set {cfg.real_n_random} through the same comparison"),
        claim("C1_selective", "drop on country facts minus drop on frame-matched non-cultural facts >= 12 points "
              "(the spec's 15-point damage with <= 3 points elsewhere)", sel, ">=", 0.12, null=sel_null,
              null_what="the same difference for random unit sets (mean per item)",
              detail=f"{len(general_set)} non-cultural facts (colours, plurals, animals' young, homes and "
              "females, materials)"),
        claim("C1_nlu_kept", f"NLU proxy ({'antonyms' if cfg.real_format == 'cloze' else 'largest number'}) "
              "accuracy drop <= 3 points under the same suppression", nlu_est, "<=", 0.03, null=nlu_null,
              null_what="the same drop under random unit sets (mean per item)"),
    ]
    note = (f"Gemma 3 270M ({cfg.real_format} format): {n_gen} culture-general units of {int(D.shape[1])} "
            f"({int(counts['mlp.gate'].sum())} MLP), {cfg.real_n_random} random sets")
    ctx.add_note(note)
    return Result(metrics={k: float(v) for k, v in metrics.items()}, claims=claims, notes=note)
