"""FDFI: *Flow-Disentangled Feature Importance* (ICLR 2026, OpenReview Fx8AtzGlTS; Chen, Guo & Du).

Correlated features break removal (LOCO) and conditional-permutation (CPI) importance: a signal
with a near-copy looks unimportant. FDFI first learns a map ``X = T(Z)`` with independent latents
(a flow-matching ODE from N(0, I) to the data, or the Gaussian OT map ``Z = Sigma^-1/2 (X - mu)``),
measures importance of each latent by resampling ``Z_j`` and decoding (any loss), and attributes it
back to features through the squared Jacobian: ``u^X_il = sum_k H_lk^2 u_ik`` with ``H = dX/dZ``.
The per-sample values are uncentred influence functions, so ``mean +- se`` gives Wald intervals.

Public API: :class:`FDFI` (sklearn contract), :class:`GaussianDisentangler`,
:class:`FlowDisentangler`, :class:`UEIFs`; inference lives in :mod:`iclr26.flows.fdfi_stats`,
baselines (LOCO, conditional permutation) and cross-fitting in :mod:`iclr26.flows.fdfi_baselines`.

Naming of the two latent estimators (pinned to ``fdfi`` 0.1.0, which says it matches the paper;
older 0.0.x releases swapped the names and had no 1/2) — this is the one place that maps them:

* ``"cpi"``  = ``loss_avg_half``: ``u_ij = 1/2 mean_b [L(r_i, f(X~_ib)) - L(r_i, yhat_i)]``
* ``"scpi"`` = ``pred_avg``:      ``u_ij = L(r_i, mean_b f(X~_ib)) - L(r_i, yhat_i)``

with ``yhat_i = f(T(T^-1(x_i)))`` (the round trip) and ``r_i = y_i`` (or ``yhat_i`` without labels).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.estimators import BaseEstimator, check_is_fitted
from iclr26.core.progress import progress
from iclr26.flows.core import MLPVelocity, fit_velocity, odeint
from iclr26.flows.fdfi_stats import (
    FDFIResult,
    heldout_disentanglement,
    infer,
    latent_independence,
    mmd,
    screen_jacobian_weights,
)

log = logging.getLogger(__name__)

__all__ = [
    "ESTIMATOR_ALIASES",
    "LOSSES",
    "resolve_loss",
    "as_predict_fn",
    "Disentangler",
    "GaussianDisentangler",
    "FlowDisentangler",
    "ResMLPVelocity",
    "UEIFs",
    "FDFI",
]

# paper / fdfi-0.1.0 names -> what they compute (see module docstring)
ESTIMATOR_ALIASES = {"cpi": "cpi", "loss_avg_half": "cpi", "scpi": "scpi", "pred_avg": "scpi"}
SAMPLINGS = ("resample", "normal", "permutation", "condperm")
JACOBIAN_MODES = ("avg_sq", "average", "per_sample")


# --------------------------------------------------------------------------------------------------
# losses: elementwise functions loss(target, pred); multi-output predictions sum over the last axis
# --------------------------------------------------------------------------------------------------
def _squared_error(t: np.ndarray, p: np.ndarray) -> np.ndarray:
    return (t - p) ** 2


def _absolute_error(t: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.abs(t - p)


def _huber(t: np.ndarray, p: np.ndarray, delta: float = 1.0) -> np.ndarray:
    r = np.abs(t - p)
    return np.where(r <= delta, 0.5 * r**2, delta * (r - 0.5 * delta))


def _log_loss(t: np.ndarray, p: np.ndarray, eps: float = 1e-7) -> np.ndarray:
    """Cross-entropy with soft targets ``t`` in [0, 1] (labels are one-hot / 0-1 coded beforehand).

    Binary: ``p = P(y = 1)`` elementwise. Multiclass ``[..., C]``: summing over C gives the usual loss.
    """
    p = np.clip(p, eps, 1 - eps)
    return -(t * np.log(p) + (1 - t) * np.log1p(-p))


def _multiclass_log_loss(t: np.ndarray, p: np.ndarray, eps: float = 1e-7) -> np.ndarray:
    return -(t * np.log(np.clip(p, eps, 1.0)))


LOSSES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "squared_error": _squared_error,
    "absolute_error": _absolute_error,
    "huber": _huber,
    "log_loss": _log_loss,
    "brier": _squared_error,
}
_PROBA_LOSSES = ("log_loss", "brier")


@dataclass(frozen=True)
class _Loss:
    name: str
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
    builtin: bool

    @property
    def needs_proba(self) -> bool:
        return self.name in _PROBA_LOSSES

    def __call__(self, target: np.ndarray, pred: np.ndarray, multi: bool) -> np.ndarray:
        """Per-sample loss: ``pred [..., n]`` (or ``[..., n, C]`` when ``multi``) -> ``[..., n]``."""
        if not self.builtin:
            return np.asarray(self.fn(target, pred), dtype=float)
        if multi:
            fn = _multiclass_log_loss if self.name == "log_loss" else self.fn
            return fn(target, pred).sum(axis=-1)
        return self.fn(target, pred)


def resolve_loss(loss: str | Callable) -> _Loss:
    """A built-in name (``squared_error``, ``absolute_error``, ``huber``, ``log_loss``, ``brier``) or
    a callable ``loss(target, pred) -> per-sample array`` broadcasting over a leading resample axis."""
    if callable(loss):
        return _Loss(getattr(loss, "__name__", "custom"), loss, builtin=False)
    if loss not in LOSSES:
        raise UserError(f"unknown loss {loss!r}; allowed: {', '.join(LOSSES)} or a callable")
    return _Loss(loss, LOSSES[loss], builtin=True)


# --------------------------------------------------------------------------------------------------
# any predictor -> numpy predict function
# --------------------------------------------------------------------------------------------------
def as_predict_fn(
    predictor: Any, *, proba: bool = False, feature_names: list[str] | None = None, batch_size: int = 65536
) -> Callable[[np.ndarray], np.ndarray]:
    """Wrap a fitted predictor as ``f(X [m, d] float) -> [m]`` (or ``[m, C]``).

    * ``torch.nn.Module``: called on float32 tensors on its own device, under ``no_grad``, in chunks;
      ``[m, 1]`` outputs are squeezed. (For log-loss, end the module with a sigmoid/softmax.)
    * sklearn-style: ``predict_proba`` when ``proba`` (binary -> column 1), else ``predict``. If the
      model was fitted on a DataFrame (``feature_names_in_``), a DataFrame with those names is passed.
    * any other callable: used as is.
    """
    if isinstance(predictor, torch.nn.Module):
        module = predictor
        dev = next((p.device for p in module.parameters()), torch.device("cpu"))

        def f_torch(X: np.ndarray) -> np.ndarray:
            was = module.training
            module.eval()
            outs = []
            try:
                with torch.no_grad():
                    for s in range(0, X.shape[0], batch_size):
                        xb = torch.as_tensor(X[s : s + batch_size], dtype=torch.float32, device=dev)
                        outs.append(module(xb).detach().float().cpu().numpy())
            finally:
                module.train(was)
            out = np.concatenate(outs, axis=0)
            return out[:, 0] if out.ndim == 2 and out.shape[1] == 1 else out

        return f_torch
    if proba:
        if not hasattr(predictor, "predict_proba"):
            raise UserError(
                f"a probability loss needs predictor.predict_proba; {type(predictor).__name__} has none"
            )
        method = predictor.predict_proba
    elif hasattr(predictor, "predict") and not isinstance(predictor, type):
        method = predictor.predict
    elif callable(predictor):
        method = predictor
    else:
        raise UserError(
            f"predictor must be a torch module, have .predict, or be callable; got {type(predictor).__name__}"
        )
    names = feature_names
    if names is None and hasattr(predictor, "feature_names_in_"):
        names = list(predictor.feature_names_in_)

    def f(X: np.ndarray) -> np.ndarray:
        outs = []
        for s in range(0, X.shape[0], batch_size):
            xb = X[s : s + batch_size]
            if names is not None and hasattr(predictor, "feature_names_in_"):
                import pandas as pd

                xb = pd.DataFrame(xb, columns=names)
            outs.append(np.asarray(method(xb), dtype=float))
        out = np.concatenate(outs, axis=0)
        if proba and out.ndim == 2 and out.shape[1] == 2:
            out = out[:, 1]
        return out[:, 0] if out.ndim == 2 and out.shape[1] == 1 else out

    return f


def _as_array(X: Any) -> tuple[np.ndarray, list[str] | None]:
    """``(float64 array [n, d], column names or None)``; accepts numpy, pandas and torch."""
    names = None
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):
        names = [str(c) for c in X.columns]
        X = X.to_numpy()
    elif isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise UserError(f"X must be numeric (one-hot encode categorical columns first): {e}") from None
    if arr.ndim != 2:
        raise UserError(f"X must be 2-D [n, d], got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise UserError("X contains NaN or inf; impute or drop those rows first")
    return arr, names


# --------------------------------------------------------------------------------------------------
# disentanglers: X (standardised by FDFI) <-> Z with independent N(0, 1) coordinates
# --------------------------------------------------------------------------------------------------
class Disentangler(Protocol):
    """``fit(X [n, d]) -> self``; ``encode``/``decode`` map ``[m, d]`` arrays; ``jacobian(Z [m, d])``
    returns ``H [m, d, d]`` with ``H[i, l, k] = dX_l / dZ_k`` at ``Z[i]``."""

    def fit(self, X: np.ndarray) -> Disentangler: ...
    def encode(self, X: np.ndarray) -> np.ndarray: ...
    def decode(self, Z: np.ndarray) -> np.ndarray: ...
    def jacobian(self, Z: np.ndarray) -> np.ndarray: ...


class GaussianDisentangler(BaseEstimator):
    """Linear Gaussian map ``Z = A^-1 (X - mu)``, ``X = mu + A Z`` with ``A A^T = Sigma``.

    ``kind="sym"`` uses the symmetric square root ``A = Sigma^1/2`` (the Gaussian OT map; DFI-OT and
    the ``fdfi`` OTExplainer). ``kind="cholesky"`` uses the lower Cholesky factor (depends on column
    order). Eigenvalues are floored at ``ridge``. The covariance uses ``ddof=0``, so the latent sample
    covariance of the fitting data is exactly the identity.
    """

    def __init__(self, kind: str = "sym", ridge: float = 1e-6):
        self.kind = kind
        self.ridge = ridge

    def fit(self, X: np.ndarray) -> GaussianDisentangler:
        if self.kind not in ("sym", "cholesky"):
            raise UserError(f"GaussianDisentangler kind must be 'sym' or 'cholesky', got {self.kind!r}")
        X = np.asarray(X, dtype=np.float64)
        if X.shape[0] < 2:
            raise UserError("GaussianDisentangler needs at least 2 rows")
        self.mean_ = X.mean(axis=0)
        cov = np.cov(X, rowvar=False, ddof=0).reshape(X.shape[1], X.shape[1])
        cov = (cov + cov.T) / 2
        w, V = np.linalg.eigh(cov)
        w = np.maximum(w, self.ridge)
        if self.kind == "sym":
            self.A_ = (V * np.sqrt(w)) @ V.T
            self.A_inv_ = (V / np.sqrt(w)) @ V.T
        else:
            self.A_ = np.linalg.cholesky((V * w) @ V.T)
            self.A_inv_ = np.linalg.inv(self.A_)
        return self

    def _check(self) -> None:
        check_is_fitted(self, "A_")

    def encode(self, X: np.ndarray) -> np.ndarray:
        self._check()
        return (np.asarray(X, dtype=np.float64) - self.mean_) @ self.A_inv_.T

    def decode(self, Z: np.ndarray) -> np.ndarray:
        self._check()
        return np.asarray(Z, dtype=np.float64) @ self.A_.T + self.mean_

    def jacobian(self, Z: np.ndarray) -> np.ndarray:
        self._check()
        return np.broadcast_to(self.A_, (len(Z), *self.A_.shape)).copy()


class ResMLPVelocity(nn.Module):
    """Velocity ``v(x [B, dim], t [B]) -> [B, dim]`` with a learned, smooth time embedding.

    The ``fdfi`` package's design: ``t -> Linear -> SiLU -> Linear`` (time_dim), concatenated with x,
    a linear layer to ``hidden``, ``blocks`` residual SiLU blocks, and a linear read-out. A smooth
    embedding keeps the ODE easy for few-step solvers (a high-frequency sinusoidal one does not).
    """

    def __init__(self, dim: int, hidden: int = 64, blocks: int = 1, time_dim: int = 32):
        super().__init__()
        if min(dim, hidden, time_dim) < 1 or blocks < 0:
            raise UserError("ResMLPVelocity: dim, hidden, time_dim >= 1 and blocks >= 0 required")
        self.dim = dim
        self.time = nn.Sequential(nn.Linear(1, time_dim), nn.SiLU(), nn.Linear(time_dim, time_dim))
        self.inp = nn.Linear(dim + time_dim, hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
            for _ in range(blocks)
        )
        self.out = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        t = torch.as_tensor(t, dtype=x.dtype, device=x.device).reshape(-1, 1).expand(x.shape[0], 1)
        h = F.silu(self.inp(torch.cat([x, self.time(t)], dim=-1)))  # [B, hidden]
        for blk in self.blocks:
            h = h + blk(h)
        return self.out(F.silu(h))


class FlowDisentangler(BaseEstimator):
    """Flow-matching ODE from ``N(0, I)`` (t = 0) to the data (t = 1), via :mod:`iclr26.flows.core`.

    Path ``x_t = (1 - (1 - sigma_min) t) z + t x`` as in the ``fdfi`` package; the velocity is a
    :class:`ResMLPVelocity` (``velocity="resmlp"``, default) or the core
    :class:`~iclr26.flows.core.MLPVelocity` (``"mlp"``; ``depth`` layers). Encoding integrates t from
    1 to 0, decoding 0 to 1, with a fixed-step solver (``ode_method``/``ode_steps``) or adaptive
    ``"dopri5"``. The Jacobian is computed by autograd through the decoder (one backward pass per
    output coordinate).
    """

    def __init__(
        self,
        *,
        velocity: str = "resmlp",
        hidden: int = 64,
        depth: int = 1,
        time_dim: int = 32,
        steps: int = 1500,
        batch_size: int = 256,
        lr: float = 1e-3,
        sigma_min: float = 0.01,
        ode_method: str = "rk4",
        ode_steps: int = 8,
        atol: float = 1e-5,
        rtol: float = 1e-3,
        seed: int = 0,
        device: str | torch.device = "cpu",
        chunk_size: int = 65536,
    ):
        self.velocity, self.hidden, self.depth, self.time_dim = velocity, hidden, depth, time_dim
        self.steps, self.batch_size, self.lr, self.sigma_min = steps, batch_size, lr, sigma_min
        self.ode_method, self.ode_steps, self.atol, self.rtol = ode_method, ode_steps, atol, rtol
        self.seed, self.device, self.chunk_size = seed, device, chunk_size

    def fit(self, X: np.ndarray) -> FlowDisentangler:
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[0] < 2:
            raise UserError(f"FlowDisentangler needs X of shape [n >= 2, d], got {X.shape}")
        dev = torch.device(self.device)
        if self.velocity not in ("resmlp", "mlp"):
            raise UserError(f"FlowDisentangler velocity must be 'resmlp' or 'mlp', got {self.velocity!r}")
        # weight init from self.seed only (torch's global generator is left as it was); training draws use
        # fit_velocity's own generator
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            if self.velocity == "resmlp":
                net = ResMLPVelocity(X.shape[1], hidden=self.hidden, blocks=self.depth, time_dim=self.time_dim)
            else:
                net = MLPVelocity(X.shape[1], hidden=self.hidden, depth=self.depth, time_dim=self.time_dim)
        self.velocity_ = net.to(dev)
        self.losses_ = fit_velocity(
            self.velocity_, torch.from_numpy(X), steps=self.steps, batch_size=self.batch_size, lr=self.lr,
            seed=self.seed, sigma_min=self.sigma_min, desc="fdfi flow",
        )  # fmt: skip
        self.velocity_.eval()
        for p in self.velocity_.parameters():
            p.requires_grad_(False)
        return self

    def _check(self) -> None:
        check_is_fitted(self, "velocity_")

    def _integrate(self, x: torch.Tensor, t0: float, t1: float, method: str | None = None) -> torch.Tensor:
        return odeint(
            self.velocity_, x, t0=t0, t1=t1, steps=self.ode_steps, method=method or self.ode_method,
            atol=self.atol, rtol=self.rtol,
        )  # fmt: skip

    def _run(self, A: np.ndarray, t0: float, t1: float, method: str | None = None) -> np.ndarray:
        self._check()
        dev = next(self.velocity_.parameters()).device
        out = []
        with torch.no_grad():
            for s in range(0, A.shape[0], self.chunk_size):
                xb = torch.as_tensor(A[s : s + self.chunk_size], dtype=torch.float32, device=dev)
                out.append(self._integrate(xb, t0, t1, method).cpu().numpy())
        return np.concatenate(out, axis=0).astype(np.float64) if out else np.zeros_like(A, dtype=np.float64)

    def encode(self, X: np.ndarray, method: str | None = None) -> np.ndarray:
        return self._run(np.asarray(X), 1.0, 0.0, method)

    def decode(self, Z: np.ndarray, method: str | None = None) -> np.ndarray:
        return self._run(np.asarray(Z), 0.0, 1.0, method)

    def jacobian(self, Z: np.ndarray) -> np.ndarray:
        self._check()
        dev = next(self.velocity_.parameters()).device
        z = torch.as_tensor(np.asarray(Z), dtype=torch.float32, device=dev).requires_grad_(True)
        with torch.enable_grad():
            x = self._integrate(z, 0.0, 1.0)  # [m, d]; rows are independent, so d/dz of column sums
            d = x.shape[1]
            rows = [
                torch.autograd.grad(x[:, ell].sum(), z, retain_graph=ell < d - 1)[0]  # [m, d] = H[:, ell, :]
                for ell in range(d)
            ]
        return torch.stack(rows, dim=1).cpu().numpy().astype(np.float64)  # [m, d(l), d(k)]


# --------------------------------------------------------------------------------------------------
# the estimator
# --------------------------------------------------------------------------------------------------
@dataclass
class UEIFs:
    """Per-sample uncentred influence values ``[n, d]`` of both latent estimators, in Z and X space.

    ``y_var`` (Var of the labels, or of the predictions without labels) feeds the paper's variance floor.
    """

    z_cpi: np.ndarray
    z_scpi: np.ndarray
    x_cpi: np.ndarray
    x_scpi: np.ndarray
    y_var: float
    feature_names: list[str]
    info: dict[str, Any] = field(default_factory=dict)

    def get(self, estimator: str = "cpi", space: str = "X") -> np.ndarray:
        est = ESTIMATOR_ALIASES.get(estimator)
        if est is None or space not in ("X", "Z"):
            raise UserError(f"estimator must be one of {sorted(ESTIMATOR_ALIASES)} and space 'X' or 'Z'")
        return getattr(self, f"{space.lower()}_{est}")

    @staticmethod
    def concat(parts: list[UEIFs], order: np.ndarray | None = None) -> UEIFs:
        """Stack fold-wise UEIFs (rows in the order of ``np.concatenate(order)`` -> restored)."""
        cat = {
            k: np.concatenate([getattr(p, k) for p in parts]) for k in ("z_cpi", "z_scpi", "x_cpi", "x_scpi")
        }
        if order is not None:
            inv = np.empty_like(order)
            inv[order] = np.arange(len(order))
            cat = {k: v[inv] for k, v in cat.items()}
        y_var = float(np.mean([p.y_var for p in parts]))
        info = {}
        if all("disentanglement" in p.info for p in parts):  # the worst fold speaks for the stack
            fold = [p.info["disentanglement"] for p in parts]
            info["disentanglement"] = {
                "max_abs_corr": max(f["max_abs_corr"] for f in fold), "r_crit": max(f["r_crit"] for f in fold),
                "poor": any(f["poor"] for f in fold), "screened": sum(f["screened"] for f in fold),
                "folds": fold,
            }  # fmt: skip
        return UEIFs(**cat, y_var=y_var, feature_names=parts[0].feature_names, info=info)


class FDFI(BaseEstimator):
    """Flow-disentangled feature importance with the sklearn contract.

    ``FDFI(flow="flow" | "gaussian" | Disentangler, loss=..., n_resamples=...).fit(X_background)``
    then ``.importance(predictor, X, y)`` -> :class:`~iclr26.flows.fdfi_stats.FDFIResult`.

    Args:
        flow: ``"flow"`` (a :class:`FlowDisentangler` built from ``flow_kwargs``), ``"gaussian"``
            (:class:`GaussianDisentangler`, fast), or an unfitted disentangler instance (copied on fit).
        loss: built-in name or callable ``loss(target, pred)``; probability losses use ``predict_proba``.
        n_resamples: B counterfactual draws of each latent per evaluation point.
        estimator: ``"cpi"`` (= ``loss_avg_half``) or ``"scpi"`` (= ``pred_avg``); see module docstring.
        sampling: how latent j is redrawn: ``"resample"`` from the encoded background (default),
            ``"normal"``, ``"permutation"`` within X, ``"condperm"`` (linear regression + permuted residuals).
        jacobian: ``"avg_sq"`` (mean of H^2 over ``n_jacobian`` points; safe for sign flips), ``"average"``
            (square of the mean H), ``"per_sample"`` (each point's own H^2).
        standardize: z-score features with the background mean / sd before disentangling (the
            predictor still sees raw units). The Jacobian is then in standardised units, so the X-space
            attribution does not depend on feature scales. ``False`` reproduces the ``fdfi`` package.
        seed: latent j uses ``numpy.random.default_rng(seed + j)``.
        fit_disentangler: ``False`` reuses an already fitted disentangler instance (e.g. a flow trained
            once on auxiliary data) as is; it must then have been fitted on data standardised the same way.
        screen_jacobian: opt-in safety net, not in the paper. ``True`` drops Jacobian weights ``H_lk^2``
            not larger than the map's error as measured on the evaluation rows
            (:func:`~iclr26.flows.fdfi_stats.screen_jacobian_weights`); without it, features no latent
            really moves inherit a little of every important latent and are rejected far above ``alpha``
            when the map is imperfect (on breast cancer + 10 ignored columns: about half the time, see
            docs/fdfi.md). ``False`` (default) is the paper's estimator and the ``fdfi`` package's.
            Either way the held-out disentanglement check lands in ``result.info["disentanglement"]``
            (``poor``, and ``screened``: how many weights the screen dropped).
        poor_map: what to do when that check fails (the evaluation rows' latents are correlated beyond
            sampling noise): ``"keep"`` (default, the paper's) keeps the map and warns; ``"fallback"``
            (opt-in) switches a non-Gaussian map to the Gaussian map fitted on the same background for
            this call and records it in ``info["disentanglement"]["fallback"]``.
    """

    def __init__(
        self,
        flow: str | Disentangler = "flow",
        *,
        loss: str | Callable = "squared_error",
        n_resamples: int = 50,
        estimator: str = "cpi",
        sampling: str = "resample",
        jacobian: str = "avg_sq",
        n_jacobian: int = 256,
        standardize: bool = True,
        seed: int = 0,
        chunk_size: int = 65536,
        flow_kwargs: dict[str, Any] | None = None,
        fit_disentangler: bool = True,
        screen_jacobian: bool = False,
        poor_map: str = "keep",
    ):
        self.flow = flow
        self.loss = loss
        self.n_resamples = n_resamples
        self.estimator = estimator
        self.sampling = sampling
        self.jacobian = jacobian
        self.n_jacobian = n_jacobian
        self.standardize = standardize
        self.seed = seed
        self.chunk_size = chunk_size
        self.flow_kwargs = flow_kwargs
        self.fit_disentangler = fit_disentangler
        self.screen_jacobian = screen_jacobian
        self.poor_map = poor_map

    # ---- fitting ----
    def _validate(self) -> None:
        if self.estimator not in ESTIMATOR_ALIASES:
            raise UserError(f"estimator must be one of {sorted(ESTIMATOR_ALIASES)}, got {self.estimator!r}")
        if self.sampling not in SAMPLINGS:
            raise UserError(f"sampling must be one of {SAMPLINGS}, got {self.sampling!r}")
        if self.jacobian not in JACOBIAN_MODES:
            raise UserError(f"jacobian must be one of {JACOBIAN_MODES}, got {self.jacobian!r}")
        if int(self.n_resamples) < 1 or int(self.n_jacobian) < 1:
            raise UserError("n_resamples and n_jacobian must be >= 1")
        resolve_loss(self.loss)
        if self.poor_map not in ("fallback", "keep"):
            raise UserError(f"poor_map must be 'fallback' or 'keep', got {self.poor_map!r}")

    def _make_disentangler(self) -> Disentangler:
        if isinstance(self.flow, str):
            if self.flow == "gaussian":
                return GaussianDisentangler()
            if self.flow == "flow":
                kw = dict(self.flow_kwargs or {})
                kw.setdefault("seed", self.seed)
                return FlowDisentangler(**kw)
            raise UserError(f"flow must be 'flow', 'gaussian' or a disentangler instance, got {self.flow!r}")
        for m in ("fit", "encode", "decode", "jacobian"):
            if not callable(getattr(self.flow, m, None)):
                raise UserError(
                    f"a custom disentangler needs a .{m}() method; {type(self.flow).__name__} lacks it"
                )
        return copy.deepcopy(self.flow)

    def fit(self, X_background: Any, y: Any = None) -> FDFI:
        """Fit the disentangler on background data ``[n, d]`` (``y`` is ignored)."""
        self._validate()
        X, names = _as_array(X_background)
        if X.shape[0] < 3:
            raise UserError(f"X_background needs at least 3 rows, got {X.shape[0]}")
        self.n_features_in_ = X.shape[1]
        self.feature_names_in_ = names or [f"x{j}" for j in range(X.shape[1])]
        self.mean_ = X.mean(axis=0) if self.standardize else np.zeros(X.shape[1])
        sd = X.std(axis=0) if self.standardize else np.ones(X.shape[1])
        self.scale_ = np.where(sd > 0, sd, 1.0)
        self.Xs_background_ = self._to_std(X)
        dis = self._make_disentangler()
        if self.fit_disentangler or isinstance(self.flow, str):
            dis = dis.fit(self.Xs_background_)
        self.disentangler_ = dis
        self.__dict__.pop("fallback_", None)  # a Gaussian fallback belongs to the previous background
        self.Z_background_ = self.disentangler_.encode(self.Xs_background_)
        return self

    def _check_fitted(self) -> None:
        check_is_fitted(self, "disentangler_", "fit(X_background)")

    def _to_std(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) / self.scale_

    def _from_std(self, X: np.ndarray) -> np.ndarray:
        return X * self.scale_ + self.mean_

    def _check_X(self, X: Any) -> tuple[np.ndarray, list[str]]:
        arr, names = _as_array(X)
        if arr.shape[1] != self.n_features_in_:
            raise UserError(f"X has {arr.shape[1]} features but FDFI was fitted on {self.n_features_in_}")
        return arr, names or self.feature_names_in_

    # ---- public transforms ----
    def encode(self, X: Any) -> np.ndarray:
        """Features -> independent latents ``[n, d]``."""
        self._check_fitted()
        return self.disentangler_.encode(self._to_std(self._check_X(X)[0]))

    def decode(self, Z: np.ndarray) -> np.ndarray:
        """Latents -> features (raw units)."""
        self._check_fitted()
        return self._from_std(self.disentangler_.decode(np.asarray(Z, dtype=np.float64)))

    def jacobian_weights(self, Z: np.ndarray, *, disentangler: Disentangler | None = None) -> np.ndarray:
        """``W [d, d]`` (or ``[n, d, d]`` for ``per_sample``) with ``u^X = u^Z W^T``: ``W_lk = H_lk^2``."""
        self._check_fitted()
        dz = self.disentangler_ if disentangler is None else disentangler
        Z = np.asarray(Z, dtype=np.float64)
        if self.jacobian == "per_sample":
            return dz.jacobian(Z) ** 2
        m = min(len(Z), int(self.n_jacobian))
        idx = np.linspace(0, len(Z) - 1, m).astype(int)  # evenly spaced points, as in the fdfi package
        H = dz.jacobian(Z[idx])  # [m, d, d]
        return (H**2).mean(axis=0) if self.jacobian == "avg_sq" else H.mean(axis=0) ** 2

    def diagnose(self, X: Any | None = None, *, max_n: int = 500, seed: int = 0) -> dict[str, float]:
        """Latent independence and fidelity on ``X`` (default: the background data), ``max_n`` rows.

        ``latent_dcor_median`` (V-statistic, < 0.10 good), ``latent_dcor2_mean_bias_corrected`` (~0 when
        independent), the largest latent |correlation|; ``mmd_roundtrip``
        = MMD(X, decode(encode(X))) as in the ``fdfi`` package (numerical fidelity, standardised units);
        ``mmd_generative`` = MMD(X, decode(N(0, I) draws)) (does the flow reproduce the data law?).
        """
        self._check_fitted()
        rng = np.random.default_rng(seed)
        Xs_true = self.Xs_background_ if X is None else self._to_std(self._check_X(X)[0])  # standardised
        idx = rng.choice(len(Xs_true), size=min(len(Xs_true), max_n), replace=False)  # same rows throughout
        Xs_true = Xs_true[idx]
        Z = self.disentangler_.encode(Xs_true)
        Xs = self.disentangler_.decode(Z)
        gen = self.disentangler_.decode(rng.standard_normal(Z.shape))
        _, med = latent_independence(Z, max_n=None)
        _, dc2 = latent_independence(Z, max_n=None, bias_corrected=True)
        return {
            "latent_dcor_median": med,
            "latent_dcor2_mean_bias_corrected": dc2,
            "latent_corr_max_abs": float(np.abs(np.corrcoef(Z, rowvar=False) - np.eye(Z.shape[1])).max()),
            "mmd_roundtrip": mmd(Xs_true, Xs, max_n=None),
            "mmd_generative": mmd(Xs_true, gen, max_n=None),
            "roundtrip_max_abs_err": float(np.abs(Xs - Xs_true).max()),
        }

    # ---- importance ----
    def _targets(
        self, y: Any, yhat: np.ndarray, predictor: Any, loss: _Loss
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(target r [n] or [n, C], base loss [n])``; labels are 0/1 or one-hot coded for proba losses."""
        multi = yhat.ndim == 2
        if y is None:
            r = yhat  # label-free: divergence from the model's own prediction
        else:
            y = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
            if y.shape[0] != yhat.shape[0]:
                raise UserError(f"y has {y.shape[0]} rows but X has {yhat.shape[0]}")
            if loss.needs_proba and loss.builtin:
                classes = getattr(predictor, "classes_", None)
                if classes is not None and not np.isin(y, classes).all():
                    raise UserError(f"y has labels outside the predictor's classes_ {list(classes)}")
                codes = np.searchsorted(classes, y) if classes is not None else y.astype(np.int64)
                if multi:
                    r = np.eye(yhat.shape[1])[codes]
                else:
                    r = codes.astype(np.float64)
            else:
                r = y.astype(np.float64)
        return r, loss(r, yhat, multi)

    def _latent_draws(self, Z: np.ndarray, pool: np.ndarray, j: int) -> np.ndarray:
        """Replacement values for latent j: ``[B, n]``."""
        B, n = int(self.n_resamples), Z.shape[0]
        rng = np.random.default_rng(self.seed + j)
        if self.sampling == "resample":
            return pool[rng.choice(pool.shape[0], size=(B, n), replace=True), j]
        if self.sampling == "normal":
            return rng.normal(0.0, 1.0, size=(B, n))
        if self.sampling == "permutation":
            return Z[np.stack([rng.permutation(n) for _ in range(B)]), j]
        # condperm: Z_j ~ Z_-j by least squares on the evaluation points, then permuted residuals
        others = np.delete(Z, j, axis=1)
        A = np.column_stack([np.ones(n), others])
        coef, *_ = np.linalg.lstsq(A, Z[:, j], rcond=None)
        fit = A @ coef
        res = Z[:, j] - fit
        return fit[None, :] + res[np.stack([rng.permutation(n) for _ in range(B)])]

    def ueifs(self, predictor: Any, X: Any, y: Any = None, *, background: Any = None) -> UEIFs:
        """Per-sample UEIFs of every feature for a fitted ``predictor`` on evaluation data ``X``.

        ``background``: rows whose encodings form the resampling pool (default: the fit data). Pass the
        predictor's training fold when cross-fitting, as in the paper's replication code.
        """
        self._check_fitted()
        loss = resolve_loss(self.loss)
        Xa, names = self._check_X(X)
        n, d = Xa.shape
        f = as_predict_fn(predictor, proba=loss.needs_proba and loss.builtin)
        Xs = self._to_std(Xa)
        dz: Disentangler = self.disentangler_
        Zs = dz.encode(Xs)  # [n, d]
        # held-out disentanglement: X is disjoint from the map's fit data when cross-fitting
        dis = heldout_disentanglement(Zs)
        fallback = None
        if dis["poor"] and self.poor_map == "fallback" and not isinstance(dz, GaussianDisentangler):
            fallback = f"{type(dz).__name__} latents correlated on these rows (max |corr| {dis['max_abs_corr']:.3f})"
            if not hasattr(self, "fallback_"):
                self.fallback_ = GaussianDisentangler().fit(self.Xs_background_)
            dz = self.fallback_
            Zs = dz.encode(Xs)
            dis = heldout_disentanglement(Zs)
        pool = dz.encode(self.Xs_background_ if background is None else self._to_std(self._check_X(background)[0]))
        yhat = f(self._from_std(dz.decode(Zs)))  # round-trip reference prediction
        multi = yhat.ndim == 2
        r, base = self._targets(y, yhat, predictor, loss)
        B = int(self.n_resamples)
        z_cpi, z_scpi = np.zeros((n, d)), np.zeros((n, d))
        for j in progress(range(d), desc="fdfi latents", total=d):
            Zt = np.repeat(Zs[None], B, axis=0)  # [B, n, d]
            Zt[:, :, j] = self._latent_draws(Zs, pool, j)
            Xt = self._from_std(dz.decode(Zt.reshape(B * n, d)))
            yt = f(Xt).reshape(B, n, *yhat.shape[1:])  # [B, n] or [B, n, C]
            z_cpi[:, j] = 0.5 * (loss(r[None], yt, multi).mean(axis=0) - base)
            z_scpi[:, j] = loss(r, yt.mean(axis=0), multi) - base
        W = self.jacobian_weights(Zs, disentangler=dz)
        # the Jacobian screen: attribute only through entries larger than the map's measured error
        dropped = 0
        if self.screen_jacobian:
            W, dropped = screen_jacobian_weights(W, dis["mixing_error"])
        if dis["poor"] or fallback:
            msg = [f"fell back to the Gaussian map ({fallback})"] if fallback else []
            if dis["poor"]:
                msg.append(
                    f"latents of the evaluation rows are correlated (max |corr| {dis['max_abs_corr']:.3f} > "
                    f"{dis['r_crit']:.3f}), so the map does not disentangle these data"
                    + (f"; {dropped} Jacobian entries below its error were dropped" if self.screen_jacobian else "")
                )
            log.warning("FDFI: %s", "; ".join(msg))
        dis_info = {k: v for k, v in dis.items() if k != "mixing_error"} | {"screened": dropped, "fallback": fallback}
        if W.ndim == 3:  # per-sample: u^X_il = sum_k W_ilk u_ik
            x_cpi, x_scpi = np.einsum("ilk,ik->il", W, z_cpi), np.einsum("ilk,ik->il", W, z_scpi)
        else:
            x_cpi, x_scpi = z_cpi @ W.T, z_scpi @ W.T
        ref = np.asarray(r if y is not None else yhat, dtype=float).reshape(n, -1)
        y_var = float(ref.var(axis=0, ddof=1).mean()) if n > 1 else 0.0  # Var(y), or mean per-class Var
        self.last_ueifs_ = UEIFs(z_cpi, z_scpi, x_cpi, x_scpi, y_var=y_var, feature_names=list(names),
                                 info={"disentanglement": dis_info})  # fmt: skip
        return self.last_ueifs_

    def importance(
        self,
        predictor: Any,
        X: Any,
        y: Any = None,
        *,
        space: str = "X",
        alpha: float = 0.05,
        alternative: str = "greater",
        correction: str | None = None,
        variance_floor: str | float | None = "paper",
        threshold_null: bool = True,
        n_folds: int = 1,
        background: Any = None,
    ) -> FDFIResult:
        """UEIFs (see :meth:`ueifs`) followed by :func:`~iclr26.flows.fdfi_stats.infer`.

        ``predictor`` must be fitted on data disjoint from ``X`` (else the importance is biased).
        ``space="Z"`` reports latent importance. ``variance_floor="paper"`` uses Var(y) (Var of the
        predictions when ``y`` is None).
        """
        u = self.ueifs(predictor, X, y, background=background)
        return self.infer(u, space=space, alpha=alpha, alternative=alternative, correction=correction,
                          variance_floor=variance_floor, threshold_null=threshold_null, n_folds=n_folds)  # fmt: skip

    def infer(self, u: UEIFs, *, space: str = "X", n_folds: int = 1, **kw: Any) -> FDFIResult:
        """Inference on (possibly fold-stacked) :class:`UEIFs` with this estimator's settings."""
        est = ESTIMATOR_ALIASES.get(self.estimator, self.estimator)
        names = u.feature_names if space == "X" else [f"z{j}" for j in range(len(u.feature_names))]
        res = infer(u.get(est, space), y_var=u.y_var, n_folds=n_folds, feature_names=names,
                    method=f"fdfi-{est}" + ("" if space == "X" else "-latent"), **kw)  # fmt: skip
        if "disentanglement" in u.info:
            res.info["disentanglement"] = u.info["disentanglement"]
        res.info["disentangler"] = (
            type(self.disentangler_).__name__ if hasattr(self, "disentangler_") else None
        )
        return res
