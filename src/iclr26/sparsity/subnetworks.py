"""Composable Sparse Subnetworks via Maximum-Entropy Principle (ICLR 2026, OpenReview IHwx5ioIP2).

A module is given an assigned class set S. It trains with ``KL(q || softmax(f(x)/t))``, where q is
one-hot for y in S and uniform (1/C) otherwise, so it is confident on S and maximally uncertain
elsewhere. Iterative magnitude pruning (IMP) with rewinding to one shared initialisation theta0
makes it sparse: each round trains, removes a fraction r = 1 - (1 - P)^(1/k) of the still-unpruned
entries of every Linear/Conv layer (r/2 on the output layer) and copies theta0 back into the
survivors. Modules that share theta0 compose by summing masked weights or by averaging logits;
the loss barrier along the linear path between two modules measures their mode connectivity.

Works on any ``torch.nn.Module`` that maps an input batch to logits ``[B, C]``. Masks are plain
bool tensors keyed by parameter name (``"0.weight"``), saved with safetensors.
"""

from __future__ import annotations

import copy
import fnmatch
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.estimators import BaseEstimator, check_is_fitted
from iclr26.core.io import load_tensors, save_tensors
from iclr26.core.progress import progress
from iclr26.core.seed import make_generator

log = logging.getLogger(__name__)

Masks = dict[str, torch.Tensor]
PRUNABLE_TYPES: tuple[type[nn.Module], ...] = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


# --------------------------------------------------------------------------------------------
# The maximum-entropy loss
# --------------------------------------------------------------------------------------------


def _class_tensor(classes: Iterable[int], num_classes: int, device: torch.device) -> torch.Tensor:
    cls = torch.as_tensor(sorted({int(c) for c in classes}), dtype=torch.long, device=device)
    if cls.numel() == 0:
        raise UserError("classes: the assigned class set S must not be empty")
    if int(cls.min()) < 0 or int(cls.max()) >= num_classes:
        raise UserError(f"classes {cls.tolist()}: each must lie in [0, {num_classes})")
    return cls


def maxent_targets(y: torch.Tensor, classes: Iterable[int], num_classes: int) -> torch.Tensor:
    """Target distributions ``q`` [B, C]: one-hot(y) where y is in S, uniform 1/C elsewhere."""
    cls = _class_tensor(classes, num_classes, y.device)
    q = torch.full((y.shape[0], num_classes), 1.0 / num_classes, device=y.device)
    inside = torch.isin(y, cls)  # [B]
    q[inside] = F.one_hot(y[inside], num_classes).to(q.dtype)
    return q


def _kl_per_sample(logits: torch.Tensor, q: torch.Tensor, temperature: float) -> torch.Tensor:
    """``KL(q || softmax(logits / t))`` per sample [B]; kl_div uses xlogy, so 0·log 0 = 0."""
    logp = F.log_softmax(logits / temperature, dim=-1)  # [B, C]
    return F.kl_div(logp, q, reduction="none").sum(-1)


def maxent_kl_loss(
    logits: torch.Tensor,
    y: torch.Tensor,
    classes: Iterable[int],
    *,
    temperature: float = 5.0,
    reduction: str = "batchmean",
) -> torch.Tensor:
    """``KL(q || softmax(logits / t))`` with q from :func:`maxent_targets`.

    ``reduction``: "batchmean" (sum over classes, mean over samples; the paper's choice),
    "sum", or "none" (per-sample values [B]). 0·log 0 counts as 0.
    """
    if logits.ndim != 2 or y.ndim != 1 or logits.shape[0] != y.shape[0]:
        raise UserError(
            f"maxent_kl_loss: need logits [B, C] and y [B]; got {tuple(logits.shape)}, {tuple(y.shape)}"
        )
    if temperature <= 0:
        raise UserError(f"temperature={temperature}: must be > 0")
    q = maxent_targets(y, classes, logits.shape[1])
    per_sample = _kl_per_sample(logits, q, temperature)
    if reduction == "batchmean":
        return per_sample.mean()
    if reduction == "sum":
        return per_sample.sum()
    if reduction == "none":
        return per_sample
    raise UserError(f"reduction={reduction!r}: allowed values are batchmean, sum, none")


