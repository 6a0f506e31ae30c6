"""sae_edit (error term kept, identity bit-exact, transcoders) and the GemmaScope / dictionary_learning /
circuit-tracer loaders, each against its library's own formula written out on random weights."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers_hooks import assert_no_hooks
from iclr26.core.errors import UserError
from iclr26.core.io import save_tensors
from iclr26.interp.hooks import hooks, register_site_hook
from iclr26.interp.sae import (
    SparseDictionary,
    load_circuit_tracer_transcoder,
    load_dictionary_learning,
    load_gemmascope,
    load_gemmascope2,
)
from iclr26.interp.sae_edit import add_scaled, clamp, sae_edit, scale, zero
from iclr26.lm import get_adapter, tiny_lm

FAMILIES = ["llama", "gpt2"]
D, N = 32, 48


def _ids(T: int = 6) -> torch.Tensor:
    return torch.randint(0, 64, (2, T), generator=torch.Generator().manual_seed(3))


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def _sae(d_in=D, d_out=None, act="relu", seed=0, **kw) -> SparseDictionary:
    g = torch.Generator().manual_seed(seed)
    sae = SparseDictionary(d_in, N, d_out=d_out, activation=act, **kw)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
        if sae.threshold is not None:
            sae.threshold.abs_()
    return sae


def _read(model, site, ids):
    got = {}
    s = get_adapter(model).resolve(site)
    with hooks(lambda h: h.append(register_site_hook(s, lambda x: got.__setitem__("x", x.detach().clone())))):
        logits = _logits(model, ids)
    return got["x"], logits


@pytest.fixture(params=FAMILIES)
def model(request):
    m = tiny_lm(request.param, d=D, layers=2, seed=0)
    _logits(m, _ids())
    return m


def test_identity_edit_is_bit_exact_and_hooks_go(model):
    ids = _ids()
    base = _logits(model, ids)
    sae = _sae(input_site="layers.0.resid_post")
    with sae_edit(model, sae, lambda f: f):
        assert torch.equal(_logits(model, ids), base)
    with sae_edit(model, sae, scale([0, 1, 2], 1.0)):
        assert torch.equal(_logits(model, ids), base)
    with sae_edit(model, sae, add_scaled([0, 3], 0.0, ref=2.0)):  # the constant-shift path, zero shift
        assert torch.equal(_logits(model, ids), base)
    with sae_edit(model, sae, zero(list(range(N)))):  # a real edit changes them
        assert not torch.equal(_logits(model, ids), base)
    assert_no_hooks(model)
    assert torch.equal(_logits(model, ids), base)


def test_edit_keeps_the_error_term_exactly(model):
    """x' = dec(edit(f)) + (x - dec(f)), transcribed, at the edited site; other positions untouched."""
    ids = _ids()
    site = "layers.1.resid_post"
    sae = _sae(seed=1)
    x, _ = _read(model, site, ids)
    edit = add_scaled([3, 7], 2.0, ref=1.5)
    f = sae.encode(x)
    want = sae.decode(edit(f)) + (x - sae.decode(f))
    with sae_edit(model, sae, edit, site=site):
        got, _ = _read(model, site, ids)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    with sae_edit(model, sae, edit, positions=[1, 4], site=site):
        got, _ = _read(model, site, ids)
    assert torch.equal(got[:, [0, 2, 3, 5]], x[:, [0, 2, 3, 5]])
    torch.testing.assert_close(got[:, [1, 4]], want[:, [1, 4]], rtol=0, atol=1e-5)


@pytest.mark.parametrize("edit", [add_scaled([5, 5, 2], 1.5, ref="max"), add_scaled([5, 5, 2], 1.5, ref=0.7),
                                  zero([0, 9]), clamp(4, 3.0), "custom"])
def test_sparse_difference_matches_two_decodes(model, edit):
    """The write-back is computed over the edited rows of W_dec only; it must equal dec(edit(f)) − dec(f) written
    out in full, with a repeated index counted once and with SAELens-style input scaling."""
    site = "layers.0.resid_post"
    sae = _sae(seed=2, input_scale=2.5, input_site=site)
    if edit == "custom":
        def edit(f):
            return f * torch.linspace(0.0, 2.0, f.shape[-1])
    ids = _ids()
    x, _ = _read(model, site, ids)
    f = sae.encode(x)
    want = x + (sae.decode(edit(f)) - sae.decode(f))
    with sae_edit(model, sae, edit):
        got, _ = _read(model, site, ids)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert not torch.allclose(got, x, atol=1e-3)  # the edit did something


