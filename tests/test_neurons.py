"""iclr26.interp.neurons: RAS oracle, unit sets vs brute force, attention argmax vs a hand-built pattern,
max pooling with padding, KL, bad inputs; a slow real-model path on Gemma 3 270M."""

from __future__ import annotations

import itertools

import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.interp.neurons import (
    counterfactual_unit_sets,
    first_token_attention_argmax,
    flag_span_heads,
    harmonic_mean,
    kl_divergence_at,
    max_pooled_activations,
    reciprocal_activation_shift,
    smallest_m_on_grid,
    top_m_units,
    unit_site,
)
from iclr26.lm import tiny_lm


# ---------------------------------------------------------------------------------------------- RAS
def test_ras_hand_computed_three_neurons():
    # neuron 0 drops on safety inputs (2 -> 1), neuron 1 rises on safety (ignored by delta-), neuron 2 drops 4 -> 2
    a0_s, at_s = [2.0, 1.0, 4.0], [1.0, 3.0, 2.0]
    # on task inputs: neuron 0 rises 1 -> 2, neuron 1 falls (ignored by delta+), neuron 2 rises 2 -> 4
    a0_k, at_k = [1.0, 2.0, 2.0], [2.0, 1.0, 4.0]
    r = reciprocal_activation_shift(a0_s, at_s, a0_k, at_k, eps_rule="raw")
    # delta- = (1/3) [(2-1)/(1*2) + (4-2)/(2*4)] = (1/3)(0.5 + 0.25) = 0.25
    # delta+ = (1/3) [(2-1)/(1*2) + (4-2)/(2*4)] = 0.25 ; RAS = 0.25
    assert r.delta_minus == pytest.approx(0.25)
    assert r.delta_plus == pytest.approx(0.25)
    assert r.ras == pytest.approx(0.25)
    assert r.n == 3
    # asymmetric case: the harmonic mean 2ab/(a+b)
    r2 = reciprocal_activation_shift([2.0, 1.0, 4.0], [1.0, 3.0, 2.0], [1.0, 1.0, 1.0], [1.0, 1.0, 4.0],
                                     eps_rule="raw")
    dp = (4 - 1) / (1 * 4) / 3
    assert r2.delta_plus == pytest.approx(dp)
    assert r2.ras == pytest.approx(2 * 0.25 * dp / (0.25 + dp))


def test_ras_abs_eps_rule_and_pooling():
    a0_s = torch.tensor([[2.0, -1.0], [2.0, -1.0]])  # [inputs, neurons]
    at_s = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    a0_k, at_k = torch.tensor([1.0, 1.0]), torch.tensor([2.0, 1.0])
    r = reciprocal_activation_shift(a0_s, at_s, a0_k, at_k)  # default |a| + eps
    e_s = 1e-3 * (2 + 1 + 1 + 0) / 4
    e_k = 1e-3 * (1 + 1 + 2 + 1) / 4
    b0, bt = torch.tensor([2.0, 1.0]) + e_s, torch.tensor([1.0, 0.0]) + e_s
    dm = float(((b0 - bt) / (b0 * bt)).sum() / 2)
    dp = float(((2 + e_k) - (1 + e_k)) / ((1 + e_k) * (2 + e_k)) / 2)
    assert r.delta_minus == pytest.approx(dm)
    assert r.delta_plus == pytest.approx(dp)
    assert r.ras == pytest.approx(harmonic_mean(dm, dp))
    assert r.eps == pytest.approx((e_s, e_k))
    # raw rule keeps only the neuron positive in both models on both input sets (neuron 0)
    raw = reciprocal_activation_shift(a0_s, at_s, a0_k, at_k, eps_rule="raw")
    assert raw.n == 1
    assert raw.delta_minus == pytest.approx(0.5)
    assert raw.delta_plus == pytest.approx(0.5)


def test_ras_no_shift_is_zero_and_bad_inputs():
    a = [1.0, 2.0]
    assert reciprocal_activation_shift(a, a, a, a).ras == 0.0
    with pytest.raises(UserError, match="eps_rule"):
        reciprocal_activation_shift(a, a, a, a, eps_rule="nope")
    with pytest.raises(UserError, match="same neurons"):
        reciprocal_activation_shift(a, a, a, [1.0])
    with pytest.raises(UserError, match="NaN"):
        reciprocal_activation_shift([float("nan"), 1.0], a, a, a)
    with pytest.raises(UserError, match="eps_scale"):
        reciprocal_activation_shift(a, a, a, a, eps_scale=0.0)


