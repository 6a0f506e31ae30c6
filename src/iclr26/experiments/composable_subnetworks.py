"""Composable Sparse Subnetworks via Maximum-Entropy Principle (ICLR 2026, IHwx5ioIP2) — reproduction.

Trains, from one shared initialisation theta0, ten single-class sparse modules (max-entropy KL loss +
IMP with rewinding), two five-class modules, a dense and an IMP generalist, and three controls (dense
single-class modules, hidden-unit-permuted modules, a five-class module from another theta0). Measures
specialisation, composition by weight summation and logit averaging, and the loss barrier.
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import dataclass

import torch
from torch import nn

from iclr26.core import param, progress
from iclr26.core.errors import MissingAssetError, UserError
from iclr26.core.seed import make_generator
from iclr26.data import images
from iclr26.runs import Result, RunContext, claim
from iclr26.sparsity import subnetworks as sn
from iclr26.stats import exact, t_interval

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Ten single-class and two five-class sparse modules (max-entropy KL + IMP rewound to one shared "
    "theta0) on Fashion-MNIST 14x14 (sklearn digits if the Debian package is absent). Shows specialisation "
    "with near-uniform output off-class, composition by logit averaging and by masked weight summation "
    "against permuted/dense controls, and a smaller loss barrier with a shared than with a different theta0."
)

NUM_CLASSES = 10
SEED_STRIDE = 1000  # seed i of a run uses run seed + SEED_STRIDE * i (theta0, split, dropout)
LN10 = math.log(10.0)


@dataclass
class Config:
    dataset: str = param(
        "auto",
        "data set; auto = Fashion-MNIST if installed, else sklearn digits",
        choices=["auto", "fashion-mnist", "digits"],
    )
    n_train_per_class: int = param(1000, "Fashion-MNIST training images per class", low=1, high=5999)
    n_val_per_class: int = param(200, "Fashion-MNIST validation images per class (early stopping)", low=1, high=5999)
    n_test_per_class: int = param(200, "Fashion-MNIST test images per class (official test split)", low=1, high=1000)
    pool: int = param(
        2, "mean-pooling factor for Fashion-MNIST (2: 28x28 -> 14x14)", choices=[1, 2, 4, 7, 14, 28]
    )
    model: str = param(
        "mlp", "architecture: mlp (one hidden layer) or cnn (conv + maxpool + 2 FC)", choices=["mlp", "cnn"]
    )
    hidden: int = param(128, "MLP hidden width / CNN fully connected width", low=1, high=8192)
    channels: int = param(16, "CNN conv channels (3x3, pad 1, then 2x2 maxpool)", low=1, high=512)
    dropout: float = param(0.2, "dropout after the hidden layer", low=0.0, high=1.0, high_open=True)
    temperature: float = param(
        5.0, "temperature t of the max-entropy loss and of all entropies", low=0.0, high=1000.0, low_open=True
    )
    target_sparsity: float = param(
        0.9, "IMP target sparsity P per layer", low=0.0, high=1.0, low_open=True, high_open=True
    )
    rounds: int = param(2, "IMP rounds k (ratio r = 1 - (1-P)^(1/k); r/2 on the output layer)", low=1, high=20)
    epochs: int = param(
        12, "epochs: epochs/k per IMP round, then epochs for the final training", low=1, high=10000
    )
    digits_epochs: int = param(
        60, "epochs instead of `epochs` on sklearn digits (1,259 images: 10 steps/epoch)", low=1, high=10000
    )
    lr: float = param(1e-3, "Adam learning rate", low=0.0, high=1.0, low_open=True)
    batch_size: int = param(128, "batch size", low=1, high=65536)
    patience: int = param(3, "early-stopping patience (validation loss)", low=1, high=10000)
    n_alphas: int = param(
        11, "interpolation points for the loss barrier (both endpoints included)", low=2, high=1001
    )
    control_seed: int = param(
        1, "seed offset of the different theta0 for the barrier control (0 would repeat theta0)", low=1, high=10**9
    )
    warmup_epochs: int = param(
        3,
        "shared rewinding point: train the dense generalist this many epochs from theta0 and use the "
        "result as the init every module rewinds to (0 = rewind to theta0 itself, as in the paper)",
        low=0,
        high=1000,
    )
    n_seeds: int = param(
        3,
        "training seeds for the gated claims (theta0, split, dropout; seed i = run seed + 1000 i); "
        "gated values are the seed mean -/+ one between-seed sd",
        low=1,
        high=100,
    )
    n_permutations: int = param(
        5, "random hidden-unit permutations averaged in the permuted-sum control (per seed)", low=1, high=1000
    )
    threads: int = param(
        1, "torch / BLAS threads during the run (applied by the engine, restored after); tiny models run fastest on 1",
        low=1, high=256,
    )

    def validate(self) -> None:
        """Cross-field constraints (the per-field ranges are checked before this)."""
        if self.n_train_per_class + self.n_val_per_class > 6000:
            raise UserError(
                f"n_train_per_class + n_val_per_class = {self.n_train_per_class + self.n_val_per_class}: "
                "Fashion-MNIST has 6000 training images per class"
            )
        if self.model == "cnn" and self.pool > 14:
            raise UserError(f"pool={self.pool} with model=cnn: the 2x2 maxpool needs pool <= 14 (image >= 2x2)")


PRESETS = {
    "smoke": {
        "dataset": "digits",
        "hidden": 32,
        "epochs": 2,
        "digits_epochs": 2,
        "n_alphas": 3,
        "n_seeds": 2,
        "n_permutations": 2,
    },
    "default": {},
    "paper": {
        "pool": 1,
        "hidden": 512,
        "dropout": 0.5,
        "target_sparsity": 0.99,
        "epochs": 20,
        "n_train_per_class": 4800,
        "n_val_per_class": 1200,
        "n_test_per_class": 1000,
        "batch_size": 64,
    },
}


def plan(cfg: Config) -> dict:
    """What a run with ``cfg`` needs and roughly costs (``iclr26 run composable-subnetworks --plan``)."""
    from iclr26 import plan as p

    needs = p.image_data(cfg.dataset)

    def work(c: Config) -> float:  # seeds x images x epochs x multiply-adds of one forward pass
        fashion = c.dataset != "digits"
        side = 28 // c.pool if fashion else 8
        n, epochs = (10 * c.n_train_per_class, c.epochs) if fashion else (1259, c.digits_epochs)
        macs = side * side * c.hidden if c.model == "mlp" else (
            side * side * 9 * c.channels + c.channels * (side // 2) ** 2 * c.hidden)
        return c.n_seeds * n * epochs * macs

    return {
        "needs": needs, "device": "cpu (a CUDA GPU is used when present: --device auto; it needs < 1 GB)",
        "gpu_memory_gb": None,
        **p.cpu_time("composable-subnetworks", cfg, work, "seeds x training images x epochs x model size"),
        "notes": ["spec §7: full-size Fashion-MNIST with the official MLP is CPU-feasible (minutes to an hour per "
                  "training); this run trains every module, the generalist and the controls for each seed"],
    }


def _load_data(cfg: Config, seed: int) -> tuple[str, dict[str, tuple[torch.Tensor, torch.Tensor]], str]:
    """Return (dataset name, {"train","val","test"} -> (X [N, 1, H, W] standardised, y), note)."""
    note = ""
    name = cfg.dataset
    if name in ("auto", "fashion-mnist"):
        try:
            Xtr, ytr = images.load_fashion_mnist("train")
            Xte, yte = images.load_fashion_mnist("test")
            name = "fashion-mnist"
        except MissingAssetError as e:
            if cfg.dataset == "fashion-mnist":
                raise
            name = "digits"
            note = f"Fashion-MNIST not available ({e}); fell back to sklearn digits. "
    if name == "fashion-mnist":
        Xs, ys = images.subset_per_class(Xtr, ytr, cfg.n_train_per_class + cfg.n_val_per_class, seed)
        parts = images.split_train_val_test(
            Xs,
            ys,
            val_frac=cfg.n_val_per_class / (cfg.n_train_per_class + cfg.n_val_per_class),
            test_frac=0.0,
            seed=seed,
        )
        Xt, yt = images.subset_per_class(Xte, yte, cfg.n_test_per_class, seed)
        split = {"train": parts["train"], "val": parts["val"], "test": (Xt, yt)}
        if cfg.pool > 1:
            split = {k: (images.avg_pool(X, cfg.pool), y) for k, (X, y) in split.items()}
    else:
        X, y = images.load_digits()
        split = images.split_train_val_test(X, y, val_frac=0.15, test_frac=0.15, seed=seed)
    # Standardise each pixel with training statistics (constant pixels keep scale 1).
    mu = split["train"][0].mean(0)
    sd = split["train"][0].std(0)
    sd = torch.where(sd > 1e-3, sd, torch.ones_like(sd))
    split = {k: (((X - mu) / sd).unsqueeze(1), y) for k, (X, y) in split.items()}
    return name, split, note


def _make_model(cfg: Config, hw: tuple[int, int], seed: int) -> nn.Module:
    """theta0: the architecture initialised from ``seed`` (global RNG forked, so callers are untouched)."""
    h, w = hw
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if cfg.model == "mlp":
            return nn.Sequential(
                nn.Flatten(),
                nn.Linear(h * w, cfg.hidden),
                nn.ReLU(),
                nn.Dropout(cfg.dropout),
                nn.Linear(cfg.hidden, NUM_CLASSES, bias=False),  # bias-free output layer, as in the paper
            )
        return nn.Sequential(
            nn.Conv2d(1, cfg.channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(cfg.channels * (h // 2) * (w // 2), cfg.hidden),
            nn.ReLU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.hidden, NUM_CLASSES, bias=False),
        )


def _entropy_outside(logits: torch.Tensor, y: torch.Tensor, classes: list[int], t: float) -> float:
    return sn.subnetwork_metrics(logits, y, classes, temperature=t)["entropy_outside"]


# A 26k-parameter MLP gains nothing from intra-op threads; on a busy 2-core machine a second thread made
# training ~20x slower in wall time. The engine applies one thread (iclr26.core.threads; `threads` overrides).
WORKLOAD = "small"
HEADLINE = "C3a"
# the run trains `n_seeds` (3) seeds itself; the engine runs one ctx.seed per preset
SEEDS = {"smoke": 1, "default": 1, "paper": 1}
# measured on the default run (cold cache, 2026-12-06); docs/composable-subnetworks.md gives the table
EXPECTED = {
    "C1a": "held",
    "C1b": ("not held", "module F1 0.36 vs generalist 0.83: gap 0.47 on every seed against a 0.10 bar"),
    "C1c": "held",
    "C1e": ("no power", "the dense generalist's leakage (~0.02) passes the same <= 0.05 gate"),
    "C1f": ("not held", "modules pick their own class on 40 % of off-class samples (generalist 1.8 %): 0.38 vs 0.05"),
    "C2": ("no power", "the untrained rewinding point alone reaches ~0.93 of the generalist (bar 0.9)"),
    "C3a": ("no power", "the same masks summed on the untrained rewinding point reach ~0.91 of the generalist "
                        "(bar 0.9): the composite inherits theta_w's accuracy"),
    "C3b": "held",
    "C4a": ("inconclusive", "barrier gap -0.001 +- 0.002 over 3 seeds: the interval straddles 0. Its permuted "
                            "null equals it exactly: every path is monotone here, so the official barrier is half "
                            "the endpoint loss gap, which a function-preserving permutation cannot change (the "
                            "bump above the straight line is reported as barrier_excess_*)"),
    "C4b": ("no power", "modules from a different theta0 also have a small barrier (~0.035 <= 0.1)"),
    "sanity_sparsity": "held",
}


def run(cfg: Config, ctx: RunContext) -> Result:
    return _run(cfg, ctx)


def _fit_family(
    cfg: Config, ctx: RunContext, seed: int, *, full: bool
) -> tuple[str, dict[str, tuple[torch.Tensor, torch.Tensor]], str, int, dict[str, sn.MaxEntIMP]]:
    """Load the split for ``seed`` and train one family of modules from theta0 = ``seed``.

    ``full``: everything (main seed); otherwise only what the gated claims need (the dense
    generalist, the 10 single-class modules, S_A, S_B and S_B from the other theta0).
    """
    dataset, data, note = _load_data(cfg, seed)
    if cfg.dataset == "auto" and dataset == "digits":
        ctx.note_missing_asset("Fashion-MNIST", "python -m iclr26.assets fetch",
                               skipped="ran on sklearn digits instead (the gated claims are designed for Fashion-MNIST)")
    (Xtr, ytr), (Xva, yva) = data["train"], data["val"]
    hw = (Xtr.shape[-2], Xtr.shape[-1])
    theta0 = _make_model(cfg, hw, seed)
    theta0_other = _make_model(cfg, hw, seed + cfg.control_seed)
    epochs = cfg.epochs if dataset == "fashion-mnist" else cfg.digits_epochs
    common = dict(
        num_classes=NUM_CLASSES,
        temperature=cfg.temperature,
        epochs=epochs,
        lr=cfg.lr,
        batch_size=cfg.batch_size,
        patience=cfg.patience,
        seed=seed,
        device=ctx.device,
    )
    imp = dict(target_sparsity=cfg.target_sparsity, rounds=cfg.rounds)
    dense = dict(target_sparsity=0.0, rounds=0)
    S_A, S_B, ALL = list(range(5)), list(range(5, 10)), list(range(10))
    generalist = theta0  # the reference generalist always trains from the raw theta0
    if cfg.warmup_epochs > 0:
        # A later, shared rewinding point: a few epochs of the dense generalist (plain CE, since S = all).
        warm = {**common, "epochs": cfg.warmup_epochs}
        theta0 = sn.MaxEntIMP(ALL, **warm, **dense).fit(theta0, Xtr, ytr, Xva, yva).module_
        theta0_other = sn.MaxEntIMP(ALL, **warm, **dense).fit(theta0_other, Xtr, ytr, Xva, yva).module_
    jobs = [("gen_dense", ALL, dense, generalist)]
    jobs += [("gen_imp", ALL, imp, theta0)] if full else []
    jobs += [(f"single{c}", [c], imp, theta0) for c in range(NUM_CLASSES)]
    jobs += [(f"dense{c}", [c], dense, theta0) for c in range(NUM_CLASSES)] if full else []
    jobs += [("S_A", S_A, imp, theta0), ("S_B", S_B, imp, theta0), ("S_B_other", S_B, imp, theta0_other)]
    fitted: dict[str, sn.MaxEntIMP] = {}
    for name, classes, kind, init in progress(jobs, desc=f"training modules (seed {seed})"):
        fitted[name] = sn.MaxEntIMP(classes, **common, **kind).fit(init, Xtr, ytr, Xva, yva)
    return dataset, data, note, epochs, fitted


def _sparsity_deviation(cfg: Config, fitted: dict[str, sn.MaxEntIMP]) -> tuple[float, float]:
    """(worst module-total deviation, worst single-tensor deviation) from the IMP target."""
    # Per tensor the target is 1 - (1 - amount)^k; tiny tensors (a 16-entry conv bias) miss it by
    # rounding, so the gate is on each module's total and the worst tensor is only reported.
    worst_dev = worst_tensor_dev = 0.0
    for e in fitted.values():
        if e.rounds == 0:
            continue
        achieved = sn.mask_sparsity(e.masks_, by_layer=False)
        sizes = {k: m.numel() for k, m in e.masks_.items()}
        targets = {k: 1 - (1 - a) ** cfg.rounds for k, a in e.layer_amounts_.items()}
        target_total = sum(targets[k] * n for k, n in sizes.items()) / sum(sizes.values())
        worst_dev = max(worst_dev, abs(achieved["total"] - target_total))
        worst_tensor_dev = max(worst_tensor_dev, *(abs(achieved[k] - targets[k]) for k in targets))
    return worst_dev, worst_tensor_dev


def _gated_quantities(
    cfg: Config, fitted: dict[str, sn.MaxEntIMP], Xte: torch.Tensor, yte: torch.Tensor, seed: int
) -> dict[str, float]:
    """Every quantity a gated claim reads, for one seed's family (means over the 10 classes)."""
    t = cfg.temperature
    singles = [fitted[f"single{c}"] for c in range(NUM_CLASSES)]
    gen_logits = fitted["gen_dense"].predict_logits(Xte)
    acc = lambda m: float((sn.predict_logits(m, Xte).argmax(-1) == yte).float().mean())  # noqa: E731
    gen_acc = float((gen_logits.argmax(-1) == yte).float().mean())
    mods = [e.score(Xte, yte) for e in singles]
    gen = [sn.subnetwork_metrics(gen_logits, yte, [c], temperature=t) for c in range(NUM_CLASSES)]
    mod_f1 = [sn.one_vs_rest_f1(e.predict_logits(Xte), yte, c) for c, e in enumerate(singles)]
    gen_f1 = [sn.one_vs_rest_f1(gen_logits, yte, c) for c in range(NUM_CLASSES)]
    mean = lambda xs: float(sum(xs) / len(xs))  # noqa: E731
    ws = acc(sn.weight_sum([e.module_ for e in singles], [e.masks_ for e in singles]))
    la = acc(sn.LogitAverage([e.module_ for e in singles]))
    g = make_generator(seed + 12345)
    perm_accs = []
    for _ in range(cfg.n_permutations):
        permuted = [sn.permute_hidden_units(e.module_, e.masks_, generator=g) for e in singles]
        perm_accs.append(acc(sn.weight_sum([p[0] for p in permuted], [p[1] for p in permuted])))
    # The rewinding point itself and the sum of the same masks on it, untrained: the trained
    # modules must add something beyond what the (possibly warmed-up) rewinding point already has.
    rewound = []
    for e in singles:
        r = copy.deepcopy(e.module_)
        r.load_state_dict(e.theta0_)
        rewound.append(r)
    rewound_sum = acc(sn.weight_sum(rewound, [e.masks_ for e in singles]))
    rp_logits = sn.predict_logits(rewound[0], Xte)  # every module rewinds to the same point
    rp = [sn.subnetwork_metrics(rp_logits, yte, [c], temperature=t) for c in range(NUM_CLASSES)]

    def constant(c: int) -> torch.Tensor:  # a module that answers c on every input
        z = torch.zeros(len(yte), NUM_CLASSES)
        z[:, c] = 1.0
        return z

    const = [sn.subnetwork_metrics(constant(c), yte, [c], temperature=t) for c in range(NUM_CLASSES)]
    const_f1 = [sn.one_vs_rest_f1(constant(c), yte, c) for c in range(NUM_CLASSES)]
    S_AB = list(range(NUM_CLASSES))
    curves = {
        key: sn.loss_barrier(
            fitted["S_A"].module_, fitted[other].module_, Xte, yte, S_AB, temperature=t, n_alphas=cfg.n_alphas
        )
        for key, other in (("same", "S_B"), ("different", "S_B_other"))
    }
    # S_B with its hidden units permuted: the shared theta0's alignment destroyed, nothing retrained
    perm_B = sn.permute_hidden_units(fitted["S_B"].module_, fitted["S_B"].masks_, generator=g)[0]
    curves["permuted"] = sn.loss_barrier(fitted["S_A"].module_, perm_B, Xte, yte, S_AB, temperature=t,
                                         n_alphas=cfg.n_alphas)
    bar = {k: v.barrier for k, v in curves.items()}
    # reported only: on a monotone path the official barrier is half the endpoint gap, which a permutation
    # (same function, same endpoint losses) cannot change; the bump above the straight line can
    excess = {f"barrier_excess_{k}": v.excess for k, v in curves.items()}
    return {
        "generalist_acc": gen_acc,
        "rewarded_acc": mean([m["rewarded_accuracy"] for m in mods]),
        "f1_gap": mean([gf - mf for gf, mf in zip(gen_f1, mod_f1, strict=True)]),
        "module_f1": mean(mod_f1),
        "generalist_f1": mean(gen_f1),
        "entropy_outside": mean([m["entropy_outside"] for m in mods]),
        "generalist_entropy_outside": mean([m["entropy_outside"] for m in gen]),
        "leakage": mean([m["leakage"] for m in mods]),
        "off_argmax_share": mean([m["off_argmax_share"] for m in mods]),
        "generalist_off_argmax_share": mean([m["off_argmax_share"] for m in gen]),
        "off_argmax_excess": mean([m["off_argmax_share"] - q["off_argmax_share"] for m, q in zip(mods, gen, strict=True)]),
        "logit_avg_acc": la,
        "logit_avg_ratio": la / gen_acc,
        "weight_sum_acc": ws,
        "weight_sum_ratio": ws / gen_acc,
        "rewinding_point_acc": acc(rewound[0]),
        "rewound_sum_acc": rewound_sum,
        "weight_sum_minus_rewound": ws - rewound_sum,
        "permuted_sum_acc": mean(perm_accs),
        "weight_sum_minus_permuted": ws - mean(perm_accs),
        "barrier_same": bar["same"],
        "barrier_different": bar["different"],
        "barrier_gap": bar["different"] - bar["same"],
        # null arms (the same metric when the method does nothing new)
        "rewinding_point_rewarded_acc": mean([m["rewarded_accuracy"] for m in rp]),
        "constant_f1_gap": mean([gf - cf for gf, cf in zip(gen_f1, const_f1, strict=True)]),
        "generalist_leakage": mean([m["leakage"] for m in gen]),
        "constant_off_argmax_excess": mean([m["off_argmax_share"] - q["off_argmax_share"]
                                            for m, q in zip(const, gen, strict=True)]),
        "rewinding_point_ratio": acc(rewound[0]) / gen_acc,
        "rewound_sum_ratio": rewound_sum / gen_acc,
        "permuted_minus_permuted": perm_accs[0] - mean(perm_accs[1:]) if len(perm_accs) > 1 else math.nan,
        "barrier_permuted": bar["permuted"],
        "barrier_gap_permuted": bar["different"] - bar["permuted"],
        **excess,
    }


