"""Hyper-SET: Designing Transformers via Hyperspherical Energy Minimization (ICLR 2026, arXiv 2502.11646) —
reproduction.

Fashion-MNIST (4,000 train / 1,000 test images, 7x7 patches -> 16 tokens + CLS): a Hyper-SET encoder (one
shared layer, 6 recurrences) against an unshared 4-block ViT, a 1-block ViT of similar size and a naively
looped ViT (one block applied 6 times). Measured: accuracy and parameters (C1); the energy of the Hyper-SET
tokens at every recurrence (C2), with the step-size signs; accuracy at 9 and 12 test-time recurrences for
Hyper-SET and the looped ViT (C3). Then 4x4 Sudoku (unique-solution puzzles, test puzzles from held-out
solution grids): Hyper-SET against an unshared Transformer and the looped one (C4). Claims named
``ctrl_*`` / ``sanity_*`` are controls and sanity checks, counted apart.
"""

from __future__ import annotations

import logging
import time
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
    TransformerForSudoku,
    ViTConfig,
    ViTForImageClassification,
    fit,
    n_params,
    predict,
)
from iclr26.core import param
from iclr26.core.errors import MissingAssetError, UserError
from iclr26.core.parallel import parallel_map
from iclr26.data import images
from iclr26.data.sudoku import split_grids, sudoku_puzzles
from iclr26.runs import Result, RunContext, claim

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Fashion-MNIST (reduced, 7x7 patches): Hyper-SET (one shared energy-minimising layer, 6 recurrences,\n"
    "step sizes zero at init) against an unshared 4-block ViT, a 1-block ViT and a looped ViT. Accuracy per\n"
    "parameter, the energy of the tokens across recurrences, and depth extrapolation to 12 recurrences.\n"
    "Then 4x4 Sudoku with held-out solution grids against an unshared and a looped Transformer."
)

WORKLOAD = "small"  # tiny models: one intra-op thread per process, independent arms in worker processes

IMAGE_ARMS = ("hyper_set", "vit4", "vit1", "looped")
SUDOKU_ARMS = ("hyper_set", "transformer", "looped")


@dataclass
class Config:
    dataset: str = param("auto", "auto (Fashion-MNIST, else sklearn digits) | fashion-mnist | digits",
                         choices=["auto", "fashion-mnist", "digits"])  # fmt: skip
    n_train_per_class: int = param(400, "training images per class", low=2, high=6000)
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
    extrap_recur: list[int] = param([9, 12], "test-time recurrences beyond training for the depth check (the "
                                    "last is the C3 depth)", min_len=1, max_len=8, elem_low=1, elem_high=256)  # fmt: skip
    epochs: int = param(8, "training epochs of every image model", low=1, high=1000)
    batch_size: int = param(128, "batch size", low=1, high=100_000)
    lr: float = param(1e-3, "Adam peak learning rate", low=0.0, high=1.0, low_open=True)
    min_lr: float = param(1e-5, "final learning rate of the cosine schedule", low=0.0, high=1.0)
    warmup_epochs: float = param(1.0, "linear warm-up epochs", low=0.0, high=100.0)
    weight_decay: float = param(5e-5, "coupled L2 weight decay of Adam", low=0.0, high=1.0)
    label_smoothing: float = param(0.1, "label smoothing of the image classifiers", low=0.0, high=0.5)
    energy_samples: int = param(256, "fixed test images on which energies, ranks and angles are measured",
                                low=1, high=10_000)  # fmt: skip
    sudoku_train: int = param(2000, "4x4 Sudoku training puzzles (0 = skip the Sudoku part)", low=0,
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
              "sudoku_epochs": 1, "sudoku_blanks": 4},
    "default": {},
    "paper": {"n_train_per_class": 6000, "n_test_per_class": 1000, "patch": 2, "d": 512, "heads": 8,
              "mlp_hidden": 512, "n_recur": 12, "vit_depth": 12, "time_dim": 512, "epochs": 200,
              "fixed_step_arm": True, "extrap_recur": [18, 24], "sudoku_train": 9000, "sudoku_test": 1000,
              "sudoku_epochs": 200},
}  # fmt: skip


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


def _acc(model, X, y, **kw) -> float:
    return float((predict(model, X, **kw) == y).float().mean())


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


