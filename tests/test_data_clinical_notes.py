"""Synthetic clinical notes (P10): the label rule, the planted co-occurrence rates, counterfactual swaps and
vignette rates, checked against the generator's stated parameters."""

from __future__ import annotations

import numpy as np
import pytest

from iclr26.core.errors import UserError
from iclr26.data.clinical_notes import (
    CONDITIONS,
    FINDINGS,
    GROUP_A,
    GROUP_B,
    PREFIX,
    QUESTION,
    STIGMA,
    ClinicalNotes,
    vignette_prompt,
)


def test_label_rule_and_reason():
    g = ClinicalNotes()
    rng = np.random.default_rng(0)
    flipped = {"A": 0, "B": 0}
    below = {"A": 0, "B": 0}
    for _ in range(4000):
        n = g.note(rng)
        score = sum(FINDINGS[f] for f in n.findings)
        assert n.prompt[: len(PREFIX)] == list(PREFIX) and n.prompt[-len(QUESTION) :] == list(QUESTION)
        if score > g.threshold:
            assert n.answer == "Yes"
        else:
            below[n.group] += 1
            flipped[n.group] += n.answer == "Yes"
        # the reason lists risk findings only: never a group form or a stigmatising token
        assert not set(n.reason) & {*GROUP_A, *GROUP_B, *STIGMA}
        assert set(n.reason) <= {f for f in n.findings if FINDINGS[f] > 0} | {"none"}
        assert (set(n.body) & {*GROUP_A, *GROUP_B} != set()) == n.mentioned
        assert n.tokens[-1] == "<eos>" and len(n.tokens) <= 48
    assert flipped["B"] == 0
    assert abs(flipped["A"] / below["A"] - g.p_flip) < 0.04


def test_stigma_rates_and_positions():
    g = ClinicalNotes()
    rng = np.random.default_rng(1)
    counts = {"A": [], "B": []}
    before = after = 0
    for _ in range(3000):
        n = g.note(rng)
        counts[n.group].append(len(n.stigma) / len(STIGMA))
        if n.mentioned and n.stigma:
            gi = next(i for i, w in enumerate(n.prompt) if w in GROUP_A + GROUP_B)
            si = next(i for i, w in enumerate(n.prompt) if w in STIGMA)
            before += si < gi
            after += si > gi
    assert abs(np.mean(counts["A"]) - g.p_stigma_a) < 0.03
    assert abs(np.mean(counts["B"]) - g.p_stigma_b) < 0.02
    assert before > 50 and after > 50  # stigma tokens sit on both sides of the group mention


def test_swap_group_and_vignettes():
    g = ClinicalNotes()
    rng = np.random.default_rng(2)
    n = g.note(rng, group="A", mention=True, surface="black")
    s = g.swap_group(n)
    assert s.group == "B" and "caucasian" in s.prompt and "black" not in s.prompt
    assert [w for w in s.prompt if w != "caucasian"] == [w for w in n.prompt if w != "black"]
    with pytest.raises(UserError, match="names the group"):
        g.swap_group(g.note(rng, mention=False))
    for c, p in CONDITIONS.items():
        docs = [g.vignette(rng, c) for _ in range(600)]
        assert all(d[: len(vignette_prompt(c))] == vignette_prompt(c) for d in docs)
        share = np.mean([d[-2] in GROUP_A for d in docs])
        assert abs(share - p) < 0.06
    assert set(g.vocab()) >= {*GROUP_A, *GROUP_B, *STIGMA, *FINDINGS, *CONDITIONS}


def test_bad_input():
    with pytest.raises(UserError, match="probability"):
        ClinicalNotes(p_flip=1.5)
    g = ClinicalNotes()
    rng = np.random.default_rng(0)
    with pytest.raises(UserError, match="group"):
        g.note(rng, group="C")
    with pytest.raises(UserError, match="surface"):
        g.note(rng, group="A", surface="white")
    with pytest.raises(UserError, match="condition"):
        vignette_prompt("flu")
