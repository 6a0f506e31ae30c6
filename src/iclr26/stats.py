"""The one home for the statistics that claims are decided with.

Every interval, test and baseline a reproduction reports goes through here, so that one NaN policy and
one meaning of "95 % interval" hold across the nineteen papers. Where a well-kept library does the work
this module only wraps it: ``scipy.stats.bootstrap`` (percentile and paired bootstraps),
``scipy.stats.permutation_test``, ``scipy.stats.binomtest`` (sign test), ``scipy.stats.spearmanr``,
``scipy.stats.t`` and scikit-learn's ``roc_auc_score`` / ``roc_curve``. The cluster bootstrap (resample
the independent unit: seed, topic, scene, fact, noun) and the random-baseline quantile are written here.

**The estimate type.** :class:`Est` is a value with its interval and the unit the interval was resampled
over (``"seed"``, ``"topic"``, ``"item"``, ...; ``"exact"`` for a quantity without sampling noise, whose
interval is the value itself). Claims (:mod:`iclr26.claims`) are decided on an ``Est``.

**NaN policy.** A statistic that is undefined on its input (one class for AUROC, a constant vector for a
rank correlation, fewer than two values for a t-interval) returns NaN; it never raises for that reason and
never substitutes 0 or 0.5. Bootstrap resamples on which the statistic is undefined are dropped; if fewer
than half of them remain, the interval is NaN. A claim whose estimate or interval is NaN is
``inconclusive`` (:mod:`iclr26.claims`). Malformed input (wrong shapes, too few draws for a baseline) is
a :class:`~iclr26.core.errors.UserError` with one line saying what is allowed.

All resampling takes an explicit ``seed``; nothing reads global random state.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

__all__ = [
    "Est",
    "exact",
    "t_interval",
    "mean_over",
    "bootstrap",
    "paired_bootstrap",
    "cluster_bootstrap",
    "permutation_test",
    "sign_test",
    "random_baseline",
    "auroc",
    "spearman",
    "tpr_at_fpr",
    "mmd2_rbf",
    "LEVEL",
    "MIN_BASELINE_DRAWS",
]

#: two-sided coverage of every interval this module returns
LEVEL = 0.95
#: a random baseline's quantile is read from at least this many draws (or an exact enumeration)
MIN_BASELINE_DRAWS = 100


@dataclass(frozen=True)
class Est:
    """An estimate ``value`` with its two-sided 95 % interval ``[lo, hi]`` over ``n`` independent ``unit``\\ s.

    ``method`` says how the interval was made (``"t"``, ``"bootstrap"``, ``"cluster-bootstrap"``,
    ``"exact"``, ...). For ``unit="exact"`` (no sampling noise: a count over a fixed set, a closed form)
    ``lo == hi == value``.
    """

    value: float
    lo: float
    hi: float
    unit: str
    n: int = 0
    method: str = ""

    def __post_init__(self) -> None:
        for k in ("value", "lo", "hi"):
            object.__setattr__(self, k, float(getattr(self, k)))
        object.__setattr__(self, "n", int(self.n))
        if not self.unit:
            raise UserError("Est needs a unit (seed, topic, item, ... or 'exact')")
        finite = [math.isfinite(v) for v in (self.value, self.lo, self.hi)]
        if all(finite) and not self.lo - 1e-12 * max(1.0, abs(self.lo)) <= self.hi:
            raise UserError(f"Est interval [{self.lo}, {self.hi}] has lo > hi")

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.value, self.lo, self.hi))

    def shift(self, by: float) -> Est:
        """The same estimate with ``by`` added to value and interval (e.g. a margin over a fixed reference)."""
        return Est(self.value + by, self.lo + by, self.hi + by, self.unit, self.n, self.method)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Est:
        return cls(**{k: d[k] for k in ("value", "lo", "hi", "unit", "n", "method") if k in d})

    def __str__(self) -> str:
        if self.unit == "exact":
            return f"{self.value:.4g} (exact)"
        return f"{self.value:.4g} [{self.lo:.4g}, {self.hi:.4g}] over {self.n} {self.unit}s"


def _nan_est(unit: str, n: int, method: str, value: float = math.nan) -> Est:
    return Est(value, math.nan, math.nan, unit, n, method)


def exact(value: float, *, why: str = "exact") -> Est:
    """A quantity without sampling noise (a count on a fixed set, a closed form): its interval is itself."""
    return Est(value, value, value, "exact", 1, why)


def _vec(x: Any, name: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise UserError(f"{name}: expected a 1-d array of values, got shape {a.shape}")
    return a


# ------------------------------------------------------------------------------------------ intervals
def t_interval(values: Any, *, unit: str = "seed", level: float = LEVEL) -> Est:
    """Mean of ``values`` (one per independent unit, e.g. per training seed) with a Student-t interval.

    NaN entries are dropped; with fewer than two finite values the interval is NaN. A zero spread gives a
    zero-width interval (every unit agreed exactly).
    """
    from scipy import stats

    v = _vec(values, "t_interval values")
    v = v[np.isfinite(v)]
    if v.size == 0:
        return _nan_est(unit, 0, "t")
    mean = float(v.mean())
    if v.size < 2:
        return _nan_est(unit, 1, "t", mean)
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return Est(mean, mean - half, mean + half, unit, int(v.size), "t")


def seeds_to_decide(est: Est, threshold: float, *, level: float = LEVEL, max_n: int = 1000) -> int | None:
    """How many units (seeds) a Student-t interval needs to clear ``threshold``, were the mean and the SD what
    ``est`` (a :func:`t_interval` over ``est.n >= 2`` units) measured: the smallest n whose half-width
    t_{n-1} * sd / sqrt(n) is below |mean - threshold|. ``None`` when ``est`` is not such an interval, when the
    mean sits on the threshold, or when more than ``max_n`` units would be needed. A planning figure: the next
    seeds move the mean and the SD too."""
    from scipy import stats

    if est.method != "t" or est.n < 2 or not est.finite:
        return None
    gap = abs(est.value - threshold)
    t_now = float(stats.t.ppf(0.5 + level / 2, est.n - 1))
    sd = (est.hi - est.value) * math.sqrt(est.n) / t_now
    if gap == 0.0:
        return None
    if sd == 0.0:
        return est.n
    for n in range(2, max_n + 1):
        if float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n) < gap:
            return n
    return None


mean_over = t_interval  # readable alias at call sites: mean_over(per_topic, unit="topic")


def _percentile(dist: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(dist, [0.5 - level / 2, 0.5 + level / 2])
    return float(lo), float(hi)


def bootstrap(
    data: Any | Sequence[Any],
    statistic: Callable[..., float] = np.mean,
    *,
    unit: str = "item",
    n_resamples: int = 2000,
    level: float = LEVEL,
    seed: int = 0,
    paired: bool = False,
) -> Est:
    """Percentile bootstrap of ``statistic`` over the rows of ``data`` (``scipy.stats.bootstrap``).

    ``data`` is one array or a tuple of arrays; with ``paired=True`` the arrays share rows and are
    resampled together (``statistic(*arrays)``), otherwise each is resampled on its own. Resamples on which
    the statistic is NaN are dropped (see the module's NaN policy). Use this only where rows are the
    independent unit; for items nested in topics/scenes/seeds use :func:`cluster_bootstrap`.
    """
    from scipy import stats

    arrays = tuple(np.asarray(a, dtype=np.float64) for a in (data if isinstance(data, tuple) else (data,)))
    if paired and len({a.shape[0] for a in arrays}) != 1:
        raise UserError(f"paired bootstrap: arrays differ in length {[a.shape[0] for a in arrays]}")
    n = int(arrays[0].shape[0])
    value = float(statistic(*arrays))
    if n < 2:
        return _nan_est(unit, n, "bootstrap", value)

    def stat(*xs: np.ndarray, axis: int = -1) -> np.ndarray:
        xs = [np.moveaxis(x, axis, -1) for x in xs]
        if xs[0].ndim == 1:
            return np.asarray(statistic(*xs), dtype=np.float64)
        return np.array([statistic(*(x[i] for x in xs)) for i in range(xs[0].shape[0])], dtype=np.float64)

    res = stats.bootstrap(arrays, stat, paired=paired, vectorized=True, n_resamples=n_resamples,
                          confidence_level=level, method="percentile", random_state=np.random.default_rng(seed),
                          batch=256)
    dist = np.asarray(res.bootstrap_distribution, dtype=np.float64).ravel()
    ok = dist[np.isfinite(dist)]
    if ok.size < dist.size / 2:
        return _nan_est(unit, n, "bootstrap", value)
    lo, hi = _percentile(ok, level)
    return Est(value, min(lo, value), max(hi, value), unit, n, "bootstrap")


def paired_bootstrap(a: Any, b: Any, statistic: Callable[[np.ndarray, np.ndarray], float] | None = None, *,
                     unit: str = "item", n_resamples: int = 2000, level: float = LEVEL, seed: int = 0) -> Est:
    """Bootstrap of a paired comparison (default: mean of ``a - b``) with rows resampled jointly."""
    fn = statistic or (lambda x, y: float(np.mean(x - y)))
    return bootstrap((a, b), fn, unit=unit, n_resamples=n_resamples, level=level, seed=seed, paired=True)


def cluster_bootstrap(
    statistic: Callable[[np.ndarray], float],
    clusters: Any,
    *,
    unit: str,
    n_resamples: int = 2000,
    level: float = LEVEL,
    seed: int = 0,
    strata: Any | None = None,
) -> Est:
    """Bootstrap over independent clusters: ``statistic(rows)`` gets row indices, and each resample draws
    whole clusters (topics, scenes, facts, nouns, seeds) with replacement and concatenates their rows.

    ``clusters`` gives each row's cluster label. This is the interval to use when rows within a cluster
    are not independent (ten shuffles of one fact, many windows of one scene). ``strata`` (one label per
    row, constant within a cluster) resamples each stratum's clusters on their own, keeping its count: a
    two-sample comparison (cultural facts vs control facts) then compares two sets of their real sizes.
    """
    lab = np.asarray(clusters)
    if lab.ndim != 1:
        raise UserError(f"cluster_bootstrap: clusters must be 1-d (one label per row), got shape {lab.shape}")
    uniq, inv = np.unique(lab, return_inverse=True)
    members = [np.flatnonzero(inv == k) for k in range(uniq.size)]
    if strata is None:
        groups = [np.arange(uniq.size)]
    else:
        st = np.asarray(strata)
        if st.shape != lab.shape:
            raise UserError(f"cluster_bootstrap: strata must give one label per row ({lab.shape}), got {st.shape}")
        of = [np.unique(st[m]) for m in members]
        if any(o.size != 1 for o in of):
            raise UserError("cluster_bootstrap: a cluster spans several strata; strata must be constant within one")
        of = np.array([o[0] for o in of])
        groups = [np.flatnonzero(of == s) for s in np.unique(of)]
    value = float(statistic(np.arange(lab.size)))
    if min(g.size for g in groups) < 2:
        return _nan_est(unit, int(uniq.size), "cluster-bootstrap", value)
    rng = np.random.default_rng(seed)
    dist = np.empty(n_resamples)
    for r in range(n_resamples):
        if strata is None:
            pick = rng.integers(0, uniq.size, uniq.size)
        else:
            pick = np.concatenate([g[rng.integers(0, g.size, g.size)] for g in groups])
        dist[r] = statistic(np.concatenate([members[k] for k in pick]))
    ok = dist[np.isfinite(dist)]
    if ok.size < n_resamples / 2:
        return _nan_est(unit, int(uniq.size), "cluster-bootstrap", value)
    lo, hi = _percentile(ok, level)
    return Est(value, min(lo, value), max(hi, value), unit, int(uniq.size), "cluster-bootstrap")


# ------------------------------------------------------------------------------------------ tests
def permutation_test(a: Any, b: Any, statistic: Callable[[np.ndarray, np.ndarray], float] | None = None, *,
                     paired: bool = False, n_resamples: int = 9999, alternative: str = "greater",
                     seed: int = 0) -> float:
    """p-value of ``statistic(a, b)`` (default: difference of means) under exchangeability
    (``scipy.stats.permutation_test``; ``paired=True`` permutes within pairs, i.e. flips signs)."""
    from scipy import stats

    if alternative not in ("greater", "less", "two-sided"):
        raise UserError(f"alternative={alternative!r}; allowed: greater, less, two-sided")
    x, y = _vec(a, "a"), _vec(b, "b")
    fn = statistic or (lambda u, v, axis=-1: np.mean(u, axis=axis) - np.mean(v, axis=axis))
    res = stats.permutation_test((x, y), fn, permutation_type="samples" if paired else "independent",
                                 vectorized=statistic is None, n_resamples=n_resamples, alternative=alternative,
                                 random_state=np.random.default_rng(seed))
    return float(res.pvalue)


def sign_test(diffs: Any, *, alternative: str = "greater") -> float:
    """Exact sign test of paired differences (zeros dropped): p-value of ``binomtest`` on the positive count."""
    from scipy import stats

    d = _vec(diffs, "diffs")
    d = d[np.isfinite(d) & (d != 0)]
    if d.size == 0:
        return math.nan
    return float(stats.binomtest(int((d > 0).sum()), int(d.size), 0.5, alternative=alternative).pvalue)


def random_baseline(draws: Any, *, q: float = 0.95, exact_enumeration: bool = False, unit: str = "draw") -> Est:
    """The ``q``-quantile of a random baseline (random directions, unit sets, heads) as an :class:`Est`.

    The interval is a distribution-free order-statistic interval for that quantile, so a claim "above the
    random 95th percentile" is decided against the quantile's own uncertainty. It needs at least
    :data:`MIN_BASELINE_DRAWS` finite draws, unless ``exact_enumeration`` says the draws are the whole (small)
    space; with fewer the quantile is still returned but its interval is NaN, so every claim decided on it is
    inconclusive (a run at a user's small setting still finishes). No finite draw at all gives NaN.
    """
    from scipy import stats

    if not 0 < q < 1:
        raise UserError(f"random baseline: q={q} must lie in (0, 1)")
    v = _vec(draws, "random baseline draws")
    v = np.sort(v[np.isfinite(v)])
    if v.size == 0:
        return _nan_est(unit, 0, "no-draws")
    value = float(np.quantile(v, q))
    if exact_enumeration:
        return Est(value, value, value, unit, int(v.size), "enumeration")
    n = v.size
    if n < MIN_BASELINE_DRAWS:
        log.warning("random baseline from %d draws (< %d): its interval is undefined, claims on it are inconclusive",
                    n, MIN_BASELINE_DRAWS)
        return _nan_est(unit, int(n), "too-few-draws", value)
    # order statistics (1-based) j < k with P(X_(j) <= xi_q <= X_(k)) >= LEVEL
    j = max(int(stats.binom.ppf((1 - LEVEL) / 2, n, q)), 1)
    k = min(int(stats.binom.ppf(0.5 + LEVEL / 2, n, q)) + 1, n)
    return Est(value, min(float(v[j - 1]), value), max(float(v[k - 1]), value), unit, int(n), "order-statistic")


# ------------------------------------------------------------------------------------------ metrics
def auroc(scores: Any, labels: Any) -> float:
    """Area under the ROC curve, NaN when ``labels`` hold one class; the larger label is the positive class.

    Computed as the Mann-Whitney statistic over mid-ranks (ties count one half), which equals
    scikit-learn's ``roc_auc_score`` on binary labels (tested) and is exact up to one rounding; it is
    ~30x faster per call, which matters inside bootstraps. More than two classes, or non-finite scores,
    go to scikit-learn, which raises its own error.
    """
    from scipy.stats import rankdata

    s, y = _vec(scores, "scores"), np.asarray(labels).astype(int).ravel()
    if s.shape[0] != y.shape[0]:
        raise UserError(f"auroc: {s.shape[0]} scores but {y.shape[0]} labels")
    classes = np.unique(y)
    if classes.size < 2:
        return math.nan
    if classes.size > 2 or not np.all(np.isfinite(s)):
        from sklearn.metrics import roc_auc_score

        return float(roc_auc_score(y, s))
    pos = y == classes[1]
    n1 = int(pos.sum())
    n0 = y.shape[0] - n1
    return float((rankdata(s)[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def spearman(x: Any, y: Any) -> float:
    """Spearman's rank correlation (``scipy.stats.spearmanr``), NaN when either side is constant or < 3 values."""
    from scipy import stats

    a, b = _vec(x, "x"), _vec(y, "y")
    if a.shape != b.shape:
        raise UserError(f"spearman: x has {a.shape[0]} values, y has {b.shape[0]}")
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.spearmanr(a, b).statistic)


def tpr_at_fpr(scores: Any, labels: Any, fpr: float, rule: str = "closest") -> float:
    """True-positive rate at a false-positive rate ``fpr`` from scikit-learn's ROC curve; NaN with one class.

    ``"closest"``: the ROC point whose FPR is nearest ``fpr`` (first of ties); ``"conservative"``: the
    largest TPR among points with FPR <= ``fpr``.
    """
    from sklearn.metrics import roc_curve

    if rule not in ("closest", "conservative"):
        raise UserError(f"rule={rule!r}; allowed: closest, conservative")
    if not 0 < fpr < 1:
        raise UserError(f"fpr={fpr} must lie in (0, 1)")
    s, y = _vec(scores, "scores"), np.asarray(labels).astype(int).ravel()
    if np.unique(y).size < 2:
        return math.nan
    f, t, _ = roc_curve(y, s)
    if rule == "closest":
        return float(t[int(np.argmin(np.abs(f - fpr)))])
    return float(t[f <= fpr + 1e-12].max())


def mmd2_rbf(x: Any, y: Any, *, bandwidths: Sequence[float], unbiased: bool = True) -> float:
    """Squared MMD between samples ``x [n, d]`` and ``y [m, d]`` with a sum of Gaussian kernels
    ``exp(-|a - b|^2 / (2 s^2))`` over ``bandwidths``; ``unbiased`` drops the diagonal (U-statistic),
    otherwise the V-statistic (biased, never negative)."""
    X = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=np.float64)
    Y = np.asarray(y.detach().cpu() if hasattr(y, "detach") else y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise UserError(f"mmd2_rbf: need x [n, d] and y [m, d] with the same d, got {X.shape} and {Y.shape}")
    if not bandwidths or min(bandwidths) <= 0:
        raise UserError(f"mmd2_rbf: bandwidths must be positive, got {list(bandwidths)}")
    n, m = X.shape[0], Y.shape[0]
    if unbiased and (n < 2 or m < 2):
        return math.nan

    def sq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T, 0.0)

    dxx, dyy, dxy = sq(X, X), sq(Y, Y), sq(X, Y)
    total = 0.0
    for s in bandwidths:
        kxx, kyy, kxy = (np.exp(-d / (2 * s * s)) for d in (dxx, dyy, dxy))
        if unbiased:
            total += ((kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
                      - 2 * kxy.mean())
        else:
            total += kxx.mean() + kyy.mean() - 2 * kxy.mean()
    return float(total)
