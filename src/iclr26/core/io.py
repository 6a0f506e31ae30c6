"""Files on disk: atomic writes, and weights as ``*.safetensors`` plus a ``cfg.json`` (never pickles).

Every writer in iclr26 goes through :func:`atomic_path` (or :func:`atomic_dir` for a folder): the
content is written under a hidden temporary name beside the target and renamed onto it only when the
writer finished, so an interrupted write never leaves a half file that looks complete.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from iclr26.core.errors import UserError

_counter = itertools.count()


def _temp_sibling(path: Path, keep_suffix: bool) -> Path:
    # unique per process and call; the target's suffix is kept so that writers that infer the format
    # from the name (matplotlib's savefig) still work
    return path.with_name(
        f".{path.name}.tmp-{os.getpid()}-{next(_counter)}" + (path.suffix if keep_suffix else "")
    )


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary file path beside ``path``; on success it is renamed onto ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was. The parent folder
    is created if needed. Example: ``with atomic_path(out / "fig.png") as tmp: fig.savefig(tmp)``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_sibling(path, keep_suffix=True)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            _remove(tmp)


@contextmanager
def atomic_dir(path: str | Path, *, replace: bool = True) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; on success it becomes ``path``.

    An existing ``path`` is removed first when ``replace`` (else ``UserError``); on an exception the
    temporary folder is removed. Used for multi-file caches (a converted model, an unpacked package).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_sibling(path, keep_suffix=False)
    tmp.mkdir()
    try:
        yield tmp
        if path.exists():
            if not replace:
                raise UserError(f"{path} already exists; remove it or choose another folder")
            _remove(path)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            _remove(tmp)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_json(path: str | Path, obj: Any, **dumps_kw: Any) -> None:
    """``json.dumps(obj, indent=2, **dumps_kw)`` written atomically."""
    atomic_write_text(path, json.dumps(obj, **{"indent": 2, **dumps_kw}))


def save_tensors(
    path: str | Path, tensors: dict[str, torch.Tensor], cfg: dict[str, Any] | None = None
) -> None:
    """Save ``tensors`` to ``path`` (safetensors) and, if given, ``cfg`` to ``cfg.json`` beside it."""
    path = Path(path)
    with atomic_path(path) as tmp:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))
    if cfg is not None:
        atomic_write_json(path.parent / "cfg.json", cfg, default=str)


def save_module(
    module: torch.nn.Module,
    folder: str | Path,
    cfg: dict[str, Any] | None = None,
    name: str = "model.safetensors",
) -> Path:
    folder = Path(folder)
    save_tensors(folder / name, dict(module.state_dict()), cfg)
    return folder / name


def load_tensors(path: str | Path) -> dict[str, torch.Tensor]:
    path = Path(path)
    if not path.exists():
        raise UserError(f"weights file not found: {path}")
    return load_file(str(path))


def load_module_state(module: torch.nn.Module, path: str | Path, strict: bool = True) -> torch.nn.Module:
    module.load_state_dict(load_tensors(path), strict=strict)
    return module


def load_cfg(folder: str | Path) -> dict[str, Any]:
    p = Path(folder) / "cfg.json"
    if not p.exists():
        raise UserError(f"no cfg.json in {folder}")
    return json.loads(p.read_text())
