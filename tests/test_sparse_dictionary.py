"""Synthetic sparse-dictionary activations: the Zipf exponent of the firing law, and that the default
(exponent 1) still reproduces the former p_i ∝ 1/(i + offset) data bit for bit."""

from __future__ import annotations

import math

import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.data.sparse_dictionary import firing_probabilities, sparse_dictionary_activations


def _former_probabilities(n: int, l0: float, offset: float, cap: float) -> torch.Tensor:
    """The firing law before the exponent existed, transcribed independently: 1/(i + offset),
    water-filled to Σ p = l0 with p ≤ cap."""
    base = 1.0 / (torch.arange(n, dtype=torch.float64) + offset)
    capped = torch.zeros(n, dtype=torch.bool)
    while True:
        scale = (l0 - cap * capped.sum().item()) / base[~capped].sum()
        p = torch.where(capped, torch.full_like(base, cap), base * scale)
        over = (p > cap) & ~capped
        if not over.any():
            return p.clamp_max(cap).float()
        capped |= over


# the last case caps the head of the law, so the water-filling rounds are covered too
@pytest.mark.parametrize(
    ("n", "l0", "offset", "n_capped"), [(512, 8.0, 20.0, 0), (48, 3.0, 20.0, 0), (64, 20.0, 1.0, 17)]
)
def test_default_exponent_is_bit_identical_to_former_law(n, l0, offset, n_capped):
    old = _former_probabilities(n, l0, offset, 0.5)
    assert int((old == 0.5).sum()) == n_capped
    assert torch.equal(firing_probabilities(n, l0, offset, 0.5), old)
    assert torch.equal(firing_probabilities(n, l0, offset, 0.5, zipf_exponent=1.0), old)


def test_default_samples_unchanged_by_explicit_exponent_one():
    a = sparse_dictionary_activations(3000, 8, 48, 3.0, seed=5)
    b = sparse_dictionary_activations(3000, 8, 48, 3.0, seed=5, zipf_exponent=1.0)
    assert torch.equal(a.X, b.X) and torch.equal(a.probs, b.probs) and a.mean_l0 == b.mean_l0
    assert torch.equal(a.probs, _former_probabilities(48, 3.0, 20.0, 0.5))


def test_probabilities_follow_exponent_exactly_where_uncapped():
    for a in (0.0, 0.5, 2.0):
        p = firing_probabilities(200, 4.0, 3.0, 0.5, zipf_exponent=a).double()
        free = p < 0.5
        i = torch.arange(200, dtype=torch.float64)[free]
        ratio = p[free] * (i + 3.0) ** a  # constant where the power law holds
        torch.testing.assert_close(ratio, ratio.mean().expand_as(ratio), rtol=1e-5, atol=0)
        assert float(p.sum()) == pytest.approx(4.0, rel=1e-5) and float(p.max()) <= 0.5


def _empirical_firing_frequency(data, n_features: int) -> torch.Tensor:
    """Recover which features fired in each sample from X alone (d > n_features: the dictionary has full
    row rank, so the coefficients are X·pinv(features)); a nonzero coefficient means the feature fired."""
    coef = data.X.double() @ torch.linalg.pinv(data.features.double())  # [N, n_features]
    on = coef.abs() > 1e-3  # magnitudes are |N(1, 0.3²)|: P(< 1e-3) ≈ 1e-5, off entries are exactly 0
    return on.double().mean(0)


@pytest.mark.parametrize("a", [0.5, 1.0, 2.0])
def test_empirical_firing_frequencies_follow_requested_exponent(a):
    n, offset, N = 64, 4.0, 60_000
    data = sparse_dictionary_activations(N, 96, n, 2.0, offset=offset, zipf_exponent=a, seed=11)
    freq = _empirical_firing_frequency(data, n)
    counts = freq * N
    # only the uncapped features follow the power law, and only well-sampled ones give a tight fit
    keep = (data.probs < 0.5) & (counts >= 50)
    assert int(keep.sum()) >= 40
    x = torch.log(torch.arange(n, dtype=torch.float64) + offset)[keep]
    y = torch.log(freq[keep])
    w = counts[keep]  # Var(log freq) ≈ 1/count: weighted least squares
    xm, ym = (w * x).sum() / w.sum(), (w * y).sum() / w.sum()
    slope = float((w * (x - xm) * (y - ym)).sum() / (w * (x - xm) ** 2).sum())
    se = math.sqrt(1.0 / float((w * (x - xm) ** 2).sum()))
    assert se < 0.03, se  # the test can tell 0.5, 1 and 2 apart by many standard errors
    assert slope == pytest.approx(-a, abs=max(4 * se, 0.03)), (slope, se)
    # and the mean active count is the requested one
    assert data.mean_l0 == pytest.approx(2.0, rel=0.02)
    assert float(freq.sum()) == pytest.approx(data.mean_l0, rel=1e-3)


@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf")])
def test_bad_zipf_exponent_is_a_user_error(bad):
    with pytest.raises(UserError, match="zipf_exponent"):
        firing_probabilities(16, 2.0, zipf_exponent=bad)
    with pytest.raises(UserError, match="zipf_exponent"):
        sparse_dictionary_activations(100, 4, 16, 2.0, zipf_exponent=bad)
