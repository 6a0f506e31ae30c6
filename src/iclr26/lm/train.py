"""Training small "model organisms": a deterministic causal-LM loop, a chat template for
``WordTokenizer`` vocabularies, and a cache of trained organisms.

- :func:`train_lm` — AdamW next-token training of any HF causal LM from a seeded batch sampler. Padding
  never enters the loss; an optional ``loss_mask`` restricts it further (for example to the assistant span of a
  dialogue). Under ``torchrun`` every rank draws the same global batch and trains on its contiguous slice, with the
  loss normalised by the *global* token count and the gradients summed, so N processes follow the single-process
  trajectory (up to float summation order), as :class:`iclr26.interp.train.SAETrainer` does.
- :func:`add_chat_template` — a Jinja chat template over whitespace word tokens (``<U> … <EOT> <A> …``) with an
  image placeholder and an optional think span, so that organisms go through the same
  ``tokenizer.apply_chat_template`` call as real chat models.
- :func:`cached_organism` — build-or-load a trained (model, tokenizer) pair under
  ``$ICLR26_ORGANISMS`` (default ``<cache_home>/organisms``), keyed by a hash of the corpus/config description, the
  package version and the source of the builder; written atomically with safetensors.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr26.core.distributed import all_reduce_grads_, dist_info
from iclr26.core.errors import UserError
from iclr26.core.progress import progress

log = logging.getLogger(__name__)

ENV_ORGANISMS = "ICLR26_ORGANISMS"

Sampler = Callable[[np.random.Generator, int], Any]


@dataclass
class TrainLog:
    """What :func:`train_lm` returns: the loss per step (global mean over counted tokens) and timing."""

    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    tokens: int = 0
    stopped_at: int | None = None  # the step after which ``stop_when`` said stop (None: ran every step)

    @property
    def final_loss(self) -> float:
        tail = self.losses[-max(1, len(self.losses) // 20) :]
        return float(np.mean(tail)) if tail else float("nan")


def _as_batch(out: Any, pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Normalise a sampler's output to (input_ids [B,T], attention_mask [B,T], loss_mask [B,T] | None)."""
    if isinstance(out, torch.Tensor):
        out = {"input_ids": out}
    elif isinstance(out, (list, tuple)) and out and isinstance(out[0], (list, tuple, np.ndarray, torch.Tensor)):
        rows = [torch.as_tensor(r, dtype=torch.long).reshape(-1) for r in out]
        T = max(len(r) for r in rows)
        ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
        att = torch.zeros((len(rows), T), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            att[i, : len(r)] = 1
        out = {"input_ids": ids, "attention_mask": att}
    if not isinstance(out, Mapping) or "input_ids" not in out:
        raise UserError(
            "train_lm sampler must return a LongTensor [B, T], a list of token-id lists, or a mapping with "
            f"'input_ids' (optional 'attention_mask', 'loss_mask'); got {type(out).__name__}"
        )
    ids = torch.as_tensor(out["input_ids"], dtype=torch.long)
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise UserError(f"train_lm: input_ids must be [batch, tokens>=2], got shape {tuple(ids.shape)}")
    att = out.get("attention_mask")
    att = (ids != pad_id).long() if att is None else torch.as_tensor(att, dtype=torch.long)
    lm = out.get("loss_mask")
    if lm is not None:
        lm = torch.as_tensor(lm, dtype=torch.bool)
        if lm.shape != ids.shape:
            raise UserError(f"train_lm: loss_mask shape {tuple(lm.shape)} != input_ids shape {tuple(ids.shape)}")
    if att.shape != ids.shape:
        raise UserError(f"train_lm: attention_mask shape {tuple(att.shape)} != input_ids shape {tuple(ids.shape)}")
    return ids, att, lm


def train_lm(
    model: nn.Module,
    sampler: Sampler,
    steps: int,
    batch: int,
    lr: float,
    seed: int = 0,
    *,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.98),
    warmup: int = 0,
    schedule: str = "constant",
    grad_clip: float | None = 1.0,
    params: list[nn.Parameter] | None = None,
    pad_id: int | None = None,
    desc: str = "train_lm",
    log_every: int = 0,
    stop_when: Callable[[int], bool] | None = None,
    check_every: int = 0,
) -> TrainLog:
    """Train ``model`` (any HF causal LM returning ``.logits``) for ``steps`` AdamW steps; returns a :class:`TrainLog`.

    ``sampler(rng, batch)`` draws one global batch from a ``numpy.random.Generator`` seeded with ``seed``; it returns
    a LongTensor ``[B, T]``, a list of token-id lists (right-padded here) or a mapping with ``input_ids`` and optional
    ``attention_mask`` / ``loss_mask``. ``loss_mask[b, t]`` marks token t as a *target* (predicted from the tokens
    before it); padded positions are never targets. ``params`` restricts training to a subset (others untouched);
    ``schedule`` is ``"constant"`` or ``"cosine"`` (after ``warmup`` linear steps). The model is left in eval mode.
    ``stop_when(steps_done) -> bool`` is a pre-set stopping rule, asked every ``check_every`` steps with the model
    in eval mode and gradients off (for example "held-out refusal reached 95 %"); training ends at the first yes
    and ``TrainLog.stopped_at`` records the step. The same seed, sampler and model initialisation give bit-identical
    weights on one machine.
    """
    if steps < 0 or batch < 1:
        raise UserError(f"train_lm: steps must be >= 0 and batch >= 1, got steps={steps}, batch={batch}")
    if not (lr > 0 and math.isfinite(lr)):
        raise UserError(f"train_lm: lr must be a positive finite number, got {lr}")
    if schedule not in ("constant", "cosine"):
        raise UserError(f"train_lm: schedule={schedule!r}; allowed: constant, cosine")
    if stop_when is not None and check_every < 1:
        raise UserError(f"train_lm: stop_when needs check_every >= 1 (steps between checks), got {check_every}")
    if pad_id is None:
        pad_id = getattr(getattr(model, "config", None), "pad_token_id", None)
        pad_id = 0 if pad_id is None else int(pad_id)
    rank, world = dist_info()
    if batch % world:
        raise UserError(f"train_lm: global batch {batch} is not divisible by world size {world}")
    params = [p for p in (params if params is not None else model.parameters()) if p.requires_grad]
    if not params:
        raise UserError("train_lm: no trainable parameters (all have requires_grad=False)")
    device = params[0].device
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=betas, foreach=True)

    def lr_at(step: int) -> float:
        if warmup and step < warmup:
            return lr * (step + 1) / warmup
        if schedule == "cosine":
            t = (step - warmup) / max(1, steps - warmup)
            return lr * 0.5 * (1 + math.cos(math.pi * t))
        return lr

    rng = np.random.default_rng(seed)
    out = TrainLog()
    t0 = time.perf_counter()
    model.train()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)  # dropout, if the config has any
            for step in progress(range(steps), desc=desc, total=steps):
                ids, att, lmask = _as_batch(sampler(rng, batch), pad_id)
                if ids.shape[0] != batch:
                    raise UserError(f"train_lm: sampler returned {ids.shape[0]} rows, expected batch={batch}")
                target = att[:, 1:].bool()
                if lmask is not None:
                    target &= lmask[:, 1:]
                n_global = int(target.sum())
                lo, hi = rank * batch // world, (rank + 1) * batch // world
                ids_l, att_l, tgt_l = ids[lo:hi].to(device), att[lo:hi].to(device), target[lo:hi].to(device)
                for g in opt.param_groups:
                    g["lr"] = lr_at(step)
                logits = model(input_ids=ids_l, attention_mask=att_l).logits[:, :-1].float()
                nll = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), ids_l[:, 1:].reshape(-1), reduction="none"
                ).view_as(tgt_l)
                loss = (nll * tgt_l).sum() / max(1, n_global)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if world > 1:
                    all_reduce_grads_(params)
                    with torch.no_grad():
                        from iclr26.core.distributed import all_reduce_

                        loss = all_reduce_(loss.detach().clone(), "sum")
                if grad_clip:
                    torch.nn.utils.clip_grad_norm_(params, grad_clip)
                opt.step()
                lv = float(loss.detach())
                if not math.isfinite(lv):
                    raise FloatingPointError(f"train_lm: loss became {lv} at step {step} (lower lr={lr}?)")
                out.losses.append(lv)
                out.tokens += n_global
                if log_every and step % log_every == 0:
                    log.info("%s step %d loss %.4f", desc, step, lv)
                if stop_when is not None and (step + 1) % check_every == 0:
                    model.eval()
                    with torch.no_grad():
                        done = bool(stop_when(step + 1))
                    model.train()
                    if done:
                        out.stopped_at = step + 1
                        break
    finally:
        model.eval()
    out.seconds = time.perf_counter() - t0
    return out