# ---------------------------------------------------------------------------------------------- unit sets
def test_top_m_and_sets_against_brute_force():
    g = torch.Generator().manual_seed(0)
    pos, neg = torch.randn(5, 30, generator=g), torch.randn(5, 30, generator=g)
    pos[:, [3, 7]] += 5.0  # two units that every pair shares
    m = 8
    res = counterfactual_unit_sets(pos, neg, m, q=0.6)
    brute_sets = []
    for k in range(5):
        d = (pos[k] - neg[k]).tolist()
        brute_sets.append(set(sorted(range(30), key=lambda j: -d[j])[:m]))
    inter = set.intersection(*brute_sets)
    assert set(res.safe.tolist()) == inter
    assert {3, 7} <= inter
    counts = {j: sum(j in s for s in brute_sets) for j in range(30)}
    assert set(res.soft.tolist()) == {j for j, c in counts.items() if c >= 3}  # ceil(0.6 * 5) = 3
    assert res.counts.tolist() == [counts[j] for j in range(30)]
    assert top_m_units(torch.tensor([1.0, 3.0, 3.0, 0.0]), 2).tolist() == [1, 2]  # stable tie break


def test_smallest_m_on_grid():
    pos = torch.zeros(3, 100)
    neg = torch.zeros(3, 100)
    pos[:, :2] = 10.0  # 2 shared units; other rows' top-m differ by pair
    for k in range(3):
        pos[k, 10 + 20 * k : 30 + 20 * k] = 5.0
    res = smallest_m_on_grid(pos, neg, [1, 2, 4, 8], min_fraction=0.02)
    assert res.m == 2 and res.safe.tolist() == [0, 1] and res.reached
    # 5 % of 100 units is more than the 2 shared ones: no m up to 8 reaches it, and the result says so
    short = smallest_m_on_grid(pos, neg, [1, 2, 4, 8], min_fraction=0.05)
    assert short.m == 8 and len(short.safe) < 5 and not short.reached
    with pytest.raises(UserError, match="rule"):
        smallest_m_on_grid(pos, neg, [2], rule="x")
    with pytest.raises(UserError, match="grid"):
        smallest_m_on_grid(pos, neg, [])


def test_unit_sets_bad_inputs():
    with pytest.raises(UserError, match="m must be"):
        top_m_units(torch.zeros(4), 5)
    with pytest.raises(UserError, match="differ"):
        counterfactual_unit_sets(torch.zeros(2, 4), torch.zeros(3, 4), 2)
    with pytest.raises(UserError, match="q must"):
        counterfactual_unit_sets(torch.zeros(2, 4), torch.zeros(2, 4), 2, q=0.0)
    layout = [("a", 0, 3), ("b", 3, 2)]
    assert unit_site(layout, [0, 4, 2]) == {"a": [0, 2], "b": [1]}
    with pytest.raises(UserError, match="out of range"):
        unit_site(layout, [5])


# ---------------------------------------------------------------------------------------------- activations
@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_max_pool_matches_manual_and_ignores_padding(family):
    model = tiny_lm(family, d=16, layers=2, heads=2, ff=32, vocab=20, seed=0)
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    am = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    acts, layout = max_pooled_activations(model, [{"input_ids": ids, "attention_mask": am}],
                                          ["layers.0.mlp.act", "layers.1.mlp.act"])
    assert acts.shape == (2, 64) and layout == [("layers.0.mlp.act", 0, 32), ("layers.1.mlp.act", 32, 32)]
    # oracle: the unpadded second row alone
    solo, _ = max_pooled_activations(model, torch.tensor([[9, 10]]), ["layers.0.mlp.act", "layers.1.mlp.act"])
    assert torch.allclose(acts[1], solo[0], atol=1e-5)
    feats = {}
    h = model.model.layers[1].mlp.down_proj.register_forward_pre_hook(lambda m, a: feats.setdefault("x", a[0]))
    with torch.no_grad():
        model(input_ids=ids[:1])
    h.remove()
    assert torch.allclose(acts[0, 32:], feats["x"][0].amax(0), atol=1e-5)
    with pytest.raises(UserError):
        max_pooled_activations(model, ids, [])


# ---------------------------------------------------------------------------------------------- heads
@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma3"])  # a second family (GQA), and Gemma's
def test_attention_argmax_against_hand_built_pattern(family):
    model = tiny_lm(family, d=16, layers=2, heads=2, kv_heads=1 if family == "qwen2" else None, ff=32, vocab=20,
                    seed=1, attn_implementation="sdpa")
    ids = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 10, 11, 12]])
    am = torch.ones_like(ids)
    q = torch.tensor([4, 2])
    got = first_token_attention_argmax(model, [{"input_ids": ids, "attention_mask": am}], q)
    assert model.config._attn_implementation == "sdpa"  # restored
    with torch.no_grad():
        model.set_attn_implementation("eager")
        att = model(input_ids=ids, output_attentions=True).attentions  # L x [B, H, T, T]
        model.set_attn_implementation("sdpa")
    want = torch.stack([torch.stack([a[b, :, q[b]].argmax(-1) for b in range(2)]) for a in att], 1)
    assert torch.equal(got, want)
    assert got.shape == (2, 2, 2)
    with pytest.raises(UserError, match="real"):
        first_token_attention_argmax(model, [{"input_ids": ids, "attention_mask": am}], torch.tensor([5, 0]))
    with pytest.raises(UserError, match="query"):
        first_token_attention_argmax(model, [{"input_ids": ids, "attention_mask": am}], torch.tensor([1]))


