"""Config dataclass helpers: one documented field per hyperparameter, presets, ``--set`` parsing."""

from __future__ import annotations

import dataclasses
import difflib
import json
import typing
from typing import Any

from iclr26.core.errors import UserError


def param(default: Any, doc: str, *, choices: list | tuple | None = None) -> Any:
    """A dataclass field with a one-line doc (shown by ``iclr26 show`` and ``--set`` errors).

    Mutable defaults (lists, tuples of lists, dicts) are wrapped in a factory automatically.
    """
    meta = {"doc": doc}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def field_docs(cfg_cls: type) -> dict[str, str]:
    return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cfg_cls)}


def _field_type(cfg_cls: type, name: str) -> Any:
    hints = typing.get_type_hints(cfg_cls)
    return hints[name]


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
            if elem in (int, float, str):
                value = [elem(v) for v in value]
            value = tuple(value) if origin is tuple else list(value)
        elif tp is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif tp in (int, float, bool, str) and not isinstance(value, tp):
            raise ValueError(value)
    except (ValueError, TypeError):
        raise UserError(f"--set {name}={raw!r}: expected a value of type {_type_name(tp)}") from None
    choices = next(
        (f.metadata.get("choices") for f in dataclasses.fields(cfg_cls) if f.name == name), None
    )
    if choices is not None and value not in choices:
        raise UserError(f"--set {name}={raw!r}: allowed values are {', '.join(map(str, choices))}")
    return value


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


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
