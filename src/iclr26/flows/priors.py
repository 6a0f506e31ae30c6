"""Function-space noise for functional rectified flow (P13, Zhang & Scott, ICLR 2026, arXiv 2509.10384).

Functional rectified flow needs a noise measure on L^2(D) itself, i.e. a Gaussian process N(0, C) with a
trace-class covariance, that can be *sampled on whatever grid* the model is evaluated on. Provided:
``MaternGP`` (Matérn-1/2, 3/2, 5/2 kernels) and ``RBFGP`` (the squared-exponential kernel, whose samples
are infinitely smooth), both sampled exactly by Cholesky on any 1-D grid (shared base ``GridGP``), ``FourierPrior``
(white noise coloured in Fourier space, the "fdp" prior of Franzese et al.'s functional diffusion code),
``IIDNoise`` (white noise per grid point; not an L^2 measure, the control) and the logit-normal time density
of Esser et al. (2024) used to weight the loss over t.
"""

from __future__ import annotations

import logging
import math

import torch
from torch import Tensor

from iclr26.core import UserError

log = logging.getLogger(__name__)

__all__ = [
    "uniform_grid",
    "matern_kernel",
    "rbf_kernel",
    "GridGP",
    "MaternGP",
    "RBFGP",
    "FourierPrior",
    "IIDNoise",
    "LogitNormal",
    "make_noise",
]


