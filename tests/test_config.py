"""Config coercion and overrides."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from iclr26.core.config import apply_overrides, coerce, param
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
    assert claim("x", "s", 0.3, "<=", 0.5).holds
    assert not claim("x", "s", 0.7, "<=", 0.5).holds
    assert not claim("x", "s", float("nan"), "<", 1.0).holds
    with pytest.raises(ValueError):
        claim("x", "s", 1, "==", 1)
