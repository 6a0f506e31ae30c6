"""Why Do Unlearnable Examples Work: A Novel Perspective of Mutual Information (ICLR 2026, arXiv 2603.03725).

Reproduction on reduced Fashion-MNIST (14x14; sklearn digits if the Debian package is absent). Four
training sets (clean, uniform random noise, error-minimising noise with the MI-UE loop and
cross-entropy, MI-UE) are built with one source CNN schedule; a fresh shallow and a deeper victim
train on each and are scored on clean test images. The MI proxies (within-class covariance of
normalised victim features, Gaussian and KSG MI between features of x and of x + delta) are read
on the victims; four defenses (Gaussian blur, median blur, 3-bit depth, cutout; PGD adversarial
training in the paper preset) are applied to the shallow victim's training.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch

from iclr26.core import param
from iclr26.core.errors import MissingAssetError, UserError
from iclr26.core.parallel import parallel_map
from iclr26.data import images
from iclr26.poisoning import defenses as dfn
from iclr26.poisoning import mi
from iclr26.poisoning import models as pm
from iclr26.poisoning import training as tr
from iclr26.poisoning import unlearnable as ue
from iclr26.runs import Result, RunContext, claim
from iclr26.stats import (
    Est,
    bootstrap,
    cluster_bootstrap,
    exact,
    paired_bootstrap,
    random_baseline,
    spearman,
    t_interval,
)

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Unlearnable examples on reduced Fashion-MNIST (14x14, sklearn digits if absent): clean, random-noise, "
    "error-minimising (EM, the MI-UE loop with cross-entropy) and MI-UE training sets from one source CNN; "
    "fresh shallow and deeper victims, clean test accuracy, within-class covariance and Gaussian/KSG MI "
    "between features of x and x+delta, and victims trained under blur / median / bit-depth / cutout "
    "(and PGD adversarial training in the paper preset)."
)

NUM_CLASSES = 10
SETS = ("clean", "random", "em", "mi-ue")
VICTIMS = ("shallow", "deep")
POISONS = ("random", "em", "mi-ue")  # C2 ranks the poisons only; the clean set is a reported reference
DEFENSE_SETS = {
    "none": (),
    # the spec's four: blur, bit depth, cutout and adversarial training (cheap: 2 PGD steps); median is extra
    "standard": ("blur", "bits", "cutout", "adv"),
    "all": ("blur", "median", "bits", "cutout", "adv"),
}
# thresholds fixed from the spec (docs/mi-ue.md) before any run
C1_GAP_EM = 0.05  # MI-UE <= EM - 5 points
C1_GAP_RANDOM = 0.20  # both <= random - 20 points
CTRL_RANDOM = 0.05  # random >= clean - 5 points
C2_SPEARMAN = 0.6
SANITY_SOURCE = 0.95
SANITY_CLEAN = {"fashion-mnist": 0.80, "digits": 0.90}
CTRL_DEFENSE_CLEAN = 0.10  # a defense may cost the clean victim at most 10 points
CTRL_SHUFFLED_MI = 0.05  # nats: Gaussian MI of shuffled pairs
C4_EM_DEGRADES = 0.10  # EM "degrades" under a defense: +10 points over undefended EM
C4_MIUE_EFFECTIVE = 0.20  # MI-UE "stays effective": >= 20 points below the clean victim under that defense


@dataclass
class Config:
    dataset: str = param(
        "auto", "data set; auto = Fashion-MNIST if installed, else sklearn digits",
        choices=["auto", "fashion-mnist", "digits"],
    )
    n_train_per_class: int = param(
        400, "training images per class (Fashion-MNIST; digits: at most the ~144 available)", low=2, high=6000
    )
    n_test_per_class: int = param(
        100, "clean test images per class (Fashion-MNIST official test split; digits: at most ~36)", low=1, high=1000
    )
    pool: int = param(2, "mean-pooling factor for Fashion-MNIST (2: 28x28 -> 14x14)", choices=[1, 2, 4])
    eps: float = param(16 / 255, "L-inf budget on Fashion-MNIST ([0, 1] pixels)", low=0.0, high=1.0, low_open=True)
    digits_eps: float = param(
        0.1, "L-inf budget on sklearn digits (8/255 is below one of its 17 grey levels)", low=0.0, high=1.0,
        low_open=True,
    )
    gen_epochs: int = param(10, "generation epochs (1 source-model epoch + PGD steps each)", low=1, high=1000)
    pgd_steps: int = param(10, "error-minimising PGD steps per poison batch and epoch", low=1, high=1000)
    poison_batch: int = param(500, "class-balanced poison batch size", low=1, high=100000)
    alpha_start: float = param(
        1 / 20, "PGD step size of the first generation epoch, in units of eps", low=0.0, high=1.0, low_open=True
    )
    alpha_end: float = param(
        1 / 10, "PGD step size of the last generation epoch, in units of eps (linear in between)",
        low=0.0, high=1.0, low_open=True,
    )
    tau: float = param(0.1, "temperature of the MI-UE loss", low=0.0, high=10.0, low_open=True)
    victim_epochs: int = param(
        30, "victim training epochs (Adam, no augmentation; 30: the clean victim's accuracy has levelled off, "
        "0.835 against 0.764 at 8 and 0.816 at 20 in a 3-seed probe)", low=1, high=1000,
    )
    lr: float = param(
        2e-3, "Adam learning rate of the source model (2e-3: MI-UE's source fit passes the spec's 0.95 in 10 "
        "generation epochs; 1e-3 left it at 0.93-0.955)", low=0.0, high=0.1, low_open=True,
    )
    batch_size: int = param(128, "training batch size of the source model", low=1, high=100000)
    victim_lr: float = param(2e-3, "Adam learning rate of the victims", low=0.0, high=0.1, low_open=True)
    victim_batch_size: int = param(128, "training batch size of the victims", low=1, high=100000)
    defenses: str = param(
        "standard", "defenses on the shallow victim: standard = blur, bits, cutout, PGD adversarial training; "
        "all = + median blur; none", choices=list(DEFENSE_SETS),
    )
    blur_sigma: float = param(0.5, "Gaussian blur sigma (3x3 kernel)", low=0.0, high=10.0, low_open=True)
    bits: int = param(3, "bit-depth reduction: bits per pixel", low=1, high=8)
    cutout_size: int = param(4, "cutout square side in pixels", low=1, high=28)
    adv_eps_frac: float = param(
        0.5, "adversarial training radius as a fraction of eps", low=0.0, high=1.0, low_open=True
    )
    adv_steps: int = param(2, "PGD steps of adversarial training", low=1, high=100)
    adv_step_frac: float = param(0.5, "PGD step of adversarial training as a fraction of its radius", low=0.0,
                                 high=2.0, low_open=True)
    n_victim_seeds: int = param(
        3, "victim seeds of the undefended shallow victims (C1 and the clean-victim gate decide over them; "
        "the EM re-run null gets as many more)", low=1, high=10,
    )
    n_side_seeds: int = param(1, "victim seeds of the deep victims and of every defense", low=1, high=10)
    mi_q: int = param(8, "PCA dimensions for the MI estimates", low=1, high=64)
    ksg_k: int = param(3, "neighbours of the KSG estimate", low=1, high=50)
    threads: int = param(1, "torch / BLAS threads during the run (applied by the engine)", low=1, high=256)


PRESETS = {
    "smoke": {
        "dataset": "digits",
        "n_train_per_class": 30,
        "n_test_per_class": 10,
        "gen_epochs": 2,
        "pgd_steps": 2,
        "victim_epochs": 2,
        "poison_batch": 100,
        "n_victim_seeds": 2,
        "adv_steps": 1,
    },
    "default": {},
    "paper": {
        "pool": 1,
        "n_train_per_class": 5000,
        "n_test_per_class": 1000,
        "eps": 8 / 255,
        "gen_epochs": 100,
        "alpha_start": 1 / 40,
        "alpha_end": 1 / 20,
        "victim_epochs": 100,
        "lr": 1e-3,
        "victim_lr": 1e-3,
        "victim_batch_size": 128,
        "defenses": "all",
        "adv_steps": 5,
        "adv_step_frac": 0.25,
        "n_victim_seeds": 3,
        "n_side_seeds": 3,
    },
}


def plan(cfg: Config) -> dict:
    """What a run with ``cfg`` needs and roughly costs (``iclr26 run mi-ue --plan``); nothing is run."""
    from iclr26 import plan as p

    needs = p.image_data(cfg.dataset)

    def work(c: Config) -> tuple[float, float]:  # perturbation generation; victim training under every defense
        digits = c.dataset == "digits"
        n = 10 * (min(c.n_train_per_class, 144) if digits else c.n_train_per_class)
        pixels = 64 if digits else (28 // c.pool) ** 2
        defenses = DEFENSE_SETS[c.defenses]
        # shallow: 4 sets + the EM re-run per victim seed; deep (about 2x a shallow run) and 3 sets per defense
        # per side seed, PGD adversarial training costing 1 + adv_steps runs
        side = 2 * len(SETS) + 3 * (len(defenses) + ("adv" in defenses) * c.adv_steps)
        return (2 * n * c.gen_epochs * (1 + c.pgd_steps) * pixels,
                n * c.victim_epochs * (5 * c.n_victim_seeds + side * c.n_side_seeds) * pixels)

    return {
        "needs": needs, "device": "cpu", "gpu_memory_gb": None,
        **p.cpu_time("mi-ue", cfg, work, "images x generation epochs x PGD steps x pixels (share assumed 0.4) and "
                     "images x victim epochs x victims x pixels (0.6)", shares=(0.4, 0.6)),
        "notes": ["the experiment runs on the CPU (it uses no GPU); spec §7's CIFAR-10 / ResNet-18 setting costs "
                  "~1,100 ResNet-18 epoch-equivalents: GPU-hours"],
        "reference": [p.Need("CIFAR-10/100 (user-supplied image folder or arrays)", "data", None,
                             "https://www.cs.toronto.edu/~kriz/cifar.html")],
    }

# Small CNNs gain nothing from a second intra-op thread on a shared 2-core machine.
WORKLOAD = "small"

HEADLINE = "C1_miue_vs_em"
# one generation per run; C1, C1_both_vs_random and the clean-victim gate decide over 3 victim seeds inside the run
# (Config.n_victim_seeds); deep and defended victims have one seed, so their claims stay one-seed inconclusive
SEEDS = {"smoke": 1, "default": 1, "paper": 3}
MI_RESAMPLES = 1000  # bootstrap resamples of training images for the Gaussian MI (on the fixed PCA basis)
#: issue 27 emptied this: the spreads measured before it (C3_em_mi, ctrl_defense_keeps_clean) were for 15-epoch
#: victims and another defense set, so they no longer describe this design
SEED_SPREAD: dict[str, float] = {}
_ONE = "; one victim seed for deep / defended victims"
# measured 2026-12-07 on a cold cache (victims 30 epochs; the clean-victim gate reads the lowest seed)
EXPECTED = {
    "C1_miue_vs_em": ("not held", "MI-UE - EM +0.002 [-0.037, 0.041] over 3 victim seeds (MI-UE 0.662/0.645/0.639, "
                      "EM 0.643/0.657/0.639); EM re-run null +0.024"),
    "C1_both_vs_random": ("not held", "max(EM, MI-UE) - random -0.165 [-0.195, -0.136] against -0.20"),
    "C2_cov_lowest": ("inconclusive", "MI-UE - lowest other poison on the deep victim -0.019 [-0.028, -0.010] / class "
                      "(would be held; EM null +0.019)" + _ONE),
    "C2_mi_lowest": ("inconclusive", "MI-UE - lowest other poison +0.66 [0.58, 0.74] nats (EM lowest)" + _ONE),
    "C2_spearman": ("inconclusive", "rho 0.94 [0.52, 1] over 6 poison conditions; the 6! null's 95th percentile is "
                    "0.77"),
    "C3_em_acc": ("no power", "deep - shallow -0.056 [-0.083, -0.029]; the clean null -0.010 [-0.026, 0.008] "
                  "passes too" + _ONE),
    "C3_miue_acc": ("no power", "deep - shallow -0.123 [-0.148, -0.099]; the clean null passes too" + _ONE),
    "C3_em_mi": ("inconclusive", "deep - shallow -3.07 [-3.14, -3.00] nats (clean null +0.48)" + _ONE),
    "C3_miue_mi": ("inconclusive", "deep - shallow -3.91 [-4.00, -3.83] nats (clean null +0.48)" + _ONE),
    "C4_each_defense": ("inconclusive", "MI-UE wins 4 [2, 4] of 4 defenses (adv 0.711 vs EM 0.735)" + _ONE),
    "C4_effective_where_em_degrades": ("inconclusive", "count 0: adversarial training lifts EM by +0.089" + _ONE),
    "ctrl_defense_keeps_clean": ("inconclusive", "largest clean-victim drop 0.048 [0.028, 0.069] <= 0.10 (would be "
                                 "held), one victim seed per defense"),
    "sanity_mi_shuffled": "held",
    "sanity_source_fit_em": "held",  # 0.976 (exact, this run's poison)
    "sanity_source_fit_miue": "held",  # 0.970 (source Adam 2e-3; 0.93-0.955 at 1e-3)
    # lowest clean victim 0.813 (0.835 / 0.813 / 0.820); at 8 victim epochs it was 0.754 (under-trained victims)
    "sanity_clean_victim": "held",
    "sanity_budget": "held",
}


def _load_data(cfg: Config, seed: int, ctx: RunContext):
    """(dataset name, Xtr [N,1,H,W] in [0,1], ytr, Xte, yte, eps)."""
    name = cfg.dataset
    if name in ("auto", "fashion-mnist"):
        try:
            Xtr, ytr = images.load_fashion_mnist("train")
            Xte, yte = images.load_fashion_mnist("test")
            name = "fashion-mnist"
        except MissingAssetError:
            if cfg.dataset == "fashion-mnist":
                raise
            name = "digits"
            ctx.note_missing_asset("Fashion-MNIST", "python -m iclr26.assets fetch",
                                   skipped="ran on sklearn digits instead (the claims are designed for Fashion-MNIST)")
    if name == "fashion-mnist":
        Xtr, ytr = images.subset_per_class(Xtr, ytr, cfg.n_train_per_class, seed)
        Xte, yte = images.subset_per_class(Xte, yte, min(cfg.n_test_per_class, 1000), seed)
        if cfg.pool > 1:
            Xtr, Xte = images.avg_pool(Xtr, cfg.pool), images.avg_pool(Xte, cfg.pool)
        eps = cfg.eps
    else:
        X, y = images.load_digits()
        parts = images.split_train_val_test(X, y, val_frac=0.0, test_frac=0.2, seed=seed)
        (Xtr, ytr), (Xte, yte) = parts["train"], parts["test"]
        ntr = min(cfg.n_train_per_class, int(torch.bincount(ytr).min()))
        nte = min(cfg.n_test_per_class, int(torch.bincount(yte).min()))
        Xtr, ytr = images.subset_per_class(Xtr, ytr, ntr, seed)
        Xte, yte = images.subset_per_class(Xte, yte, nte, seed)
        eps = cfg.digits_eps
    return name, Xtr.unsqueeze(1), ytr, Xte.unsqueeze(1), yte, eps


def _finite_or_nan(fn, *args, **kw) -> float:
    try:
        v = fn(*args, **kw)
    except UserError as e:  # e.g. non-finite features of a diverged victim (out-of-range configs)
        log.warning("MI estimate skipped: %s", e)
        return float("nan")
    return float(v) if math.isfinite(v) else float("nan")


def _gauss_mi_proj(Z: np.ndarray, d: int, ridge: float = 1e-4) -> float:
    """Gaussian MI of the first ``d`` against the last columns of ``Z`` (the formula of mi.gaussian_mi on an
    already projected sample: used to bootstrap training images on the fixed joint PCA basis)."""
    S = np.cov(Z, rowvar=False)
    S = S + np.eye(len(S)) * ridge * max(np.trace(S) / len(S), 1e-12)
    return 0.5 * float(np.linalg.slogdet(S[:d, :d])[1] + np.linalg.slogdet(S[d:, d:])[1] - np.linalg.slogdet(S)[1])


def _mi_resamples(fx, fy, q: int, seed: int) -> np.ndarray:
    """Gaussian MI on ``MI_RESAMPLES`` bootstrap resamples of the training images; the resample indices come
    from ``seed`` alone, so they are the same rows for every set and victim (paired across conditions)."""
    try:
        Xp, Yp = mi.joint_pca(fx, fy, q)
    except UserError as e:
        log.warning("MI bootstrap skipped: %s", e)
        return np.full(MI_RESAMPLES, np.nan)
    Z = np.concatenate([Xp, Yp], axis=1)
    rng = np.random.default_rng(seed)
    n = len(Z)
    return np.array([_gauss_mi_proj(Z[rng.integers(0, n, n)], Xp.shape[1]) for _ in range(MI_RESAMPLES)])


def _per_class_cov(f, y) -> list[float]:
    """The within-class covariance proxy of each class on its own (its mean over classes is the proxy)."""
    yy = torch.as_tensor(y)
    return [_finite_or_nan(mi.within_class_covariance, f[yy == c], yy[yy == c]) for c in torch.unique(yy).tolist()]


def _gen_job(method: str, common) -> dict:
    """One generation arm (EM or MI-UE) from the shared source initialisation."""
    cfg, Xtr, ytr, eps, seed = common
    source = pm.make_cnn(1, (Xtr.shape[-2], Xtr.shape[-1]), NUM_CLASSES, "shallow", seed=seed + 1)
    res = ue.make_unlearnable(
        Xtr, ytr, source, method, eps=eps, epochs=cfg.gen_epochs, steps=cfg.pgd_steps, batch_size=cfg.poison_batch,
        alpha_start=cfg.alpha_start, alpha_end=cfg.alpha_end, tau=cfg.tau, lr=cfg.lr,
        train_batch_size=cfg.batch_size, seed=seed + 2,
    )
    src_cov = _finite_or_nan(mi.within_class_covariance, tr.extract_features(res.model, res.images), ytr)
    return {"images": res.images, "delta": res.delta, "history": res.history, "source_cov": src_cov}


def _victim_job(job: tuple[str, str, int, str], common) -> dict:
    """Train one fresh victim ``(set, arch, seed index, defense)``; score it, and read the MI proxies."""
    s, arch, k, defense = job
    cfg, Xtr, ytr, Xte, yte, poisoned, eps, seed, hw = common
    vs = seed + 100 + 1000 * k
    model = pm.make_cnn(1, hw, NUM_CLASSES, arch, seed=vs)
    dfn.train_with_defense(
        model, poisoned[s], ytr, defense, epochs=cfg.victim_epochs, lr=cfg.victim_lr,
        batch_size=cfg.victim_batch_size, seed=vs + 1, sigma=cfg.blur_sigma, bits=cfg.bits,
        cutout_size=cfg.cutout_size, adv_eps=cfg.adv_eps_frac * eps, adv_steps=cfg.adv_steps,
        adv_step_size=cfg.adv_step_frac * cfg.adv_eps_frac * eps,
    )
    correct = (tr.predict(model, Xte) == yte).double().numpy()
    out = {"acc": float(correct.mean()), "correct": correct}
    if defense == "none" and k == 0:
        fx = tr.extract_features(model, Xtr)
        fy = tr.extract_features(model, poisoned[s])
        perm = torch.randperm(len(fy), generator=torch.Generator().manual_seed(seed + 3))
        out.update(
            gmi=_finite_or_nan(mi.gaussian_mi, fx, fy, q=cfg.mi_q),
            kmi=_finite_or_nan(mi.ksg_mi, fx, fy, k=cfg.ksg_k, q=cfg.mi_q),
            cov=_finite_or_nan(mi.within_class_covariance, fy, ytr),
            shuffled_gmi=_finite_or_nan(mi.gaussian_mi, fx, fy[perm], q=cfg.mi_q),
            train_acc=tr.accuracy(model, poisoned[s], ytr),
            gmi_boot=_mi_resamples(fx, fy, cfg.mi_q, seed + 4),
            cov_per_class=_per_class_cov(fy, ytr),
        )
    return out


def run(cfg: Config, ctx: RunContext) -> Result:
    if cfg.alpha_start > cfg.alpha_end:
        log.info("alpha_start > alpha_end: the step size falls instead of rising")
    seed = ctx.seed
    dataset, Xtr, ytr, Xte, yte, eps = _load_data(cfg, seed, ctx)
    hw = (Xtr.shape[-2], Xtr.shape[-1])
    metrics: dict[str, float] = {
        "dataset_is_fashion_mnist": float(dataset == "fashion-mnist"),
        "n_train": float(len(ytr)),
        "n_test": float(len(yte)),
        "eps": float(eps),
        "eps_x255": float(eps * 255),
    }

    # ---- the four training sets: one source initialisation, same seeds and batches for EM and MI-UE ----
    # EM and MI-UE generation, then every victim, run as independent single-threaded arms (parallel_map:
    # bit-identical to the serial path, each arm seeds itself from its item).
    rnd = ue.make_unlearnable(Xtr, ytr, None, "random", eps=eps, seed=seed + 2)
    poisoned: dict[str, torch.Tensor] = {"clean": Xtr, "random": rnd.images}
    deltas: dict[str, torch.Tensor] = {"random": rnd.delta}
    histories: dict[str, list] = {}
    gen_out = parallel_map(_gen_job, ["em", "mi-ue"], common=(cfg, Xtr, ytr, eps, seed), desc="generation")
    for method, out in zip(("em", "mi-ue"), gen_out, strict=True):
        poisoned[method], deltas[method], histories[method] = out["images"], out["delta"], out["history"]
        metrics[f"source_acc_{method}"] = out["history"][-1]["source_acc"]
        metrics[f"poison_loss_first_{method}"] = out["history"][0]["loss_before"]
        metrics[f"poison_loss_last_{method}"] = out["history"][-1]["loss_after"]
        metrics[f"source_within_class_cov_{method}"] = out["source_cov"]
    violations = sum(int((d.abs() > eps).sum()) for d in deltas.values())  # compared in the data's dtype
    out_of_range = sum(int(((p < 0) | (p > 1)).sum()) for p in poisoned.values())
    metrics["budget_violations"] = float(violations + out_of_range)
    metrics["max_abs_delta_over_eps"] = max(float(d.abs().max()) for d in deltas.values()) / eps
    metrics["random_max_abs_delta_over_eps"] = float(deltas["random"].abs().max()) / eps

    # ---- victims (shallow and deep, per set) and defenses (shallow victim; clean, EM, MI-UE sets) ----
    # shallow, undefended: every set on n_victim_seeds victim seeds (k = 0..n-1), and EM again on as many more
    # seeds (the C1 null arm: EM re-run); deep victims and every defense on n_side_seeds seeds
    dlist = DEFENSE_SETS[cfg.defenses]
    nv, ns = cfg.n_victim_seeds, cfg.n_side_seeds
    jobs = [(s, "deep", k, "none") for s in SETS for k in range(ns)]
    jobs += [(s, "shallow", k, d) for d in dlist for s in ("clean", "em", "mi-ue") for k in range(ns)]
    jobs += [(s, "shallow", k, "none") for s in SETS for k in range(max(nv, ns))]
    reruns = [("em", "shallow", nv + k, "none") for k in range(nv)]
    jobs += reruns
    outs = parallel_map(_victim_job, jobs, common=(cfg, Xtr, ytr, Xte, yte, poisoned, eps, seed, hw), desc="victims")
    res = dict(zip(jobs, outs, strict=True))
    n_seeds = {"shallow": nv, "deep": ns}
    acc: dict[tuple[str, str], float] = {}
    gmi: dict[tuple[str, str], float] = {}
    kmi: dict[tuple[str, str], float] = {}
    cov: dict[tuple[str, str], float] = {}
    per_seed: dict[tuple[str, str], list[float]] = {}
    victims = [(s, v) for s in SETS for v in VICTIMS]
    for s, v in victims:
        per_seed[(s, v)] = [res[(s, v, k, "none")]["acc"] for k in range(n_seeds[v])]
        first = res[(s, v, 0, "none")]
        acc[(s, v)] = float(np.mean(per_seed[(s, v)]))
        gmi[(s, v)], kmi[(s, v)], cov[(s, v)] = first["gmi"], first["kmi"], first["cov"]
        tag = f"{s}_{v}"
        metrics[f"acc_{tag}"] = acc[(s, v)]
        if n_seeds[v] > 1:
            metrics[f"acc_sd_{tag}"] = float(np.std(per_seed[(s, v)], ddof=1))
        metrics[f"gaussian_mi_{tag}"] = gmi[(s, v)]
        metrics[f"ksg_mi_{tag}"] = kmi[(s, v)]
        metrics[f"within_class_cov_{tag}"] = cov[(s, v)]
        metrics[f"train_acc_poisoned_{tag}"] = first["train_acc"]
    per_seed[("em-rerun", "shallow")] = [res[j]["acc"] for j in reruns]
    shuffled = [res[(s, v, 0, "none")]["shuffled_gmi"] for s, v in victims]
    metrics["shuffled_gaussian_mi_max"] = float(np.nanmax(shuffled)) if np.isfinite(shuffled).any() else float("nan")
    dacc: dict[tuple[str, str], float] = {}
    for d in dlist:
        for s in ("clean", "em", "mi-ue"):
            dacc[(d, s)] = float(np.mean([res[(s, "shallow", k, d)]["acc"] for k in range(ns)]))
            metrics[f"defense_acc_{d}_{s}"] = dacc[(d, s)]
    # per test image correctness (mean over the side seeds: the test-image intervals of C3 and C4)
    corr = {(s, v): np.mean([res[(s, v, k, "none")]["correct"] for k in range(ns)], axis=0) for s, v in victims}
    metrics["acc_em-rerun_shallow"] = float(np.mean(per_seed[("em-rerun", "shallow")]))
    for d in dlist:
        for s in ("clean", "em", "mi-ue"):
            corr[(s, d)] = np.mean([res[(s, "shallow", k, d)]["correct"] for k in range(ns)], axis=0)
    boot = {c: res[(*c, 0, "none")]["gmi_boot"] for c in victims}
    pcc = {c: np.asarray(res[(*c, 0, "none")]["cov_per_class"]) for c in victims}
    shuffled_all = np.array([res[(s, v, 0, "none")]["shuffled_gmi"] for s, v in victims])

    # ---- derived quantities ----
    pconds = [(s, v_) for s in POISONS for v_ in VICTIMS]  # C2 ranks the poisons only
    metrics["spearman_gaussian_mi_acc"] = spearman([gmi[c] for c in pconds], [acc[c] for c in pconds])
    metrics["spearman_ksg_mi_acc"] = spearman([kmi[c] for c in pconds], [acc[c] for c in pconds])
    metrics["spearman_gaussian_mi_acc_with_clean"] = spearman([gmi[c] for c in victims], [acc[c] for c in victims])
    sh = {s: acc[(s, "shallow")] for s in SETS}
    metrics["cov_miue_minus_min_other_poison_deep"] = cov[("mi-ue", "deep")] - min(
        cov[(s, "deep")] for s in POISONS if s != "mi-ue")
    metrics["gmi_miue_minus_min_other_poison"] = gmi[("mi-ue", "shallow")] - min(
        gmi[(s, "shallow")] for s in POISONS if s != "mi-ue")
    n_def = len(dlist)
    wins = [d for d in dlist if dacc[(d, "mi-ue")] <= dacc[(d, "em")]]
    where_em_degrades = [
        d for d in dlist
        if dacc[(d, "em")] - sh["em"] >= C4_EM_DEGRADES and dacc[(d, "mi-ue")] <= dacc[(d, "clean")] - C4_MIUE_EFFECTIVE
    ]
    metrics["defenses_em_degrades_em_holds"] = float(sum(
        1 for d in dlist
        if dacc[(d, "em")] - sh["em"] >= C4_EM_DEGRADES and dacc[(d, "em")] <= dacc[(d, "clean")] - C4_MIUE_EFFECTIVE))
    metrics["defenses_miue_le_em"] = float(len(wins))
    metrics["defenses_em_degrades_miue_holds"] = float(len(where_em_degrades))
    metrics["n_defenses"] = float(n_def)
    clean_def_drop = max((sh["clean"] - dacc[(d, "clean")] for d in dlist), default=float("nan"))
    if dlist:
        metrics["clean_defense_max_drop"] = clean_def_drop

    ctx.write_json("histories.json", {"generation": histories, "dataset": dataset, "eps": eps,
                                      "victim_acc_per_seed": {f"{s}_{v}": a for (s, v), a in per_seed.items()}})
    _figures(ctx, Xtr, ytr, deltas, poisoned, acc, gmi, dacc, dlist, eps, dataset)

    claims = _claims(cfg, dataset, metrics, sh, acc, gmi, cov, dlist, corr, boot, pcc, shuffled_all, len(ytr), seed,
                     per_seed)
    notes = (
        f"Dataset: {dataset} ({len(ytr)} train / {len(yte)} test, {hw[0]}x{hw[1]}), eps = {eps * 255:.1f}/255, "
        f"{cfg.gen_epochs} generation epochs x {cfg.pgd_steps} PGD steps, victims {cfg.victim_epochs} epochs, "
        f"{nv} shallow victim seed(s) (+{nv} EM re-run), {ns} deep / defense seed(s). Shallow-victim clean test "
        "accuracy: " + ", ".join(f"{s} {sh[s]:.3f}" for s in SETS)
        + f". Source accuracy on x+delta: EM {metrics['source_acc_em']:.3f}, MI-UE {metrics['source_acc_mi-ue']:.3f}. "
        f"MI-UE <= EM under {len(wins)} of {n_def} defenses ({', '.join(wins) or 'none'})."
    )
    return Result(metrics=metrics, claims=claims, notes=notes)


def _boot_est(value: float, dist: np.ndarray, n: int) -> Est:
    """An estimate from a bootstrap distribution over training images (percentile interval; NaN-safe)."""
    ok = dist[np.isfinite(dist)]
    if not math.isfinite(value) or ok.size < dist.size / 2:
        return Est(value, math.nan, math.nan, "train image", n, "paired bootstrap")
    lo, hi = np.quantile(ok, [0.025, 0.975])
    return Est(value, min(lo, value), max(hi, value), "train image", n, "paired bootstrap (fixed PCA basis)")


def _claims(cfg, dataset, m, sh, acc, gmi, cov, dlist, corr, boot, pcc, shuffled_all, n_train, seed,
            per_seed) -> list:
    S, D = "shallow", "deep"
    img = dict(unit="test image", seed=seed)
    ps = {c: np.asarray(v, dtype=float) for c, v in per_seed.items()}

    # ---- the spec's validity gates: a run that misses them is inconclusive, neither pass nor fail ----
    # The clean-victim gate asks whether the victims that C1 compares were trained normally, so it reads this run's
    # victims (the lowest seed), as the source-fit gates read this run's poison; the mean's t-interval is reported.
    cm = t_interval(ps[("clean", S)], unit="seed")
    per_clean = "/".join(f"{v:.3f}" for v in ps[("clean", S)])
    gates = [
        claim("sanity_source_fit_em", f"sanity: the EM source model fits x+delta (accuracy >= {SANITY_SOURCE})",
              exact(m["source_acc_em"], why="accuracy on the whole training set"), ">=", SANITY_SOURCE,
              why="the spec's validity gate of this run's generation (a property of this poison, no seed claim)"),
        claim("sanity_source_fit_miue", f"sanity: the MI-UE source model fits x+delta (accuracy >= {SANITY_SOURCE})",
              exact(m["source_acc_mi-ue"], why="accuracy on the whole training set"), ">=", SANITY_SOURCE,
              why="the spec's validity gate of this run's generation (a property of this poison, no seed claim)"),
        claim("sanity_clean_victim", f"sanity: every clean-trained shallow victim of this run reaches normal "
              f"accuracy (>= {SANITY_CLEAN[dataset]} on {dataset}; the lowest of the victim seeds)",
              exact(float(np.min(ps[("clean", S)])), why="lowest over this run's victim seeds"), ">=",
              SANITY_CLEAN[dataset],
              why="the spec's validity gate of the victims that C1 compares (a property of this run's victims, "
                  "like the source fit)",
              detail=f"per seed {per_clean}; mean {cm.value:.3f} [{cm.lo:.3f}, {cm.hi:.3f}] (t over seeds)"),
    ]
    failed = [g.name.removeprefix("sanity_") for g in gates if g.verdict != "held"]

    def valid(est: Est) -> tuple[Est, str]:
        """The estimate, or (when a validity gate is not held) an undefined one that keeps the measured value in
        the detail: such a run is inconclusive on every claim, never 'not held'."""
        if not failed:
            return est, ""
        return (Est(float("nan"), float("nan"), float("nan"), est.unit, est.n, est.method),
                f"set aside (validity gate not held: {', '.join(failed)}): measured {est.value:.4g} "
                f"[{est.lo:.4g}, {est.hi:.4g}] / {est.unit}; ")

    def seed_diff(a, b) -> Est:  # paired by victim seed k (same initialisation and batch order)
        return t_interval(ps[a] - ps[b], unit="seed")

    def diff(a, b) -> Est:
        return paired_bootstrap(corr[a], corr[b], **img)

    c1, pre1 = valid(seed_diff(("mi-ue", S), ("em", S)))
    both = np.maximum(ps[("em", S)], ps[("mi-ue", S)]) - ps[("random", S)]
    c1b, pre1b = valid(t_interval(both, unit="seed"))
    per = lambda c: "/".join(f"{v:.3f}" for v in ps[c])  # noqa: E731
    cl = [
        claim("C1_miue_vs_em", f"shallow victim: MI-UE clean test accuracy <= EM - {C1_GAP_EM:g} (paired by victim seed)",
              c1, "<=", -C1_GAP_EM, null=seed_diff(("em-rerun", S), ("em", S)),
              null_what="EM re-run: EM's poison on other victim seeds, minus EM", trained=True,
              detail=pre1 + f"per seed MI-UE {per(('mi-ue', S))}, EM {per(('em', S))}, EM re-run "
                            f"{per(('em-rerun', S))}"),
        claim("C1_both_vs_random", f"shallow victim: max(EM, MI-UE) accuracy <= random-noise accuracy - {C1_GAP_RANDOM:g} "
              "(per victim seed)", c1b, "<=", -C1_GAP_RANDOM,
              null=t_interval(ps[("clean", S)] - ps[("random", S)], unit="seed"), trained=True,
              null_what="the clean set (no poison) in place of EM and MI-UE: clean - random",
              detail=pre1b + f"per seed random {per(('random', S))}, clean {per(('clean', S))}"),
    ]
    # C2 over the poisons only (random, EM, MI-UE); the clean set is reported in the detail as a reference.
    # Covariance on the deep victim (another architecture than the shallow source model); the mean over classes
    # of a per-class trace, so the interval resamples classes.
    cls = np.stack([pcc[(s, D)] for s in POISONS], axis=1)  # [classes, poisons]

    def cov_gap(i_set):
        def f(rows):
            means = cls[rows].mean(0)
            return float(means[i_set] - np.delete(means, i_set).min())
        return f

    n_cls = cls.shape[0]
    cov_est, pre_cov = valid(cluster_bootstrap(cov_gap(POISONS.index("mi-ue")), np.arange(n_cls), unit="class",
                                               seed=seed))
    cov_null = cluster_bootstrap(cov_gap(POISONS.index("em")), np.arange(n_cls), unit="class", seed=seed)

    def lowest(s_name):
        others = [o for o in POISONS if o != s_name]
        return (gmi[(s_name, S)] - min(gmi[(o, S)] for o in others),
                boot[(s_name, S)] - np.min([boot[(o, S)] for o in others], axis=0))

    v, dist = lowest("mi-ue")
    vn, distn = lowest("em")
    mi_est, pre_mi = valid(_boot_est(v, dist, n_train))
    # Spearman over the 6 poison x victim conditions; null: its 95th percentile over all 6! orderings
    pconds = [(s, v_) for s in POISONS for v_ in VICTIMS]
    g6, a6 = np.array([gmi[c] for c in pconds]), np.array([acc[c] for c in pconds])
    rho_est, pre_rho = valid(bootstrap((g6, a6), spearman, paired=True, unit="condition", seed=seed))
    cl += [
        claim("C2_cov_lowest", "MI-UE has the lowest within-class covariance proxy of the three poisons on the deep "
              "victim (another architecture than the source; value = MI-UE - lowest other poison)", cov_est, "<", 0.0,
              null=cov_null, trained=True, null_what="EM (the predecessor) - lowest other poison",
              detail=pre_cov + ", ".join(f"{s} {cov[(s, D)]:.4f}" for s in SETS) + " (clean: reference only)"),
        claim("C2_mi_lowest", "MI-UE has the lowest Gaussian MI(g(x); g(x+delta)) of the three poisons (shallow victim; "
              "value = MI-UE - lowest other poison)", mi_est, "<", 0.0,
              null=_boot_est(vn, distn, n_train), null_what="EM (the predecessor) - lowest other poison", trained=True,
              detail=pre_mi + ", ".join(f"{s} {gmi[(s, S)]:.3f}" for s in SETS) + " (clean: reference only)"),
        claim("C2_spearman", f"Spearman rho(Gaussian MI, test accuracy) over the poison x victim conditions >= "
              f"{C2_SPEARMAN}", rho_est, ">=", C2_SPEARMAN,
              null=random_baseline(_all_permutation_spearman(g6, a6), exact_enumeration=True, unit="ordering"),
              trained=True, null_what="95th percentile of rho over all 6! orderings of the accuracies",
              detail=pre_rho + f"KSG: {m['spearman_ksg_mi_acc']:.3f}; with the clean set as two more conditions "
                               f"(reference): {m['spearman_gaussian_mi_acc_with_clean']:.3f}"),
        claim("sanity_mi_shuffled", f"sanity: Gaussian MI of shuffled (independent) pairs <= {CTRL_SHUFFLED_MI} nats, "
              "mean over the 8 conditions (the estimator can report no dependence)",
              t_interval(shuffled_all, unit="condition"), "<=", CTRL_SHUFFLED_MI,
              why="precondition of C2: the estimator's bias on independent pairs (about q^2/2N nats) is small"),
    ]
    for s, tag in (("em", "em"), ("mi-ue", "miue")):
        e_acc, p_acc = valid(diff((s, D), (s, S)))
        e_mi, p_mi = valid(_boot_est(gmi[(s, D)] - gmi[(s, S)], boot[(s, D)] - boot[(s, S)], n_train))
        cl.append(claim(f"C3_{tag}_acc", f"{s}: the deeper victim's accuracy <= the shallow victim's",
                        e_acc, "<=", 0.0, null=diff(("clean", D), ("clean", S)),
                        null_what="the clean set (no poison): deep - shallow", trained=True,
                        detail=p_acc + f"deep {acc[(s, D)]:.3f}, shallow {acc[(s, S)]:.3f}"))
        cl.append(claim(f"C3_{tag}_mi", f"{s}: the deeper victim's Gaussian MI <= the shallow victim's",
                        e_mi, "<=", 0.0,
                        null=_boot_est(gmi[("clean", D)] - gmi[("clean", S)],
                                       boot[("clean", D)] - boot[("clean", S)], n_train),
                        null_what="the clean set (no poison): deep - shallow", trained=True,
                        detail=p_mi + f"deep {gmi[(s, D)]:.3f}, shallow {gmi[(s, S)]:.3f}"))
    if dlist:
        n_def = len(dlist)

        def wins(*xs):  # number of defenses with mean(first) <= mean(second), arrays interleaved per defense
            return float(sum(xs[2 * i].mean() <= xs[2 * i + 1].mean() for i in range(n_def)))

        def worst(*xs):  # max over defenses of mean(first) - mean(second)
            return float(max(xs[2 * i].mean() - xs[2 * i + 1].mean() for i in range(n_def)))

        def count_vs_em(s_name):
            arrs = tuple(a for d in dlist for a in (corr[(s_name, d)], corr[("em", d)]))
            return bootstrap(arrs, wins, paired=True, **img)

        e4, p4 = valid(count_vs_em("mi-ue"))
        e4b, p4b = valid(exact(m["defenses_em_degrades_miue_holds"], why="count"))
        drop = tuple(a for d in dlist for a in (corr[("clean", S)], corr[("clean", d)]))
        per_def = ", ".join(f"{d} {m[f'defense_acc_{d}_mi-ue']:.3f} vs {m[f'defense_acc_{d}_em']:.3f}" for d in dlist)
        cl += [
            claim("C4_each_defense", f"MI-UE accuracy <= EM accuracy under each of the {n_def} defenses (value = how many "
                  f"of the {n_def} MI-UE wins)", e4, ">=", n_def,
                  null=count_vs_em("clean"), null_what="the clean set (no poison) in place of MI-UE", trained=True,
                  detail=p4 + f"MI-UE vs EM: {per_def}"),
            claim("C4_effective_where_em_degrades",
                  f"at least one defense lifts EM by >= {C4_EM_DEGRADES:g} while MI-UE stays >= {C4_MIUE_EFFECTIVE:g} "
                  "below the clean victim under it (count)", e4b, ">=", 1,
                  null=exact(m["defenses_em_degrades_em_holds"], why="count"), trained=True,
                  null_what="the same count with EM in place of MI-UE",
                  detail=p4b + "clean / EM / MI-UE under " + "; ".join(
                      f"{d} {m[f'defense_acc_{d}_clean']:.3f} / {m[f'defense_acc_{d}_em']:.3f} / "
                      f"{m[f'defense_acc_{d}_mi-ue']:.3f}" for d in dlist) + f"; undefended EM {sh['em']:.3f}"),
            claim("ctrl_defense_keeps_clean", f"control: no defense costs the clean victim more than {CTRL_DEFENSE_CLEAN:g}",
                  bootstrap(drop, worst, paired=True, **img), "<=", CTRL_DEFENSE_CLEAN, trained=True,
                  why="a defense that ruins training would make C4 trivial"),
        ]
    cl += gates + [
        claim("sanity_budget", "sanity: every perturbation within the L-inf budget and every image in [0, 1] "
              "(count of violating pixels, compared in the data's float32)",
              exact(m["budget_violations"], why="count"), "<=", 0.0, why="the threat model's constraint",
              detail=f"max |delta| / eps = {m['max_abs_delta_over_eps']:.7f} (eps as a float64)"),
    ]
    return cl


def _all_permutation_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of ``x`` against every ordering of ``y`` (exact enumeration; ranks with ties averaged)."""
    import itertools

    from scipy.stats import rankdata

    rx, ry = rankdata(x), rankdata(y)
    P = ry[np.array(list(itertools.permutations(range(len(ry)))))]
    rx, P = rx - rx.mean(), P - P.mean(1, keepdims=True)
    den = np.sqrt((rx**2).sum() * (P**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (P @ rx) / den


def _figures(ctx, Xtr, ytr, deltas, poisoned, acc, gmi, dacc, dlist, eps, dataset):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(SETS))
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, v in enumerate(VICTIMS):
        ax.bar(x + (i - 0.5) * 0.38, [acc[(s, v)] for s in SETS], 0.38, label=f"{v} victim")
    ax.set(xticks=x, xticklabels=SETS, ylabel="clean test accuracy", ylim=(0, 1),
           title=f"victims trained on each set ({dataset}, eps {eps * 255:.0f}/255)")
    ax.legend(fontsize=8)
    ctx.save_figure(fig, "victim_accuracy", "Clean test accuracy of fresh victims trained on each training set.")

    fig, ax = plt.subplots(figsize=(5, 3.8))
    for i, s in enumerate(SETS):
        for v, mk in zip(VICTIMS, "os", strict=True):
            ax.scatter(gmi[(s, v)], acc[(s, v)], color=f"C{i}", marker=mk, label=f"{s} / {v}")
    ax.set(xlabel="Gaussian MI(g(x); g(x+delta)) (nats, q-d PCA)", ylabel="clean test accuracy")
    ax.legend(fontsize=6)
    ctx.save_figure(fig, "mi_vs_accuracy", "MI proxy against test accuracy, every set x victim.")

    if dlist:
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        cols = ("none", *dlist)
        xs = np.arange(len(cols))
        for i, s in enumerate(("clean", "em", "mi-ue")):
            vals = [acc[(s, "shallow")] if d == "none" else dacc[(d, s)] for d in cols]
            ax.bar(xs + (i - 1) * 0.27, vals, 0.27, label=s)
        ax.set(xticks=xs, xticklabels=cols, ylabel="clean test accuracy", ylim=(0, 1), title="shallow victim per defense")
        ax.legend(fontsize=8)
        ctx.save_figure(fig, "defenses", "Shallow-victim accuracy under each defense (none = no defense).")

    idx = [int(torch.nonzero(ytr == c)[0]) for c in range(NUM_CLASSES)]
    rows = [("clean", Xtr, False)] + [(f"{m} x+delta", poisoned[m], False) for m in ("em", "mi-ue")]
    rows += [(f"{m} delta", deltas[m], True) for m in ("em", "mi-ue")]
    fig, axes = plt.subplots(len(rows), NUM_CLASSES, figsize=(NUM_CLASSES * 0.9, len(rows) * 0.95))
    for r, (name, T, is_delta) in enumerate(rows):
        for c, i in enumerate(idx):
            img = T[i, 0].numpy()
            if is_delta:
                axes[r, c].imshow(img, cmap="RdBu", vmin=-eps, vmax=eps)
            else:
                axes[r, c].imshow(img, cmap="gray", vmin=0, vmax=1)
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=6)
    ctx.save_figure(fig, "image_grid", "One training image per class: clean, EM and MI-UE images, and delta (±eps).")
