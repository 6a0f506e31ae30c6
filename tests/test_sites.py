"""Site adapters per family on tiny random HF models: every site equals an independent oracle
(``output_hidden_states`` / ``output_attentions`` or a recomputation from the HF sub-modules), and logits
with all hooks installed are bit-identical to the plain forward."""

from __future__ import annotations

import pytest
import torch

from helpers_hooks import assert_no_hooks
from iclr26.core import UserError
from iclr26.interp.capture import capture
from iclr26.lm import get_adapter, list_sites, register_family, tiny_lm
from iclr26.lm import sites as sites_mod

FAMILIES = ["llama", "qwen2", "qwen3", "gemma2", "gemma3", "gpt2", "gpt_neox", "bert"]
B, T = 2, 7
ATOL = 2e-5


def _full(model, ids):
    """Capture every site at every position (no early stop) as [B, T, ...] tensors."""
    names = list_sites(model)
    # attention patterns need eager attention (numerically different from sdpa): capture them separately
    # so that the bit-identity check on logits runs with every other hook installed on the sdpa model
    plain = [n for n in names if not n.endswith("attn.pattern")]
    cap = capture(model, {"input_ids": ids}, plain, stop_after=False)
    out = {n: cap[n].reshape(B, T, *cap[n].shape[1:]) for n in plain}
    pat = [n for n in names if n.endswith("attn.pattern")]
    cap = capture(model, {"input_ids": ids}, pat, stop_after=False)
    out.update({n: cap[n].reshape(B, T, *cap[n].shape[1:]) for n in pat})
    return out


