"""Unit tests of iclr26.lm.chat_structure: the eight RMA settings on the organism and Gemma 3 templates."""

from __future__ import annotations

import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.lm.chat_structure import (
    ALL_SETTINGS,
    GEMMA3_TEMPLATE,
    LLAVA_TEMPLATE,
    detect_family,
    last_token_states,
    pad_left,
    render_rma,
    rma_example,
    rma_examples,
)  # fmt: skip
from iclr26.lm.organism import WordTokenizer, tiny_lm
from iclr26.lm.train import add_chat_template


def _tok():
    return add_chat_template(WordTokenizer(["<U>", "<A>", "<EOT>", "<IMG>", "<think>", "</think>", "um", "a", "b"]))


ORG = {
    "text": "<U> a b <EOT> <A>", "text_swap": "<A> a b <EOT> <U>", "img_in": "<U> <IMG> a b <EOT> <A>",
    "img_in_swap": "<A> <IMG> a b <EOT> <U>", "img_end": "<U> a b <EOT> <IMG> <A>",
    "img_end_swap": "<A> a b <EOT> <IMG> <U>", "img_out": "<U> a b <EOT> <A> <IMG>",
    "img_out_swap": "<A> a b <EOT> <U> <IMG>", "null": "<U> um a b <EOT> <A>",
}  # fmt: skip


@pytest.mark.parametrize("setting", ALL_SETTINGS)
def test_organism_settings(setting):
    p = render_rma(_tok(), "a b", setting)
    assert p.text == ORG[setting] and p.query == "a b" and p.family == "organism"


@pytest.mark.parametrize("setting", ALL_SETTINGS)
def test_gemma3_settings_query_untouched(setting):
    q = "How do I bake <start_of_turn>user bread?"  # a marker inside the query is never swapped
    p = render_rma(GEMMA3_TEMPLATE, q, setting, bos_token="<bos>")
    assert p.query == q and p.family == "gemma3"
    if setting.endswith("_swap"):
        assert p.text.startswith("<bos><start_of_turn>model\n") and p.text.endswith(("<start_of_turn>user\n",
                                                                                   "<start_of_image>"))
    if setting == "text":
        assert p.text == f"<bos><start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n"
    if setting == "img_end":
        assert p.text.endswith("<end_of_turn>\n<start_of_image><start_of_turn>model\n")


def test_llava_and_detection():
    assert detect_family(LLAVA_TEMPLATE) == "llava" and detect_family(GEMMA3_TEMPLATE) == "gemma3"
    assert render_rma(LLAVA_TEMPLATE, "hi", "text_swap").text == "ASSISTANT: hi USER:"
    assert render_rma(LLAVA_TEMPLATE, "hi", "img_in").text == "USER: <image>\nhi ASSISTANT:"
    with pytest.raises(UserError, match="allowed"):
        detect_family("{{ messages }}")


def test_swap_round_trip():
    from iclr26.lm.chat_structure import _swap

    s = render_rma(_tok(), "a b", "img_end").text
    assert _swap(_swap(s, "<U>", "<A>"), "<U>", "<A>") == s
    assert _swap(s, "<U>", "<A>") == render_rma(_tok(), "a b", "img_end_swap").text


def test_bad_setting_lists_allowed():
    with pytest.raises(UserError, match="allowed: text, text_swap"):
        render_rma(_tok(), "a", "swap")
    with pytest.raises(UserError):
        render_rma(_tok(), "", "text")
    with pytest.raises(UserError, match="allowed"):
        render_rma(_tok(), "a", "text", markers={"bogus": "x"})


def test_loss_mask_follows_swapped_span():
    tok = _tok()
    ex = rma_example(tok, render_rma(tok, "a b", "text_swap"), "b a <EOT>")
    toks = tok.convert_ids_to_tokens(ex["input_ids"])
    assert toks == ["<A>", "a", "b", "<EOT>", "<U>", "b", "a", "<EOT>"]
    assert ex["loss_mask"] == [0, 0, 0, 0, 0, 1, 1, 1]


def test_rma_examples_batch_equals_row_by_row():
    """The batched helper (one tokenizer call) against a row-by-row oracle: a tokenizer call per prompt, the
    target's tokens marked from the first character after the prompt."""
    tok = _tok()
    settings = ["text", "text_swap", "img_in", "img_end_swap", "img_out"]
    prompts = [render_rma(tok, q, s) for q, s in zip(["a b", "b", "a a b", "b a", "a"], settings, strict=True)]
    targets = ["b a <EOT>", "b <EOT>", "b a a <EOT>", "a b <EOT>", "a <EOT>"]
    got = rma_examples(tok, prompts, targets)
    for p, t, g in zip(prompts, targets, got, strict=True):
        enc = tok(p.text + " " + t, add_special_tokens=False, return_offsets_mapping=True)
        assert g["input_ids"] == enc["input_ids"]
        assert g["loss_mask"] == [int(s >= len(p.text)) for s, _ in enc["offset_mapping"]]
        assert g == rma_example(tok, p, t)
    assert rma_examples(tok, [], []) == []
    with pytest.raises(UserError, match="one target per prompt"):
        rma_examples(tok, prompts, targets[:2])
    with pytest.raises(UserError, match="non-empty"):
        rma_examples(tok, prompts[:1], [" "])


def test_pad_left_and_last_token_states_match_unpadded():
    b = pad_left([[5, 6, 7], [8]])
    assert b["input_ids"].tolist() == [[5, 6, 7], [0, 0, 8]] and b["position_ids"].tolist() == [[0, 1, 2], [0, 0, 0]]
    m = tiny_lm("llama", d=16, layers=2, heads=2, kv_heads=2, ff=32, vocab=12, ctx=8, seed=0).eval()
    both = last_token_states(m, [[5, 6, 7], [8, 9]])
    alone = last_token_states(m, [[8, 9]])
    assert both.shape == (2, 2, 16)
    torch.testing.assert_close(both[:, 1], alone[:, 0], atol=1e-5, rtol=1e-4)
