"""Where iclr26 keeps caches and fetched data: ``$ICLR26_CACHE`` / ``$ICLR26_DATA`` or ``~/.cache/iclr26``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    return Path(os.environ.get("ICLR26_CACHE") or Path.home() / ".cache" / "iclr26")


def data_home() -> Path:
    return Path(os.environ.get("ICLR26_DATA") or cache_home())
