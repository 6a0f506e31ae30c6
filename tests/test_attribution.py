"""act_x_grad and attribution patching against finite differences, exact patching and captum."""

from __future__ import annotations

import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.interp.attribution import act_x_grad, atp, atp_ig, gold_prob, logit_diff
from iclr26.interp.hooks import replace_sites
from iclr26.lm import tiny_lm


def _batch(B=3, T=6, vocab=40, seed=0, left_pad=False):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (B, T), generator=g)
    am = torch.ones_like(ids)
    if left_pad:
        ids[0, :2], am[0, :2] = 0, 0
    return {"input_ids": ids, "attention_mask": am}


def _metric_of(model, batch, metric, site=None, fn=None):
    with torch.no_grad():
        if site is None:
            return metric(model(**batch).logits, batch)
        with replace_sites(model, {site: fn}):
            return metric(model(**batch).logits, batch)


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_act_x_grad_matches_finite_differences(family):
    torch.manual_seed(0)
    model = tiny_lm(family, vocab=40, d=16, heads=2, layers=2, seed=1).double()
    batch = _batch()
    targets = torch.tensor([5, 6, 7])
    metric = gold_prob(targets)
    site = "layers.0.resid_post"
    res = act_x_grad(model, batch, [site, "layers.1.mlp.act"], metric, reduce_pos="none")
    base = _metric_of(model, batch, metric)
    assert torch.allclose(res.metric.double(), base.double(), atol=1e-9)
    # finite difference of unit (example b, position t, channel j)
    eps = 1e-3  # HF norms compute in fp32 even in a double model, so a tiny step drowns in rounding
    rows = res.index  # [N_sel, 2] (example, position)
    for b, t, j in [(0, 5, 3), (1, 2, 7), (2, 0, 0)]:
        def bump(x, s, b=b, t=t, j=j):
            y = x.clone()
            y[b, t, j] += s
            return y

        up = _metric_of(model, batch, metric, site, lambda x: bump(x, eps))
        dn = _metric_of(model, batch, metric, site, lambda x: bump(x, -eps))
        grad = (up[b] - dn[b]) / (2 * eps)
        # activation value at (b, t, j): read from a plain capture
        from iclr26.interp.capture import capture

        a = capture(model, batch, site, store_dtype=torch.float64)[site]
        k = int(((rows[:, 0] == b) & (rows[:, 1] == t)).nonzero())
        expected = a[k, j].double() * grad
        assert res[site][k, j].double() == pytest.approx(float(expected), rel=3e-3, abs=1e-9)
        # other examples' metrics do not depend on this example's activations
        others = [i for i in range(3) if i != b]
        assert torch.allclose(up[others], dn[others], atol=1e-12)


def test_reductions_and_left_padding_invariance():
    model = tiny_lm("llama", vocab=40, d=16, heads=2, seed=2)
    b = _batch(B=2, T=6, left_pad=True)
    metric = logit_diff([5, 5], [6, 6])
    full = act_x_grad(model, b, "layers.1.resid_post", metric, reduce_pos="none")
    mx = act_x_grad(model, b, "layers.1.resid_post", metric, reduce_pos="max")
    sm = act_x_grad(model, b, "layers.1.resid_post", metric, reduce_pos="sum")
    s = full["layers.1.resid_post"]
    rows0 = full.index[:, 0] == 0
    assert rows0.sum() == 4  # two pads excluded
    assert torch.allclose(mx["layers.1.resid_post"][0], s[rows0].amax(0))
    assert torch.allclose(sm["layers.1.resid_post"][1], s[~rows0].sum(0), atol=1e-6)
    # row 0 alone, without padding, gives the same scores
    one = {"input_ids": b["input_ids"][:1, 2:], "attention_mask": b["attention_mask"][:1, 2:]}
    alone = act_x_grad(model, one, "layers.1.resid_post", logit_diff([5], [6]), reduce_pos="sum")
    assert torch.allclose(alone["layers.1.resid_post"][0], sm["layers.1.resid_post"][0], atol=1e-4)


