"""Replace hooks: identity edits are bit-exact, real edits match hand-computed oracles, hooks never leak."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers_hooks import assert_no_hooks
from iclr26.core.errors import UserError
from iclr26.interp.capture import capture
from iclr26.interp.hooks import replace_sites
from iclr26.lm import get_adapter, tiny_lm

FAMILIES = ["llama", "gpt2"]


def _ids(T: int = 7, seed: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, 64, (2, T), generator=g)


def _logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def _writable(model) -> list[str]:
    ad = get_adapter(model)
    return [n for n in ad.site_names() if not ad.resolve(n).read_only]


@pytest.mark.parametrize("family", FAMILIES)
def test_identity_replacement_is_bit_identical(family):
    model = tiny_lm(family, layers=2, seed=1)
    ids = _ids()
    base = _logits(model, ids)
    sites = _writable(model)
    assert {"layers.0.attn.q", "layers.1.attn.head_out", "embed", "logits"} <= set(sites)
    calls: dict[str, int] = {}

    def copy(name):
        def fn(x):
            calls[name] = calls.get(name, 0) + 1
            return x.clone()  # a new tensor: the write-back path (unview) really runs

        return fn

    with replace_sites(model, {s: copy(s) for s in sites}):
        got = _logits(model, ids)
    assert calls == {s: 1 for s in sites}
    assert torch.equal(got, base)
    assert_no_hooks(model)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_writable_site_reaches_the_logits(family):
    """A non-identity edit at any writable site changes the output (the write-back is not lost)."""
    model = tiny_lm(family, layers=2, seed=1)
    ids = _ids()
    base = _logits(model, ids)
    for s in _writable(model):
        with replace_sites(model, {s: lambda x: x * 1.5 + 0.25}):
            got = _logits(model, ids)
        assert not torch.allclose(got, base), s
    assert_no_hooks(model)


def test_zeroing_last_mlp_matches_oracle():
    model = tiny_lm("llama", layers=2, seed=2)
    ids = _ids()
    # oracle: without the last MLP, logits = head(norm(residual after the last attention block))
    mid = capture(model, ids, "layers.1.resid_mid", stop_after=False)["layers.1.resid_mid"]
    with torch.no_grad():
        oracle = model.lm_head(model.model.norm(mid)).reshape(2, 7, -1)
    with replace_sites(model, {"layers.1.mlp.out": torch.zeros_like}):
        got = _logits(model, ids)
    torch.testing.assert_close(got, oracle, rtol=1e-6, atol=1e-6)
    assert_no_hooks(model)


def test_head_ablation_matches_oracle():
    model = tiny_lm("llama", layers=2, seed=2)
    ids = _ids()
    z = capture(model, ids, "layers.0.attn.head_out")["layers.0.attn.head_out"]  # [N, H, dh]
    z_ablated = z.clone()
    z_ablated[:, 1] = 0
    o = model.model.layers[0].self_attn.o_proj
    with torch.no_grad():
        oracle = F.linear(z_ablated.flatten(-2), o.weight, o.bias)

    def ablate(x):
        x = x.clone()
        x[:, :, 1] = 0
        return x

    with replace_sites(model, {"blocks.0.attn.z": ablate}):  # aliases resolve through the adapter
        got = capture(model, ids, "layers.0.attn.out")["layers.0.attn.out"]
    torch.testing.assert_close(got, oracle, rtol=1e-6, atol=1e-6)
    assert_no_hooks(model)


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox"])
def test_zero_queries_give_causal_mean_of_values(family):
    """q = 0 makes every score 0, so each head outputs the running mean of v (fused q/k/v write-back)."""
    model = tiny_lm(family, layers=2, seed=4)
    ids = _ids(T=6)
    H = model.config.num_attention_heads
    v = capture(model, ids, "layers.0.attn.v")["layers.0.attn.v"].reshape(2, 6, H, -1)
    oracle = v.cumsum(1) / torch.arange(1, 7).view(1, 6, 1, 1)
    with replace_sites(model, {"layers.0.attn.q": torch.zeros_like}):
        cap = capture(model, ids, ["layers.0.attn.head_out", "layers.0.attn.q", "layers.0.attn.k"])
    torch.testing.assert_close(
        cap["layers.0.attn.head_out"].reshape(2, 6, H, -1), oracle, rtol=1e-5, atol=1e-6
    )
    assert (cap["layers.0.attn.q"] == 0).all()
    k_plain = capture(model, ids, "layers.0.attn.k")["layers.0.attn.k"]
    assert torch.equal(cap["layers.0.attn.k"], k_plain)  # only the query third was replaced
    assert_no_hooks(model)


def test_steering_adds_exactly_and_passes_gradients():
    model = tiny_lm("gpt2", layers=2, seed=5)
    ids = _ids()
    base = capture(model, ids, "layers.0.resid_post")["layers.0.resid_post"]
    vec = torch.zeros(model.config.hidden_size, requires_grad=True)
    with torch.no_grad():
        vec += torch.linspace(-1, 1, model.config.hidden_size)
    with replace_sites(model, {"layers.0.resid_post": lambda x: x + vec}):
        nxt = capture(model, ids, "layers.1.resid_pre")["layers.1.resid_pre"]
        loss = model(input_ids=ids).logits.square().mean()
    torch.testing.assert_close(nxt, base + vec.detach(), rtol=0, atol=1e-6)
    loss.backward()
    assert vec.grad is not None and vec.grad.abs().sum() > 0
    assert_no_hooks(model)


def test_hooks_are_removed_on_errors():
    model = tiny_lm("llama", layers=2, seed=1)
    ids = _ids()

    def boom(x):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        with replace_sites(model, {"layers.0.mlp.out": boom}):
            _logits(model, ids)
    assert_no_hooks(model)
    with pytest.raises(KeyError):
        with replace_sites(model, {"layers.0.mlp.out": lambda x: x}):
            raise KeyError("user code failed")
    assert_no_hooks(model)
    with pytest.raises(UserError, match=r"shape \(2, 7, 3\)"):
        with replace_sites(model, {"layers.0.mlp.out": lambda x: x[..., :3]}):
            _logits(model, ids)
    assert_no_hooks(model)
    # read-only sites are refused before anything is registered, naming what to edit instead
    with pytest.raises(UserError, match="resid_mid.*attn.out"):
        with replace_sites(model, {"layers.0.mlp.out": lambda x: x, "layers.1.resid_mid": lambda x: x}):
            pass
    with pytest.raises(UserError, match="attention weights"):
        with replace_sites(model, {"layers.0.attn.pattern": lambda x: x}):
            pass
    with pytest.raises(UserError, match="unknown site"):
        with replace_sites(model, {"layers.9.mlp.out": lambda x: x}):
            pass
    assert_no_hooks(model)
    torch.testing.assert_close(_logits(model, ids), _logits(tiny_lm("llama", layers=2, seed=1), ids))
