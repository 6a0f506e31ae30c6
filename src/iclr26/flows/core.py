"""Flow-matching core: straight / OT interpolation paths, velocity regression, ODE solvers.

Shared by functional rectified flow (P13, Zhang & Scott, ICLR 2026, arXiv 2509.10384) and FDFI (P16).
Convention everywhere: t = 0 is noise (x0), t = 1 is data (x1). A velocity model is called as
``model(x, t)`` with ``x`` of shape ``[B, ...]`` and ``t`` of shape ``[B]``. Rectified flow
(Liu et al., 2023) regresses ``v(x_t, t)`` on ``x1 - x0`` along ``x_t = (1-t) x0 + t x1``; the
FFM / OT-CFM path (Lipman et al., 2023; Kerrigan et al., 2024) keeps a residual ``sigma_min`` of noise
at t = 1. Sampling integrates the learned ODE from t = 0 to 1; encoding integrates backwards.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from iclr26.core import UserError, make_generator, progress

log = logging.getLogger(__name__)

__all__ = [
    "ODE_METHODS",
    "interpolate",
    "fit_velocity",
    "odeint",
    "sample",
    "encode",
    "reflow_pairs",
    "MLPVelocity",
    "timestep_embedding",
]

ODE_METHODS = ("euler", "midpoint", "rk4", "dopri5")


def _bcast(t: Tensor, like: Tensor) -> Tensor:
    """[B] -> [B, 1, ..., 1] so that it broadcasts over the trailing dims of ``like``."""
    t = torch.as_tensor(t, dtype=like.dtype, device=like.device)
    if t.ndim == 0:
        return t
    return t.reshape(t.shape[0], *([1] * (like.ndim - 1)))


def interpolate(x0: Tensor, x1: Tensor, t: Tensor, *, sigma_min: float = 0.0) -> tuple[Tensor, Tensor]:
    """Point on the conditional path and its regression target.

    ``sigma_min = 0``: straight path ``x_t = (1-t) x0 + t x1``, target ``x1 - x0`` (rectified flow).
    ``sigma_min > 0``: FFM / OT path ``x_t = (1 - (1-sigma_min) t) x0 + t x1``, target ``x1 - (1-sigma_min) x0``.
    ``t`` is a scalar or ``[B]``; it is broadcast over the trailing dims.
    """
    if x0.shape != x1.shape:
        raise UserError(f"interpolate: x0 shape {tuple(x0.shape)} != x1 shape {tuple(x1.shape)}")
    if not 0.0 <= sigma_min < 1.0:
        raise UserError(f"interpolate: sigma_min must be in [0, 1), got {sigma_min}")
    tb = _bcast(t, x1)
    a = 1.0 - sigma_min
    xt = (1.0 - a * tb) * x0 + tb * x1
    target = x1 - a * x0
    return xt, target


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def adam_regression(
    model: nn.Module,
    batch_loss: Callable[[], Tensor],
    *,
    steps: int,
    lr: float,
    lr_schedule: str = "constant",
    desc: str = "train",
) -> list[float]:
    """The training loop shared by the flow and diffusion regressions: ``steps`` Adam steps on
    ``batch_loss()`` (which draws its own batch), constant or cosine-decayed learning rate; ``model`` is
    left in train mode. Returns the per-step losses."""
    if lr_schedule not in ("constant", "cosine"):
        raise UserError(f"lr_schedule must be 'constant' or 'cosine', got {lr_schedule!r}")
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    sched = (
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps, 1)) if lr_schedule == "cosine" else None
    )
    model.train()
    losses: list[float] = []
    for _ in progress(range(steps), desc=desc, total=steps):
        loss = batch_loss()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(float(loss.detach()))
    return losses


def fit_velocity(
    model: nn.Module,
    x1: Tensor,
    *,
    x0: Tensor | None = None,
    sample_noise: Callable[[int, torch.Generator], Tensor] | None = None,
    steps: int = 1000,
    batch_size: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
    sigma_min: float = 0.0,
    time_sampler: Callable[[int, torch.Generator], Tensor] | None = None,
    weight_fn: Callable[[Tensor], Tensor] | None = None,
    desc: str = "flow",
    lr_schedule: str = "constant",
    loss_fn: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> list[float]:
    """Train ``model`` in place by velocity regression with Adam; returns the per-step losses.

    x1: data ``[N, ...]`` (any device; batches are moved to the model's device).
    x0: optional fixed couplings ``[N, ...]`` (reflow pairs), indexed with the same indices as x1;
        otherwise noise comes from ``sample_noise(n, generator)`` (default: standard normal shaped like x1).
    time_sampler(n, generator) -> ``[n]`` times in [0, 1] (default uniform).
    weight_fn(t) -> ``[n]`` per-sample loss weights (e.g. a time density; default 1).
    The per-sample loss is the grid-mean squared error, i.e. ``||v - target||^2_H`` with quadrature
    weights 1/M on a uniform grid, so losses are comparable across resolutions.
    lr_schedule: "constant" or "cosine" (cosine decay to 0 over ``steps``).
    loss_fn(pred, target) -> ``[n]`` per-sample loss replacing the grid-mean squared error (e.g. a
        Fourier-weighted functional norm); weights from ``weight_fn`` multiply it.
    """
    if x0 is not None and x0.shape != x1.shape:
        raise UserError(f"fit_velocity: x0 shape {tuple(x0.shape)} != x1 shape {tuple(x1.shape)}")
    if steps < 0 or batch_size < 1:
        raise UserError(f"fit_velocity: need steps >= 0 and batch_size >= 1, got {steps}, {batch_size}")
    if lr_schedule not in ("constant", "cosine"):
        raise UserError(f"fit_velocity: lr_schedule must be 'constant' or 'cosine', got {lr_schedule!r}")
    device = _model_device(model)
    gen = make_generator(seed)  # CPU generator: indices, noise, times (deterministic across devices)
    n = x1.shape[0]
    bs = min(batch_size, n)

    def batch_loss() -> Tensor:
        idx = torch.randint(0, n, (bs,), generator=gen)
        b1 = x1[idx].to(device)
        if x0 is not None:
            b0 = x0[idx].to(device)
        elif sample_noise is not None:
            b0 = sample_noise(bs, gen).to(device=device, dtype=b1.dtype)
            if b0.shape != b1.shape:
                raise UserError(
                    f"fit_velocity: sample_noise gave {tuple(b0.shape)}, expected {tuple(b1.shape)}"
                )
        else:
            b0 = torch.randn(b1.shape, generator=gen, dtype=b1.dtype).to(device)
        t = time_sampler(bs, gen) if time_sampler is not None else torch.rand(bs, generator=gen)
        t = t.to(device=device, dtype=b1.dtype)
        xt, target = interpolate(b0, b1, t, sigma_min=sigma_min)
        pred = model(xt, t)
        if loss_fn is not None:
            per = loss_fn(pred, target)  # [bs]
        else:
            per = (pred - target).pow(2).reshape(bs, -1).mean(dim=1)  # [bs]
        if weight_fn is not None:
            per = per * weight_fn(t).to(per)
        return per.mean()

    losses = adam_regression(model, batch_loss, steps=steps, lr=lr, lr_schedule=lr_schedule, desc=desc)
    log.debug("%s: final loss %.4g", desc, losses[-1] if losses else float("nan"))
    return losses


def _call(velocity: Callable[[Tensor, Tensor], Tensor], x: Tensor, t: float) -> Tensor:
    return velocity(x, torch.full((x.shape[0],), float(t), dtype=x.dtype, device=x.device))


# Dormand–Prince 5(4) tableau (FSAL).
_DP_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_DP_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_DP_B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_DP_B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)


def _dopri5(
    velocity, x: Tensor, t0: float, t1: float, atol: float, rtol: float, max_steps: int = 100_000
) -> Tensor:
    span = t1 - t0
    direction = 1.0 if span > 0 else -1.0
    t = t0
    h = 0.1 * span
    k1 = _call(velocity, x, t)
    # initial step from the field scale (Hairer's heuristic, simplified)
    scale = atol + rtol * x.detach().abs()
    d0 = float((x.detach() / scale).pow(2).mean().sqrt())
    d1 = float((k1.detach() / scale).pow(2).mean().sqrt())
    if d0 > 1e-5 and d1 > 1e-5:
        h = direction * min(abs(span), 0.01 * d0 / d1)
    n_steps = 0
    while direction * (t1 - t) > 1e-12:
        if n_steps >= max_steps:
            raise RuntimeError(f"dopri5: exceeded {max_steps} steps (atol={atol}, rtol={rtol})")
        if direction * (t + h - t1) > 0:
            h = t1 - t
        ks = [k1]
        for i in range(1, 7):
            xi = x + h * sum(a * k for a, k in zip(_DP_A[i], ks, strict=False) if a != 0.0)
            ks.append(_call(velocity, xi, t + _DP_C[i] * h))
        x5 = x + h * sum(b * k for b, k in zip(_DP_B5, ks, strict=True) if b != 0.0)
        x4 = x + h * sum(b * k for b, k in zip(_DP_B4, ks, strict=True) if b != 0.0)
        sc = atol + rtol * torch.maximum(x.abs(), x5.abs())
        err = float(((x5 - x4) / sc).detach().pow(2).mean().sqrt())
        n_steps += 1
        if err <= 1.0 or abs(h) < 1e-10:
            t = t + h
            x = x5
            k1 = ks[6]  # FSAL: last stage is the derivative at the accepted point
        factor = 5.0 if err == 0.0 else min(5.0, max(0.2, 0.9 * err ** (-1 / 5)))
        h = h * factor
    return x


def odeint(
    velocity: Callable[[Tensor, Tensor], Tensor],
    x: Tensor,
    *,
    t0: float = 0.0,
    t1: float = 1.0,
    steps: int = 100,
    method: str = "euler",
    atol: float = 1e-5,
    rtol: float = 1e-5,
) -> Tensor:
    """Integrate ``dx/dt = velocity(x, t)`` from ``t0`` to ``t1`` (backwards when ``t1 < t0``).

    Fixed-step methods (``euler``, ``midpoint``, ``rk4``) use ``steps`` uniform steps; ``dopri5`` is an
    adaptive Dormand–Prince 5(4) with tolerances ``atol``/``rtol`` (own implementation, no torchdiffeq).
    ``velocity`` is called with ``t`` of shape ``[B]``. Differentiable: no ``torch.no_grad`` inside.
    """
    if method not in ODE_METHODS:
        raise UserError(f"odeint: unknown method {method!r}; allowed: {', '.join(ODE_METHODS)}")
    if method != "dopri5" and steps < 1:
        raise UserError(f"odeint: steps must be >= 1, got {steps}")
    if t0 == t1:
        return x
    if method == "dopri5":
        return _dopri5(velocity, x, float(t0), float(t1), atol, rtol)
    h = (t1 - t0) / steps
    for i in range(steps):
        t = t0 + i * h
        if method == "euler":
            x = x + h * _call(velocity, x, t)
        elif method == "midpoint":
            k1 = _call(velocity, x, t)
            x = x + h * _call(velocity, x + 0.5 * h * k1, t + 0.5 * h)
        else:  # rk4
            k1 = _call(velocity, x, t)
            k2 = _call(velocity, x + 0.5 * h * k1, t + 0.5 * h)
            k3 = _call(velocity, x + 0.5 * h * k2, t + 0.5 * h)
            k4 = _call(velocity, x + h * k3, t + h)
            x = x + (h / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)
    return x


def sample(
    model: Callable[[Tensor, Tensor], Tensor], x0: Tensor, *, steps: int = 100, method: str = "euler"
) -> Tensor:
    """Noise -> data: integrate the flow from t = 0 to t = 1 (differentiable; wrap in no_grad if wanted)."""
    return odeint(model, x0, t0=0.0, t1=1.0, steps=steps, method=method)


def encode(
    model: Callable[[Tensor, Tensor], Tensor], x1: Tensor, *, steps: int = 100, method: str = "rk4"
) -> Tensor:
    """Data -> noise: integrate the flow backwards from t = 1 to t = 0."""
    return odeint(model, x1, t0=1.0, t1=0.0, steps=steps, method=method)


@torch.no_grad()
def reflow_pairs(
    model: nn.Module, x0: Tensor, *, steps: int = 100, method: str = "rk4"
) -> tuple[Tensor, Tensor]:
    """Couplings ``(x0, sample(model, x0))`` for one reflow round, made in eval mode under no_grad.

    The model's train/eval mode is restored afterwards; ``x0`` is not modified.
    """
    was_training = model.training
    model.eval()
    try:
        x1 = sample(model, x0, steps=steps, method=method)
    finally:
        model.train(was_training)
    return x0.clone(), x1.detach()


def timestep_embedding(t: Tensor, dim: int, *, max_period: float = 100.0, scale: float = 100.0) -> Tensor:
    """Sinusoidal embedding of ``t`` ``[B]`` in [0, 1] -> ``[B, dim]`` (first half cos, second half sin).

    Angular frequencies run geometrically from ``scale`` down to ``scale / max_period``: a modest top frequency
    keeps the field smooth in t, which matters when few-step samplers query it at t = 0 only.
    """
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(half, dtype=t.dtype, device=t.device) / max(half, 1)
    )
    args = (scale * t)[:, None] * freqs[None]  # [B, half]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, t[:, None]], dim=-1)
    return emb


class MLPVelocity(nn.Module):
    """MLP velocity field ``v(x [B, dim], t [B]) -> [B, dim]`` with a sinusoidal time embedding."""

    def __init__(self, dim: int, hidden: int = 128, depth: int = 3, time_dim: int = 16):
        super().__init__()
        if dim < 1 or hidden < 1 or depth < 1 or time_dim < 1:
            raise UserError("MLPVelocity: dim, hidden, depth and time_dim must all be >= 1")
        self.dim, self.time_dim = dim, time_dim
        layers: list[nn.Module] = []
        d_in = dim + time_dim
        for _ in range(depth):
            layers += [nn.Linear(d_in, hidden), nn.SiLU()]
            d_in = hidden
        layers.append(nn.Linear(d_in, dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise UserError(f"MLPVelocity: expected x of shape [B, {self.dim}], got {tuple(x.shape)}")
        t = torch.as_tensor(t, dtype=x.dtype, device=x.device).reshape(-1).expand(x.shape[0])
        return self.net(torch.cat([x, timestep_embedding(t, self.time_dim)], dim=-1))
