"""CPU thread policy: how many torch / BLAS / OpenMP threads a run uses, and how many worker processes
its independent arms may use (:func:`iclr26.core.parallel.parallel_map`).

This is the one place that decides it; the engine applies it to every run. An experiment module states
*what kind of work it does* with a module constant ``WORKLOAD`` (a key of :data:`WORKLOADS`); a config
field ``threads`` (an explicit request) wins over the workload, and the environment wins over both:

- ``ICLR26_THREADS=N``: N intra-op threads per process, whatever the paper says;
- ``ICLR26_WORKERS=N``: at most N worker processes for independent arms (1 = everything in-process).

Why per workload: many small matrix products (a 32-channel FNO, an SAE with 1k latents, a 26k-parameter
MLP) gain nothing from a second OpenMP thread, and when anything else runs on a 2-core machine the
threads' barriers make LAPACK and small-matrix work several times *slower*. Two single-threaded
processes working on independent arms use both cores without that contention. Thread counts never
depend on the machine's current load: the number of threads can change the order of floating-point
reductions, and a run's metrics must not depend on what else was running. The load is recorded in the
plan (and a warning is logged when a multi-threaded plan starts on a busy machine). Worker counts do not
change results (every arm runs single-threaded and seeds itself), so they may follow the CPUs.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

__all__ = [
    "WORKLOADS",
    "ENV_THREADS",
    "ENV_WORKERS",
    "ThreadPlan",
    "cpu_count",
    "thread_policy",
    "plan_for_config",
    "apply_thread_policy",
    "active_plan",
    "default_workers",
]

ENV_THREADS = "ICLR26_THREADS"
ENV_WORKERS = "ICLR26_WORKERS"

#: workload -> (intra-op threads per process, may independent arms use one process per CPU?)
#: ``None`` threads = all CPUs of this process.
WORKLOADS: dict[str, tuple[int | None, bool]] = {
    # many small models / small matrix products: one thread per process, arms in parallel processes
    "small": (1, True),
    # one big model whose matrix products are large enough to split across cores (no process parallelism)
    "dense": (None, False),
}


@dataclass(frozen=True)
class ThreadPlan:
    """Threads per process and worker processes for one run, and why (``source``)."""

    threads: int
    workers: int
    workload: str | None
    source: str  # "flag", "env", "config", "workload" or "unchanged"
    cpus: int
    load: float | None


def cpu_count() -> int:
    """CPUs this process may run on (affinity mask where the OS has one, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise UserError(f"{name}={raw!r}: expected a positive integer") from None
    if value < 1:
        raise UserError(f"{name}={raw!r}: expected a positive integer")
    return value


def _load() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def thread_policy(workload: str | None = None, *, requested: int | None = None, threads: int | None = None,
                  workers: int | None = None) -> ThreadPlan:
    """Decide threads and workers: ``threads`` (``iclr26 run --threads``) > ``ICLR26_THREADS`` > ``requested``
    (a config's ``threads`` field) > ``workload`` > torch's current setting.

    Workers (for independent arms): ``workers`` (``--workers``), else ``ICLR26_WORKERS`` if set, else one per
    CPU for a workload that allows process parallelism and runs single-threaded, else 1.
    """
    for flag, v in (("--threads", threads), ("--workers", workers)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise UserError(f"{flag} {v!r}: expected a positive integer")
    if workload is not None and workload not in WORKLOADS:
        raise UserError(f"unknown workload {workload!r}; allowed: {', '.join(WORKLOADS)}")
    cpus = cpu_count()
    env_threads = _env_int(ENV_THREADS)
    wl_threads, wl_parallel = WORKLOADS[workload] if workload is not None else (None, False)
    flag_threads, flag_workers = threads, workers
    if flag_threads is not None:
        threads, source = flag_threads, "flag"
    elif env_threads is not None:
        threads, source = env_threads, "env"
    elif requested is not None:
        threads, source = max(1, int(requested)), "config"
    elif workload is not None:
        threads, source = (wl_threads if wl_threads is not None else cpus), "workload"
    else:
        threads, source = torch.get_num_threads(), "unchanged"
    env_workers = _env_int(ENV_WORKERS)
    if flag_workers is not None:
        workers = flag_workers
    elif env_workers is not None:
        workers = env_workers
    elif wl_parallel and threads == 1:
        workers = cpus
    else:
        workers = 1
    return ThreadPlan(threads, workers, workload, source, cpus, _load())


def plan_for_config(cfg: Any, workload: str | None = None, *, threads: int | None = None,
                    workers: int | None = None) -> ThreadPlan:
    """The plan for a run of ``cfg``: the experiment's ``workload`` (passed by the engine, which read the
    module's ``WORKLOAD``), the config's ``threads`` field if any, and the ``--threads`` / ``--workers`` flags."""
    want = getattr(cfg, "threads", None)
    requested = want if isinstance(want, int) and not isinstance(want, bool) else None
    return thread_policy(workload, requested=requested, threads=threads, workers=workers)


_ACTIVE: list[ThreadPlan] = []


def active_plan() -> ThreadPlan | None:
    """The plan the engine applied to the run in progress (``None`` outside a run)."""
    return _ACTIVE[-1] if _ACTIVE else None


def default_workers() -> int:
    """Worker processes :func:`~iclr26.core.parallel.parallel_map` uses when not told: ``ICLR26_WORKERS``,
    else the active plan's, else 1 (library calls outside a run stay in-process)."""
    env = _env_int(ENV_WORKERS)
    if env is not None:
        return env
    plan = active_plan()
    return plan.workers if plan is not None else 1


def apply_thread_policy(plan: ThreadPlan | Any) -> tuple[int, Callable[[], None]]:
    """Apply ``plan`` (or the plan for a config, see :func:`plan_for_config`); returns ``(threads, restore)``.

    Sets torch's intra-op threads and, when ``threadpoolctl`` is installed and the plan is not
    "unchanged", the BLAS / OpenMP pools of NumPy and SciPy. ``restore()`` puts everything back
    (in-process callers such as the tests run many papers one after another).
    """
    if not isinstance(plan, ThreadPlan):
        plan = plan_for_config(plan)
    prev = torch.get_num_threads()
    if plan.threads != prev:
        torch.set_num_threads(plan.threads)
    limiter = None
    if plan.source != "unchanged":
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            pass
        else:
            limiter = threadpool_limits(limits=plan.threads)
    # the 1-minute load still counts this process's previous run (``run all``), so warn only when the
    # machine is loaded beyond its CPUs: then other work certainly competes with our threads
    busy = plan.load is not None and plan.threads > 1 and plan.load > plan.cpus + 0.5
    if busy:
        log.warning(
            "machine busy (load %.1f on %d CPUs) and %d threads per process: multi-threaded BLAS may run "
            "much slower; set %s=1 to avoid oversubscription",
            plan.load, plan.cpus, plan.threads, ENV_THREADS,
        )
    log.debug("thread plan: %s", plan)
    _ACTIVE.append(plan)

    def restore() -> None:
        if _ACTIVE and _ACTIVE[-1] is plan:
            _ACTIVE.pop()
        if limiter is not None:
            limiter.restore_original_limits()
        torch.set_num_threads(prev)

    return plan.threads, restore


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run the block with one torch intra-op thread (and one BLAS thread where ``threadpoolctl`` is installed),
    whatever the run's thread plan; restore both after.

    For experiments whose trained models change with the thread count (the reduction order of a matmul does):
    inside this block ``--threads 1`` and ``--threads 2`` train the same model on one machine, so their verdicts
    cannot differ for that reason. The price is that extra threads are not used there.
    """
    prev = torch.get_num_threads()
    limiter = None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        limiter = threadpool_limits(limits=1)
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev)
        if limiter is not None:
            limiter.restore_original_limits()
