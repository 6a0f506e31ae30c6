"""Hyper-SET: Designing Transformers via Hyperspherical Energy Minimization (ICLR 2026, arXiv 2502.11646) —
reproduction.

Fashion-MNIST (7x7 patches -> 16 tokens + CLS): a Hyper-SET encoder (one shared layer, 6 recurrences) against
an unshared 4-block ViT, a 1-block ViT of similar size and a naively looped ViT (one block applied 6 times),
plus a null arm without any encoder (Hyper-SET's patch embedding and head on the mean token). Every image arm
is trained on ``seeds`` training seeds inside one run, each with its own training and test draw; the claims
are decided on per-seed paired differences (same test images within a seed) with a t-interval over seeds.
Measured: accuracy (C1, parameter counts as metrics); the energy of the Hyper-SET tokens at every recurrence
(C2), with the step-size signs; accuracy at 9 and 12 test-time recurrences for Hyper-SET and the looped ViT
(C3). 4x4 Sudoku (C4, reported only: the spec sets no Sudoku threshold) runs in the ``paper`` preset or with
``--set sudoku_train=N``. Claims named ``ctrl_*`` / ``sanity_*`` are controls and sanity checks, counted apart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from iclr26.architectures.hyper_set import (
    HyperSETConfig,
    HyperSETForImageClassification,
    HyperSETForSudoku,
    effective_rank,
)
from iclr26.architectures.vit import (
    PatchEmbed,
    TransformerForSudoku,
    ViTConfig,
    ViTForImageClassification,
    fit,
    n_params,
    predict,
    sinusoidal_positions,
)
from iclr26.core import param
from iclr26.core.errors import MissingAssetError, UserError
from iclr26.core.parallel import parallel_map
from iclr26.core.seed import seeded_torch
from iclr26.data import images
from iclr26.data.sudoku import split_grids, sudoku_puzzles
from iclr26.runs import Result, RunContext, claim
from iclr26.stats import Est, cluster_bootstrap, t_interval

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Fashion-MNIST (reduced, 7x7 patches), five training seeds per arm inside the run: Hyper-SET (one shared\n"
    "energy-minimising layer, 6 recurrences, step sizes zero at init) against an unshared 4-block ViT, a 1-block\n"
    "ViT and a looped ViT, with an encoder-free null arm. Accuracy per parameter, the energy of the tokens across\n"
    "recurrences, and depth extrapolation to 12 recurrences. 4x4 Sudoku (reported) in the paper preset."
)

WORKLOAD = "small"  # tiny models: one intra-op thread per process, independent arms in worker processes

# "no_encoder": the null arm of C1 - Hyper-SET's patch embedding and head with the encoder taken out (the alpha =
# beta = 0 identity), reading the mean token since an identity encoder leaves the CLS token blind to the image
IMAGE_ARMS = ("hyper_set", "vit4", "vit1", "looped", "no_encoder")
SUDOKU_ARMS = ("hyper_set", "transformer", "looped")

HEADLINE = "C1_vs_vit4"
# the experiment trains Config.seeds (5) training seeds of every image arm itself: the intervals are over those
SEEDS = {"smoke": 1, "default": 1, "paper": 1}
_T5 = "per-seed paired differences over 1,000 test images, t-interval over 5 seeds"
EXPECTED = {  # default preset, 5 training seeds inside the run (2026-12-07; seeds 0-2 as in the 3-seed design)
    "C1_vs_vit1": ("inconclusive", "Hyper-SET - ViT-1 accuracy -0.019 [-0.062, 0.024] (" + _T5 + "; seeds -0.006/"
                   "+0.012/+0.011/-0.064/-0.047) straddles -0.01"),
    "C1_vs_vit4": ("not held", "Hyper-SET - ViT-4 accuracy -0.102 [-0.146, -0.057] (" + _T5 + "; seeds -0.111/"
                   "-0.092/-0.052/-0.151/-0.102) against -0.03; the encoder-free null -0.273"),
    "C1_vs_looped": ("inconclusive", "Hyper-SET - looped ViT (same size) accuracy -0.054 [-0.098, -0.010] (" + _T5
                     + "; seeds -0.065/-0.014/-0.021/-0.099/-0.070) straddles -0.01 by 0.0005"),
    "C2_samples_fall": ("inconclusive", "E(6) < E(0) for 0.76 [0.35, 1.17] of 256 images per seed (seeds 0.71/1.00/"
                        "1.00/0.89/0.21) straddles 0.9; the step-negated null: 0.002"),
    "C2_median_steps": ("inconclusive", "the median energy does not rise at 0.73 [0.26, 1.21] of the 6 steps "
                        "(seeds 0.50/1.00/1.00/1.00/0.17) straddles 0.8; null 0.000"),
    "C3_hyper_set_stable": ("inconclusive", "accuracy lost at 12 recurrences 0.048 [-0.003, 0.098] over 5 seeds "
                            "(0.044/0.117/0.041/0.012/0.025) straddles the 0.02 bar"),
    "C3_looped_degrades": ("no power", "the looped ViT loses 0.058 [0.034, 0.082] over 5 seeds at 12 loops (>= "
                           "0.02), but Hyper-SET loses 0.048, which passes the same gate"),
    "sanity_baselines_learned": "held",
}


@dataclass
class Config:
    dataset: str = param("auto", "auto (Fashion-MNIST, else sklearn digits) | fashion-mnist | digits",
                         choices=["auto", "fashion-mnist", "digits"])  # fmt: skip
    n_train_per_class: int = param(360, "training images per class, per seed (400 before three seeds ran in the "
                                   "default)", low=2, high=6000)  # fmt: skip
    n_test_per_class: int = param(100, "test images per class (Fashion-MNIST has 1,000; digits far fewer)",
                                  low=1, high=1000)  # fmt: skip
    patch: int = param(7, "patch side for 28x28 Fashion-MNIST (digits always use 2x2 patches of 8x8)",
                       choices=[2, 4, 7, 14])  # fmt: skip
    d: int = param(48, "token width of every model", low=4, high=1024)
    heads: int = param(4, "attention heads (must divide d)", low=1, high=64)
    mlp_hidden: int = param(96, "FF / MLP hidden width", low=1, high=8192)
    n_recur: int = param(6, "Hyper-SET recurrences and looped-ViT loops used in training", low=1, high=64)
    vit_depth: int = param(4, "blocks of the unshared ViT baseline", low=1, high=32)
    time_dim: int = param(64, "width of Hyper-SET's sinusoidal time embedding (even)", low=2, high=2048)
    ff_act: str = param("relu", "Hyper-SET FF activation (relu matches E_FF)", choices=["relu", "gelu"])
    attn: str = param("softmax", "Hyper-SET attention variant", choices=["softmax", "linear", "sigmoid"])
    fixed_step_arm: bool = param(False, "also train Hyper-SET with one fixed scalar step (the extended arm (e))")
    seeds: int = param(5, "training seeds of every image arm, each with its own training and test draw (the C1-C3 "
                       "intervals are t-intervals over these; 5 since 2026-12-07: the headline's 3-seed interval "
                       "needed 4 at its mean and SD, chosen before the new seeds ran)", low=1, high=100)  # fmt: skip
    extrap_recur: list[int] = param([9, 12], "test-time recurrences beyond training for the depth check (the "
                                    "last is the C3 depth)", min_len=1, max_len=8, elem_low=1, elem_high=256)  # fmt: skip
    epochs: int = param(5, "training epochs of every image model (8 before three seeds ran in the default)", low=1,
                        high=1000)  # fmt: skip
    batch_size: int = param(128, "batch size", low=1, high=100_000)
    lr: float = param(1e-3, "Adam peak learning rate", low=0.0, high=1.0, low_open=True)
    min_lr: float = param(1e-5, "final learning rate of the cosine schedule", low=0.0, high=1.0)
    warmup_epochs: float = param(1.0, "linear warm-up epochs", low=0.0, high=100.0)
    weight_decay: float = param(5e-5, "coupled L2 weight decay of Adam", low=0.0, high=1.0)
    label_smoothing: float = param(0.1, "label smoothing of the image classifiers", low=0.0, high=0.5)
    energy_samples: int = param(256, "fixed test images on which energies, ranks and angles are measured",
                                low=1, high=10_000)  # fmt: skip
    sudoku_train: int = param(0, "4x4 Sudoku training puzzles (0 = skip the Sudoku part; 2000 was the old "
                              "default's)", low=0,
                              high=1_000_000)  # fmt: skip
    sudoku_test: int = param(500, "Sudoku test puzzles (from held-out solution grids)", low=1, high=100_000)
    sudoku_test_grids: int = param(48, "of the 288 solution grids, how many only the test puzzles use", low=1,
                                   high=287)  # fmt: skip
    sudoku_blanks: int = param(10, "blank cells per puzzle (unique solution kept)", low=1, high=12)
    sudoku_epochs: int = param(15, "training epochs of every Sudoku model", low=1, high=1000)
    sudoku_lr: float = param(2e-3, "Adam peak learning rate of the Sudoku models", low=0.0, high=1.0, low_open=True)
    sudoku_batch_size: int = param(64, "batch size of the Sudoku models", low=1, high=100_000)
    threads: int = param(1, "torch / BLAS threads per process (applied by the engine)", low=1, high=256)

    def validate(self) -> None:
        if self.d % self.heads:
            raise UserError(f"heads={self.heads} must divide d={self.d}")
        if self.d % 2 or self.time_dim % 2:
            raise UserError(f"d={self.d} and time_dim={self.time_dim} must be even (sinusoidal embeddings)")
        if self.min_lr > self.lr:
            raise UserError(f"min_lr={self.min_lr} must not exceed lr={self.lr}")


PRESETS = {
    "smoke": {"dataset": "digits", "n_train_per_class": 10, "n_test_per_class": 5, "d": 8, "heads": 2,
              "mlp_hidden": 8, "n_recur": 2, "vit_depth": 2, "time_dim": 4, "epochs": 1, "batch_size": 64,
              "extrap_recur": [4], "energy_samples": 16, "sudoku_train": 32, "sudoku_test": 16,
              "sudoku_epochs": 1, "sudoku_blanks": 4, "seeds": 2},
    "default": {},
    "paper": {"n_train_per_class": 6000, "n_test_per_class": 1000, "patch": 2, "d": 512, "heads": 8,
              "mlp_hidden": 512, "n_recur": 12, "vit_depth": 12, "time_dim": 512, "epochs": 200,
              "fixed_step_arm": True, "extrap_recur": [18, 24], "seeds": 5, "sudoku_train": 9000, "sudoku_test": 1000,
              "sudoku_epochs": 200},
}  # fmt: skip


# the old default (2,000 Sudoku puzzles, one seed) spent ~30 % of its time on Sudoku and ~70 % on the image arms
# for work units of 5.31e10 (Sudoku) and 1.10e11 (images): a Sudoku unit costs about as much as an image unit
_SUDOKU_COST = (0.3 / 5.31e10) / (0.7 / 1.10e11)


def plan(cfg: Config) -> dict:
    """What a run with ``cfg`` needs and roughly costs (``iclr26 run hyper-set --plan``); nothing is run."""
    from iclr26 import plan as p

    needs = p.image_data(cfg.dataset)

    def work(c: Config) -> float:  # token-layer cost of the image models over seeds, plus the Sudoku models
        digits = c.dataset == "digits"
        tokens = 16 if digits else (28 // c.patch) ** 2
        n = min(c.n_train_per_class, 140) if digits else c.n_train_per_class
        blocks = 2 * c.n_recur * (1 + c.fixed_step_arm) + c.vit_depth + max(c.extrap_recur)
        image = c.seeds * 10 * n * c.epochs * tokens * blocks * (c.d * c.mlp_hidden + c.d**2 + tokens * c.d)
        sudoku = c.sudoku_train * c.sudoku_epochs * 16 * (2 * c.n_recur + c.vit_depth) * (c.d * c.mlp_hidden + c.d**2)
        return image + _SUDOKU_COST * sudoku

    return {
        "needs": needs, "device": "cpu", "gpu_memory_gb": None,
        **p.cpu_time("hyper-set", cfg, work, "seeds x images x epochs x tokens x blocks x width cost, plus the "
                     "Sudoku models' at the cost per unit measured in the old default (Sudoku 30 % of it)"),
        "notes": ["the experiment runs on the CPU and uses no GPU even when one is present; the paper preset's "
                  "d = 512, 2x2 patches and 200 epochs are a GPU-sized job, not practical on a CPU (spec §7 runs CIFAR "
                  "on one GPU with AMP)"],
        "reference": [p.Need("CIFAR-10/100 and the PALM 9x9 Sudoku CSV (user-supplied)", "data", None,
                             "https://www.cs.toronto.edu/~kriz/cifar.html and the Sudoku files named in spec §7")],
    }


def _load(cfg: Config, seed: int, ctx: RunContext):
    """(name, Xtr, ytr, Xte, yte, image side, patch): pixels standardised with the training mean / std."""
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
                                   skipped="ran on sklearn digits (2x2 patches) instead")  # fmt: skip
    if name == "fashion-mnist":
        Xtr, ytr = images.subset_per_class(Xtr, ytr, cfg.n_train_per_class, seed)
        Xte, yte = images.subset_per_class(Xte, yte, cfg.n_test_per_class, seed + 1)
        side, patch = 28, cfg.patch
    else:
        X, y = images.load_digits()
        per = int(torch.bincount(y).min())
        if cfg.n_train_per_class + cfg.n_test_per_class > per:
            raise UserError(f"digits has {per} images in its smallest class; n_train_per_class + "
                            f"n_test_per_class = {cfg.n_train_per_class + cfg.n_test_per_class}")  # fmt: skip
        X, y = images.subset_per_class(X, y, cfg.n_train_per_class + cfg.n_test_per_class, seed)
        frac = cfg.n_test_per_class / (cfg.n_train_per_class + cfg.n_test_per_class)
        parts = images.split_train_val_test(X, y, val_frac=0.0, test_frac=frac, seed=seed + 1)
        (Xtr, ytr), (Xte, yte) = parts["train"], parts["test"]
        side, patch = 8, 2
    mu, sd = Xtr.mean(), Xtr.std()
    return name, (Xtr - mu) / sd, ytr, (Xte - mu) / sd, yte, side, patch


def _hs_cfg(cfg: Config, **kw) -> HyperSETConfig:
    return HyperSETConfig(d=cfg.d, heads=cfg.heads, mlp_hidden=cfg.mlp_hidden, n_recur=cfg.n_recur,
                          attn=cfg.attn, ff_act=cfg.ff_act, time_dim=cfg.time_dim, **kw)  # fmt: skip


def _vit_cfg(cfg: Config, depth: int, looped: bool = False) -> ViTConfig:
    return ViTConfig(d=cfg.d, heads=cfg.heads, mlp_hidden=cfg.mlp_hidden, depth=depth, looped=looped)


def _correct(model, X, y, **kw) -> np.ndarray:
    """Per test image: 1.0 where the prediction is right (the unit the intervals resample)."""
    return (predict(model, X, **kw) == y).numpy().astype(np.float64)


@torch.no_grad()
def _dynamics(model: HyperSETForImageClassification, X: torch.Tensor, T: int, step_scale: float = 1.0) -> dict:
    """Per-sample energies (update's norms and the parameter-free ones), effective rank and head-space angle
    at every recurrence t = 0..T, and the share of positive alpha / beta per step."""
    enc = model.encoder
    x, trace = enc(model.tokens(X), n_recur=T, return_trace=True, step_scale=step_scale)
    out: dict[str, list] = {k: [] for k in ("E_attn", "E_ff", "E", "E_plain", "E_attn_plain", "E_ff_plain",
                                            "erank", "angle")}  # fmt: skip
    for z in trace:
        e, p = enc.energy(z, learned_norms=True), enc.energy(z)
        out["E_attn"].append(e["attn"].numpy())
        out["E_ff"].append(e["ff"].numpy())
        out["E"].append(e["total"].numpy())
        out["E_plain"].append(p["total"].numpy())
        out["E_attn_plain"].append(p["attn"].numpy())
        out["E_ff_plain"].append(p["ff"].numpy())
        out["erank"].append(effective_rank(z).numpy())
        out["angle"].append(enc.head_angles(z).numpy())
    res = {k: np.stack(v) for k, v in out.items()}  # each [T+1, samples]
    if step_scale == 1.0:
        res["pos_alpha_beta"] = np.array(enc.step_sign_shares(model.tokens(X), T))  # [T, 2]
    return res


class _NoEncoder(torch.nn.Module):
    """C1's null arm: Hyper-SET's patch embedding, positions and LayerNorm + Linear head with the encoder taken out
    (alpha = beta = 0, the identity). An identity encoder leaves the CLS token blind to the image (chance by
    construction), so the head reads the mean token: a trained bag of patch embeddings, no token mixing at all."""

    def __init__(self, d: int, side: int, patch: int):
        super().__init__()
        self.embed = PatchEmbed(side, patch, 1, d)
        self.register_buffer("pos", sinusoidal_positions(self.embed.n_patches, d), persistent=False)
        self.head_norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.head_norm((self.embed(images) + self.pos).mean(1)))


def _image_job(arm: str, common) -> dict:
    """Train one image model; score it (and, for Hyper-SET, measure its dynamics)."""
    cfg, Xtr, ytr, Xte, yte, side, patch, seed = common
    with seeded_torch(seed):
        return _image_job_seeded(arm, cfg, Xtr, ytr, Xte, yte, side, patch, seed)


def _image_job_seeded(arm: str, cfg: Config, Xtr, ytr, Xte, yte, side: int, patch: int, seed: int) -> dict:
    kw = dict(image_size=side, patch=patch, channels=1, num_classes=10)
    if arm == "hyper_set":
        model = HyperSETForImageClassification(_hs_cfg(cfg), **kw)
    elif arm == "hyper_set_fixed":
        model = HyperSETForImageClassification(_hs_cfg(cfg, step="fixed", fixed_step=1.0), **kw)
    elif arm == "vit4":
        model = ViTForImageClassification(_vit_cfg(cfg, cfg.vit_depth), **kw)
    elif arm == "vit1":
        model = ViTForImageClassification(_vit_cfg(cfg, 1), **kw)
    elif arm == "no_encoder":
        model = _NoEncoder(cfg.d, side, patch)
    else:
        model = ViTForImageClassification(_vit_cfg(cfg, cfg.n_recur, looped=True), **kw)
    hist = fit(model, Xtr, ytr, epochs=cfg.epochs, lr=cfg.lr, batch_size=cfg.batch_size,
               warmup_epochs=cfg.warmup_epochs, min_lr=cfg.min_lr, weight_decay=cfg.weight_decay,
               label_smoothing=cfg.label_smoothing, seed=seed + 7)  # fmt: skip
    out = {"params": n_params(model), "correct": _correct(model, Xte, yte), "loss": hist}
    out["acc"] = float(out["correct"].mean())
    if arm in ("hyper_set", "hyper_set_fixed", "looped"):
        out["correct_at"] = {T: _correct(model, Xte, yte, n_recur=T)
                             for T in sorted({1, 2, cfg.n_recur, *cfg.extrap_recur})}
        out["acc_at"] = {T: float(c.mean()) for T, c in out["correct_at"].items()}
    if arm == "hyper_set":
        Xe = Xte[: cfg.energy_samples]
        out["dyn"] = _dynamics(model, Xe, cfg.n_recur)
        out["dyn_reversed"] = _dynamics(model, Xe, cfg.n_recur, step_scale=-1.0)
        out["dyn_extrap"] = _dynamics(model, Xe, max(cfg.extrap_recur))
        with torch.no_grad():
            out["acc_zero_steps"] = float((torch.cat([model.head(model.head_norm(model.encoder(
                model.tokens(Xte[i : i + 1000]), step_scale=0.0)[:, 0])).argmax(-1)
                for i in range(0, len(Xte), 1000)]) == yte).float().mean())  # fmt: skip
    return out


def _sudoku_job(arm: str, common) -> dict:
    cfg, P, Y, Pt, Yt, seed = common
    with seeded_torch(seed + 11):
        return _sudoku_job_seeded(arm, cfg, P, Y, Pt, Yt, seed)


def _sudoku_job_seeded(arm: str, cfg: Config, P, Y, Pt, Yt, seed: int) -> dict:
    if arm == "hyper_set":
        model = HyperSETForSudoku(_hs_cfg(cfg))
    elif arm == "transformer":
        model = TransformerForSudoku(_vit_cfg(cfg, cfg.vit_depth))
    else:
        model = TransformerForSudoku(_vit_cfg(cfg, cfg.n_recur, looped=True))
    hist = fit(model, P, Y, epochs=cfg.sudoku_epochs, lr=cfg.sudoku_lr, batch_size=cfg.sudoku_batch_size,
               warmup_epochs=cfg.warmup_epochs, min_lr=min(cfg.min_lr, cfg.sudoku_lr), weight_decay=cfg.weight_decay,
               label_smoothing=0.0, seed=seed + 13)  # fmt: skip

    def score(**kw) -> tuple[np.ndarray, np.ndarray]:
        """Per test puzzle: the share of its blank cells filled right, and 1.0 where the whole board is."""
        pred = predict(model, Pt, **kw)
        blank = Yt != -100
        cell = ((pred == Yt) & blank).sum(1).double() / blank.sum(1).clamp(min=1).double()
        board = ((pred == Yt) | ~blank).all(1).double()
        return cell.numpy(), board.numpy()

    out = {"params": n_params(model), "loss": hist}
    out["cell_per"], out["board_per"] = score()
    out["cell"], out["board"] = float(out["cell_per"].mean()), float(out["board_per"].mean())
    if arm != "transformer":
        out["board_at"] = {T: float(score(n_recur=T)[1].mean()) for T in sorted({cfg.n_recur, *cfg.extrap_recur})}
    return out


def run(cfg: Config, ctx: RunContext) -> Result:
    seed = ctx.seed
    # training seed k trains every image arm anew on its own training draw and scores it on its own test draw
    # (seed + 1000 k; k = 0 is the run's seed): the per-seed differences are independent, test images paired
    data = {}
    for k in range(cfg.seeds):
        sk = seed + 1000 * k
        name, Xtr, ytr, Xte, yte, side, patch = _load(cfg, sk, ctx)
        data[k] = (cfg, Xtr, ytr, Xte, yte, side, patch, sk)
    metrics: dict[str, float] = {"dataset_is_fashion_mnist": float(name == "fashion-mnist"), "seeds": float(cfg.seeds),
                                 "n_train": float(len(ytr)), "n_test": float(len(yte))}  # fmt: skip
    arms = list(IMAGE_ARMS) + (["hyper_set_fixed"] if cfg.fixed_step_arm else [])
    jobs: list[tuple[str, str, int]] = [("image", a, k) for k in range(cfg.seeds) for a in arms]
    sud = None
    if cfg.sudoku_train:  # one seed: Sudoku is reported only (the spec sets no Sudoku threshold)
        tr_grids, te_grids = split_grids(cfg.sudoku_test_grids, seed)
        P, Y = sudoku_puzzles(tr_grids, cfg.sudoku_train, blanks=cfg.sudoku_blanks, seed=seed + 3)
        Pt, Yt = sudoku_puzzles(te_grids, cfg.sudoku_test, blanks=cfg.sudoku_blanks, seed=seed + 4)
        sud = (cfg, P, Y, Pt, Yt, seed)
        jobs += [("sudoku", a, 0) for a in SUDOKU_ARMS]
    # longest arms first (parallel_map hands tasks out in order)
    order = {"hyper_set": 0, "looped": 1, "hyper_set_fixed": 2, "vit4": 3, "transformer": 4, "vit1": 5,
             "no_encoder": 6}  # fmt: skip
    jobs.sort(key=lambda j: (order[j[1]], j[0], j[2]))
    outs = parallel_map(_job, jobs, common=(data, sud), desc="arms")
    img = [{a: o for (kind, a, k), o in zip(jobs, outs, strict=True) if kind == "image" and k == s}
           for s in range(cfg.seeds)]  # fmt: skip
    sdk = {a: o for (kind, a, _), o in zip(jobs, outs, strict=True) if kind == "sudoku"}

    def mean(f) -> float:
        return float(np.mean([f(o) for o in img]))

    for a in arms:
        metrics[f"{a}_params"] = float(img[0][a]["params"])
        metrics[f"{a}_acc"] = float(np.mean([o[a]["acc"] for o in img]))
        metrics[f"{a}_acc_sd"] = float(np.std([o[a]["acc"] for o in img], ddof=1)) if cfg.seeds > 1 else 0.0
        metrics[f"{a}_final_train_loss"] = float(np.mean([o[a]["loss"][-1] for o in img]))
        for k, o in enumerate(img):
            metrics[f"{a}_acc_s{k}"] = o[a]["acc"]
        for T in img[0][a].get("acc_at", {}):
            metrics[f"{a}_acc_T{T}"] = float(np.mean([o[a]["acc_at"][T] for o in img]))
    # parameter counts are facts of the architecture: metrics, not claims (any weight-shared model has the saving)
    for a in ("hyper_set", "looped", "vit1", "no_encoder"):
        metrics[f"params_ratio_{a}_vs_vit4"] = metrics[f"{a}_params"] / metrics["vit4_params"]
    metrics["hyper_set_acc_zero_steps"] = mean(lambda o: o["hyper_set"]["acc_zero_steps"])
    dyn = img[0]["hyper_set"]["dyn"]  # the curves: seed 0
    for t in range(cfg.n_recur + 1):
        for key in ("E", "E_attn", "E_ff", "E_plain", "erank", "angle"):
            metrics[f"{key}_median_t{t}"] = float(np.median(dyn[key][t]))
    pab = np.mean([o["hyper_set"]["dyn"]["pos_alpha_beta"] for o in img], 0)  # [T, 2], mean over seeds
    for t, (pa, pb) in enumerate(pab):
        metrics[f"pos_alpha_t{t}"], metrics[f"pos_beta_t{t}"] = float(pa), float(pb)
    metrics["pos_alpha_mean"], metrics["pos_beta_mean"] = float(pab[:, 0].mean()), float(pab[:, 1].mean())
    for tag, which in (("", "dyn"), ("reversed_", "dyn_reversed")):
        for key in ("E", "E_plain"):
            for k, o in enumerate(img):
                D = o["hyper_set"][which][key]
                metrics[f"{tag}{key}_frac_samples_fall_s{k}"] = float((D[-1] < D[0]).mean())
                metrics[f"{tag}{key}_frac_steps_median_not_rising_s{k}"] = float(
                    (np.diff(np.median(D, axis=1)) <= 0).mean())
            for m in ("frac_samples_fall", "frac_steps_median_not_rising"):
                metrics[f"{tag}{key}_{m}"] = float(np.mean([metrics[f"{tag}{key}_{m}_s{k}"]
                                                            for k in range(cfg.seeds)]))  # fmt: skip
    metrics["E_extrap_frac_samples_fall"] = mean(lambda o: float((o["hyper_set"]["dyn_extrap"]["E"][-1]
                                                                  < o["hyper_set"]["dyn_extrap"]["E"][0]).mean()))
    metrics["E_extrap_frac_steps_median_not_rising"] = mean(
        lambda o: float((np.diff(np.median(o["hyper_set"]["dyn_extrap"]["E"], 1)) <= 0).mean()))
    for a, o in sdk.items():
        metrics[f"sudoku_{a}_cell_acc"], metrics[f"sudoku_{a}_board_acc"] = o["cell"], o["board"]
        metrics[f"sudoku_{a}_params"] = float(o["params"])
        for T, v in o.get("board_at", {}).items():
            metrics[f"sudoku_{a}_board_acc_T{T}"] = v
    if sdk:
        metrics["params_ratio_sudoku_hyper_set_vs_transformer"] = (metrics["sudoku_hyper_set_params"]
                                                                   / metrics["sudoku_transformer_params"])
        metrics["params_ratio_sudoku_looped_vs_transformer"] = (metrics["sudoku_looped_params"]
                                                                / metrics["sudoku_transformer_params"])

    grids = _solution_ids(Pt, Yt) if sdk else None
    claims, notes = _claims(cfg, metrics, img, sdk, grids, seed)
    _figures(ctx, cfg, img, sdk)
    notes.insert(0, f"Data: {name}, per seed {len(ytr)} train / {len(yte)} test images (drawn anew per seed), "
                    f"{(side // patch) ** 2} patches + CLS; {cfg.seeds} training seeds per image arm. Gated energy: "
                    "the update's own RMSNorm gains (attention term with the key-norm gains) and ReLU; E_plain: the "
                    "official parameter-free analysis energy.")  # fmt: skip
    return Result(metrics=metrics, claims=claims, notes=" ".join(notes))


def _job(job: tuple[str, str, int], common) -> dict:
    kind, arm, k = job
    return _image_job(arm, common[0][k]) if kind == "image" else _sudoku_job(arm, common[1])


def _solution_ids(Pt: torch.Tensor, Yt: torch.Tensor) -> np.ndarray:
    """Per test puzzle, the id of its solution grid (puzzles nest in the held-out grids: the cluster unit)."""
    sol = torch.where(Yt == -100, Pt, Yt + 1).numpy()
    return np.unique(sol, axis=0, return_inverse=True)[1].ravel()


def _claims(cfg: Config, m: dict, img: list[dict], sdk: dict, grids: np.ndarray | None,
            seed: int) -> tuple[list, list[str]]:  # fmt: skip
    """Image claims (C1-C3): one value per training seed - a paired difference over that seed's test images, or
    a share over its energy images - and a 95 % t-interval over the seeds (``unit="seed"``; decided from the seeds).
    Sudoku (C4, one seed, reported): a bootstrap over held-out solution grids."""
    cl, notes = [], []
    S = len(img)

    def over_seeds(f) -> Est:
        return t_interval(np.array([f(o) for o in img], dtype=np.float64), unit="seed")

    def per_seed(f) -> str:
        return "/".join(f"{f(o):+.3f}" for o in img)

    def gap(a: str, b: str):
        return lambda o: float(np.mean(o[a]["correct"] - o[b]["correct"]))  # paired over the seed's test images

    null_what = ("the encoder-free model (Hyper-SET's patch embedding and head on the mean token, no attention, FF "
                 "or recurrence) in Hyper-SET's place")  # fmt: skip
    for base, bar, what in (("vit1", -0.01, "the similar-size 1-block ViT's - 1 point"),
                            ("vit4", -0.03, f"the unshared {cfg.vit_depth}-block ViT's - 3 points"),
                            ("looped", -0.01, f"the same-size looped ViT's ({cfg.n_recur} loops of one block) - 1 "
                                              "point")):  # fmt: skip
        cl.append(claim(f"C1_vs_{base}", f"C1: Hyper-SET accuracy >= {what} (per-seed paired difference, "
                        f"t-interval over {S} seeds)", over_seeds(gap("hyper_set", base)), ">=", bar,
                        null=over_seeds(gap("no_encoder", base)), null_what=null_what, trained=True,
                        detail=f"per seed {per_seed(gap('hyper_set', base))}; accuracy {m['hyper_set_acc']:.3f} vs "
                        f"{m[f'{base}_acc']:.3f}, encoder-free {m['no_encoder_acc']:.3f}; parameters "
                        f"{m['hyper_set_params']:.0f} vs {m[f'{base}_params']:.0f}"))  # fmt: skip
    reversed_what = "the same trained Hyper-SET with every alpha, beta negated (ascending steps)"

    def fall(which: str):
        return lambda o: float((o["hyper_set"][which]["E"][-1] < o["hyper_set"][which]["E"][0]).mean())

    def median_steps(which: str):
        return lambda o: float((np.diff(np.median(o["hyper_set"][which]["E"], axis=1)) <= 0).mean())

    cl.append(claim("C2_samples_fall", f"C2: the energy E(T) < E(0) for >= 90% of test samples (share per seed, "
                    f"t-interval over {S} seeds)", over_seeds(fall("dyn")), ">=", 0.9,
                    null=over_seeds(fall("dyn_reversed")), null_what=reversed_what, trained=True,
                    detail=f"per seed {per_seed(fall('dyn'))}; parameter-free energy: "
                    f"{m['E_plain_frac_samples_fall']:.2f}"))  # fmt: skip
    cl.append(claim("C2_median_steps", "C2: the median energy does not rise at >= 80% of the recurrences (per "
                    f"seed, t-interval over {S} seeds)", over_seeds(median_steps("dyn")), ">=", 0.8,
                    null=over_seeds(median_steps("dyn_reversed")), null_what=reversed_what, trained=True,
                    detail=f"per seed {per_seed(median_steps('dyn'))}; parameter-free energy: "
                    f"{m['E_plain_frac_steps_median_not_rising']:.2f}"))  # fmt: skip
    cl.append(claim("C2_alpha_positive", "C2 (reported): alpha is mostly positive (a mostly negative alpha means "
                    "the attention step ascends the energy)", m["pos_alpha_mean"], ">=", 0.5, gated=False,
                    detail=f"share of beta > 0: {m['pos_beta_mean']:.2f}; mean over seeds"))  # fmt: skip
    if m["pos_alpha_mean"] < 0.5:
        notes.append(f"Flag: only {m['pos_alpha_mean']:.0%} of the learned alpha entries are positive, so the "
                     "attention sub-step mostly ascends E_ATTN.")  # fmt: skip
    Tx, T = max(cfg.extrap_recur), cfg.n_recur

    def drop(arm: str):
        return lambda o: float(np.mean(o[arm]["correct_at"][T] - o[arm]["correct_at"][Tx]))

    cl.append(claim("C3_hyper_set_stable", f"C3: Hyper-SET at {Tx} test-time recurrences loses <= 2 points against "
                    f"its training depth {T} (per seed, t-interval over {S} seeds)", over_seeds(drop("hyper_set")),
                    "<=", 0.02, null=over_seeds(drop("looped")), null_what=f"the looped ViT's loss at {Tx} loops",
                    trained=True, detail=f"per seed {per_seed(drop('hyper_set'))}; {m[f'hyper_set_acc_T{T}']:.3f} "
                    f"-> {m[f'hyper_set_acc_T{Tx}']:.3f}"))  # fmt: skip
    cl.append(claim("C3_looped_degrades", f"C3: the looped ViT at {Tx} loops loses >= 2 points against its "
                    f"training depth {T} (per seed, t-interval over {S} seeds)", over_seeds(drop("looped")), ">=",
                    0.02, null=over_seeds(drop("hyper_set")),
                    null_what=f"Hyper-SET's loss at {Tx} recurrences (if it loses as much, the degradation does not "
                    "tell the two apart)", trained=True, detail=f"per seed {per_seed(drop('looped'))}; "
                    f"{m[f'looped_acc_T{T}']:.3f} -> {m[f'looped_acc_T{Tx}']:.3f}"))  # fmt: skip
    cl.append(claim("C3_energy_keeps_falling", f"C3 (reported): past training depth, the median energy does not "
                    f"rise at >= 80% of all {Tx} recurrences", m["E_extrap_frac_steps_median_not_rising"], ">=", 0.8,
                    gated=False, detail="mean over seeds"))  # fmt: skip
    if sdk:
        hb, tb = m["sudoku_hyper_set_board_acc"], m["sudoku_transformer_board_acc"]
        board = {a: o["board_per"] for a, o in sdk.items()}

        def sgap(arm: str):
            return lambda i: float(board[arm][i].mean() - board["transformer"][i].mean())

        tf = f"the unshared {cfg.vit_depth}-block Transformer"
        # reported only: the spec sets no Sudoku margin (the paper's direction, PALM 9x9: 54.8 % against 49.1 %)
        cl.append(claim("C4_sudoku_board", f"C4 (reported, one seed): on 4x4 Sudoku Hyper-SET's full-board accuracy "
                        f">= {tf}'s", cluster_bootstrap(sgap("hyper_set"), grids, unit="grid", seed=seed), ">=", 0.0,
                        gated=False, trained=True, detail=f"{hb:.3f} vs {tb:.3f}; looped "
                        f"{m['sudoku_looped_board_acc']:.3f}; parameters "
                        f"{m['params_ratio_sudoku_hyper_set_vs_transformer']:.3f}x the Transformer's"))  # fmt: skip
        cell = sdk["transformer"]["cell_per"]
        cl.append(claim("sanity_sudoku_learned", "sanity: the Sudoku Transformer baseline learned the task "
                        "(blank-cell accuracy >= 0.5; chance 0.25)",
                        cluster_bootstrap(lambda i: float(cell[i].mean()), grids, unit="grid", seed=seed), ">=", 0.5,
                        why="precondition on this run's baseline: an unlearned baseline makes C4 empty"))  # fmt: skip
        sT = f"sudoku_hyper_set_board_acc_T{Tx}"
        cl.append(claim("C4_sudoku_extrap", f"C4 (reported): Hyper-SET's Sudoku board accuracy at {Tx} recurrences "
                        f">= at {T} - 2 points", m[sT] - m[f"sudoku_hyper_set_board_acc_T{T}"], ">=", -0.02,
                        gated=False, detail=f"looped: {m[f'sudoku_looped_board_acc_T{T}']:.3f} -> "
                        f"{m[f'sudoku_looped_board_acc_T{Tx}']:.3f}"))  # fmt: skip
    # ---- sanity: every baseline learned on every seed (the worst seed x baseline accuracy). Resampled: test-image
    # positions, each taking its row in every seed (the seeds' test draws are independent, so this is a bootstrap
    # within each seed)
    base = ("vit4", "vit1", "looped")
    C = np.concatenate([np.stack([o[b]["correct"] for b in base]) for o in img], 1)  # [baselines, seeds x images]
    n_te = len(img[0]["vit4"]["correct"])
    sid, pos = np.repeat(np.arange(S), n_te), np.tile(np.arange(n_te), S)

    def worst(i: np.ndarray) -> float:
        return float(min(C[:, i[sid[i] == k]].mean(1).min() for k in range(S)))

    cl.append(claim("sanity_baselines_learned", "sanity: every image baseline learned on every seed (accuracy >= "
                    "0.6)", cluster_bootstrap(worst, pos, unit="image", seed=seed), ">=", 0.6,
                    why="precondition on this run's baselines: an unlearned baseline makes C1 empty"))
    return cl, notes


def _figures(ctx: RunContext, cfg: Config, per_seed: list[dict], sdk: dict) -> None:
    """Accuracies: means over the training seeds; energy, rank and angle curves: seed 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"hyper_set": "Hyper-SET", "vit4": f"ViT-{cfg.vit_depth}", "vit1": "ViT-1", "looped": "Looped ViT",
              "hyper_set_fixed": "Hyper-SET (fixed step)", "transformer": f"Transformer-{cfg.vit_depth}",
              "no_encoder": "no encoder (null)"}  # fmt: skip
    img = {a: {"params": o["params"], "acc": float(np.mean([s[a]["acc"] for s in per_seed])),
               "acc_at": {T: float(np.mean([s[a]["acc_at"][T] for s in per_seed])) for T in o.get("acc_at", {})},
               "dyn_extrap": o.get("dyn_extrap")} for a, o in per_seed[0].items()}  # fmt: skip
    fig, axes = plt.subplots(1, 2 if sdk else 1, figsize=(10 if sdk else 5, 3.6), squeeze=False)
    for ax, (res, key, title) in zip(axes[0], ((img, "acc", "image classification"), (sdk, "board", "4x4 Sudoku")),
                                     strict=False):  # fmt: skip
        for a, o in res.items():
            ax.scatter(o["params"], o[key], s=40)
            ax.annotate(labels[a], (o["params"], o[key]), fontsize=8, xytext=(4, 2), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("parameters")
        ax.set_ylabel("test accuracy" if key == "acc" else "full-board accuracy")
        ax.set_title(title, fontsize=9)
    ctx.save_figure(fig, "accuracy_vs_params", "Test accuracy (mean over training seeds) against parameter count.")

    dyn = img["hyper_set"]["dyn_extrap"]
    Tn = dyn["E"].shape[0]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for ax, k, lab in zip(axes, ("E_attn", "E_ff", "E"), ("E_ATTN", "E_FF", "E = E_ATTN + E_FF"), strict=True):
        q = np.percentile(dyn[k], [25, 50, 75], axis=1)
        ax.plot(range(Tn), q[1], "o-")
        ax.fill_between(range(Tn), q[0], q[2], alpha=0.3)
        ax.axvline(cfg.n_recur, color="0.5", ls="--", lw=0.8)
        ax.set_xlabel("recurrence t")
        ax.set_title(lab, fontsize=9)
    ctx.save_figure(fig, "energy_vs_recurrence", "Per-sample energy (update's norms) across recurrences, seed 0: "
                    "median and interquartile range; dashed line = training depth.")  # fmt: skip

    fig, axes = plt.subplots(1, 2 if sdk else 1, figsize=(10 if sdk else 5, 3.4), squeeze=False)
    for a in ("hyper_set", "looped", "hyper_set_fixed"):
        if a in img:
            Ts = sorted(img[a]["acc_at"])
            axes[0, 0].plot(Ts, [img[a]["acc_at"][T] for T in Ts], "o-", label=labels[a])
    for a in ("hyper_set", "looped"):
        if a in sdk:
            Ts = sorted(sdk[a]["board_at"])
            axes[0, 1].plot(Ts, [sdk[a]["board_at"][T] for T in Ts], "o-", label=labels[a])
    for ax, ttl in zip(axes[0], ("image classification", "4x4 Sudoku (full board)"), strict=False):
        ax.axvline(cfg.n_recur, color="0.5", ls="--", lw=0.8)
        ax.set_xlabel("test-time recurrences")
        ax.set_ylabel("accuracy")
        ax.set_title(ttl, fontsize=9)
        ax.legend(fontsize=8)
    ctx.save_figure(fig, "depth_extrapolation", "Accuracy against test-time recurrences (dashed: training depth).")

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.3))
    for ax, k, lab in zip(axes, ("erank", "angle"), ("effective rank of the tokens", "mean pairwise angle "
                                                     "in head space (rad)"), strict=True):  # fmt: skip
        q = np.percentile(dyn[k], [25, 50, 75], axis=1)
        ax.plot(range(Tn), q[1], "o-")
        ax.fill_between(range(Tn), q[0], q[2], alpha=0.3)
        ax.axvline(cfg.n_recur, color="0.5", ls="--", lw=0.8)
        ax.set_xlabel("recurrence t")
        ax.set_title(lab, fontsize=9)
    ctx.save_figure(fig, "rank_and_angles", "Effective rank and inter-token angle across recurrences.")


__all__ = ["Config", "PRESETS", "DESCRIPTION", "WORKLOAD", "HEADLINE", "SEEDS", "EXPECTED", "run", "plan"]
