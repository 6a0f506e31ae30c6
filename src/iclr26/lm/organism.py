"""Model-organism kit: tiny random Hugging Face LMs and a word-level tokenizer.

Shared by the interpretability reproductions (ICLR 2026; see docs/interp-core). The models are the real HF
classes (``LlamaForCausalLM``, ``Qwen3ForCausalLM``, ``GPT2LMHeadModel``, ``BertModel``, ...) built from a
small config with a seeded initialisation, so site adapters, hooks and ``save_pretrained`` round trips are
exercised on exactly the code paths of the paper-scale models. ``WordTokenizer`` wraps a ``tokenizers``
WordLevel model (whitespace pre-tokenizer) as a ``PreTrainedTokenizerFast`` that reloads via ``AutoTokenizer``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import nn

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "gpt2", "gpt_neox", "bert")
SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


def tiny_config(
    family: str = "llama",
    *,
    d: int = 32,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | None = None,
    ff: int | None = None,
    vocab: int = 64,
    ctx: int = 64,
    **overrides,
):
    """A small ``PretrainedConfig`` of the given family (eager-free defaults; fp32)."""
    import transformers as tf

    if family not in FAMILIES:
        raise UserError(f"unknown tiny_lm family {family!r}; choose from {', '.join(FAMILIES)}")
    ff = ff or 4 * d
    kv = kv_heads or max(1, heads // 2)
    hd = d // heads
    common = dict(vocab_size=vocab, pad_token_id=0, bos_token_id=2, eos_token_id=3)
    if family in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3"):
        cls = {
            "llama": tf.LlamaConfig,
            "mistral": tf.MistralConfig,
            "qwen2": tf.Qwen2Config,
            "qwen3": tf.Qwen3Config,
            "gemma": tf.GemmaConfig,
            "gemma2": tf.Gemma2Config,
            "gemma3": tf.Gemma3TextConfig,
        }[family]
        kw = dict(
            hidden_size=d,
            intermediate_size=ff,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            max_position_embeddings=ctx,
            **common,
        )
        if family in ("qwen3", "gemma", "gemma2", "gemma3", "mistral"):
            kw["head_dim"] = hd
        if family in ("gemma2", "gemma3"):
            kw["sliding_window"] = max(4, ctx // 2)
            kw["query_pre_attn_scalar"] = hd
        cfg = cls(**{**kw, **overrides})
    elif family == "gpt2":
        cfg = tf.GPT2Config(
            n_embd=d, n_layer=layers, n_head=heads, n_inner=ff, n_positions=ctx, **{**common, **overrides}
        )
    elif family == "gpt_neox":
        cfg = tf.GPTNeoXConfig(
            hidden_size=d,
            intermediate_size=ff,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            max_position_embeddings=ctx,
            **{**common, **overrides},
        )
    else:  # bert
        cfg = tf.BertConfig(
            hidden_size=d,
            intermediate_size=ff,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            max_position_embeddings=ctx,
            vocab_size=vocab,
            pad_token_id=0,
            **overrides,
        )
    return cfg


def tiny_lm(
    family: str = "llama",
    *,
    d: int = 32,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | None = None,
    ff: int | None = None,
    vocab: int = 64,
    ctx: int = 64,
    seed: int = 0,
    attn_implementation: str | None = None,
    **overrides,
) -> nn.Module:
    """A tiny random HF model (``*ForCausalLM``; ``BertModel`` for ``family="bert"``), in eval mode.

    The initialisation is seeded with ``seed`` without touching the global RNG state.
    """
    import transformers as tf

    cfg = tiny_config(
        family, d=d, layers=layers, heads=heads, kv_heads=kv_heads, ff=ff, vocab=vocab, ctx=ctx, **overrides
    )
    kw = {"attn_implementation": attn_implementation} if attn_implementation else {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if family == "bert":
            model = (
                tf.BertModel(cfg, add_pooling_layer=False)
                if not kw
                else tf.BertModel._from_config(cfg, add_pooling_layer=False, **kw)
            )
        else:
            model = tf.AutoModelForCausalLM.from_config(cfg, **kw)
    return model.float().eval()


def WordTokenizer(vocab: Sequence[str], *, add_bos: bool = False, model_max_length: int = 512):  # noqa: N802
    """A whitespace word-level tokenizer over ``vocab`` as a ``PreTrainedTokenizerFast``.

    Ids 0-3 are ``<pad> <unk> <bos> <eos>`` (added in front unless present). BOS is added only when
    ``add_bos=True`` (through a template post-processor, so it survives ``save_pretrained``).
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = list(SPECIALS) + [w for w in dict.fromkeys(vocab) if w not in SPECIALS]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", 2)]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
        model_max_length=model_max_length,
    )