# ---------------------------------------------------------------------------------------------- chat template
#: role markers of the organism chat format; ``render_rma`` and friends read them from here
ORGANISM_MARKERS = {
    "user": "<U>",
    "assistant": "<A>",
    "end": "<EOT>",
    "image": "<IMG>",
    "think_open": "<think>",
    "think_close": "</think>",
}

_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'user' -%}{{ U }}{%- elif m['role'] == 'assistant' -%}{{ A }}"
    "{%- else -%}{{ raise_exception('organism chat template: role must be user or assistant, got ' + m['role']) }}"
    "{%- endif -%}"
    "{%- if m['content'] is string -%}{{ ' ' + m['content'] }}"
    "{%- else -%}{%- for c in m['content'] -%}"
    "{%- if c['type'] == 'image' -%}{{ ' ' + IMG }}{%- else -%}{{ ' ' + c['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ ' ' + EOT + ' ' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ A }}"
    "{%- if enable_thinking is defined and enable_thinking == false -%}{{ ' ' + TO + ' ' + TC }}{%- endif -%}"
    "{%- endif -%}"
)


def organism_chat_template(markers: Mapping[str, str] | None = None) -> str:
    """The Jinja chat template of the organism format with the given marker words (see :data:`ORGANISM_MARKERS`).

    ``[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "q"}]}]`` renders as
    ``<U> <IMG> q <EOT> `` and the generation prompt adds ``<A>``; ``enable_thinking=False`` appends an empty think
    span ``<think> </think>`` after it, as Qwen3's template does.
    """
    mk = {**ORGANISM_MARKERS, **(markers or {})}
    unknown = set(mk) - set(ORGANISM_MARKERS)
    if unknown:
        raise UserError(f"unknown chat marker(s) {sorted(unknown)}; allowed: {', '.join(ORGANISM_MARKERS)}")
    subs = {"U": mk["user"], "A": mk["assistant"], "EOT": mk["end"], "IMG": mk["image"],
            "TO": mk["think_open"], "TC": mk["think_close"]}  # fmt: skip
    head = "".join("{%- set " + k + " = " + json.dumps(v) + " -%}" for k, v in subs.items())
    return head + _TEMPLATE


