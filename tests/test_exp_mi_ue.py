"""The mi-ue reproduction: smoke wiring (default-preset claims: tests/test_common.py)."""

from __future__ import annotations

import dataclasses
import json
import math

import torch

from iclr26.experiments import mi_ue as exp
from iclr26.runs import RunContext


def _run(preset: str, tmp_path, **over):
    cfg = dataclasses.replace(exp.Config(), **{**exp.PRESETS[preset], **over})
    ctx = RunContext(tmp_path, torch.device("cpu"), 0, preset)
    return exp.run(cfg, ctx), ctx


def test_smoke_wires_everything(tmp_path):
    threads = torch.get_num_threads()
    res, ctx = _run("smoke", tmp_path)
    assert torch.get_num_threads() == threads
    assert all(math.isfinite(v) for v in res.metrics.values())
    assert res.metrics["dataset_is_fashion_mnist"] == 0.0 and "digits" in res.notes
    names = {c.name for c in res.claims}
    assert {"C1_miue_vs_em", "C1_both_vs_random", "C2_cov_lowest", "C2_mi_lowest", "C2_spearman", "C3_em_acc",
            "C3_miue_mi", "C4_each_defense", "C4_effective_where_em_degrades"} <= names
    by = {c.name: c for c in res.claims}
    assert all(by[n].null is not None for n in names if by[n].kind == "paper")
    # C1 decides over victim seeds (paired); C2's rank null enumerates the 6! orderings of the poison conditions
    assert by["C1_miue_vs_em"].estimate.unit == "seed" and by["C1_miue_vs_em"].estimate.n == 2
    assert by["C2_spearman"].null.n == 720
    assert "acc_em-rerun_shallow" in res.metrics
    kinds = {c.name: c.kind for c in res.claims}
    assert all(kinds[n] == "control" for n in names if n.startswith("ctrl_"))
    assert all(kinds[n] == "sanity" for n in names if n.startswith("sanity_"))
    # every controlled quantity is recorded for every set x victim
    for s in exp.SETS:
        for v in exp.VICTIMS:
            for key in ("acc", "gaussian_mi", "ksg_mi", "within_class_cov"):
                assert f"{key}_{s}_{v}" in res.metrics
    # the budget is exact
    assert res.metrics["budget_violations"] == 0.0
    assert next(c for c in res.claims if c.name == "sanity_budget").holds
    assert sorted(ctx.figures) == ["defenses", "image_grid", "mi_vs_accuracy", "victim_accuracy"]
    hist = json.loads((tmp_path / "histories.json").read_text())
    assert len(hist["generation"]["mi-ue"]) == exp.PRESETS["smoke"]["gen_epochs"]


def test_deterministic(tmp_path):
    a, _ = _run("smoke", tmp_path / "a", defenses="none")
    b, _ = _run("smoke", tmp_path / "b", defenses="none")
    assert a.metrics.keys() == b.metrics.keys()
    for k, v in a.metrics.items():
        if "seconds" not in k:
            assert v == b.metrics[k], k


def test_fashion_mnist_fallback_is_recorded_as_a_missing_asset(tmp_path, monkeypatch):
    from iclr26.core.errors import MissingAssetError
    from iclr26.data import images

    def absent(*a, **k):
        raise MissingAssetError("Fashion-MNIST", "python -m iclr26.assets fetch")

    monkeypatch.setattr(images, "load_fashion_mnist", absent)
    res, ctx = _run("smoke", tmp_path, dataset="auto", defenses="none")
    assert [a["name"] for a in ctx.missing_assets] == ["Fashion-MNIST"]
    assert res.metrics["dataset_is_fashion_mnist"] == 0.0


def test_clean_victim_gate_reads_the_lowest_seed_and_sets_claims_aside(tmp_path, monkeypatch):
    """The validity gate decides on this run's own victims: with a bar under every clean victim the paper claims keep
    their estimates; with a bar above the lowest seed (but under the mean) every paper claim is set aside. The
    source-fit gates are switched off (the smoke poison does not fit), so the clean-victim gate alone decides."""
    monkeypatch.setattr(exp, "SANITY_SOURCE", 0.0)
    monkeypatch.setitem(exp.SANITY_CLEAN, "digits", 0.0)
    res, _ = _run("smoke", tmp_path / "a", defenses="none", n_victim_seeds=3)
    gate = next(c for c in res.claims if c.name == "sanity_clean_victim")
    per_seed = [float(v) for v in gate.detail.split("per seed ")[1].split(";")[0].split("/")]
    assert len(per_seed) == 3 and gate.estimate.unit == "exact"
    assert abs(gate.estimate.value - min(per_seed)) < 5e-4 and gate.verdict == "held"
    paper = sorted(c.name for c in res.claims if c.kind == "paper")

    def set_aside(claims):
        return sorted(c.name for c in claims if c.kind == "paper" and math.isnan(c.estimate.value)
                      and c.detail.startswith("set aside"))

    assert paper and set_aside(res.claims) == []
    assert min(per_seed) < max(per_seed)  # the smoke victims differ by seed, so a bar can sit between min and mean
    monkeypatch.setitem(exp.SANITY_CLEAN, "digits", (min(per_seed) + sum(per_seed) / 3) / 2)
    res2, _ = _run("smoke", tmp_path / "b", defenses="none", n_victim_seeds=3)
    assert next(c for c in res2.claims if c.name == "sanity_clean_victim").verdict == "not held"
    assert set_aside(res2.claims) == paper
