"""iclr26.stats against reference oracles: scipy / scikit-learn on the same input, or the formula by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as ss
from sklearn.metrics import roc_auc_score

from iclr26 import stats
from iclr26.core.errors import UserError


def test_t_interval_matches_scipy():
    v = np.array([0.2, 0.5, 0.35, 0.41])
    e = stats.t_interval(v, unit="seed")
    lo, hi = ss.t.interval(0.95, df=3, loc=v.mean(), scale=ss.sem(v))
    assert e.value == pytest.approx(v.mean()) and e.lo == pytest.approx(lo) and e.hi == pytest.approx(hi)
    assert e.unit == "seed" and e.n == 4
    one = stats.t_interval([0.3], unit="seed")  # one unit: value, no interval
    assert one.value == 0.3 and math.isnan(one.lo)
    assert stats.t_interval([np.nan, 1.0, 1.0]).lo == 1.0  # NaN dropped; zero spread, zero width


def test_bootstrap_matches_scipy_percentile():
    x = np.random.default_rng(0).normal(1.0, 2.0, 60)
    e = stats.bootstrap(x, np.mean, seed=3, n_resamples=999)
    ref = ss.bootstrap((x,), np.mean, n_resamples=999, method="percentile", random_state=np.random.default_rng(3))
    assert e.lo == pytest.approx(ref.confidence_interval.low) and e.hi == pytest.approx(ref.confidence_interval.high)
    assert e.lo < x.mean() < e.hi
    assert stats.bootstrap(x, np.mean, seed=3) == stats.bootstrap(x, np.mean, seed=3)  # deterministic


def test_paired_bootstrap_resamples_rows_jointly():
    rng = np.random.default_rng(1)
    base = rng.normal(0, 5, 80)
    a, b = base + 0.3 + rng.normal(0, 0.05, 80), base  # large shared noise, small steady gain
    e = stats.paired_bootstrap(a, b)
    assert e.lo > 0.25 and e.hi < 0.35  # pairing removes the shared noise
    un = stats.bootstrap((a, b), lambda x, y: x.mean() - y.mean(), paired=False)
    assert un.lo < 0 < un.hi  # resampling the arms independently cannot see the gain


def test_cluster_bootstrap_is_wider_than_rows_for_clustered_data():
    rng = np.random.default_rng(2)
    topic_effect = rng.normal(0, 1, 8)
    clusters = np.repeat(np.arange(8), 10)  # 10 near-copies of each of 8 topics
    x = topic_effect[clusters] + rng.normal(0, 0.01, 80)
    rows = stats.bootstrap(x, np.mean, unit="item")
    cl = stats.cluster_bootstrap(lambda i: x[i].mean(), clusters, unit="topic")
    assert cl.n == 8 and rows.n == 80
    assert (cl.hi - cl.lo) > 2 * (rows.hi - rows.lo)
    # planted oracle: a cluster bootstrap of per-topic means equals a row bootstrap of the 8 topic means
    tm = np.array([x[clusters == k].mean() for k in range(8)])
    assert (cl.hi - cl.lo) == pytest.approx(np.ptp(np.quantile(tm, [0.025, 0.975])) * 1.0, rel=1.0)


def test_stratified_cluster_bootstrap_keeps_each_sample_size():
    rng = np.random.default_rng(5)
    a, b = rng.normal(1.0, 1, 40), rng.normal(0.0, 1, 25)
    x = np.concatenate([a, b])
    side = np.array(["a"] * 40 + ["b"] * 25)
    rows = np.arange(65)  # one cluster per row

    def share_a(i):
        return float((side[i] == "a").mean())

    # oracle: with strata every resample has 40 rows of a and 25 of b, so the share is a constant
    kept = stats.cluster_bootstrap(share_a, rows, unit="item", strata=side)
    assert kept.lo == kept.hi == pytest.approx(40 / 65)
    assert stats.cluster_bootstrap(share_a, rows, unit="item").hi > 40 / 65  # unstratified: the share moves
    # a difference of means matches scipy's independent two-sample bootstrap (the same resampling scheme)
    diff = stats.cluster_bootstrap(lambda i: x[i][side[i] == "a"].mean() - x[i][side[i] == "b"].mean(), rows,
                                   unit="item", strata=side, n_resamples=4000)
    ref = ss.bootstrap((a, b), lambda u, v, axis: u.mean(axis) - v.mean(axis), vectorized=True, n_resamples=4000,
                       method="percentile", random_state=np.random.default_rng(0)).confidence_interval
    assert diff.lo == pytest.approx(ref.low, abs=0.08) and diff.hi == pytest.approx(ref.high, abs=0.08)
    with pytest.raises(UserError, match="constant within"):
        stats.cluster_bootstrap(share_a, np.zeros(65, int), unit="item", strata=side)


def test_permutation_and_sign_tests_match_scipy():
    rng = np.random.default_rng(4)
    a, b = rng.normal(0.5, 1, 30), rng.normal(0, 1, 30)
    p = stats.permutation_test(a, b, n_resamples=2000, seed=0)
    ref = ss.permutation_test((a, b), lambda x, y, axis: x.mean(axis) - y.mean(axis), vectorized=True,
                              n_resamples=2000, alternative="greater", random_state=np.random.default_rng(0))
    assert p == pytest.approx(ref.pvalue)
    d = np.array([1.0, 2.0, -0.5, 0.0, 3.0, 0.2])
    assert stats.sign_test(d) == pytest.approx(ss.binomtest(4, 5, 0.5, alternative="greater").pvalue)
    assert math.isnan(stats.sign_test([0.0, 0.0]))


def test_random_baseline_needs_draws_and_brackets_the_quantile():
    draws = np.random.default_rng(5).normal(size=400)
    e = stats.random_baseline(draws, q=0.95)
    assert e.value == pytest.approx(np.quantile(draws, 0.95))
    assert e.lo <= e.value <= e.hi and e.lo > np.quantile(draws, 0.85) and e.hi < np.quantile(draws, 0.995)
    few = stats.random_baseline(draws[:20])  # too few draws: the quantile, but no interval to decide on
    assert few.value == pytest.approx(np.quantile(draws[:20], 0.95)) and math.isnan(few.lo) and not few.finite
    assert math.isnan(stats.random_baseline([np.nan, np.nan]).value)
    assert math.isnan(stats.random_baseline([], exact_enumeration=True).value)
    small = stats.random_baseline([0.1, 0.2, 0.3], q=0.5, exact_enumeration=True)
    assert small.lo == small.hi == 0.2


def test_auroc_spearman_nan_policy_and_values():
    s, y = np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])
    assert stats.auroc(s, y) == pytest.approx(roc_auc_score(y, s))
    assert math.isnan(stats.auroc(s, [1, 1, 1, 1]))
    x = np.array([1.0, 2, 3, 4, 5])
    assert stats.spearman(x, x**2) == pytest.approx(1.0)
    assert stats.spearman(x, [3.0, 1, 2, 5, 4]) == pytest.approx(ss.spearmanr(x, [3, 1, 2, 5, 4]).statistic)
    assert math.isnan(stats.spearman(x, np.ones(5)))
    with pytest.raises(UserError, match="scores but"):
        stats.auroc(s, [0, 1])


def test_auroc_equals_sklearn_with_ties_and_other_label_values():
    """The rank formula against scikit-learn's trapezoid ROC area: ties, heavy ties, labels other than 0/1."""
    rng = np.random.default_rng(0)
    for n in (2, 5, 40, 301):
        for k in (2, 4, 1000):  # 2 and 4 distinct score values give many ties
            y = rng.integers(0, 2, n)
            y[:2] = [0, 1]
            s = rng.integers(0, k, n).astype(float) if k < 1000 else rng.normal(size=n)
            assert stats.auroc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
            assert stats.auroc(s, 3 + 2 * y) == pytest.approx(roc_auc_score(3 + 2 * y, s), abs=1e-12)
    assert stats.auroc(np.ones(6), [0, 1, 0, 1, 1, 0]) == 0.5
    with pytest.raises(ValueError):  # non-finite scores: scikit-learn's own error
        stats.auroc([0.1, np.nan, 0.3], [0, 1, 1])


