"""Explicit seeding. Library functions take ``seed``/``generator`` arguments; this is for entry points."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch global generators (entry points and tests only)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def make_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


@contextmanager
def seeded_torch(seed: int) -> Iterator[None]:
    """Run a block (module construction, whose init draws from torch's default generator) from a generator
    seeded with ``seed``, and give the caller its own global state back afterwards: the block's randomness
    depends only on ``seed``, and nothing outside it is disturbed."""
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(make_generator(seed).get_state())
        yield
