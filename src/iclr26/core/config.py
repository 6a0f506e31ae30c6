"""Config dataclass helpers: one documented field per hyperparameter, its valid range, presets, ``--set``.

Every field is declared with :func:`param`, which records a one-line doc and what values the
experiment can actually handle: a closed or open numeric interval (``low``/``high``), a set of
``choices``, and for list fields a length range and an interval for every element. A resolved
config is checked by :func:`check_config` (every field, then the dataclass's own ``validate()``
for cross-field constraints) before any run directory exists, so a bad value ends in one line
and exit code 2 rather than a traceback halfway through a run.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import typing
from typing import Any

from iclr26.core.errors import UserError

#: metadata keys written by :func:`param` that describe the valid values of a field
RANGE_KEYS = ("choices", "low", "high", "low_open", "high_open", "min_len", "max_len", "elem_low", "elem_high")


def param(
    default: Any,
    doc: str,
    *,
    choices: list | tuple | None = None,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    min_len: int | None = None,
    max_len: int | None = None,
    elem_low: float | None = None,
    elem_high: float | None = None,
) -> Any:
    """A dataclass field with a one-line doc and its valid range (shown by ``iclr26 show``).

    ``low``/``high`` bound a number (closed unless ``low_open``/``high_open``); floats must also be
    finite. ``choices`` lists the allowed values. For list fields ``min_len``/``max_len`` bound the
    length and ``elem_low``/``elem_high`` (closed) bound every element. Mutable defaults (lists,
    dicts) are wrapped in a factory automatically.
    """
    meta: dict[str, Any] = {"doc": doc}
    if choices is not None:
        meta["choices"] = tuple(choices)
    for key, val in (("low", low), ("high", high), ("min_len", min_len), ("max_len", max_len),
                     ("elem_low", elem_low), ("elem_high", elem_high)):
        if val is not None:
            meta[key] = val
    if low_open:
        meta["low_open"] = True
    if high_open:
        meta["high_open"] = True
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def field_docs(cfg_cls: type) -> dict[str, str]:
    return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cfg_cls)}


def field_spec(cfg_cls: type, name: str) -> dict[str, Any]:
    """The range metadata :func:`param` recorded for field ``name`` (empty when none was declared)."""
    for f in dataclasses.fields(cfg_cls):
        if f.name == name:
            return {k: f.metadata[k] for k in RANGE_KEYS if k in f.metadata}
    raise KeyError(name)


def _num(x: Any) -> str:
    return repr(x) if isinstance(x, float) else str(x)


def _interval(spec: dict[str, Any], lo_key: str, hi_key: str, var: str, open_ok: bool) -> str:
    lo, hi = spec.get(lo_key), spec.get(hi_key)
    lo_op = "<" if open_ok and spec.get("low_open") else "<="
    hi_op = "<" if open_ok and spec.get("high_open") else "<="
    if lo is not None and hi is not None:
        return f"{_num(lo)} {lo_op} {var} {hi_op} {_num(hi)}"
    if lo is not None:
        return f"{var} {'>' if lo_op == '<' else '>='} {_num(lo)}"
    if hi is not None:
        return f"{var} {hi_op} {_num(hi)}"
    return ""


def describe_range(cfg_cls: type, name: str) -> str:
    """Human-readable valid range of a field, e.g. ``1 <= n <= 1e6`` or ``one of rf, hgb``."""
    spec = field_spec(cfg_cls, name)
    if "choices" in spec:
        return "one of " + ", ".join(map(str, spec["choices"]))
    tp = _field_type(cfg_cls, name)
    if typing.get_origin(tp) in (list, tuple):
        parts = []
        ln = _interval({"low": spec.get("min_len"), "high": spec.get("max_len")}, "low", "high", "length", False)
        if ln:
            parts.append(ln)
        el = _interval(spec, "elem_low", "elem_high", "each", False)
        if el:
            parts.append(el)
        return ", ".join(parts)
    if tp is str:
        return "non-empty text" if spec.get("min_len") else "any text"
    if tp is bool:
        return "true or false"
    return _interval(spec, "low", "high", name, True)


@functools.cache
def _type_hints(cfg_cls: type) -> dict[str, Any]:
    # get_type_hints compiles every string annotation anew (the configs use ``from __future__ import annotations``);
    # validating one config asked for them once per field, ~0.4 s per ``--set`` on a loaded 2-core machine.
    # A class's annotations do not change after it is defined, so they are resolved once per class.
    return typing.get_type_hints(cfg_cls)


def _field_type(cfg_cls: type, name: str) -> Any:
    return _type_hints(cfg_cls)[name]


def _as_int(v: Any) -> int:
    """An int from an int, an integral float (JSON ``3.0``) or a decimal string; never from a bool."""
    if isinstance(v, bool):
        raise ValueError(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if not v.is_integer():
            raise ValueError(v)
        return int(v)
    if isinstance(v, str):
        return int(v.strip())
    raise TypeError(v)


def _as_float(v: Any) -> float:
    if isinstance(v, bool):
        raise ValueError(v)
    if isinstance(v, (int, float, str)):
        return float(v)
    raise TypeError(v)


def coerce(cfg_cls: type, name: str, raw: Any) -> Any:
    """Convert ``raw`` (a string from the command line, or a JSON value) to the field's type."""
    tp = _field_type(cfg_cls, name)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    try:
        if isinstance(raw, str):
            if tp is str:
                value: Any = raw
            elif tp is bool:
                low = raw.lower()
                if low in ("1", "true", "yes", "on"):
                    value = True
                elif low in ("0", "false", "no", "off"):
                    value = False
                else:
                    raise ValueError(raw)
            elif tp is int:
                value = int(raw)
            elif tp is float:
                value = float(raw)
            else:
                # lists / tuples / optionals: accept JSON or a comma-separated list
                try:
                    value = json.loads(raw)
                except json.JSONDecodeError:
                    if origin in (list, tuple):
                        value = [s.strip() for s in raw.split(",") if s.strip()]
                    elif raw.lower() in ("none", "null"):
                        value = None
                    else:
                        value = raw
        else:
            value = raw
        # element coercion for homogeneous lists/tuples
        if origin in (list, tuple) and args:
            elem = args[0]
            if not isinstance(value, (list, tuple)):
                value = [value]
            if elem is int:
                value = [_as_int(v) for v in value]
            elif elem is float:
                value = [_as_float(v) for v in value]
            elif elem is str:
                value = [str(v) for v in value]
            value = tuple(value) if origin is tuple else list(value)
        elif tp is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif tp is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        elif tp in (int, float, bool, str) and (not isinstance(value, tp) or (tp is not bool and isinstance(value, bool))):
            raise ValueError(value)
    except (ValueError, TypeError, OverflowError):
        raise UserError(f"--set {name}={raw!r}: expected a value of type {_type_name(tp)}") from None
    choices = field_spec(cfg_cls, name).get("choices")
    if choices is not None and value not in choices:
        raise UserError(f"--set {name}={raw!r}: allowed values are {', '.join(map(str, choices))}")
    return value


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