def add_chat_template(tokenizer, markers: Mapping[str, str] | None = None):
    """Set the organism chat template on ``tokenizer`` (in place, returned); every marker must be in its vocabulary."""
    unknown = set(markers or {}) - set(ORGANISM_MARKERS)
    if unknown:
        raise UserError(f"unknown chat marker(s) {sorted(unknown)}; allowed: {', '.join(ORGANISM_MARKERS)}")
    mk = {**ORGANISM_MARKERS, **(markers or {})}
    vocab = tokenizer.get_vocab()
    missing = [v for v in mk.values() if v not in vocab]
    if missing:
        raise UserError(f"chat markers {missing} are not in the tokenizer vocabulary; add them to WordTokenizer(vocab)")
    tokenizer.chat_template = organism_chat_template(markers)
    return tokenizer


# ---------------------------------------------------------------------------------------------- cache
def organisms_home() -> Path:
    """``$ICLR26_ORGANISMS`` if set, else ``<cache_home()>/organisms``."""
    from iclr26.core.paths import cache_home

    env = os.environ.get(ENV_ORGANISMS)
    return Path(env).expanduser() if env else cache_home() / "organisms"


def organism_key(name: str, spec: Mapping[str, Any], build: Callable | None = None) -> str:
    """``<name>-<16 hex>``: hash of ``spec`` (JSON, sorted keys), the package and library versions and ``build``'s
    source code (a model trained under another torch / transformers version is a different model)."""
    import iclr26
    from iclr26.core.paths import numerics_fingerprint

    h = hashlib.sha256()
    h.update(json.dumps(spec, sort_keys=True, default=str).encode())
    h.update(iclr26.__version__.encode())
    h.update(numerics_fingerprint().encode())
    if build is not None:
        # the source of ``build`` and of the whole module defining it: a lambda's source is only its own line, so
        # two call sites of one recipe got two keys (P7 trained its organism twice) and an edit to the helpers it
        # calls (samplers, corpora) did not invalidate the cache
        mod = inspect.getmodule(build)
        for obj in (build, mod):
            try:
                h.update(inspect.getsource(obj).encode())
            except (OSError, TypeError):
                h.update(getattr(obj, "__qualname__", repr(obj)).encode())
    for mod in (train_lm,):  # the training loop itself is part of the recipe
        h.update(inspect.getsource(mod).encode())
    return f"{name}-{h.hexdigest()[:16]}"


