"""Claims are decided from an interval and a null arm; the verdict is computed, never passed."""

from __future__ import annotations

import math

import pytest

from iclr26.claims import Claim, ClaimCounts, check_expected, claim, combine_seeds, decide
from iclr26.stats import Est, exact


def E(v, lo, hi, unit="topic", n=10):
    return Est(v, lo, hi, unit, n)


def test_three_way_verdict_from_the_interval():
    assert decide(E(0.8, 0.7, 0.9), ">", 0.5) == "held"
    assert decide(E(0.3, 0.2, 0.4), ">", 0.5) == "not held"
    assert decide(E(0.55, 0.45, 0.65), ">", 0.5) == "inconclusive"
    assert decide(E(0.5, 0.5, 0.6), ">", 0.5) == "inconclusive"  # the lower end sits on a strict gate
    assert decide(E(0.5, 0.5, 0.6), ">=", 0.5) == "held"
    assert decide(E(-1, -2, -0.5), "<", 0) == "held"
    assert decide(Est(0.8, math.nan, math.nan, "seed", 1), ">", 0.5) == "inconclusive"


def test_null_that_passes_means_no_power():
    c = claim("C1", "probe beats chance", E(0.9, 0.85, 0.95), ">", 0.6, null=E(0.7, 0.6, 0.8), null_what="shuffled")
    assert c.verdict == "no power" and not c.holds and "shuffled" in c.reason
    ok = claim("C1", "probe beats chance", E(0.9, 0.85, 0.95), ">", 0.6, null=E(0.5, 0.4, 0.6))
    assert ok.verdict == "held" and ok.holds
    # a wholly failing interval is evidence whatever the null did
    bad = claim("C1", "x", E(0.3, 0.2, 0.4), ">", 0.6, null=E(0.7, 0.6, 0.8))
    assert bad.verdict == "not held"


def test_gated_paper_claim_needs_a_null_and_checks_need_a_reason():
    with pytest.raises(ValueError, match="no null arm"):
        claim("C1", "x", E(1, 0.9, 1.1), ">", 0)
    with pytest.raises(ValueError, match="why="):
        claim("sanity_fit", "sanity: fits", exact(0.99), ">", 0.9)
    s = claim("sanity_fit", "sanity: fits", exact(0.99), ">", 0.9, why="a precondition, not a finding")
    assert s.kind == "sanity" and s.verdict == "held"
    r = claim("C9", "reported only", 0.1, ">", 0.5, gated=False)
    assert r.verdict == "not held" and not r.gated


def test_trained_claim_on_one_seed_is_inconclusive():
    one = claim("C1", "x", E(0.9, 0.85, 0.95, "item", 200), ">", 0.6, null=exact(0.5), trained=True)
    assert one.verdict == "inconclusive" and "training seed" in one.reason
    three = claim("C1", "x", E(0.9, 0.85, 0.95, "seed", 3), ">", 0.6, null=exact(0.5), trained=True)
    assert three.verdict == "held"
    spread = claim("C1", "x", E(0.9, 0.85, 0.95, "item", 200), ">", 0.6, null=exact(0.5), trained=True,
                   seed_spread=0.05)  # 0.05 < 0.25 * 0.3: documented seed spread small against the margin
    assert spread.verdict == "held"


def test_combine_seeds_uses_a_t_interval_over_seeds():
    runs = [[claim("C1", "x", E(v, v - 0.01, v + 0.01, "item"), ">", 0.0, null=exact(nv), trained=True)]
            for v, nv in ((0.2, -0.1), (0.3, 0.0), (0.25, -0.05))]
    (c,) = combine_seeds(runs)
    assert c.estimate.unit == "seed" and c.estimate.n == 3 and c.estimate.value == pytest.approx(0.25)
    assert c.verdict == "held" and c.null.value == pytest.approx(-0.05)
    runs[2][0] = claim("C1", "x", E(-0.4, -0.41, -0.39, "item"), ">", 0.0, null=exact(0.0), trained=True)
    assert combine_seeds(runs)[0].verdict == "inconclusive"


def test_counts_and_round_trip():
    cl = [claim("C1", "a", E(0.9, 0.8, 1), ">", 0.5, null=exact(0.5)),
          claim("C2", "b", E(0.1, 0.0, 0.2), ">", 0.5, null=exact(0.5)),
          claim("C3", "c", E(0.5, 0.4, 0.6), ">", 0.5, null=exact(0.5)),
          claim("C4", "d", E(0.9, 0.8, 1), ">", 0.5, null=exact(0.6)),
          claim("ctrl_x", "control: y", exact(0.1), "<", 0.5, why="label shuffle")]
    n = ClaimCounts([c.to_dict() for c in cl])
    assert n.paper_text() == "1/1/1/1" and n.checks_text() == "1/1"
    again = Claim.from_dict(cl[3].to_dict())
    assert again.verdict == "no power" and again.null == cl[3].null