def test_tpr_at_fpr_on_hand_computed_roc():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05])
    labels = np.array([1, 1, 0, 1, 0, 0, 0, 0, 0, 0])  # 3 positives, 7 negatives
    assert stats.tpr_at_fpr(scores, labels, 0.01, "conservative") == pytest.approx(2 / 3)
    # ROC points at FPR 1/7: (1/7, 2/3) then (1/7, 1); "closest" takes the first of the tie
    assert stats.tpr_at_fpr(scores, labels, 1 / 7, "closest") == pytest.approx(2 / 3)
    assert stats.tpr_at_fpr(scores, labels, 0.2, "conservative") == pytest.approx(1.0)
    assert math.isnan(stats.tpr_at_fpr(scores, np.ones(10), 0.1))


def test_mmd_by_hand():
    x, y = np.array([[0.0], [1.0]]), np.array([[0.0], [3.0]])
    k = lambda a, b: math.exp(-((a - b) ** 2) / 2)  # noqa: E731  sigma = 1
    kxx, kyy = k(0, 1), k(0, 3)
    kxy = (k(0, 0) + k(0, 3) + k(1, 0) + k(1, 3)) / 4
    assert stats.mmd2_rbf(x, y, bandwidths=[1.0]) == pytest.approx(kxx + kyy - 2 * kxy)
    v = (1 + kxx) / 2 + (1 + kyy) / 2 - 2 * kxy
    assert stats.mmd2_rbf(x, y, bandwidths=[1.0], unbiased=False) == pytest.approx(v)
    with pytest.raises(UserError, match="same d"):
        stats.mmd2_rbf(x, np.zeros((2, 2)), bandwidths=[1.0])


