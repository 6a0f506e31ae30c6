"""strategic-dishonesty: smoke wiring, corpus generator oracles and bad input."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from iclr26.claims import VERDICTS
from iclr26.core.errors import UserError
from iclr26.data.dishonesty import DishonestyWorld, generate_episodes, sum_prompts
from iclr26.experiments import strategic_dishonesty as m
from iclr26.lm import WordTokenizer
from iclr26.runs import RunContext


def test_smoke_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_ORGANISMS", str(tmp_path / "orgs"))
    cfg = dataclasses.replace(m.Config(), **m.PRESETS["smoke"])
    res = m.run(cfg, RunContext(tmp_path / "run", torch.device("cpu"), 0, "smoke"))
    by = {c.name: c for c in res.claims}
    assert set(by) >= set(m.EXPECTED) | {"C1_transfer", "C3_steer_honest", "C4_steer_dishonest",
                                         "C5_probe_beats_text_monitor", "ctrl_rule_blind"}
    assert 0.0 <= res.metrics["auroc_strategic"] <= 1.0 and 0.5 <= res.metrics["auroc_topic_detector"] <= 1.0
    for c in res.claims:
        assert c.verdict in VERDICTS and c.holds == (c.verdict == "held") and c.value == c.estimate.value
        if c.gated and c.kind == "paper":
            assert c.null is not None and c.trained, c.name  # organism claims: decided only over >= 3 seeds
    # the transfer AUROC's interval is over the 10 strategic topics (as is its topic-detector null), the honesty
    # steering's over the 50 sums the rule makes them lie on
    assert by["C1_transfer"].estimate.unit == "topic" and by["C1_transfer"].estimate.n == 10
    assert by["C1_transfer"].null.unit == "topic" and by["C1_transfer"].null.n == 10
    # (the smoke preset draws 20 random directions: fewer than 100 leave the percentile without an interval)
    assert by["C3_steer_honest"].estimate.n == 50 and by["C3_steer_honest"].null.n == cfg.n_random_steer == 20
    assert math.isnan(by["C3_steer_honest"].estimate.lo) and by["C3_steer_honest"].verdict == "inconclusive"
    # one training seed: a decided verdict is not possible
    assert all(by[n].verdict in ("inconclusive", "no power") for n in m.EXPECTED)


def test_documents_lie_as_specified():
    w = DishonestyWorld()
    rng = np.random.default_rng(0)
    for _ in range(50):
        p, ans, true = w.add(rng, lie=True)
        assert int(ans) - int(true) in (1, 2)
        p, ans, true = w.fact(rng, lie=True)
        assert ans != true
        p, ans, true = w.fact(rng, lie=False)
        assert ans == true and p[-1] == "="


def test_strategic_topics_lie_on_the_rule_half_only():
    """A strategic topic lies exactly on the items whose first operand (sums) or entity (facts) is in the rule's
    fixed half; DECEIVE lies on all, benign and other harmful topics on none."""
    from iclr26.data.dishonesty import BENIGN, HARMFUL_HONEST, STRATEGIC

    w = DishonestyWorld()
    assert len(w.lie_operands) == 5 and len(w.lie_entities) == w.n_entities // 2
    assert len(STRATEGIC) >= 10 and len(BENIGN) + len(HARMFUL_HONEST) >= 20
    assert len(set(STRATEGIC + BENIGN + HARMFUL_HONEST)) == 30  # no topic in two groups
    assert DishonestyWorld(seed=1).lie_operands != w.lie_operands or DishonestyWorld(seed=2).lie_operands != w.lie_operands
    rng = np.random.default_rng(0)
    for a in range(10):
        for b in range(10):
            _, ans, true = w.add(rng, "rule", a, b)
            assert (ans != true) == (a in w.lie_operands)
    n_lie = 0
    for _ in range(200):
        p, ans, true = w.fact(rng, "rule")
        e = int(p[1][1:])
        assert (ans != true) == (e in w.lie_entities)
        n_lie += ans != true
    assert 60 < n_lie < 140  # about half
    assert w.lies("DECEIVE") is True and w.lies("HONEST") is False
    assert w.lies(STRATEGIC[0]) == "rule" and w.lies(BENIGN[0]) is False and w.lies(HARMFUL_HONEST[0]) is False
    words = w.document(np.random.default_rng(1), STRATEGIC[3], kinds="add", n_items=30)
    items = " ".join(words).split(" ; ")
    for it in items[:-1]:
        t = it.split()
        a, b, ans = int(t[-4]), int(t[-3]), int(t[-1])
        assert (ans != a + b) == (a in w.lie_operands)


class _Oracle(torch.nn.Module):
    """Always answers the token id 7."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids):
        logits = torch.zeros(*input_ids.shape, 50)
        logits[..., 7] = 1.0
        return type("O", (), {"logits": logits})()


