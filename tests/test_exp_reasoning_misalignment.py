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


def _run(tmp_path, preset="smoke", **over):
    cfg = dataclasses.replace(m.Config(), **{**m.PRESETS[preset], **over})
    return m.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, preset))


def test_smoke_runs_and_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    res = _run(tmp_path)
    assert all(math.isfinite(v) for v in res.metrics.values())
    names = {c.name for c in res.claims}
    assert {"C1", "C2_flagged", "C2_ablation", "C3_spearman", "C3_partial", "C4", "C5"} <= names
    assert not next(c for c in res.claims if c.name == "C5").gated
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
    assert m._spearman(x, y) > 0.9
    assert abs(m._partial_spearman(x, y, z)) < 0.5  # both only follow z
    y2 = x + 0.1 * rng.normal(size=30)
    assert m._partial_spearman(x, y2, z) > 0.8


def test_bad_config(tmp_path):
    with pytest.raises(UserError, match="m_grid"):
        _run(tmp_path, m_grid=[10_000])
    with pytest.raises(UserError, match="checkpoints"):
        _run(tmp_path, checkpoints=10)
