"""Synthetic data for feature-importance studies (FDFI, P16, and any other importance method).

* :func:`correlated_blocks` — the FDFI paper's Experiment 1 design: Gaussian features in blocks of
  equicorrelated columns; the response depends on features 0-4 only. Truth sets: C1 = active
  (0-4), C2 = correlated nulls (5 .. block_size-1, same block as C1), C3 = independent nulls (every
  other block). Regression (``y = signal + N(0, noise_sd^2)``) or classification
  (``y = 1{signal + noise > 0}``).
* :func:`gaussian_mixture_blocks` — the paper's Experiment 2 design: a two-component mixture of
  block-equicorrelated Gaussians (a non-Gaussian joint law with Gaussian components).
* :func:`clayton_copula_blocks` — standard-normal marginals joined blockwise by a Clayton copula
  (lower-tail dependence a linear whitening cannot remove).
* :func:`with_ignored_features` — real (or any) features with independent N(0, 1) columns appended,
  for checking that features a predictor cannot use are rejected at about the nominal rate.

All generators are seeded with ``numpy.random.default_rng(seed)`` and never touch global state.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtri

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

__all__ = [
    "FIData",
    "block_covariance",
    "exp1_signal",
    "correlated_blocks",
    "gaussian_mixture_blocks",
    "clayton_copula_blocks",
    "with_ignored_features",
]

ACTIVE = (0, 1, 2, 3, 4)


@dataclass
class FIData:
    """A feature-importance data set with its ground truth.

    X: ``[n, d]`` features; y: ``[n]`` response (float, or int 0/1 for classification);
    signal: ``[n]`` the noiseless regression function ``f(X)``; groups: ``{"C1": [...], "C2": [...],
    "C3": [...]}`` feature indices; cov: the population covariance (``None`` when not Gaussian).
    """

    X: np.ndarray
    y: np.ndarray
    signal: np.ndarray
    groups: dict[str, list[int]] = field(default_factory=dict)
    cov: np.ndarray | None = None
    task: str = "regression"

    @property
    def feature_names(self) -> list[str]:
        return [f"x{j}" for j in range(self.X.shape[1])]


def _check_blocks(d: int, block_size: int, rho: float) -> None:
    if block_size < 2 or d < 2 * block_size or d % block_size:
        raise UserError(
            f"need d a multiple of block_size >= 2 with at least two blocks, got d={d}, block_size={block_size}"
        )
    if not -1.0 / (block_size - 1) < rho < 1.0:
        raise UserError(
            f"rho={rho} does not give a positive-definite block; allowed ({-1 / (block_size - 1):.3f}, 1)"
        )


def block_covariance(d: int, block_size: int, rho: float) -> np.ndarray:
    """Block-diagonal covariance ``[d, d]``: unit variances, correlation ``rho`` within each block."""
    _check_blocks(d, block_size, rho)
    cov = np.eye(d)
    for s in range(0, d, block_size):
        cov[s : s + block_size, s : s + block_size] = rho
    np.fill_diagonal(cov, 1.0)
    return cov


def exp1_signal(X: np.ndarray) -> np.ndarray:
    """Regression function of the paper's Experiment 1: ``atan(x0 + x1) 1{x2 > 0} + sin(x3 x4) 1{x2 < 0}``."""
    return np.arctan(X[:, 0] + X[:, 1]) * (X[:, 2] > 0) + np.sin(X[:, 3] * X[:, 4]) * (X[:, 2] < 0)


def _truth_groups(d: int, block_size: int) -> dict[str, list[int]]:
    return {
        "C1": list(ACTIVE),
        "C2": list(range(len(ACTIVE), block_size)),
        "C3": list(range(block_size, d)),
    }


def _response(signal: np.ndarray, rng: np.random.Generator, task: str, noise_sd: float) -> np.ndarray:
    noise = rng.normal(0.0, noise_sd, size=signal.shape[0])
    if task == "regression":
        return signal + noise
    if task == "classification":
        return (signal + noise > 0).astype(np.int64)
    raise UserError(f"task must be 'regression' or 'classification', got {task!r}")


