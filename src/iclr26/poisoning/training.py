"""Small, seeded training and evaluation helpers shared by the poisoning methods and defenses.

``features_and_logits`` is the one place that knows how to read penultimate features from a model:
a model that returns ``(features, logits)``, or any ``nn.Module`` plus the dotted name of the
submodule whose output is the feature (a forward hook that always removes itself). Models may also
carry a ``feature_layer`` attribute naming that submodule (the CNNs of :mod:`iclr26.poisoning.models`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.seed import make_generator

log = logging.getLogger(__name__)

BatchTransform = Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]


def check_images(X: torch.Tensor, y: torch.Tensor | None = None, *, name: str = "X") -> None:
    """One-line errors for anything that is not a float image batch ``[N, C, H, W]`` (with labels ``[N]``)."""
    if not isinstance(X, torch.Tensor):
        raise UserError(f"{name} must be a torch.Tensor [N, C, H, W]; got {type(X).__name__}")
    if X.ndim != 4:
        raise UserError(f"{name} must be an image batch [N, C, H, W]; got shape {tuple(X.shape)}")
    if not X.is_floating_point():
        raise UserError(f"{name} must be a float tensor (pixel values in the valid range); got {X.dtype}")
    if X.shape[0] == 0:
        raise UserError(f"{name} is empty (shape {tuple(X.shape)})")
    if y is not None:
        if not isinstance(y, torch.Tensor) or y.ndim != 1 or y.shape[0] != X.shape[0]:
            shape = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise UserError(f"y must be integer labels [N] with N = {X.shape[0]} (the images); got {shape}")
        if y.is_floating_point() or y.dtype == torch.bool:
            raise UserError(f"y must hold integer class labels; got dtype {y.dtype}")
        if y.device.type != "meta" and int(y.min()) < 0:  # a value check needs data (meta tensors have none)
            raise UserError(f"y must hold class labels >= 0; got min {int(y.min())}")


def _get_submodule(model: nn.Module, name: str) -> nn.Module:
    try:
        return model.get_submodule(name)
    except AttributeError:
        names = [n for n, _ in model.named_modules() if n][:12]
        raise UserError(f"feature_layer {name!r} is not a submodule of the model; some names: {names}") from None


def features_and_logits(
    model: nn.Module, x: torch.Tensor, feature_layer: str | None = None
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """``(features [B, D], logits [B, K])`` of ``model`` on ``x``.

    Features come from ``feature_layer`` (dotted submodule name; default ``model.feature_layer`` if
    the model has one) through a forward hook, or from a model that returns a ``(features, logits)``
    pair. ``features`` is ``None`` when neither is available (fine for cross-entropy objectives).
    """
    layer = feature_layer if feature_layer is not None else getattr(model, "feature_layer", None)
    if layer is None:
        out = model(x)
        if isinstance(out, (tuple, list)) and len(out) == 2:
            return out[0].flatten(1), out[1]
        return None, out
    store: dict[str, torch.Tensor] = {}
    handle = _get_submodule(model, layer).register_forward_hook(lambda m, i, o: store.__setitem__("f", o))
    try:
        out = model(x)
    finally:
        handle.remove()
    logits = out[1] if isinstance(out, (tuple, list)) else out
    return store["f"].flatten(1), logits


def model_device(model: nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (CPU for a parameter-free model): batches move there."""
    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def logits_of(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(x.to(model_device(model)))
    return out[1] if isinstance(out, (tuple, list)) else out


@torch.no_grad()
def predict(model: nn.Module, X: torch.Tensor, batch_size: int = 1000) -> torch.Tensor:
    """Argmax predictions ``[N]`` in eval mode (the model's mode is restored)."""
    was = model.training
    model.eval()
    try:
        return torch.cat([logits_of(model, X[i : i + batch_size]).argmax(-1).to(X.device)
                          for i in range(0, len(X), batch_size)])
    finally:
        model.train(was)


def accuracy(model: nn.Module, X: torch.Tensor, y: torch.Tensor, batch_size: int = 1000) -> float:
    """Top-1 accuracy of ``model`` on ``(X, y)`` (any devices: batches run on the model's)."""
    return float((predict(model, X, batch_size).to(y.device) == y).float().mean())


@torch.no_grad()
def extract_features(
    model: nn.Module, X: torch.Tensor, feature_layer: str | None = None, batch_size: int = 1000
) -> torch.Tensor:
    """Penultimate features ``[N, D]`` (eval mode; see :func:`features_and_logits`)."""
    was = model.training
    model.eval()
    try:
        parts = []
        for i in range(0, len(X), batch_size):
            f, _ = features_and_logits(model, X[i : i + batch_size].to(model_device(model)), feature_layer)
            if f is None:
                raise UserError(
                    "the model exposes no features: return (features, logits) from forward or pass feature_layer"
                )
            parts.append(f.to(X.device))
        return torch.cat(parts)
    finally:
        model.train(was)


def train_classifier(
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    lr: float = 1e-3,
    batch_size: int = 128,
    seed: int = 0,
    transform: BatchTransform | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> nn.Module:
    """Train ``model`` in place with Adam + cross-entropy on shuffled mini-batches; returns it.

    ``transform(xb, yb, generator) -> xb'`` is applied to every batch (augmentation, adversarial
    examples). Shuffles and the transform draw from one generator seeded by ``seed``.
    """
    check_images(X, y)
    if epochs < 0 or batch_size < 1:
        raise UserError(f"epochs must be >= 0 and batch_size >= 1; got {epochs}, {batch_size}")
    opt = optimizer if optimizer is not None else torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    g = make_generator(seed)
    dev = model_device(model)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(X), generator=g)
        for i in range(0, len(X), batch_size):
            idx = perm[i : i + batch_size]
            xb, yb = X[idx.to(X.device)].to(dev), y[idx.to(y.device)].to(dev)
            if transform is not None:
                xb = transform(xb, yb, g)
                model.train()
            loss = F.cross_entropy(logits_of(model, xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model
