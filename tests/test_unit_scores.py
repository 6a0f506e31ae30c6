"""Culture-neuron unit scores and selection rules: the score against autograd written out, the selection
rules on hand-built score matrices, the random baseline and suppress / enhance through edit_unit_set."""

from __future__ import annotations

import pytest
import torch

from helpers_hooks import assert_no_hooks
from iclr26.core.errors import UserError
from iclr26.interp.hooks import hooks, register_replace_hook, register_site_hook
from iclr26.interp.unit_scores import (
    edit_unit_set,
    random_units,
    select_general,
    select_specific,
    unit_scores,
    unit_sites,
)
from iclr26.lm import get_adapter, tiny_lm


@pytest.fixture(params=["llama", "qwen2", "gemma3", "gpt2"])  # GQA (qwen2) and sandwich norms (gemma3) too
def model(request):
    return tiny_lm(request.param, d=32, layers=2, seed=0).eval()


def _manual_score(model, ids, gold, site):
    """p · max_t a_t ⊙ ∂p/∂a_t for one example, by hand: a leaf added at the site, autograd, max over t."""
    s = get_adapter(model).resolve(site)
    box = {}

    def fn(x):
        z = torch.zeros_like(x, requires_grad=True)
        box["a"], box["z"] = x.detach(), z
        return x + z

    with hooks(lambda h: h.append(register_replace_hook(s, fn))):
        p = torch.softmax(model(input_ids=ids).logits[0, -1].float(), -1)[gold]
        (g,) = torch.autograd.grad(p, box["z"])
    return float(p.detach()) * (box["a"] * g)[0].reshape(ids.shape[1], -1).max(0).values


def test_unit_scores_match_autograd_by_hand(model):
    ids = torch.randint(0, 64, (3, 5), generator=torch.Generator().manual_seed(1))
    gold = torch.tensor([4, 9, 11])
    sites = ["layers.0.attn.q", "layers.1.mlp.gate" if "llama" in type(model).__name__.lower() else "layers.1.attn.v"]
    S, layout = unit_scores(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, gold, sites)
    assert S.shape[0] == 3 and S.shape[1] == sum(w for _, _, w in layout)
    for i in range(3):
        for name, start, w in layout:
            want = _manual_score(model, ids[i: i + 1], int(gold[i]), name)
            torch.testing.assert_close(S[i, start: start + w], want, rtol=1e-4, atol=1e-7)
    C, _ = unit_scores(model, ids, gold, sites, clamp_nonnegative=True)
    assert (C >= 0).all() and torch.equal(C, S.clamp_min(0))


def test_unit_sites_and_bad_input(model):
    assert unit_sites(model, ["attn.q"]) == ["layers.0.attn.q", "layers.1.attn.q"]
    with pytest.raises(UserError, match="choose from"):
        unit_sites(model, ["mlp.out"])
    with pytest.raises(UserError, match="not a unit site"):
        unit_scores(model, torch.zeros(1, 3, dtype=torch.long), [0], ["layers.0.resid_post"])


LAYOUT = [("layers.0.mlp.gate", 0, 10), ("layers.0.attn.q", 10, 10)]


def test_select_general_by_hand():
    U = 20
    data = torch.zeros(4, U)
    data[:, [2, 5, 7]] = torch.tensor([3.0, 2.0, 1.0])      # MLP units, S = 3, 2, 1
    data[:, [12, 15]] = torch.tensor([5.0, 4.0])             # attention units
    control = torch.zeros(2, U)
    control[:, 5] = 2.5                                      # unit 5: S = 2 - 2.5 < 0
    control[:, 12] = -10.0                                   # clamped at 0: S(12) stays 5
    reading = torch.zeros(3, U)
    # MLP top 20 % = 2 units: {2, 7}; attention top 10 % = 1 unit: {12}
    assert select_general(data, control, reading, LAYOUT, top_mlp=0.2, top_attn=0.1, reading_top=0.1).tolist() == [2, 7, 12]
    reading[:, 7] = 1.0  # unit 7 also ranks top on the reading task -> dropped
    assert select_general(data, control, reading, LAYOUT, top_mlp=0.2, top_attn=0.1, reading_top=0.1).tolist() == [2, 12]
    with pytest.raises(UserError, match="20 units"):
        select_general(data[:, :5], control, reading, LAYOUT)
    with pytest.raises(UserError, match="fraction"):
        select_general(data, control, reading, LAYOUT, top_mlp=0.0)