def test_edit_functions():
    f = torch.tensor([[[0.0, 2.0, 1.0], [4.0, 0.0, 3.0]]])  # [1, 2, 3]
    assert zero([0])(f)[..., 0].abs().sum() == 0
    assert torch.equal(scale(2, 5.0)(f)[..., 2], f[..., 2] * 5)
    assert torch.equal(clamp([1], 9.0)(f)[..., 1], torch.full((1, 2), 9.0))
    g = add_scaled([0, 2], 0.5, ref="latent_max")(f)  # max of latent 0 is 4, of latent 2 is 3
    assert torch.equal(g[..., 0], f[..., 0] + 2.0) and torch.equal(g[..., 2], f[..., 2] + 1.5)
    h = add_scaled([1], 0.5, ref="max")(f)  # P10: the largest latent of the forward (4) for every edited latent
    assert torch.equal(h[..., 1], f[..., 1] + 2.0) and torch.equal(h[..., 0], f[..., 0])
    assert torch.equal(g[..., 1], f[..., 1]) and torch.equal(f[0, 0], torch.tensor([0.0, 2.0, 1.0]))  # no mutation
    with pytest.raises(UserError, match="allowed"):
        add_scaled(0, 1.0, ref="mean")
    with pytest.raises(UserError, match="non-empty list of ints"):
        zero([])
    with pytest.raises(UserError, match="out of range"):
        zero([-1])


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma3"])  # gemma3: mlp.out is after the post-MLP norm
def test_transcoder_reads_input_site_and_writes_output_site(family):
    model = tiny_lm(family, d=D, layers=2, seed=0)
    ids = _ids()
    ff = model.config.intermediate_size
    tc = _sae(d_in=D, d_out=D, act="relu", seed=2, apply_b_dec_to_input=False,
              input_site="layers.0.mlp.in", output_site="layers.0.mlp.out")
    x_in, _ = _read(model, "layers.0.mlp.in", ids)
    y, _ = _read(model, "layers.0.mlp.out", ids)
    f = tc.encode(x_in)
    want = y + tc.decode(zero([5, 6])(f)) - tc.decode(f)
    with sae_edit(model, tc, zero([5, 6])):
        got, _ = _read(model, "layers.0.mlp.out", ids)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert_no_hooks(model)
    assert ff > 0


def test_bad_input(model):
    sae = _sae()
    with pytest.raises(UserError, match="input site"):
        with sae_edit(model, sae, zero(0)):
            pass
    with pytest.raises(UserError, match="out of range"):
        with sae_edit(model, sae, zero(N + 3), site="layers.0.resid_post"):
            pass
    with pytest.raises(UserError, match="SparseDictionary"):
        with sae_edit(model, torch.nn.Linear(2, 2), zero(0), site="layers.0.resid_post"):
            pass
    wide = _sae(d_in=D + 1)
    with pytest.raises(UserError, match="does not match"):
        with sae_edit(model, wide, zero(0), site="layers.0.resid_post"):
            _logits(model, _ids())
    assert_no_hooks(model)


# ---------------------------------------------------------------------- loaders
def test_gemmascope_npz_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    p = {"W_enc": rng.normal(size=(D, N)), "b_enc": rng.normal(size=N), "W_dec": rng.normal(size=(N, D)),
         "b_dec": rng.normal(size=D), "threshold": np.abs(rng.normal(size=N))}
    np.savez(tmp_path / "params.npz", **{k: v.astype(np.float32) for k, v in p.items()})
    sae = load_gemmascope(tmp_path, site="layers.3.resid_post")
    x = rng.normal(size=(5, D)).astype(np.float32)
    pre = x @ p["W_enc"] + p["b_enc"]  # GemmaScope: no b_dec subtraction, raw activations
    f = pre * (pre > p["threshold"])
    x_hat = f @ p["W_dec"] + p["b_dec"]
    with torch.no_grad():
        got_hat, got_f = sae(torch.from_numpy(x))
    np.testing.assert_allclose(got_f.numpy(), f, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_hat.numpy(), x_hat, rtol=1e-4, atol=1e-3)
    assert sae.input_site == sae.output_site == "layers.3.resid_post"
    with pytest.raises(UserError, match="params.npz"):
        load_gemmascope(tmp_path / "nope")
    np.savez(tmp_path / "bad.npz", W_enc=p["W_enc"])
    with pytest.raises(UserError, match="lacks"):
        load_gemmascope(tmp_path / "bad.npz")


