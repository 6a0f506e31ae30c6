"""Shared fixtures: deterministic seeding for every test, GPU skip, quiet progress bars, a fake paper."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("ICLR26_PROGRESS", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def _seed_everything():
    from iclr26.core.seed import seed_everything

    seed_everything(1234)
    yield


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def fake_paper(monkeypatch):
    """Register tests/fake_experiment.py as an implemented paper named 'fake-paper'."""
    from iclr26 import registry

    sys.path.insert(0, str(Path(__file__).parent))
    paper = registry.Paper("P0", "fake-paper", "test", "A fake paper", "none", module="fake_experiment")
    monkeypatch.setattr(registry, "PAPERS", registry.PAPERS + (paper,))
    monkeypatch.setitem(registry._BY_SLUG, "fake-paper", paper)
    yield paper
    sys.path.remove(str(Path(__file__).parent))
