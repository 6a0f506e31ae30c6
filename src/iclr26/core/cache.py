"""The cached trained artefacts (model organisms, DDPMs): where they live, how to list and clear them.

Both kinds are keyed by everything that changes the trained weights - the recipe's spec and source code,
the package and library versions, and the torch thread count the training ran with
(:func:`iclr26.core.paths.numerics_fingerprint`) - so a verdict never depends on whether the cache was
warm: a warm cache returns exactly the model a cold one would train. ``iclr26 cache list | clear``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from iclr26.core.errors import UserError

KINDS = ("organisms", "diffusion")


def _homes() -> dict[str, Path]:
    from iclr26.diffusion.ddpm import diffusion_home
    from iclr26.lm.train import organisms_home

    return {"organisms": organisms_home(), "diffusion": diffusion_home()}


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def list_cache() -> list[dict[str, Any]]:
    """One row per cached artefact: kind, folder name, size in MB, path."""
    rows = []
    for kind, home in _homes().items():
        if not home.is_dir():
            continue
        for d in sorted(home.iterdir()):
            if d.is_dir() and not d.name.startswith("."):
                rows.append({"kind": kind, "name": d.name, "size_mb": _size(d) / 1e6, "path": str(d)})
    return rows


def clear_cache(kind: str | None = None) -> int:
    """Remove the cached artefacts (of ``kind`` only, if given); returns how many folders were removed."""
    if kind is not None and kind not in KINDS:
        raise UserError(f"unknown cache kind {kind!r}; allowed: {', '.join(KINDS)}")
    n = 0
    for k, home in _homes().items():
        if kind not in (None, k) or not home.is_dir():
            continue
        for d in home.iterdir():
            if d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
                n += 1
    return n
