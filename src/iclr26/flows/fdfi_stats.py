"""Inference and diagnostics for FDFI (*Flow-Disentangled Feature Importance*, ICLR 2026, OpenReview Fx8AtzGlTS).

Given per-sample uncentred influence values ``u [n, d]`` (UEIFs) of any importance method, the
estimate is ``phi_j = mean_i u_ij`` and its standard error comes from ``sd_i(u_ij)`` plus a
variance floor that keeps near-zero-variance nulls from producing huge z-scores. Wald intervals,
one- or two-sided normal p-values and Benjamini-Hochberg / Holm / Bonferroni corrections follow.
Latent-independence (distance correlation) and fidelity (MMD) diagnostics live here too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

__all__ = [
    "FDFIResult",
    "infer",
    "paper_variance_floor",
    "mixture_se_floor",
    "adjust_pvalues",
    "distance_correlation_matrix",
    "latent_independence",
    "mmd",
    "heldout_disentanglement",
    "screen_jacobian_weights",
]

ALTERNATIVES = ("greater", "two-sided", "less")
CORRECTIONS = (None, "bh", "holm", "bonferroni")


# --------------------------------------------------------------------------------------------------
# multiple testing
# --------------------------------------------------------------------------------------------------
def adjust_pvalues(p: np.ndarray, method: str | None) -> np.ndarray:
    """Adjusted p-values: ``"bh"`` (Benjamini-Hochberg step-up), ``"holm"`` (step-down),
    ``"bonferroni"``, or ``None`` (unchanged). Reject where the adjusted value is ``<= alpha``."""
    p = np.asarray(p, dtype=float)
    if method is None:
        return p.copy()
    m = p.size
    if m == 0:
        return p.copy()
    if method == "bonferroni":
        return np.minimum(p * m, 1.0)
    order = np.argsort(p, kind="stable")
    ps = p[order]
    if method == "bh":
        # q_(i) = min_{k >= i} p_(k) m / k  (running minimum from the largest p down)
        q = ps * m / np.arange(1, m + 1)
        q = np.minimum.accumulate(q[::-1])[::-1]
    elif method == "holm":
        # q_(i) = max_{k <= i} (m - k + 1) p_(k)  (running maximum from the smallest p up)
        q = np.maximum.accumulate(ps * (m - np.arange(m)))
    else:
        raise UserError(f"unknown correction {method!r}; allowed: bh, holm, bonferroni, None")
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out


# --------------------------------------------------------------------------------------------------
# variance floors
# --------------------------------------------------------------------------------------------------
def paper_variance_floor(y_var: float, d: int) -> float:
    """Floor added to each UEIF variance in the paper's Experiment 1: ``min(v^.5, v, v^2, v^4) / d^2``."""
    v = float(y_var)
    if not np.isfinite(v) or v < 0:
        raise UserError(f"variance floor needs a finite, non-negative Var(y), got {y_var}")
    return min(np.sqrt(v), v, v**2, v**4) / d**2


def mixture_se_floor(se: np.ndarray, quantile: float = 0.95, seed: int = 0) -> float:
    """SE floor of the ``fdfi`` package: fit a 2-component Gaussian mixture to the per-feature SEs
    and take the ``quantile`` of the component with the smaller mean (median + MAD when < 10 SEs)."""
    se = np.asarray(se, dtype=float).ravel()
    z = norm.ppf(quantile)
    if se.size < 10 or np.ptp(se) == 0:
        med = float(np.median(se))
        mad = float(np.median(np.abs(se - med)) * 1.4826)
        return med + z * mad
    from sklearn.mixture import GaussianMixture

    gm = GaussianMixture(n_components=2, random_state=seed).fit(se.reshape(-1, 1))
    k = int(np.argmin(gm.means_.ravel()))
    return float(gm.means_.ravel()[k] + z * np.sqrt(gm.covariances_.ravel()[k]))


