"""Unlearnable examples: MI-UE (ICLR 2026, arXiv 2603.03725), error-minimising noise, random noise.

*Why Do Unlearnable Examples Work: A Novel Perspective of Mutual Information.* The paper argues that
effective unlearnable examples lower the mutual information between features of clean and poisoned
data, and that shrinking the within-class covariance of poisoned features does so. MI-UE therefore
searches a per-sample perturbation delta (L-inf ball of radius eps, images kept in the valid range)
that *minimises* a supervised-contrastive loss on the source model's penultimate features

    L_MI = -(1/B) sum_i log( sum_{j: y_j = y_i} exp(s_ij / tau) / sum_j exp(s_ij / tau) ),
    s_ij = cos(f_i, f_j)   (j = i kept in both sums),

alternating one epoch of source-model training on x + delta with ``steps`` sign-gradient descent
steps per class-balanced batch. ``method="em"`` is the same loop with cross-entropy in place of
L_MI (error-minimising noise with matched compute, Huang et al. 2021); ``method="random"`` is
uniform noise in [-eps, eps]. Works for any image size and any ``nn.Module`` whose penultimate
features can be read (see :func:`iclr26.poisoning.training.features_and_logits`).
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.progress import progress
from iclr26.core.seed import make_generator
from iclr26.poisoning.training import (
    check_images,
    features_and_logits,
    logits_of,
    model_device,
    train_classifier,
)

log = logging.getLogger(__name__)

METHODS = ("mi-ue", "em", "random")


def mi_loss(features: torch.Tensor, labels: torch.Tensor, tau: float = 0.1, eps: float = 1e-8) -> torch.Tensor:
    """The MI-UE poison loss (supervised-contrastive form, j = i included in both sums).

    ``features`` [B, D], ``labels`` [B]. A sample alone in its class contributes log(e^{1/tau} / Z) with
    its own term only, so balanced batches matter (see :func:`balanced_batches`). ``eps`` guards the norm
    of all-zero ReLU features.
    """
    if features.ndim != 2 or labels.ndim != 1 or features.shape[0] != labels.shape[0]:
        raise UserError(
            f"mi_loss needs features [B, D] and labels [B]; got {tuple(features.shape)}, {tuple(labels.shape)}"
        )
    if not tau > 0:
        raise UserError(f"tau must be > 0; got {tau}")
    z = features / features.norm(dim=1, keepdim=True).clamp_min(eps)
    s = z @ z.T / tau  # [B, B]
    same = labels[:, None] == labels[None, :]
    log_num = torch.logsumexp(s.masked_fill(~same, float("-inf")), dim=1)
    log_den = torch.logsumexp(s, dim=1)
    return -(log_num - log_den).mean()


def balanced_batches(y: torch.Tensor, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Index batches in which every class is spread evenly (round-robin over shuffled classes).

    With balanced classes and ``batch_size`` a multiple of the class count, each batch holds exactly
    ``batch_size / K`` samples per class, so every sample has positives for :func:`mi_loss`.
    """
    ranks = torch.empty(len(y), dtype=torch.float64)
    for c in torch.unique(y).tolist():
        idx = torch.nonzero(y == c).flatten()
        idx = idx[torch.randperm(len(idx), generator=generator)]
        ranks[idx] = (torch.arange(len(idx), dtype=torch.float64) + 0.5) / len(idx)
    # ties between classes broken by a random class order, fixed per call
    order_noise = torch.rand(len(y), generator=generator, dtype=torch.float64) * 1e-9
    order = torch.argsort(ranks + order_noise)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def project(delta: torch.Tensor, X: torch.Tensor, eps: float, lo: float = 0.0, hi: float = 1.0) -> torch.Tensor:
    """Project ``delta`` onto {|delta| <= eps} ∩ {lo <= X + delta <= hi} (exact: only shrinks |delta|)."""
    delta = delta.clamp(-eps, eps)
    return torch.maximum(torch.minimum(delta, hi - X), lo - X)


def step_sizes(eps: float, epochs: int, alpha_start: float, alpha_end: float) -> list[float]:
    """Per-epoch PGD step sizes (absolute), linear from ``alpha_start * eps`` to ``alpha_end * eps``."""
    if epochs == 1:
        return [alpha_start * eps]
    return [eps * (alpha_start + (alpha_end - alpha_start) * e / (epochs - 1)) for e in range(epochs)]


@dataclass
class UnlearnableResult:
    """What :func:`make_unlearnable` returns.

    ``delta`` [N, C, H, W] per-sample perturbation (row i pairs with ``X[i]``); ``images`` = X + delta
    (inside [lo, hi]); ``model`` the trained source model (a copy; ``None`` for ``random``);
    ``history`` per generation epoch: poison loss before/after the PGD steps and the source model's
    accuracy on x + delta after them.
    """

    delta: torch.Tensor
    images: torch.Tensor
    method: str
    eps: float
    model: nn.Module | None = None
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def source_accuracy(self) -> float:
        """The source model's accuracy on x + delta at the end of generation (nan for ``random``)."""
        return self.history[-1]["source_acc"] if self.history else float("nan")


def poison_loss(
    method: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, tau: float = 0.1,
    feature_layer: str | None = None,
) -> torch.Tensor:
    """The objective that ``method`` *descends* on a batch: L_MI for ``mi-ue``, cross-entropy for ``em``."""
    if method == "em":
        return F.cross_entropy(logits_of(model, x), y)
    if method == "mi-ue":
        f, _ = features_and_logits(model, x, feature_layer)
        if f is None:
            raise UserError(
                "method='mi-ue' needs penultimate features: the source model must return (features, logits), "
                "have a `feature_layer` attribute, or you pass feature_layer='<submodule name>'"
            )
        return mi_loss(f, y, tau)
    raise UserError(f"poison loss for method {method!r}: allowed values are 'mi-ue', 'em'")