def _image_job(arm: str, common) -> dict:
    """Train one image model; score it (and, for Hyper-SET, measure its dynamics)."""
    cfg, Xtr, ytr, Xte, yte, side, patch, seed = common
    t0, c0 = time.perf_counter(), time.process_time()
    torch.manual_seed(seed)
    kw = dict(image_size=side, patch=patch, channels=1, num_classes=10)
    if arm == "hyper_set":
        model = HyperSETForImageClassification(_hs_cfg(cfg), **kw)
    elif arm == "hyper_set_fixed":
        model = HyperSETForImageClassification(_hs_cfg(cfg, step="fixed", fixed_step=1.0), **kw)
    elif arm == "vit4":
        model = ViTForImageClassification(_vit_cfg(cfg, cfg.vit_depth), **kw)
    elif arm == "vit1":
        model = ViTForImageClassification(_vit_cfg(cfg, 1), **kw)
    else:
        model = ViTForImageClassification(_vit_cfg(cfg, cfg.n_recur, looped=True), **kw)
    hist = fit(model, Xtr, ytr, epochs=cfg.epochs, lr=cfg.lr, batch_size=cfg.batch_size,
               warmup_epochs=cfg.warmup_epochs, min_lr=cfg.min_lr, weight_decay=cfg.weight_decay,
               label_smoothing=cfg.label_smoothing, seed=seed + 7)  # fmt: skip
    out = {"params": n_params(model), "acc": _acc(model, Xte, yte), "loss": hist, "seconds": 0.0}
    if arm in ("hyper_set", "hyper_set_fixed", "looped"):
        out["acc_at"] = {T: _acc(model, Xte, yte, n_recur=T) for T in sorted({1, 2, cfg.n_recur, *cfg.extrap_recur})}
    if arm == "hyper_set":
        Xe = Xte[: cfg.energy_samples]
        out["dyn"] = _dynamics(model, Xe, cfg.n_recur)
        out["dyn_reversed"] = _dynamics(model, Xe, cfg.n_recur, step_scale=-1.0)
        out["dyn_extrap"] = _dynamics(model, Xe, max(cfg.extrap_recur))
        with torch.no_grad():
            out["acc_zero_steps"] = float((torch.cat([model.head(model.head_norm(model.encoder(
                model.tokens(Xte[i : i + 1000]), step_scale=0.0)[:, 0])).argmax(-1)
                for i in range(0, len(Xte), 1000)]) == yte).float().mean())  # fmt: skip
    out["seconds"], out["cpu_seconds"] = time.perf_counter() - t0, time.process_time() - c0
    return out


def _sudoku_job(arm: str, common) -> dict:
    cfg, P, Y, Pt, Yt, seed = common
    t0, c0 = time.perf_counter(), time.process_time()
    torch.manual_seed(seed + 11)
    if arm == "hyper_set":
        model = HyperSETForSudoku(_hs_cfg(cfg))
    elif arm == "transformer":
        model = TransformerForSudoku(_vit_cfg(cfg, cfg.vit_depth))
    else:
        model = TransformerForSudoku(_vit_cfg(cfg, cfg.n_recur, looped=True))
    hist = fit(model, P, Y, epochs=cfg.sudoku_epochs, lr=cfg.sudoku_lr, batch_size=cfg.sudoku_batch_size,
               warmup_epochs=cfg.warmup_epochs, min_lr=min(cfg.min_lr, cfg.sudoku_lr), weight_decay=cfg.weight_decay,
               label_smoothing=0.0, seed=seed + 13)  # fmt: skip

    def score(**kw) -> tuple[float, float]:
        pred = predict(model, Pt, **kw)
        blank = Yt != -100
        cell = float((pred[blank] == Yt[blank]).float().mean())
        board = float(((pred == Yt) | ~blank).all(1).float().mean())
        return cell, board

    out = {"params": n_params(model), "loss": hist}
    out["cell"], out["board"] = score()
    if arm != "transformer":
        out["board_at"] = {T: score(n_recur=T)[1] for T in sorted({cfg.n_recur, *cfg.extrap_recur})}
    out["seconds"], out["cpu_seconds"] = time.perf_counter() - t0, time.process_time() - c0
    return out


