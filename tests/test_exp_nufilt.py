"""The NUFILT reproduction: smoke wiring, graceful skip without Fashion-MNIST, gated claims at default."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from iclr26.core.errors import MissingAssetError
from iclr26.experiments import nufilt as exp
from iclr26.runs import RunContext


def _run(tmp_path, preset: str, **over):
    cfg = dataclasses.replace(exp.Config(), **{**exp.PRESETS[preset], **over})
    return exp.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, preset))


def test_smoke_runs_and_reports(tmp_path):
    res = _run(tmp_path, "smoke")
    assert {c.name for c in res.claims} >= {"C1a_premise_fc1", "C2_acc_vs_OPCM", "C4a_adapter_plasticity"}
    assert all(v == v for v in res.metrics.values())  # finite (no NaN)
    assert (tmp_path / "figures" / "overlap_sweep.png").exists()
    assert (tmp_path / "results.json").exists()


def test_missing_fashion_mnist_is_skipped_with_a_note(tmp_path, monkeypatch):
    def missing(*a, **k):
        raise MissingAssetError("Fashion-MNIST", "sudo apt-get install dataset-fashion-mnist")

    monkeypatch.setattr(exp.images, "load_fashion_mnist", missing)
    res = _run(tmp_path, "smoke", fmnist=True)
    assert "Fashion-MNIST part skipped" in res.notes
    assert not any(k.startswith("fmnist_") for k in res.metrics)


@pytest.mark.slow
def test_default_preset_gated_claims_hold(tmp_path):
    res = _run(tmp_path, "default")
    failed = [(c.name, round(c.value, 3), c.op, c.threshold) for c in res.claims if c.gated and not c.holds]
    assert not failed, failed