class MaxEntLoss(nn.Module):
    """Module form of :func:`maxent_kl_loss` for a fixed class set S and temperature."""

    def __init__(self, classes: Iterable[int], num_classes: int, temperature: float = 5.0):
        super().__init__()
        self.classes = sorted({int(c) for c in classes})
        self.num_classes = int(num_classes)
        self.temperature = float(temperature)
        _class_tensor(self.classes, self.num_classes, torch.device("cpu"))

    def forward(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if logits.shape[-1] != self.num_classes:
            raise UserError(
                f"MaxEntLoss: logits have {logits.shape[-1]} classes, expected {self.num_classes}"
            )
        return maxent_kl_loss(logits, y, self.classes, temperature=self.temperature)


# --------------------------------------------------------------------------------------------
# Masks and magnitude pruning
# --------------------------------------------------------------------------------------------


def prunable_parameters(
    module: nn.Module,
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    prune_bias: bool = True,
) -> dict[str, nn.Parameter]:
    """Weights (and biases) of every Linear/Conv layer, keyed by full parameter name, in module order.

    ``include`` / ``exclude`` are fnmatch patterns on the layer's module name (e.g. ``"features.*"``).
    """
    out: dict[str, nn.Parameter] = {}
    for name, m in module.named_modules():
        if not isinstance(m, PRUNABLE_TYPES):
            continue
        if include is not None and not any(fnmatch.fnmatch(name, p) for p in include):
            continue
        if exclude is not None and any(fnmatch.fnmatch(name, p) for p in exclude):
            continue
        prefix = f"{name}." if name else ""
        out[prefix + "weight"] = m.weight
        if prune_bias and m.bias is not None:
            out[prefix + "bias"] = m.bias
    if not out:
        raise UserError("no prunable Linear/Conv layers found (check include/exclude patterns)")
    return out


def _layer(param_name: str) -> str:
    return param_name.rsplit(".", 1)[0] if "." in param_name else ""


def ones_masks(module: nn.Module, **kw: Any) -> Masks:
    """All-True masks for the parameters :func:`prunable_parameters` selects (``kw`` passed on)."""
    return {k: torch.ones_like(p, dtype=torch.bool) for k, p in prunable_parameters(module, **kw).items()}


def imp_round_ratio(target_sparsity: float, rounds: int) -> float:
    """Per-round pruning fraction ``r = 1 - (1 - P)^(1/k)`` so k rounds reach sparsity P."""
    if not 0 <= target_sparsity < 1:
        raise UserError(f"target_sparsity={target_sparsity}: must be in [0, 1)")
    if rounds < 1:
        raise UserError(f"rounds={rounds}: must be >= 1")
    return 1.0 - (1.0 - target_sparsity) ** (1.0 / rounds)


def l1_prune_masks(params: dict[str, torch.Tensor], masks: Masks, amounts: dict[str, float]) -> Masks:
    """One round of local L1 unstructured pruning; returns new masks (inputs untouched).

    For each tensor, ``round(amount * n_unpruned)`` of the still-unpruned entries with the
    smallest |value| are removed, as ``torch.nn.utils.prune.l1_unstructured`` does when applied
    on top of an existing mask.
    """
    out: Masks = {}
    for name, mask in masks.items():
        amount = float(amounts.get(name, 0.0))
        if not 0 <= amount <= 1:
            raise UserError(f"pruning amount for {name} is {amount}; must be in [0, 1]")
        alive = mask.flatten().nonzero().flatten()  # indices of unpruned entries
        k = round(amount * alive.numel())
        new = mask.clone()
        if k > 0:
            scores = params[name].detach().abs().flatten()[alive]
            order = torch.argsort(scores, stable=True)[:k]
            new.view(-1)[alive[order]] = False
        out[name] = new
    return out


def mask_sparsity(masks: Masks, *, by_layer: bool = True) -> dict[str, float]:
    """Fraction of pruned entries per layer (weight and bias together) and ``"total"``."""
    counts: dict[str, list[int]] = {}
    for name, m in masks.items():
        c = counts.setdefault(_layer(name) if by_layer else name, [0, 0])
        c[0] += int((~m).sum())
        c[1] += m.numel()
    out = {k: z / n for k, (z, n) in counts.items()}
    out["total"] = sum(z for z, _ in counts.values()) / max(1, sum(n for _, n in counts.values()))
    return out


def mask_jaccard(a: Masks, b: Masks) -> float:
    """Jaccard overlap |A ∩ B| / |A ∪ B| of the kept entries of two masks over all shared tensors."""
    inter = union = 0
    for k in a.keys() & b.keys():
        inter += int((a[k] & b[k]).sum())
        union += int((a[k] | b[k]).sum())
    return inter / union if union else 1.0


def merge_masks(masks: Sequence[Masks]) -> Masks:
    """Elementwise OR of masks (the support of a weight-summed composite)."""
    if not masks:
        raise UserError("merge_masks: need at least one mask")
    out = {k: v.clone() for k, v in masks[0].items()}
    for m in masks[1:]:
        for k, v in m.items():
            out[k] = out[k] | v if k in out else v.clone()
    return out


def save_masks(path: str | Path, masks: Masks, cfg: dict[str, Any] | None = None) -> None:
    """Save masks as bool tensors in one safetensors file (plus ``cfg.json`` if given)."""
    save_tensors(path, {k: v.to(torch.bool) for k, v in masks.items()}, cfg)


def load_masks(path: str | Path) -> Masks:
    return {k: v.to(torch.bool) for k, v in load_tensors(path).items()}


@torch.no_grad()
def _apply_masks_(module: nn.Module, masks: Masks) -> None:
    params = dict(module.named_parameters())
    for k, m in masks.items():
        params[k].mul_(m.to(params[k].dtype))


def effective_state(module: nn.Module, masks: Masks | None = None) -> dict[str, torch.Tensor]:
    """A detached copy of ``module.state_dict()`` with masked parameters multiplied by their masks."""
    sd = {k: v.detach().clone() for k, v in module.state_dict().items()}
    for k, m in (masks or {}).items():
        sd[k] = sd[k] * m.to(sd[k].dtype)
    return sd


# --------------------------------------------------------------------------------------------
# Training: IMP with rewinding to a shared theta0
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def predict_logits(module: nn.Module, X: torch.Tensor, *, batch_size: int = 4096) -> torch.Tensor:
    """Logits of ``module`` on ``X`` in eval mode, batched, without gradients; restores the mode."""
    was_training = module.training
    module.eval()
    try:
        dev = next(module.parameters()).device
        outs = [module(X[i : i + batch_size].to(dev)).float().cpu() for i in range(0, len(X), batch_size)]
    finally:
        module.train(was_training)
    return torch.cat(outs)


def _adam(model: nn.Module, lr: float) -> torch.optim.Adam:
    """Adam; the fused kernel where torch has one (~25% faster per step for a tiny MLP on CPU)."""
    params = list(model.parameters())
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.Adam(params, lr=lr, fused=fused or None)


def _eval_loss(module, X, y, loss_fn, batch_size) -> float:
    logits = predict_logits(module, X, batch_size=batch_size)
    return float(loss_fn(logits, y.cpu()))


class MaxEntIMP(BaseEstimator):
    """Train one class-specific sparse module: max-entropy loss + IMP with rewinding.

    ``fit(init_module, X, y, X_val, y_val)`` deep-copies ``init_module`` (its weights are theta0;
    pass the *same* module to every ``MaxEntIMP`` of a family so all modules share theta0), then
    runs ``rounds`` times [train ``epochs // rounds`` epochs with early stopping -> prune ->
    rewind survivors to theta0], then trains ``epochs`` epochs. ``rounds=0`` trains a dense module.

    Learned attributes: ``module_`` (masked, in eval mode), ``masks_``, ``theta0_``,
    ``history_`` (one dict per epoch), ``round_ratio_``, ``layer_amounts_``, ``classes_`` (sorted).
    """

    def __init__(
        self,
        classes: Iterable[int],
        num_classes: int,
        *,
        target_sparsity: float = 0.9,
        rounds: int = 2,
        epochs: int = 12,
        temperature: float = 5.0,
        lr: float = 1e-3,
        batch_size: int = 128,
        patience: int = 3,
        output_layer: str | None = None,
        output_ratio_scale: float = 0.5,
        prune_bias: bool = True,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        carry_optimizer: bool = True,
        seed: int = 0,
        device: str | torch.device = "cpu",
        eval_batch_size: int = 4096,
    ):
        self.classes = classes
        self.num_classes = num_classes
        self.target_sparsity = target_sparsity
        self.rounds = rounds
        self.epochs = epochs
        self.temperature = temperature
        self.lr = lr
        self.batch_size = batch_size
        self.patience = patience
        self.output_layer = output_layer
        self.output_ratio_scale = output_ratio_scale
        self.prune_bias = prune_bias
        self.include = include
        self.exclude = exclude
        self.carry_optimizer = carry_optimizer
        self.seed = seed
        self.device = device
        self.eval_batch_size = eval_batch_size

    # -- helpers ---------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        check_is_fitted(self, "module_", "fit(init_module, X, y, X_val, y_val)")

    def layer_amounts(self, masks: Masks) -> dict[str, float]:
        """Per-parameter pruning fraction for one round: r everywhere, r * output_ratio_scale on the output layer."""
        r = imp_round_ratio(self.target_sparsity, self.rounds)
        layers = list(dict.fromkeys(_layer(k) for k in masks))
        out_layer = self.output_layer if self.output_layer is not None else layers[-1]
        if out_layer not in layers:
            raise UserError(f"output_layer={out_layer!r} is not a pruned layer; pruned layers: {layers}")
        return {k: r * self.output_ratio_scale if _layer(k) == out_layer else r for k in masks}

    def _train(self, model, opt, masks, X, y, X_val, y_val, loss_fn, epochs, gen, stage) -> None:
        dev = next(model.parameters()).device
        params = dict(model.named_parameters())
        # Built once per stage, not per step (the per-step cost of a tiny MLP is mostly overhead).
        q_all = maxent_targets(y, self.classes_, self.num_classes)
        fmasks = {k: m.to(params[k].dtype) for k, m in masks.items()}
        best = _eval_loss(model, X_val, y_val, loss_fn, self.eval_batch_size)
        best_state = copy.deepcopy(model.state_dict())
        bad = 0
        for epoch in range(epochs):
            model.train()
            perm = torch.randperm(len(X), generator=gen)
            total, nb = 0.0, 0
            for i in range(0, len(X), self.batch_size):
                idx = perm[i : i + self.batch_size]
                loss = _kl_per_sample(model(X[idx].to(dev)), q_all[idx].to(dev), self.temperature).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                # Pruned entries get no gradient (as with torch.nn.utils.prune's reparametrisation).
                for k, m in fmasks.items():
                    if params[k].grad is not None:
                        params[k].grad.mul_(m)
                opt.step()
                with torch.no_grad():  # Adam momentum must not revive pruned entries
                    for k, m in fmasks.items():
                        params[k].mul_(m)
                total += float(loss.detach())
                nb += 1
            val = _eval_loss(model, X_val, y_val, loss_fn, self.eval_batch_size)
            self.history_.append(
                {"stage": stage, "epoch": epoch, "train_loss": total / max(nb, 1), "val_loss": val}
            )
            if val < best - 1e-6:
                best, bad = val, 0
                best_state = copy.deepcopy(model.state_dict())
            else:
                bad += 1
                if bad >= self.patience:
                    break
        model.load_state_dict(best_state)  # restore the best weights; masks are unchanged

    # -- public API ------------------------------------------------------------------------
    def fit(
        self,
        init_module: nn.Module,
        X: torch.Tensor,
        y: torch.Tensor,
        X_val: torch.Tensor,
        y_val: torch.Tensor,
    ) -> MaxEntIMP:
        if len(X) != len(y) or len(X_val) != len(y_val) or len(X) == 0 or len(X_val) == 0:
            raise UserError("fit: X/y and X_val/y_val must be non-empty with matching lengths")
        if self.rounds < 0 or self.epochs < 1:
            raise UserError(f"rounds={self.rounds}, epochs={self.epochs}: need rounds >= 0 and epochs >= 1")
        if self.rounds > 0:
            imp_round_ratio(self.target_sparsity, self.rounds)  # validates
        self.classes_ = sorted({int(c) for c in self.classes})
        loss_fn = MaxEntLoss(self.classes_, self.num_classes, self.temperature)
        model = copy.deepcopy(init_module).to(self.device)
        self.theta0_ = {k: v.detach().clone() for k, v in model.state_dict().items()}
        masks = {
            k: v.to(self.device)
            for k, v in ones_masks(
                model, include=self.include, exclude=self.exclude, prune_bias=self.prune_bias
            ).items()
        }
        self.history_: list[dict[str, Any]] = []
        self.round_ratio_ = imp_round_ratio(self.target_sparsity, self.rounds) if self.rounds > 0 else 0.0
        self.layer_amounts_ = self.layer_amounts(masks) if self.rounds > 0 else {}
        gen = make_generator(self.seed)
        # Dropout draws from torch's global RNG: seed it inside a forked state so callers' RNG is untouched.
        with torch.random.fork_rng(devices=[] if torch.device(self.device).type == "cpu" else None):
            torch.manual_seed(self.seed)
            opt = _adam(model, self.lr)
            per_round = max(1, self.epochs // max(self.rounds, 1))
            for rnd in range(self.rounds):
                self._train(model, opt, masks, X, y, X_val, y_val, loss_fn, per_round, gen, f"round{rnd}")
                params = {k: v.detach() for k, v in model.named_parameters()}
                masks = l1_prune_masks(params, masks, self.layer_amounts_)
                self._rewind_(model, masks)
                if not self.carry_optimizer:
                    opt = _adam(model, self.lr)
            self._train(model, opt, masks, X, y, X_val, y_val, loss_fn, self.epochs, gen, "final")
        model.eval()
        self.module_ = model
        self.masks_ = masks
        log.info("MaxEntIMP S=%s: sparsity %.3f", self.classes_, mask_sparsity(masks)["total"])
        return self

    @torch.no_grad()
    def _rewind_(self, model: nn.Module, masks: Masks) -> None:
        # Surviving entries <- theta0, pruned entries <- 0; unpruned tensors (and buffers) <- theta0.
        model.load_state_dict(self.theta0_)
        _apply_masks_(model, masks)

    def predict_logits(self, X: torch.Tensor) -> torch.Tensor:
        self._check_fitted()
        return predict_logits(self.module_, X, batch_size=self.eval_batch_size)

    def score(self, X: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        """:func:`subnetwork_metrics` of the fitted module on (X, y)."""
        return subnetwork_metrics(self.predict_logits(X), y, self.classes_, temperature=self.temperature)


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def _entropy(logp: torch.Tensor) -> torch.Tensor:
    return -(logp.exp() * logp).sum(-1)


def subnetwork_metrics(
    logits: torch.Tensor, y: torch.Tensor, classes: Iterable[int], *, temperature: float = 5.0
) -> dict[str, float]:
    """Accuracy (C-way), rewarded accuracy (y in S), mean entropy of softmax(z/t) on y not in S, leakage.

    Leakage: share of y-not-in-S samples whose top class lies in S with probability > 0.5.
    ``off_argmax_share`` (the precision side of the argmax rule that rewarded accuracy uses):
    share of y-not-in-S samples whose top class lies in S, whatever its probability. A module
    that over-predicts S scores high here even when its off-S output is near-uniform.
    Quantities over an empty group are NaN.
    """
    y = y.to(logits.device)
    cls = _class_tensor(classes, logits.shape[1], logits.device)
    logp = F.log_softmax(logits / temperature, dim=-1)
    pred = logp.argmax(-1)
    inside = torch.isin(y, cls)
    outside = ~inside
    top_p = logp.exp().max(-1).values
    leak = torch.isin(pred, cls) & (top_p > 0.5)

    def _mean(t: torch.Tensor, sel: torch.Tensor) -> float:
        return float(t[sel].float().mean()) if bool(sel.any()) else math.nan

    return {
        "accuracy": float((pred == y).float().mean()),
        "rewarded_accuracy": _mean(pred == y, inside),
        "entropy_outside": _mean(_entropy(logp), outside),
        "leakage": _mean(leak, outside),
        "off_argmax_share": _mean(torch.isin(pred, cls), outside),
        "n_inside": float(inside.sum()),
        "n_outside": float(outside.sum()),
    }


def one_vs_rest_f1(logits: torch.Tensor, y: torch.Tensor, c: int) -> float:
    """F1 of the decision "argmax = c" for detecting class c (NaN if c never occurs and is never predicted).

    Counts both sides: a module that wins recall by predicting c on many other samples loses
    precision, so over-prediction cannot raise it.
    """
    pred = logits.argmax(-1) == c
    true = y.to(logits.device) == c
    tp = int((pred & true).sum())
    denom = int(pred.sum()) + int(true.sum())
    return 2 * tp / denom if denom else math.nan


def per_class_recall(logits: torch.Tensor, y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Recall of each class [C] (NaN for a class absent from y)."""
    pred = logits.argmax(-1)
    out = torch.full((num_classes,), math.nan)
    for c in range(num_classes):
        sel = y == c
        if bool(sel.any()):
            out[c] = (pred[sel] == c).float().mean()
    return out


# --------------------------------------------------------------------------------------------
# Composition, interpolation, barrier, permutation
# --------------------------------------------------------------------------------------------


def _check_same_arch(modules: Sequence[nn.Module]) -> None:
    if not modules:
        raise UserError("need at least one module")
    ref = {k: v.shape for k, v in modules[0].state_dict().items()}
    for i, m in enumerate(modules[1:], 1):
        other = {k: v.shape for k, v in m.state_dict().items()}
        if other != ref:
            raise UserError(f"module {i} has a different architecture (state_dict keys/shapes) from module 0")


@torch.no_grad()
def weight_sum(
    modules: Sequence[nn.Module],
    masks: Sequence[Masks] | None = None,
    *,
    coefficients: Sequence[float] | None = None,
) -> nn.Module:
    """``theta = sum_k c_k * (m_k ⊙ theta_k)`` over all floating parameters (c_k = 1 by default).

    Parameters without a mask are summed as they are. Floating buffers (e.g. BatchNorm running
    statistics) do not add: they are averaged, and should be re-estimated with
    :func:`recalibrate_batchnorm`. Integer buffers come from the first module. Returns a new module.
    """
    _check_same_arch(modules)
    if masks is not None and len(masks) != len(modules):
        raise UserError(f"weight_sum: {len(modules)} modules but {len(masks)} masks")
    coefs = [1.0] * len(modules) if coefficients is None else [float(c) for c in coefficients]
    if len(coefs) != len(modules):
        raise UserError(f"weight_sum: {len(modules)} modules but {len(coefs)} coefficients")
    out = copy.deepcopy(modules[0])
    param_names = {k for k, _ in out.named_parameters()}
    states = [effective_state(m, masks[i] if masks is not None else None) for i, m in enumerate(modules)]
    merged = {}
    for k, v in states[0].items():
        if not v.is_floating_point():
            merged[k] = v
        elif k in param_names:
            merged[k] = sum(c * s[k] for c, s in zip(coefs, states, strict=True))
        else:
            merged[k] = sum(s[k] for s in states) / len(states)
    out.load_state_dict(merged)
    return out


class LogitAverage(nn.Module):
    """Composite that averages the logits of its modules: ``z(x) = mean_k z_k(x)``."""

    def __init__(self, modules: Sequence[nn.Module]):
        super().__init__()
        if not modules:
            raise UserError("LogitAverage: need at least one module")
        self.members = nn.ModuleList(modules)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([m(x) for m in self.members]).mean(0)


@torch.no_grad()
def interpolate(module_a: nn.Module, module_b: nn.Module, alpha: float) -> nn.Module:
    """New module with ``alpha * theta_A + (1 - alpha) * theta_B`` on all floating parameters and buffers.

    Pass modules whose pruned entries are zero (as ``MaxEntIMP.module_`` are), so this interpolates
    effective masked weights.
    """
    _check_same_arch([module_a, module_b])
    sa, sb = module_a.state_dict(), module_b.state_dict()
    out = copy.deepcopy(module_a)
    out.load_state_dict(
        {k: alpha * v + (1 - alpha) * sb[k] if v.is_floating_point() else v for k, v in sa.items()}
    )
    return out


@dataclass
class BarrierResult:
    """Loss along the linear path: ``losses[i] = L(alphas[i] * theta_A + (1 - alphas[i]) * theta_B)``."""

    alphas: torch.Tensor
    losses: torch.Tensor
    barrier: float

    @property
    def excess(self) -> float:
        """``max_alpha L(alpha) - (alpha L(1) + (1 - alpha) L(0))``: the bump above the straight line between the
        endpoint losses. ``barrier`` (the official definition) is at least half the endpoint gap
        ``|L(1) - L(0)| / 2`` and equals it on a monotone path, so two pairs whose endpoints have the same losses
        (a module and its hidden-unit permutation) can only differ in ``excess``."""
        line = self.alphas.double() * self.losses[-1] + (1 - self.alphas.double()) * self.losses[0]
        return float((self.losses - line).max())

    def to_dict(self) -> dict[str, Any]:
        return {"alphas": self.alphas.tolist(), "losses": self.losses.tolist(), "barrier": self.barrier,
                "excess": self.excess}


def loss_barrier(
    module_a: nn.Module,
    module_b: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    classes: Iterable[int],
    *,
    temperature: float = 5.0,
    n_alphas: int = 11,
    reduction: str = "batchmean",
    batch_size: int = 4096,
) -> BarrierResult:
    """``B = max_alpha L(alpha) - (L(0) + L(1)) / 2`` with L the max-entropy KL against ``classes``.

    Use the union ``S_A ∪ S_B`` as ``classes`` (the official choice). ``reduction`` "batchmean"
    gives nats per sample; "sum" sums over the data. Identical endpoints give B = 0.
    """
    if n_alphas < 2:
        raise UserError(f"n_alphas={n_alphas}: need at least 2 (the two endpoints)")
    if reduction not in ("batchmean", "sum"):
        raise UserError(f"reduction={reduction!r}: allowed values are batchmean, sum")
    alphas = torch.linspace(0.0, 1.0, n_alphas)
    losses = []
    for a in alphas.tolist():
        m = interpolate(module_a, module_b, a)
        logits = predict_logits(m, X, batch_size=batch_size)
        losses.append(float(maxent_kl_loss(logits, y, classes, temperature=temperature, reduction=reduction)))
    lt = torch.tensor(losses, dtype=torch.float64)
    barrier = float(lt.max() - 0.5 * (lt[0] + lt[-1]))
    return BarrierResult(alphas=alphas, losses=lt, barrier=barrier)


def _auto_pairs(module: nn.Module) -> list[tuple[str, str]]:
    for name, m in module.named_modules():
        if isinstance(m, (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)):
            raise UserError(
                f"permute_hidden_units: automatic layer pairing does not handle normalisation layer {name!r}; pass pairs="
            )
    layers = [n for n, m in module.named_modules() if isinstance(m, PRUNABLE_TYPES)]
    return list(zip(layers[:-1], layers[1:], strict=True))


@torch.no_grad()
def permute_hidden_units(
    module: nn.Module,
    masks: Masks | None = None,
    *,
    generator: torch.Generator,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> tuple[nn.Module, Masks | None]:
    """Randomly permute the hidden units of a feed-forward net without changing its function.

    For each (producer, consumer) layer pair, the producer's output units (rows of a Linear,
    output channels of a Conv, its bias and mask) and the consumer's matching inputs (columns,
    input channels, or channel-major blocks of a Linear that follows a flattened Conv) are
    permuted together. ``pairs`` defaults to consecutive Linear/Conv layers in module order
    (a plain chain with elementwise activations/pooling/dropout between them). Returns new
    (module, masks); inputs are untouched.
    """
    out = copy.deepcopy(module)
    new_masks = {k: v.clone() for k, v in masks.items()} if masks is not None else None
    mods = dict(out.named_modules())
    for prod_name, cons_name in pairs if pairs is not None else _auto_pairs(out):
        prod, cons = mods[prod_name], mods[cons_name]
        n_out = prod.weight.shape[0]
        perm = torch.randperm(n_out, generator=generator).to(prod.weight.device)
        pp = f"{prod_name}." if prod_name else ""
        cp = f"{cons_name}." if cons_name else ""
        # Producer: permute output units (dim 0) of weight, bias and their masks.
        prod.weight.copy_(prod.weight[perm])
        if prod.bias is not None:
            prod.bias.copy_(prod.bias[perm])
        for key in (pp + "weight", pp + "bias"):
            if new_masks is not None and key in new_masks:
                new_masks[key] = new_masks[key][perm]
        # Consumer: permute the matching input dimension (dim 1).
        n_in = cons.weight.shape[1]
        if n_in == n_out:
            cols = perm
        elif isinstance(cons, nn.Linear) and n_in % n_out == 0:
            block = n_in // n_out  # flattened [C, H, W] -> channel-major blocks of H*W columns
            cols = (perm[:, None] * block + torch.arange(block, device=perm.device)).flatten()
        else:
            raise UserError(
                f"permute_hidden_units: {cons_name!r} has {n_in} inputs, incompatible with {n_out} outputs of {prod_name!r}"
            )
        cons.weight.copy_(cons.weight[:, cols])
        if new_masks is not None and cp + "weight" in new_masks:
            new_masks[cp + "weight"] = new_masks[cp + "weight"][:, cols]
    return out, new_masks


@torch.no_grad()
def recalibrate_batchnorm(module: nn.Module, X: torch.Tensor, *, batch_size: int = 256) -> nn.Module:
    """New module whose BatchNorm running statistics are re-estimated on ``X`` (cumulative average).

    Needed after :func:`weight_sum`, since running statistics do not add. Modules without
    BatchNorm come back unchanged (as a copy).
    """
    out = copy.deepcopy(module)
    bns = [m for m in out.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return out
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average over the calibration batches
    out.train()
    dev = next(out.parameters()).device
    for i in progress(range(0, len(X), batch_size), desc="bn recalibration"):
        out(X[i : i + batch_size].to(dev))
    for m, mom in zip(bns, saved, strict=True):
        m.momentum = mom
    out.eval()
    return out