def run(cfg: Config, ctx: RunContext) -> Result:
    t_all, cpu_all = time.perf_counter(), time.process_time()
    seed = ctx.seed
    name, Xtr, ytr, Xte, yte, side, patch = _load(cfg, seed, ctx)
    metrics: dict[str, float] = {"dataset_is_fashion_mnist": float(name == "fashion-mnist"),
                                 "n_train": float(len(ytr)), "n_test": float(len(yte))}  # fmt: skip
    arms = list(IMAGE_ARMS) + (["hyper_set_fixed"] if cfg.fixed_step_arm else [])
    jobs: list[tuple[str, str]] = [("image", a) for a in arms]
    sud = None
    if cfg.sudoku_train:
        t = time.perf_counter()
        tr_grids, te_grids = split_grids(cfg.sudoku_test_grids, seed)
        P, Y = sudoku_puzzles(tr_grids, cfg.sudoku_train, blanks=cfg.sudoku_blanks, seed=seed + 3)
        Pt, Yt = sudoku_puzzles(te_grids, cfg.sudoku_test, blanks=cfg.sudoku_blanks, seed=seed + 4)
        metrics["time_sudoku_data_s"] = time.perf_counter() - t
        sud = (cfg, P, Y, Pt, Yt, seed)
        jobs += [("sudoku", a) for a in SUDOKU_ARMS]
    # longest arms first (parallel_map hands tasks out in order)
    order = {"hyper_set": 0, "looped": 1, "hyper_set_fixed": 2, "vit4": 3, "transformer": 4, "vit1": 5}
    jobs.sort(key=lambda j: (order[j[1]], j[0]))
    t = time.perf_counter()
    outs = parallel_map(_job, jobs, common=((cfg, Xtr, ytr, Xte, yte, side, patch, seed), sud), desc="arms")
    metrics["time_arms_s"] = time.perf_counter() - t
    img = {a: o for (k, a), o in zip(jobs, outs, strict=True) if k == "image"}
    sdk = {a: o for (k, a), o in zip(jobs, outs, strict=True) if k == "sudoku"}

    for a, o in img.items():
        metrics[f"{a}_acc"], metrics[f"{a}_params"] = o["acc"], float(o["params"])
        metrics[f"{a}_final_train_loss"] = o["loss"][-1]
        metrics[f"time_{a}_s"], metrics[f"cpu_{a}_s"] = o["seconds"], o["cpu_seconds"]
        for T, v in o.get("acc_at", {}).items():
            metrics[f"{a}_acc_T{T}"] = v
    hs = img["hyper_set"]
    dyn, rev = hs["dyn"], hs["dyn_reversed"]
    metrics["hyper_set_acc_zero_steps"] = hs["acc_zero_steps"]
    for t in range(cfg.n_recur + 1):
        for k in ("E", "E_attn", "E_ff", "E_plain", "erank", "angle"):
            metrics[f"{k}_median_t{t}"] = float(np.median(dyn[k][t]))
    for t, (pa, pb) in enumerate(dyn["pos_alpha_beta"]):
        metrics[f"pos_alpha_t{t}"], metrics[f"pos_beta_t{t}"] = float(pa), float(pb)
    metrics["pos_alpha_mean"] = float(dyn["pos_alpha_beta"][:, 0].mean())
    metrics["pos_beta_mean"] = float(dyn["pos_alpha_beta"][:, 1].mean())
    for tag, D in (("", dyn), ("reversed_", rev)):
        for k in ("E", "E_plain"):
            metrics[f"{tag}{k}_frac_samples_fall"] = float((D[k][-1] < D[k][0]).mean())
            med = np.median(D[k], axis=1)
            metrics[f"{tag}{k}_frac_steps_median_not_rising"] = float((np.diff(med) <= 0).mean())
    ext = hs["dyn_extrap"]
    metrics["E_extrap_frac_samples_fall"] = float((ext["E"][-1] < ext["E"][0]).mean())
    metrics["E_extrap_frac_steps_median_not_rising"] = float((np.diff(np.median(ext["E"], 1)) <= 0).mean())
    for a, o in sdk.items():
        metrics[f"sudoku_{a}_cell_acc"], metrics[f"sudoku_{a}_board_acc"] = o["cell"], o["board"]
        metrics[f"sudoku_{a}_params"] = float(o["params"])
        metrics[f"time_sudoku_{a}_s"], metrics[f"cpu_sudoku_{a}_s"] = o["seconds"], o["cpu_seconds"]
        for T, v in o.get("board_at", {}).items():
            metrics[f"sudoku_{a}_board_acc_T{T}"] = v

    claims, notes = _claims(cfg, metrics, sdk)
    _figures(ctx, cfg, img, sdk)
    metrics["wall_time_s"] = time.perf_counter() - t_all
    metrics["cpu_time_s"] = time.process_time() - cpu_all
    # CPU seconds of all arms (worker processes included): what a quiet machine needs, whatever the load
    metrics["cpu_time_all_arms_s"] = sum(v for k, v in metrics.items() if k.startswith("cpu_") and k.endswith("_s")
                                         and k != "cpu_time_s")  # fmt: skip
    notes.insert(0, f"Data: {name}, {len(ytr)} train / {len(yte)} test images, {(side // patch) ** 2} patches + CLS. "
                    "Gated energy: the update's own RMSNorm gains (attention term with the key-norm gains) and ReLU; "
                    "E_plain: the official parameter-free analysis energy.")  # fmt: skip
    return Result(metrics=metrics, claims=claims, notes=" ".join(notes))