def test_flag_span_heads_hand_built():
    # 2 inputs, 1 layer, 3 heads; span positions: 3,4 (both modes)
    span = torch.zeros(2, 6, dtype=torch.bool)
    span[:, 3:5] = True
    on = torch.tensor([[[0, 4, 1]], [[2, 3, 1]]])  # head 1 on the span already when thinking is on
    off = torch.tensor([[[3, 4, 0]], [[4, 3, 1]]])
    f = flag_span_heads(on, off, span, span)
    assert f.flagged.tolist() == [[True, False, False]]
    assert f.heads() == [(0, 0)]
    assert f.frac_off.tolist() == [[1.0, 1.0, 0.0]]
    with pytest.raises(UserError, match="outside"):
        flag_span_heads(on, off + 10, span, span)
    with pytest.raises(UserError, match="min_frac"):
        flag_span_heads(on, off, span, span, min_frac=0.0)


# ---------------------------------------------------------------------------------------------- KL
def test_kl_zero_for_same_model_and_matches_manual():
    a = tiny_lm("llama", d=16, layers=1, heads=2, ff=32, vocab=20, seed=0)
    b = tiny_lm("llama", d=16, layers=1, heads=2, ff=32, vocab=20, seed=1)
    batch = [{"input_ids": torch.tensor([[4, 5, 6], [7, 8, 9]])}]
    assert torch.allclose(kl_divergence_at(a, a, batch), torch.zeros(2), atol=1e-6)
    with torch.no_grad():
        p = torch.log_softmax(a(**batch[0]).logits[:, -1].double(), -1)
        r = torch.log_softmax(b(**batch[0]).logits[:, -1].double(), -1)
    want = (p.exp() * (p - r)).sum(-1).float()
    assert torch.allclose(kl_divergence_at(a, b, batch), want, atol=1e-5)
    with pytest.raises(UserError, match="list"):
        kl_divergence_at(a, b, iter(batch))


# ---------------------------------------------------------------------------------------------- real model
@pytest.mark.slow
@pytest.mark.real
def test_gemma_270m_heads_ablation_and_ras():
    import copy

    import numpy as np

    from iclr26.interp.capture import capture
    from iclr26.interp.interventions import ablate_heads
    from iclr26.lm import load_model, train_lm

    torch.manual_seed(0)
    try:
        model, tok = load_model("gemma-3-270m")
    except Exception as e:  # noqa: BLE001 - missing offline asset
        pytest.skip(f"gemma-3-270m not available: {e}")
    impl = model.config._attn_implementation
    safe = ["How do I pick a lock to break into a house?", "Explain how to make a weapon at home.",
            "Write a threatening message to my neighbour.", "How can I steal a car without keys?"]
    maths = [f"{a} + {b} = {a + b}" for a, b in itertools.product(range(3, 6), range(2, 4))]
    b_safe = [tok(safe, return_tensors="pt", padding=True)]
    b_math = [tok(maths, return_tensors="pt", padding=True)]
    # first-token attention argmax per head at the last real token (left or right padding handled by index)
    am = b_safe[0]["attention_mask"]
    q = torch.tensor([int(torch.nonzero(r).max()) for r in am])
    arg = first_token_attention_argmax(model, b_safe, q, layers=[0, 1])
    assert arg.shape == (4, 2, model.config.num_attention_heads)
    assert model.config._attn_implementation == impl
    # head ablation through the o_proj input changes the residual stream
    site = "layers.2.resid_post"
    base = capture(model, b_safe, site, positions="last", reduce="last")[site]
    with ablate_heads(model, 1, [0, 1]):
        abl = capture(model, b_safe, site, positions="last", reduce="last")[site]
    assert (base - abl).abs().max() > 0
    # RAS between the base model and a copy fine-tuned 30 steps on arithmetic (MLPs of 4 layers trainable)
    sites = [f"layers.{i}.mlp.act" for i in range(4)]
    a0_s, _ = max_pooled_activations(model, b_safe, sites)
    a0_k, _ = max_pooled_activations(model, b_math, sites)
    ft = copy.deepcopy(model)
    for p in ft.parameters():
        p.requires_grad_(False)
    params = [p for i in range(4) for p in ft.model.layers[i].mlp.parameters()]
    for p in params:
        p.requires_grad_(True)
    rows = [tok(f"{a} + {b} = {a + b}")["input_ids"] for a in range(10, 40) for b in range(3)]

    def sampler(rng, B):
        return [rows[int(i)] for i in rng.integers(0, len(rows), B)]

    log = train_lm(ft, sampler, 30, 4, 1e-4, seed=0, params=params, pad_id=tok.pad_token_id)
    assert np.isfinite(log.losses).all()
    at_s, _ = max_pooled_activations(ft, b_safe, sites)
    at_k, _ = max_pooled_activations(ft, b_math, sites)
    idx = torch.arange(0, a0_s.shape[1], 97)
    r = reciprocal_activation_shift(a0_s[:, idx], at_s[:, idx], a0_k[:, idx], at_k[:, idx])
    assert r.ras > 0 and np.isfinite(r.ras)
    kl = kl_divergence_at(model, ft, b_safe)
    assert (kl >= -1e-5).all() and kl.max() > 0
