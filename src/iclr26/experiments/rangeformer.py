"""RangeFormer: transformers for linear algebra (ICLR 2026, OpenReview GBkRMi3qjD) — reproduction of a RECONSTRUCTION.

Only the abstract is available, so the model (iclr26.architectures.rangeformer) is our reading of its four
interventions (sketch embedding with a learned projection, linear attention, looping, structured pre-training)
and every claim is checked on that reconstruction. Task: ``y = log det(A/s)/n`` of SPD matrices. A LAWT-style
entry-token encoder trained on Wishart matrices (Charton/W) is compared with RangeFormer-lite trained on
Wishart (RF/W) and on the structured mixture (RF/S): in distribution, on four offline stand-ins for Matrix
Market (Hilbert + λI, Lehmer/min/Pascal, Matérn-1/2 at unseen length scales, subgraphs of real networks),
at unseen sizes n ∈ {12, 16}, and against the test-time loop count; stochastic Lanczos quadrature (SLQ) is the
non-learned reference line. Downstream: a GP length-scale search on 1-D data with the learned log-det.
Claims named ``ctrl_*`` / ``sanity_*`` are controls and sanity checks, counted apart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from iclr26.architectures.rangeformer import (
    LOSSES,
    ChartonEncoder,
    RangeFormer,
    as_batch,
    slq_logdet,
    train_logdet,
)
from iclr26.core import param
from iclr26.core.errors import UserError
from iclr26.core.parallel import parallel_map
from iclr26.core.seed import seeded_torch
from iclr26.data import spd_matrices as spd
from iclr26.runs import Result, RunContext, claim
from iclr26.stats import Est, bootstrap, cluster_bootstrap, paired_bootstrap, spearman

log = logging.getLogger(__name__)

DESCRIPTION = (
    "RangeFormer (reconstruction from the abstract): log-determinants of SPD matrices. A LAWT-style entry-token\n"
    "encoder trained on Wishart matrices against RangeFormer-lite (sketch embedding, linear attention, looping)\n"
    "trained on Wishart or on a structured mixture (KMS, AR(2), banded, low rank + diagonal, RBF kernels, graph\n"
    "Laplacians); tested in distribution, on offline Matrix-Market stand-ins (Hilbert, Lehmer/min/Pascal,\n"
    "Matérn at unseen length scales, real-graph Laplacians), at unseen sizes and against test-time loops;\n"
    "SLQ as the reference line; a GP length-scale search with the learned log-det."
)

WORKLOAD = "small"  # small transformers on <= 256 tokens: one thread per arm, arms in parallel processes
OOD_SETS = ("hilbert", "special", "matern_ood_ell", "real_graphs")

HEADLINE = "C2_rf_s_vs_charton_ood"
SEEDS = {"smoke": 1, "default": 1, "paper": 3}
_ONE_SEED = ("on one training seed (the engine's rule for trained claims); the seed spread measured with --seeds 3 is "
             "too large for one seed to decide, and three seeds do not decide it either (docs)")
#: seed-to-seed SDs measured at the default preset over training seeds 0, 1, 2 (``iclr26 run rangeformer --seeds 3``,
#: docs/rangeformer.md, "Three training seeds"); only claims whose SD is under a quarter of the seed-0 margin
SEED_SPREAD = {"C5_loops": 0.0072}  # -0.197 / -0.190 / -0.205
EXPECTED = {
    "sanity_charton_w_learned": ("not held", "Charton/W reaches acc@5% 0.345 [0.280, 0.415] in distribution (bar "
                                 "0.7; the training-mean constant 0.370): after 1,500 steps it has not learned"),
    "C1_ood_collapse": ("inconclusive", "OOD / in-distribution ratio 0.93 [0.74, 1.19] of an unlearned Charton/W "
                        "(OOD matrices pooled; would be not held) " + _ONE_SEED),
    "C1_spearman": ("no power", "Charton/W's error vs spectral distance Spearman 0.69 [0.64, 0.74] >= 0.5, but the "
                    "Wishart training-mean constant passes the same gate (0.69)"),
    "C2_rf_s_vs_charton_ood": ("inconclusive", "RF/S - Charton/W OOD acc@5% -0.056 [-0.127, 0.012] over 425 "
                               "pooled OOD matrices, bar 0.2 (would be not held) " + _ONE_SEED),
    "C3_data_intervention": ("inconclusive", "RF/S - RF/W OOD acc@5% +0.021 [-0.040, 0.085] straddles 0"),
    "C4_size_generalisation": ("no power", "RF/S unseen-size / seen-size ratio 0.89 [0.75, 1.06] >= 0.7, but the "
                               "Wishart training-mean constant's ratio is 1.75 (its normalised log-det target "
                               "concentrates as n grows; the structured mean's is 0.51)"),
    "C5_loops": ("not held", "RF/S at L = 16 minus L = 8: -0.197 [-0.238, -0.157], bar -0.05; decided on one seed "
                 "because the measured seed SD (0.007: -0.197 / -0.190 / -0.205) is under a quarter of the margin. "
                 "Loops beyond the 8 trained ones hurt"),
    "ctrl_charton_w_vs_constant": ("not held", "Charton/W - training-mean constant in distribution -0.025 [-0.085, "
                                   "0.035] (bar 0.2): the LAWT-style baseline has not learned more than the mean"),
    "ctrl_rf_s_vs_constant_id": "held",
}


@dataclass
class Config:
    steps: int = param(1500, "AdamW steps per trained model", low=1, high=1_000_000)
    batch: int = param(64, "matrices per training step (fresh samples every step)", low=2, high=4096)
    lr: float = param(2e-3, "peak AdamW learning rate (cosine schedule)", low=0.0, high=0.1, low_open=True)
    weight_decay: float = param(0.01, "AdamW weight decay", low=0.0, high=1.0)
    loss: str = param("rel_mse", "regression loss on y: mse, huber, or rel_mse (error / max(1,|y|), the units "
                      "of the acc@5% tolerance)", choices=tuple(LOSSES))
    n_min: int = param(4, "smallest training size n", low=2, high=64)
    n_max: int = param(8, "largest training size n (also the largest in-distribution test size)", low=2, high=64)
    size_ood: list[int] = param([12, 16], "unseen test sizes n (Charton-like has max_n = max of these and n_max)",
                                min_len=0, max_len=4, elem_low=2, elem_high=64)
    test_count: int = param(200, "matrices per random test set", low=4, high=100_000)
    rf_d: int = param(64, "RangeFormer token width d", low=4, high=1024)
    rf_k: int = param(16, "RangeFormer sketch columns k", low=1, high=256)
    rf_heads: int = param(4, "RangeFormer attention heads (must divide rf_d)", low=1, high=64)
    rf_feature_map: str = param("elu", "linear-attention feature map φ", choices=("elu", "identity"))
    train_loops_min: int = param(4, "fewest loops drawn per training step", low=1, high=64)
    train_loops_max: int = param(8, "most loops drawn per training step (also the default test-time L)", low=1,
                                 high=64)
    loops_grid: list[int] = param([1, 2, 4, 8, 16], "test-time loop counts of the loop sweep (must include 8 "
                                  "and 16 for C5)", min_len=1, max_len=10, elem_low=1, elem_high=128)
    charton_d: int = param(32, "Charton-like encoder width", low=4, high=512)
    charton_heads: int = param(4, "Charton-like attention heads (must divide charton_d)", low=1, high=32)
    charton_layers: int = param(3, "Charton-like encoder layers", low=1, high=12)
    eval_draws: int = param(4, "fixed sketches averaged at evaluation", low=1, high=64)
    slq_steps: int = param(8, "SLQ Lanczos steps m", low=1, high=256)
    slq_probes: int = param(8, "SLQ Rademacher probes p", low=1, high=1024)
    extended: bool = param(False, "also train Charton/S and the RF/S ablations (softmax attention; 8 distinct "
                                  "blocks, no looping)")
    gp_points: int = param(12, "points of the 1-D GP length-scale search (0 = skip it)", low=0, high=64)
    gp_grid: int = param(15, "length scales on the log grid [0.05, 2] of the GP search", low=3, high=200)
    gp_noise: float = param(0.05, "GP noise variance σ² of the length-scale search", low=1e-4, high=1.0)
    threads: int = param(1, "torch / BLAS threads per process (1 is fastest for these small models)", low=1,
                         high=256)

    def validate(self) -> None:
        if self.n_min > self.n_max:
            raise UserError(f"n_min={self.n_min} > n_max={self.n_max}")
        if self.train_loops_min > self.train_loops_max:
            raise UserError(f"train_loops_min={self.train_loops_min} > train_loops_max={self.train_loops_max}")
        for name, d, h in (("rf", self.rf_d, self.rf_heads), ("charton", self.charton_d, self.charton_heads)):
            if d % h:
                raise UserError(f"{name}_d={d} must be divisible by {name}_heads={h}")


PRESETS = {
    "smoke": {"steps": 12, "batch": 16, "test_count": 12, "rf_d": 16, "rf_k": 8, "charton_d": 16,
              "charton_layers": 1, "eval_draws": 1, "loops_grid": [1, 8, 16], "gp_grid": 5, "size_ood": [12]},
    "default": {},
    "paper": {"steps": 20000, "batch": 128, "n_max": 16, "size_ood": [32, 64], "rf_d": 128, "rf_k": 32,
              "charton_d": 64, "charton_layers": 4, "test_count": 1000, "extended": True, "gp_points": 50},
}  # fmt: skip


def plan(cfg: Config) -> dict:
    """What a run with ``cfg`` needs and roughly costs (``iclr26 run rangeformer --plan``); nothing is run."""
    from iclr26 import plan as p

    def work(c: Config) -> tuple[float, float]:  # training of every model; evaluation over sizes and loop counts
        models = c.rf_d**2 * c.train_loops_max + 2 * c.charton_d**2 * c.charton_layers
        train = c.steps * c.batch * c.n_max**2 * models * (2 if c.extended else 1)
        evals = c.test_count * (1 + len(c.size_ood)) * max([c.n_max, *c.size_ood]) ** 2 * c.rf_d**2 * sum(c.loops_grid)
        return train, evals

    return {
        "needs": [], "device": "cpu", "gpu_memory_gb": None,
        **p.cpu_time("rangeformer", cfg, work, "steps x batch x n^2 x model cost (share assumed 0.85) and test "
                     "matrices x sizes x loops (0.15)", shares=(0.85, 0.15)),
        "notes": ["the SPD matrices are generated; the experiment runs on the CPU"],
        "reference": [p.Need("Matrix Market .mtx files (user-supplied)", "data", None,
                             "https://math.nist.gov/MatrixMarket/ (spec §7: n in the thousands is feasible on a GPU)")],
    }


def accuracy(pred: np.ndarray, y: np.ndarray, tol: float = 0.05) -> float:
    """acc@5%: share of ``|ŷ − y| <= tol · max(1, |y|)``."""
    return float(np.mean(np.abs(pred - y) <= tol * np.maximum(1.0, np.abs(y))))


def _random_set(family: str, rng: np.random.Generator, count: int, sizes: list[int]) -> list[np.ndarray]:
    """``count`` matrices of ``family`` (normalised), spread evenly over ``sizes``."""
    out: list[np.ndarray] = []
    per = [count // len(sizes) + (i < count % len(sizes)) for i in range(len(sizes))]
    for n, c in zip(sizes, per, strict=True):
        got: list[np.ndarray] = []
        while len(got) < c:
            a, _ = spd.sample(family, rng, c - len(got), n)
            got.extend(a)
        out.extend(got)
    return out


def _test_sets(cfg: Config, seed: int) -> dict[str, list[np.ndarray]]:
    rng = np.random.default_rng(seed + 100)
    ns = list(range(cfg.n_min, cfg.n_max + 1))
    sets = {"id_wishart": _random_set("wishart", rng, cfg.test_count, ns),
            "id_structured": _random_set("structured", rng, cfg.test_count, ns)}
    for k, v in spd.ood_sets(rng, count=cfg.test_count, sizes=(cfg.n_min, cfg.n_max)).items():
        sets[k] = [spd.normalise(a)[0] for a in v]
    for n in cfg.size_ood:
        for fam in ("wishart", "structured"):
            sets[f"size{n}_{fam}"] = _random_set(fam, rng, max(4, cfg.test_count // 2), [n])
    return sets


def _jobs(cfg: Config) -> list[str]:
    jobs = ["charton_W", "rf_W", "rf_S"]
    if cfg.extended:
        jobs += ["charton_S", "rf_S_softmax", "rf_S_unlooped"]
    return jobs


def _build(job: str, cfg: Config) -> torch.nn.Module:
    if job.startswith("charton"):
        max_n = max([cfg.n_max, *cfg.size_ood])
        return ChartonEncoder(d=cfg.charton_d, heads=cfg.charton_heads, layers=cfg.charton_layers, max_n=max_n)
    kw = dict(d=cfg.rf_d, k=cfg.rf_k, heads=cfg.rf_heads, feature_map=cfg.rf_feature_map,
              loops=cfg.train_loops_max, train_loops=(cfg.train_loops_min, cfg.train_loops_max))
    if job.endswith("softmax"):
        kw["attn"] = "softmax"
    if job.endswith("unlooped"):
        kw["tied"] = False
    return RangeFormer(**kw)


def _predict(model: torch.nn.Module, mats: list[np.ndarray], cfg: Config, seed: int, loops: int | None = None
             ) -> np.ndarray:
    out = np.empty(len(mats))
    by_n: dict[int, list[int]] = {}
    for i, a in enumerate(mats):
        by_n.setdefault(a.shape[0], []).append(i)
    for n, idx in sorted(by_n.items()):  # one batch per size: no padding needed
        a, mask = as_batch(np.stack([mats[i] for i in idx]))
        if isinstance(model, RangeFormer):
            p = model.predict(a, mask, loops=loops, draws=cfg.eval_draws, seed=seed + n)
        else:
            p = model.predict(a, mask)
        out[idx] = p.numpy()
    return out


def _run_job(job: str, common: dict) -> dict:
    with seeded_torch(common["seed"] + 7):  # the same initial weights for every run of this arm
        return _run_job_seeded(job, common["cfg"], common["sets"], common["seed"])


def _run_job_seeded(job: str, cfg: Config, sets: dict, seed: int) -> dict:
    model = _build(job, cfg)
    fam = "wishart" if job.split("_")[1] == "W" else "structured"
    hist = train_logdet(model, lambda rng, b, n: spd.sample(fam, rng, b, n), steps=cfg.steps, batch=cfg.batch,
                        sizes=(cfg.n_min, cfg.n_max), lr=cfg.lr, weight_decay=cfg.weight_decay, loss=cfg.loss,
                        seed=seed + 11)  # fmt: skip
    preds = {name: _predict(model, mats, cfg, seed + 500) for name, mats in sets.items()}
    loops = {}
    if isinstance(model, RangeFormer) and model.cfg.tied:
        for L in cfg.loops_grid:
            loops[L] = {name: _predict(model, sets[name], cfg, seed + 500, loops=L)
                        for name in ("id_wishart", "id_structured", *OOD_SETS)}  # fmt: skip
    return {"job": job, "preds": preds, "loops": loops, "final_loss": float(np.mean(hist[-max(1, len(hist) // 20):])),
            "model": model if job == "rf_S" else None}


def _slq_predict(mats: list[np.ndarray], cfg: Config, seed: int) -> np.ndarray:
    out = np.empty(len(mats))
    by_n: dict[int, list[int]] = {}
    for i, a in enumerate(mats):
        by_n.setdefault(a.shape[0], []).append(i)
    for n, idx in sorted(by_n.items()):
        ld = slq_logdet(np.stack([mats[i] for i in idx]), steps=cfg.slq_steps, probes=cfg.slq_probes, seed=seed + n)
        out[idx] = ld.numpy() / n
    return out


def _hits(pred: np.ndarray, y: np.ndarray, tol: float = 0.05) -> np.ndarray:
    """Per matrix: 1.0 where ``|ŷ − y| <= tol · max(1, |y|)`` (the rows :func:`accuracy` averages)."""
    return (np.abs(pred - y) <= tol * np.maximum(1.0, np.abs(y))).astype(np.float64)


class _Rows:
    """The test matrices of some sets as one table of rows, for intervals over matrices: ``acc(hits, idx)`` is
    the accuracy over the rows ``idx`` (a resample) of those sets, pooled, so each set counts by its number of
    matrices (issue 28: a mean of per-set accuracies gave Hilbert's 10 matrices the weight of 100 others)."""

    def __init__(self, keys: list[str], sizes: dict[str, int]):
        self.keys = list(keys)
        self.lab = np.concatenate([np.full(sizes[k], i) for i, k in enumerate(self.keys)])

    def stack(self, per_set: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([per_set[k] for k in self.keys])

    def acc(self, hits: np.ndarray, idx: np.ndarray, keys: list[str] | None = None) -> float:
        lab, h = self.lab[idx], hits[idx]
        want = [self.keys.index(k) for k in (keys or self.keys)]
        if not all((lab == i).any() for i in want):
            return float("nan")  # a resample that lost a whole set
        return float(h[np.isin(lab, want)].mean())

    def est(self, stat: Callable[[np.ndarray], float], seed: int) -> Est:
        return cluster_bootstrap(stat, np.arange(self.lab.size), unit="matrix", seed=seed)


def run(cfg: Config, ctx: RunContext) -> Result:
    seed = ctx.seed
    if 8 not in cfg.loops_grid or 16 not in cfg.loops_grid:
        ctx.add_note("loops_grid lacks 8 or 16: C5 is not checked.")
    sets = _test_sets(cfg, seed)
    truth = {k: np.array([spd.logdet_target(a) for a in v]) for k, v in sets.items()}
    log.info("test sets built: %s", {k: len(v) for k, v in sets.items()})

    jobs = _jobs(cfg)
    workers = None if cfg.steps * cfg.batch >= 20_000 else 1  # a pool costs more than smoke-sized arms
    res = {r["job"]: r for r in parallel_map(_run_job, jobs, workers=workers,
                                             common={"cfg": cfg, "sets": sets, "seed": seed}, desc="arms")}  # fmt: skip
    metrics: dict[str, float] = {}
    acc: dict[str, dict[str, float]] = {}
    for job in jobs:
        r = res[job]
        acc[job] = {k: accuracy(r["preds"][k], truth[k]) for k in sets}
        for k in sets:
            metrics[f"{job}_acc_{k}"] = acc[job][k]
            n = np.array([a.shape[0] for a in sets[k]])
            metrics[f"{job}_mae_logdet_{k}"] = float(np.mean(n * np.abs(r["preds"][k] - truth[k])))
        w = np.array([len(sets[k]) for k in OOD_SETS], dtype=float)
        metrics[f"{job}_mae_logdet_ood"] = float(np.dot([metrics[f"{job}_mae_logdet_{k}"] for k in OOD_SETS], w)
                                                 / w.sum())
        metrics[f"{job}_final_train_loss"] = r["final_loss"]
    # reference predictors: SLQ, the training-mean constant, and the Hadamard (log-diagonal) estimate
    rng = np.random.default_rng(seed + 3)
    ref: dict[str, dict[str, np.ndarray]] = {"slq": {k: _slq_predict(v, cfg, seed + 900) for k, v in sets.items()}}
    for fam, tag in (("wishart", "W"), ("structured", "S")):
        ys = np.concatenate([spd.sample(fam, rng, 256, n)[1] for n in range(cfg.n_min, cfg.n_max + 1)])
        ref[f"const_{tag}"] = {k: np.full(len(v), ys.mean()) for k, v in sets.items()}
    ref["diag"] = {k: np.array([np.log(np.diag(a)).mean() for a in v]) for k, v in sets.items()}
    for name, preds in ref.items():
        acc[name] = {k: accuracy(preds[k], truth[k]) for k in sets}
        for k in sets:
            metrics[f"{name}_acc_{k}"] = acc[name][k]
    size_keys = [k for k in sets if k.startswith("size")]
    for name in acc:
        n_ood = np.array([len(sets[k]) for k in OOD_SETS], dtype=float)  # pooled: each set weighs by its size
        metrics[f"{name}_acc_ood"] = float(np.dot([acc[name][k] for k in OOD_SETS], n_ood) / n_ood.sum())
        if size_keys:
            metrics[f"{name}_acc_size_ood"] = float(np.mean([acc[name][k] for k in size_keys]))
        metrics[f"{name}_acc_id_both"] = float(np.mean([acc[name]["id_wishart"], acc[name]["id_structured"]]))
    # loop sweep: mean acc over the in-distribution structured set and the four OOD sets
    loop_acc: dict[str, dict[int, float]] = {}
    for job in jobs:
        if res[job]["loops"]:
            loop_acc[job] = {L: float(np.mean([accuracy(p[k], truth[k]) for k in ("id_structured", *OOD_SETS)]))
                             for L, p in res[job]["loops"].items()}  # fmt: skip
            for L, v in loop_acc[job].items():
                metrics[f"{job}_acc_loops{L}"] = v
    # C1: Charton/W error against the distance of the spectrum summary from its training distribution
    rng = np.random.default_rng(seed + 4)
    train_w = [a for n in range(cfg.n_min, cfg.n_max + 1) for a in spd.sample("wishart", rng, 256, n)[0]]
    feats = np.array([spd.spectrum_summary(a) for a in train_w])
    mu, cov = feats.mean(0), np.cov(feats.T) + 1e-9 * np.eye(4)
    prec = np.linalg.inv(cov)
    pooled = ("id_wishart", "id_structured", *OOD_SETS)
    dist = np.concatenate([[float(np.sqrt((f - mu) @ prec @ (f - mu))) for f in map(spd.spectrum_summary, sets[k])]
                           for k in pooled])  # fmt: skip
    rel_err = np.concatenate([np.abs(res["charton_W"]["preds"][k] - truth[k]) / np.maximum(1, np.abs(truth[k]))
                              for k in pooled])  # fmt: skip
    metrics["charton_W_spearman_err_dist"] = spearman(rel_err, dist)
    # the same for the training-mean constant (C1's null arm: its error also grows with the distance)
    const_err = np.concatenate([np.abs(ref["const_W"][k] - truth[k]) / np.maximum(1, np.abs(truth[k])) for k in pooled])
    metrics["const_W_spearman_err_dist"] = spearman(const_err, dist)
    gp = _gp_search(cfg, res["rf_S"]["model"], seed) if cfg.gp_points else None
    if gp:
        metrics.update(gp["metrics"])
    hits = {name: {k: _hits(p[k], truth[k]) for k in sets} for name, p in
            [*((j, res[j]["preds"]) for j in jobs), *ref.items()]}  # fmt: skip
    loop_hits = {L: {k: _hits(p[k], truth[k]) for k in p} for L, p in res["rf_S"]["loops"].items()}
    claims = _claims(cfg, metrics, acc, loop_acc, hits, loop_hits, (rel_err, const_err, dist), seed)
    _figures(ctx, cfg, acc, loop_acc, sets, truth, res, dist, rel_err, gp)
    notes = ("Reconstruction: only the RangeFormer abstract is available; the model, training distribution and "
             "thresholds follow our spec (docs/rangeformer.md), not the paper. Test sets: "
             + ", ".join(f"{k} {len(v)}" for k, v in sets.items()) + ".")  # fmt: skip
    return Result(metrics=metrics, claims=claims, notes=notes)


def _gp_search(cfg: Config, model: RangeFormer, seed: int) -> dict:
    """Pick the RBF length scale of a GP on 1-D data by the negative log marginal likelihood
    ``½ yᵀK⁻¹y + ½ log det K`` with the exact log-det, RF/S's learned one, and SLQ (the solve is exact)."""
    rng = np.random.default_rng(seed + 8)
    x = np.sort(rng.uniform(0, 1, cfg.gp_points))
    f = np.sin(6 * x) + 0.5 * np.cos(14 * x)
    yv = f + np.sqrt(cfg.gp_noise) * rng.standard_normal(cfg.gp_points)
    grid = np.geomspace(0.05, 2.0, cfg.gp_grid)
    ks = np.stack([np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * ell**2)) + cfg.gp_noise * np.eye(len(x))
                   for ell in grid])  # [G, n, n]
    quad = np.array([yv @ np.linalg.solve(k, yv) for k in ks])
    exact = torch.linalg.slogdet(torch.as_tensor(ks)).logabsdet.numpy()
    learned = model.logdet(ks, draws=cfg.eval_draws, seed=seed).numpy()
    slq = slq_logdet(ks, steps=cfg.slq_steps, probes=cfg.slq_probes, seed=seed).numpy()
    nll = {name: 0.5 * (quad + ld) for name, ld in (("exact", exact), ("rf_S", learned), ("slq", slq))}
    best = {k: int(np.argmin(v)) for k, v in nll.items()}
    m = {"gp_ell_exact": float(grid[best["exact"]])}
    for k in ("rf_S", "slq"):
        m[f"gp_ell_{k}"] = float(grid[best[k]])
        m[f"gp_grid_steps_off_{k}"] = float(abs(best[k] - best["exact"]))
        m[f"gp_nll_regret_{k}"] = float(nll["exact"][best[k]] - nll["exact"][best["exact"]])
        m[f"gp_logdet_mae_{k}"] = float(np.mean(np.abs(nll[k] - nll["exact"]) * 2))
    return {"metrics": m, "grid": grid, "nll": nll}


