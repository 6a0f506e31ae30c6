"""tqdm progress bars that stay quiet in tests and CI logs unless asked for."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def progress_enabled() -> bool:
    env = os.environ.get("ICLR26_PROGRESS")
    if env is not None:
        return env not in ("0", "false", "no")
    return sys.stderr.isatty()


def progress(it: Iterable[T] | None = None, *, desc: str = "", total: int | None = None,
             leave: bool = False, enabled: bool = True, **kw: Any) -> Any:
    """``tqdm`` over ``it``; disabled when stderr is not a terminal unless ICLR26_PROGRESS=1.

    ``enabled=False`` turns the bar off whatever the terminal.
    """
    on = enabled and progress_enabled()
    return tqdm(it, desc=desc, total=total, leave=leave, disable=not on, dynamic_ncols=True, **kw)