def _in_interval(x: float, spec: dict[str, Any], lo_key: str, hi_key: str, open_ok: bool) -> bool:
    lo, hi = spec.get(lo_key), spec.get(hi_key)
    if lo is not None and (x < lo or (open_ok and spec.get("low_open") and x == lo)):
        return False
    return not (hi is not None and (x > hi or (open_ok and spec.get("high_open") and x == hi)))


def check_field(cfg_cls: type, name: str, value: Any) -> None:
    """Raise a one-line ``UserError`` when ``value`` is outside the declared range of field ``name``."""
    spec = field_spec(cfg_cls, name)
    tp = _field_type(cfg_cls, name)
    allowed = describe_range(cfg_cls, name)
    where = f"config field {name}={value!r}"
    if "choices" in spec and value not in spec["choices"]:
        raise UserError(f"{where}: allowed values are {', '.join(map(str, spec['choices']))}")
    if typing.get_origin(tp) in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise UserError(f"{where}: expected a list")
        n = len(value)
        if not _in_interval(n, {"low": spec.get("min_len"), "high": spec.get("max_len")}, "low", "high", False):
            raise UserError(f"{where}: needs {allowed}")
        for v in value:
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if not math.isfinite(v) or not _in_interval(v, spec, "elem_low", "elem_high", False):
                    raise UserError(f"{where}: element {v!r} is out of range; needs {allowed}")
        return
    if tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"{where}: expected a value of type {_type_name(tp)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{where}: must be a finite number" + (f" with {allowed}" if allowed else ""))
        if not _in_interval(value, spec, "low", "high", True):
            raise UserError(f"{where} is out of range: allowed {allowed}")
    elif tp is str and spec.get("min_len") and not (isinstance(value, str) and value.strip()):
        raise UserError(f"{where}: must be non-empty text")


def check_config(cfg: Any) -> Any:
    """Check every field of ``cfg`` against its declared range, then ``cfg.validate()`` if defined.

    Returns ``cfg``; raises a one-line :class:`UserError` naming the field and what is allowed.
    """
    for f in dataclasses.fields(cfg):
        check_field(type(cfg), f.name, getattr(cfg, f.name))
    validate = getattr(cfg, "validate", None)
    if callable(validate):
        validate()
    return cfg


def apply_overrides(cfg: Any, overrides: dict[str, Any]) -> Any:
    """Return a copy of ``cfg`` with ``overrides`` applied; unknown keys raise ``UserError``."""
    names = [f.name for f in dataclasses.fields(cfg)]
    changes = {}
    for key, raw in overrides.items():
        if key not in names:
            close = difflib.get_close_matches(key, names, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise UserError(
                f"unknown config key {key!r}{hint}; valid keys: {', '.join(names)}"
            )
        changes[key] = coerce(type(cfg), key, raw)
    return dataclasses.replace(cfg, **changes)


def config_to_dict(cfg: Any) -> dict[str, Any]:
    out = dataclasses.asdict(cfg)
    return json.loads(json.dumps(out, default=str))


def config_from_dict(cfg_cls: type, data: dict[str, Any]) -> Any:
    return apply_overrides(cfg_cls(), data)