@pytest.mark.parametrize("cls", ["AutoEncoder", "AutoEncoderTopK", "BatchTopKSAE", "JumpReluAutoEncoder"])
def test_dictionary_learning_round_trip(tmp_path, cls):
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    x = r(7, D)
    if cls == "JumpReluAutoEncoder":
        sd = {"W_enc": r(D, N), "b_enc": r(N), "W_dec": r(N, D), "b_dec": r(D), "threshold": r(N).abs()}
        pre = x @ sd["W_enc"] + sd["b_enc"]  # apply_b_dec_to_input False by default
        f = F.relu(pre * (pre > sd["threshold"]))
        x_hat = f @ sd["W_dec"] + sd["b_dec"]
    else:
        sd = {"encoder.weight": r(N, D), "encoder.bias": r(N), "decoder.weight": r(D, N)}
        bias_key = "bias" if cls == "AutoEncoder" else "b_dec"
        sd[bias_key] = r(D)
        post = F.relu((x - sd[bias_key]) @ sd["encoder.weight"].T + sd["encoder.bias"])
        if cls == "AutoEncoder":
            f = post
        elif cls == "AutoEncoderTopK":
            sd["k"], sd["threshold"] = torch.tensor(5, dtype=torch.int), torch.tensor(-1.0)
            v, i = post.topk(5, dim=-1)
            f = torch.zeros_like(post).scatter_(-1, i, v)
        else:
            sd["k"], sd["threshold"] = torch.tensor(5, dtype=torch.int), torch.tensor(0.7)
            f = post * (post > 0.7)
        x_hat = f @ sd["decoder.weight"].T + sd[bias_key]
    torch.save(sd, tmp_path / "ae.pt")
    (tmp_path / "config.json").write_text(json.dumps({"trainer": {"dict_class": cls}}))
    sae = load_dictionary_learning(tmp_path)
    got_hat, got_f = sae(x)
    torch.testing.assert_close(got_f, f, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got_hat, x_hat, rtol=1e-4, atol=1e-3)


