"""GNN Explanations that do not Explain and How to find Them (ICLR 2026, arXiv 2601.20815) — reproduction.

Red/blue counting graphs (label 1 iff more blue than red nodes) with grey distractor nodes wired into the
BA graph (label-irrelevant, so the honest explanation leaves a real part of the graph out) and one isolated
green and one isolated violet node. Two GSAT-style self-explainable GNNs (ACR-GNN extractor + linear classifier on the
selected nodes) reach near-perfect accuracy: (a) an honest one whose extractor was supervised to select
the red and blue nodes, and (b) a planted-degenerate one whose extractor selects green iff y = 1 and
violet iff y = 0, so its explanation is a single marker node that says nothing about how the label is
computed. Fixed-explanation metrics (Fid±, RFid±, CF-Fid, Suff/Nec) are compared between (a) and (b);
EST re-runs the whole model on random extensions of the explanation and must flag (b) but not (a).
End-to-end GSAT models test whether degeneracy emerges naturally, on the counting graphs and on a
BA + house/cycle graph-classification task (PyG's generator) where a shortcut exists (the BA base is a tree,
so the total degree tells house from cycle); the same task runs the metrics on an honest motif model.
Claims named ``ctrl_*`` / ``sanity_*`` are controls and sanity checks, counted apart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from iclr26.core import param
from iclr26.data.graphs import GREEN, VIOLET, ba_motif_graphs, color_count_graphs, split_indices
from iclr26.graphs.faithfulness import (
    cf_fidelity,
    est,
    explain,
    fidelity,
    plausibility_auroc,
    robust_fidelity,
    suff_nec,
)
from iclr26.graphs.segnn import SEGNN, pretrain_extractor, train_classifier, train_gsat
from iclr26.runs import Result, RunContext, claim
from iclr26.stats import Est, auroc, bootstrap, cluster_bootstrap, exact, paired_bootstrap

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Planted degenerate explanations on red/blue counting graphs with grey distractors and isolated\n"
    "green/violet markers: an honest and a degenerate GSAT-style SE-GNN, both ~100% accurate. Fid-, Fid+, RFid+-, CF-Fid and\n"
    "Suff/Nec rate the degenerate explanations as faithful as the honest ones; EST (keep the explanation,\n"
    "drop half of the rest, re-run the full model, worst case over K draws) rejects them. Plus natural\n"
    "GSAT training on both tasks and an honest model on a BA + house/cycle motif task from PyG's generator."
)

K_GRID = (1, 2, 5, 10, 20, 50)
WORKLOAD = "small"  # tiny GNNs: one thread (iclr26.core.threads); the `threads` field overrides it

HEADLINE = "C3_rej_gap"
# five training seeds at default (about 5 x 35 s quiet): every claim rests on trained SE-GNNs, and with three
# C3_rej_degenerate was held at --threads 1 but inconclusive at 2 (seed 0's model rejected 1.00 vs 0.63: another
# thread count is another trained model, so the t-interval over 3 seeds did not decide)
SEEDS = {"smoke": 1, "default": 5, "paper": 5}
_BLIND = ("a random one-node explanation on the honest model passes the same gate (the metric cannot tell it "
          "from the honest explanation either)")
# Fid-, RFid- and C2_fid_minus_abs are identities (0 for any SE-GNN's own explanation: its classifier reads only
# R) and C6 (rejection within the first K draws grows with K) too: reported, not gated, so not listed here
EXPECTED = {
    "C1_acc_sufficient": "held",
    "C1_acc_degenerate": "held",
    "C2_fid_plus": ("no power", "gap -0.054 [-0.076, -0.033] over 5 seeds; " + _BLIND + " (null gap 0)"),
    "C2_rfid_plus": ("no power", "gap 0.023 [0.016, 0.030]; " + _BLIND + " (null gap -0.31)"),
    "C2_cf_fid": ("no power", "gap -0.27 [-0.34, -0.19]; " + _BLIND + " (null gap -0.20)"),
    "C2_most_fooled": ("no power", "3 of 3 non-identity metrics fooled, and 3 of 3 null arms pass as well"),
    "C3_rej_degenerate": "held",
    "C3_rej_gap": "held",
    "C3_rej_sufficient": ("inconclusive", "with distractors wired in, EST rejects 0.095 [0.043, 0.147] of the honest "
                          "explanations (seeds 0.05-0.16; random same-size null 0.46 fails the gate)"),
    "C3_ba_motif_rej_honest": ("not held", "EST rejects 0.88 [0.70, 1.06] of the honest motif model's "
                               "explanations (seeds 0.65-1.00; EST-frozen 0.02): its extractor moves on perturbed "
                               "graphs"),
    "sanity_plant_sufficient": "held",
    "sanity_plant_degenerate": "held",
    "sanity_skip_rate": "held",
    "sanity_ba_motif_acc": "held",
}


@dataclass
class Config:
    n_graphs: int = param(1400, "red/blue counting graphs generated (train / val / test split below)",
                          low=20, high=1_000_000)
    n_train: int = param(1000, "training graphs", low=4, high=1_000_000)
    n_val: int = param(200, "validation graphs (held out, unused by training; the rest are the test set)",
                       low=0, high=1_000_000)
    n_min: int = param(3, "fewest red (and fewest blue) nodes per graph", low=1, high=1000)
    n_max: int = param(15, "most red (and most blue) nodes per graph", low=1, high=1000)
    ba_m: int = param(2, "Barabási-Albert edges per new coloured node (and per distractor node)", low=1, high=20)
    d_min: int = param(3, "fewest label-irrelevant distractor nodes wired into each counting graph", low=0,
                       high=1000)
    d_max: int = param(9, "most distractor nodes per counting graph (0 = none)", low=0, high=1000)
    hidden: int = param(32, "hidden width of the ACR-GNN extractor", low=1, high=1024)
    layers: int = param(2, "ACR-GNN layers of the extractor", low=1, high=8)
    epochs: int = param(40, "epochs of extractor pretraining, classifier training and GSAT training", low=1,
                        high=10_000)
    batch_size: int = param(64, "graphs per training batch", low=1, high=100_000)
    lr_extractor: float = param(1e-3, "Adam learning rate of extractor pretraining and GSAT training",
                                low=0.0, high=1.0, low_open=True)
    lr_classifier: float = param(5e-3, "Adam learning rate of the classifier on the frozen selection",
                                 low=0.0, high=1.0, low_open=True)
    natural_priors: list[float] = param([0.7], "GSAT Bernoulli priors r of the natural (end-to-end) models",
                                 min_len=0, max_len=8, elem_low=0.01, elem_high=0.99)
    ba_natural_priors: list[float] = param([0.7], "GSAT priors r of natural models on the BA + house/cycle task, "
                                           "where a shortcut exists (needs ba_graphs)", min_len=0, max_len=8,
                                           elem_low=0.01, elem_high=0.99)
    gsat_beta: float = param(1.0, "weight of the GSAT KL term", low=0.0, high=100.0)
    threshold: float = param(0.5, "hard explanation R = {v : s_v >= threshold}", low=0.0, high=1.0,
                             low_open=True, high_open=True)
    extra_thresholds: list[float] = param([0.3, 0.7], "further thresholds at which EST rejection is reported",
                                   min_len=0, max_len=8, elem_low=0.01, elem_high=0.99)
    est_k: int = param(50, "EST perturbations K per graph (the K grid of the figure is cut at this)", low=1,
                       high=10_000)
    p_node: float = param(0.5, "EST: probability of dropping each node outside R", low=0.0, high=1.0,
                          high_open=True)
    p_edge: float = param(0.5, "EST: probability of dropping each undirected edge not inside R", low=0.0,
                          high=1.0, high_open=True)
    metric_samples: int = param(10, "random draws per graph of RFid+-, CF-Fid and Suff/Nec", low=1, high=10_000)
    rfid_alpha_plus: float = param(0.1, "RFid+: probability of removing each node of R", low=0.0, high=1.0,
                                   low_open=True, high_open=True)
    rfid_alpha_minus: float = param(0.9, "RFid-: probability of removing each node outside R", low=0.0,
                                    high=1.0, low_open=True, high_open=True)
    ba_graphs: int = param(400, "BA + house/cycle graphs of the motif task (0 = skip it); 80% train", low=0,
                           high=1_000_000)
    ba_base: int = param(20, "BA base-graph nodes of the motif task", low=2, high=10_000)
    ba_epochs: int = param(100, "epochs of extractor pretraining and classifier training on the motif task",
                           low=1, high=10_000)
    threads: int = param(1, "torch / BLAS threads during the run (1 is fastest for these tiny GNNs)", low=1,
                         high=256)

    def validate(self) -> None:
        from iclr26.core.errors import UserError

        if self.n_train + self.n_val >= self.n_graphs:
            raise UserError(f"n_train={self.n_train} + n_val={self.n_val} must leave test graphs out of "
                            f"n_graphs={self.n_graphs}")  # fmt: skip
        if self.n_min > self.n_max:
            raise UserError(f"n_min={self.n_min} > n_max={self.n_max}")
        if self.d_min > self.d_max:
            raise UserError(f"d_min={self.d_min} > d_max={self.d_max}")
        if self.ba_graphs and self.ba_graphs < 10:
            raise UserError(f"ba_graphs={self.ba_graphs}: use 0 (skip) or at least 10")


PRESETS = {
    "smoke": {"n_graphs": 500, "n_train": 400, "n_val": 20, "d_min": 1, "d_max": 4, "epochs": 8, "est_k": 5, "metric_samples": 2,
              "natural_priors": [0.1], "ba_graphs": 20, "ba_base": 8, "ba_epochs": 5},
    "default": {},
    "paper": {"n_graphs": 5000, "n_train": 4000, "n_val": 500, "n_min": 5, "n_max": 50, "d_min": 5, "d_max": 30,
              "epochs": 100, "hidden": 64, "layers": 3, "est_k": 50, "metric_samples": 20, "ba_graphs": 2000,
              "natural_priors": [0.7, 0.1], "ba_natural_priors": [0.7, 0.3]},
}  # fmt: skip


def plan(cfg: Config) -> dict:
    """What a run with ``cfg`` needs and roughly costs (``iclr26 run degenerate-explanations --plan``)."""
    from iclr26 import plan as p

    def work(c: Config) -> tuple[float, float]:  # training and evaluation node-passes x layer cost
        nodes = c.n_min + c.n_max + (c.d_min + c.d_max) / 2  # mean red + blue + distractor nodes of a graph
        layer = c.hidden**2 * c.layers
        train = (c.n_train * nodes * c.epochs * (4 + len(c.natural_priors))
                 + c.ba_graphs * (c.ba_base + 5) * c.ba_epochs * (2 + len(c.ba_natural_priors))) * layer
        test = (c.n_graphs - c.n_train - c.n_val) * nodes * (c.est_k + 6 * c.metric_samples) * layer
        return train, test

    return {
        "needs": [p.package("torch_geometric", "torch-geometric")], "device": "cpu", "gpu_memory_gb": None,
        **p.cpu_time("degenerate-explanations", cfg, work, "graphs x nodes x epochs (training) and graphs x nodes x "
                     "perturbations (EST and the metrics) x layer cost, shares assumed 0.6 / 0.4", shares=(0.6, 0.4)),
        "notes": ["the planted red/blue counting graphs and BA motifs are generated; nothing is downloaded"],
        "reference": [
            p.Need("MNIST75sp, MUTAG, GraphSST2 (user-supplied files)", "data", None,
                   "PyG TUDataset / MNISTSuperpixels with a local root (https://chrsmrrs.github.io/datasets/)",
                   "spec §7: MNIST75sp with K = 50 means millions of forward passes: use a GPU there"),
        ],
    }


#: one-hot channel of the label-irrelevant distractor nodes (after R, B, G, V of ``color_count_graphs``)
DISTRACTOR = 4


def add_distractors(graphs: list, *, d_min: int, d_max: int, m: int = 2, seed: int = 0) -> list:
    """Copies of ``color_count_graphs`` graphs with ``n_D ~ U{d_min..d_max}`` grey distractor nodes wired in.

    Each distractor joins ``min(m, nodes so far)`` distinct nodes drawn uniformly among the coloured nodes and
    the distractors added before it, so the distractors are a connected part of the graph that the label
    ignores (it counts red against blue). They are inserted before the isolated green and violet markers,
    which stay the last two nodes. Features gain a fifth one-hot channel (``DISTRACTOR``); ``relevant`` stays
    red or blue, ``degenerate_target`` keeps its marker, and ``n_dist`` records ``n_D``. ``d_max = 0`` gives
    the graphs back with the fifth (empty) channel only. A function of ``seed`` alone."""
    from torch_geometric.data import Data
    from torch_geometric.utils import to_undirected

    rng = np.random.default_rng(seed)
    out = []
    for g in graphs:
        n = g.x.shape[0] - 2  # coloured nodes; the markers are the last two
        k = int(rng.integers(d_min, d_max + 1)) if d_max > 0 else 0
        new = []
        for j in range(k):
            pool = n + j
            for u in rng.choice(pool, size=min(m, pool), replace=False).tolist():
                new.append((n + j, u))
        ei = g.edge_index.clone()
        ei[ei >= n] += k  # the markers move behind the distractors (they have no edges, kept for safety)
        if new:
            ei = torch.cat([ei, to_undirected(torch.as_tensor(new, dtype=torch.long).T)], dim=1)
        x = torch.cat([g.x[:n], torch.zeros(k, 4), g.x[n:]])
        x = torch.cat([x, torch.zeros(n + k + 2, 1)], dim=1)
        x[n : n + k, DISTRACTOR] = 1.0
        rel, tgt = g.relevant, g.degenerate_target
        rel = torch.cat([rel[:n], torch.zeros(k, dtype=rel.dtype), rel[n:]])
        tgt = torch.cat([tgt[:n], torch.zeros(k, dtype=tgt.dtype), tgt[n:]])
        out.append(Data(x=x, edge_index=ei, y=g.y, relevant=rel, degenerate_target=tgt, n_red=g.n_red, n_blue=g.n_blue,
                        n_dist=torch.tensor([k])))  # fmt: skip
    return out


def _accuracy(probs: torch.Tensor, graphs: list) -> float:
    y = torch.cat([g.y for g in graphs])
    return float((probs.argmax(1) == y).float().mean())


def _gv_mass(scores: list) -> float:
    """Share of the total node-score mass on the green and violet nodes (the last two of each graph)."""
    tot = sum(float(s.sum()) for s in scores)
    gv = sum(float(s[-2:].sum()) for s in scores)
    return gv / tot if tot > 0 else float("nan")


def _evaluate(model, test: list, cfg: Config, seed: int, truth: str = "relevant", markers: bool = True,
              full: bool = True) -> dict:
    """All metrics of one model on the test graphs (means in ``metrics``, per-graph values in ``per_graph``
    for the intervals over test graphs), plus per-graph EST for the figures. ``full=False`` (the natural and
    motif models, whose claims use none of them) leaves out Suff/Nec, the TV distance, the extra thresholds
    and the markers-kept diagnostic."""
    probs, scores, masks = explain(model, test, threshold=cfg.threshold)
    y = torch.cat([g.y for g in test])
    pg: dict[str, np.ndarray] = {"correct": (probs.argmax(1) == y).float().numpy()}
    m: dict = {"acc": _accuracy(probs, test)}
    finite = all(bool(torch.isfinite(s).all()) for s in scores)  # a diverged training gives NaN scores
    m["plausibility_auroc"] = plausibility_auroc(scores, [g[truth] for g in test]) if finite else float("nan")
    if markers:
        m["gv_mass"] = _gv_mass(scores)
        pg["gv"] = np.array([float(s[-2:].sum()) for s in scores])
        pg["tot"] = np.array([float(s.sum()) for s in scores])
    m["mean_R_size"] = float(np.mean([float(r.sum()) for r in masks]))
    fx = dict(fidelity(model, test, threshold=cfg.threshold, per_graph=True))
    fx.update(robust_fidelity(model, test, alpha_plus=cfg.rfid_alpha_plus, alpha_minus=cfg.rfid_alpha_minus,
                              samples=cfg.metric_samples, threshold=cfg.threshold, seed=seed, per_graph=True))  # fmt: skip
    fx["cf_fid"] = cf_fidelity(model, test, samples=cfg.metric_samples, threshold=cfg.threshold, seed=seed,
                               per_graph=True)  # fmt: skip
    if full:
        fx.update(suff_nec(model, test, samples=cfg.metric_samples, threshold=cfg.threshold, seed=seed,
                           per_graph=True))  # fmt: skip
    for k, v in fx.items():
        pg[k] = v.numpy().astype(np.float64)
        m[k] = float(v.mean())
    kw = dict(K=cfg.est_k, p_node=cfg.p_node, p_edge=cfg.p_edge, seed=seed)
    e = est(model, test, threshold=cfg.threshold, **kw)
    m["est_score"], m["est_rejection"], m["est_skip_rate"] = e.mean_score(), e.rejection_rate(), e.skip_rate
    pg["rejected"] = _per_graph_rejection(e)
    pg["skipped"] = e.skipped.float().numpy()
    pg["rejected_by_K"] = np.stack([_per_graph_rejection(e, k) for k in range(1, cfg.est_k + 1)], axis=1)
    for k in K_GRID:
        if k <= cfg.est_k:
            m[f"est_rejection_K{k}"] = e.rejection_rate(k)
    for c, v in e.per_class().items():
        m[f"est_rejection_class{c}"] = v
    fr = est(model, test, threshold=cfg.threshold, frozen=True, **kw)
    m["est_frozen_rejection"] = fr.rejection_rate()
    pg["frozen_rejected"] = _per_graph_rejection(fr)
    if not full:
        return {"metrics": m, "est": e, "scores": scores, "per_graph": pg, "truth": [g[truth] for g in test],
                "masks": masks}
    tv = est(model, test, threshold=cfg.threshold, distance="tv", **kw)
    m["est_tv_score"] = tv.mean_score()
    for t in cfg.extra_thresholds:
        m[f"est_rejection_thr{t:g}"] = est(model, test, threshold=t, **kw).rejection_rate()
    if markers:
        # diagnostic: the same test with both marker nodes always kept, so no perturbed graph lacks a marker
        # (training never showed one); what is left is the re-counting of the thinned coloured nodes
        keep = [r.clone() for r in masks]
        for r in keep:
            r[-2:] = True
        m["est_rejection_markers_kept"] = est(model, test, masks=[k if r.any() else r for k, r in
                                                                  zip(keep, masks, strict=True)], **kw).rejection_rate()  # fmt: skip
    return {"metrics": m, "est": e, "scores": scores, "per_graph": pg, "truth": [g[truth] for g in test],
            "masks": masks}


def _per_graph_rejection(e, K: int | None = None) -> np.ndarray:
    """1/0 per test graph whether EST rejected it within the first ``K`` draws; NaN where it was skipped."""
    k = e.changes.shape[1] if K is None else K
    r = e.flipped[:, :k].any(1).float().numpy().astype(np.float64)
    r[e.skipped.numpy()] = np.nan
    return r


def _random_masks(test: list, sizes: list[int], seed: int) -> list[torch.Tensor]:
    """Uniformly random explanations with the given node counts (one per graph)."""
    rng = np.random.default_rng(seed)
    out = []
    for g, k in zip(test, sizes, strict=True):
        m = torch.zeros(g.x.shape[0], dtype=torch.bool)
        m[rng.choice(g.x.shape[0], size=max(1, min(k, g.x.shape[0])), replace=False)] = True
        out.append(m)
    return out


def run(cfg: Config, ctx: RunContext) -> Result:
    seed = ctx.seed
    graphs = add_distractors(color_count_graphs(cfg.n_graphs, n_min=cfg.n_min, n_max=cfg.n_max, m=cfg.ba_m, seed=seed),
                             d_min=cfg.d_min, d_max=cfg.d_max, m=cfg.ba_m, seed=seed + 4)  # fmt: skip
    tr, _, te = split_indices(cfg.n_graphs, cfg.n_train, cfg.n_val, seed=seed + 1)
    train, test = [graphs[i] for i in tr], [graphs[i] for i in te]

    def new_model(classifier: str = "linear", d_in: int = 5) -> SEGNN:
        torch.manual_seed(seed)  # same initial weights for every variant, from ctx.seed
        return SEGNN(d_in, 2, hidden=cfg.hidden, layers=cfg.layers, classifier=classifier, threshold=cfg.threshold)

    tk = dict(epochs=cfg.epochs, batch_size=cfg.batch_size, seed=seed)
    models: dict[str, SEGNN] = {}
    for name, target in (("sufficient", "relevant"), ("degenerate", "degenerate_target")):
        mdl = new_model()
        pretrain_extractor(mdl, train, target, lr=cfg.lr_extractor, **tk)
        train_classifier(mdl, train, lr=cfg.lr_classifier, **tk)
        models[name] = mdl
    for r in cfg.natural_priors:
        mdl = new_model()
        train_gsat(mdl, train, r=r, beta=cfg.gsat_beta, lr=cfg.lr_extractor, **tk)
        models[f"natural_r{r:g}"] = mdl

    ev = {name: _evaluate(mdl, test, cfg, seed + 10_000, full=name in ("sufficient", "degenerate"))
          for name, mdl in models.items()}
    metrics: dict[str, float] = {}
    for name, e in ev.items():
        for k, v in e["metrics"].items():
            metrics[f"{name}_{k}"] = float(v)

    # null arm of the C2/C3 claims: a random one-node explanation (the degenerate model's size) for the
    # honest model, scored by every fixed-explanation metric and by EST: a metric that rates it as faithful
    # as the honest explanation cannot tell anything apart. (Random masks of the honest model's own size are
    # useless: its R is every node but the two markers, so a random mask of that size is nearly the same set.)
    rnd = _random_masks(test, [1] * len(test), seed + 55)
    A_mdl = models["sufficient"]
    null_pg = dict(fidelity(A_mdl, test, masks=rnd, per_graph=True))
    null_pg.update(robust_fidelity(A_mdl, test, alpha_plus=cfg.rfid_alpha_plus, alpha_minus=cfg.rfid_alpha_minus,
                                   samples=cfg.metric_samples, masks=rnd, seed=seed + 10_000, per_graph=True))  # fmt: skip
    null_pg["cf_fid"] = cf_fidelity(A_mdl, test, samples=cfg.metric_samples, masks=rnd, seed=seed + 10_000,
                                    per_graph=True)  # fmt: skip
    null_pg = {k: v.numpy().astype(np.float64) for k, v in null_pg.items()}
    for k in ("fid_minus", "fid_plus", "rfid_minus", "rfid_plus", "cf_fid"):
        metrics[f"random_mask_{k}"] = float(null_pg[k].mean())
    # null arm of C3_rej_sufficient (EST's false-positive side): random explanations of the honest R's own size
    # per graph. With the distractors wired in, R (red + blue) leaves out a real part of the graph, so a random
    # set of that size swaps coloured nodes for distractors, and EST's perturbations then thin the count
    sizes = [int(r.sum()) for r in ev["sufficient"]["masks"]]
    e_rnd = est(A_mdl, test, K=cfg.est_k, p_node=cfg.p_node, p_edge=cfg.p_edge,
                masks=_random_masks(test, sizes, seed + 57), seed=seed + 10_000)  # fmt: skip
    null_pg["rejected"] = _per_graph_rejection(e_rnd)
    metrics["random_same_size_est_rejection"] = e_rnd.rejection_rate()
    metrics["random_same_size_mean_R"] = float(np.mean(sizes))
    # null arm of C1: the constant majority-class predictor (training majority) on the same test graphs
    ytr = np.array([int(g.y) for g in train])
    maj = int(np.bincount(ytr, minlength=2).argmax())
    null_pg["majority_correct"] = np.array([float(int(g.y) == maj) for g in test])
    metrics["majority_class_acc"] = float(null_pg["majority_correct"].mean())

    # the BA + house/cycle motif task: an honest planted model with a GNN classifier
    if cfg.ba_graphs:
        bg = ba_motif_graphs(cfg.ba_graphs, n_base=cfg.ba_base, seed=seed + 3)
        n_tr = int(0.8 * len(bg))
        mdl = new_model("gnn", d_in=2)
        tb = dict(tk, epochs=cfg.ba_epochs)
        pretrain_extractor(mdl, bg[:n_tr], "relevant", lr=cfg.lr_extractor, **tb)
        train_classifier(mdl, bg[:n_tr], lr=cfg.lr_classifier, **tb)
        bt = bg[n_tr:]
        ba = _evaluate(mdl, bt, cfg, seed + 20_000, markers=False, full=False)
        for k, v in ba["metrics"].items():
            metrics[f"ba_motif_{k}"] = float(v)
        # null arm of C3_ba_motif_rej_honest: EST of random explanations of the model's own R sizes on the
        # same motif model and graphs (an explanation unrelated to the motif that EST should reject)
        sizes = [int((s >= cfg.threshold).sum()) for s in ba["scores"]]
        e_bnull = est(mdl, bt, K=cfg.est_k, p_node=cfg.p_node, p_edge=cfg.p_edge, seed=seed + 20_000,
                      masks=_random_masks(bt, sizes, seed + 56))  # fmt: skip
        ba["per_graph"]["null_rejected"] = _per_graph_rejection(e_bnull)
        metrics["ba_motif_random_mask_est_rejection"] = e_bnull.rejection_rate()
        ev_ba = ba
        # natural (end-to-end GSAT) models on the motif task, which has a shortcut: the base is a BA tree of
        # ba_base nodes, so the total degree alone tells a house (6 edges) from a 5-cycle (5 edges), and an
        # extractor with a global readout can read the label without looking at the motif
        for r in cfg.ba_natural_priors:
            nm = new_model("gnn", d_in=2)
            train_gsat(nm, bg[:n_tr], r=r, beta=cfg.gsat_beta, lr=cfg.lr_extractor, **tb)
            nat = _evaluate(nm, bt, cfg, seed + 20_000, markers=False, full=False)
            rec = np.array([float(R[g.relevant].float().mean()) for R, g in zip(nat["masks"], bt, strict=True)])
            nat["per_graph"]["motif_recall"] = rec
            nat["metrics"]["motif_recall"] = float(rec.mean())
            for k, v in nat["metrics"].items():
                metrics[f"ba_natural_r{r:g}_{k}"] = float(v)
            ev_ba[f"natural_r{r:g}"] = nat
    else:
        ev_ba = None

    claims = _claims(cfg, metrics, ev, null_pg, seed, ev_ba)
    _figures(ctx, cfg, ev, test)
    # a rate over zero graphs (every explanation empty, so EST skipped them all) is undefined: left out
    undefined = sorted(k for k, v in metrics.items() if not np.isfinite(v))
    metrics = {k: v for k, v in metrics.items() if k not in undefined}
    notes = [f"Test graphs: {len(test)}; EST K={cfg.est_k}, p_node={cfg.p_node}, p_edge={cfg.p_edge}, "
             f"threshold {cfg.threshold}."]  # fmt: skip
    for r in cfg.natural_priors:
        mass = ev[f"natural_r{r:g}"]["metrics"]["gv_mass"]
        if not mass >= 0.5:
            notes.append(f"Natural GSAT r={r:g}: {mass:.0%} of the score mass on G/V; degeneracy not observed "
                         "at this scale.")  # fmt: skip
    if undefined:
        notes.append("Undefined (every explanation empty, EST skipped all graphs), left out of the metrics: "
                     + ", ".join(undefined) + ".")  # fmt: skip
    return Result(metrics=metrics, claims=claims, notes=" ".join(notes))


# (metric, direction, label): direction +1 = higher means more faithful, -1 = lower means more faithful
FIXED_METRICS = (("fid_minus", -1, "Fid-"), ("fid_plus", +1, "Fid+"), ("rfid_minus", -1, "RFid-"),
                 ("rfid_plus", +1, "RFid+"), ("cf_fid", +1, "CF-Fid"))  # fmt: skip


#: metrics that are 0 for any SE-GNN's own explanation by construction: its classifier reads only R, so
#: removing (some of) the nodes outside R cannot change its output
IDENTITIES = ("fid_minus", "rfid_minus")


def _rate(x: np.ndarray, *, seed: int) -> Est:
    """Mean of per-graph 0/1 (NaN = skipped, left out) with a bootstrap interval over test graphs."""
    return bootstrap(x, np.nanmean, unit="graph", seed=seed)


def _claims(cfg: Config, metrics: dict, ev: dict, null_pg: dict, seed: int, ba: dict | None = None) -> list:
    A, B = ev["sufficient"]["metrics"], ev["degenerate"]["metrics"]
    pa, pb = ev["sufficient"]["per_graph"], ev["degenerate"]["per_graph"]
    first_nat = f"natural_r{cfg.natural_priors[0]:g}" if cfg.natural_priors else "sufficient"
    pref = ev[first_nat]["per_graph"]  # an SE-GNN that was never planted: null arm of the identities
    maj = _rate(null_pg["majority_correct"], seed=seed)
    cl = []
    for name, p in (("sufficient", pa), ("degenerate", pb)):
        cl.append(claim(f"C1_acc_{name}", f"C1: the planted-{name} SE-GNN reaches >= 0.97 test accuracy",
                        _rate(p["correct"], seed=seed), ">=", 0.97, null=maj, trained=True,
                        null_what="constant majority-class predictor on the same test graphs"))  # fmt: skip
    fooled, fooled_null, fooled_all = 0, 0, 0
    for key, direction, label in FIXED_METRICS:
        # how much less faithful (b) looks than (a) by this metric; <= 0.1 means "rated at least as faithful"
        def gap(a, b, d=direction):
            return float(np.mean(b - a)) if d < 0 else float(np.mean(a - b))

        est_gap = paired_bootstrap(pa[key], pb[key], lambda x, y, g=gap: g(x, y), unit="graph", seed=seed)
        if key in IDENTITIES:
            null = paired_bootstrap(pa[key], pref[key], lambda x, y, g=gap: g(x, y), unit="graph", seed=seed)
            what = (f"{first_nat} (never planted) in place of the degenerate model: {label} of any SE-GNN's own "
                    "explanation is 0 by construction (its classifier reads only R)")
        else:
            null = paired_bootstrap(pa[key], null_pg[key], lambda x, y, g=gap: g(x, y), unit="graph", seed=seed)
            what = "a random one-node explanation on the honest model in place of the degenerate one"
        fooled_all += est_gap.value <= 0.1
        ident = key in IDENTITIES
        if not ident:  # the identities are fooled by any SE-GNN: they do not count towards C2_most_fooled
            fooled += est_gap.value <= 0.1
            fooled_null += null.value <= 0.1
        cl.append(claim(f"C2_{key}", f"C2{' (identity, reported)' if ident else ''}: {label} rates the degenerate "
                        "explanations at least as faithful as the honest ones, up to 0.1", est_gap, "<=", 0.1,
                        null=null, null_what=what, trained=True, gated=not ident,
                        detail=f"honest {A[key]:.3f}, degenerate {B[key]:.3f}"))  # fmt: skip
    # an identity too: Fid- of an SE-GNN's own explanation is 0 whatever the extractor selects
    cl.append(claim("C2_fid_minus_abs", "C2 (identity, reported): Fid- of the degenerate model <= 0.05 (R looks "
                    "sufficient)", _rate(pb["fid_minus"], seed=seed), "<=", 0.05,
                    null=_rate(pref["fid_minus"], seed=seed), gated=False, trained=True,
                    null_what=f"Fid- of {first_nat} (never planted): 0 by construction for any SE-GNN"))  # fmt: skip
    n_inf = len(FIXED_METRICS) - len(IDENTITIES)
    cl.append(claim("C2_most_fooled", f"C2: most (>= {n_inf // 2 + 1} of {n_inf}) of the fixed-explanation metrics "
                    "that can fail (Fid+, RFid+, CF-Fid; the identities Fid-, RFid- left out) are fooled",
                    exact(float(fooled), why="count"), ">=", n_inf // 2 + 1,
                    null=exact(float(fooled_null), why="count"), trained=True,
                    null_what="the same count for the C2 null arms (a random one-node explanation on the honest "
                    "model)", detail=f"{fooled_all} of {len(FIXED_METRICS)} with the identities"))  # fmt: skip
    for key, direction, label in (("suff", -1, "Suff"), ("nec", +1, "Nec")):
        gap = (B[key] - A[key]) if direction < 0 else (A[key] - B[key])
        cl.append(claim(f"C2_{key}", f"C2 (not in the spec's list, reported): {label} rates the degenerate "
                        "explanations at least as faithful, up to 0.1", gap, "<=", 0.1, gated=False,
                        detail=f"honest {A[key]:.3f}, degenerate {B[key]:.3f}"))  # fmt: skip
    frozen_b = _rate(pb["frozen_rejected"], seed=seed)
    cl.append(claim("C3_rej_degenerate", f"C3: EST (K={cfg.est_k}) rejects >= 50% of the degenerate "
                    "explanations", _rate(pb["rejected"], seed=seed), ">=", 0.5, null=frozen_b, trained=True,
                    null_what="EST-frozen (node scores copied from G, extractor not re-run) on the degenerate model",
                    detail=f"mean EST score {B['est_score']:.3f}"))  # fmt: skip

    def gap_nan(x, y):
        ok = np.isfinite(x) & np.isfinite(y)
        return float(np.mean(y[ok] - x[ok])) if ok.any() else float("nan")

    cl.append(claim("C3_rej_gap", "C3: EST rejection of the degenerate model exceeds the honest one's by >= 0.3",
                    paired_bootstrap(pa["rejected"], pb["rejected"], gap_nan, unit="graph", seed=seed), ">=", 0.3,
                    null=paired_bootstrap(pa["frozen_rejected"], pb["frozen_rejected"], gap_nan, unit="graph",
                                          seed=seed),
                    null_what="the same gap for EST-frozen (extractor not re-run)", trained=True))  # fmt: skip
    cl.append(claim("C3_rej_sufficient", "C3: EST rejects <= 10% of the honest explanations",
                    _rate(pa["rejected"], seed=seed), "<=", 0.1, null=_rate(null_pg["rejected"], seed=seed),
                    null_what="EST of random explanations of the honest R's own size (per graph) on the honest "
                    "model: they swap coloured nodes for distractors, so EST must reject them", trained=True,
                    detail=f"mean EST score {A['est_score']:.3f}, mean |R| {A['mean_R_size']:.1f}"))  # fmt: skip
    for r in cfg.natural_priors:
        M, p = ev[f"natural_r{r:g}"]["metrics"], ev[f"natural_r{r:g}"]["per_graph"]
        if M["gv_mass"] >= 0.5:
            cl.append(claim(f"C5_natural_r{r:g}", f"C5: the natural GSAT model (r={r:g}) put >= 50% of its score mass "
                            "on G/V, so EST must reject >= 50% of it", _rate(p["rejected"], seed=seed), ">=", 0.5,
                            null=_rate(p["frozen_rejected"], seed=seed), null_what="EST-frozen on the same model",
                            trained=True, detail=f"G/V mass {M['gv_mass']:.2f}, acc {M['acc']:.3f}"))  # fmt: skip
        else:
            cl.append(claim(f"C5_natural_r{r:g}", f"C5 (emergence, reported): the natural GSAT model (r={r:g}) puts "
                            ">= 50% of its score mass on G/V", M["gv_mass"], ">=", 0.5, gated=False,
                            detail=f"not observed at this scale; EST rejection {M['est_rejection']:.3f}, "
                                   f"acc {M['acc']:.3f}"))  # fmt: skip
    ks = [k for k in K_GRID if k <= cfg.est_k]

    def min_step(rej_by_k: np.ndarray) -> float:
        grid = [float(np.nanmean(rej_by_k[:, k - 1])) for k in ks]
        return float(np.diff(grid).min()) if len(grid) > 1 else 0.0

    def step_est(rej_by_k: np.ndarray) -> Est:
        return cluster_bootstrap(lambda i: min_step(rej_by_k[i]), np.arange(len(rej_by_k)), unit="graph",
                                 n_resamples=500, seed=seed)

    # an identity (rejection within the first K draws can only grow with K), so it is reported, not gated
    cl.append(claim("C6_monotone_in_K", "C6 (identity, reported): EST rejection of the degenerate model is "
                    f"non-decreasing in K (min step over K in {tuple(ks)})", step_est(pb["rejected_by_K"]), ">=", 0.0,
                    null=step_est(pa["rejected_by_K"]), trained=True, gated=False,
                    null_what="the honest model: rejection within the first K draws is monotone in K by construction",
                    detail=", ".join(f"{B[f'est_rejection_K{k}']:.2f}" for k in ks)))  # fmt: skip
    # ---- sanity checks (preconditions, not findings)
    gid = np.concatenate([np.full(len(t), i) for i, t in enumerate(ev["sufficient"]["truth"])])
    sc = torch.cat(ev["sufficient"]["scores"]).numpy()
    tt = torch.cat(ev["sufficient"]["truth"]).numpy()
    cl.append(claim("sanity_plant_sufficient", "sanity: the honest extractor selects red/blue (node-score AUROC "
                    ">= 0.95)", cluster_bootstrap(lambda i: auroc(sc[i], tt[i]), gid, unit="graph", n_resamples=500,
                                                  seed=seed), ">=", 0.95, trained=True,
                    why="precondition of C2/C3: the honest plant worked"))  # fmt: skip
    cl.append(claim("sanity_plant_degenerate", "sanity: the degenerate extractor puts >= 90% of its score mass "
                    "on G/V", bootstrap((pb["gv"], pb["tot"]), lambda g, t: float(g.sum() / t.sum()), paired=True,
                                        unit="graph", seed=seed), ">=", 0.9, trained=True,
                    why="precondition of C2/C3: the degenerate plant worked"))  # fmt: skip
    cl.append(claim("sanity_skip_rate", "sanity: EST skips (empty R) <= 5% of graphs for both planted models",
                    bootstrap((pa["skipped"], pb["skipped"]), lambda a, b: float(max(a.mean(), b.mean())), paired=True,
                              unit="graph", seed=seed), "<=", 0.05, trained=True,
                    why="precondition of C3: EST rates (almost) every graph"))  # fmt: skip
    if ba is not None:
        pm = ba["per_graph"]
        cl.append(claim("sanity_ba_motif_acc", "sanity: the honest motif model on BA + house/cycle graphs reaches "
                        ">= 0.9 test accuracy", _rate(pm["correct"], seed=seed), ">=", 0.9, trained=True,
                        why="precondition of C3_ba_motif_rej_honest: the motif model is accurate"))  # fmt: skip
        # the false-positive side of C3 on the second task: the spec's honest-model gate (rejection <= 0.1)
        cl.append(claim("C3_ba_motif_rej_honest", "C3 (false-positive side, BA + house/cycle): EST rejects <= 10% "
                        "of the honest motif model's explanations", _rate(pm["rejected"], seed=seed), "<=", 0.1,
                        null=_rate(pm["null_rejected"], seed=seed), trained=True,
                        null_what="EST of random explanations of the same sizes on the same motif model",
                        detail=f"plausibility AUROC {metrics['ba_motif_plausibility_auroc']:.3f}, EST-frozen "
                               f"{metrics['ba_motif_est_frozen_rejection']:.3f}"))  # fmt: skip
        # C5 on the task with a shortcut. Fixed before any number was seen: a natural motif model is degenerate
        # when it is accurate (>= 0.9) while its explanation holds less than half of the motif nodes on average
        # (the analogue of ">= 50% of the mass on G/V"); then EST must reject >= 50% of its explanations
        for r in cfg.ba_natural_priors:
            nat = ba[f"natural_r{r:g}"]
            M, p = nat["metrics"], nat["per_graph"]
            if M["acc"] >= 0.9 and M["motif_recall"] < 0.5:
                cl.append(claim(f"C5_ba_natural_r{r:g}", f"C5 (BA + house/cycle): the natural GSAT model (r={r:g}) "
                                "is accurate while its explanation misses most of the motif, so EST must reject "
                                ">= 50% of it", _rate(p["rejected"], seed=seed), ">=", 0.5,
                                null=_rate(p["frozen_rejected"], seed=seed), null_what="EST-frozen on the same model",
                                trained=True, detail=f"motif recall {M['motif_recall']:.2f}, acc {M['acc']:.3f}"))  # fmt: skip
            else:
                cl.append(claim(f"C5_ba_natural_r{r:g}", f"C5 (emergence on BA + house/cycle, reported): the natural "
                                f"GSAT model (r={r:g}) is accurate (>= 0.9) with an explanation that holds < 50% of "
                                "the motif nodes", M["motif_recall"], "<", 0.5, gated=False,
                                detail=f"not observed: acc {M['acc']:.3f}, mean |R| {M['mean_R_size']:.1f}, EST "
                                       f"rejection {M['est_rejection']:.3f}, EST-frozen "
                                       f"{M['est_frozen_rejection']:.3f}"))  # fmt: skip
    return cl


def _figures(ctx: RunContext, cfg: Config, ev: dict, test: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(ev)
    keys = [("fid_minus", "Fid−"), ("fid_plus", "Fid+"), ("rfid_minus", "RFid−"), ("rfid_plus", "RFid+"),
            ("cf_fid", "CF-Fid"), ("suff", "Suff"), ("nec", "Nec"), ("est_score", "EST score"),
            ("est_rejection", "EST rej."), ("est_frozen_rejection", "EST-frozen rej.")]  # fmt: skip
    fig, ax = plt.subplots(figsize=(11, 3.8))
    w = 0.8 / len(names)
    for j, n in enumerate(names):
        vals = [ev[n]["metrics"].get(k, np.nan) for k, _ in keys]
        ax.bar(np.arange(len(keys)) + j * w, vals, w, label=n)
    ax.set_xticks(np.arange(len(keys)) + 0.4 - w / 2, [lab for _, lab in keys], rotation=20)
    ax.set_ylabel("value")
    ax.legend(fontsize=8)
    ax.set_title("Faithfulness metrics per SE-GNN (↓ better: Fid−, RFid−, Suff, EST; ↑ better: Fid+, RFid+, CF-Fid, Nec)",
                 fontsize=9)  # fmt: skip
    ctx.save_figure(fig, "metrics", "Every metric per model; fixed-explanation metrics barely separate the "
                    "honest from the degenerate model, EST does.")  # fmt: skip

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ks = [k for k in K_GRID if k <= cfg.est_k]
    for n in names:
        ax.plot(ks, [ev[n]["metrics"][f"est_rejection_K{k}"] for k in ks], "o-", label=n)
    ax.set_xscale("log")
    ax.set_xlabel("K (perturbations)")
    ax.set_ylabel("EST rejection")
    ax.legend(fontsize=8)
    ctx.save_figure(fig, "rejection_vs_k", "EST rejection against the number of perturbations K.")

    fig, ax = plt.subplots(figsize=(5, 3.5))
    gap = np.array([abs(int(g.n_blue) - int(g.n_red)) for g in test])
    for n in ("sufficient", "degenerate"):
        s = ev[n]["est"].score.numpy()
        ax.scatter(gap + (0.15 if n == "degenerate" else -0.15), s, s=8, alpha=0.6, label=n)
    ax.set_xlabel("|n_B − n_R|")
    ax.set_ylabel("per-graph EST score")
    ax.legend(fontsize=8)
    ctx.save_figure(fig, "est_vs_margin", "Per-graph EST score against the count margin: the degenerate "
                    "model's explanation fails most where the counts are close.")  # fmt: skip

    _draw_examples(ctx, ev, test, plt)


def _layout(g) -> np.ndarray:
    n = g.x.shape[0]
    try:
        import networkx as nx

        G = nx.Graph()
        G.add_nodes_from(range(n - 2))
        G.add_edges_from(g.edge_index.t().tolist())
        pos = nx.spring_layout(G, seed=0)
        xy = np.array([pos[i] for i in range(n - 2)])
    except ImportError:  # a circle when networkx is absent
        a = np.linspace(0, 2 * np.pi, n - 2, endpoint=False)
        xy = np.c_[np.cos(a), np.sin(a)]
    return np.r_[xy, [[1.5, 0.4], [1.5, -0.4]]]  # G and V to the right


def _draw_examples(ctx: RunContext, ev: dict, test: list, plt) -> None:
    colours = {0: "tab:red", 1: "tab:blue", GREEN: "tab:green", VIOLET: "tab:purple", DISTRACTOR: "0.6"}
    ys = [int(g.y) for g in test]
    margin = [abs(int(g.n_blue) - int(g.n_red)) for g in test]
    picks = [ys.index(1) if 1 in ys else 0, ys.index(0) if 0 in ys else 0, int(np.argmin(margin))]
    fig, axes = plt.subplots(2, len(picks), figsize=(4 * len(picks), 7), squeeze=False)
    for row, n in enumerate(("sufficient", "degenerate")):
        for col, i in enumerate(picks):
            g, s, ax = test[i], ev[n]["scores"][i].numpy(), axes[row, col]
            xy = _layout(g)
            for u, v in g.edge_index.t().tolist():
                if u < v:
                    ax.plot(*xy[[u, v]].T, color="0.75", lw=0.6, zorder=1)
            c = [colours[int(k)] for k in g.x.argmax(1)]
            ax.scatter(*xy.T, c=c, s=40 + 160 * s, edgecolors=["k" if v >= 0.5 else "none" for v in s],
                       linewidths=1.5, zorder=2)  # fmt: skip
            ax.set_title(f"{n}: n_R={int(g.n_red)}, n_B={int(g.n_blue)}, y={int(g.y)}", fontsize=9)
            ax.axis("off")
    ctx.save_figure(fig, "examples", "Test graphs: node colour = feature, size = node score, black ring = in R. "
                    "The honest model selects every red and blue node, the degenerate one a single marker.")  # fmt: skip


__all__ = ["Config", "PRESETS", "DESCRIPTION", "HEADLINE", "SEEDS", "EXPECTED", "run", "plan"]
