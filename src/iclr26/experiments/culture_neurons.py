"""Neuron-Level Analysis of Cultural Understanding in Large Language Models (ICLR 2026, arXiv 2510.08284).

Small reproduction of CULNIG on a model organism: a tiny Llama learns the facts of eight synthetic countries as
multiple-choice questions (six BLEnD-like topics, sibling countries sharing most values), a reading task that
names countries and two NLU-like tasks. Units (gate and q/k/v channels) are scored with p · max_t a ⊙ ∂p/∂a on the
neuron-split topics; culture-general units (top 1 % MLP / 0.2 % attention by data minus options-only control,
minus the reading-task top 1 %) and culture-specific units (top 0.3 % per country, reading filter, z >= 0.5) are
selected with :mod:`iclr26.interp.unit_scores` and suppressed on the held-out test topics, against random units of
equal count. A last step fine-tunes a held-back NLU task in the MLP of the layer richest / poorest in culture-general
units and measures how much cultural accuracy each loses. ``model=gemma-3-270m`` runs scoring, selection and
suppression against random units on Gemma 3 270M over 140 country facts, in cloze form by default
(``real_format=letter``: the paper's lettered MCQs, which the 270M base model answers at chance).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
import torch

from iclr26.core import param
from iclr26.core.errors import UserError
from iclr26.data.culture import (
    LETTERS,
    NEURON_TOPICS,
    TEST_TOPICS,
    CultureWorld,
    antonym_cloze,
    country_cloze,
    country_mcqs,
    country_reading,
    encode_items,
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
from iclr26.lm import WordTokenizer, tiny_lm
from iclr26.lm.train import cached_organism, train_lm
from iclr26.runs import Result, RunContext, claim

DESCRIPTION = (
    "Culture neurons (CULNIG) on a tiny Llama organism that knows eight synthetic countries' facts as MCQs: "
    "p * max_t(a * dp/da) unit scores on gate and q/k/v channels, culture-general and culture-specific selection "
    "with the options-only control and the reading-task filter, suppression against equal-count random units on "
    "held-out topics, and NLU fine-tuning in the layer richest vs poorest in culture-general units."
)
WORKLOAD = "small"
RC_COUNTRIES = ("China", "Indonesia", "Iran", "Mexico", "South Korea", "Spain", "the United Kingdom",
                "the United States")


@dataclass
class Config:
    d: int = param(64, "organism width", low=8, high=512)
    layers: int = param(4, "organism decoder layers (the fine-tuning comparison needs >= 2)", low=2, high=12)
    heads: int = param(4, "attention heads (no GQA: k/v have as many heads as q)", low=1, high=16)
    ff: int = param(512, "MLP width = gate channels per layer", low=8, high=4096)
    steps: int = param(2000, "organism training steps (AdamW, batch 64)", low=1, high=100_000)
    lr: float = param(3e-3, "organism learning rate", low=0.0, high=0.01, low_open=True)
    n_countries: int = param(8, "synthetic countries (even: sibling pairs)", low=4, high=16)
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
    n_random: int = param(20, "random unit sets of equal count", low=2, high=1000)
    ft_steps: int = param(500, "fine-tuning steps on the held-back NLU task (min; batch 32)", low=1, high=10_000)
    ft_lr: float = param(5e-3, "fine-tuning learning rate", low=0.0, high=0.01, low_open=True)
    ft_seeds: int = param(2, "fine-tuning seeds per arm", low=1, high=10)
    model: str = param("organism", "organism: the trained tiny Llama (the reproduction); gemma-3-270m: scoring, "
                       "selection and suppression vs random units on Gemma 3 270M (real-model path)",
                       choices=["organism", "gemma-3-270m"])
    real_max_items: int = param(1000, "real-model path: at most this many MCQs per relation", low=4, high=1000)
    real_n_random: int = param(5, "real-model path: random unit sets", low=2, high=100)
    real_batch: int = param(16, "real-model path: batch size for scoring and evaluation", low=1, high=256)
    real_format: str = param("cloze", "real-model path: cloze (the answer's first token after 'The capital city of "
                             "X is'; a 270M base model knows these) or letter (the paper's lettered MCQ, answered by "
                             "' A'..' D'; Gemma 3 270M is at chance there)", choices=["cloze", "letter"])

    def validate(self) -> None:
        if self.d % self.heads:
            raise UserError(f"d={self.d} must be divisible by heads={self.heads}")
        if self.n_countries % 2:
            raise UserError(f"n_countries={self.n_countries} must be even (sibling pairs)")


PRESETS = {
    "smoke": {"d": 32, "layers": 2, "ff": 64, "steps": 60, "n_countries": 4, "n_score_per": 1, "n_reading": 2,
              "n_eval_per": 2, "n_nlu": 16, "n_random": 3, "ft_steps": 5, "ft_seeds": 1, "real_max_items": 6,
              "real_n_random": 2},
    "default": {},
    "paper": {"d": 128, "layers": 8, "ff": 1024, "steps": 6000, "n_score_per": 10, "n_reading": 20,
              "n_eval_per": 20, "n_nlu": 500, "n_random": 50, "ft_seeds": 5},
}


# ---------------------------------------------------------------------- organism
def _train_batch(tok, items):
    """Right-padded ``bos + prompt + gold`` rows with the loss on the gold token only."""
    batch, gold = encode_items(tok, [(w + [g], g) for w, g in items])
    lm = torch.zeros_like(batch["input_ids"], dtype=torch.bool)
    lm[torch.arange(len(items)), batch["attention_mask"].sum(1) - 1] = True
    return {**batch, "loss_mask": lm}


def _organism(cfg: Config, world: CultureWorld, seed: int):
    vocab = world.vocab()
    spec = {"d": cfg.d, "layers": cfg.layers, "heads": cfg.heads, "ff": cfg.ff, "steps": cfg.steps, "lr": cfg.lr,
            "seed": seed, "world": [world.n_countries, world.n_values, world.share, world.seed], "v": 2}

    def build():
        tok = WordTokenizer(vocab)
        model = tiny_lm("llama", d=cfg.d, layers=cfg.layers, heads=cfg.heads, kv_heads=cfg.heads, ff=cfg.ff,
                        vocab=len(tok), ctx=32, seed=seed)

        def sampler(rng, batch):
            return _train_batch(tok, [world.pretrain_item(rng) for _ in range(batch)])

        train_lm(model, sampler, cfg.steps, 64, cfg.lr, seed, weight_decay=0.01, desc="organism")
        return model, tok

    return cached_organism("culture-neurons", spec, build)


@torch.no_grad()
def _correct(model, batch, gold, choices=None) -> np.ndarray:
    """Greedy next token at each row's last real position == gold.

    ``choices``: argmax restricted to those ids, either one list for every row or one row of ids per example."""
    out = []
    B = 64
    n = batch["input_ids"].shape[0]
    ch_all = None if choices is None else torch.as_tensor(np.asarray(choices), dtype=torch.long)
    for s in range(0, n, B):
        ids, am = batch["input_ids"][s:s + B], batch["attention_mask"][s:s + B]
        logits = model(input_ids=ids, attention_mask=am).logits
        row = logits[torch.arange(ids.shape[0]), am.sum(1) - 1].float()
        if ch_all is None:
            pred = row.argmax(-1).numpy()
        elif ch_all.dim() == 1:
            pred = ch_all[row[:, ch_all].argmax(-1)].numpy()
        else:
            ch = ch_all[s:s + B]
            pred = ch.gather(1, row.gather(1, ch).argmax(-1, keepdim=True)).squeeze(1).numpy()
        out.append(pred == np.asarray(gold)[s:s + B])
    return np.concatenate(out)


def _counts(layout, units, n_layers):
    """Selected units per (layer, module kind): ``{kind: [count per layer]}`` for gate / q / k / v."""
    out = {k: np.zeros(n_layers, dtype=int) for k in ("mlp.gate", "attn.q", "attn.k", "attn.v")}
    sel = set(np.asarray(units).tolist())
    for name, start, w in layout:
        layer, comp = int(name.split(".")[1]), name.split(".", 2)[2]
        out[comp][layer] += sum(1 for u in range(start, start + w) if u in sel)
    return out


def run(cfg: Config, ctx: RunContext) -> Result:
    if cfg.model == "gemma-3-270m":
        return _run_real(cfg, ctx)
    import matplotlib.pyplot as plt

    t0 = time.perf_counter()
    seed = ctx.seed
    world = CultureWorld(cfg.n_countries, cfg.n_values, cfg.share, seed)
    model, tok, info = _organism(cfg, world, seed)
    model = model.cpu().eval()
    metrics: dict[str, float] = {"organism_build_seconds": float(info["build_seconds"]),
                                 "organism_cached": float(info["cached"])}
    countries = world.countries
    rng = np.random.default_rng(seed + 101)

    # ---------------------------------------------------------------- scoring (neuron split only)
    sites = unit_sites(model)
    data, groups = world.mcq_set(rng, NEURON_TOPICS, cfg.n_score_per)
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
    test, tgroups = world.mcq_set(erng, TEST_TOPICS, cfg.n_eval_per)
    neur, _ = world.mcq_set(erng, NEURON_TOPICS, cfg.n_eval_per)
    rc, _ = world.reading_set(erng, cfg.n_eval_per)
    sets = {"cultural_test": test, "cultural_neuron_split": neur, "reading": rc,
            "nlu_cmp": [world.nlu(erng, "cmp") for _ in range(cfg.n_nlu)],
            "nlu_same": [world.nlu(erng, "same") for _ in range(cfg.n_nlu)]}
    enc = {k: encode_items(tok, v) for k, v in sets.items()}
    tg = np.array(tgroups)

    def evaluate(units=None):
        if units is None or len(units) == 0:
            return {k: _correct(model, *enc[k]) for k in sets}
        with edit_unit_set(model, layout, units, factor=0.0):
            return {k: _correct(model, *enc[k]) for k in sets}

    def acc(res):
        return {k: float(v.mean()) for k, v in res.items()}

    clean_raw = evaluate()
    clean = acc(clean_raw)
    supp = acc(evaluate(general))
    drops = {k: clean[k] - supp[k] for k in sets}
    rand_drops = {k: [] for k in sets}
    for r in range(cfg.n_random):
        ru = random_units(layout, n_gen, seed=seed * 1000 + r)
        a = acc(evaluate(ru))
        for k in sets:
            rand_drops[k].append(clean[k] - a[k])
    rd = {k: np.array(v) for k, v in rand_drops.items()}
    nofilt = acc(evaluate(general_nofilter))
    sens = acc(evaluate(general_sens))
    sens_r = acc(evaluate(random_units(layout, int(general_sens.numel()), seed=seed * 1000 + 999)))
    for k in sets:
        metrics[f"acc_clean_{k}"] = clean[k]
        metrics[f"acc_suppressed_{k}"] = supp[k]
        metrics[f"drop_{k}"] = drops[k]
        metrics[f"drop_random_mean_{k}"] = float(rd[k].mean())
        metrics[f"drop_random_p95_{k}"] = float(np.percentile(rd[k], 95))
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

    def target_minus_others(M):
        v = [M[i, i] - M[i, ~eye[i]].mean() for i in range(G) if has[i]]
        return float(np.mean(v)) if v else 0.0

    c3 = target_minus_others(drop_mat)
    c3_rand = target_minus_others(rdrop_mat)
    sib_wins = 0
    for i, c in enumerate(countries):
        j = countries.index(world.sibling(c))
        unrelated = [e for e in range(G) if e not in (i, j)]
        sib_wins += int(has[i] and drop_mat[i, j] > drop_mat[i, unrelated].mean())
    metrics.update(specific_target_minus_others=c3, specific_target_minus_others_random=c3_rand,
                   sibling_wins=float(sib_wins), countries_with_specific=float(has.sum()))

    # ---------------------------------------------------------------- fine-tuning on the held-back NLU task
    per_layer = np.asarray(mlp_layers)
    layer_a = int(np.argmax(per_layer))
    order = np.argsort(per_layer, kind="stable")
    layer_b = int(next(x for x in order if x != layer_a))
    prng = np.random.default_rng(seed + 303)
    min_eval = encode_items(tok, [world.nlu(prng, "min") for _ in range(cfg.n_nlu)])
    metrics["min_acc_before"] = float(_correct(model, *min_eval).mean())
    ft = {"a": [], "b": []}
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
            min_acc = float(_correct(m2, *min_eval).mean())
            cult = float(_correct(m2, *enc["cultural_test"]).mean())
            ft[arm].append((min_acc, clean["cultural_test"] - cult))
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

    nlu_drop = max(drops["nlu_cmp"], drops["nlu_same"])
    claims = [
        claim("C1_cultural_drop", "suppressing the culture-general units lowers test-topic cultural accuracy "
              "(points, as a fraction)", drops["cultural_test"], ">=", 0.15),
        claim("C1_above_random", "that drop minus the 95th percentile of equal-count random unit sets",
              drops["cultural_test"] - float(np.percentile(rd["cultural_test"], 95)), ">", 0.0),
        claim("C1_nlu_kept", "largest NLU accuracy drop (cmp, same) under the same suppression", nlu_drop,
              "<=", 0.03),
        claim("ctrl_random_drop", "control: mean cultural drop of the random unit sets", float(rd["cultural_test"]
              .mean()), "<=", 0.03),
        claim("sanity_clean_cultural", "sanity: the organism answers the test-topic MCQs before any edit",
              clean["cultural_test"], ">=", 0.9),
        claim("sanity_clean_nlu", "sanity: the organism solves both NLU tasks before any edit",
              min(clean["nlu_cmp"], clean["nlu_same"]), ">=", 0.9),
        claim("sanity_fraction_selected", "sanity: selected units (general and specific) as a fraction of all "
              "units", metrics["frac_selected"], "<", 0.01, gated=False,
              detail="follows from the rule's fractions (1 % / 0.2 % / 0.3 % per country); reported only"),
        claim("C0_early_mid_mlp", "share of culture-general MLP units outside the last quarter of layers "
              f"(uniform: {early / cfg.layers:.2f})", metrics["general_mlp_share_early_mid"], ">",
              early / cfg.layers, gated=False, detail="spec §5: 4 layers cannot test 'shallow-to-middle'; plotted"),
        claim("C2_reading_filter", "CountryRC drop without the reading filter minus with it (reported; gating it "
              "would be circular)", metrics["drop_nofilter_reading"] - drops["reading"], ">=", 0.0, gated=False),
        claim("C3_specific", "culture-specific units: drop on the target country minus mean drop on the others",
              c3, ">=", 0.10),
        claim("ctrl_C3_random", "control: the same with equal-count random units per country", c3_rand, "<", 0.05),
        claim("C4_siblings", f"countries whose sibling drops more than the unrelated countries (of {G})",
              float(sib_wins), ">=", float(int(np.ceil(0.75 * G)))),
        claim("sanity_ft_learned", "sanity: both fine-tuning arms learn the new NLU task (min accuracy)",
              metrics["ft_min_acc_min"], ">=", 0.9),
        claim("C5_finetune", "cultural drop after fine-tuning the richest layer's MLP minus the poorest layer's "
              "(mean over seeds)", c5, ">=", 0.05),
    ]
    metrics["wall_seconds"] = time.perf_counter() - t0
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

    t0 = time.perf_counter()
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

    evalsets = {"test": test, "neuron_split": neuron, "nlu": nlu}
    enc = {}
    for k, v in evalsets.items():
        prompts, _, gold, choices = _real_items(tok, v, cfg.real_format, letter_ids)
        enc[k] = (_real_batches(tok, prompts, bs), gold, choices)

    def evaluate(units=None):
        def one():
            return {k: float(np.concatenate([_correct(model, b, g[i * bs:(i + 1) * bs], ch[i * bs:(i + 1) * bs])
                                             for i, b in enumerate(bb)]).mean()) for k, (bb, g, ch) in enc.items()}

        if units is None:
            return one()
        with edit_unit_set(model, layout, units, factor=0.0):
            return one()

    clean = evaluate()
    supp = evaluate(general)
    rnd = [evaluate(random_units(layout, n_gen, seed=ctx.seed * 1000 + r)) for r in range(cfg.real_n_random)]
    metrics: dict[str, float] = {"n_units": float(D.shape[1]), "n_general": float(n_gen),
                                 "n_neuron_items": float(len(neuron)), "n_test_items": float(len(test)),
                                 "general_mlp": float(counts["mlp.gate"].sum())}
    for k in evalsets:
        metrics[f"acc_clean_{k}"] = clean[k]
        metrics[f"drop_{k}"] = clean[k] - supp[k]
        rd = np.array([clean[k] - r[k] for r in rnd])
        metrics[f"drop_random_mean_{k}"] = float(rd.mean())
        metrics[f"drop_random_max_{k}"] = float(rd.max())
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

    claims = [
        claim("sanity_R_clean_above_chance", "sanity: clean test-split accuracy above chance (0.25) + 0.1",
              clean["test"], ">=", 0.35),
        claim("R1_drop_vs_random", "test-split drop from suppressing culture-general units minus the largest "
              f"drop of {cfg.real_n_random} random sets", metrics["drop_test"] - metrics["drop_random_max_test"],
              ">", 0.0),
        claim("R1_nlu_kept", f"NLU proxy ({'antonyms' if cfg.real_format == 'cloze' else 'largest number'}) "
              "accuracy drop under the same suppression", metrics["drop_nlu"], "<=", 0.05, gated=False,
              detail="reported: the proxy shares the question format with the country questions"),
    ]
    metrics["wall_seconds"] = time.perf_counter() - t0
    note = (f"Gemma 3 270M ({cfg.real_format} format): {n_gen} culture-general units of {int(D.shape[1])} "
            f"({int(counts['mlp.gate'].sum())} MLP); an exercise of the pipeline on a real model, not a test of "
            "the paper")
    ctx.add_note(note)
    return Result(metrics={k: float(v) for k, v in metrics.items()}, claims=claims, notes=note)