def _close(a, b, what):
    assert a.shape == b.shape, f"{what}: {tuple(a.shape)} vs {tuple(b.shape)}"
    torch.testing.assert_close(a, b, atol=ATOL, rtol=1e-4, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("family", FAMILIES)
def test_sites_match_oracles(family):
    model = tiny_lm(family, d=32, layers=3, heads=4, kv_heads=2, vocab=61, seed=3)
    ids = torch.randint(4, 61, (B, T), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(ids, output_hidden_states=True)
    plain = (ref.logits if family != "bert" else ref.last_hidden_state).clone()
    hs = ref.hidden_states
    ad = get_adapter(model)
    L, H = ad.n_layers, ad.n_heads
    acts = _full(model, ids)
    assert_no_hooks(model)
    assert model.config._attn_implementation != "eager" or family == "gemma2"  # restored after attn.pattern

    with torch.no_grad():
        # residual stream against output_hidden_states
        _close(acts["embed"], hs[0], "embed")
        for i in range(L):
            _close(acts[f"layers.{i}.resid_pre"], hs[i], f"resid_pre {i}")
        for i in range(L - 1):
            _close(acts[f"layers.{i}.resid_post"], hs[i + 1], f"resid_post {i}")
        last = acts[f"layers.{L - 1}.resid_post"]
        if family == "bert":
            _close(last, hs[L], "resid_post last (no final norm)")
            _close(last, plain, "bert last_hidden_state")
        else:
            # hidden_states[-1] already has the final norm applied: the hook must give the raw residual
            _close(acts["final_norm"], hs[L], "final_norm")
            fn = model.get_submodule(ad.final_norm_name)
            _close(fn(last), hs[L], "final_norm(resid_post last)")
            assert torch.equal(acts["logits"], plain), "logits with hooks must be bit-identical"

        for i in range(L):
            layer = ad.layers[i]
            a = {k.split(".", 2)[2]: v for k, v in acts.items() if k.startswith(f"layers.{i}.")}
            pre, post = a["resid_pre"], a["resid_post"]
            z = a["attn.head_out"]
            assert z.shape == (B, T, H, 32 // H)
            if family in ("llama", "qwen2", "qwen3", "gemma2", "gemma3"):
                sa, mlp = layer.self_attn, layer.mlp
                gemma = family.startswith("gemma")
                _close(a["attn.q"], sa.q_proj(layer.input_layernorm(pre)), "attn.q")
                _close(a["attn.v"], sa.v_proj(layer.input_layernorm(pre)), "attn.v")
                attn_out = sa.o_proj(z.flatten(-2))
                if gemma:
                    attn_out = layer.post_attention_layernorm(attn_out)
                _close(a["attn.out"], attn_out, "attn.out")
                _close(a["resid_mid"], pre + a["attn.out"], "resid_mid")
                mlp_in = (layer.pre_feedforward_layernorm if gemma else layer.post_attention_layernorm)(
                    a["resid_mid"]
                )
                _close(a["mlp.in"], mlp_in, "mlp.in")
                _close(a["mlp.gate"], mlp.gate_proj(mlp_in), "mlp.gate")
                _close(a["mlp.up"], mlp.up_proj(mlp_in), "mlp.up")
                _close(a["mlp.act"], mlp.act_fn(a["mlp.gate"]) * a["mlp.up"], "mlp.act")
                out = mlp.down_proj(a["mlp.act"])
                if gemma:
                    out = layer.post_feedforward_layernorm(out)
                _close(a["mlp.out"], out, "mlp.out")
                _close(post, a["resid_mid"] + a["mlp.out"], "resid_post = mid + mlp.out")
            elif family == "gpt2":
                qkv = layer.attn.c_attn(layer.ln_1(pre))
                _close(torch.cat([a["attn.q"], a["attn.k"], a["attn.v"]], -1), qkv, "attn.qkv")
                _close(a["attn.out"], layer.attn.c_proj(z.flatten(-2)), "attn.out")
                _close(a["resid_mid"], pre + a["attn.out"], "resid_mid")
                _close(a["mlp.in"], layer.ln_2(a["resid_mid"]), "mlp.in")
                _close(a["mlp.up"], layer.mlp.c_fc(a["mlp.in"]), "mlp.up")
                _close(a["mlp.act"], layer.mlp.act(a["mlp.up"]), "mlp.act")
                _close(a["mlp.out"], layer.mlp.c_proj(a["mlp.act"]), "mlp.out")
                _close(post, a["resid_mid"] + a["mlp.out"], "resid_post")
            elif family == "gpt_neox":
                assert "resid_mid" not in a  # parallel residual: no state between attention and MLP
                qkv = layer.attention.query_key_value(layer.input_layernorm(pre)).view(B, T, H, 3, -1)
                _close(a["attn.q"], qkv[..., 0, :].flatten(-2), "attn.q")
                _close(a["attn.v"], qkv[..., 2, :].flatten(-2), "attn.v")
                _close(a["attn.out"], layer.attention.dense(z.flatten(-2)), "attn.out")
                _close(a["mlp.in"], layer.post_attention_layernorm(pre), "mlp.in")
                _close(a["mlp.act"], layer.mlp.act(a["mlp.up"]), "mlp.act")
                _close(a["mlp.out"], layer.mlp.dense_4h_to_h(a["mlp.act"]), "mlp.out")
                _close(post, pre + a["attn.out"] + a["mlp.out"], "resid_post (parallel)")
            else:  # bert, post-LN
                _close(a["attn.q"], layer.attention.self.query(pre), "attn.q")
                _close(a["attn.v"], layer.attention.self.value(pre), "attn.v")
                _close(a["attn.out"], layer.attention.output.dense(z.flatten(-2)), "attn.out")
                _close(a["resid_mid"], layer.attention.output.LayerNorm(pre + a["attn.out"]), "resid_mid")
                _close(a["mlp.in"], a["resid_mid"], "mlp.in")
                _close(a["mlp.act"], layer.intermediate.intermediate_act_fn(a["mlp.up"]), "mlp.act")
                _close(a["mlp.out"], layer.output.dense(a["mlp.act"]), "mlp.out")
                _close(post, layer.output.LayerNorm(a["resid_mid"] + a["mlp.out"]), "resid_post")
            # head outputs = pattern-weighted values (GQA: query head h reads kv head h // (H / Hkv))
            pat = a["attn.pattern"]  # [B, Tq, H, Tk]
            v = a["attn.v"].unflatten(-1, (-1, z.shape[-1]))  # [B, T, Hkv, dh]
            v = v.repeat_interleave(H // v.shape[2], dim=2)
            _close(torch.einsum("bqhk,bkhd->bqhd", pat, v), z, "head_out = pattern @ v")


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert"])
def test_pattern_matches_output_attentions(family):
    model = tiny_lm(family, layers=2, seed=1, attn_implementation="eager")
    ids = torch.randint(4, 64, (B, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        att = model(ids, output_attentions=True).attentions
    cap = capture(model, ids, ["layers.1.attn.pattern"])
    _close(cap["layers.1.attn.pattern"].reshape(B, T, 4, T), att[1].transpose(1, 2), "pattern")


def test_aliases_and_unknown_site_lists_valid():
    model = tiny_lm("llama", layers=2)
    ad = get_adapter(model)
    assert ad.canonical("blocks.1.attn.z") == "layers.1.attn.head_out"
    assert ad.canonical("blocks.0.resid_post") == "layers.0.resid_post"
    with pytest.raises(
        UserError, match=r"valid: embed, layers\.\{0\.\.1\}\..*resid_post.*final_norm, logits"
    ):
        ad.resolve("layers.2.resid_post")
    with pytest.raises(UserError, match="unknown site"):
        ad.resolve("layers.0.mlp.nope")
    assert "layers.0.mlp.gate" not in list_sites(tiny_lm("gpt2", layers=1))


def test_unknown_architecture_fails_with_recipe_and_register_family():
    model = tiny_lm("llama", layers=2)
    for layer in model.model.layers:  # make the layer unrecognisable: rename its MLP
        layer.ffn = layer.mlp
        del layer.mlp
    with pytest.raises(UserError, match="register_family"):
        get_adapter(model)
    table = {k: (v[0].replace("mlp", "ffn", 1), v[1], v[2]) for k, v in sites_mod.LLAMA.items()}
    register_family("llama_ffn", lambda m: hasattr(m, "ffn") and hasattr(m, "self_attn"), table)
    try:
        ad = get_adapter(model)
        assert ad.family.name == "llama_ffn"
        assert ad.resolve("layers.1.mlp.out").module is model.model.layers[1].ffn
    finally:
        sites_mod._FAMILIES[:] = [f for f in sites_mod._FAMILIES if f.name != "llama_ffn"]


def test_wrapped_model_discovers_layers_by_count():
    """A VLM-like wrapper: the layer list sits deeper and its path is discovered, not hard-coded."""
    inner = tiny_lm("qwen2", layers=3)

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = inner.config
            self.language_model = inner
            self.extra = torch.nn.ModuleList([torch.nn.Linear(2, 2)])

        def forward(self, input_ids, attention_mask=None):
            return self.language_model(input_ids=input_ids, attention_mask=attention_mask)

    w = Wrapper()
    ad = get_adapter(w)
    assert ad.layers_name == "language_model.model.layers"
    ids = torch.randint(4, 64, (1, 5))
    cap = capture(w, ids, "layers.2.resid_post")
    with torch.no_grad():
        ref = inner(ids, output_hidden_states=True).hidden_states[2]
    got = capture(w, ids, "layers.1.resid_post")["layers.1.resid_post"]
    _close(got, ref[0], "wrapped resid_post")
    assert cap["layers.2.resid_post"].shape == (5, 32)
    assert_no_hooks(w)