def _job(job: tuple[str, str], common) -> dict:
    kind, arm = job
    return _image_job(arm, common[0]) if kind == "image" else _sudoku_job(arm, common[1])


def _claims(cfg: Config, m: dict, sdk: dict) -> tuple[list, list[str]]:
    cl, notes = [], []
    a = m["hyper_set_acc"]
    cl.append(claim("C1_vs_vit1", "C1: Hyper-SET accuracy >= the similar-size 1-block ViT's - 1 point",
                    a - m["vit1_acc"], ">=", -0.01, detail=f"{a:.3f} vs {m['vit1_acc']:.3f}"))  # fmt: skip
    cl.append(claim("C1_vs_vit4", f"C1: Hyper-SET accuracy >= the unshared {cfg.vit_depth}-block ViT's - 3 points",
                    a - m["vit4_acc"], ">=", -0.03, detail=f"{a:.3f} vs {m['vit4_acc']:.3f}"))  # fmt: skip
    ratio = m["hyper_set_params"] / m["vit4_params"]
    cl.append(claim("C1_params", f"C1: Hyper-SET has <= 0.5x the parameters of the {cfg.vit_depth}-block ViT",
                    ratio, "<=", 0.5, detail=f"{m['hyper_set_params']:.0f} vs {m['vit4_params']:.0f}"))  # fmt: skip
    cl.append(claim("C2_samples_fall", "C2: the energy E(T) < E(0) for >= 90% of test samples",
                    m["E_frac_samples_fall"], ">=", 0.9,
                    detail=f"parameter-free energy: {m['E_plain_frac_samples_fall']:.2f}"))  # fmt: skip
    cl.append(claim("C2_median_steps", "C2: the median energy does not rise at >= 80% of the recurrences",
                    m["E_frac_steps_median_not_rising"], ">=", 0.8,
                    detail=f"parameter-free energy: {m['E_plain_frac_steps_median_not_rising']:.2f}"))  # fmt: skip
    cl.append(claim("C2_alpha_positive", "C2 (reported): alpha is mostly positive (a mostly negative alpha means "
                    "the attention step ascends the energy)", m["pos_alpha_mean"], ">=", 0.5, gated=False,
                    detail=f"share of beta > 0: {m['pos_beta_mean']:.2f}"))  # fmt: skip
    if m["pos_alpha_mean"] < 0.5:
        notes.append(f"Flag: only {m['pos_alpha_mean']:.0%} of the learned alpha entries are positive, so the "
                     "attention sub-step mostly ascends E_ATTN.")  # fmt: skip
    Tx, T = max(cfg.extrap_recur), cfg.n_recur
    drop_hs = m[f"hyper_set_acc_T{T}"] - m[f"hyper_set_acc_T{Tx}"]
    drop_lp = m[f"looped_acc_T{T}"] - m[f"looped_acc_T{Tx}"]
    cl.append(claim("C3_hyper_set_stable", f"C3: Hyper-SET at {Tx} test-time recurrences loses <= 2 points against "
                    f"its training depth {T}", drop_hs, "<=", 0.02,
                    detail=f"{m[f'hyper_set_acc_T{T}']:.3f} -> {m[f'hyper_set_acc_T{Tx}']:.3f}"))  # fmt: skip
    cl.append(claim("C3_looped_degrades", f"C3: the looped ViT at {Tx} loops loses >= 2 points against its "
                    f"training depth {T}", drop_lp, ">=", 0.02,
                    detail=f"{m[f'looped_acc_T{T}']:.3f} -> {m[f'looped_acc_T{Tx}']:.3f}"))  # fmt: skip
    cl.append(claim("C3_energy_keeps_falling", f"C3 (reported): past training depth, the median energy does not "
                    f"rise at >= 80% of all {Tx} recurrences", m["E_extrap_frac_steps_median_not_rising"], ">=", 0.8,
                    gated=False))  # fmt: skip
    if sdk:
        hb, tb = m["sudoku_hyper_set_board_acc"], m["sudoku_transformer_board_acc"]
        cl.append(claim("C4_sudoku_board", f"C4: on 4x4 Sudoku Hyper-SET's full-board accuracy >= the unshared "
                        f"{cfg.vit_depth}-block Transformer's - 5 points", hb - tb, ">=", -0.05,
                        detail=f"{hb:.3f} vs {tb:.3f}; looped {m['sudoku_looped_board_acc']:.3f}"))  # fmt: skip
        cl.append(claim("C4_sudoku_params", "C4: with <= 0.5x the Transformer's parameters",
                        m["sudoku_hyper_set_params"] / m["sudoku_transformer_params"], "<=", 0.5))  # fmt: skip
        cl.append(claim("sanity_sudoku_learned", "sanity: the Sudoku Transformer baseline learned the task "
                        "(blank-cell accuracy >= 0.5; chance 0.25)", m["sudoku_transformer_cell_acc"], ">=", 0.5))  # fmt: skip
        sT = f"sudoku_hyper_set_board_acc_T{Tx}"
        cl.append(claim("C4_sudoku_extrap", f"C4 (reported): Hyper-SET's Sudoku board accuracy at {Tx} recurrences "
                        f">= at {T} - 2 points", m[sT] - m[f"sudoku_hyper_set_board_acc_T{T}"], ">=", -0.02,
                        gated=False, detail=f"looped: {m[f'sudoku_looped_board_acc_T{T}']:.3f} -> "
                        f"{m[f'sudoku_looped_board_acc_T{Tx}']:.3f}"))  # fmt: skip
    # ---- controls and sanity checks
    cl.append(claim("ctrl_energy_reversed_steps", "control: the energy check can fail: the same model with every "
                    "alpha, beta negated lowers E for <= 50% of samples", m["reversed_E_frac_samples_fall"], "<=", 0.5))  # fmt: skip
    cl.append(claim("ctrl_zero_steps", "control: the encoder does the work: Hyper-SET with alpha = beta = 0 (the "
                    "identity) is at chance (<= 0.2)", m["hyper_set_acc_zero_steps"], "<=", 0.2))  # fmt: skip
    cl.append(claim("sanity_baselines_learned", "sanity: every image baseline learned (accuracy >= 0.6)",
                    min(m["vit4_acc"], m["vit1_acc"], m["looped_acc"]), ">=", 0.6))  # fmt: skip
    return cl, notes


def _figures(ctx: RunContext, cfg: Config, img: dict, sdk: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"hyper_set": "Hyper-SET", "vit4": f"ViT-{cfg.vit_depth}", "vit1": "ViT-1", "looped": "Looped ViT",
              "hyper_set_fixed": "Hyper-SET (fixed step)", "transformer": f"Transformer-{cfg.vit_depth}"}  # fmt: skip
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
    ctx.save_figure(fig, "accuracy_vs_params", "Test accuracy against parameter count.")

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
    ctx.save_figure(fig, "energy_vs_recurrence", "Per-sample energy (update's norms) across recurrences: median "
                    "and interquartile range; dashed line = training depth.")  # fmt: skip

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


__all__ = ["Config", "PRESETS", "DESCRIPTION", "WORKLOAD", "run"]