def _run(cfg: Config, ctx: RunContext) -> Result:
    if cfg.rounds < 1 or not 0 < cfg.target_sparsity < 1:
        raise UserError("rounds must be >= 1 and target_sparsity in (0, 1) for this reproduction")
    seed = ctx.seed
    seeds = [seed + SEED_STRIDE * i for i in range(cfg.n_seeds)]
    dataset, data, note, epochs, fitted = _fit_family(cfg, ctx, seed, full=True)
    (Xtr, ytr), (_, yva), (Xte, yte) = data["train"], data["val"], data["test"]
    hw = (Xtr.shape[-2], Xtr.shape[-1])
    t = cfg.temperature
    S_A, S_B = list(range(5)), list(range(5, 10))
    singles = [fitted[f"single{c}"] for c in range(NUM_CLASSES)]
    dense_singles = [fitted[f"dense{c}"] for c in range(NUM_CLASSES)]
    sn.save_masks(
        ctx.run_dir / "masks.safetensors",
        {f"class{c}/{k}": v for c, e in enumerate(singles) for k, v in e.masks_.items()},
        cfg={"target_sparsity": cfg.target_sparsity, "rounds": cfg.rounds, "model": cfg.model},
    )

    metrics: dict[str, float] = {
        "dataset_is_fashion_mnist": float(dataset == "fashion-mnist"),
        "n_train": float(len(ytr)),
        "n_test": float(len(yte)),
        "epochs": float(epochs),
        "n_seeds": float(cfg.n_seeds),
    }

    # ---- per-seed quantities for the gated claims (seed 0 = the main family) -------------------
    per_seed = [_gated_quantities(cfg, fitted, Xte, yte, seed)]
    worst_dev, worst_tensor_dev = _sparsity_deviation(cfg, fitted)
    for s in seeds[1:]:
        _, d_s, _, _, f_s = _fit_family(cfg, ctx, s, full=False)
        per_seed.append(_gated_quantities(cfg, f_s, d_s["test"][0], d_s["test"][1], s))
        dev, tdev = _sparsity_deviation(cfg, f_s)
        worst_dev, worst_tensor_dev = max(worst_dev, dev), max(worst_tensor_dev, tdev)
    for key in per_seed[0]:
        vals = [q[key] for q in per_seed]
        metrics[f"{key}_seedmean"] = float(sum(vals) / len(vals))
        metrics[f"{key}_seedsd"] = float(torch.tensor(vals, dtype=torch.float64).std()) if len(vals) > 1 else 0.0
        for i, v in enumerate(vals):
            metrics[f"seed{i}_{key}"] = v

    # ---- sanity gate: achieved sparsity vs. target, per module (tensors weighted by size) --------
    metrics["sparsity_max_deviation"] = worst_dev
    metrics["sparsity_max_tensor_deviation"] = worst_tensor_dev
    metrics["sparsity_total_single0"] = sn.mask_sparsity(singles[0].masks_)["total"]

    # ---- generalists (main seed) ------------------------------------------------------------------
    gen_logits = fitted["gen_dense"].predict_logits(Xte)
    gen_acc = float((gen_logits.argmax(-1) == yte).float().mean())
    gen_recall = sn.per_class_recall(gen_logits, yte, NUM_CLASSES)
    gen_imp_acc = float((fitted["gen_imp"].predict_logits(Xte).argmax(-1) == yte).float().mean())
    metrics["generalist_dense_acc"] = gen_acc
    metrics["generalist_imp_acc"] = gen_imp_acc

    # ---- C1: per-module specialisation (main seed, per class) ----------------------------------
    per_module = [e.score(Xte, yte) for e in singles]
    rew = torch.tensor([m["rewarded_accuracy"] for m in per_module])
    ent = torch.tensor([m["entropy_outside"] for m in per_module])
    leak = torch.tensor([m["leakage"] for m in per_module])
    offsh = torch.tensor([m["off_argmax_share"] for m in per_module])
    gen_offsh = torch.tensor(
        [sn.subnetwork_metrics(gen_logits, yte, [c], temperature=t)["off_argmax_share"] for c in range(NUM_CLASSES)]
    )
    gen_ent = torch.tensor([_entropy_outside(gen_logits, yte, [c], t) for c in range(NUM_CLASSES)])
    dense_rew = torch.tensor([e.score(Xte, yte)["rewarded_accuracy"] for e in dense_singles])
    for c in range(NUM_CLASSES):
        metrics[f"module{c}_rewarded_acc"] = float(rew[c])
        metrics[f"module{c}_entropy_outside"] = float(ent[c])
        metrics[f"module{c}_leakage"] = float(leak[c])
        metrics[f"module{c}_off_argmax_share"] = float(offsh[c])
    metrics.update(
        {
            "modules_rewarded_acc_mean": float(rew.mean()),
            "modules_entropy_outside_mean": float(ent.mean()),
            "modules_leakage_mean": float(leak.mean()),
            "modules_off_argmax_share_mean": float(offsh.mean()),
            "generalist_off_argmax_share_mean": float(gen_offsh.mean()),
            "modules_recall_gap_mean": float((gen_recall - rew).mean()),
            "generalist_entropy_outside_mean": float(gen_ent.mean()),
            "dense_modules_rewarded_acc_mean": float(dense_rew.mean()),
        }
    )
    for name in ("S_A", "S_B", "S_B_other"):
        s = fitted[name].score(Xte, yte)
        metrics[f"{name}_rewarded_acc"] = s["rewarded_accuracy"]
        metrics[f"{name}_entropy_outside"] = s["entropy_outside"]

    # ---- mask overlap --------------------------------------------------------------------------
    jac = torch.tensor([[sn.mask_jaccard(a.masks_, b.masks_) for b in singles] for a in singles])
    off = jac[~torch.eye(NUM_CLASSES, dtype=torch.bool)]
    metrics["mask_jaccard_offdiag_mean"] = float(off.mean())

    # ---- C2/C3: composition as modules are added in class order (main seed) --------------------
    g = make_generator(seed + 12345)
    permuted = [sn.permute_hidden_units(e.module_, e.masks_, generator=g) for e in singles]
    composites = {
        "weight_sum": lambda k: sn.weight_sum(
            [e.module_ for e in singles[:k]], [e.masks_ for e in singles[:k]]
        ),
        "logit_avg": lambda k: sn.LogitAverage([e.module_ for e in singles[:k]]),
        "dense_sum": lambda k: sn.weight_sum([e.module_ for e in dense_singles[:k]]),
        "permuted_sum": lambda k: sn.weight_sum([p[0] for p in permuted[:k]], [p[1] for p in permuted[:k]]),
    }
    curves: dict[str, dict[str, list[float]]] = {}
    for cname, build in composites.items():
        cur = {"accuracy": [], "rewarded_accuracy": [], "entropy_uncovered": []}
        for k in range(1, NUM_CLASSES + 1):
            s = sn.subnetwork_metrics(sn.predict_logits(build(k), Xte), yte, list(range(k)), temperature=t)
            cur["accuracy"].append(s["accuracy"])
            cur["rewarded_accuracy"].append(s["rewarded_accuracy"])
            cur["entropy_uncovered"].append(s["entropy_outside"])
        curves[cname] = cur
        metrics[f"{cname}_acc_all10"] = cur["accuracy"][-1]
        metrics[f"{cname}_rewarded_acc_k5"] = cur["rewarded_accuracy"][4]
        metrics[f"{cname}_entropy_uncovered_k5"] = cur["entropy_uncovered"][4]
    metrics["logit_avg_over_generalist"] = metrics["logit_avg_acc_all10"] / gen_acc
    metrics["weight_sum_over_generalist"] = metrics["weight_sum_acc_all10"] / gen_acc
    metrics["weight_sum_minus_permuted"] = metrics["weight_sum_acc_all10"] - metrics["permuted_sum_acc_all10"]
    # Pairwise composite of the two five-class modules.
    ab_sum = sn.weight_sum(
        [fitted["S_A"].module_, fitted["S_B"].module_], [fitted["S_A"].masks_, fitted["S_B"].masks_]
    )
    ab_avg = sn.LogitAverage([fitted["S_A"].module_, fitted["S_B"].module_])
    metrics["S_A+S_B_weight_sum_acc"] = float(
        (sn.predict_logits(ab_sum, Xte).argmax(-1) == yte).float().mean()
    )
    metrics["S_A+S_B_logit_avg_acc"] = float(
        (sn.predict_logits(ab_avg, Xte).argmax(-1) == yte).float().mean()
    )

    # ---- C4: loss barrier curves (main seed; mean nats per sample, union target = all classes) --
    bar_same = sn.loss_barrier(
        fitted["S_A"].module_, fitted["S_B"].module_, Xte, yte, S_A + S_B, temperature=t, n_alphas=cfg.n_alphas
    )
    bar_diff = sn.loss_barrier(
        fitted["S_A"].module_, fitted["S_B_other"].module_, Xte, yte, S_A + S_B, temperature=t, n_alphas=cfg.n_alphas
    )
    metrics["barrier_same_theta0"] = bar_same.barrier
    metrics["barrier_different_theta0"] = bar_diff.barrier
    ctx.write_json(
        "curves.json",
        {
            "composition": curves,
            "barrier_same": bar_same.to_dict(),
            "barrier_different": bar_diff.to_dict(),
            "jaccard": jac.tolist(),
            "generalist_recall": gen_recall.tolist(),
            "per_module": per_module,
            "per_seed": per_seed,
            "seeds": seeds,
            "dataset": dataset,
        },
    )

    _figures(ctx, rew, ent, leak, gen_recall, curves, gen_acc, gen_imp_acc, bar_same, bar_diff, jac, dataset)
    claims = _claims(cfg, per_seed, worst_dev)
    note += (
        f"Dataset: {dataset} ({len(ytr)} train / {len(yva)} val / {len(yte)} test, {hw[0]}x{hw[1]} inputs), "
        f"model {cfg.model}, {epochs} epochs, {cfg.n_seeds} seed(s) {seeds}. Main seed: dense generalist "
        f"accuracy {gen_acc:.3f}; weight sum {metrics['weight_sum_acc_all10']:.3f}, "
        f"logit average {metrics['logit_avg_acc_all10']:.3f}, permuted sum {metrics['permuted_sum_acc_all10']:.3f}, "
        f"dense sum {metrics['dense_sum_acc_all10']:.3f} (dense sum is a control with no expected direction). "
        "Gated claims are decided on the seed mean with a t-interval over the training seeds."
    )
    return Result(metrics=metrics, claims=claims, notes=note)


