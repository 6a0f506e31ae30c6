"""A functional diffusion baseline (DDPM in function space, DDIM sampler) for functional rectified flow (P13).

The baseline the "straight and fast" claim of Zhang & Scott (ICLR 2026, arXiv 2509.10384) is measured against:
a variance-preserving diffusion whose noise is the same Gaussian measure on functions as FRF's (a GP prior,
as in the functional diffusion processes of Franzese et al., 2023, and Kerrigan et al.'s functional DDPM),
trained with the same neural operator, and sampled deterministically with DDIM (Song et al., 2021) so that
few network evaluations are meaningful.

**Time convention (differs from FRF): t = 0 is data, t = 1 is noise**, the diffusion convention.
Forward process ``x_t = sqrt(abar(t)) x_0 + sqrt(1 - abar(t)) eps`` with ``eps ~ N(0, C)`` (the GP prior) and
the cosine schedule of Nichol & Dhariwal (2021), in continuous time:

    abar(t) = cos^2(pi/2 (t + s)/(1 + s)) / cos^2(pi/2 s/(1 + s)),   s = 0.008,

so abar(0) = 1 and abar(1) = 0 (pure noise at t = 1). Parametrisations: "eps" (Ho et al., 2020), "x0" and
"v" (Salimans & Ho, 2022: ``v = sqrt(abar) eps - sqrt(1 - abar) x_0``, stable at abar -> 0, the usual choice
for few-step sampling). The loss is the grid-quadrature H-norm of the residual, as for FRF. DDIM (eta = 0)
from t to s < t: ``x_s = sqrt(abar(s)) x0_hat + sqrt(1 - abar(s)) eps_hat``.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from iclr26.core import UserError, make_generator
from iclr26.core.estimators import BaseEstimator, check_is_fitted
from iclr26.flows.core import adam_regression
from iclr26.flows.priors import FourierPrior, IIDNoise, MaternGP, uniform_grid

log = logging.getLogger(__name__)

__all__ = ["cosine_alpha_bar", "ddim_sample", "FunctionalDDPM"]

Noise = MaternGP | FourierPrior | IIDNoise
COSINE_S = 0.008


def cosine_alpha_bar(t: Tensor, *, s: float = COSINE_S) -> Tensor:
    """Cosine schedule ``abar(t) = cos^2(pi/2 (t+s)/(1+s)) / cos^2(pi/2 s/(1+s))`` for t in [0, 1], clamped to [0, 1]."""
    f = torch.cos(0.5 * math.pi * (t + s) / (1.0 + s)) ** 2
    f0 = math.cos(0.5 * math.pi * s / (1.0 + s)) ** 2
    return (f / f0).clamp(0.0, 1.0)


def _split(param: str, out: Tensor, x: Tensor, ab: Tensor) -> tuple[Tensor, Tensor]:
    """(x0_hat, eps_hat) from the network output under ``param`` at ``x_t`` with ``abar = ab`` (broadcast)."""
    a, b = ab.sqrt(), (1.0 - ab).sqrt()
    if param == "v":
        return a * x - b * out, b * x + a * out
    if param == "x0":
        return out, (x - a * out) / b.clamp_min(1e-4)
    # eps: x0 is singular as abar -> 0; clamp sqrt(abar) (the usual DDIM safeguard)
    return (x - b * out) / a.clamp_min(1e-4), out


@torch.no_grad()
def ddim_sample(
    denoise: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]],
    x1: Tensor,
    *,
    steps: int,
    t_start: float = 1.0,
    schedule: Callable[[Tensor], Tensor] = cosine_alpha_bar,
) -> Tensor:
    """Deterministic DDIM from noise ``x1`` at ``t_start`` down to t = 0 in ``steps`` uniform steps.

    ``denoise(x, t [B]) -> (x0_hat, eps_hat)``. Each step ``x_s = sqrt(abar(s)) x0_hat + sqrt(1-abar(s)) eps_hat``;
    the last (s = 0, abar = 1) returns ``x0_hat``, so one step is exactly the denoiser's estimate of E[x_0 | x_1].
    """
    if steps < 1:
        raise UserError(f"ddim_sample: steps must be >= 1, got {steps}")
    ts = torch.linspace(t_start, 0.0, steps + 1, dtype=torch.float64)
    x = x1
    for i in range(steps):
        t, s = float(ts[i]), float(ts[i + 1])
        x0_hat, eps_hat = denoise(x, torch.full((x.shape[0],), t, dtype=x.dtype, device=x.device))
        abs_ = float(schedule(torch.tensor(s, dtype=torch.float64)))
        x = math.sqrt(abs_) * x0_hat + math.sqrt(max(1.0 - abs_, 0.0)) * eps_hat
    return x


class FunctionalDDPM(BaseEstimator):
    """Variance-preserving diffusion on 1-D grids with function-space (GP) noise, DDIM sampling (sklearn-style).

    net: operator ``net(x [B, M], t [B]) -> [B, M]`` (e.g. :class:`FNO1d`), copied in ``fit``.
    noise: prior with ``sample(n, grid, generator)`` / ``sampler(grid)`` (the same objects as FRF's).
    param: "v" (default), "eps" or "x0": what the net predicts. Training draws t ~ U(t_eps, 1) and minimises
    the grid-mean squared error of the prediction (the H-norm by quadrature), Adam with cosine decay.
    Fitted: ``net_``, ``losses_``, ``grid_size_``.
    """

    PARAMS = ("v", "eps", "x0")

    def __init__(
        self,
        net: nn.Module,
        noise: Noise,
        *,
        param: str = "v",
        t_eps: float = 1e-3,
        steps: int = 1200,
        batch_size: int = 64,
        lr: float = 1e-3,
        lr_schedule: str = "cosine",
        seed: int = 0,
    ):
        self.net, self.noise, self.param, self.t_eps = net, noise, param, t_eps
        self.steps, self.batch_size, self.lr, self.lr_schedule, self.seed = steps, batch_size, lr, lr_schedule, seed

    def _validate(self) -> None:
        if self.param not in self.PARAMS:
            raise UserError(f"unknown param {self.param!r}; allowed: {', '.join(self.PARAMS)}")
        if not 0.0 <= self.t_eps < 1.0:
            raise UserError(f"t_eps must be in [0, 1), got {self.t_eps}")
        if self.steps < 0 or self.batch_size < 1:
            raise UserError(f"need steps >= 0 and batch_size >= 1, got {self.steps}, {self.batch_size}")
        if self.lr_schedule not in ("constant", "cosine"):
            raise UserError(f"lr_schedule must be 'constant' or 'cosine', got {self.lr_schedule!r}")

    def _target(self, x0: Tensor, eps: Tensor, ab: Tensor) -> Tensor:
        if self.param == "v":
            return ab.sqrt() * eps - (1.0 - ab).sqrt() * x0
        return eps if self.param == "eps" else x0

    def fit(self, x0: Tensor, *, grid: Tensor | None = None, desc: str = "ddpm") -> FunctionalDDPM:
        """Train on functions ``x0`` ``[N, M]`` (the data; t = 0 in the diffusion convention)."""
        self._validate()
        if x0.ndim != 2:
            raise UserError(f"fit: expected x0 of shape [N, M], got {tuple(x0.shape)}")
        n, m = x0.shape
        grid = uniform_grid(m) if grid is None else grid
        sample_noise = self.noise.sampler(grid)
        net = copy.deepcopy(self.net)
        gen = make_generator(self.seed)
        bs = min(self.batch_size, n)

        def batch_loss() -> Tensor:
            idx = torch.randint(0, n, (bs,), generator=gen)
            b0 = x0[idx]
            eps = sample_noise(bs, gen).to(b0)
            t = self.t_eps + (1.0 - self.t_eps) * torch.rand(bs, generator=gen, dtype=b0.dtype)
            ab = cosine_alpha_bar(t)[:, None]
            xt = ab.sqrt() * b0 + (1.0 - ab).sqrt() * eps
            return (net(xt, t) - self._target(b0, eps, ab)).pow(2).mean(dim=1).mean()

        losses = adam_regression(
            net, batch_loss, steps=self.steps, lr=self.lr, lr_schedule=self.lr_schedule, desc=desc
        )
        net.eval()
        self.net_, self.losses_, self.grid_size_ = net, losses, m
        return self

    def denoise(self, x: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
        """``(x0_hat, eps_hat)`` at ``x_t`` ``[B, M]``, ``t`` ``[B]`` (diffusion time, 1 = noise)."""
        check_is_fitted(self, "net_", "fit(x0)")
        ab = cosine_alpha_bar(t.double()).to(x.dtype).reshape(-1, 1)
        return _split(self.param, self.net_(x, t), x, ab)

    def noise_sample(self, n: int, m: int | None = None, *, seed: int = 0) -> Tensor:
        check_is_fitted(self, "net_", "fit(x0)")
        return self.noise.sample(n, uniform_grid(m or self.grid_size_), make_generator(seed))

    @torch.no_grad()
    def sample(
        self, n: int, m: int | None = None, *, steps: int = 50, seed: int = 0, chunk: int | None = 256
    ) -> Tensor:
        """``[n, m]`` functions by ``steps``-step DDIM (``steps`` network evaluations) from prior noise."""
        x1 = self.noise_sample(n, m, seed=seed)
        if chunk is None or n <= chunk:
            return ddim_sample(self.denoise, x1, steps=steps)
        return torch.cat([ddim_sample(self.denoise, xc, steps=steps) for xc in x1.split(chunk)])