def test_select_specific_by_hand():
    U = 20
    groups = ["A", "A", "B", "C"]
    data = torch.zeros(4, U)
    data[0, 3] = data[1, 3] = 4.0    # unit 3: specific to A
    data[2, 8] = 6.0                 # unit 8: specific to B
    data[:, 1] = 2.0                 # unit 1: the same score on every example
    control = torch.zeros(3, U)
    ctrl_groups = ["A", "B", "C"]
    reading = torch.zeros(3, U)
    out = select_specific(data, groups, control, ctrl_groups, reading, ["A", "B", "C"], LAYOUT, top=0.1,
                          reading_top=0.05, z_min=0.5)
    # S_A = (8 at unit 3, 4 at unit 1) / 4; S_B = (6 at unit 8, 2 at unit 1) / 4; S_C = 2/4 at unit 1
    # top 10 % of 20 = 2 units per group. Unit 1: S = (1.0, 0.5, 0.5), population sd 0.236, so z = +1.41 in A
    # (kept: A has two examples) and -0.71 in B and C (dropped); C's other top unit has S = 0 everywhere (z = 0)
    assert out["A"].tolist() == [1, 3] and out["B"].tolist() == [8] and out["C"].tolist() == []
    reading[0, 3] = 1.0  # A's reading task ranks unit 3 at the top -> dropped for A
    out = select_specific(data, groups, control, ctrl_groups, reading, ["A", "B", "C"], LAYOUT, top=0.1,
                          reading_top=0.05, z_min=0.5)
    assert out["A"].tolist() == [1]
    with pytest.raises(UserError, match="two groups"):
        select_specific(data, ["A"] * 4, control, ctrl_groups, reading, ["A"] * 3, LAYOUT)
    with pytest.raises(UserError, match="entries"):
        select_specific(data, groups[:3], control, ctrl_groups, reading, ["A", "B", "C"], LAYOUT)


def test_random_units():
    a, b = random_units(LAYOUT, 5, seed=3), random_units(LAYOUT, 5, seed=3)
    assert torch.equal(a, b) and a.unique().numel() == 5 and int(a.max()) < 20
    c = random_units(LAYOUT, 18, seed=1, exclude=[0, 1])
    assert not set(c.tolist()) & {0, 1}
    with pytest.raises(UserError, match="must be in"):
        random_units(LAYOUT, 21)


def test_edit_unit_set_suppresses_and_identity_is_exact():
    model = tiny_lm("llama", d=32, layers=2, seed=0).eval()
    ids = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(2))
    layout = [("layers.0.mlp.gate", 0, model.config.intermediate_size),
              ("layers.1.attn.k", model.config.intermediate_size, 32)]
    with torch.no_grad():
        base = model(input_ids=ids).logits
        units = [1, 4, model.config.intermediate_size + 2]
        with edit_unit_set(model, layout, units, factor=1.0):
            assert torch.equal(model(input_ids=ids).logits, base)
        got = {}
        s = get_adapter(model).resolve("layers.0.mlp.gate")
        with edit_unit_set(model, layout, units, factor=0.0) as by_site:
            with hooks(lambda h: h.append(register_site_hook(s, lambda x: got.__setitem__("g", x.clone())))):
                out = model(input_ids=ids).logits
        assert by_site == {"layers.0.mlp.gate": [1, 4], "layers.1.attn.k": [2]}
        assert (got["g"][..., [1, 4]] == 0).all() and not torch.equal(out, base)
    assert_no_hooks(model)