def _claims(cfg: Config, metrics: dict, acc: dict, loop_acc: dict, hits: dict, loop_hits: dict,
            errs: tuple[np.ndarray, np.ndarray, np.ndarray], seed: int) -> list:
    """Intervals resample test matrices (each set's accuracy is a mean over its matrices; multi-set accuracies
    pool the matrices, so each set weighs by its size). Every claim on a learned model rests on one trained model (``trained=True``)."""
    cw = acc["charton_W"]
    cw_ood, rs_ood, rw_ood = metrics["charton_W_acc_ood"], metrics["rf_S_acc_ood"], metrics["rf_W_acc_ood"]
    sizes = {k: len(v) for k, v in hits["charton_W"].items()}
    ood = _Rows(list(OOD_SETS), sizes)
    H = {name: ood.stack(h) for name, h in hits.items()}

    def diff(a: str, b: str):
        return lambda i: ood.acc(H[a], i) - ood.acc(H[b], i)

    c1 = _Rows(["id_wishart", *OOD_SETS], sizes)
    H1 = {name: c1.stack(h) for name, h in hits.items()}

    def collapse(name: str):
        def stat(i: np.ndarray) -> float:
            den = c1.acc(H1[name], i, ["id_wishart"])
            return c1.acc(H1[name], i, list(OOD_SETS)) / den if den > 0 else float("nan")
        return stat

    rel_err, const_err, dist = errs
    cl = [
        claim("sanity_charton_w_learned", "sanity (gate): Charton/W reaches acc@5% >= 0.7 in distribution, so "
              "its failures elsewhere are not a failure to learn",
              bootstrap(hits["charton_W"]["id_wishart"], unit="matrix", seed=seed), ">=", 0.7,
              why="precondition on this run's Charton/W: C1 reads its OOD collapse"),
        claim("C1_ood_collapse", "C1: Charton/W's acc@5% on the OOD stand-ins is <= 0.5x its in-distribution "
              "value (ratio)", c1.est(collapse("charton_W"), seed), "<=", 0.5, null=c1.est(collapse("slq"), seed),
              null_what="SLQ (m = 8, p = 8), a non-learned estimator with no training distribution", trained=True,
              detail=f"OOD {cw_ood:.3f}, in distribution {cw['id_wishart']:.3f}"),
        claim("C1_spearman", "C1: Charton/W's error grows with the distance of the spectrum from its training "
              "distribution (Spearman over all n <= n_max test matrices)",
              bootstrap((rel_err, dist), spearman, paired=True, unit="matrix", seed=seed, n_resamples=1000), ">=", 0.5,
              null=bootstrap((const_err, dist), spearman, paired=True, unit="matrix", seed=seed, n_resamples=1000),
              null_what="the Wishart training-mean constant (learns nothing but the mean)", trained=True),
        claim("C2_rf_s_vs_charton_ood", "C2: RF/S acc@5% on the OOD stand-ins exceeds Charton/W's by >= 0.2",
              ood.est(diff("rf_S", "charton_W"), seed), ">=", 0.2, null=ood.est(diff("diag", "charton_W"), seed),
              null_what="the log-diagonal (Hadamard) estimate in RF/S's place", trained=True,
              detail=f"RF/S {rs_ood:.3f}, Charton/W {cw_ood:.3f}, diag {metrics['diag_acc_ood']:.3f}"),
        claim("C3_data_intervention", "C3: structured pre-training alone helps OOD: RF/S > RF/W on the OOD "
              "stand-ins", ood.est(diff("rf_S", "rf_W"), seed), ">", 0.0, null=ood.est(diff("const_S", "const_W"), seed),
              null_what="the same data switch for the training-mean constant (structured mean - Wishart mean)",
              trained=True, detail=f"RF/S {rs_ood:.3f}, RF/W {rw_ood:.3f}"),
    ]  # fmt: skip
    size_keys = [k for k in acc["rf_S"] if k.startswith("size")]
    if size_keys:
        small = metrics["rf_S_acc_id_both"]
        big = metrics["rf_S_acc_size_ood"]
        c4 = _Rows(["id_wishart", "id_structured", *size_keys], sizes)
        H4 = {name: c4.stack(h) for name, h in hits.items()}

        def ratio(name: str):
            def stat(i: np.ndarray) -> float:
                den = c4.acc(H4[name], i, ["id_wishart", "id_structured"])
                return c4.acc(H4[name], i, size_keys) / den if den > 0 else float("nan")
            return stat

        # null: the training-mean constant of either family, the one with the larger ratio (the Wishart mean's
        # accuracy grows with n because the normalised log-det concentrates)
        const = max(("const_W", "const_S"), key=lambda k: metrics[f"{k}_acc_size_ood"]
                    / max(metrics[f"{k}_acc_id_both"], 1e-9))
        cl.append(claim("C4_size_generalisation", f"C4: RF/S acc@5% at n in {cfg.size_ood} is >= 0.7x its "
                        f"accuracy at n <= {cfg.n_max} (same families W and S; ratio)", c4.est(ratio("rf_S"), seed),
                        ">=", 0.7, null=c4.est(ratio(const), seed),
                        null_what=f"the training-mean constant ({const}; the larger ratio of the W and S means, same "
                        "sets)", trained=True,
                        detail=f"n <= {cfg.n_max}: {small:.3f}, unseen sizes: {big:.3f}; constant "
                        f"{metrics[f'{const}_acc_id_both']:.3f} -> {metrics[f'{const}_acc_size_ood']:.3f}"))  # fmt: skip
        cl.append(claim("C4_charton_size_context", "C4 context (by construction, reported): Charton/W has no "
                        f"trained positions beyond {cfg.n_max}; its accuracy at unseen sizes",
                        metrics["charton_W_acc_size_ood"], "<=", 0.5 * cw["id_wishart"], gated=False))  # fmt: skip
    la = loop_acc.get("rf_S", {})
    if 8 in la and 16 in la:
        c5 = _Rows(["id_structured", *OOD_SETS], sizes)
        HL = {L: c5.stack(h) for L, h in loop_hits.items()}
        lo = min(la)

        def change(a: int, b: int):
            return lambda i: c5.acc(HL[a], i) - c5.acc(HL[b], i)

        null = c5.est(change(lo, 8), seed) if lo < 8 else Est(float("nan"), float("nan"), float("nan"), "matrix")
        cl.append(claim("C5_loops", "C5: more test-time loops do not hurt: RF/S acc@5% (ID-S + OOD sets) at "
                        "L = 16 >= at L = 8 - 0.05", c5.est(change(16, 8), seed), ">=", -0.05, null=null,
                        null_what=f"RF/S at L = {lo} against L = 8 (if fewer loops cost < 5 points too, the loop "
                        "count does not matter and 'more loops do not hurt' is empty)", trained=True,
                        detail=", ".join(f"L={k}: {v:.3f}" for k, v in sorted(la.items()))))  # fmt: skip
    if 8 in la and min(la) < 8:
        lo = min(la)
        cl.append(claim("C5_loops_improve", f"C5 (reported): RF/S improves from L = {lo} to L = 8", la[8] - la[lo],
                        ">", 0.0, gated=False))  # fmt: skip
    # controls: the learned models beat the training-mean constant (the diag control is C2's null arm)
    cl.append(claim("ctrl_charton_w_vs_constant", "control: Charton/W beats the training-mean constant in "
                    "distribution by >= 0.2 (it learned more than the mean)",
                    paired_bootstrap(hits["charton_W"]["id_wishart"], hits["const_W"]["id_wishart"], unit="matrix",
                                     seed=seed), ">=", 0.2,
                    why="precondition on this run's Charton/W: it learned more than the mean"))  # fmt: skip
    cl.append(claim("ctrl_rf_s_vs_constant_id", "control: RF/S beats the structured training-mean constant in "
                    "distribution by >= 0.1",
                    paired_bootstrap(hits["rf_S"]["id_structured"], hits["const_S"]["id_structured"], unit="matrix",
                                     seed=seed), ">=", 0.1,
                    why="precondition on this run's RF/S: it learned more than the mean"))  # fmt: skip
    cl.append(claim("sanity_slq_reference", "sanity (reported): SLQ (m=8, p=8) acc@5% on the OOD stand-ins, the "
                    "non-learned reference line", metrics["slq_acc_ood"], ">=", 0.0, gated=False))  # fmt: skip
    if "gp_grid_steps_off_rf_S" in metrics:
        cl.append(claim("gp_rf_s_choice", "downstream (reported): the GP length scale chosen with RF/S's log-det "
                        "is within one grid step of the exact choice", metrics["gp_grid_steps_off_rf_S"], "<=", 1,
                        gated=False, detail=f"exact ell {metrics['gp_ell_exact']:.3f}, RF/S "
                        f"{metrics['gp_ell_rf_S']:.3f}, SLQ {metrics['gp_ell_slq']:.3f}"))  # fmt: skip
    return cl