def correlated_blocks(
    n: int,
    *,
    rho: float = 0.8,
    d: int = 20,
    block_size: int = 10,
    seed: int = 0,
    task: str = "regression",
    noise_sd: float = 1.0,
) -> FIData:
    """Experiment 1 of the FDFI paper: ``X ~ N(0, block_covariance(d, block_size, rho))``.

    The first block holds the active features C1 = {0..4} and the correlated nulls C2; every later
    block (C3) is independent of the first, so C3 is where Type-I error is counted.
    """
    if n < 1:
        raise UserError(f"n must be >= 1, got {n}")
    cov = block_covariance(d, block_size, rho)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) @ np.linalg.cholesky(cov).T  # [n, d]
    signal = exp1_signal(X)
    y = _response(signal, rng, task, noise_sd)
    return FIData(X=X, y=y, signal=signal, groups=_truth_groups(d, block_size), cov=cov, task=task)


def gaussian_mixture_blocks(
    n: int,
    *,
    d: int = 20,
    block_size: int = 10,
    rho1: float = 0.8,
    rho2: float = 0.2,
    weight: float = 0.2,
    seed: int = 0,
    task: str = "regression",
    noise_sd: float = 1.0,
) -> FIData:
    """Experiment 2 of the FDFI paper: with probability ``weight`` a draw has block correlation
    ``rho1``, otherwise ``rho2``. Same response and truth sets as :func:`correlated_blocks`."""
    if not 0.0 <= weight <= 1.0:
        raise UserError(f"weight must be in [0, 1], got {weight}")
    c1 = np.linalg.cholesky(block_covariance(d, block_size, rho1))
    c2 = np.linalg.cholesky(block_covariance(d, block_size, rho2))
    rng = np.random.default_rng(seed)
    comp = rng.random(n) < weight  # [n] True -> component 1
    eps = rng.standard_normal((n, d))
    X = np.where(comp[:, None], eps @ c1.T, eps @ c2.T)
    signal = exp1_signal(X)
    y = _response(signal, rng, task, noise_sd)
    return FIData(X=X, y=y, signal=signal, groups=_truth_groups(d, block_size), cov=None, task=task)


def clayton_copula_blocks(
    n: int,
    *,
    d: int = 20,
    block_size: int = 10,
    theta: float = 2.0,
    seed: int = 0,
    task: str = "regression",
    noise_sd: float = 1.0,
) -> FIData:
    """Standard-normal marginals joined within each block by a Clayton copula with parameter ``theta``.

    Marshall-Olkin sampling: ``V ~ Gamma(1/theta)`` shared by a block, ``E_j ~ Exp(1)``,
    ``U_j = (1 + E_j / V)^(-1/theta)``, then ``X_j = Phi^-1(U_j)``. Blocks are independent.
    """
    if theta <= 0:
        raise UserError(f"theta must be > 0 for the Clayton copula, got {theta}")
    _check_blocks(d, block_size, 0.0)
    rng = np.random.default_rng(seed)
    n_blocks = d // block_size
    v = rng.gamma(1.0 / theta, 1.0, size=(n, n_blocks))  # [n, blocks]
    e = rng.exponential(1.0, size=(n, d))
    u = (1.0 + e / np.repeat(v, block_size, axis=1)) ** (-1.0 / theta)
    X = ndtri(np.clip(u, 1e-12, 1 - 1e-12))
    signal = exp1_signal(X)
    y = _response(signal, rng, task, noise_sd)
    return FIData(X=X, y=y, signal=signal, groups=_truth_groups(d, block_size), cov=None, task=task)


def with_ignored_features(X: np.ndarray, k: int, *, seed: int = 0) -> np.ndarray:
    """``[n, d + k]``: ``X`` followed by ``k`` independent N(0, 1) columns.

    A predictor fitted on (and given) only the first ``d`` columns cannot use the appended ones, so
    their importance is exactly zero and any rejection of them is a Type-I error.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or k < 0:
        raise UserError(f"need a 2-D X and k >= 0, got X shape {X.shape} and k={k}")
    rng = np.random.default_rng(seed)
    return np.column_stack([X, rng.standard_normal((X.shape[0], k))])