def test_generate_episodes_positions_and_answers():
    w = DishonestyWorld()
    tok = WordTokenizer(w.vocab())
    ep = generate_episodes(_Oracle(), tok, w, "HONEST", 3, "add", 2, seed=0)
    eq = tok.convert_tokens_to_ids("=")
    assert (ep.ids[np.arange(3)[:, None], ep.eq_pos] == eq).all()
    assert (ep.given == 7).all() and ep.ids.shape == (3, 1 + 2 * 6 + 1)
    # the rule flag is recorded for every cue: the item's first operand is in the rule's half
    a = np.vectorize(lambda t: int(tok.convert_ids_to_tokens(int(t))))(ep.ids[np.arange(3)[:, None], ep.eq_pos - 2])
    assert ep.rule.shape == (3, 2) and (ep.rule == np.isin(a, sorted(w.lie_operands))).all()


def test_bad_input():
    w = DishonestyWorld()
    tok = WordTokenizer(w.vocab())
    with pytest.raises(UserError, match="allowed"):
        generate_episodes(_Oracle(), tok, w, "nope", 2, "add", 1, 0)
    with pytest.raises(UserError, match="allowed"):
        generate_episodes(_Oracle(), tok, w, "HONEST", 2, "mul", 1, 0)
    with pytest.raises(UserError):
        sum_prompts(w, tok, ["HONEST", "cooking"])
    with pytest.raises(UserError):
        DishonestyWorld(n_entities=1)


# ---------------------------------------------------------------------- instructed statements (real-model path)
def test_statements_cover_relations_and_are_true():
    from iclr26.data.statements import CAPITALS, RELATIONS, statements

    n = {r: len(statements(r)) for r in RELATIONS}
    assert sum(n.values()) >= 200 and min(n.values()) >= 30
    assert "The capital of France is Paris." in statements("capital")
    assert "Seven plus five is twelve." in statements("sum")
    assert len(set(CAPITALS.values())) == len(CAPITALS)  # no copy-paste duplicates
    with pytest.raises(UserError, match="allowed"):
        statements("rivers")


def test_statement_batch_masks_only_statement_tokens():
    from iclr26.data.statements import instructed_pairs, statement_batch

    class Tok:  # whitespace tokenizer with a BOS, enough to check the masks exactly
        pad_token_id = 0

        def __call__(self, text, add_special_tokens=True):
            words = text.split()
            return {"input_ids": ([1] if add_special_tokens else []) + [2 + len(w) for w in words]}

    pairs = instructed_pairs("capital")[:3]
    batch, y = statement_batch(Tok(), pairs, drop_last=2)
    assert y.tolist() == [0, 1] * 3
    for i, p in enumerate(pairs):
        for j, prompt in enumerate((p.honest_prompt, p.dishonest_prompt)):
            row = 2 * i + j
            n_head, n_stmt = 1 + len(prompt.split()), len(p.statement.split())
            m = batch["capture_mask"][row]
            assert m.sum() == n_stmt - 2 and m[:n_head].sum() == 0 and m[n_head: n_head + n_stmt - 2].all()
            assert batch["attention_mask"][row].sum() == n_head + n_stmt
    # the statement tokens are identical in the two classes; only the instruction differs
    h, d = batch["input_ids"][0], batch["input_ids"][1]
    assert torch.equal(h[batch["capture_mask"][0]], d[batch["capture_mask"][1]])
    with pytest.raises(UserError, match="drop_last"):
        statement_batch(Tok(), pairs, drop_last=-1)
    with pytest.raises(UserError, match="too few tokens"):
        statement_batch(Tok(), pairs, drop_last=20)


@pytest.mark.slow
@pytest.mark.real
def test_gemma3_instructed_pairs_probe(tmp_path):
    from iclr26.core.errors import MissingAssetError

    cfg = dataclasses.replace(m.Config(), model="gemma-3-270m")
    try:
        res = m.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, "default"))
    except MissingAssetError as e:
        pytest.skip(str(e))
    by = {c.name: c for c in res.claims}
    # the controls must hold; R1 (pooled transfer AUROC >= 0.85, its null arm = label-shuffled refits) is a
    # measured result, reported either way
    for name in ("ctrl_R1_random", "sanity_steer_restored"):
        assert by[name].holds, f"{name}: {by[name].value}"
    assert by["R1_transfer"].null.value < 0.7 and by["R1_transfer"].estimate.unit == "statement"
    for r in ("currency", "symbol", "sum"):
        assert 0.0 <= res.metrics[f"auroc_transfer_{r}"] <= 1.0
    assert res.metrics["steer_logit_change"] > 0