def uniform_grid(m: int, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """Periodic uniform grid ``x_j = j / m`` on [0, 1), shape ``[m]`` (a grid of 2m contains the grid of m)."""
    if m < 2:
        raise UserError(f"uniform_grid: need at least 2 points, got {m}")
    return torch.arange(m, dtype=dtype) / m


def matern_kernel(
    x: Tensor, y: Tensor, *, sigma: float = 1.0, length: float = 0.1, nu: float = 0.5
) -> Tensor:
    """Matérn kernel matrix ``[len(x), len(y)]`` for nu in {0.5, 1.5, 2.5}; nu=0.5 is sigma^2 exp(-|x-y|/length)."""
    r = (x[:, None] - y[None, :]).abs() / length
    if nu == 0.5:
        k = torch.exp(-r)
    elif nu == 1.5:
        s = math.sqrt(3.0) * r
        k = (1 + s) * torch.exp(-s)
    elif nu == 2.5:
        s = math.sqrt(5.0) * r
        k = (1 + s + s**2 / 3) * torch.exp(-s)
    else:
        raise UserError(f"matern_kernel: nu must be one of 0.5, 1.5, 2.5, got {nu}")
    return sigma**2 * k


def rbf_kernel(x: Tensor, y: Tensor, *, sigma: float = 1.0, length: float = 0.1) -> Tensor:
    """Squared-exponential (RBF) kernel matrix ``[len(x), len(y)]``: sigma^2 exp(-(x-y)^2 / (2 length^2))."""
    d = (x[:, None] - y[None, :]) / length
    return sigma**2 * torch.exp(-0.5 * d**2)


class GridGP:
    """Zero-mean GP on a 1-D grid, sampled exactly by Cholesky of ``covariance(grid) + jitter·sigma²·I``
    (O(M^3), cached per grid). Subclasses set ``sigma``, ``jitter`` and define :meth:`covariance`.

    ``sample(n, grid, generator) -> [n, M]``; ``sampler(grid)`` gives the ``(n, generator) -> Tensor``
    closure that :func:`iclr26.flows.core.fit_velocity` takes as ``sample_noise``.
    """

    sigma: float
    jitter: float

    def __init__(self) -> None:
        self._chol: dict[tuple, Tensor] = {}

    def covariance(self, grid: Tensor) -> Tensor:
        """Kernel matrix ``[M, M]`` (float64) on ``grid`` ``[M]``."""
        raise NotImplementedError

    def cholesky(self, grid: Tensor) -> Tensor:
        g = torch.as_tensor(grid, dtype=torch.float64).reshape(-1)
        key = (g.numel(), *g.tolist()) if g.numel() <= 4096 else (g.numel(), float(g.sum()), float(g[0]))
        if key not in self._chol:
            c = self.covariance(g)
            c = c + self.jitter * self.sigma**2 * torch.eye(len(g), dtype=torch.float64)
            chol, info = torch.linalg.cholesky_ex(c)
            if int(info) != 0:
                raise UserError(
                    f"{self!r}: covariance on this {len(g)}-point grid is not positive definite even with "
                    f"jitter={self.jitter}; pass a larger jitter (e.g. {self.jitter * 100:g})"
                )
            self._chol[key] = chol
        return self._chol[key]

    def sample(self, n: int, grid: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """``n`` draws on ``grid``, shape ``[n, M]`` (float32)."""
        chol = self.cholesky(grid)
        z = torch.randn(n, chol.shape[0], generator=generator, dtype=torch.float64)
        return (z @ chol.T).float()

    def sampler(self, grid: Tensor):
        return lambda n, generator: self.sample(n, grid, generator)


class MaternGP(GridGP):
    """Zero-mean Matérn GP (nu in {0.5, 1.5, 2.5}) on a 1-D grid; see :class:`GridGP` for sampling."""

    def __init__(self, sigma: float = 1.0, length: float = 0.1, nu: float = 0.5, jitter: float = 1e-6):
        if sigma <= 0 or length <= 0:
            raise UserError(f"MaternGP: sigma and length must be > 0, got {sigma}, {length}")
        if nu not in (0.5, 1.5, 2.5):
            raise UserError(f"MaternGP: nu must be one of 0.5, 1.5, 2.5, got {nu}")
        super().__init__()
        self.sigma, self.length, self.nu, self.jitter = float(sigma), float(length), float(nu), float(jitter)

    def __repr__(self) -> str:
        return f"MaternGP(sigma={self.sigma}, length={self.length}, nu={self.nu})"

    def covariance(self, grid: Tensor) -> Tensor:
        """Kernel matrix ``[M, M]`` (float64) on ``grid`` ``[M]``."""
        g = torch.as_tensor(grid, dtype=torch.float64).reshape(-1)
        return matern_kernel(g, g, sigma=self.sigma, length=self.length, nu=self.nu)


class RBFGP(GridGP):
    """Zero-mean squared-exponential (RBF) GP on a 1-D grid; see :class:`GridGP` for sampling.

    k(x, y) = sigma^2 exp(-(x-y)^2 / (2 length^2)), the ``sigma**2 * RBF(length_scale=length)`` of
    scikit-learn. Its covariance matrix is numerically low-rank on fine grids (its eigenvalues decay
    faster than any power), so the jitter is what makes the Cholesky factor exist; the default 1e-6·sigma² adds
    one part in a million to the pointwise variance.
    """

    def __init__(self, sigma: float = 1.0, length: float = 0.1, jitter: float = 1e-6):
        if sigma <= 0 or length <= 0:
            raise UserError(f"RBFGP: sigma and length must be > 0, got {sigma}, {length}")
        if not jitter > 0:
            raise UserError(f"RBFGP: jitter must be > 0 (the RBF covariance is near-singular), got {jitter}")
        super().__init__()
        self.sigma, self.length, self.jitter = float(sigma), float(length), float(jitter)

    def __repr__(self) -> str:
        return f"RBFGP(sigma={self.sigma}, length={self.length})"

    def covariance(self, grid: Tensor) -> Tensor:
        """Kernel matrix ``[M, M]`` (float64) on ``grid`` ``[M]``."""
        g = torch.as_tensor(grid, dtype=torch.float64).reshape(-1)
        return rbf_kernel(g, g, sigma=self.sigma, length=self.length)


class FourierPrior:
    """White noise coloured in Fourier space (the "fdp" prior): ``f(x) = sum_k a(k) xi_k e^{2 pi i k x}``.

    Amplitude ``a(k) = scale * sqrt(r(k) / b(k))`` with ``r = 1/(k^2 + 2)`` and
    ``b = 1/(k^2 + 0.3) + ((k^2 + 2)/33^2)^{1/4}``; ``a(k)^2 ~ k^{-5/2}`` is summable, so the measure lives in
    L^2 and the pointwise variance converges as the grid is refined. Sampled by inverse FFT on the periodic
    grid ``j/M`` (truncated at the Nyquist wavenumber M/2). ``E|c_k|^2 = a(k)^2`` for the coefficients
    ``c = rfft(f, norm="forward")`` — that is the design spectrum the tests check.
    """

    def __init__(self, scale: float = 1.0):
        if scale <= 0:
            raise UserError(f"FourierPrior: scale must be > 0, got {scale}")
        self.scale = float(scale)

    def __repr__(self) -> str:
        return f"FourierPrior(scale={self.scale})"

    def amplitude(self, k: Tensor) -> Tensor:
        k2 = k.double() ** 2
        r = 1.0 / (k2 + 2.0)
        b = 1.0 / (k2 + 0.3) + ((k2 + 2.0) / 33.0**2) ** 0.25
        return self.scale * torch.sqrt(r / b)

    def spectrum(self, m: int) -> Tensor:
        """Design power ``a(k)^2`` for k = 0..m//2, shape ``[m//2 + 1]`` (float64)."""
        return self.amplitude(torch.arange(m // 2 + 1)) ** 2

    def sample(self, n: int, grid: Tensor, generator: torch.Generator | None = None) -> Tensor:
        m = int(torch.as_tensor(grid).numel())
        nk = m // 2 + 1
        amp = self.amplitude(torch.arange(nk))  # [nk]
        re = torch.randn(n, nk, generator=generator, dtype=torch.float64)
        im = torch.randn(n, nk, generator=generator, dtype=torch.float64)
        c = torch.complex(re, im) / math.sqrt(2.0)
        # DC (and Nyquist for even m) coefficients of a real signal are real: unit variance there too
        c[:, 0] = torch.complex(re[:, 0], torch.zeros_like(re[:, 0]))
        if m % 2 == 0:
            c[:, -1] = torch.complex(re[:, -1], torch.zeros_like(re[:, -1]))
        return torch.fft.irfft(c * amp, n=m, norm="forward").float()  # [n, m]

    def sampler(self, grid: Tensor):
        return lambda n, generator: self.sample(n, grid, generator)


class IIDNoise:
    """Independent N(0, sigma^2) at every grid point (standard rectified flow; its L^2 norm is not grid-free)."""

    def __init__(self, sigma: float = 1.0):
        self.sigma = float(sigma)

    def __repr__(self) -> str:
        return f"IIDNoise(sigma={self.sigma})"

    def sample(self, n: int, grid: Tensor, generator: torch.Generator | None = None) -> Tensor:
        m = int(torch.as_tensor(grid).numel())
        return self.sigma * torch.randn(n, m, generator=generator)

    def sampler(self, grid: Tensor):
        return lambda n, generator: self.sample(n, grid, generator)


NOISES = ("matern", "fourier", "iid", "rbf")


def make_noise(kind: str, **kw) -> GridGP | FourierPrior | IIDNoise:
    """``"matern"`` -> MaternGP(**kw), ``"rbf"`` -> RBFGP(**kw), ``"fourier"`` -> FourierPrior(**kw),
    ``"iid"`` -> IIDNoise(**kw)."""
    if kind == "matern":
        return MaternGP(**kw)
    if kind == "rbf":
        return RBFGP(**kw)
    if kind == "fourier":
        return FourierPrior(**kw)
    if kind == "iid":
        return IIDNoise(**kw)
    raise UserError(f"unknown noise {kind!r}; allowed: {', '.join(NOISES)}")


class LogitNormal:
    """Logit-normal time density (Esser et al., 2024): ``t = sigmoid(u)``, ``u ~ N(mean, std^2)``.

    ``pdf(t)`` is used to *weight* a uniform t (the official FRF code's choice); ``sample`` draws t from it
    (same expected loss, different variance). Not to be confused with a log-normal density.
    """

    def __init__(self, mean: float = 0.0, std: float = 1.0):
        if std <= 0:
            raise UserError(f"LogitNormal: std must be > 0, got {std}")
        self.mean, self.std = float(mean), float(std)

    def __repr__(self) -> str:
        return f"LogitNormal(mean={self.mean}, std={self.std})"

    def pdf(self, t: Tensor) -> Tensor:
        t = t.clamp(1e-7, 1 - 1e-7)
        u = torch.log(t) - torch.log1p(-t)
        z = (u - self.mean) / self.std
        return torch.exp(-0.5 * z**2) / (self.std * math.sqrt(2 * math.pi) * t * (1 - t))

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        return torch.sigmoid(self.mean + self.std * torch.randn(n, generator=generator))
