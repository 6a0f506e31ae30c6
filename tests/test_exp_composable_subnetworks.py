"""The composable-subnetworks reproduction: smoke wiring and the default preset's gated claims."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from iclr26.core.errors import MissingAssetError
from iclr26.data import images
from iclr26.experiments import composable_subnetworks as exp
from iclr26.runs import RunContext
from iclr26.sparsity.subnetworks import load_masks


def _run(preset: str, tmp_path):
    cfg = dataclasses.replace(exp.Config(), **exp.PRESETS[preset])
    ctx = RunContext(tmp_path, torch.device("cpu"), 0, preset)
    return exp.run(cfg, ctx), ctx


def test_smoke_wires_everything(tmp_path):
    threads = torch.get_num_threads()
    res, ctx = _run("smoke", tmp_path)
    assert torch.get_num_threads() == threads  # restored
    assert all(math.isfinite(v) for v in res.metrics.values())
    assert res.metrics["dataset_is_fashion_mnist"] == 0.0 and "digits" in res.notes
    assert {c.name for c in res.claims} == {
        "C1a",
        "C1b",
        "C1c",
        "C1d",
        "C1e",
        "C2",
        "C3a",
        "C3b",
        "C4a",
        "C4b",
        "S0",
    }
    assert sorted(ctx.figures) == ["barrier", "composition", "mask_overlap", "per_module"]
    masks = load_masks(tmp_path / "masks.safetensors")
    assert len(masks) == 10 * 3 and all(m.dtype == torch.bool for m in masks.values())
    curves = json.loads((tmp_path / "curves.json").read_text())
    assert len(curves["composition"]["weight_sum"]["accuracy"]) == 10
    assert curves["barrier_same"]["barrier"] >= 0


@pytest.mark.slow
@pytest.mark.real
def test_default_preset_gated_claims_hold(tmp_path):
    # The thresholds were fixed for Fashion-MNIST; the digits fallback is reported, not asserted
    # (there the permuted-sum control C3b does not hold; see docs/composable-subnetworks.md).
    try:
        images.load_fashion_mnist("test")
    except MissingAssetError:
        pytest.skip("Fashion-MNIST (Debian dataset-fashion-mnist) not installed")
    res, _ = _run("default", tmp_path)
    assert res.metrics["dataset_is_fashion_mnist"] == 1.0
    failed = [(c.name, c.value, c.op, c.threshold) for c in res.claims if c.gated and not c.holds]
    assert not failed, f"gated claims failed: {failed}; notes: {res.notes}"
