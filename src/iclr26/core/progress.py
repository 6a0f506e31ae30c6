"""tqdm progress bars that stay quiet in tests and CI logs unless asked for."""

from __future__ import annotations

import importlib
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


# (module, function) that turns a library's own bars off: huggingface_hub (downloads), transformers ("Loading
# weights", "Writing model shards": one pair per organism load or save), diffusers (pipelines)
_LIBRARY_BAR_SWITCHES = (("huggingface_hub.utils", "disable_progress_bars"),
                         ("transformers.utils.logging", "disable_progress_bar"),
                         ("diffusers.utils.logging", "disable_progress_bar"))


def quiet_library_bars() -> None:
    """Where iclr26's bars are off (:func:`progress_enabled`), turn the Hugging Face libraries' bars off as well.

    Libraries not imported yet read ``HF_HUB_DISABLE_PROGRESS_BARS`` when they are (set here unless the user set
    it); those already imported are switched off directly. Nothing changes where bars are on."""
    if progress_enabled():
        return
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for module, fn in _LIBRARY_BAR_SWITCHES:
        if module.split(".")[0] in sys.modules:
            try:
                getattr(importlib.import_module(module), fn)()
            except (ImportError, AttributeError):  # an older release without the switch: its bars stay
                pass
