"""The role-modality-attacks reproduction: smoke wiring and the Gemma 3 270M offline path."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from iclr26.claims import VERDICTS
from iclr26.experiments import role_modality_attacks as m
from iclr26.runs import RunContext


def test_smoke_wires_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    cfg = dataclasses.replace(m.Config(), **m.PRESETS["smoke"])
    res = m.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, "smoke"))
    by = {c.name: c for c in res.claims}
    assert set(m.EXPECTED) == {c.name for c in res.claims if c.gated} == set(by)
    assert {"C1", "C2", "C3_cos", "C3_specific", "C3_spearman", "C3_compose", "C4", "C4_utility"} <= set(by)
    for c in res.claims:
        # every claim is a gated paper claim on the trained organism, with a null arm, decided only over >= 3 seeds
        assert c.kind == "paper" and c.null is not None and c.trained, c.name
        assert c.verdict in VERDICTS and c.holds == (c.verdict == "held") and c.value == c.estimate.value
        assert c.verdict in ("inconclusive", "no power"), (c.name, c.verdict)
    assert by["C1"].estimate.unit == "prompt" and by["C1"].estimate.n == cfg.n_eval
    for s in m.ALL_SETTINGS:
        assert 0.0 <= res.metrics[f"asr_{s}"] <= 1.0
    # --seed changes the organism and the held-out prompts
    res1 = m.run(cfg, RunContext(tmp_path / "s1", torch.device("cpu"), 1, "smoke"))
    assert any(res.metrics[k] != res1.metrics[k] for k in res.metrics if "seconds" not in k)


def test_composition_count_and_its_permutation_null():
    x = {"text_swap": 0.1, "img_in": 0.1, "img_in_swap": 0.5, "img_end": 0.1, "img_end_swap": 0.5,
         "img_out": 0.6, "img_out_swap": 0.1}
    assert m._n_composed(x, 0.05) == 2.0
    null = m._permutation_null(x, 0.05)
    assert null.n == 27 and null.value <= 1.0  # naming a random setting 'composed' rarely wins twice
    assert np.isnan(m._rel_drop(np.zeros(4), np.zeros(4))) and m._rel_drop(np.ones(4), np.r_[1.0, 0, 0, 0]) == 0.75


@pytest.mark.slow
@pytest.mark.real
def test_gemma3_role_swap_profile():
    from iclr26.data.text import load_austen
    from iclr26.interp.interventions import cosine_profile, diff_of_means
    from iclr26.lm.chat_structure import GEMMA3_TEMPLATE, last_token_states, render_rma
    from iclr26.lm.loading import load_model

    model, tok = load_model("gemma-3-270m")
    sents = [s.strip() for s in " ".join(load_austen(max_words=4000)).split(".") if 5 < len(s.split()) < 25][:40]
    qs = [s + "?" for s in sents[:20]]
    st = [s + "." for s in sents[20:40]]

    def rows(texts, setting):
        return [tok(render_rma(GEMMA3_TEMPLATE, t, setting, bos_token="").text)["input_ids"] for t in texts]

    pad = tok.pad_token_id or 0
    hq, hs = last_token_states(model, rows(qs, "text"), pad_id=pad), last_token_states(model, rows(st, "text"), pad_id=pad)
    r, _ = diff_of_means(hq, hs)
    v, _ = diff_of_means(last_token_states(model, rows(qs, "text_swap"), pad_id=pad), hq)
    prof = cosine_profile(v, r)
    assert prof.shape == (hq.shape[0],) and torch.isfinite(prof).all()