def cached_organism(
    name: str,
    spec: Mapping[str, Any],
    build: Callable[[], tuple[nn.Module, Any]],
    *,
    use_cache: bool = True,
    source: Callable | None = None,
) -> tuple[nn.Module, Any, dict[str, Any]]:
    """Load the organism ``name`` trained from ``spec``, or ``build()`` it and store it; returns (model, tok, info).

    ``build()`` returns ``(model, tokenizer)`` after training; both are saved with ``save_pretrained`` (safetensors)
    into ``organisms_home()/<organism_key>``, written atomically. ``info`` has ``path``, ``cached`` (loaded from
    disk) and ``build_seconds``. ``use_cache=False`` always rebuilds and never writes. ``source`` (default
    ``build``): the function whose source code, and its module's, enter the key.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from iclr26.core.io import atomic_dir

    key = organism_key(name, spec, source or build)
    folder = organisms_home() / key
    if use_cache and (folder / "config.json").is_file() and (folder / "organism.json").is_file():
        model = AutoModelForCausalLM.from_pretrained(folder).float().eval()
        tok = AutoTokenizer.from_pretrained(folder)
        meta = json.loads((folder / "organism.json").read_text())
        return model, tok, {"path": str(folder), "cached": True, "build_seconds": meta.get("build_seconds", 0.0)}
    t0 = time.perf_counter()
    model, tok = build()
    secs = time.perf_counter() - t0
    info = {"path": str(folder), "cached": False, "build_seconds": secs}
    if use_cache and dist_info()[0] == 0:
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            with atomic_dir(folder) as tmp:
                model.save_pretrained(tmp, safe_serialization=True)
                tok.save_pretrained(tmp)
                (Path(tmp) / "organism.json").write_text(
                    json.dumps({"name": name, "spec": spec, "build_seconds": secs}, indent=1, default=str)
                )
        except OSError as e:  # a read-only cache must not fail the run
            log.warning("could not cache organism %s in %s: %s", name, folder, e)
            info["path"] = ""
    return model.eval(), tok, info


# ---------------------------------------------------------------------------------------------- the recipe
ORGANISM_FIELDS = ("d", "layers", "heads", "ff", "steps", "lr", "batch", "weight_decay")


def organism_config(*, d: int = 64, layers: int = 2, heads: int = 4, ff: int = 256, steps: int = 1500,
                    lr: float = 3e-3, batch: int = 64, weight_decay: float = 0.01,
                    limits: Mapping[str, Mapping[str, Any]] | None = None) -> type:
    """The organism's config block: a dataclass base with one documented field per recipe setting.

    Every organism-based experiment's ``Config`` derives from it with its own defaults
    (``class Config(organism_config(d=96, steps=2000)):``), so the fields are declared, documented and
    range-checked in one place and :func:`train_organism` reads them by name. ``limits`` tightens a field's
    range or doc for one experiment, e.g. ``limits={"layers": {"low": 2, "doc": "... needs >= 2"}}``.
    """
    from iclr26.core.config import param

    v = {"d": d, "layers": layers, "heads": heads, "ff": ff, "steps": steps, "lr": lr, "batch": batch,
         "weight_decay": weight_decay}  # a class body cannot read enclosing names it also assigns

    spec = {
        "d": (int, "organism width (hidden size); a multiple of heads", {"low": 8, "high": 8192}),
        "layers": (int, "organism transformer layers", {"low": 1, "high": 64}),
        "heads": (int, "organism attention heads", {"low": 1, "high": 64}),
        "ff": (int, "organism MLP width", {"low": 4, "high": 65536}),
        "steps": (int, "organism training steps (AdamW, constant learning rate)", {"low": 1, "high": 1_000_000}),
        # a tiny LM diverges above ~1e-2 (the boundary fuzz runs at the highs)
        "lr": (float, "organism learning rate", {"low": 0.0, "low_open": True, "high": 0.01}),
        "batch": (int, "organism training batch (documents per step)", {"low": 1, "high": 65536}),
        "weight_decay": (float, "organism AdamW weight decay", {"low": 0.0, "high": 0.1}),
    }
    bad = set(limits or {}) - set(spec)
    if bad:
        raise UserError(f"organism_config: unknown field(s) {sorted(bad)} in limits; allowed: {', '.join(spec)}")
    ns: dict[str, Any] = {"__annotations__": {}}
    for k, (typ, doc, rng) in spec.items():
        extra = dict((limits or {}).get(k, {}))
        doc = extra.pop("doc", doc)
        ns["__annotations__"][k] = typ
        ns[k] = param(typ(v[k]), doc, **{**rng, **extra})
    OrganismConfig = dataclass(type("OrganismConfig", (), ns))
    return OrganismConfig


@dataclass(frozen=True)
class Stage:
    """One training stage of an organism recipe (see :func:`train_organism`).

    ``sampler(tok)`` returns the batch sampler ``(rng, batch) -> batch`` that :func:`train_lm` takes. ``lr``,
    ``batch`` and ``weight_decay`` default to the recipe's fields, ``seed`` to the organism seed. Multi-stage
    recipes (base training then alignment, pretraining then a second corpus) are a list of stages on one model.
    """

    name: str
    sampler: Callable[[Any], Sampler]
    steps: int
    lr: float | None = None
    batch: int | None = None
    seed: int | None = None
    weight_decay: float | None = None
    warmup: int = 0
    schedule: str = "constant"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "steps": self.steps, "lr": self.lr, "batch": self.batch, "seed": self.seed,
                "weight_decay": self.weight_decay, "warmup": self.warmup, "schedule": self.schedule}


def document_stage(document: Callable[[np.random.Generator, Any], Any], steps: int, name: str = "train",
                   **kw: Any) -> Stage:
    """A :class:`Stage` whose batches are ``batch`` independent ``document(rng, tok) -> token ids`` draws."""

    def sampler_for(tok):
        def sampler(rng, batch):
            return [document(rng, tok) for _ in range(batch)]

        return sampler

    return Stage(name, sampler_for, steps, **kw)


def train_organism(
    name: str,
    cfg: Any,
    vocab: list[str],
    document: Callable[[np.random.Generator, Any], Any] | None = None,
    *,
    seed: int,
    data: Any,
    ctx: int = 64,
    kv_heads: int | None = None,
    family: str = "llama",
    stages: list[Stage] | None = None,
    init_seed: int | None = None,
    tokenizer: Callable[[Any], Any] | None = None,
    attn_implementation: str | None = None,
    source: Callable | None = None,
    use_cache: bool = True,
    **overrides: Any,
) -> tuple[nn.Module, Any, dict[str, Any]]:
    """THE organism recipe: a seeded tiny HF LM over a word vocabulary, trained by :func:`train_lm` and cached by
    :func:`cached_organism`. Every organism of the LLM-internals reproductions is built here.

    The recipe fields (:data:`ORGANISM_FIELDS`: ``d layers heads ff steps lr batch weight_decay``) are read from
    ``cfg`` (a :func:`organism_config` subclass, or any object with those attributes); a keyword in
    ``overrides`` replaces one (``d=width, ff=4 * width`` for a width sweep). Training is either one stage of
    ``cfg.steps`` steps over documents drawn by ``document(rng, tokenizer) -> token ids``, or the given
    ``stages`` in order (:class:`Stage`). ``tokenizer`` post-processes the :class:`WordTokenizer` (for example
    :func:`add_chat_template`); ``init_seed`` (default ``seed``) seeds the initialisation. ``data`` describes the
    corpus generator (its settings and seed) and enters the cache key with the recipe, the stages, ``seed``,
    ``vocab``, ``ctx`` and the source of the sampler's module (``source``, default ``document`` or the first
    stage's sampler), so an edit to the generator invalidates the cache. Returns ``(model, tok, info)``.
    """
    from iclr26.lm.organism import WordTokenizer, tiny_lm

    unknown = set(overrides) - set(ORGANISM_FIELDS)
    if unknown:
        raise UserError(f"train_organism: unknown recipe field(s) {sorted(unknown)}; allowed: "
                        f"{', '.join(ORGANISM_FIELDS)}")
    recipe: dict[str, Any] = {}
    for k in ORGANISM_FIELDS:
        if k in overrides:
            recipe[k] = overrides[k]
        elif hasattr(cfg, k):
            recipe[k] = getattr(cfg, k)
        elif k == "steps" and stages is not None:
            recipe[k] = sum(s.steps for s in stages)
        else:
            raise UserError(f"train_organism: recipe field {k!r} is neither on the config nor given; the config "
                            f"needs {', '.join(ORGANISM_FIELDS)} (derive it from organism_config)")
    if recipe["d"] % recipe["heads"]:
        raise UserError(f"organism d={recipe['d']} is not a multiple of heads={recipe['heads']}")
    if (document is None) == (stages is None):
        raise UserError("train_organism: give exactly one of document= (one stage of cfg.steps) or stages=")
    if stages is None:
        stages = [document_stage(document, recipe["steps"])]
    if not stages:
        raise UserError("train_organism: stages is empty")
    init = int(seed if init_seed is None else init_seed)
    spec = {**recipe, "seed": int(seed), "init_seed": init, "vocab": list(vocab), "data": data, "ctx": ctx,
            "kv_heads": kv_heads, "family": family, "attn": attn_implementation,
            "stages": [s.describe() for s in stages]}

    def build():
        tok = WordTokenizer(vocab)
        if tokenizer is not None:
            tok = tokenizer(tok)
        model = tiny_lm(family, d=recipe["d"], layers=recipe["layers"], heads=recipe["heads"], kv_heads=kv_heads,
                        ff=recipe["ff"], vocab=len(tok), ctx=ctx, seed=init, attn_implementation=attn_implementation)
        for st in stages:
            train_lm(model, st.sampler(tok), st.steps, st.batch or recipe["batch"], st.lr or recipe["lr"],
                     int(seed if st.seed is None else st.seed),
                     weight_decay=recipe["weight_decay"] if st.weight_decay is None else st.weight_decay,
                     warmup=st.warmup, schedule=st.schedule, desc=f"{name} {st.name}")
        return model, tok

    model, tok, info = cached_organism(name, spec, build, use_cache=use_cache,
                                       source=source or document or stages[0].sampler)
    if attn_implementation and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(attn_implementation)  # from_pretrained picks its own default
    return model, tok, info
