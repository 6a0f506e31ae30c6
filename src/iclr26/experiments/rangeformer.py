"""RangeFormer: transformers for linear algebra (ICLR 2026, OpenReview GBkRMi3qjD) — reproduction of a RECONSTRUCTION.

Only the abstract is available, so the model (iclr26.architectures.rangeformer) is our reading of its four
interventions (sketch embedding with a learned projection, linear attention, looping, structured pre-training)
and every claim is checked on that reconstruction. Task: ``y = log det(A/s)/n`` of SPD matrices. A LAWT-style
entry-token encoder trained on Wishart matrices (Charton/W) is compared with RangeFormer-lite trained on
Wishart (RF/W) and on the structured mixture (RF/S): in distribution, on four offline stand-ins for Matrix
Market (Hilbert + λI, Lehmer/min/Pascal, Matérn-1/2 at unseen length scales, subgraphs of real networks),
at unseen sizes n ∈ {12, 16}, and against the test-time loop count; stochastic Lanczos quadrature (SLQ) is the
non-learned reference line. Every claim is scored as skill against the trivial predictors (the two
training-mean constants and the log-diagonal estimate: ``1 - MAE / MAE_trivial`` per set, multi-set numbers
weighted by set size), and a trivial predictor in the model's place is the null arm (issue 28). Downstream: a GP
length-scale search on 1-D data with the learned log-det. Claims named ``ctrl_*`` / ``sanity_*`` are controls and
sanity checks, counted apart.
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
from iclr26.stats import Est, bootstrap, cluster_bootstrap, spearman

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
#: seed-to-seed SDs of the skill-scored claims measured at the default preset over training seeds 0, 1, 2
#: (``iclr26 run rangeformer --seeds 3``, docs/rangeformer.md, "Results with skill scores"); only claims whose SD is
#: under a quarter of the seed-0 margin are listed
SEED_SPREAD = {"C3_data_intervention": 0.0917}  # -0.741 / -0.916 / -0.782
_GATE = "the spec's validity gate fails (Charton/W acc@5% 0.345 < 0.7), so C1 is set aside: "
EXPECTED = {
    "sanity_charton_w_learned": ("not held", "Charton/W acc@5% 0.345 [0.280, 0.415] in distribution (bar 0.7; the "
                                 "constant 0.370). Trained alone, 6,000 steps (217 s CPU, more than the whole "
                                 "default) reach 0.530: it cannot meet the gate in budget (docs)"),
    "C1_ood_collapse": ("inconclusive", _GATE + "measured skill ratio OOD / ID -1.95 (skill 0.059 in distribution, "
                        "-0.114 OOD)"),
    "C1_spearman": ("inconclusive", _GATE + "measured Spearman of Charton/W's error beyond the best trivial "
                    "predictor vs distance -0.26 [-0.31, -0.20] (constant in its place 0.27)"),
    "C2_rf_s_vs_charton_ood": ("inconclusive", "RF/S - Charton/W OOD skill -0.915 [-1.105, -0.745] (bar 0.2; the "
                               "constant in RF/S's place +0.107) would be not held, but seeds 0/1/2 give -0.92 / "
                               "+0.22 / -0.96 (SD 0.67 > margin/4 0.28; seed 1's Charton/W is far below the "
                               "constant OOD); 3-seed t-interval -0.55 [-2.22, 1.12]"),
    "C3_data_intervention": ("not held", "RF/S - RF/W OOD skill -0.741 [-0.844, -0.647] (bar > 0; the constants' "
                             "data switch -0.86); decided on one seed: seed SD 0.092 (-0.74 / -0.92 / -0.78) is "
                             "under a quarter of the margin. Structured training loses most on real-graph Laplacians"),
    "C4_size_generalisation": ("inconclusive", "RF/S skill at unseen / seen sizes -0.13 [-0.42, 0.12] (bar 0.7; no "
                               "trivial predictor has skill at seen sizes, so the null is undefined) would be not "
                               "held, but seeds give -0.13 / -0.99 / +0.03 (SD 0.54 > margin/4 0.21)"),
    "C5_loops": ("inconclusive", "RF/S skill at L = 8 - L = 4 (both supervised) -0.024 [-0.030, -0.018] (bar -0.05; "
                 "L = 1 vs 4: -11.1) would be held, but seeds give -0.024 / +0.009 / +0.049 (SD 0.036 > margin/4 "
                 "0.007)"),
    "ctrl_charton_w_vs_constant": ("not held", "Charton/W skill in distribution 0.059 [-0.011, 0.118] (bar 0.2): "
                                   "the LAWT-style baseline is barely better than the trivial predictors"),
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
    loops_grid: list[int] = param([1, 2, 4, 8, 16], "test-time loop counts of the loop sweep (must include "
                                  "train_loops_min and train_loops_max for C5; counts beyond are reported only)", min_len=1, max_len=10, elem_low=1, elem_high=128)
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
              "charton_layers": 1, "eval_draws": 1, "loops_grid": [1, 4, 8, 16], "gp_grid": 5, "size_ood": [12]},
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


#: the trivial predictors every claim is scored against (their skill is <= 0 by construction) and that stand in for
#: the learned models as null arms: the Wishart and structured training-mean constants, the log-diagonal estimate
TRIVIAL = ("const_W", "const_S", "diag")


class _Rows:
    """The test matrices of some sets as one table of rows, for intervals over matrices (resampled within each set,
    so every resample keeps the sets' sizes). ``acc(hits, idx)`` is the accuracy over the rows ``idx`` of those
    sets, pooled, so each set counts by its number of matrices (issue 28: a mean of per-set accuracies gave
    Hilbert's 10 matrices the weight of 100 others). ``skill(err, triv, idx)`` is the size-weighted mean over the
    sets of ``1 - MAE / MAE_trivial``, with ``MAE_trivial`` the lowest MAE of the trivial predictors on that set."""

    def __init__(self, keys: list[str], sizes: dict[str, int]):
        self.keys = list(keys)
        self.lab = np.concatenate([np.full(sizes[k], i) for i, k in enumerate(self.keys)])

    def stack(self, per_set: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([per_set[k] for k in self.keys])

    def _want(self, lab: np.ndarray, keys: list[str] | None) -> list[int] | None:
        want = [self.keys.index(k) for k in (keys or self.keys)]
        return want if all((lab == i).any() for i in want) else None  # None: a resample lost a whole set

    def acc(self, hits: np.ndarray, idx: np.ndarray, keys: list[str] | None = None) -> float:
        lab, h = self.lab[idx], hits[idx]
        want = self._want(lab, keys)
        if want is None:
            return float("nan")
        return float(h[np.isin(lab, want)].mean())

    def skill(self, err: np.ndarray, triv: np.ndarray, idx: np.ndarray, keys: list[str] | None = None) -> float:
        """``err``: [rows] absolute errors of one predictor; ``triv``: [trivial predictors, rows] theirs."""
        lab = self.lab[idx]
        k = len(self.keys)
        count = np.bincount(lab, minlength=k).astype(float)
        want = [self.keys.index(x) for x in (keys or self.keys)]
        if not np.all(count[want] > 0):
            return float("nan")  # a resample that lost a whole set
        own = np.bincount(lab, weights=err[idx], minlength=k)[want]
        ref = np.min([np.bincount(lab, weights=t[idx], minlength=k)[want] for t in triv], axis=0)
        if not np.all(ref > 0):
            return float("nan")
        return float(np.dot(count[want], 1.0 - own / ref) / count[want].sum())

    def est(self, stat: Callable[[np.ndarray], float], seed: int) -> Est:
        return cluster_bootstrap(stat, np.arange(self.lab.size), unit="matrix", seed=seed, strata=self.lab)


def skill_scores(err: dict[str, dict[str, np.ndarray]], keys: list[str], trivial: tuple[str, ...] = TRIVIAL
                 ) -> dict[str, dict[str, float]]:
    """Per predictor and set: ``1 - MAE / MAE_trivial`` (``err[name][set]``: absolute errors per matrix), with
    ``MAE_trivial`` the lowest MAE of the :data:`TRIVIAL` predictors on that set (each trivial predictor's is <= 0)."""
    ref = {k: min(float(np.mean(err[t][k])) for t in trivial) for k in keys}
    return {name: {k: 1.0 - float(np.mean(e[k])) / ref[k] if ref[k] > 0 else float("nan") for k in keys}
            for name, e in err.items()}  # fmt: skip


def _weighted(per_set: dict[str, float], keys: list[str] | tuple[str, ...], sizes: dict[str, int]) -> float:
    w = np.array([sizes[k] for k in keys], dtype=float)
    return float(np.dot([per_set[k] for k in keys], w) / w.sum())


def run(cfg: Config, ctx: RunContext) -> Result:
    seed = ctx.seed
    if cfg.train_loops_min not in cfg.loops_grid or cfg.train_loops_max not in cfg.loops_grid:
        ctx.add_note("loops_grid lacks train_loops_min or train_loops_max: C5 is not checked.")
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
    sizes = {k: len(v) for k, v in sets.items()}
    c5_keys = ("id_structured", *OOD_SETS)
    for name in acc:  # multi-set accuracies pool the matrices: each set weighs by its size
        metrics[f"{name}_acc_ood"] = _weighted(acc[name], OOD_SETS, sizes)
        if size_keys:
            metrics[f"{name}_acc_size_ood"] = _weighted(acc[name], size_keys, sizes)
        metrics[f"{name}_acc_id_both"] = _weighted(acc[name], ["id_wishart", "id_structured"], sizes)
    # skill against the trivial predictors (issue 28): per set 1 - MAE / (lowest MAE of the constants and the
    # log-diagonal), on the absolute error of log det A; multi-set skills weigh each set by its size
    n_of = {k: np.array([a.shape[0] for a in v], dtype=float) for k, v in sets.items()}
    preds_all = {**{j: res[j]["preds"] for j in jobs}, **ref}
    err = {name: {k: n_of[k] * np.abs(p[k] - truth[k]) for k in sets} for name, p in preds_all.items()}
    skill = skill_scores(err, list(sets))
    for name, sk in skill.items():
        for k in sets:
            metrics[f"{name}_skill_{k}"] = sk[k]
        metrics[f"{name}_skill_ood"] = _weighted(sk, OOD_SETS, sizes)
        if size_keys:
            metrics[f"{name}_skill_size_ood"] = _weighted(sk, size_keys, sizes)
        metrics[f"{name}_skill_id_both"] = _weighted(sk, ["id_wishart", "id_structured"], sizes)
    # loop sweep: accuracy and skill over the in-distribution structured set and the four OOD sets (pooled)
    loop_acc: dict[str, dict[int, float]] = {}
    loop_err: dict[int, dict[str, np.ndarray]] = {}
    for job in jobs:
        if res[job]["loops"]:
            loop_acc[job] = {L: _weighted({k: accuracy(p[k], truth[k]) for k in c5_keys}, c5_keys, sizes)
                             for L, p in res[job]["loops"].items()}  # fmt: skip
            for L, v in loop_acc[job].items():
                metrics[f"{job}_acc_loops{L}"] = v
    for L, p in res["rf_S"]["loops"].items():
        loop_err[L] = {k: n_of[k] * np.abs(p[k] - truth[k]) for k in c5_keys}
        sk = skill_scores({**{t: err[t] for t in TRIVIAL}, "rf_S": loop_err[L]}, list(c5_keys))["rf_S"]
        metrics[f"rf_S_skill_loops{L}"] = _weighted(sk, c5_keys, sizes)
    # C1: Charton/W error against the distance of the spectrum summary from its training distribution
    rng = np.random.default_rng(seed + 4)
    train_w = [a for n in range(cfg.n_min, cfg.n_max + 1) for a in spd.sample("wishart", rng, 256, n)[0]]
    feats = np.array([spd.spectrum_summary(a) for a in train_w])
    mu, cov = feats.mean(0), np.cov(feats.T) + 1e-9 * np.eye(4)
    prec = np.linalg.inv(cov)
    pooled = ("id_wishart", "id_structured", *OOD_SETS)
    dist = np.concatenate([[float(np.sqrt((f - mu) @ prec @ (f - mu))) for f in map(spd.spectrum_summary, sets[k])]
                           for k in pooled])  # fmt: skip

    def rel(name: str) -> np.ndarray:  # |ŷ - y| / max(1, |y|) per matrix, the units of the acc@5% tolerance
        return np.concatenate([np.abs(preds_all[name][k] - truth[k]) / np.maximum(1, np.abs(truth[k])) for k in pooled])

    rel_err = rel("charton_W")
    # excess error over the best trivial predictor of each set: what Charton/W adds beyond the trivial predictors
    best = {k: min(TRIVIAL, key=lambda t: float(np.mean(err[t][k]))) for k in pooled}
    best_rel = np.concatenate([np.abs(preds_all[best[k]][k] - truth[k]) / np.maximum(1, np.abs(truth[k]))
                               for k in pooled])  # fmt: skip
    excess = {name: rel(name) - best_rel for name in ("charton_W", *TRIVIAL)}
    metrics["charton_W_spearman_err_dist"] = spearman(rel_err, dist)
    for name, x in excess.items():
        metrics[f"{name}_spearman_excess_dist"] = spearman(x, dist)
    gp = _gp_search(cfg, res["rf_S"]["model"], seed) if cfg.gp_points else None
    if gp:
        metrics.update(gp["metrics"])
    hits = {name: {k: _hits(p[k], truth[k]) for k in sets} for name, p in preds_all.items()}
    claims = _claims(cfg, metrics, hits, err, loop_err, (excess, dist), sizes, seed)
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


def _claims(cfg: Config, metrics: dict, hits: dict, err: dict, loop_err: dict,
            c1: tuple[dict[str, np.ndarray], np.ndarray], sizes: dict[str, int], seed: int) -> list:
    """Every paper claim is scored as skill against the trivial predictors (``1 - MAE / MAE_trivial`` per set,
    multi-set skills weighted by set size) and has a trivial predictor (or SLQ, or fewer loops) in the model's place
    as its null arm. Intervals resample test matrices within each set; every claim on a learned model rests on one
    trained model (``trained=True``)."""
    m = metrics

    def rows(keys) -> tuple[_Rows, dict[str, np.ndarray], np.ndarray]:
        r = _Rows(list(keys), sizes)
        e = {name: r.stack(v) for name, v in err.items()}
        return r, e, np.stack([e[t] for t in TRIVIAL])

    def sk(r: _Rows, e: dict, tv: np.ndarray, name: str, keys=None):
        return lambda i: r.skill(e[name], tv, i, keys)

    def best_null(names, stat_of, op: str) -> tuple[str, float]:
        """The candidate whose point statistic is the most favourable to passing the gate (NaN counts as worst)."""
        vals = {n: stat_of(n) for n in names}
        sign = 1.0 if op in (">", ">=") else -1.0
        return max(vals, key=lambda n: sign * vals[n] if np.isfinite(vals[n]) else -np.inf), vals

    gate = claim("sanity_charton_w_learned", "sanity (gate): Charton/W reaches acc@5% >= 0.7 in distribution, so "
                 "its failures elsewhere are not a failure to learn",
                 bootstrap(hits["charton_W"]["id_wishart"], unit="matrix", seed=seed), ">=", 0.7,
                 why="precondition on this run's Charton/W: the spec makes C1 inconclusive when it fails")
    learned = gate.verdict == "held"

    def gated_by_sanity(est: Est) -> tuple[Est, str]:
        if learned:
            return est, ""
        # undefined (NaN) estimate: inconclusive on any number of seeds; the measured one stays in the detail
        return (Est(float("nan"), float("nan"), float("nan"), est.unit, est.n, est.method),
                f"measured {est.value:.3f} [{est.lo:.3f}, {est.hi:.3f}] set aside: Charton/W fails the spec's "
                "validity gate "
                f"(acc@5% {gate.value:.3f} < 0.7), so C1 is inconclusive; ")

    # C1 collapse: skill ratio OOD / in distribution; null SLQ (non-learned, no training distribution)
    r1, e1, t1 = rows(["id_wishart", *OOD_SETS])

    def collapse(name: str):
        def stat(i: np.ndarray) -> float:
            den = r1.skill(e1[name], t1, i, ["id_wishart"])
            return r1.skill(e1[name], t1, i, list(OOD_SETS)) / den if den > 0 else float("nan")
        return stat

    est, pre = gated_by_sanity(r1.est(collapse("charton_W"), seed))
    cl = [gate, claim(
        "C1_ood_collapse", "C1: Charton/W's skill (1 - MAE/MAE_trivial) on the OOD stand-ins is <= 0.5x its "
        "in-distribution skill (ratio; undefined without skill in distribution)", est, "<=", 0.5,
        null=r1.est(collapse("slq"), seed), null_what="SLQ (m = 8, p = 8), a non-learned estimator with no training "
        "distribution", trained=True, detail=pre + f"skill OOD {m['charton_W_skill_ood']:.3f}, in distribution "
        f"{m['charton_W_skill_id_wishart']:.3f}; acc@5% {m['charton_W_acc_ood']:.3f} / "
        f"{m['charton_W_acc_id_wishart']:.3f}")]
    # C1 spearman: Charton/W's error in excess of the best trivial predictor grows with the spectral distance
    excess, dist = c1

    def rho(name: str) -> Est:
        return bootstrap((excess[name], dist), spearman, paired=True, unit="matrix", seed=seed, n_resamples=1000)

    tnull, tvals = best_null(TRIVIAL, lambda t: m[f"{t}_spearman_excess_dist"], ">=")
    est, pre = gated_by_sanity(rho("charton_W"))
    cl.append(claim(
        "C1_spearman", "C1: Charton/W's error in excess of the best trivial predictor of each set grows with the "
        "distance of the spectrum from its training distribution (Spearman over all n <= n_max test matrices)",
        est, ">=", 0.5, null=rho(tnull), null_what=f"a trivial predictor in Charton/W's place ({tnull}, the highest "
        "of " + ", ".join(f"{t} {v:.2f}" for t, v in tvals.items()) + "; NaN: no error beyond the best trivial)",
        trained=True, detail=pre + f"raw-error Spearman {m['charton_W_spearman_err_dist']:.3f}"))
    # C2 / C3: skill differences on the OOD stand-ins
    r2, e2, t2 = rows(OOD_SETS)

    def diff(a: str, b: str):
        fa, fb = sk(r2, e2, t2, a), sk(r2, e2, t2, b)
        return lambda i: fa(i) - fb(i)

    tnull, tvals = best_null(TRIVIAL, lambda t: m[f"{t}_skill_ood"] - m["charton_W_skill_ood"], ">=")
    cl.append(claim(
        "C2_rf_s_vs_charton_ood", "C2: RF/S's skill on the OOD stand-ins exceeds Charton/W's by >= 0.2",
        r2.est(diff("rf_S", "charton_W"), seed), ">=", 0.2, null=r2.est(diff(tnull, "charton_W"), seed),
        null_what=f"a trivial predictor in RF/S's place ({tnull}, the best of the constants and the log-diagonal)",
        trained=True, detail=f"skill OOD: RF/S {m['rf_S_skill_ood']:.3f}, Charton/W {m['charton_W_skill_ood']:.3f}, "
        + ", ".join(f"{t} {m[f'{t}_skill_ood']:.3f}" for t in TRIVIAL)
        + f"; acc@5% RF/S {m['rf_S_acc_ood']:.3f}, Charton/W {m['charton_W_acc_ood']:.3f}"))
    cl.append(claim(
        "C3_data_intervention", "C3: structured pre-training alone helps OOD: RF/S's skill > RF/W's on the OOD "
        "stand-ins", r2.est(diff("rf_S", "rf_W"), seed), ">", 0.0, null=r2.est(diff("const_S", "const_W"), seed),
        null_what="the same data switch for the trivial training-mean constant (structured mean - Wishart mean)",
        trained=True, detail=f"skill OOD: RF/S {m['rf_S_skill_ood']:.3f}, RF/W {m['rf_W_skill_ood']:.3f}"))
    size_keys = [k for k in sizes if k.startswith("size")]
    if size_keys:
        r4, e4, t4 = rows(["id_wishart", "id_structured", *size_keys])

        def ratio(name: str):
            def stat(i: np.ndarray) -> float:
                den = r4.skill(e4[name], t4, i, ["id_wishart", "id_structured"])
                return r4.skill(e4[name], t4, i, size_keys) / den if den > 0 else float("nan")
            return stat

        def point_ratio(name: str) -> float:
            den = m[f"{name}_skill_id_both"]
            return m[f"{name}_skill_size_ood"] / den if den > 0 else float("nan")

        tnull, tvals = best_null(TRIVIAL, point_ratio, ">=")
        cl.append(claim(
            "C4_size_generalisation", f"C4: RF/S's skill at n in {cfg.size_ood} is >= 0.7x its skill at n <= "
            f"{cfg.n_max} (same families W and S; ratio, undefined without skill at the trained sizes)",
            r4.est(ratio("rf_S"), seed), ">=", 0.7, null=r4.est(ratio(tnull), seed),
            null_what=f"a trivial predictor in RF/S's place ({tnull}; skill at trained sizes: "
            + ", ".join(f"{t} {m[f'{t}_skill_id_both']:.2f}" for t in TRIVIAL) + ", so its ratio is undefined)",
            trained=True, detail=f"skill n <= {cfg.n_max}: {m['rf_S_skill_id_both']:.3f}, unseen sizes: "
            f"{m['rf_S_skill_size_ood']:.3f}; acc@5% {m['rf_S_acc_id_both']:.3f} -> {m['rf_S_acc_size_ood']:.3f}"))
        cl.append(claim("C4_charton_size_context", "C4 context (by construction, reported): Charton/W has no trained "
                        f"positions beyond {cfg.n_max}; its skill at unseen sizes", m["charton_W_skill_size_ood"],
                        "<=", 0.5 * m["charton_W_skill_id_both"], gated=False))  # fmt: skip
    # C5: loops inside the supervised range (train_loops_min .. train_loops_max); beyond it is reported only
    lo_t, hi_t = cfg.train_loops_min, cfg.train_loops_max
    grid = sorted(loop_err)
    if lo_t in loop_err and hi_t in loop_err and lo_t < hi_t:
        r5, _, t5 = rows(["id_structured", *OOD_SETS])
        e5 = {L: r5.stack(v) for L, v in loop_err.items()}

        def change(a: int, b: int):
            return lambda i: r5.skill(e5[a], t5, i) - r5.skill(e5[b], t5, i)

        fewest = grid[0]
        null = (r5.est(change(fewest, lo_t), seed) if fewest < lo_t
                else Est(float("nan"), float("nan"), float("nan"), "matrix"))  # fmt: skip
        cl.append(claim(
            "C5_loops", f"C5: more loops do not hurt inside the supervised range: RF/S's skill (ID-S + OOD sets) at "
            f"L = {hi_t} >= at L = {lo_t} - 0.05", r5.est(change(hi_t, lo_t), seed), ">=", -0.05, null=null,
            null_what=f"RF/S at L = {fewest} against L = {lo_t} (if fewer loops cost < 5 points too, the loop count "
            "does not matter and 'more loops do not hurt' is empty)", trained=True,
            detail=", ".join(f"L={L}: {m[f'rf_S_skill_loops{L}']:.3f}" for L in grid)))
        beyond = [L for L in grid if L > hi_t]
        if beyond:
            L = beyond[-1]
            cl.append(claim(
                "C5_loops_beyond_training", f"C5 context (reported): loops never supervised, RF/S's skill at L = {L} "
                f"minus L = {hi_t}", m[f"rf_S_skill_loops{L}"] - m[f"rf_S_skill_loops{hi_t}"], ">=", -0.05,
                gated=False))
    # controls: the learned models have skill in distribution (they learned more than the trivial predictors)
    r6, e6, t6 = rows(["id_wishart"])
    cl.append(claim("ctrl_charton_w_vs_constant", "control: Charton/W's skill against the trivial predictors in "
                    "distribution (Wishart) is >= 0.2", r6.est(sk(r6, e6, t6, "charton_W"), seed), ">=", 0.2,
                    why="precondition on this run's Charton/W: it learned more than the trivial predictors",
                    detail=f"acc@5% Charton/W {m['charton_W_acc_id_wishart']:.3f}, Wishart constant "
                    f"{m['const_W_acc_id_wishart']:.3f}"))  # fmt: skip
    r7, e7, t7 = rows(["id_structured"])
    cl.append(claim("ctrl_rf_s_vs_constant_id", "control: RF/S's skill against the trivial predictors in "
                    "distribution (structured) is >= 0.1", r7.est(sk(r7, e7, t7, "rf_S"), seed), ">=", 0.1,
                    why="precondition on this run's RF/S: it learned more than the trivial predictors"))  # fmt: skip
    cl.append(claim("sanity_slq_reference", "sanity (reported): SLQ (m=8, p=8) skill on the OOD stand-ins, the "
                    "non-learned reference line", m["slq_skill_ood"], ">=", 0.0, gated=False))  # fmt: skip
    if "gp_grid_steps_off_rf_S" in m:
        cl.append(claim("gp_rf_s_choice", "downstream (reported): the GP length scale chosen with RF/S's log-det "
                        "is within one grid step of the exact choice", m["gp_grid_steps_off_rf_S"], "<=", 1,
                        gated=False, detail=f"exact ell {m['gp_ell_exact']:.3f}, RF/S "
                        f"{m['gp_ell_rf_S']:.3f}, SLQ {m['gp_ell_slq']:.3f}"))  # fmt: skip
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
