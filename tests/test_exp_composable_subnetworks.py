"""The composable-subnetworks reproduction: smoke wiring (default-preset claims: tests/test_common.py)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

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
        "C1e",
        "C1f",
        "C2",
        "C3a",
        "C3b",
        "C4a",
        "C4b",
        "sanity_sparsity",
    }
    assert all(c.gated for c in res.claims)  # the headline C3a is gated too
    # Two seeds: every gated paper claim is the seed mean with a t-interval over the seeds, and has a null arm
    assert res.metrics["n_seeds"] == 2.0
    for key, name in (("weight_sum_minus_permuted", "C3b"), ("barrier_same", "C4b")):
        vals = [res.metrics[f"seed{i}_{key}"] for i in range(2)]
        by = next(c for c in res.claims if c.name == name)
        assert by.value == pytest.approx(sum(vals) / 2)
        assert by.estimate.unit == "seed" and by.estimate.n == 2 and by.null is not None and by.trained
        assert by.verdict in ("inconclusive", "no power")  # two seeds < 3: never decided
    assert exp.HEADLINE == "C3a"
    assert sorted(ctx.figures) == ["barrier", "composition", "mask_overlap", "per_module"]
    masks = load_masks(tmp_path / "masks.safetensors")
    assert len(masks) == 10 * 3 and all(m.dtype == torch.bool for m in masks.values())
    curves = json.loads((tmp_path / "curves.json").read_text())
    assert len(curves["composition"]["weight_sum"]["accuracy"]) == 10
    assert curves["barrier_same"]["barrier"] >= 0



def test_fashion_mnist_fallback_is_recorded_as_a_missing_asset(tmp_path, monkeypatch):
    """dataset=auto without Fashion-MNIST falls back to digits *and says so* to the engine (not just a note)."""
    from iclr26.core.errors import MissingAssetError
    from iclr26.data import images

    def absent(*a, **k):
        raise MissingAssetError("Fashion-MNIST", "python -m iclr26.assets fetch")

    monkeypatch.setattr(images, "load_fashion_mnist", absent)
    cfg = dataclasses.replace(exp.Config(), **{**exp.PRESETS["smoke"], "dataset": "auto"})
    ctx = RunContext(tmp_path, torch.device("cpu"), 0, "smoke")
    exp.run(cfg, ctx)
    assert [a["name"] for a in ctx.missing_assets] == ["Fashion-MNIST"]
    assert "digits" in ctx.missing_assets[0]["skipped"]