def test_dictionary_learning_refuses_code_and_unknown_classes(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    torch.save({"x": Evil()}, tmp_path / "ae.pt")
    with pytest.raises(UserError, match="refusing to unpickle"):
        load_dictionary_learning(tmp_path)
    torch.save({"encoder.weight": torch.zeros(N, D)}, tmp_path / "ae.pt")
    (tmp_path / "config.json").write_text(json.dumps({"trainer": {"dict_class": "GatedAutoEncoder"}}))
    with pytest.raises(UserError, match="allowed"):
        load_dictionary_learning(tmp_path)
    with pytest.raises(UserError, match="dictionary_learning folder"):
        load_dictionary_learning(tmp_path / "missing")


def _ct_forward(x, W_enc, b_enc, W_dec, b_dec, theta=None, W_skip=None):
    """circuit-tracer 0.5.0's SingleLayerTranscoder forward, transcribed: pre = F.linear(x, W_enc, b_enc);
    JumpReLU x·[x > θ] (ReLU without θ); y = f @ W_dec + b_dec (+ x @ W_skip.T)."""
    pre = F.linear(x, W_enc, b_enc)
    f = F.relu(pre) if theta is None else pre * (pre > theta)
    y = f @ W_dec + b_dec
    return (y if W_skip is None else y + x @ W_skip.T), f


def test_circuit_tracer_transcoder_matches_the_published_layout(tmp_path):
    """The file layout of circuit-tracer 0.5.0 (PyPI wheel; circuit_tracer/transcoder/single_layer_transcoder.py,
    ``SingleLayerTranscoder.to_safetensors`` writes W_enc [n, d], W_dec [n, d_out], b_enc, b_dec, optional
    ``activation_function.threshold`` and ``W_skip [d_out, d_in]``, read back by ``load_relu_transcoder``
    without a transpose). The loader before this fix read W_dec as [d_out, n] and failed on these files."""
    g = torch.Generator().manual_seed(2)
    d_out = D + 8
    t = {"W_enc": torch.randn(N, D, generator=g), "W_dec": torch.randn(N, d_out, generator=g),
         "b_enc": torch.randn(N, generator=g), "b_dec": torch.randn(d_out, generator=g)}
    x = torch.randn(6, D, generator=g)
    save_tensors(tmp_path / "relu.safetensors", t)
    tc = load_circuit_tracer_transcoder(tmp_path / "relu.safetensors", "layers.0.mlp.in", "layers.0.mlp.out")
    y, f = _ct_forward(x, t["W_enc"], t["b_enc"], t["W_dec"], t["b_dec"])
    with torch.no_grad():
        got_y, got_f = tc(x)
    torch.testing.assert_close(got_f, f, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_y, y, rtol=1e-5, atol=1e-4)
    assert (tc.input_site, tc.output_site, tc.d_out, tc.activation) == ("layers.0.mlp.in", "layers.0.mlp.out",
                                                                         d_out, "relu")
    # JumpReLU (threshold nested under activation_function) and a skip connection
    jt = {**t, "activation_function.threshold": torch.rand(N, generator=g),
          "W_skip": 0.1 * torch.randn(d_out, D, generator=g)}
    save_tensors(tmp_path / "jump_skip.safetensors", jt)
    tc = load_circuit_tracer_transcoder(tmp_path / "jump_skip.safetensors")
    y, f = _ct_forward(x, jt["W_enc"], jt["b_enc"], jt["W_dec"], jt["b_dec"], jt["activation_function.threshold"],
                       jt["W_skip"])
    with torch.no_grad():
        got_y, got_f = tc(x)
    assert tc.activation == "jumprelu" and tc.W_skip is not None
    torch.testing.assert_close(got_f, f, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_y, y, rtol=1e-5, atol=1e-4)
    # a latent edit's effect does not include the skip (it cancels in decode(f') - decode(f))
    torch.testing.assert_close(tc.decode(got_f) - tc.decode(torch.zeros_like(got_f)), got_f @ jt["W_dec"])
    # the dictionary's own save/load keeps the skip
    again = SparseDictionary.load(tc.save(tmp_path / "saved"))
    with torch.no_grad():
        torch.testing.assert_close(again(x)[0], got_y)


def test_circuit_tracer_first_release_layout_and_ambiguity(tmp_path):
    """Files of the first release (safety-research/circuit-tracer@33777f6130e961a8fba132584372da5a985bfed0,
    circuit_tracer/transcoder/single_layer_transcoder.py: ``load_relu_transcoder`` transposes the stored W_enc
    [n, d] and W_dec [d_out, n] into the module's [d, n] and [n, d_out]) still load; a square W_dec (n == d_out)
    cannot be told apart and asks for ``layout``."""
    g = torch.Generator().manual_seed(3)
    d_out = D + 8
    t = {"W_enc": torch.randn(N, D, generator=g), "W_dec": torch.randn(d_out, N, generator=g),
         "b_enc": torch.randn(N, generator=g), "b_dec": torch.randn(d_out, generator=g),
         "W_skip": torch.zeros(d_out, D)}
    save_tensors(tmp_path / "old.safetensors", t)
    tc = load_circuit_tracer_transcoder(tmp_path / "old.safetensors")
    x = torch.randn(4, D, generator=g)
    y, f = _ct_forward(x, t["W_enc"], t["b_enc"], t["W_dec"].T, t["b_dec"])
    with torch.no_grad():
        got_y, got_f = tc(x)
    assert tc.W_skip is None  # an all-zero skip is no skip
    torch.testing.assert_close(got_y, y, rtol=1e-5, atol=1e-4)
    sq = {"W_enc": torch.randn(D, D, generator=g), "W_dec": torch.randn(D, D, generator=g),
          "b_enc": torch.randn(D, generator=g), "b_dec": torch.randn(D, generator=g)}
    save_tensors(tmp_path / "square.safetensors", sq)
    with pytest.raises(UserError, match="ambiguous"):
        load_circuit_tracer_transcoder(tmp_path / "square.safetensors")
    rows = load_circuit_tracer_transcoder(tmp_path / "square.safetensors", layout="rows")
    cols = load_circuit_tracer_transcoder(tmp_path / "square.safetensors", layout="columns")
    torch.testing.assert_close(rows.W_dec.detach(), sq["W_dec"])
    torch.testing.assert_close(cols.W_dec.detach(), sq["W_dec"].T)
    with pytest.raises(UserError, match="allowed"):
        load_circuit_tracer_transcoder(tmp_path / "square.safetensors", layout="transposed")
    bad = {**t, "W_dec": torch.randn(N + 1, d_out, generator=g)}
    save_tensors(tmp_path / "bad.safetensors", bad)
    with pytest.raises(UserError, match="W_dec has shape"):
        load_circuit_tracer_transcoder(tmp_path / "bad.safetensors")
    neg = {**t, "W_dec": t["W_dec"].T.contiguous(), "activation_function.threshold": -torch.ones(N)}
    save_tensors(tmp_path / "neg.safetensors", neg)
    with pytest.raises(UserError, match="negative JumpReLU"):
        load_circuit_tracer_transcoder(tmp_path / "neg.safetensors")


def test_gemmascope2_matches_the_published_forward(tmp_path):
    """Gemma Scope 2 (the suite for Gemma 3, 270M included): ``params.safetensors`` with w_enc [d_in, n],
    w_dec [n, d_out], b_enc, b_dec, threshold and, for transcoders, affine_skip_connection [d_in, d_out], as
    read by decoderesearch/SAELens@e05f04416f43c62ef2cb42414e3f846312710553
    sae_lens/loading/pretrained_sae_loaders.py (``gemma_3_sae_huggingface_loader``) and by circuit-tracer
    0.5.0's ``load_gemma_scope_2_transcoder``. The oracle is Gemma Scope's JumpReLUSAE forward: pre = x·w_enc +
    b_enc, f = [pre > θ]·ReLU(pre), y = f·w_dec + b_dec + x·affine_skip_connection."""
    g = torch.Generator().manual_seed(4)
    d_out = D + 4
    folder = tmp_path / "transcoder_all" / "layer_3_width_16k_l0_small"
    folder.mkdir(parents=True)
    t = {"w_enc": torch.randn(D, N, generator=g), "w_dec": torch.randn(N, d_out, generator=g),
         "b_enc": torch.randn(N, generator=g), "b_dec": torch.randn(d_out, generator=g),
         "threshold": torch.rand(N, generator=g), "affine_skip_connection": 0.1 * torch.randn(D, d_out, generator=g)}
    save_tensors(folder / "params.safetensors", t)
    (folder / "config.json").write_text(json.dumps({"architecture": "jump_relu", "hf_hook_point_in":
                                                    "model.layers.3.pre_feedforward_layernorm.output",
                                                    "hf_hook_point_out": "model.layers.3.post_feedforward_layernorm.output"}))
    tc = load_gemmascope2(folder, site="layers.3.mlp.in", output_site="layers.3.mlp.out")
    x = torch.randn(5, D, generator=g)
    pre = x @ t["w_enc"] + t["b_enc"]
    f = (pre > t["threshold"]) * F.relu(pre)
    y = f @ t["w_dec"] + t["b_dec"] + x @ t["affine_skip_connection"]
    with torch.no_grad():
        got_y, got_f = tc(x)
    torch.testing.assert_close(got_f, f, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_y, y, rtol=1e-5, atol=1e-4)
    assert tc.hf_hook_in.endswith("pre_feedforward_layernorm.output") and tc.d_out == d_out
    # an SAE (no skip) from the file path itself
    sae_t = {k: v for k, v in t.items() if k != "affine_skip_connection"}
    sae_t["w_dec"] = torch.randn(N, D, generator=g)
    sae_t["b_dec"] = torch.randn(D, generator=g)
    save_tensors(tmp_path / "params.safetensors", sae_t)
    sae = load_gemmascope2(tmp_path / "params.safetensors", site="layers.3.resid_post")
    assert sae.W_skip is None and sae.output_site == "layers.3.resid_post"
    with pytest.raises(UserError, match="lacks"):
        save_tensors(tmp_path / "v1" / "params.safetensors", {"W_enc": t["w_enc"]})
        load_gemmascope2(tmp_path / "v1")
    with pytest.raises(UserError, match="not found"):
        load_gemmascope2(tmp_path / "missing")
