"""Linear probes on activations: logistic and difference-of-means, with the metrics probes are judged by.

- :class:`LinearProbe` — scikit-learn's ``LogisticRegression`` on standardised features (fixed solver and
  ``random_state``), with :meth:`~LinearProbe.direction` mapping the weights back to activation units for
  steering, and :meth:`~LinearProbe.score_sequences` for token-level training with sequence-level scores.
- :class:`DiffMeansProbe` — d = μ₊ − μ₋, score x·d, threshold at the midpoint of the class-mean scores.
- :func:`auroc`, :func:`threshold_at_fpr` (calibrated on a separate control set of negatives),
  :func:`recall_at_fpr`. AUROC and intervals come from :mod:`iclr26.stats` (``auroc`` is re-exported here).
- Baselines: :func:`shuffled_label_probe` (refit on permuted labels), :func:`random_direction_scores`.

Inputs are ``[N, d]`` torch tensors or numpy arrays; labels are 0/1. Scores are numpy float64 arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from iclr26.core.errors import UserError
from iclr26.core.estimators import BaseEstimator, check_is_fitted, clone
from iclr26.stats import auroc  # noqa: F401  (re-exported: probes are scored with it)

__all__ = [
    "DiffMeansProbe",
    "LinearProbe",
    "auroc",
    "random_direction_scores",
    "recall_at_fpr",
    "shuffled_label_probe",
    "threshold_at_fpr",
]


def _as_2d(X: Any, what: str = "X") -> np.ndarray:
    a = X.detach().cpu().double().numpy() if isinstance(X, torch.Tensor) else np.asarray(X, dtype=np.float64)
    if a.ndim != 2:
        raise UserError(f"{what} must be a 2-D array [N, d], got shape {a.shape}")
    return a


def _labels(y: Any, n: int) -> np.ndarray:
    a = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    a = a.reshape(-1)
    if a.shape[0] != n:
        raise UserError(f"y has {a.shape[0]} labels for {n} rows of X")
    vals = set(np.unique(a).tolist())
    if not vals <= {0, 1}:
        raise UserError(f"y must be binary 0/1, got values {sorted(vals)[:5]}")
    if len(vals) < 2:
        raise UserError("y holds only one class; a probe needs both 0 and 1")
    return a.astype(np.int64)


def _penalty_kwargs(penalty: str) -> dict[str, Any]:
    """scikit-learn >= 1.8 names the penalty by ``l1_ratio`` (``penalty`` is deprecated there); older
    versions only know ``penalty``."""
    import sklearn

    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    if (major, minor) >= (1, 8):
        return {"l1_ratio": 1.0 if penalty == "l1" else 0.0}
    return {"penalty": penalty}


class _ProbeMixin:
    """``predict`` / ``score_sequences`` shared by both probes (they define ``decision_function``)."""

    threshold_: float
    coef_: np.ndarray

    def _fitted_rows(self, X: Any) -> np.ndarray:
        """``X`` as ``[N, d]`` float64 after checking that the probe is fitted on d features."""
        check_is_fitted(self, "coef_", "fit(X, y)")
        A = _as_2d(X)
        if A.shape[1] != self.coef_.shape[0]:
            raise UserError(f"X has {A.shape[1]} features, the probe was fitted on {self.coef_.shape[0]}")
        return A

    def predict(self, X: Any) -> np.ndarray:
        return (self.decision_function(X) > self.threshold_).astype(np.int64)  # type: ignore[attr-defined]

    def score_sequences(self, X_tokens: Any, seq_index: Any, agg: str = "mean") -> np.ndarray:
        """Per-sequence scores from per-token rows: ``seq_index[i]`` is the sequence of row ``i`` (ids
        ``0..S-1``); ``agg`` is ``"mean"`` or ``"max"`` of the token decision scores."""
        if agg not in ("mean", "max"):
            raise UserError(f"agg={agg!r}; allowed: mean, max")
        s = self.decision_function(X_tokens)  # type: ignore[attr-defined]
        idx = np.asarray(seq_index.cpu() if isinstance(seq_index, torch.Tensor) else seq_index).reshape(-1)
        if idx.shape[0] != s.shape[0] or (idx.size and (idx.min() < 0 or not np.issubdtype(idx.dtype, np.integer))):
            raise UserError(f"seq_index must hold one non-negative int per token row ({s.shape[0]})")
        n_seq = int(idx.max()) + 1 if idx.size else 0
        if agg == "mean":
            tot = np.bincount(idx, weights=s, minlength=n_seq)
            cnt = np.bincount(idx, minlength=n_seq)
            return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
        out = np.full(n_seq, -np.inf)
        np.maximum.at(out, idx, s)
        return np.where(np.isfinite(out), out, np.nan)


class LinearProbe(_ProbeMixin, BaseEstimator):
    """Logistic-regression probe (scikit-learn) on standardised activations.

    Learned: ``coef_`` ``[d]`` and ``intercept_`` (standardised units), ``mean_``, ``scale_``,
    ``threshold_`` (0: the logistic decision boundary), ``mean_act_norm_`` (mean ‖x‖ seen in fit).
    """

    def __init__(
        self,
        penalty: str = "l2",
        C: float = 1.0,  # noqa: N803 - scikit-learn's name
        fit_intercept: bool = True,
        standardize: bool = True,
        solver: str = "liblinear",
        random_state: int = 0,
        max_iter: int = 1000,
    ):
        self.penalty = penalty
        self.C = C
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.solver = solver
        self.random_state = random_state
        self.max_iter = max_iter

    def fit(self, X: Any, y: Any) -> LinearProbe:
        from sklearn.linear_model import LogisticRegression

        if self.penalty not in ("l1", "l2"):
            raise UserError(f"LinearProbe penalty={self.penalty!r}; allowed: l1, l2")
        if not self.C > 0:
            raise UserError(f"LinearProbe C={self.C} must be > 0")
        A = _as_2d(X)
        lab = _labels(y, A.shape[0])
        self.mean_ = A.mean(0) if self.standardize else np.zeros(A.shape[1])
        sd = A.std(0) if self.standardize else np.ones(A.shape[1])
        self.scale_ = np.where(sd > 0, sd, 1.0)
        Z = (A - self.mean_) / self.scale_
        lr = LogisticRegression(
            **_penalty_kwargs(self.penalty), C=self.C, fit_intercept=self.fit_intercept, solver=self.solver,
            random_state=self.random_state, max_iter=self.max_iter,
        ).fit(Z, lab)
        self.coef_ = lr.coef_.reshape(-1).copy()
        self.intercept_ = float(lr.intercept_[0]) if self.fit_intercept else 0.0
        self.threshold_ = 0.0
        self.mean_act_norm_ = float(np.linalg.norm(A, axis=1).mean())
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        A = self._fitted_rows(X)
        return ((A - self.mean_) / self.scale_) @ self.coef_ + self.intercept_

    def predict_proba(self, X: Any) -> np.ndarray:
        """Probability of class 1, ``[N]``."""
        return 1.0 / (1.0 + np.exp(-self.decision_function(X)))

    def direction(self, units: str = "raw") -> torch.Tensor:
        """Unit vector along which the class-1 score grows: ``"raw"`` in activation units (w / σ, the one
        to steer with; scale it by e.g. ``mean_act_norm_``), ``"standardized"`` in standardised units."""
        check_is_fitted(self, "coef_", "fit(X, y)")
        if units not in ("raw", "standardized"):
            raise UserError(f"units={units!r}; allowed: raw, standardized")
        w = self.coef_ / self.scale_ if units == "raw" else self.coef_
        n = np.linalg.norm(w)
        if n == 0:
            raise UserError("the probe's weights are all zero (e.g. a strong l1 penalty); no direction")
        return torch.from_numpy(w / n).float()


class DiffMeansProbe(_ProbeMixin, BaseEstimator):
    """d = mean(x | y=1) − mean(x | y=0); score x·d; ``threshold_`` = midpoint of the two class-mean scores."""

    def fit(self, X: Any, y: Any) -> DiffMeansProbe:
        A = _as_2d(X)
        lab = _labels(y, A.shape[0])
        mu1, mu0 = A[lab == 1].mean(0), A[lab == 0].mean(0)
        self.coef_ = mu1 - mu0
        self.threshold_ = float(0.5 * (mu1 @ self.coef_ + mu0 @ self.coef_))
        self.mean_act_norm_ = float(np.linalg.norm(A, axis=1).mean())
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        return self._fitted_rows(X) @ self.coef_

    def direction(self, units: str = "raw") -> torch.Tensor:
        """Unit d (activation units; ``units`` is accepted for symmetry with :class:`LinearProbe`)."""
        check_is_fitted(self, "coef_", "fit(X, y)")
        if units not in ("raw", "standardized"):
            raise UserError(f"units={units!r}; allowed: raw, standardized")
        n = np.linalg.norm(self.coef_)
        if n == 0:
            raise UserError("the two classes have identical means; no direction")
        return torch.from_numpy(self.coef_ / n).float()


# ---------------------------------------------------------------------- metrics
def _vec(a: Any, what: str) -> np.ndarray:
    v = np.asarray(a.detach().cpu() if isinstance(a, torch.Tensor) else a, dtype=np.float64).reshape(-1)
    if v.size == 0:
        raise UserError(f"{what} is empty")
    return v


def _check_fpr(fpr: float) -> None:
    if not 0.0 < fpr < 1.0:
        raise UserError(f"fpr={fpr} must lie in (0, 1)")


def threshold_at_fpr(control_scores: Any, fpr: float) -> float:
    """The smallest threshold τ, among the control scores, with at most ``fpr`` of the controls scoring
    strictly above τ (a sample is flagged when its score is > τ)."""
    _check_fpr(fpr)
    c = np.sort(_vec(control_scores, "control_scores"))
    allowed = int(np.floor(fpr * c.size + 1e-12))  # controls allowed above the threshold
    return float(c[c.size - 1 - allowed])


def recall_at_fpr(pos_scores: Any, control_scores: Any, fpr: float = 0.01) -> float:
    """Share of positives scoring above the threshold calibrated on the controls at ``fpr``."""
    tau = threshold_at_fpr(control_scores, fpr)
    return float((_vec(pos_scores, "pos_scores") > tau).mean())


# ---------------------------------------------------------------------- baselines
def shuffled_label_probe(probe: BaseEstimator, X: Any, y: Any, seed: int = 0) -> BaseEstimator:
    """A fresh clone of ``probe`` fitted on a seeded permutation of the labels (the chance baseline)."""
    lab = _labels(y, _as_2d(X).shape[0])
    perm = np.random.default_rng(seed).permutation(lab.shape[0])
    return clone(probe).fit(X, lab[perm])


def random_direction_scores(X: Any, n: int = 100, seed: int = 0) -> np.ndarray:
    """Scores ``[n, N]`` of the rows of ``X`` along ``n`` seeded random unit directions (percentile bands)."""
    if n < 1:
        raise UserError(f"random_direction_scores: n={n} must be >= 1")
    A = _as_2d(X)
    R = np.random.default_rng(seed).standard_normal((n, A.shape[1]))
    R /= np.linalg.norm(R, axis=1, keepdims=True)
    return R @ A.T