def test_est_rejects_missing_unit_and_reversed_interval():
    with pytest.raises(UserError, match="unit"):
        stats.Est(1.0, 0.0, 2.0, "")
    with pytest.raises(UserError, match="lo > hi"):
        stats.Est(1.0, 2.0, 0.0, "seed")
    assert stats.exact(0.5).lo == 0.5 and stats.exact(0.5).unit == "exact"


def test_seeds_to_decide_is_the_first_n_whose_t_half_width_clears_the_gap():
    from iclr26.stats import seeds_to_decide, t_interval

    vals = [-0.023, -0.015, -0.143]  # latent-planning's C3_effect_grows over seeds 0-2
    est = t_interval(vals, unit="seed")
    n = seeds_to_decide(est, 0.0)
    sd, gap = float(np.std(vals, ddof=1)), abs(float(np.mean(vals)))

    def half(k):
        return ss.t.ppf(0.975, k - 1) * sd / math.sqrt(k)

    assert n is not None and half(n) < gap <= half(n - 1)
    assert n == 8
    # an interval that already clears the gate: the smallest n that would have sufficed (here fewer than it has)
    clear = t_interval([1.0, 1.1, 0.9], unit="seed")
    assert seeds_to_decide(clear, 0.0) == 2
    # the mean on the gate, a one-unit estimate, a bootstrap interval: no answer
    assert seeds_to_decide(t_interval([0.1, -0.1], unit="seed"), 0.0) is None
    assert seeds_to_decide(t_interval([0.3], unit="seed"), 0.0) is None
    assert seeds_to_decide(stats.Est(0.1, -0.1, 0.3, "item", 50, "bootstrap"), 0.0) is None
    assert seeds_to_decide(t_interval([0.0, 1.0, 0.0001], unit="seed"), 0.3, max_n=5) is None


def test_an_inconclusive_seed_interval_says_how_many_seeds_would_decide_it():
    from iclr26.claims import claim
    from iclr26.stats import t_interval

    c = claim("C1_x", "x", t_interval([-0.023, -0.015, -0.143], unit="seed"), ">=", 0.0,
              null=t_interval([0.0, 0.01, -0.01], unit="seed"), trained=True)
    assert c.verdict == "inconclusive" and "about 8 seeds would decide it" in c.reason