# --------------------------------------------------------------------------------------------------
# the result object
# --------------------------------------------------------------------------------------------------
@dataclass
class FDFIResult:
    """Per-feature importance with inference. Arrays are ``[d]``; ``ueifs`` is ``[n, d]``.

    ``ci_low``/``ci_high`` are the Wald bounds matching ``alternative`` (one-sided by default, so
    ``ci_high = inf``); :meth:`interval` gives a two-sided interval at any level.
    """

    feature_names: list[str]
    importance: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    zscore: np.ndarray
    pvalue: np.ndarray
    pvalue_adj: np.ndarray
    rejected: np.ndarray
    alpha: float
    alternative: str
    correction: str | None
    variance_floor: float
    n: int
    n_folds: int
    method: str = "fdfi-cpi"
    ueifs: np.ndarray | None = field(default=None, repr=False)
    info: dict[str, Any] = field(default_factory=dict, repr=False)

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Two-sided Wald interval ``importance +- z_{(1+level)/2} se``."""
        z = norm.ppf(0.5 + level / 2)
        return self.importance - z * self.se, self.importance + z * self.se

    def _columns(self) -> dict[str, np.ndarray]:
        return {
            "importance": self.importance, "se": self.se, "ci_low": self.ci_low, "ci_high": self.ci_high,
            "pvalue": self.pvalue, "pvalue_adj": self.pvalue_adj, "rejected": self.rejected,
        }  # fmt: skip

    def to_dict(self) -> dict[str, list]:
        """JSON-safe columns (infinite interval ends become ``None``)."""
        out: dict[str, list] = {"feature": [str(f) for f in self.feature_names]}
        for k, v in self._columns().items():
            out[k] = v.tolist() if v.dtype == bool else [float(x) if np.isfinite(x) else None for x in v]
        return out

    def to_frame(self):
        """A pandas DataFrame indexed by feature (pandas must be installed)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - pandas is optional
            raise UserError("to_frame() needs pandas; install it or use .table()") from e
        return pd.DataFrame(self._columns(), index=pd.Index(list(self.feature_names), name="feature"))

    def table(self, top: int | None = None) -> str:
        """Plain-text table sorted by importance (``top`` rows, default all)."""
        order = np.argsort(-self.importance, kind="stable")[: top or None]
        p_name = "p_adj" if self.correction else "p"
        w = max(7, *(len(str(self.feature_names[i])) for i in order))
        lines = [
            f"{self.method}: n={self.n}, folds={self.n_folds}, alpha={self.alpha}, {self.alternative}"
            + (f", {self.correction}" if self.correction else ""),
            f"{'feature':<{w}} {'estimate':>10} {'se':>9} {'ci_low':>10} {'ci_high':>10} {p_name:>8}  rej",
        ]
        p = self.pvalue_adj if self.correction else self.pvalue
        for i in order:
            lines.append(
                f"{self.feature_names[i]!s:<{w}} {self.importance[i]:>10.4g} {self.se[i]:>9.3g} "
                f"{self.ci_low[i]:>10.4g} {self.ci_high[i]:>10.4g} {p[i]:>8.3g}  {'*' if self.rejected[i] else ''}"
            )
        lines.append(f"rejected {int(self.rejected.sum())} / {len(self.rejected)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def infer(
    ueifs: np.ndarray,
    *,
    y: np.ndarray | None = None,
    y_var: float | None = None,
    alpha: float = 0.05,
    alternative: str = "greater",
    variance_floor: str | float | None = "paper",
    n_folds: int = 1,
    threshold_null: bool = True,
    margin: float = 0.0,
    correction: str | None = None,
    feature_names: list[str] | None = None,
    method: str = "fdfi-cpi",
) -> FDFIResult:
    """Estimates, SEs, Wald intervals, p-values and rejections from UEIFs ``[n, d]``.

    variance_floor: ``"paper"`` (Experiment 1: ``c = min(v^.5, v, v^2, v^4)/d^2`` added to each
    variance, ``v = Var(y)``; needs ``y`` or ``y_var``), ``"mixture"`` (the ``fdfi`` package's default SE floor),
    a float ``c`` added to each variance, or ``None``.
    n_folds: ``K`` of cross-fitting; the SE is divided by ``sqrt((K-1)/K)`` when ``K > 1``, as in
    the paper's replication code.
    threshold_null: columns whose mean is negative are set to 0 first (estimate 0, p = 0.5).
    """
    u = np.asarray(ueifs, dtype=float)
    if u.ndim != 2 or u.shape[0] < 2:
        raise UserError(f"ueifs must be [n >= 2, d], got shape {u.shape}")
    if alternative not in ALTERNATIVES:
        raise UserError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    if correction not in CORRECTIONS:
        raise UserError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    if not 0 < alpha < 1:
        raise UserError(f"alpha must be in (0, 1), got {alpha}")
    if n_folds < 1:
        raise UserError(f"n_folds must be >= 1, got {n_folds}")
    n, d = u.shape
    if threshold_null:
        u = u.copy()
        u[:, u.mean(axis=0) < 0] = 0.0
    est = u.mean(axis=0)
    var = u.var(axis=0, ddof=1)
    root_n = np.sqrt(n * ((n_folds - 1) / n_folds if n_folds > 1 else 1.0))
    floor_c = 0.0
    if variance_floor == "paper":
        if y_var is None:
            if y is None:
                raise UserError(
                    "variance_floor='paper' needs y or y_var (it scales with Var(y)); or pass a float"
                )
            y_var = float(np.var(np.asarray(y, dtype=float), ddof=1))
        floor_c = paper_variance_floor(y_var, d)
        se = np.sqrt(var + floor_c) / root_n
    elif variance_floor == "mixture":
        se_raw = np.sqrt(var) / root_n
        f = mixture_se_floor(se_raw)
        floor_c = (f * root_n) ** 2
        se = np.sqrt(se_raw**2 + f**2)
    elif variance_floor is None:
        se = np.sqrt(var) / root_n
    elif isinstance(variance_floor, (int, float)) and variance_floor >= 0:
        floor_c = float(variance_floor)
        se = np.sqrt(var + floor_c) / root_n
    else:
        raise UserError(
            f"variance_floor must be 'paper', 'mixture', a float >= 0 or None, got {variance_floor!r}"
        )
    se = np.maximum(se, 1e-12)
    z = (est - margin) / se
    if alternative == "greater":
        p = norm.sf(z)
        q = norm.ppf(1 - alpha)
        lo, hi = est - q * se, np.full(d, np.inf)
    elif alternative == "less":
        p = norm.cdf(z)
        q = norm.ppf(1 - alpha)
        lo, hi = np.full(d, -np.inf), est + q * se
    else:
        p = 2 * norm.sf(np.abs(z))
        q = norm.ppf(1 - alpha / 2)
        lo, hi = est - q * se, est + q * se
    p_adj = adjust_pvalues(p, correction)
    rejected = p_adj <= alpha if correction else p < alpha
    names = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]
    if len(names) != d:
        raise UserError(f"feature_names has {len(names)} entries for {d} features")
    return FDFIResult(
        feature_names=names, importance=est, se=se, ci_low=lo, ci_high=hi, zscore=z, pvalue=p,
        pvalue_adj=p_adj, rejected=np.asarray(rejected, dtype=bool), alpha=alpha, alternative=alternative,
        correction=correction, variance_floor=floor_c, n=n, n_folds=n_folds, method=method, ueifs=u,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------------
# diagnostics
# --------------------------------------------------------------------------------------------------
def _subsample(X: np.ndarray, max_n: int | None, seed: int) -> np.ndarray:
    if max_n is not None and X.shape[0] > max_n:
        idx = np.random.default_rng(seed).choice(X.shape[0], size=max_n, replace=False)
        return X[idx]
    return X


def distance_correlation_matrix(Z: np.ndarray, *, bias_corrected: bool = False) -> np.ndarray:
    """Pairwise dependence ``[d, d]`` between the columns of ``Z [n, d]`` (diagonal 1).

    ``bias_corrected=False``: the V-statistic distance correlation of Szekely et al. (2007), as in the
    ``fdfi`` package; it has a positive bias of order n^-1/2 under independence.
    ``bias_corrected=True``: the U-centred bias-corrected squared dCor (Szekely & Rizzo 2014), left
    signed — its mean over pairs is ~0 under independence, so small dependence is visible.
    """
    Z = np.asarray(Z, dtype=np.float64)
    n, d = Z.shape
    if n < 4:
        raise UserError(f"distance correlation needs n >= 4 rows, got {n}")
    cent = np.empty((d, n * n))
    for j in range(d):
        a = np.abs(Z[:, j, None] - Z[None, :, j])  # [n, n]
        if bias_corrected:
            rs = a.sum(axis=1, keepdims=True)
            A = a - rs / (n - 2) - rs.T / (n - 2) + a.sum() / ((n - 1) * (n - 2))
            np.fill_diagonal(A, 0.0)
        else:
            rm = a.mean(axis=1, keepdims=True)
            A = a - rm - rm.T + a.mean()
        cent[j] = A.ravel()
    dcov2 = cent @ cent.T / (n * (n - 3) if bias_corrected else n * n)  # [d, d]
    diag = np.clip(np.diag(dcov2), 0.0, None)
    den = np.sqrt(np.outer(diag, diag))
    out = np.zeros((d, d))
    ok = den > 0
    if bias_corrected:
        out[ok] = dcov2[ok] / den[ok]
    else:
        out[ok] = np.sqrt(np.clip(dcov2[ok] / den[ok], 0.0, None))
    np.fill_diagonal(out, 1.0)
    return out


def latent_independence(
    Z: np.ndarray, *, max_n: int | None = 500, seed: int = 0, bias_corrected: bool = False
) -> tuple[np.ndarray, float]:
    """``(matrix [d, d], summary)``: the median off-diagonal V-statistic dCor (< 0.10 good, < 0.25
    moderate, the ``fdfi`` package's labels), or with ``bias_corrected`` the mean off-diagonal
    bias-corrected dCor^2 (~0 for independent latents)."""
    Z = _subsample(np.asarray(Z, dtype=float), max_n, seed)
    d = Z.shape[1]
    if d < 2:
        return np.ones((1, 1)), 0.0
    m = distance_correlation_matrix(Z, bias_corrected=bias_corrected)
    off = m[~np.eye(d, dtype=bool)]
    return m, float(off.mean() if bias_corrected else np.median(off))


def mmd(
    X: np.ndarray, Y: np.ndarray, *, sigma: float = 1.0, max_n: int | None = 1000, seed: int = 0
) -> float:
    """Biased (V-statistic) Gaussian-kernel MMD between samples ``X [n, d]`` and ``Y [m, d]``: the square root
    of :func:`iclr26.stats.mmd2_rbf` with one bandwidth ``sigma``, on at most ``max_n`` rows of each."""
    from iclr26.stats import mmd2_rbf

    X = _subsample(np.asarray(X, dtype=np.float64), max_n, seed)
    Y = _subsample(np.asarray(Y, dtype=np.float64), max_n, seed + 1)
    if X.shape[1] != Y.shape[1]:
        raise UserError(f"mmd: feature counts differ ({X.shape[1]} vs {Y.shape[1]})")
    return float(np.sqrt(max(mmd2_rbf(X, Y, bandwidths=[sigma], unbiased=False), 0.0)))


# --------------------------------------------------------------------------------------------------
# held-out disentanglement and the Jacobian screen (honest attribution when the map is imperfect)
# --------------------------------------------------------------------------------------------------
def heldout_disentanglement(Z: np.ndarray, *, alpha: float = 0.05) -> dict[str, Any]:
    """Linear independence check of latents ``Z [n, d]`` encoded from rows the map was *not* fitted on.

    With a correct map the off-diagonal latent correlations are pure sampling noise, ``~ N(0, 1/n)``;
    ``r_crit = z_{1 - alpha / (2m)} / sqrt(n)`` (Bonferroni over the ``m = d(d-1)/2`` pairs) bounds their
    largest absolute value with probability ``>= 1 - alpha``. ``poor`` is ``max_abs_corr > r_crit``.
    ``mixing_error [d]`` is the per-latent RMS of ``(R - I) / 2``: to first order a map whose latents
    have correlation ``R`` is off by ``H E`` in its Jacobian with ``E = (R - I) / 2``, so this is the
    scale of the Jacobian error (map error plus held-out sampling noise, never less than the latter).
    """
    Z = np.asarray(Z, dtype=float)
    n, d = Z.shape
    if n < 4 or d < 2:
        return {"n": n, "max_abs_corr": 0.0, "rms_corr": 0.0, "r_crit": np.inf, "poor": False,
                "mixing_error": np.zeros(d)}  # fmt: skip
    sd = Z.std(axis=0)
    R = np.corrcoef(Z, rowvar=False) if np.all(sd > 0) else np.eye(d)
    off = R - np.eye(d)
    m = d * (d - 1) / 2
    r_crit = float(norm.ppf(1 - alpha / (2 * m)) / np.sqrt(n))
    max_abs = float(np.abs(off).max())
    return {
        "n": n,
        "max_abs_corr": max_abs,
        "rms_corr": float(np.sqrt((off**2).sum() / (d * (d - 1)))),
        "r_crit": r_crit,
        "poor": bool(max_abs > r_crit),
        "mixing_error": np.sqrt((off**2).sum(axis=1) / (d - 1)) / 2,
    }


def screen_jacobian_weights(
    W: np.ndarray, mixing_error: np.ndarray, *, level: float = 0.05
) -> tuple[np.ndarray, int]:
    """Drop Jacobian weights ``W_lk = H_lk^2`` that the map cannot tell apart from zero.

    ``W`` is ``[d, d]`` or per-sample ``[n, d, d]`` (the decision then uses the mean over samples).
    The Jacobian error of row l is estimated as ``s_l = sqrt(sum_m |H_lm|^2 e_m^2)`` from the held-out
    ``mixing_error`` ``e`` (see :func:`heldout_disentanglement`); an entry is kept when
    ``|H_lk| > c s_l`` with ``c = z_{1 - level / (2 d^2)}`` (Bonferroni over entries), else set to 0.
    Squared noise is positive, so without this screen a feature that no latent really moves picks up
    a little of every important latent and its zero-margin test rejects far above ``alpha``.
    Returns ``(screened W, number of entries dropped)``.
    """
    W = np.asarray(W, dtype=float)
    Wm = W.mean(axis=0) if W.ndim == 3 else W
    d = Wm.shape[0]
    e = np.asarray(mixing_error, dtype=float)
    if e.shape != (d,):
        raise UserError(f"mixing_error must have shape ({d},), got {e.shape}")
    c = float(norm.ppf(1 - level / (2 * d * d)))
    s = np.sqrt(Wm @ e**2)  # [d]: per-row Jacobian error scale (|H|^2 = W)
    keep = np.sqrt(np.clip(Wm, 0.0, None)) > c * s[:, None]
    dropped = int((~keep & (Wm > 0)).sum())
    return (W * keep if W.ndim == 2 else W * keep[None]), dropped
