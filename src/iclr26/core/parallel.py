"""Process-level parallelism for the independent arms of one experiment (seeds, widths, models).

``parallel_map(fn, items)`` returns ``[fn(item) for item in items]``, computed by up to ``workers``
single-threaded worker processes. It is meant for a handful of coarse, independent tasks (each seconds
to minutes of CPU) on a CPU with a few cores, where one process per core beats one process with several
intra-op threads (see :mod:`iclr26.core.threads`).

Results are bit-identical to the serial path, provided ``fn`` derives all its randomness from its item
(explicit generators or ``torch.manual_seed`` at the top): the serial path runs the same calls in this
process with the same number of threads (``threads``, default 1), and every worker starts from the
same state. ``workers=1`` (or a single item, or a call from inside a worker) runs serially in-process.

Mechanics: ``forkserver`` worker processes where available, else ``spawn`` (never a bare ``fork`` of a
process whose OpenMP pool may be in use, which can hang the child). ``fn`` must be importable
(module-level) and items / results picklable; they travel as pickled bytes (torch tensors by value, no
shared-memory segments, so a small ``/dev/shm`` is no problem). Tasks are handed out in order to
whichever worker is free, so put the longest first. Ctrl-C (or any error) terminates the workers and
re-raises in the caller; workers ignore SIGINT themselves so that only the caller handles it.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import pickle
import signal
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch

from iclr26.core.errors import UserError
from iclr26.core.threads import default_workers

log = logging.getLogger(__name__)

__all__ = ["parallel_map", "in_worker"]

T = TypeVar("T")
R = TypeVar("R")

_IN_WORKER = False
_COMMON: Any = None


def in_worker() -> bool:
    """True inside a :func:`parallel_map` worker process (nested calls there run serially)."""
    return _IN_WORKER


def _start_method() -> str:
    methods = mp.get_all_start_methods()
    return "forkserver" if "forkserver" in methods else "spawn"


def _set_threads(threads: int) -> Callable[[], None]:
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    limiter = None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        limiter = threadpool_limits(limits=threads)

    def restore() -> None:
        if limiter is not None:
            limiter.restore_original_limits()
        torch.set_num_threads(prev)

    return restore


def _init_worker(threads: int, log_level: int, common: bytes | None, sys_path: list[str]) -> None:
    global _IN_WORKER, _COMMON
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller handles Ctrl-C and terminates us
    for p in reversed(sys_path):  # modules importable in the caller (e.g. tests) are importable here
        if p not in sys.path:
            sys.path.insert(0, p)
    _IN_WORKER = True
    os.environ.setdefault("ICLR26_PROGRESS", "0")  # several bars on one terminal line are unreadable
    from iclr26.core.progress import quiet_library_bars

    quiet_library_bars()
    _set_threads(threads)
    if log_level <= logging.INFO and not logging.getLogger().handlers:
        logging.basicConfig(level=log_level, format=f"%(name)s[w{os.getpid()}]: %(message)s")
    _COMMON = pickle.loads(common) if common is not None else None


def _call(fn: Callable, item: Any, common: Any, has_common: bool) -> Any:
    return fn(item, common) if has_common else fn(item)


def _worker_task(payload: bytes) -> bytes:
    fn, item, has_common = pickle.loads(payload)
    return pickle.dumps(_call(fn, item, _COMMON, has_common), protocol=pickle.HIGHEST_PROTOCOL)


def parallel_map(
    fn: Callable[..., R],
    items: Iterable[T],
    *,
    workers: int | None = None,
    threads: int = 1,
    common: Any = None,
    desc: str = "",
) -> list[R]:
    """``[fn(item) for item in items]`` (or ``fn(item, common)`` when ``common`` is given) in worker processes.

    workers: processes to use (default :func:`iclr26.core.threads.default_workers`: ``ICLR26_WORKERS``, else
        the run's thread plan, else 1); never more than there are items. 1 runs serially in this process.
    threads: torch / BLAS threads in each worker, and in this process for the serial path.
    common: one object every call gets as its second argument, sent to each worker once (e.g. the data).
    desc: label of a progress bar over finished tasks (shown on a terminal, see :mod:`iclr26.core.progress`).
    """
    from iclr26.core.progress import progress

    items = list(items)
    n = default_workers() if workers is None else int(workers)
    if n < 1:
        raise UserError(f"parallel_map: workers must be >= 1, got {workers}")
    if threads < 1:
        raise UserError(f"parallel_map: threads must be >= 1, got {threads}")
    n = min(n, len(items))
    has_common = common is not None
    if n <= 1 or _IN_WORKER:
        restore = _set_threads(threads) if not _IN_WORKER else (lambda: None)
        try:
            return [_call(fn, item, common, has_common)
                    for item in progress(items, desc=desc, total=len(items), enabled=bool(desc))]
        finally:
            restore()
    method = _start_method()
    ctx = mp.get_context(method)
    if method == "forkserver":
        # import the task's module once in the server instead of once per worker
        ctx.set_forkserver_preload([m for m in ("torch", getattr(fn, "__module__", None)) if m])
    blob = pickle.dumps(common, protocol=pickle.HIGHEST_PROTOCOL) if has_common else None
    level = logging.getLogger().getEffectiveLevel()
    payloads = [pickle.dumps((fn, item, has_common), protocol=pickle.HIGHEST_PROTOCOL) for item in items]
    log.info("parallel_map: %d tasks of %s on %d %s workers", len(items), getattr(fn, "__name__", fn), n, method)
    pool = ctx.Pool(n, initializer=_init_worker, initargs=(threads, level, blob, list(sys.path)))
    try:
        it = pool.imap(_worker_task, payloads, chunksize=1)
        out = [pickle.loads(r) for r in progress(it, desc=desc, total=len(items), enabled=bool(desc))]
    except BaseException:
        pool.terminate()
        pool.join()
        raise
    pool.close()
    pool.join()
    return out
