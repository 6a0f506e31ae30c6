"""Functional rectified flow (FRF): Zhang & Scott, "Flow Straight and Fast in Hilbert Space: Functional
Rectified Flow", ICLR 2026 (arXiv 2509.10384, OpenReview GWK8fm1r9y).

Rectified flow in a separable Hilbert space H = L^2(D): noise X0 ~ N(0, C) with C trace-class (a GP prior),
data X1, straight interpolation X_t = t X1 + (1-t) X0 and a velocity v(t, x) = E[X1 - X0 | X_t = x] learned
by minimising E ||v_theta(t, X_t) - (X1 - X0)||_H^2, with the H-norm computed by quadrature on the grid (or
with per-frequency weights in Fourier space). Because the noise is a measure on functions and the velocity
net is a neural operator, a model trained on one grid samples on another. Functional flow matching (FFM,
Kerrigan et al. 2024) is the sigma_min path of the same family; reflow straightens the learned flow.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from functools import partial

import numpy as np
import torch
from torch import Tensor, nn

from iclr26.core import UserError, make_generator
from iclr26.core.estimators import BaseEstimator, check_is_fitted
from iclr26.flows.core import fit_velocity, odeint
from iclr26.flows.priors import FourierPrior, IIDNoise, LogitNormal, MaternGP, uniform_grid

log = logging.getLogger(__name__)

__all__ = [
    "functional_sq_norm",
    "functional_loss",
    "X1Prediction",
    "FunctionalRectifiedFlow",
    "straightness",
    "gaussian_rf_velocity",
    "relative_cov_error",
    "mean_power_spectrum",
    "spectrum_mse",
    "value_density_mse",
    "mmd_rbf",
    "bimodal_functions",
]

Noise = MaternGP | FourierPrior | IIDNoise


def functional_sq_norm(f: Tensor, *, freq_weights: Tensor | None = None) -> Tensor:
    """``||f||_H^2`` per sample for ``f`` ``[B, M]`` on a uniform grid -> ``[B]``.

    Without weights: quadrature ``sum_i (1/M) f(x_i)^2``. With ``freq_weights`` ``[M//2 + 1]``: the
    Fourier-space form ``sum_k w_k |c_k|^2`` over all integer wavenumbers (±k share w_|k|), with
    ``c = rfft(f, norm="forward")``; all-ones weights give back the quadrature norm (Parseval).
    """
    if freq_weights is None:
        return f.pow(2).mean(dim=-1)
    m = f.shape[-1]
    c2 = torch.fft.rfft(f, norm="forward").abs().pow(2)  # [B, m//2+1]
    if freq_weights.shape[-1] != c2.shape[-1]:
        raise UserError(
            f"freq_weights must have M//2+1 = {c2.shape[-1]} entries, got {freq_weights.shape[-1]}"
        )
    mult = torch.full((c2.shape[-1],), 2.0, dtype=c2.dtype, device=c2.device)  # +k and -k
    mult[0] = 1.0
    if m % 2 == 0:
        mult[-1] = 1.0  # Nyquist appears once
    return (c2 * mult * freq_weights.to(c2)).sum(dim=-1)


def functional_loss(pred: Tensor, target: Tensor, *, freq_weights: Tensor | None = None) -> Tensor:
    """Per-sample FRF loss ``||pred - target||_H^2`` -> ``[B]`` (see :func:`functional_sq_norm`)."""
    return functional_sq_norm(pred - target, freq_weights=freq_weights)


class X1Prediction(nn.Module):
    """Velocity from an x1-predicting net (the official code's default): ``v = (net(x, t) - x) / (1 - t + eps)``.

    Trained through this wrapper with loss weight ``(1 - t + eps)^2`` the velocity loss equals
    ``||net(x_t, t) - (x1 + eps (x1 - x0))||^2``: an x1-prediction MSE whose minimiser gives back exactly
    ``E[x1 - x0 | x_t]`` through the wrapper, and the eps keeps the sampler finite at t = 1.
    """

    def __init__(self, net: nn.Module, eps: float = 1e-3):
        super().__init__()
        if eps <= 0:
            raise UserError(f"X1Prediction: eps must be > 0, got {eps}")
        self.net, self.eps = net, float(eps)

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        tb = t.reshape(-1, *([1] * (x.ndim - 1)))
        return (self.net(x, t) - x) / (1.0 - tb + self.eps)


class FunctionalRectifiedFlow(BaseEstimator):
    """Functional rectified flow / functional flow matching estimator on 1-D grids (sklearn-style).

    net: velocity (or x1-predicting) operator ``net(x [B, M], t [B]) -> [B, M]``, e.g. :class:`FNO1d`;
        copied in ``fit`` (the argument is never trained in place).
    noise: function-space prior with ``sample(n, grid, generator)`` (MaternGP, FourierPrior, IIDNoise).
    param: "velocity" (regress x1 - x0) or "x1" (x1-prediction, see :class:`X1Prediction`).
    sigma_min: 0 for rectified flow; > 0 gives the FFM / OT path (Kerrigan et al. use 1e-4).
    time_density: optional :class:`LogitNormal`; ``time_mode="weight"`` multiplies the loss at t ~ U(0, 1 - t_eps)
        by its pdf (the official code), ``"sample"`` draws t from it instead.
    freq_weights: optional per-wavenumber weights of the H-norm (needs a fixed training grid size).
    Fitted attributes: ``net_`` (trained net), ``model_`` (velocity module), ``losses_``, ``grid_size_``.
    """

    PARAMS = ("velocity", "x1")
    TIME_MODES = ("weight", "sample")

    def __init__(
        self,
        net: nn.Module,
        noise: Noise,
        *,
        param: str = "velocity",
        sigma_min: float = 0.0,
        time_density: LogitNormal | None = None,
        time_mode: str = "weight",
        t_eps: float = 1e-3,
        x1_eps: float = 1e-3,
        freq_weights: Tensor | None = None,
        steps: int = 1200,
        batch_size: int = 64,
        lr: float = 1e-3,
        lr_schedule: str = "cosine",
        seed: int = 0,
    ):
        self.net, self.noise, self.param, self.sigma_min = net, noise, param, sigma_min
        self.time_density, self.time_mode, self.t_eps, self.x1_eps = time_density, time_mode, t_eps, x1_eps
        self.freq_weights, self.steps, self.batch_size, self.lr = freq_weights, steps, batch_size, lr
        self.lr_schedule, self.seed = lr_schedule, seed

    def _validate(self) -> None:
        if self.param not in self.PARAMS:
            raise UserError(f"unknown param {self.param!r}; allowed: {', '.join(self.PARAMS)}")
        if self.time_mode not in self.TIME_MODES:
            raise UserError(f"unknown time_mode {self.time_mode!r}; allowed: {', '.join(self.TIME_MODES)}")
        if self.param == "x1" and self.sigma_min != 0.0:
            raise UserError("param='x1' is defined for the straight path only (sigma_min=0)")
        if not 0.0 <= self.t_eps < 1.0:
            raise UserError(f"t_eps must be in [0, 1), got {self.t_eps}")

    def _time_sampler(self) -> Callable[[int, torch.Generator], Tensor]:
        hi = 1.0 - self.t_eps
        if self.time_density is not None and self.time_mode == "sample":
            return lambda n, g: self.time_density.sample(n, g).clamp(0.0, hi)
        return lambda n, g: hi * torch.rand(n, generator=g)

    def _weight_fn(self) -> Callable[[Tensor], Tensor] | None:
        dens = self.time_density if self.time_mode == "weight" else None
        x1 = self.param == "x1"
        if dens is None and not x1:
            return None

        def w(t: Tensor) -> Tensor:
            out = dens.pdf(t) if dens is not None else torch.ones_like(t)
            if x1:
                out = out * (1.0 - t + self.x1_eps) ** 2
            return out

        return w

    def fit(
        self, x1: Tensor, *, x0: Tensor | None = None, grid: Tensor | None = None, desc: str = "frf"
    ) -> FunctionalRectifiedFlow:
        """Train on functions ``x1`` ``[N, M]`` (independent noise coupling, or fixed pairs ``x0`` for reflow)."""
        self._validate()
        if x1.ndim != 2:
            raise UserError(f"fit: expected x1 of shape [N, M], got {tuple(x1.shape)}")
        m = x1.shape[1]
        grid = uniform_grid(m) if grid is None else grid
        net = copy.deepcopy(self.net)
        model = X1Prediction(net, self.x1_eps) if self.param == "x1" else net
        loss_fn = (
            None if self.freq_weights is None else partial(functional_loss, freq_weights=self.freq_weights)
        )
        self.losses_ = fit_velocity(
            model,
            x1,
            x0=x0,
            sample_noise=None if x0 is not None else self.noise.sampler(grid),
            steps=self.steps,
            batch_size=self.batch_size,
            lr=self.lr,
            seed=self.seed,
            sigma_min=self.sigma_min,
            time_sampler=self._time_sampler(),
            weight_fn=self._weight_fn(),
            desc=desc,
            lr_schedule=self.lr_schedule,
            loss_fn=loss_fn,
        )
        model.eval()
        self.net_, self.model_, self.grid_size_ = net, model, m
        return self

    def _check_fitted(self) -> None:
        check_is_fitted(self, "model_", "fit(x1)")

    def velocity(self, x: Tensor, t: Tensor) -> Tensor:
        """Learned velocity ``[B, M]`` at ``x`` ``[B, M]`` and ``t`` ``[B]`` (any grid size)."""
        self._check_fitted()
        return self.model_(x, t)

    def noise_sample(self, n: int, m: int | None = None, *, seed: int = 0) -> Tensor:
        """``n`` prior draws on the uniform grid of ``m`` points (default: the training grid)."""
        self._check_fitted()
        return self.noise.sample(n, uniform_grid(m or self.grid_size_), make_generator(seed))

    @torch.no_grad()
    def sample(
        self,
        n: int | None = None,
        m: int | None = None,
        *,
        x0: Tensor | None = None,
        steps: int = 100,
        method: str = "euler",
        seed: int = 0,
        t_end: float = 1.0,
        chunk: int | None = 256,
    ) -> Tensor:
        """Generate ``[n, m]`` functions by integrating the flow from noise (given ``x0`` or drawn with ``seed``).

        The batch is integrated ``chunk`` functions at a time (``None``: all at once); trajectories are
        independent, so this only changes memory traffic: on CPU a chunk of activations that fits in cache
        makes large batches ~1.5x faster.
        """
        self._check_fitted()
        if chunk is not None and chunk < 1:
            raise UserError(f"sample: chunk must be >= 1 or None, got {chunk}")
        if x0 is None:
            if n is None:
                raise UserError("sample: pass n (number of functions) or x0 (noise)")
            x0 = self.noise_sample(n, m, seed=seed)
        if chunk is None or x0.shape[0] <= chunk:
            return odeint(self.model_, x0, t0=0.0, t1=t_end, steps=steps, method=method)
        return torch.cat(
            [odeint(self.model_, xc, t0=0.0, t1=t_end, steps=steps, method=method) for xc in x0.split(chunk)]
        )

    def reflow_pairs(
        self, n: int, m: int | None = None, *, steps: int = 100, method: str = "euler", seed: int = 0
    ) -> tuple[Tensor, Tensor]:
        """``(x0, x1)`` couplings for one reflow round: prior draws and their images under the flow (CPU)."""
        x0 = self.noise_sample(n, m, seed=seed)
        return x0, self.sample(x0=x0, steps=steps, method=method).cpu()


@torch.no_grad()
def straightness(velocity: Callable[[Tensor, Tensor], Tensor], x0: Tensor, *, steps: int = 100,
                 per_sample: bool = False) -> float | Tensor:
    """``S = int_0^1 E ||v(t, Z_t) - (Z_1 - Z_0)||_H^2 dt`` along Euler trajectories from ``x0`` ``[B, M]``.

    Zero exactly when every trajectory is a straight line travelled at constant speed. ``per_sample=True``
    returns the ``[B]`` per-trajectory integrals instead of their mean (for an interval over trajectories).
    """
    z = x0
    vs = []
    h = 1.0 / steps
    for i in range(steps):
        v = velocity(z, torch.full((z.shape[0],), i * h, dtype=z.dtype, device=z.device))
        vs.append(v)
        z = z + h * v
    disp = z - x0
    per = torch.stack([functional_sq_norm(v - disp) for v in vs]).mean(0)
    return per if per_sample else float(per.mean())


def gaussian_rf_velocity(mean1: Tensor, cov0: Tensor, cov1: Tensor) -> Callable[[Tensor, Tensor], Tensor]:
    """Exact rectified-flow velocity for X0 ~ N(0, C0), X1 ~ N(m, C1) independent (float64).

    X_t ~ N(t m, C_t) with C_t = t^2 C1 + (1-t)^2 C0 and v(t, x) = m + (t C1 - (1-t) C0) C_t^{-1} (x - t m).
    The returned callable takes ``x`` ``[B, M]`` and ``t`` ``[B]`` (one common time per call).
    """
    m = mean1.double()
    c0, c1 = cov0.double(), cov1.double()

    def v(x: Tensor, t: Tensor) -> Tensor:
        s = float(t.reshape(-1)[0])
        ct = s**2 * c1 + (1 - s) ** 2 * c0
        b = s * c1 - (1 - s) * c0  # symmetric
        gain = torch.linalg.solve(ct, b)  # C_t^{-1} B = (B C_t^{-1})^T
        return (m + (x.double() - s * m) @ gain).to(x.dtype)

    return v


def relative_cov_error(samples: Tensor, cov: Tensor, mean: Tensor | None = None) -> tuple[float, float]:
    """(``||cov_hat - C||_F / ||C||_F``, ``||mean_hat - m|| / sqrt(tr C)``) for samples ``[N, M]``."""
    x = samples.double()
    mu = x.mean(0)
    xc = x - mu
    chat = xc.T @ xc / (x.shape[0] - 1)
    c = cov.double()
    cov_err = float(torch.linalg.norm(chat - c) / torch.linalg.norm(c))
    m = torch.zeros_like(mu) if mean is None else mean.double()
    mean_err = float(torch.linalg.norm(mu - m) / torch.sqrt(torch.trace(c)))
    return cov_err, mean_err


def mean_power_spectrum(f: Tensor) -> Tensor:
    """Mean ``|c_k|^2`` over samples, ``c = rfft(f, norm="forward")``: ``[M//2 + 1]``, comparable across grids."""
    return torch.fft.rfft(f.double(), norm="forward").abs().pow(2).mean(0)


def spectrum_mse(samples: Tensor, real: Tensor, *, kmax: int | None = None) -> float:
    """MSE of log10 mean power spectra over wavenumbers 1..M/2 (Kerrigan-style), or 1..kmax."""
    k = samples.shape[-1] // 2 if kmax is None else kmax
    ps, pr = mean_power_spectrum(samples)[1 : k + 1], mean_power_spectrum(real)[1 : k + 1]
    return float((torch.log10(ps + 1e-30) - torch.log10(pr + 1e-30)).pow(2).mean())


def value_density_mse(
    samples: Tensor, real: Tensor, *, bins: int = 60, lo: float = -3.0, hi: float = 3.0
) -> float:
    """MSE between pointwise value densities (histograms of all grid values on [lo, hi])."""
    edges = np.linspace(lo, hi, bins + 1)
    width = (hi - lo) / bins
    hs = np.histogram(samples.detach().double().cpu().numpy().ravel(), bins=edges)[0] / (
        samples.numel() * width
    )
    hr = np.histogram(real.detach().double().cpu().numpy().ravel(), bins=edges)[0] / (real.numel() * width)
    return float(np.mean((hs - hr) ** 2))


def mmd_rbf(x: Tensor, y: Tensor, *, bandwidth: float | None = None) -> float:
    """Unbiased MMD^2 with a sum of RBF kernels on grid-normalised L^2 distances, ``x`` ``[N, M]``, ``y`` ``[K, M]``.

    Bandwidths are {0.5, 1, 2} x ``bandwidth`` (default: the median real-real distance). The kernel sum is
    :func:`iclr26.stats.mmd2_rbf` on the functions scaled by ``1/sqrt(M)`` (the grid normalisation).
    """
    from iclr26.stats import mmd2_rbf

    m = x.shape[1]
    xs, ys = x.double() / m**0.5, y.double() / m**0.5
    if bandwidth is None:
        d = torch.cdist(ys, ys)
        bandwidth = float(d[~torch.eye(len(ys), dtype=torch.bool)].median())
    return mmd2_rbf(xs, ys, bandwidths=[0.5 * bandwidth, bandwidth, 2 * bandwidth], unbiased=True)


def bimodal_functions(
    n: int, m: int, *, seed: int = 0, p_triangle: float = 0.3, residual: MaternGP | None = None
) -> tuple[Tensor, Tensor]:
    """Random functions ``f = A shape(omega x + phi) + g`` on the uniform grid of ``m`` points.

    shape: a sine (prob 1 - p_triangle) or a triangle wave with the same phase (prob p_triangle);
    omega ~ U[1, 3], phi ~ U[0, 1], A ~ U[0.8, 1.2]; g ~ Matérn-3/2 GP (sigma 0.1, length 0.1) unless given.
    Returns ``(f [n, m], is_triangle [n] bool)``. A seed fixes the parametric part on any grid.
    """
    g = make_generator(seed)
    x = uniform_grid(m, dtype=torch.float64)
    is_tri = torch.rand(n, generator=g) < p_triangle
    omega = 1.0 + 2.0 * torch.rand(n, 1, generator=g, dtype=torch.float64)
    phi = torch.rand(n, 1, generator=g, dtype=torch.float64)
    amp = 0.8 + 0.4 * torch.rand(n, 1, generator=g, dtype=torch.float64)
    u = 2 * torch.pi * (omega * x[None] + phi)
    base = torch.where(is_tri[:, None], (2 / torch.pi) * torch.asin(torch.sin(u)), torch.sin(u))
    res = residual if residual is not None else MaternGP(sigma=0.1, length=0.1, nu=1.5)
    return (amp * base).float() + res.sample(n, x, g), is_tri
