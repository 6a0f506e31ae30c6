"""The culture-neurons reproduction: smoke wiring, the synthetic countries' corpus against its rules, the
country-knowledge MCQ set, config errors, and the Gemma 3 270M path (slow, real)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.data import culture as D
from iclr26.experiments import culture_neurons as m
from iclr26.lm import WordTokenizer
from iclr26.runs import RunContext


def _run(tmp_path, preset="smoke", **over):
    cfg = dataclasses.replace(m.Config(), **{**m.PRESETS[preset], **over})
    cfg.validate()
    return m.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, preset))


def test_smoke_runs_and_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    res = _run(tmp_path)
    assert all(math.isfinite(v) for v in res.metrics.values())
    names = {c.name for c in res.claims}
    assert {"C1_cultural_drop", "C1_above_random", "C1_nlu_kept", "C3_specific", "C4_siblings", "C5_finetune",
            "sanity_ft_learned"} <= names
    assert not next(c for c in res.claims if c.name == "C2_reading_filter").gated
    by = {c.name: c for c in res.claims}
    for c in res.claims:
        assert c.kind != "paper" or not c.gated or c.null is not None
    # the cultural intervals resample facts (country, topic), not the shuffles of one fact
    assert by["C1_cultural_drop"].estimate.unit == "fact" and by["C1_cultural_drop"].trained
    assert by["C1_cultural_drop"].estimate.n == 4 * 2  # smoke: 4 countries x 2 test topics (n_topics 4)
    assert by["C3_specific"].estimate.unit == "country"
    assert sorted(p.stem for p in (tmp_path / "figures").glob("*.png")) == [
        "accuracy_drop", "finetune", "layer_histogram", "specific_heatmap"]
    sel = json.loads((tmp_path / "selection.json").read_text())
    U = int(res.metrics["n_units"])
    # smoke organism: 2 layers x (64 gate + 3 x 32 q/k/v channels)
    assert U == 2 * (64 + 3 * 32) == sum(w for _, _, w in sel["layout"])
    assert len(sel["general"]) == res.metrics["n_general"] and all(0 <= u < U for u in sel["general"])
    # the reading filter only removes units: the unfiltered set is at least as large
    assert res.metrics["n_general_nofilter"] >= res.metrics["n_general"]
    assert res.metrics["ft_layer_richest"] != res.metrics["ft_layer_poorest"]
    for k in ("cultural_test", "nlu_cmp", "nlu_same", "reading"):
        assert 0.0 <= res.metrics[f"acc_clean_{k}"] <= 1.0


def test_world_table_and_siblings():
    w = D.CultureWorld(n_countries=8, n_values=8, share=0.6, seed=3)
    t = w.table
    assert t.shape == (8, len(D.TOPICS)) and t.min() >= 0 and t.max() < 8
    k = round(0.6 * len(D.TOPICS))
    for r in range(0, 8, 2):
        # siblings share exactly round(share * 6) topics and differ on the others
        assert (t[r] == t[r + 1]).sum() == k
        assert w.sibling(f"C{r}") == f"C{r + 1}" and w.sibling(f"C{r + 1}") == f"C{r}"
    assert np.array_equal(t, D.CultureWorld(8, 8, 0.6, 3).table)  # deterministic
    assert t is w.table and not t.flags.writeable  # built once per world; callers cannot alter the facts
    assert (D.CultureWorld(8, 8, 1.0, 3).table[::2] == D.CultureWorld(8, 8, 1.0, 3).table[1::2]).all()
    for bad in ({"n_countries": 5}, {"n_countries": 2}, {"n_values": 3}, {"share": 1.5}):
        with pytest.raises(UserError):
            D.CultureWorld(**bad)


def test_twelve_topic_world_keeps_the_six_topic_split():
    six = D.CultureWorld(8, 8, 0.6, 3)
    assert six.topics == D.TOPICS and six.neuron_topics == D.NEURON_TOPICS and six.test_topics == D.TEST_TOPICS
    w = D.CultureWorld(16, 8, 0.6, 3, n_topics=12)
    assert len(set(w.topics)) == 12 and set(w.neuron_topics).isdisjoint(w.test_topics)
    assert w.neuron_topics[:3] == D.NEURON_TOPICS and w.test_topics[:3] == D.TEST_TOPICS
    t = w.table
    assert t.shape == (16, 12)
    for r in range(0, 16, 2):
        assert (t[r] == t[r + 1]).sum() == round(0.6 * 12)
    assert set(w.topics) <= set(w.vocab())
    rng = np.random.default_rng(0)
    seen = {tuple(w.pretrain_item(rng)[0][1:3]) for _ in range(4000)}
    assert {t for _c, t in seen if t in w.topics} == set(w.topics)  # training covers every topic
    items, groups = w.mcq_set(rng, w.test_topics, 2)
    assert len(items) == 16 * 6 * 2 and len({(x[0][1], x[0][2]) for x in items}) == 96  # distinct facts
    for bad in (3, 0, 14):
        with pytest.raises(UserError, match="n_topics"):
            D.CultureWorld(n_topics=bad)


def test_finetune_layers_have_no_ties():
    layout = [(f"layers.{L}.mlp.gate", 10 * L, 10) for L in range(4)] + [("layers.0.attn.q", 40, 5)]
    score = np.zeros(45)
    score[20:30] = 0.5   # layer 2: mass 5
    score[30:40] = -1.0  # layer 3: no positive mass
    score[0:10] = 0.1    # layer 0: mass 1
    score[40:45] = 9.0   # attention units do not count
    # counts tie at the top (layers 1, 2) and at the bottom (0, 3): culture mass orders both
    a, b, mass, tie = m._ft_layers(np.array([0, 2, 2, 0]), score, layout)
    assert (a, b, tie) == (2, 3, True) and np.allclose(mass, [1.0, 0.0, 5.0, 0.0])
    a, b, _mass, tie = m._ft_layers(np.array([3, 1, 0, 2]), score, layout)
    assert (a, b, tie) == (0, 2, False)


def test_items_follow_their_rules():
    w = D.CultureWorld()
    rng = np.random.default_rng(0)
    for _ in range(50):
        c, topic = w.countries[int(rng.integers(8))], D.TOPICS[int(rng.integers(6))]
        words, letter = w.mcq(rng, c, topic)
        assert words[:4] == ["Q", c, topic, "?"] and words[-1] == "answer"
        opts = dict(o.split(":") for o in words[4:8])
        assert list(opts) == list(D.LETTERS) and len(set(opts.values())) == 4
        assert opts[letter] == w.gold(c, topic)  # the gold letter points at the table's value
        cw, cl = w.control((words, letter))
        assert cl == letter and c not in cw and topic not in cw and cw[1:] == words[3:]
        pw, pl = w.reading(rng, c)
        popts = dict(o.split(":") for o in pw[8:12])
        assert popts[pl] == pw[3]  # the answer is the value stated in the passage
    for _ in range(50):
        (wd, g) = w.nlu(rng, "cmp")
        assert g == f"n{max(int(wd[1][1:]), int(wd[2][1:]))}"
        (wd, g) = w.nlu(rng, "same")
        assert g == ("yes" if wd[1] == wd[2] else "no")
        (wd, g) = w.nlu(rng, "min")
        assert g == f"n{min(int(wd[1][1:]), int(wd[2][1:]))}" and wd[1] != wd[2]
    vocab = set(w.vocab())
    for _ in range(200):
        words, gold = w.pretrain_item(rng)
        assert set(words) <= vocab and gold in vocab
    with pytest.raises(UserError, match="allowed"):
        w.nlu(rng, "sum")
    with pytest.raises(UserError, match="unknown country"):
        w.mcq(rng, "C99", "food")


def test_encode_items_pads_and_reads_gold():
    w = D.CultureWorld()
    tok = WordTokenizer(w.vocab())
    rng = np.random.default_rng(1)
    items = [w.mcq(rng, "C0", "food"), w.nlu(rng, "cmp")]
    batch, gold = D.encode_items(tok, items)
    am = batch["attention_mask"]
    assert am[0].sum() == 1 + len(items[0][0]) and am[1].sum() == 1 + len(items[1][0])
    assert batch["input_ids"][0, 0] == tok.convert_tokens_to_ids("<bos>")
    assert tok.convert_ids_to_tokens(gold.tolist()) == [items[0][1], items[1][1]]
    tb = m._train_batch(tok, items)
    # the loss sits on the gold token only, which is the last real token
    assert tb["loss_mask"].sum() == 2
    assert tok.convert_ids_to_tokens([int(tb["input_ids"][1][tb["loss_mask"][1]])]) == [items[1][1]]


def test_country_mcqs():
    items = D.country_mcqs()
    assert len(items) >= 100 and {x.relation for x in items} == {"capital", "currency", "language"}
    for x in items:
        opts = dict(line.split(". ", 1) for line in x.prompt.split("\n")[1:5])
        assert opts[x.gold] == D.RELATION_TABLES[x.relation][x.country]
        assert len(set(opts.values())) == 4
        assert x.control.split("\n")[0] == "Question:" and x.control.endswith("\nAnswer:") and x.prompt.endswith("\nAnswer:")
        assert x.control.split("\n")[1:] == x.prompt.split("\n")[1:]  # the options and slot are kept
    rc = D.country_reading(["Spain", "Iran"], per=2)
    assert len(rc) == 4 and all(x.country in x.prompt for x in rc)
    for x in rc:
        opts = dict(line.split(". ", 1) for line in x.prompt.split("\n")[2:6])
        assert f"with {opts[x.gold]}." in x.prompt
    for x in D.number_mcqs(20):
        opts = {k: int(v) for k, v in (line.split(". ", 1) for line in x.prompt.split("\n")[1:5])}
        assert opts[x.gold] == max(opts.values())
    with pytest.raises(UserError, match="allowed"):
        D.country_mcqs("flag")


def test_seed_changes_results(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    cfg = dataclasses.replace(m.Config(), **m.PRESETS["smoke"])
    a = m.run(cfg, RunContext(tmp_path / "a", torch.device("cpu"), 0, "smoke")).metrics
    b = m.run(cfg, RunContext(tmp_path / "b", torch.device("cpu"), 1, "smoke")).metrics
    assert a != b


def test_config_validate():
    with pytest.raises(UserError, match="divisible"):
        dataclasses.replace(m.Config(), d=30, heads=4).validate()
    with pytest.raises(UserError, match="even"):
        dataclasses.replace(m.Config(), n_countries=5).validate()


def test_country_cloze_items_against_their_tables():
    items = D.country_cloze(seed=3)
    assert len(items) == len(D.CAPITALS) + len(D.CURRENCIES) + len(D.LANGUAGES)
    for it in items:
        gold = D.RELATION_TABLES[it.relation][it.country].removeprefix("the ")
        assert it.options[it.gold] == " " + gold
        assert it.prompt.endswith(("is", "the")) and it.country in it.prompt and it.country not in it.control
        firsts = [o.split()[0] for o in it.options]
        assert len(set(firsts)) == 4, it.options  # four distinct first words, e.g. not 'pound' with 'pound sterling'
    assert sorted({it.gold for it in items}) == [0, 1, 2, 3]
    with pytest.raises(UserError, match="allowed: capital, currency, language"):
        D.country_cloze("climate")


def test_reading_and_antonym_cloze():
    for it in D.reading_cloze(["France", "Japan"], per=3, seed=1):
        pet = it.options[it.gold].strip()
        assert f"with a {pet}." in it.prompt and it.prompt.endswith("pet is a")
        assert sum(f"with a {o.strip()}." in it.prompt for o in it.options) == 1
    ants = D.antonym_cloze(seed=2)
    assert len(ants) == len(D.ANTONYMS) == 40
    for (a, b), it in zip(D.ANTONYMS, ants, strict=True):
        assert it.options[it.gold] == " " + b and " " + a not in it.options and len(set(it.options)) == 4


class _FixedLogits(torch.nn.Module):
    def __init__(self, last):
        super().__init__()
        self.last = last

    def forward(self, input_ids, attention_mask):
        out = torch.zeros(*input_ids.shape, self.last.shape[1])
        out[torch.arange(input_ids.shape[0]), attention_mask.sum(1) - 1] = self.last
        return type("O", (), {"logits": out})()


def test_general_cloze_is_frame_matched_and_well_formed():
    items = D.general_cloze(seed=3)
    assert len(items) == sum(len(f) for _, f, _ in D.GENERAL_FACTS.values()) == 120
    for it in items:
        frame, facts, _pool = D.GENERAL_FACTS[it.relation]
        gold = it.options[it.gold].strip()
        assert (it.prompt, gold) in {(frame.format(x=x), v) for x, v in facts}
        assert it.prompt.startswith("The ") and " of " in it.prompt  # the country questions' frame
        firsts = [o.split()[0] for o in it.options]
        assert len(set(firsts)) == 4 and all(o.startswith(" ") for o in it.options)
        assert it.country == ""  # no country anywhere in the control set
    assert [i.options for i in D.general_cloze(seed=3)] == [i.options for i in items]


def test_last_logits_equals_the_full_forward_at_each_rows_last_position():
    from iclr26.lm import tiny_lm

    model = tiny_lm("llama", d=16, layers=1, heads=2, ff=32, vocab=30, seed=0).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 30, (5, 7), generator=g)
    am = torch.ones_like(ids)
    for i, n in enumerate([7, 3, 5, 3, 1]):  # right padding, two rows share a length
        am[i, n:] = 0
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=am).logits
        got = m._last_logits(model, ids, am)

        class NoKeep(torch.nn.Module):  # a forward without logits_to_keep takes the full-logits path
            def forward(self, input_ids, attention_mask):
                return model(input_ids=input_ids, attention_mask=attention_mask)

        fallback = m._last_logits(NoKeep(), ids, am)
    want = full[torch.arange(5), am.sum(1) - 1]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fallback, want, rtol=0, atol=0)


def test_correct_with_per_row_choices_against_hand_argmax():
    g = torch.Generator().manual_seed(0)
    last = torch.randn(5, 12, generator=g)
    am = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]])
    batch = {"input_ids": torch.zeros(5, 3, dtype=torch.long), "attention_mask": am}
    choices = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [3, 7, 11, 0], [2, 4, 6, 8]])
    hand = np.array([row[int(np.argmax(last[i, row].numpy()))] for i, row in enumerate(choices)])
    gold = hand.copy()
    gold[1] = next(c for c in choices[1] if c != hand[1])  # row 1 answered wrongly
    got = m._correct(_FixedLogits(last), batch, gold, choices)
    np.testing.assert_array_equal(got, [True, False, True, True, True])
    # one shared list for every row keeps its old meaning
    shared = [0, 5, 10]
    hand_s = np.array([shared[int(np.argmax(last[i, shared].numpy()))] for i in range(5)])
    np.testing.assert_array_equal(m._correct(_FixedLogits(last), batch, hand_s, shared), np.ones(5, bool))


@pytest.mark.slow
@pytest.mark.real
# the cloze format is the default preset's path, which test_common runs in full (its sanity_R_clean_above_chance
# guards the option-token mapping); this test adds the lettered-MCQ format and the unit counts
@pytest.mark.parametrize("fmt,n_items", [("letter", 4)])
def test_gemma3_culture_units(tmp_path, fmt, n_items):
    from iclr26.core.errors import MissingAssetError

    # 12 (or 4) items per relation: the pipeline, not the claim
    cfg = dataclasses.replace(m.Config(), model="gemma-3-270m", real_max_items=n_items, real_n_random=3,
                              real_format=fmt)
    try:
        res = m.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, "default"))
    except MissingAssetError as e:
        pytest.skip(str(e))
    assert all(math.isfinite(v) for v in res.metrics.values())
    # 18 layers x (2048 gate + 1024 q + 256 k + 256 v) channels
    assert res.metrics["n_units"] == 18 * (2048 + 1024 + 256 + 256)
    assert 0 < res.metrics["n_general"] < 0.01 * res.metrics["n_units"]
    assert res.metrics["n_test_items"] == 2 * n_items
    for k in ("test", "neuron_split", "nlu"):
        assert 0.0 <= res.metrics[f"acc_clean_{k}"] <= 1.0
    if fmt == "cloze":
        # the base model knows capitals and antonyms in cloze form (1.0 on all 68 / 40): a wrong option-token
        # mapping would put these near chance (0.25)
        assert res.metrics["acc_clean_neuron_split"] >= 0.75 and res.metrics["acc_clean_nlu"] >= 0.75
    by = {c.name: c for c in res.claims}
    assert set(by) == {"sanity_R_clean_above_chance", "sanity_R_general_known", "C1_cultural_drop",
                       "C1_above_random", "C1_selective", "C1_nlu_kept"}
    assert by["C1_cultural_drop"].estimate.unit == "country" and by["C1_cultural_drop"].null is not None
    # the selectivity contrast: both sets' drops are in the metrics, and the claim is their difference
    assert by["C1_selective"].value == pytest.approx(res.metrics["drop_test"] - res.metrics["drop_general"])
    assert res.metrics["n_general_items"] == 6 * n_items  # six non-cultural relations with >= n_items facts each
    assert (tmp_path / "figures" / "accuracy_drop.png").exists()
