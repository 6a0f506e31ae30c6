"""Mutual-information proxies for unlearnable examples (P4).

- :func:`within_class_covariance`: the paper's mechanism, mean over classes of tr Cov(g/|g| | y).
- :func:`gaussian_mi`: I(X; Y) of paired features under a joint Gaussian, after projecting both onto
  ``q`` PCA directions fitted on X and Y together: 1/2 [log det S_X + log det S_Y - log det S_XY].
- :func:`ksg_mi`: the Kraskov-Stoegbauer-Grassberger kNN estimate (algorithm 1) on the same
  projection, with scikit-learn's neighbour searches (the same construction scikit-learn uses for
  its scalar ``mutual_info_regression``).
- :func:`feature_label_mi`: sum over the ``q`` PCA components of scikit-learn's
  ``mutual_info_classif`` against the labels.

All estimators are biased at small N; compare orderings at equal N, q and k, not absolute values.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import digamma

from iclr26.core.errors import UserError


def _as_np(a: torch.Tensor | np.ndarray, name: str) -> np.ndarray:
    a = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    if a.ndim != 2 or a.shape[0] < 2:
        raise UserError(f"{name} must be a 2-d array [N, D] with N >= 2; got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise UserError(f"{name} contains non-finite values")
    return a.astype(np.float64)


def within_class_covariance(features: torch.Tensor | np.ndarray, y: torch.Tensor | np.ndarray,
                            *, normalize: bool = True) -> float:
    """Mean over classes of the trace of the within-class covariance (ddof 1) of the (L2-normalised) features.

    Classes with a single sample are skipped (their covariance is undefined).
    """
    F_ = _as_np(features, "features")
    y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if y.ndim != 1 or len(y) != len(F_):
        raise UserError(f"y must be labels [N] with N = {len(F_)}; got shape {y.shape}")
    if normalize:
        F_ = F_ / np.maximum(np.linalg.norm(F_, axis=1, keepdims=True), 1e-12)
    traces = [F_[y == c].var(axis=0, ddof=1).sum() for c in np.unique(y) if (y == c).sum() > 1]
    if not traces:
        raise UserError("within_class_covariance needs at least one class with two or more samples")
    return float(np.mean(traces))


def joint_pca(X: torch.Tensor | np.ndarray, Y: torch.Tensor | np.ndarray, q: int = 8
              ) -> tuple[np.ndarray, np.ndarray]:
    """Project paired features ``X``, ``Y`` [N, D] onto the top ``q`` principal directions of [X; Y]."""
    from sklearn.decomposition import PCA

    X, Y = _as_np(X, "X"), _as_np(Y, "Y")
    if X.shape != Y.shape:
        raise UserError(f"X and Y must be paired features of the same shape; got {X.shape}, {Y.shape}")
    q = int(q)
    if q < 1:
        raise UserError(f"q must be >= 1; got {q}")
    q = min(q, X.shape[1], 2 * X.shape[0] - 1)
    pca = PCA(n_components=q, svd_solver="full").fit(np.concatenate([X, Y]))
    return pca.transform(X), pca.transform(Y)


def gaussian_mi(X, Y, q: int = 8, ridge: float = 1e-4) -> float:
    """Gaussian mutual information (nats) of paired features on their joint ``q``-d PCA projection.

    ``ridge`` x (mean variance) is added to every covariance diagonal so that identical X and Y give a
    large finite value instead of infinity.
    """
    Xp, Yp = joint_pca(X, Y, q)
    Z = np.concatenate([Xp, Yp], axis=1)
    S = np.cov(Z, rowvar=False)
    S = S + np.eye(len(S)) * ridge * max(np.trace(S) / len(S), 1e-12)
    d = Xp.shape[1]

    def logdet(M: np.ndarray) -> float:
        return float(np.linalg.slogdet(M)[1])

    return 0.5 * (logdet(S[:d, :d]) + logdet(S[d:, d:]) - logdet(S))


def ksg_mi(X, Y, k: int = 3, q: int | None = 8, seed: int = 0) -> float:
    """KSG estimate (algorithm 1, max-norm) of I(X; Y) in nats; ``q=None`` skips the PCA projection.

    psi(k) + psi(N) - <psi(n_x + 1) + psi(n_y + 1)>, where n_x, n_y count the points strictly
    within each sample's k-th-neighbour distance in the joint space. A 1e-10-scale jitter breaks ties.
    """
    from sklearn.neighbors import KDTree, NearestNeighbors

    if q is None:
        Xp, Yp = _as_np(X, "X"), _as_np(Y, "Y")
        if len(Xp) != len(Yp):
            raise UserError(f"X and Y must have the same number of rows; got {len(Xp)}, {len(Yp)}")
    else:
        Xp, Yp = joint_pca(X, Y, q)
    n = len(Xp)
    if not 1 <= k < n:
        raise UserError(f"k must be in [1, N-1] = [1, {n - 1}]; got {k}")
    rng = np.random.default_rng(seed)
    scale = lambda A: A / max(float(A.std()), 1e-12)  # noqa: E731
    Xp = scale(Xp) + 1e-10 * rng.standard_normal(Xp.shape)
    Yp = scale(Yp) + 1e-10 * rng.standard_normal(Yp.shape)
    Z = np.concatenate([Xp, Yp], axis=1)
    nn = NearestNeighbors(metric="chebyshev", n_neighbors=k).fit(Z)
    radius = nn.kneighbors()[0][:, -1]
    radius = np.nextafter(radius, 0)  # strictly inside
    nx = KDTree(Xp, metric="chebyshev").query_radius(Xp, radius, count_only=True, return_distance=False)
    ny = KDTree(Yp, metric="chebyshev").query_radius(Yp, radius, count_only=True, return_distance=False)
    mi = digamma(k) + digamma(n) - np.mean(digamma(nx) + digamma(ny))  # counts include the point itself
    return float(max(mi, 0.0))


def feature_label_mi(features, y, q: int = 8, seed: int = 0) -> float:
    """Sum over the top-``q`` PCA components of ``features`` of scikit-learn's ``mutual_info_classif`` with y."""
    from sklearn.decomposition import PCA
    from sklearn.feature_selection import mutual_info_classif

    F_ = _as_np(features, "features")
    y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if y.ndim != 1 or len(y) != len(F_):
        raise UserError(f"y must be labels [N] with N = {len(F_)}; got shape {y.shape}")
    q = max(1, min(int(q), F_.shape[1], len(F_) - 1))
    P = PCA(n_components=q, svd_solver="full").fit_transform(F_)
    return float(mutual_info_classif(P, y, n_neighbors=3, random_state=seed).sum())
