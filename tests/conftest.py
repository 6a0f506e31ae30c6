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
# Under pytest-xdist the test workers already take every core, so a run's independent arms stay in its own
# process (``parallel_map`` serial path, bit-identical to the pooled one): a pool there only adds a forkserver
# that imports torch again and four busy processes on two cores (the smoke battery took 57 s with pools and
# 36 s without, 2 workers, 2 cores). tests/test_parallel.py drives the pooled path with explicit workers.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("ICLR26_WORKERS", "1")


@pytest.fixture(autouse=True)
def _seed_everything():
    from iclr26.core.seed import seed_everything

    seed_everything(1234)
    yield


# The longest tests (seconds on the 2-core CI machine, worker-time, measured 2026-12-05 on a cold clone): started first so
# that two xdist workers do not end on one long test while the other idles. The scheduler below hands out the list in
# this order, one unit at a time, to whichever worker has at most two tests pending. Order only; nothing depends on it.
_LONG_FIRST = ("[role-modality-attacks]", "[humof]", "[degenerate-explanations]", "[strategic-dishonesty]", "[sae-seeds]",
               "[fdfi]", "[culture-neurons]", "[latent-planning]", "[functional-rectified-flow]", "[ptq-meta-weighting]", "[mi-ue]",
               "[nufilt]", "[reasoning-misalignment]", "test_lm_variant_larger", "[rangeformer]",
               "[composable-subnetworks]", "[sae-bias-latents]", "test_gemma3_culture_units", "[hyper-set]")


def _start_rank(item) -> tuple[int, int]:
    nid = item.nodeid
    if "test_default_preset_verdicts_match_expected" in nid or "test_gemma3" in nid or "test_lm_variant_larger" in nid:
        hits = [i for i, key in enumerate(_LONG_FIRST) if key in nid]
        return (0, hits[0] if hits else len(_LONG_FIRST))
    return (1, 0) if "slow" in item.keywords else (2, 0)


# Test modules whose tests share a module-scoped fixture (a smoke run, a trained model). Under plain `--dist load`
# their tests spread over both workers and each worker builds the fixture again (ptq's smoke run twice, 14 s each);
# here every such module is one scheduling unit, so one worker runs all its tests and builds the fixture once. The
# long tests named in _LONG_FIRST stay units of their own, so they still start first. (`--dist loadgroup` with
# `xdist_group` marks would say the same, but it does not group under pytest 9 with xdist 3.8: checked.)
_ONE_WORKER_MODULES = frozenset(
    f"tests/{name}.py" for name in (
        "test_exp_ampo", "test_exp_humof", "test_exp_hyper_set", "test_exp_latent_planning",
        "test_exp_ptq_meta_weighting", "test_exp_rangeformer", "test_exp_sae_bias_latents", "test_capture",
        "test_memorization", "test_merging_fusionbench", "test_motion", "test_planning", "test_ptq"))


def pytest_xdist_make_scheduler(config, log):
    """`--dist load` (the Makefile's): load scheduling in collection order (see _start_rank), with the modules above
    kept on one worker each. Any other `--dist` mode is left to xdist."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class _ModuleUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module in _ONE_WORKER_MODULES and not any(key in nodeid for key in _LONG_FIRST + ("test_gemma3",)):
                return module
            return nodeid

    config.option.loadscopereorder = False  # keep the long-first order; by default loadscope puts big units first
    return _ModuleUnits(config, log)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_start_rank)  # stable: collection order within a rank
    # ICLR26_GPU_CHECK_DEVICE=cpu: a dry run of tests/test_gpu.py (make gpu-check) on the CPU, without CUDA
    if torch.cuda.is_available() or os.environ.get("ICLR26_GPU_CHECK_DEVICE") == "cpu":
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