def test_head_only_where_the_metric_reads_gives_the_same_scores():
    model = tiny_lm("llama", vocab=40, d=16, heads=2, seed=7)
    b = _batch(B=3, T=6, left_pad=True)
    m = gold_prob(torch.tensor([5, 6, 7]))
    plain = lambda lg, batch: m(lg, {k: v for k, v in batch.items() if k != "_logits_offset"})  # noqa: E731
    fast = act_x_grad(model, b, "layers.0.resid_post", m, reduce_pos="sum")
    full = act_x_grad(model, b, "layers.0.resid_post", plain, reduce_pos="sum")  # no reads_position: full head
    assert torch.allclose(fast["layers.0.resid_post"], full["layers.0.resid_post"], atol=1e-7)
    assert torch.allclose(fast.metric, full.metric)


def test_parameters_frozen_and_restored_and_no_param_grads():
    model = tiny_lm("llama", vocab=40, d=16, heads=2, seed=3)
    model.model.layers[0].mlp.up_proj.weight.requires_grad_(False)
    flags = [p.requires_grad for p in model.parameters()]
    act_x_grad(model, _batch(), "layers.0.mlp.act", gold_prob(5))
    assert [p.requires_grad for p in model.parameters()] == flags
    assert all(p.grad is None for p in model.parameters())
    assert not model.training


def test_atp_linear_path_is_exact_and_ig_converges():
    model = tiny_lm("llama", vocab=40, d=16, heads=2, seed=4).double()
    clean, patch = _batch(seed=1), _batch(seed=2)
    metric = gold_prob(torch.tensor([5, 6, 7]), log=True)
    site = "layers.1.mlp.out"  # last-layer MLP output: the metric is smooth but non-linear in it
    from iclr26.interp.capture import capture

    a_p = capture(model, patch, site)[site].view(3, 6, -1)
    exact = _metric_of(model, clean, metric, site, lambda x: a_p.to(x.dtype)) - _metric_of(model, clean, metric)
    err = []
    for steps in (1, 4, 32):
        est = atp(model, clean, site, metric, patch=patch, steps=steps).scores[site].sum(1).double()
        err.append(float((est - exact).abs().max()))
    assert err[2] < err[0] and err[2] < 0.05 * float(exact.abs().max()) + 1e-6, err
    # zero baseline: integrated gradients over the whole path satisfy completeness
    ig = atp_ig(model, clean, site, metric, steps=64).scores[site].sum(1).double()
    zero = _metric_of(model, clean, metric, site, lambda x: torch.zeros_like(x)) - _metric_of(model, clean, metric)
    assert torch.allclose(ig, zero, rtol=0.02, atol=1e-4)


@pytest.mark.optional
def test_act_x_grad_matches_captum():
    captum = pytest.importorskip("captum.attr")
    model = tiny_lm("llama", vocab=40, d=16, heads=2, seed=5)
    batch = _batch()
    targets = torch.tensor([5, 6, 7])
    ours = act_x_grad(model, batch, "layers.0.mlp.out", gold_prob(targets), reduce_pos="none")

    def fwd(ids):
        p = torch.softmax(model(input_ids=ids, attention_mask=batch["attention_mask"]).logits[:, -1], -1)
        return p.gather(1, targets[:, None]).squeeze(1)

    lga = captum.LayerGradientXActivation(fwd, model.model.layers[0].mlp)
    ref = lga.attribute(batch["input_ids"]).detach().reshape(-1, 16)
    assert torch.allclose(ours["layers.0.mlp.out"], ref, atol=1e-6)


def test_bad_input():
    model = tiny_lm("llama", vocab=40, d=16, heads=2, seed=6)
    with pytest.raises(UserError, match="reduce_pos"):
        act_x_grad(model, _batch(), "layers.0.resid_post", gold_prob(5), reduce_pos="median")
    with pytest.raises(UserError, match="shape"):
        act_x_grad(model, _batch(), "layers.0.resid_post", lambda lg, b: lg.sum())
    with pytest.raises(UserError):
        act_x_grad(model, _batch(), "layers.9.resid_post", gold_prob(5))
    with pytest.raises(UserError, match="steps"):
        atp_ig(model, _batch(), "layers.0.resid_post", gold_prob(5), steps=1)
    with pytest.raises(UserError, match="patch batch shape"):
        atp(model, _batch(T=6), "layers.0.resid_post", gold_prob(5), patch=_batch(T=5))
