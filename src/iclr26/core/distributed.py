"""Data-parallel set-up shared by every trainer that may run under ``torchrun``.

Launching with ``torchrun --nproc_per_node N`` sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``;
:func:`distributed_from_env` reads them, opens the default process group (gloo on CPU, nccl on
CUDA) and closes it again on exit. Without torchrun everything degrades to one process:
``dist_info() == (0, 1)`` and :func:`all_reduce_` is a no-op.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from iclr26.core.errors import UserError


def _dist():
    import torch.distributed as dist

    return dist


def dist_info() -> tuple[int, int]:
    """(rank, world_size) of the initialised default process group, else (0, 1)."""
    dist = _dist()
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed_from_env(device: str = "auto") -> tuple[int, int, torch.device]:
    """Initialise the process group when launched by torchrun (``WORLD_SIZE`` > 1).

    ``device`` is ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda[:i]"``; on CUDA each rank
    takes the GPU ``LOCAL_RANK``. Returns (rank, world_size, device); (0, 1, device) without torchrun.
    """
    dist = _dist()
    use_cuda = torch.cuda.is_available() if device == "auto" else str(device).startswith("cuda")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device(f"cuda:{local}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return rank, world, dev


@contextmanager
def distributed_from_env(device: str = "auto") -> Iterator[tuple[int, int, torch.device]]:
    """:func:`init_distributed_from_env` as a context; the process group is destroyed on exit."""
    try:
        yield init_distributed_from_env(device)
    finally:
        dist = _dist()
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def all_reduce_grads_(params: Iterable[torch.nn.Parameter]) -> None:
    """Sum the gradients of ``params`` over all ranks through one flat buffer (one collective).

    Use SUM when each rank's loss is already normalised by global-batch constants, so the summed
    gradient equals the single-process gradient. Missing gradients count as zeros. No-op on one process.
    """
    if dist_info()[1] == 1:
        return
    dist = _dist()
    params = list(params)
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    off = 0
    for p in params:
        p.grad.copy_(flat[off : off + p.numel()].view(p.shape))
        off += p.numel()


_OPS = {"sum": "SUM", "max": "MAX", "min": "MIN"}


def all_reduce_(t: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """In-place all-reduce of ``t`` with ``op`` in {sum, max, min}; returns ``t`` (no-op on one process)."""
    if op not in _OPS:
        raise UserError(f"all_reduce_ op={op!r}; allowed: {', '.join(_OPS)}")
    if dist_info()[1] == 1:
        return t
    dist = _dist()
    dist.all_reduce(t, op=getattr(dist.ReduceOp, _OPS[op]))
    return t
