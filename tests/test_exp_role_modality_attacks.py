"""The role-modality-attacks reproduction: smoke wiring and the Gemma 3 270M offline path."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from iclr26.experiments import role_modality_attacks as m
from iclr26.runs import RunContext


def test_smoke_wires_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    cfg = dataclasses.replace(m.Config(), **m.PRESETS["smoke"])
    res = m.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, "smoke"))
    names = {c.name for c in res.claims}
    assert {"C1", "ctrl_C1_null", "C2", "C3_cos", "ctrl_C3_null", "C3_spearman", "C4", "ctrl_C4_canonical"} <= names
    for s in m.ALL_SETTINGS:
        assert 0.0 <= res.metrics[f"asr_{s}"] <= 1.0


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