def _figures(ctx: RunContext, cfg: Config, acc: dict, loop_acc: dict, sets: dict, truth: dict, res: dict,
             dist: np.ndarray, rel_err: np.ndarray, gp: dict | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [*_jobs(cfg), "slq", "diag", "const_W", "const_S"]
    cols = list(sets)
    mat = np.array([[acc[r][c] for c in cols] for r in rows])
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(cols), 0.9 + 0.4 * len(rows)))
    im = ax.imshow(mat, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    for i in range(len(rows)):
        for j in range(len(cols)):
            ax.text(j, i, f"{mat[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="w" if mat[i, j] < 0.6 else "k")
    fig.colorbar(im, ax=ax, label="acc@5%")
    ctx.save_figure(fig, "accuracy_heatmap", "acc@5% of log det(A/s)/n by model (rows) and test set (columns).")

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for fam, ls in (("wishart", "-"), ("structured", "--")):
        for job in ("charton_W", "rf_W", "rf_S"):
            by_n: dict[int, list[bool]] = {}
            for key in (f"id_{fam}", *[f"size{n}_{fam}" for n in cfg.size_ood]):
                p, y = res[job]["preds"][key], truth[key]
                for a, pi, yi in zip(sets[key], p, y, strict=True):
                    by_n.setdefault(a.shape[0], []).append(abs(pi - yi) <= 0.05 * max(1, abs(yi)))
            ns = sorted(by_n)
            ax.plot(ns, [np.mean(by_n[n]) for n in ns], ls, marker="o", label=f"{job} on {fam}")
    ax.axvline(cfg.n_max + 0.5, color="grey", lw=0.8)
    ax.set_xlabel("n (training sizes left of the line)")
    ax.set_ylabel("acc@5%")
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "accuracy_vs_size", "acc@5% against matrix size on the Wishart (solid) and structured "
                    "(dashed) families.")  # fmt: skip

    if loop_acc:
        fig, ax = plt.subplots(figsize=(4.5, 3.4))
        for job, la in loop_acc.items():
            ls = sorted(la)
            ax.plot(ls, [la[L] for L in ls], "o-", label=job)
        ax.axvspan(cfg.train_loops_min, cfg.train_loops_max, color="grey", alpha=0.15, label="training L")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("test-time loops L")
        ax.set_ylabel("acc@5% (ID-S + OOD sets)")
        ax.legend(fontsize=8)
        ctx.save_figure(fig, "accuracy_vs_loops", "acc@5% against the test-time loop count.")

    fig, ax = plt.subplots(figsize=(4.5, 3.4))
    ax.scatter(dist, rel_err, s=6, alpha=0.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Mahalanobis distance of the log-spectrum summary from Wishart training")
    ax.set_ylabel("Charton/W |ŷ−y| / max(1,|y|)")
    ctx.save_figure(fig, "charton_error_vs_distance", "Charton/W error against distance to its training "
                    "distribution (all n <= n_max test matrices).")  # fmt: skip

    if gp:
        fig, ax = plt.subplots(figsize=(4.5, 3.4))
        for name, v in gp["nll"].items():
            ax.plot(gp["grid"], v, "o-" if name == "exact" else ".--", label=name)
        ax.set_xscale("log")
        ax.set_xlabel("RBF length scale ℓ")
        ax.set_ylabel("negative log marginal likelihood (+ const)")
        ax.legend(fontsize=8)
        ctx.save_figure(fig, "gp_lengthscale", "GP length-scale search: NLL with the exact, RF/S and SLQ log-det.")
