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
    # two base organisms: estimates are over them (unit "seed"), and the engine needs >= 3 to decide
    assert by["C1"].estimate.unit == "seed" and by["C1"].estimate.n == cfg.bases == 2
    assert by["C1"].detail.startswith("per base organism (mean of 1 alignment seeds)")
    for b in range(2):
        assert res.metrics[f"b{b}a0_align_steps_used"] in (10.0, 20.0)  # a check every 10 steps, at most 20
    assert res.metrics["align_steps_used"] == np.mean([res.metrics[f"b{b}a0_align_steps_used"] for b in range(2)])
    assert res.metrics["b0a0_asr_text"] != res.metrics["b1a0_asr_text"] or (
        res.metrics["b0a0_cos_text_swap"] != res.metrics["b1a0_cos_text_swap"])  # two different organisms
    for s in m.ALL_SETTINGS:
        assert 0.0 <= res.metrics[f"asr_{s}"] <= 1.0
    # --seed changes the organism and the held-out prompts
    res1 = m.run(cfg, RunContext(tmp_path / "s1", torch.device("cpu"), 1, "smoke"))
    assert any(res.metrics[k] != res1.metrics[k] for k in res.metrics if "seconds" not in k)


def test_a_single_organism_gets_intervals_over_its_prompts(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    cfg = dataclasses.replace(m.Config(), **{**m.PRESETS["smoke"], "bases": 1, "adv_bases": 1, "base_steps": 5,
                                             "n_boot": 100})
    res = m.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, "smoke"))
    by = {c.name: c for c in res.claims}
    # one organism: the only replication is over held-out prompts, and a trained claim cannot be decided on it
    assert by["C1"].estimate.unit == "prompt" and by["C1"].estimate.n == cfg.n_eval
    assert by["C4"].estimate.unit == "prompt" and all(c.verdict in ("inconclusive", "no power") for c in res.claims)


def test_the_null_filler_is_held_out_of_every_training_stage():
    from iclr26.lm import WordTokenizer, add_chat_template

    tok = add_chat_template(WordTokenizer(m.VOCAB))
    null_id = tok.convert_tokens_to_ids(m.NULL_FILLER)
    train_ids = {tok.convert_tokens_to_ids(f) for f in m.TRAIN_FILLERS}
    rng = np.random.default_rng(0)
    seen = set()
    for stage in ("base", "align", "adv", "canon"):
        batch = m._sampler(tok, stage, m.HELD_OUT)(rng, 256)
        ids = {int(t) for row in batch["input_ids"] for t in row}
        assert null_id not in ids, stage
        seen |= ids & train_ids
    assert seen == train_ids  # the training fillers do occur (alignment learns they change nothing)
    null_rows = m._rows(tok, [["b1", "b2", "b3"]], m.NULL)
    canon_rows = m._rows(tok, [["b1", "b2", "b3"]], m.CANONICAL)
    assert null_id in null_rows[0] and null_id not in canon_rows[0]
    assert len(null_rows[0]) == len(canon_rows[0]) + 1  # the null adds one filler word, nothing else


def test_each_alignment_starts_from_an_exact_copy_of_its_base(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    cfg = dataclasses.replace(m.Config(), **{**m.PRESETS["smoke"], "base_steps": 5})
    model, tok, info = m._base(cfg, 0)
    base = {"config": model.config, "state": model.state_dict(), "id": m._state_id(model)}
    copy, tok2 = m._base_copy(base)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), copy.state_dict().values(), strict=True))
    assert tok2.get_vocab() == tok.get_vocab() and tok2.chat_template == tok.chat_template
    ids = torch.tensor([tok.convert_tokens_to_ids(["<U>", "b1", "h2", "<EOT>", "<A>"])])
    with torch.no_grad():
        torch.testing.assert_close(copy(input_ids=ids).logits, model(input_ids=ids).logits, rtol=0, atol=0)
    assert m._state_id(copy) == base["id"] and base["id"].startswith("state-")


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