def _claims(cfg: Config, per_seed: list[dict[str, float]], worst_dev: float) -> list:
    """The claims, each decided on the mean over the training seeds with a t-interval (``unit="seed"``).

    Names: C* test the paper's statements, each with a null arm (the same metric when the method does
    nothing new); sanity_sparsity is a sanity gate. For claims defined relative to the dense generalist (C1b, C1f) the
    generalist itself would score 0 by construction, so their null arm is a constant module instead.
    """

    def est(key: str):
        return t_interval([q[key] for q in per_seed], unit="seed")

    def c(name: str, stmt: str, key: str, op: str, thr: float, null_key: str, null_what: str):
        vals = ", ".join(f"{q[key]:.4g}" for q in per_seed)
        return claim(name, stmt, est(key), op, thr, null=est(null_key), null_what=null_what, trained=True,
                     detail=f"per seed [{vals}]")

    return [
        c("C1a", "single-class modules: mean rewarded accuracy (recall, argmax) >= 0.85", "rewarded_acc", ">=", 0.85,
          "rewinding_point_rewarded_acc", "the untrained rewinding point every module starts from"),
        c("C1b", "single-class modules: one-vs-rest F1 of 'argmax = c' within 0.10 of the dense generalist's "
          "(mean gap generalist - module; over-prediction lowers it)", "f1_gap", "<=", 0.10,
          "constant_f1_gap", "a constant module answering c on every input"),
        c("C1c", "mean entropy outside S >= 0.8 ln 10 (near-maximal)", "entropy_outside", ">=", 0.8 * LN10,
          "generalist_entropy_outside", "the dense generalist on the same off-class samples"),
        c("C1e", "mean leakage (off-S samples predicted in S with p > 0.5) <= 0.05", "leakage", "<=", 0.05,
          "generalist_leakage", "the dense generalist"),
        c("C1f", "precision side: share of off-class samples on which module c's argmax is c, at most 0.05 above "
          "the dense generalist's share predicted c", "off_argmax_excess", "<=", 0.05,
          "constant_off_argmax_excess", "a constant module answering c on every input"),
        c("C2", "logit averaging of the 10 modules reaches >= 0.9x the dense generalist's accuracy",
          "logit_avg_ratio", ">=", 0.9, "rewinding_point_ratio",
          "the untrained rewinding point (the logit average of untrained modules)"),
        c("C3a", "headline: the masked weight sum of the 10 modules recovers the dense generalist (accuracy "
          "ratio >= 0.9)", "weight_sum_ratio", ">=", 0.9, "rewound_sum_ratio",
          "the same masks summed on the untrained rewinding point"),
        c("C3b", f"weight sum beats the hidden-unit-permuted sum (mean of {cfg.n_permutations} permutations) by "
          ">= 0.20 accuracy (shared theta0 matters)", "weight_sum_minus_permuted", ">=", 0.20,
          "permuted_minus_permuted", "one permuted sum against the other permutations' mean"),
        c("C4a", "barrier(different theta0) - barrier(shared theta0) > 0", "barrier_gap", ">", 0.0,
          "barrier_gap_permuted", "shared theta0 with S_B's hidden units permuted in place of the shared one"),
        c("C4b", "barrier between S_A and S_B modules with a shared theta0 <= 0.1 nats/sample", "barrier_same",
          "<=", 0.1, "barrier_different", "S_B trained from a different theta0"),
        claim("sanity_sparsity", "sanity: every module's overall sparsity within 0.01 of its target", exact(worst_dev), "<=", 0.01,
              why="a precondition (IMP reached its target sparsity), not a finding"),
    ]