def make_unlearnable(
    X: torch.Tensor,
    y: torch.Tensor,
    source_model: nn.Module | None,
    method: str = "mi-ue",
    *,
    eps: float = 8 / 255,
    epochs: int = 10,
    steps: int = 10,
    batch_size: int = 500,
    alpha_start: float = 1 / 20,
    alpha_end: float = 1 / 10,
    tau: float = 0.1,
    lr: float = 1e-3,
    train_batch_size: int = 128,
    train_source: bool = True,
    feature_layer: str | None = None,
    clip: tuple[float, float] = (0.0, 1.0),
    seed: int = 0,
) -> UnlearnableResult:
    """Per-sample unlearnable perturbations for ``(X, y)``; ``X`` [N, C, H, W] inside ``clip``.

    ``method``: ``"mi-ue"`` (descend :func:`mi_loss` on the source model's features), ``"em"``
    (descend cross-entropy; the MI-UE loop with only the loss swapped) or ``"random"`` (uniform noise
    in [-eps, eps], ``source_model`` may be ``None``). Each of ``epochs`` generation epochs trains
    the source model (a deep copy; the input is never changed) one epoch with Adam(``lr``) on
    x + delta when ``train_source``, then, with the model in eval mode and frozen, runs ``steps``
    steps ``delta <- proj(delta - alpha_e * sign(grad))`` on every class-balanced batch of
    ``batch_size``. ``alpha_e`` rises linearly from ``alpha_start * eps`` to ``alpha_end * eps``.
    """
    if method not in METHODS:
        raise UserError(f"method {method!r}: allowed values are {', '.join(repr(m) for m in METHODS)}")
    check_images(X, y)
    lo, hi = float(clip[0]), float(clip[1])
    if not lo < hi:
        raise UserError(f"clip must be (low, high) with low < high; got {clip}")
    if float(X.min()) < lo or float(X.max()) > hi:
        raise UserError(f"X must lie inside clip {clip}; got values in [{float(X.min()):.4g}, {float(X.max()):.4g}]")
    if not (math.isfinite(eps) and eps > 0):
        raise UserError(f"eps must be a finite number > 0; got {eps}")
    for name, v in (("epochs", epochs), ("steps", steps), ("batch_size", batch_size),
                    ("train_batch_size", train_batch_size)):
        if int(v) != v or v < 1:
            raise UserError(f"{name} must be an integer >= 1; got {v}")
    if not (alpha_start > 0 and alpha_end > 0 and tau > 0 and lr > 0):
        raise UserError(f"alpha_start, alpha_end, tau and lr must be > 0; got {alpha_start}, {alpha_end}, {tau}, {lr}")
    X = X.detach()
    g = make_generator(seed)
    if method == "random":
        noise = ((torch.rand(X.shape, generator=g, dtype=X.dtype) * 2 - 1) * eps).to(X.device)
        delta = project(noise, X, eps, lo, hi)
        return UnlearnableResult(delta=delta, images=(X + delta).clamp(lo, hi), method=method, eps=eps)
    if not isinstance(source_model, nn.Module):
        raise UserError(f"method={method!r} needs a source_model (an nn.Module); got {type(source_model).__name__}")

    model = copy.deepcopy(source_model)
    dev = model_device(model)  # perturbations are optimised on the model's device, returned on X's
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    delta = torch.zeros_like(X)
    history: list[dict[str, float]] = []
    alphas = step_sizes(eps, epochs, alpha_start, alpha_end)
    for e in progress(range(epochs), desc=f"{method} generation"):
        if train_source:
            for p in model.parameters():
                p.requires_grad_(True)
            train_classifier(model, X + delta, y, epochs=1, batch_size=train_batch_size,
                             seed=seed * 7919 + e, optimizer=opt)
        # Frozen model in eval mode: BN statistics and weights stay fixed while delta moves.
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        before = after = 0.0
        for idx in balanced_batches(y.cpu(), batch_size, g):
            xb, yb = X[idx.to(X.device)].to(dev), y[idx.to(y.device)].to(dev)
            d = delta[idx.to(X.device)].clone().to(dev)
            for s in range(steps):
                d.requires_grad_(True)
                loss = poison_loss(method, model, xb + d, yb, tau=tau, feature_layer=feature_layer)
                (grad,) = torch.autograd.grad(loss, d)
                if s == 0:
                    before += float(loss.detach()) * len(idx)
                d = project(d.detach() - alphas[e] * grad.sign(), xb, eps, lo, hi)
            with torch.no_grad():
                after += float(poison_loss(method, model, xb + d, yb, tau=tau, feature_layer=feature_layer)) * len(idx)
            delta[idx.to(X.device)] = d.to(X.device)
        with torch.no_grad():
            preds = torch.cat([logits_of(model, (X + delta)[i : i + 1000]).argmax(-1).to(y.device)
                               for i in range(0, len(X), 1000)])
        history.append({
            "epoch": float(e + 1),
            "alpha": alphas[e],
            "loss_before": before / len(X),
            "loss_after": after / len(X),
            "source_acc": float((preds == y).float().mean()),
        })
        log.info("%s epoch %d: loss %.4f -> %.4f, source acc %.3f", method, e + 1, history[-1]["loss_before"],
                 history[-1]["loss_after"], history[-1]["source_acc"])
    for p in model.parameters():
        p.requires_grad_(True)
    images = (X + delta).clamp(lo, hi)
    return UnlearnableResult(delta=delta, images=images, method=method, eps=eps, model=model, history=history)
