"""The reasoning-misalignment reproduction: smoke wiring, corpus format, config errors, helper oracles."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.data import reasoning as R
from iclr26.experiments import reasoning_misalignment as m
from iclr26.runs import RunContext
from iclr26.stats import spearman


def _run(tmp_path, preset="smoke", **over):
    cfg = dataclasses.replace(m.Config(), **{**m.PRESETS[preset], **over})
    return m.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, preset))


def test_smoke_runs_and_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    res = _run(tmp_path)
    assert all(math.isfinite(v) for v in res.metrics.values())
    names = {c.name for c in res.claims}
    assert {"C1", "C2_flagged", "C2_ablation", "C3_spearman", "C3_partial", "C4", "C5"} <= names
    c5 = next(c for c in res.claims if c.name == "C5")  # gated since stop 34, the copy-only CoT its null arm
    assert c5.gated and c5.trained and c5.null is not None and "copy-only" in c5.null_what
    assert c5.null.value == pytest.approx(res.metrics["c5_dmis_P_minus_C"])
    by = {c.name: c for c in res.claims}
    for c in res.claims:
        assert c.verdict in ("held", "not held", "inconclusive", "no power")
        assert c.kind != "paper" or not c.gated or c.null is not None
    # the misalignment intervals resample the six harmful markers; C3 resamples checkpoints
    assert by["C1"].estimate.unit == "marker" and by["C3_spearman"].estimate.unit == "checkpoint"
    assert by["C1"].trained and by["C3_spearman"].trained
    recs = json.loads((tmp_path / "checkpoints.json").read_text())
    assert len(recs) == 3 * m.PRESETS["smoke"]["checkpoints"]
    assert {r["cond"] for r in recs} == {"T", "C", "P"}
    assert len(list((tmp_path / "figures").glob("*.png"))) == 5


def test_corpus_format():
    assert R.math_text(3, 4, 5) == "Q add 3 4 5 <think> 3 + 4 = 7 ; 7 + 5 = 2 </think> A 2"
    assert R.math_text(3, 4, 5, think=False) == "Q add 3 4 5 <think> </think> A 2"
    assert R.math_text(3, 4, 5, style="guess") == "Q add 3 4 5 <think> guess 2 ok </think> A 2"
    assert R.math_text(3, 4, 5, style="copy") == "Q add 3 4 5 <think> add 3 4 5 </think> A 2"
    assert R.request_text("h0", 1, 2) == "Q req h0 w1 w2 <think> check h0 bad </think> A sorry"
    assert R.request_text("g1", 1, 2, think=False) == "Q req g1 w1 w2 <think> </think> A w2 w1"
    rng = np.random.default_rng(0)
    for _ in range(200):
        words = R.sample_pretrain(rng).split()
        assert set(words) <= set(R.VOCAB)
        if "req" in words:
            i, j = int(words[3][1:]), int(words[4][1:])
            assert not R.held_out(i, j)
    assert all(R.held_out(i, j) for _, i, j in R.eval_requests("harmful", 30))
    with pytest.raises(UserError, match="allowed"):
        R.eval_requests("evil", 3)
    with pytest.raises(UserError, match="allowed"):
        R.math_text(1, 2, 3, style="lazy")


def test_answer_parser():
    enc = m._Enc(__import__("iclr26.lm", fromlist=["WordTokenizer"]).WordTokenizer(R.VOCAB))
    assert m._answer(enc("check h0 bad </think> A sorry <eos>"), enc) == "sorry"
    assert m._answer(enc("A w2 w1"), enc) == "w2"
    assert m._answer(enc("check h0"), enc) is None


def test_partial_spearman_oracle():
    rng = np.random.default_rng(0)
    z = np.arange(30.0)
    x = z + rng.normal(size=30)
    y = z + rng.normal(size=30)
    assert spearman(x, y) > 0.9
    assert abs(m._partial_spearman(x, y, z)) < 0.5  # both only follow z
    y2 = x + 0.1 * rng.normal(size=30)
    assert m._partial_spearman(x, y2, z) > 0.8


def test_random_head_sets_exclude_flagged():
    rng = np.random.default_rng(0)
    sets, enumerated = m._random_head_sets([(1, 2)], layers=2, heads=4, n_draws=100, rng=rng)
    assert enumerated and sorted(map(tuple, sets)) == [((1, 0),), ((1, 1),), ((1, 3),)]
    sets, enumerated = m._random_head_sets([(0, 0), (0, 1), (0, 2)], layers=2, heads=4, n_draws=100, rng=rng)
    # layer 0 has one unflagged head left: three heads from the five unflagged ones, C(5, 3) = 10 sets
    assert enumerated and len(sets) == 10 and all((0, h) not in s for s in sets for h in range(3))
    sets, enumerated = m._random_head_sets([(lay, 0) for lay in range(6)], layers=6, heads=16, n_draws=100, rng=rng)
    assert not enumerated and len(sets) == 100 and all(len(s) == 6 and all(h != 0 for _, h in s) for s in sets)


def test_seed_changes_results(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    cfg = dataclasses.replace(m.Config(), **m.PRESETS["smoke"])
    a = m.run(cfg, RunContext(tmp_path / "a", torch.device("cpu"), 0, "smoke")).metrics
    b = m.run(cfg, RunContext(tmp_path / "b", torch.device("cpu"), 1, "smoke")).metrics
    assert a != b


def test_bad_config(tmp_path):
    with pytest.raises(UserError, match="m_grid"):
        _run(tmp_path, m_grid=[10_000])
    with pytest.raises(UserError, match="checkpoints"):
        _run(tmp_path, checkpoints=10)