def _figures(ctx, rew, ent, leak, gen_recall, curves, gen_acc, gen_imp_acc, bar_same, bar_diff, jac, dataset):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cls = list(range(NUM_CLASSES))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    axes[0].bar(cls, rew.numpy(), color="C0", label="module (rewarded acc.)")
    axes[0].plot(cls, gen_recall.numpy(), "k_", markersize=18, mew=2, label="dense generalist recall")
    axes[0].set(title="accuracy on the assigned class", xlabel="class", ylim=(0, 1.05))
    axes[0].legend(fontsize=7, loc="lower left")
    axes[1].bar(cls, ent.numpy(), color="C1")
    axes[1].axhline(LN10, color="k", ls="--", lw=1, label="ln 10 (uniform)")
    axes[1].axhline(0.8 * LN10, color="gray", ls=":", lw=1, label="0.8 ln 10 (C1 threshold)")
    axes[1].set(title="entropy on other classes (nats)", xlabel="class")
    axes[1].legend(fontsize=7, loc="lower left")
    axes[2].bar(cls, leak.numpy(), color="C3")
    axes[2].set(title="leakage", xlabel="class")
    fig.suptitle(f"single-class max-entropy IMP modules ({dataset})", y=1.04)
    ctx.save_figure(fig, "per_module", "Per-module rewarded accuracy, entropy outside S and leakage.")

    fig, ax = plt.subplots(figsize=(6, 4))
    ks = list(range(1, NUM_CLASSES + 1))
    labels = {
        "weight_sum": "masked weight sum",
        "logit_avg": "logit average",
        "dense_sum": "dense-module sum (control)",
        "permuted_sum": "permuted sum (control)",
    }
    for name, cur in curves.items():
        ax.plot(ks, cur["accuracy"], "o-", ms=3, label=labels[name])
    ax.axhline(gen_acc, color="k", ls="--", lw=1, label="dense generalist")
    ax.axhline(gen_imp_acc, color="gray", ls=":", lw=1, label="IMP generalist")
    ax.plot(ks, [k / NUM_CLASSES for k in ks], color="lightgray", lw=1, label="k/10 (perfect on covered)")
    ax.set(xlabel="modules added (classes 0..k-1)", ylabel="10-way test accuracy", ylim=(0, 1))
    ax.legend(fontsize=7)
    ctx.save_figure(fig, "composition", "10-way accuracy as single-class modules are added.")

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.plot(bar_same.alphas, bar_same.losses, "o-", label=f"shared theta0 (B={bar_same.barrier:.3f})")
    ax.plot(bar_diff.alphas, bar_diff.losses, "s-", label=f"different theta0 (B={bar_diff.barrier:.3f})")
    ax.set(xlabel="alpha (1 = S_A module, 0 = S_B module)", ylabel="KL to union target (nats/sample)")
    ax.legend(fontsize=8)
    ctx.save_figure(fig, "barrier", "Loss along the linear path between the S_A and S_B modules.")

    fig, ax = plt.subplots(figsize=(4.5, 4))
    im = ax.imshow(jac.numpy(), cmap="viridis")
    fig.colorbar(im, ax=ax)
    ax.set(title="mask Jaccard overlap", xlabel="module", ylabel="module", xticks=cls, yticks=cls)
    ctx.save_figure(fig, "mask_overlap", "Pairwise Jaccard overlap of the single-class masks.")
