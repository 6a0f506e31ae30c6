"""Cross-fitting and the baselines FDFI is compared with (*Flow-Disentangled Feature Importance*, ICLR 2026).

Every method here returns per-sample uncentred influence values ``u [n, d]`` on held-out folds, so
one inference rule (:func:`iclr26.flows.fdfi_stats.infer`) serves all of them:

* :func:`fdfi_crossfit` — FDFI / DFI-OT with a predictor fitted on the other folds; the latent
  resampling pool is the training fold's encoding (as in the paper's replication code).
* :func:`loco_ueifs` — leave-one-covariate-out with refitting: ``L(y, f_-j(x_-j)) - L(y, f(x))``.
* :func:`conditional_permutation_ueifs` — CPI with ``X_j | X_-j`` from a LassoLarsIC (BIC) fit on
  standardised features, permuted residuals: ``1/2 mean_b [L(y, f(x~_b)) - L(y, f(x))]``; with
  ``conditional="marginal"`` it is plain permutation importance on the same scale.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.linear_model import LassoLarsIC
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from iclr26.core.errors import UserError
from iclr26.core.progress import progress
from iclr26.flows.fdfi import FDFI, UEIFs, as_predict_fn, resolve_loss

log = logging.getLogger(__name__)

__all__ = ["Fold", "kfold_fit", "fdfi_crossfit", "loco_ueifs", "conditional_permutation_ueifs"]


@dataclass
class Fold:
    """One cross-fitting fold: ``model`` was fitted on ``train`` and is evaluated on ``test``."""

    train: np.ndarray
    test: np.ndarray
    model: Any


def _new_model(model: Any) -> Any:
    """A fresh unfitted model: sklearn estimators are cloned, factories are called."""
    if hasattr(model, "get_params"):
        return clone(model)
    if callable(model):
        return model()
    raise UserError(
        f"model must be an sklearn estimator or a zero-argument factory, got {type(model).__name__}"
    )


def kfold_fit(model: Any, X: np.ndarray, y: np.ndarray, *, n_folds: int = 2, seed: int = 0,
              stratify: bool = False) -> list[Fold]:  # fmt: skip
    """Fit a fresh copy of ``model`` on each set of ``n_folds - 1`` folds."""
    if n_folds < 2:
        raise UserError(f"cross-fitting needs n_folds >= 2, got {n_folds}")
    split = (StratifiedKFold if stratify else KFold)(n_splits=n_folds, shuffle=True, random_state=seed)
    folds = []
    for tr, te in split.split(X, y):
        folds.append(Fold(tr, te, _new_model(model).fit(X[tr], y[tr])))
    return folds


def _check_cover(folds: list[Fold], n: int) -> np.ndarray:
    order = np.concatenate([f.test for f in folds])
    if len(order) != n or len(np.unique(order)) != n:
        raise UserError("folds must partition the rows: every row in exactly one test fold")
    return order


def fdfi_crossfit(est: FDFI, folds: list[Fold], X: np.ndarray, y: np.ndarray | None) -> UEIFs:
    """FDFI UEIFs on every held-out fold; ``est`` must already be fitted (e.g. on auxiliary data).

    Rows come back in the original order; ``y_var`` is Var(y) over all rows.
    """
    order = _check_cover(folds, len(X))
    parts = [
        est.ueifs(f.model, X[f.test], None if y is None else y[f.test], background=X[f.train]) for f in folds
    ]
    u = UEIFs.concat(parts, order)
    if y is not None and np.asarray(y).dtype.kind in "if":
        u.y_var = float(np.var(np.asarray(y, dtype=float), ddof=1))
    return u


def _targets(y: np.ndarray, pred: np.ndarray, model: Any, needs_proba: bool) -> np.ndarray:
    if not needs_proba:
        return np.asarray(y, dtype=float)
    classes = getattr(model, "classes_", None)
    codes = np.searchsorted(classes, y) if classes is not None else np.asarray(y).astype(np.int64)
    return np.eye(pred.shape[1])[codes] if pred.ndim == 2 else codes.astype(float)


def loco_ueifs(
    model: Any,
    X: np.ndarray,
    y: np.ndarray,
    folds: list[Fold],
    *,
    loss: str | Callable = "squared_error",
    features: list[int] | None = None,
) -> np.ndarray:
    """LOCO with refitting: for feature j refit ``model`` on the training fold without column j.

    Returns ``[n, d]``; columns not in ``features`` stay 0.
    """
    lo = resolve_loss(loss)
    proba = lo.needs_proba and lo.builtin
    n, d = X.shape
    _check_cover(folds, n)
    feats = range(d) if features is None else features
    u = np.zeros((n, d))
    for f in progress(folds, desc="loco folds"):
        Xte, yte = X[f.test], y[f.test]
        pred = as_predict_fn(f.model, proba=proba)(Xte)
        r = _targets(yte, pred, f.model, proba)
        base = lo(r, pred, pred.ndim == 2)
        for j in feats:
            keep = np.delete(np.arange(d), j)
            red = _new_model(model).fit(X[f.train][:, keep], y[f.train])
            pj = as_predict_fn(red, proba=proba)(Xte[:, keep])
            u[f.test, j] = lo(r, pj, pj.ndim == 2) - base
    return u


def conditional_permutation_ueifs(
    X: np.ndarray,
    y: np.ndarray,
    folds: list[Fold],
    *,
    loss: str | Callable = "squared_error",
    n_resamples: int = 10,
    seed: int = 0,
    conditional: Any = None,
) -> np.ndarray:
    """Conditional permutation importance (CPI) on held-out folds, ``[n, d]``.

    ``conditional`` (default ``StandardScaler + LassoLarsIC(criterion="bic")``) models ``X_j | X_-j``;
    like the paper's replication code it is fitted on the evaluation fold itself.
    ``conditional="marginal"`` gives plain (marginal) permutation importance with the same scaling.
    """
    lo = resolve_loss(loss)
    proba = lo.needs_proba and lo.builtin
    n, d = X.shape
    _check_cover(folds, n)
    marginal = isinstance(conditional, str) and conditional == "marginal"
    if isinstance(conditional, str) and not marginal:
        raise UserError(f"conditional must be an sklearn regressor, None or 'marginal', got {conditional!r}")
    cond = (
        conditional
        if conditional is not None
        else make_pipeline(StandardScaler(), LassoLarsIC(criterion="bic"))
    )
    u = np.zeros((n, d))
    B = int(n_resamples)
    for f in progress(folds, desc="cpi folds"):
        Xte, yte = X[f.test], y[f.test]
        m = len(f.test)
        fn = as_predict_fn(f.model, proba=proba)
        pred = fn(Xte)
        r = _targets(yte, pred, f.model, proba)
        multi = pred.ndim == 2
        base = lo(r, pred, multi)
        group = max(1, 200_000 // (B * m))  # features per batched predict (bounds memory)
        for g0 in range(0, d, group):
            js = range(g0, min(d, g0 + group))
            Xt = np.repeat(Xte[None, None], len(js), axis=0).repeat(B, axis=1)  # [g, B, m, d]
            for gi, j in enumerate(js):
                if marginal:
                    fit, res = np.zeros(m), Xte[:, j]
                else:
                    others = np.delete(Xte, j, axis=1)
                    fit = clone(cond).fit(others, Xte[:, j]).predict(others)
                    res = Xte[:, j] - fit
                rng = np.random.default_rng(seed + 1_000_003 * j)
                Xt[gi, :, :, j] = fit[None] + res[np.stack([rng.permutation(m) for _ in range(B)])]
            pt = fn(Xt.reshape(-1, d)).reshape(len(js), B, m, *pred.shape[1:])
            for gi, j in enumerate(js):
                u[f.test, j] = 0.5 * (lo(r[None], pt[gi], multi).mean(axis=0) - base)
    return u
