"""Weights go to disk as ``*.safetensors`` plus a ``cfg.json``; never pickles."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from iclr26.core.errors import UserError


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write via a temporary name and rename, so an interrupted write leaves no half file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], cfg: dict[str, Any] | None = None) -> None:
    """Save ``tensors`` to ``path`` (safetensors) and, if given, ``cfg`` to ``cfg.json`` beside it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))
    os.replace(tmp, path)
    if cfg is not None:
        atomic_write_text(path.parent / "cfg.json", json.dumps(cfg, indent=2, default=str))


def save_module(module: torch.nn.Module, folder: str | Path, cfg: dict[str, Any] | None = None,
                name: str = "model.safetensors") -> Path:
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
