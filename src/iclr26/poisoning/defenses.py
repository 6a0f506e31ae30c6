"""Defenses against unlearnable examples: input transforms of the training set, cutout, PGD adversarial training.

Preprocessing defenses (``gaussian_blur``, ``median_blur``, ``bit_depth``) map an image batch
``[N, C, H, W]`` to a new one of the same shape; the victim then trains on the transformed poisoned
set and is scored on clean test images. ``cutout`` and ``pgd_attack`` are per-batch training
transforms for :func:`iclr26.poisoning.training.train_classifier`; :func:`train_with_defense` runs
any of them by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError
from iclr26.poisoning.training import check_images, logits_of, train_classifier

DEFENSES = ("none", "blur", "median", "bits", "cutout", "adv")


def gaussian_blur(X: torch.Tensor, kernel_size: int = 3, sigma: float = 0.5) -> torch.Tensor:
    """Per-channel Gaussian blur with reflect padding (``kernel_size`` odd)."""
    check_images(X)
    if kernel_size < 1 or kernel_size % 2 == 0 or not sigma > 0:
        raise UserError(f"gaussian_blur needs an odd kernel_size >= 1 and sigma > 0; got {kernel_size}, {sigma}")
    r = kernel_size // 2
    t = torch.arange(-r, r + 1, dtype=X.dtype, device=X.device)
    k1 = torch.exp(-(t**2) / (2 * sigma**2))
    k1 = k1 / k1.sum()
    k = (k1[:, None] * k1[None, :]).expand(X.shape[1], 1, kernel_size, kernel_size)
    return F.conv2d(_pad(X, r), k, groups=X.shape[1])


def _pad(X: torch.Tensor, r: int) -> torch.Tensor:
    mode = "reflect" if min(X.shape[-2:]) > r else "replicate"
    return F.pad(X, (r, r, r, r), mode=mode) if r else X


def median_blur(X: torch.Tensor, kernel_size: int = 3) -> torch.Tensor:
    """Per-channel median filter over ``kernel_size`` x ``kernel_size`` windows (reflect padding)."""
    check_images(X)
    if kernel_size < 1 or kernel_size % 2 == 0:
        raise UserError(f"median_blur needs an odd kernel_size >= 1; got {kernel_size}")
    r = kernel_size // 2
    N, C, H, W = X.shape
    patches = F.unfold(_pad(X, r), kernel_size)  # [N, C*k*k, H*W]
    patches = patches.view(N, C, kernel_size * kernel_size, H * W)
    return patches.median(dim=2).values.view(N, C, H, W)


def bit_depth(X: torch.Tensor, bits: int = 3, clip: tuple[float, float] = (0.0, 1.0)) -> torch.Tensor:
    """Quantise pixel values in ``clip`` to ``2**bits`` evenly spaced levels."""
    check_images(X)
    if int(bits) != bits or not 1 <= bits <= 16:
        raise UserError(f"bits must be an integer in [1, 16]; got {bits}")
    lo, hi = clip
    levels = 2**bits - 1
    return torch.round((X.clamp(lo, hi) - lo) / (hi - lo) * levels) / levels * (hi - lo) + lo


def cutout(X: torch.Tensor, size: int, generator: torch.Generator) -> torch.Tensor:
    """Zero one ``size`` x ``size`` square per image at a random centre (may be cut at the border)."""
    check_images(X)
    if size < 1:
        raise UserError(f"cutout size must be >= 1; got {size}")
    N, _, H, W = X.shape
    cy = torch.randint(0, H, (N,), generator=generator)
    cx = torch.randint(0, W, (N,), generator=generator)
    rows, cols = torch.arange(H), torch.arange(W)  # the draws come from a CPU generator; the mask moves to X
    my = (rows[None] >= (cy - size // 2)[:, None]) & (rows[None] < (cy - size // 2 + size)[:, None])
    mx = (cols[None] >= (cx - size // 2)[:, None]) & (cols[None] < (cx - size // 2 + size)[:, None])
    keep = ~(my[:, :, None] & mx[:, None, :])  # [N, H, W]
    return X * keep[:, None].to(device=X.device, dtype=X.dtype)


def pgd_attack(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, eps: float, steps: int, step_size: float,
    generator: torch.Generator | None = None, clip: tuple[float, float] = (0.0, 1.0),
) -> torch.Tensor:
    """Error-*maximising* L-inf PGD from a uniform random start; returns adversarial images (detached).

    The model is put in eval mode for the attack and its parameters get no gradient.
    """
    if not (eps > 0 and step_size > 0) or steps < 1:
        raise UserError(f"pgd_attack needs eps > 0, step_size > 0, steps >= 1; got {eps}, {step_size}, {steps}")
    lo, hi = clip
    was = model.training
    model.eval()
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        d = ((torch.rand(x.shape, generator=generator, dtype=x.dtype) * 2 - 1) * eps).to(x.device)
        d = torch.maximum(torch.minimum(d, hi - x), lo - x)
        for _ in range(steps):
            d.requires_grad_(True)
            logits = logits_of(model, x + d)
            (grad,) = torch.autograd.grad(F.cross_entropy(logits, y.to(logits.device)), d)
            d = (d.detach() + step_size * grad.sign()).clamp(-eps, eps)
            d = torch.maximum(torch.minimum(d, hi - x), lo - x)
        return (x + d).detach()
    finally:
        for p, f in zip(model.parameters(), flags, strict=True):
            p.requires_grad_(f)
        model.train(was)


def preprocess(X: torch.Tensor, defense: str, *, sigma: float = 0.5, bits: int = 3, kernel_size: int = 3
               ) -> torch.Tensor:
    """Apply a preprocessing defense by name (``none``, ``blur``, ``median``, ``bits``; others pass X through)."""
    if defense not in DEFENSES:
        raise UserError(f"defense {defense!r}: allowed values are {', '.join(DEFENSES)}")
    if defense == "blur":
        return gaussian_blur(X, kernel_size, sigma)
    if defense == "median":
        return median_blur(X, kernel_size)
    if defense == "bits":
        return bit_depth(X, bits)
    return X


def train_with_defense(
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    defense: str = "none",
    *,
    epochs: int,
    lr: float = 1e-3,
    batch_size: int = 128,
    seed: int = 0,
    sigma: float = 0.5,
    bits: int = 3,
    kernel_size: int = 3,
    cutout_size: int = 4,
    adv_eps: float = 4 / 255,
    adv_steps: int = 5,
    adv_step_size: float | None = None,
) -> nn.Module:
    """Train ``model`` (in place) on ``(X, y)`` under ``defense``; returns it.

    ``blur``/``median``/``bits`` transform the training set once; ``cutout`` masks every batch;
    ``adv`` trains on PGD(``adv_steps``, step ``adv_step_size``, default eps/4) examples of every batch.
    """
    if defense not in DEFENSES:
        raise UserError(f"defense {defense!r}: allowed values are {', '.join(DEFENSES)}")
    check_images(X, y)
    transform: Callable | None = None
    Xt = preprocess(X, defense, sigma=sigma, bits=bits, kernel_size=kernel_size)
    if defense == "cutout":
        transform = lambda xb, yb, g: cutout(xb, cutout_size, g)  # noqa: E731
    elif defense == "adv":
        step = adv_step_size if adv_step_size is not None else adv_eps / 4
        if not (math.isfinite(adv_eps) and adv_eps > 0):
            raise UserError(f"adv_eps must be > 0; got {adv_eps}")
        transform = lambda xb, yb, g: pgd_attack(  # noqa: E731
            model, xb, yb, eps=adv_eps, steps=adv_steps, step_size=step, generator=g
        )
    return train_classifier(model, Xt, y, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, transform=transform)
