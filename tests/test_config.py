"""Config coercion and overrides."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from iclr26.core.config import apply_overrides, check_config, coerce, describe_range, param
from iclr26.core.errors import UserError
from iclr26.runs import claim


@dataclass
class C:
    a: int = param(1, "an int")
    b: float = param(0.5, "a float")
    c: bool = param(False, "a bool")
    d: list[int] = param([1, 2], "ints")
    e: str = param("x", "a choice", choices=["x", "y"])
    f: list[str] = param(["p"], "strings")


def test_coerce_types():
    assert coerce(C, "a", "3") == 3
    assert coerce(C, "b", "2") == 2.0 and isinstance(coerce(C, "b", 2), float)
    assert coerce(C, "c", "true") is True and coerce(C, "c", "0") is False
    assert coerce(C, "d", "[3, 4]") == [3, 4] and coerce(C, "d", "5,6") == [5, 6]
    assert coerce(C, "f", "u,v") == ["u", "v"]


@pytest.mark.parametrize("key,val", [("a", "1.5"), ("c", "maybe"), ("e", "z"), ("d", "[1, \"q\"]")])
def test_coerce_rejects(key, val):
    with pytest.raises(UserError):
        coerce(C, key, val)


def test_overrides_do_not_mutate_and_reject_unknown():
    base = C()
    new = apply_overrides(base, {"a": "7"})
    assert base.a == 1 and new.a == 7
    assert C().d is not C().d  # mutable defaults are per instance
    with pytest.raises(UserError, match="unknown config key 'aa'"):
        apply_overrides(base, {"aa": 1})


def test_claim_holds_is_computed():
    assert claim("x", "s", 0.3, "<=", 0.5, null=0.7).holds
    assert not claim("x", "s", 0.7, "<=", 0.5, null=0.7).holds
    assert not claim("x", "s", float("nan"), "<", 1.0, null=2.0).holds
    with pytest.raises(ValueError):
        claim("x", "s", 1, "==", 1)


@dataclass
class R:
    n: int = param(4, "a size", low=1, high=10)
    p: float = param(0.5, "a rate", low=0.0, high=1.0, low_open=True)
    xs: list[int] = param([2], "sizes", min_len=1, max_len=3, elem_low=1, elem_high=5)
    s: str = param("a", "text", min_len=1)

    def validate(self) -> None:
        if self.n < max(self.xs):
            raise UserError(f"n={self.n} must be >= max(xs)={max(self.xs)}")


@dataclass
class _Wide(R):
    xs: list[int] = param([2], "sizes", min_len=1, max_len=3, elem_low=1, elem_high=9)


@pytest.mark.parametrize("key,val,needle", [
    ("n", 0, "1 <= n <= 10"), ("n", 11, "1 <= n <= 10"), ("p", 0.0, "0.0 < p <= 1.0"),
    ("p", float("nan"), "finite"), ("p", float("inf"), "finite"), ("p", 1.0 + 1e-12, "out of range"),
    ("xs", [], "length"), ("xs", [1, 1, 1, 1], "length"), ("xs", [0], "element 0"), ("xs", [6], "element 6"),
    ("s", "", "non-empty"), ("n", 5, "must be >= max(xs)=6"),
])
def test_check_config_rejects_out_of_range(key, val, needle):
    # the cross-field case: n=5 with xs=[5] is fine, with xs=[6] validate() refuses it (6 is out of
    # xs's element range too, so use a dataclass copy with a wider element range)
    cfg = R(**{key: val}) if (key, val) != ("n", 5) else _Wide(n=5, xs=[6])
    with pytest.raises(UserError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")) as e:
        check_config(cfg)
    assert "\n" not in str(e.value)


def test_check_config_accepts_closed_bounds_and_describes_ranges():
    check_config(R(n=10, p=1.0, xs=[1, 5, 5]))
    assert describe_range(R, "n") == "1 <= n <= 10"
    assert describe_range(R, "p") == "0.0 < p <= 1.0"
    assert describe_range(R, "xs") == "1 <= length <= 3, 1 <= each <= 5"
    assert coerce(R, "n", 3.0) == 3
    for bad in ("[1.5]", "[true]"):
        with pytest.raises(UserError):
            coerce(R, "xs", bad)
