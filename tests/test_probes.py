"""Probes and probe metrics against planted directions, scikit-learn fitted by hand, and hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from iclr26.core.errors import UserError
from iclr26.interp.probes import (
    DiffMeansProbe,
    LinearProbe,
    auroc,
    random_direction_scores,
    recall_at_fpr,
    shuffled_label_probe,
    threshold_at_fpr,
)


def _planted(n=4000, d=20, seed=0, anisotropic=True):
    """Gaussian activations with per-feature scales; labels from the sign of w·x (1 % flipped)."""
    g = np.random.default_rng(seed)
    scales = np.exp(g.uniform(-1.5, 1.5, d)) if anisotropic else np.ones(d)
    X = g.standard_normal((n, d)) * scales
    w = g.standard_normal(d)
    w /= np.linalg.norm(w)
    y = (X @ w > 0).astype(int)
    flip = g.random(n) < 0.01
    y[flip] = 1 - y[flip]
    return torch.from_numpy(X).float(), y, w


def test_linear_probe_recovers_a_planted_direction_in_activation_units():
    X, y, w = _planted()
    p = LinearProbe(C=10.0).fit(X[:3000], y[:3000])
    raw = p.direction("raw").double().numpy()
    assert raw @ w > 0.95  # the sign too: along w the class-1 score grows
    # with anisotropic scales the standardised weights point elsewhere: the unit conversion matters
    assert p.direction("standardized").double().numpy() @ w < raw @ w - 0.05
    assert auroc(p.decision_function(X[3000:]), y[3000:]) > 0.97
    assert np.mean(p.predict(X[3000:]) == y[3000:]) > 0.9


def test_linear_probe_equals_sklearn_on_standardised_data():
    X, y, _ = _planted(n=600, d=8, seed=1)
    A = X.double().numpy()
    Z = (A - A.mean(0)) / A.std(0)
    ref = LogisticRegression(C=0.5, solver="liblinear", random_state=0, max_iter=1000).fit(Z, y)  # l2 default
    p = LinearProbe(C=0.5).fit(X, y)
    np.testing.assert_allclose(p.coef_, ref.coef_[0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(p.decision_function(X), ref.decision_function(Z), rtol=0, atol=1e-8)
    np.testing.assert_allclose(p.predict_proba(X), ref.predict_proba(Z)[:, 1], rtol=0, atol=1e-8)


def test_l1_penalty_gives_a_sparse_probe():
    X, y, _ = _planted(n=600, d=8, seed=5)
    dense, sparse = LinearProbe(C=0.01).fit(X, y), LinearProbe(penalty="l1", C=0.01).fit(X, y)
    assert np.sum(sparse.coef_ == 0) > np.sum(dense.coef_ == 0)


def test_diff_means_probe_is_the_hand_formula():
    X, y, _ = _planted(n=500, d=6, seed=2)
    A = X.double().numpy()
    d = A[y == 1].mean(0) - A[y == 0].mean(0)
    p = DiffMeansProbe().fit(X, y)
    np.testing.assert_allclose(p.coef_, d, atol=1e-12)
    tau = 0.5 * (A[y == 1].mean(0) @ d + A[y == 0].mean(0) @ d)
    assert p.threshold_ == pytest.approx(tau)
    np.testing.assert_array_equal(p.predict(X), (A @ d > tau).astype(int))
    np.testing.assert_allclose(p.direction().double().numpy(), d / np.linalg.norm(d), atol=1e-6)


def test_shuffled_labels_and_random_directions_are_chance():
    X, y, _ = _planted(seed=3)
    p = LinearProbe().fit(X[:3000], y[:3000])
    sh = shuffled_label_probe(LinearProbe(), X[:3000], y[:3000], seed=0)
    R = random_direction_scores(X[3000:], n=200, seed=0)
    assert R.shape == (200, 1000)
    np.testing.assert_array_equal(R, random_direction_scores(X[3000:], n=200, seed=0))
    # a random direction in 20-d still correlates with w by ~1/sqrt(20), so chance is a band, not 0.5:
    # the shuffled-label probe falls inside the band of random directions, the real probe far above it
    band = np.array([abs(auroc(r, y[3000:]) - 0.5) for r in R])
    assert sh is not p and auroc(p.decision_function(X[3000:]), y[3000:]) - 0.5 > band.max()
    assert abs(auroc(sh.decision_function(X[3000:]), y[3000:]) - 0.5) <= np.quantile(band, 0.99)
    assert auroc(np.array([1.0, 2.0, 3.0, 4.0]), [0, 0, 1, 1]) == 1.0


def test_threshold_and_recall_at_fpr_on_known_arrays():
    control = np.arange(100, dtype=float)  # 0..99
    tau = threshold_at_fpr(control, 0.05)
    assert tau == 94.0 and np.sum(control > tau) == 5  # at most 5 % of controls above it
    assert np.sum(control > threshold_at_fpr(control, 0.01)) == 1
    assert threshold_at_fpr(control, 0.001) == 99.0  # fewer than one control allowed: none above
    assert recall_at_fpr([95.5, 10.0, 200.0, 94.0], control, fpr=0.05) == 0.5
    with pytest.raises(UserError, match="fpr"):
        threshold_at_fpr(control, 1.0)


def test_score_sequences_matches_a_hand_loop():
    X, y, _ = _planted(n=400, d=5, seed=4)
    p = LinearProbe().fit(X, y)
    seq = np.repeat(np.arange(40), 10)
    s = p.decision_function(X)
    np.testing.assert_allclose(p.score_sequences(X, seq, "mean"), [s[seq == i].mean() for i in range(40)])
    np.testing.assert_allclose(p.score_sequences(X, torch.from_numpy(seq), "max"), [s[seq == i].max() for i in range(40)])


def test_bad_inputs_give_one_line_errors():
    X, y, _ = _planted(n=50, d=3)
    with pytest.raises(UserError, match="2-D"):
        LinearProbe().fit(X[0], y)
    with pytest.raises(UserError, match="labels"):
        LinearProbe().fit(X, y[:10])
    with pytest.raises(UserError, match="binary"):
        LinearProbe().fit(X, y * 2 + 1)
    with pytest.raises(UserError, match="one class"):
        DiffMeansProbe().fit(X, np.zeros(50, dtype=int))
    with pytest.raises(UserError, match="penalty"):
        LinearProbe(penalty="l3").fit(X, y)
    with pytest.raises(UserError, match="not fitted"):
        LinearProbe().decision_function(X)
    p = LinearProbe().fit(X, y)
    with pytest.raises(UserError, match="units"):
        p.direction("cm")
    with pytest.raises(UserError, match="agg"):
        p.score_sequences(X, np.zeros(50, dtype=int), agg="median")
    with pytest.raises(UserError, match="features"):
        p.decision_function(X[:, :2])
