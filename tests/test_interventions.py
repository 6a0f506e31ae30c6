"""Steering, ablation, patching and diff-of-means: oracles on tiny Llama and GPT-2 models."""

from __future__ import annotations

import pytest
import torch

from helpers_hooks import assert_no_hooks
from iclr26.core.errors import UserError
from iclr26.interp.hooks import hooks, register_site_hook
from iclr26.interp.interventions import (
    ablate_direction,
    ablate_heads,
    cosine_profile,
    diff_of_means,
    edit_units,
    patch,
    project,
    steer,
)
from iclr26.lm import get_adapter, tiny_lm

FAMILIES = ["llama", "gpt2"]
UP = {"llama": "mlp.gate", "gpt2": "mlp.up"}


def _ids(T: int = 6, seed: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, 64, (2, T), generator=g)


def _logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def _read(model, sites, ids) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Activations at ``sites`` (as the model used them) and the logits of one forward."""
    ad = get_adapter(model)
    got: dict[str, torch.Tensor] = {}

    def install(handles):
        for name in sites:
            s = ad.resolve(name)
            handles.append(register_site_hook(s, lambda x, n=name: got.__setitem__(n, x.detach().clone())))

    with hooks(install):
        logits = _logits(model, ids)
    return got, logits


def _hook_counts(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.fixture(params=FAMILIES)
def model(request):
    m = tiny_lm(request.param, d=32, layers=2, seed=0)
    m.family_name = request.param
    _logits(m, _ids())  # let transformers install its own recording hooks first
    return m


def test_identity_edits_are_bit_identical(model):
    ids = _ids()
    base = _logits(model, ids)
    site = "layers.1.resid_post"
    clean, _ = _read(model, [site], ids)
    with steer(model, site, torch.randn(32), alpha=0.0):
        assert torch.equal(_logits(model, ids), base)
    with edit_units(model, f"layers.0.{UP[model.family_name]}", [1, 5], mode="scale", factor=1.0):
        assert torch.equal(_logits(model, ids), base)
    with patch(model, site, clean[site]):
        assert torch.equal(_logits(model, ids), base)
    with steer(model, site, torch.randn(32), alpha=1.0):  # and a real edit does change them
        assert not torch.equal(_logits(model, ids), base)
    assert_no_hooks(model)


def test_steer_adds_alpha_v_exactly(model):
    ids = _ids()
    site = "layers.0.resid_post"
    v = torch.randn(32)
    clean, _ = _read(model, [site], ids)
    with steer(model, site, v, alpha=2.5):
        got, _ = _read(model, [site], ids)
    torch.testing.assert_close(got[site] - clean[site], (2.5 * v).expand_as(clean[site]), rtol=0, atol=1e-5)
    with steer(model, site, v, alpha=1.0, positions=[0, 3]):
        got, _ = _read(model, [site], ids)
    diff = (got[site] - clean[site]).norm(dim=-1)
    assert (diff[:, [0, 3]] > 0).all() and (diff[:, [1, 2, 4, 5]] == 0).all()


def test_ablate_direction_projects_out_only_r(model):
    ids = _ids()
    sites = ["layers.0.resid_post", "layers.1.mlp.out"]
    r = torch.randn(32)
    u = r / r.norm()
    with ablate_direction(model, sites[1], r):
        got, _ = _read(model, sites[1:], ids)
    clean_in, _ = _read(model, sites[1:], ids)
    assert (got[sites[1]] @ u).abs().max() < 1e-5
    assert (clean_in[sites[1]] @ u).abs().max() > 1e-3
    resid = lambda h: h - (h @ u).unsqueeze(-1) * u  # noqa: E731
    torch.testing.assert_close(resid(got[sites[1]]), resid(clean_in[sites[1]]), rtol=0, atol=1e-5)
    with ablate_direction(model, sites, {s: r for s in sites}):
        got, _ = _read(model, sites, ids)
    assert max(float((got[s] @ u).abs().max()) for s in sites) < 1e-5


def test_edit_units_zeroes_channel(model):
    ids = _ids()
    site = f"layers.0.{UP[model.family_name]}"
    with edit_units(model, site, [3]):
        got, _ = _read(model, [site], ids)
    clean, _ = _read(model, [site], ids)
    assert (got[site][..., 3] == 0).all() and (clean[site][..., 3] != 0).any()
    others = [j for j in range(got[site].shape[-1]) if j != 3]
    assert torch.equal(got[site][..., others], clean[site][..., others])


def test_ablate_heads_zero_and_mean(model):
    ids = _ids()
    site = "layers.1.attn.head_out"
    clean, _ = _read(model, [site], ids)
    with ablate_heads(model, 1, [2]):
        got, _ = _read(model, [site], ids)
    assert (got[site][:, :, 2] == 0).all() and (clean[site][:, :, 2] != 0).any()
    keep = [0, 1, 3]
    assert torch.equal(got[site][:, :, keep], clean[site][:, :, keep])
    mean = torch.randn(4, 8)
    with ablate_heads(model, 1, 0, mode="mean", mean=mean):
        got, _ = _read(model, [site], ids)
    assert torch.equal(got[site][:, :, 0], mean[0].expand_as(got[site][:, :, 0]))


def test_errors_are_user_errors(model):
    with pytest.raises(UserError, match="unknown site"):
        steer(model, "layers.9.resid_post", torch.zeros(32)).__enter__()
    with pytest.raises(UserError, match="shape"):
        steer(model, "layers.0.resid_post", torch.zeros(31)).__enter__()
    with pytest.raises(UserError, match="positions"):
        steer(model, "layers.0.resid_post", torch.zeros(32), positions="later").__enter__()
    with pytest.raises(UserError, match="range"):
        ablate_heads(model, 0, [4]).__enter__()
    with pytest.raises(UserError, match="mode"):
        edit_units(model, "layers.0.mlp.up", [0], mode="double").__enter__()
    assert_no_hooks(model)


def test_exception_and_nesting_leave_no_hooks(model):
    n0 = _hook_counts(model)
    ids = _ids()
    with pytest.raises(RuntimeError, match="boom"):
        with steer(model, "layers.0.resid_post", torch.randn(32)), ablate_heads(model, 0, [1]):
            _logits(model, ids)
            assert _hook_counts(model) > n0
            raise RuntimeError("boom")
    assert _hook_counts(model) == n0
    with steer(model, "layers.0.resid_post", torch.randn(32), positions="prompt"):
        n1 = _hook_counts(model)
        with ablate_direction(model, ["layers.0.resid_post", "layers.1.resid_post"], torch.randn(32)):
            assert _hook_counts(model) == n1 + 2
        assert _hook_counts(model) == n1
    assert _hook_counts(model) == n0
    assert_no_hooks(model)


@pytest.mark.parametrize("positions", ["generated", "prompt", [1, 6, 7]])
def test_generate_with_and_without_cache_agree(model, positions):
    ids = _ids(T=5)
    v = torch.randn(32, generator=torch.Generator().manual_seed(1)) * 3
    kw = dict(max_new_tokens=4, do_sample=False, pad_token_id=0)
    outs = {}
    for cache in (True, False):
        with torch.no_grad(), steer(model, "layers.0.resid_post", v, alpha=2.0, positions=positions):
            outs[cache] = model.generate(ids, use_cache=cache, **kw)
    assert torch.equal(outs[True], outs[False])
    with torch.no_grad():
        plain = model.generate(ids, use_cache=True, **kw)
    # the steered continuation equals a plain forward steered at the same absolute positions
    with (
        torch.no_grad(),
        steer(model, "layers.0.resid_post", v, alpha=2.0, positions=positions, prompt_len=5),
    ):
        full = model(input_ids=outs[True][:, :-1]).logits
    assert torch.equal(full[:, 4:].argmax(-1), outs[True][:, 5:])
    assert not torch.equal(plain, outs[True])  # the steering really acts on these positions
    assert_no_hooks(model)


def test_patch_from_capture_and_positions(model):
    from iclr26.interp.capture import capture

    ids_a, ids_b = _ids(seed=3), _ids(seed=4)
    site = "layers.0.resid_post"
    cap = capture(model, {"input_ids": ids_a}, site)
    clean_a, logits_a = _read(model, [site], ids_a)
    with patch(model, site, cap):  # patch b's run with a's activations: a's logits come out
        got, logits = _read(model, [site], ids_b)
    assert torch.equal(got[site], clean_a[site])
    torch.testing.assert_close(logits, logits_a, rtol=0, atol=1e-5)
    clean_b, _ = _read(model, [site], ids_b)
    with patch(model, site, clean_a[site], positions=[2]):
        got, _ = _read(model, [site], ids_b)
    assert torch.equal(got[site][:, 2], clean_a[site][:, 2])
    assert torch.equal(got[site][:, [0, 1, 3, 4, 5]], clean_b[site][:, [0, 1, 3, 4, 5]])


def test_diff_of_means_recovers_planted_direction():
    g = torch.Generator().manual_seed(0)
    d, n = 16, 400
    true = torch.randn(d, generator=g)
    true /= true.norm()
    neg = torch.randn(n, d, generator=g)
    pos = torch.randn(n, d, generator=g) + 3 * true
    r, r_hat = diff_of_means(pos, neg)
    assert float(r_hat @ true) > 0.95 and torch.allclose(r_hat.norm(), torch.tensor(1.0))
    assert project(pos.mean(0), r_hat) > project(neg.mean(0), r_hat)
    _, flipped = diff_of_means(neg, pos)
    assert torch.allclose(flipped, -r_hat)
    layered = diff_of_means(torch.stack([pos, neg]), torch.stack([neg, pos]))[1]
    prof = cosine_profile(layered, true)
    assert prof.shape == (2,) and prof[0] > 0.95 and prof[1] < -0.95
    dct = diff_of_means({"a": pos}, {"a": neg})[1]
    assert torch.equal(dct["a"], r_hat)