def test_check_expected_both_directions():
    class M:
        __name__ = "m"
        EXPECTED = {"C1": "held", "C2": ("not held", "too small"), "C5": "held"}

    cl = [claim("C1", "a", E(0.9, 0.8, 1), ">", 0.5, null=exact(0.5)),
          claim("C2", "b", E(0.9, 0.8, 1), ">", 0.5, null=exact(0.5)),
          claim("C3", "c", E(0.9, 0.8, 1), ">", 0.5, null=exact(0.5))]
    errs = "\n".join(check_expected(M, cl))
    assert "C2: expected 'not held', got 'held'" in errs  # a claim that starts to hold is caught
    assert "C3" in errs and "C5" in errs  # undeclared and missing claims too
    assert not any(e.startswith("C1") for e in check_expected(M, cl))


def test_check_expected_accepts_the_verdicts_another_machine_gave():
    class M:
        __name__ = "m"
        EXPECTED = {"C1": ("inconclusive", "0.46 [0.31, 0.61] on one machine, 0.40 [0.22, 0.58] on another", ("held",)),
                    "C2": ("inconclusive", "", ("held",))}

    held = [claim("C1", "a", E(0.9, 0.8, 1), ">", 0.5, null=exact(0.5)),
            claim("C2", "b", E(0.9, 0.8, 1), ">", 0.5, null=exact(0.5))]
    errs = check_expected(M, held)
    assert not any(e.startswith("C1") for e in errs)  # held is one of C1's declared verdicts
    assert any("EXPECTED['C2']" in e and "no reason" in e for e in errs)  # alternatives need their reason
    not_held = [claim("C1", "a", E(0.1, 0.0, 0.2), ">", 0.5, null=exact(0.5))]
    assert any(e.startswith("C1: expected 'inconclusive' or 'held', got 'not held'") for e in check_expected(M, not_held))


def test_kind_follows_the_name():
    """The status table and EXPECTED know a claim by its name, so a statement saying 'control:' or 'sanity:'
    needs the matching ctrl_ / sanity_ name (a control once counted among the paper's claims in README)."""
    est = exact(1.0)
    assert claim("ctrl_x", "control: x", est, ">", 0.0, why="a control").kind == "control"
    assert claim("sanity_x", "sanity: x", est, ">", 0.0, why="a precondition").kind == "sanity"
    with pytest.raises(ValueError, match="ctrl_"):
        claim("x_matches", "control: x", est, ">", 0.0, gated=False)
    with pytest.raises(ValueError, match="sanity_"):
        claim("x", "y", est, ">", 0.0, gated=False, kind="sanity")


def test_combine_nested_averages_inner_seeds_then_intervals_over_groups():
    from iclr26.claims import combine_nested
    from iclr26.stats import t_interval

    def c(v, nv):
        return [claim("C1", "x", E(v, v - 0.01, v + 0.01, "item"), ">", 0.0, null=exact(nv), trained=True)]

    groups = [[c(0.2, 0.0), c(0.4, 0.1)], [c(0.1, -0.1), c(float("nan"), 0.1)], [c(0.5, 0.0), c(0.3, 0.0)]]
    (got,) = combine_nested(groups)
    want = t_interval([0.3, 0.1, 0.4])  # group means; the NaN inner seed is dropped, not counted as 0
    assert got.estimate.n == 3 and got.estimate.unit == "seed"
    assert (got.estimate.value, got.estimate.lo, got.estimate.hi) == pytest.approx((want.value, want.lo, want.hi))
    assert got.null.value == pytest.approx((0.05 + 0.0 + 0.0) / 3)
    assert got.detail.startswith("per base organism (mean of 2 alignment seeds):")
    # one group: the inner seeds are the only replication there is
    (one,) = combine_nested(groups[:1])
    assert one.estimate.n == 2 and one.estimate.value == pytest.approx(0.3)


def test_apply_seed_spread_lets_one_seed_decide_only_with_a_small_spread():
    from iclr26.claims import apply_seed_spread

    one = [claim("C1", "x", E(-0.10, -0.12, -0.08, "item"), ">=", 0.0, null=exact(-0.2), trained=True),
           claim("C2", "y", E(0.5, 0.45, 0.55, "item"), ">=", 0.0, null=exact(-0.2)),  # not trained: untouched
           claim("C3", "z", E(0.3, 0.2, 0.4, "item"), ">=", 0.0, null=exact(-0.2), trained=True)]
    assert one[0].verdict == "inconclusive" and one[2].verdict == "inconclusive"  # one training seed
    got = {c.name: c for c in apply_seed_spread(one, {"C1": 0.02, "C2": 0.0, "C3": 0.1})}
    assert got["C1"].verdict == "not held" and got["C1"].seed_spread == 0.02  # 0.02 < 0.10 / 4
    assert got["C2"].seed_spread is None and got["C2"].verdict == "held"
    assert got["C3"].verdict == "inconclusive"  # 0.1 >= 0.3 / 4: the spread is too large to decide on one seed
    with pytest.raises(ValueError, match="SEED_SPREAD"):
        apply_seed_spread(one, {"C1": float("nan")})
