"""Architecture adapters: one site-naming scheme over real Hugging Face modules.

Interpretability core shared by several ICLR 2026 reproductions (strategic dishonesty, culture neurons,
SAE seeds, ...). A *site* is a named activation inside a transformer, e.g. ``layers.6.resid_post``. An
adapter maps each canonical site name onto a real HF sub-module plus the hook kind (module input through a
forward pre-hook, or module output through a forward hook) and a view (reshape to heads, slice a fused
projection). Nothing is re-implemented: hooks read the tensors HF computes, so logits never drift.
Each view comes with its inverse (``Site.unview``), so a hook can also *replace* a site's activation
(steering, ablation, SAE splicing; see :mod:`iclr26.interp.hooks`); sites whose hooked tensor is not the
one the model goes on to use are marked read-only (``Site.read_only`` says why).

Canonical names (``blocks.{i}`` is accepted as an alias of ``layers.{i}``, ``attn.z`` of ``attn.head_out``):

- ``embed``: what enters layer 0 (token (+position) embeddings; Gemma's are already scaled by sqrt(d)).
- ``layers.{i}.resid_pre`` / ``resid_mid`` / ``resid_post``: residual stream before layer i, between
  attention and MLP, after layer i (BERT is post-LN: ``resid_mid`` is the attention block's LayerNorm
  output, ``resid_post`` the layer's output; GPT-NeoX with parallel residual has no ``resid_mid``).
- ``layers.{i}.attn.{q,k,v}``: projection outputs (one channel = one unit; GQA k/v have Hkv*dh channels).
- ``layers.{i}.attn.head_out`` (``attn.z``): per-head attention output before the output projection,
  shape [B, T, H, dh].
- ``layers.{i}.attn.out``: what attention adds to the residual (Gemma: after ``post_attention_layernorm``).
- ``layers.{i}.attn.pattern``: attention probabilities, shape [B, T_query, H, T_key] (query axis second so
  that position selection applies to queries); needs eager attention, which capture switches on for the
  call and restores.
- ``layers.{i}.mlp.in`` (after the pre-MLP norm), ``mlp.gate`` / ``mlp.up`` (projection outputs before
  the nonlinearity; GPT-2/NeoX/BERT have only ``up``), ``mlp.act`` (input of the down projection),
  ``mlp.out`` (what the MLP adds to the residual; Gemma: after ``post_feedforward_layernorm``).
- ``final_norm``: output of the final norm (absent for post-LN encoders), ``logits``: output of the
  output-embedding module (``model.get_output_embeddings()``), soft-capped like the model output where the
  config says so (Gemma 2).

Families are recognised structurally from the decoder-layer module (Llama, Mistral, Qwen2, Qwen3, Gemma,
Gemma 2, Gemma 3, GPT-2, GPT-NeoX, BERT/RoBERTa/MiniLM); the layer ``ModuleList`` is the one whose length
equals the text config's ``num_hidden_layers``, so wrappers (VLMs) resolve too. Unknown layer types fail
with the discovered sub-modules and a one-line recipe for :func:`register_family`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

# A component spec: (sub-module path relative to the layer ("" = the layer), hook kind, view name).
# kind: "in" = first input (positional or ``hidden_states=`` keyword), "out" = output (``[0]`` of a tuple),
# "out1" = second element of the output tuple (attention weights).
Spec = tuple[str, str, str | None]

LLAMA: dict[str, Spec] = {
    "resid_pre": ("", "in", None),
    "resid_mid": ("post_attention_layernorm", "in", None),
    "resid_post": ("", "out", None),
    "attn.q": ("self_attn.q_proj", "out", None),
    "attn.k": ("self_attn.k_proj", "out", None),
    "attn.v": ("self_attn.v_proj", "out", None),
    "attn.head_out": ("self_attn.o_proj", "in", "heads"),
    "attn.out": ("self_attn", "out", None),
    "attn.pattern": ("self_attn", "out1", "pattern"),
    "mlp.in": ("mlp", "in", None),
    "mlp.gate": ("mlp.gate_proj", "out", None),
    "mlp.up": ("mlp.up_proj", "out", None),
    "mlp.act": ("mlp.down_proj", "in", None),
    "mlp.out": ("mlp", "out", None),
}
# Gemma 2/3 sandwich norms: attention and MLP outputs are normalised again before the residual add.
GEMMA2: dict[str, Spec] = {
    **LLAMA,
    "resid_mid": ("pre_feedforward_layernorm", "in", None),
    "attn.out": ("post_attention_layernorm", "out", None),
    "mlp.out": ("post_feedforward_layernorm", "out", None),
}
GPT2: dict[str, Spec] = {
    "resid_pre": ("", "in", None),
    "resid_mid": ("ln_2", "in", None),
    "resid_post": ("", "out", None),
    "attn.q": ("attn.c_attn", "out", "fused_q"),
    "attn.k": ("attn.c_attn", "out", "fused_k"),
    "attn.v": ("attn.c_attn", "out", "fused_v"),
    "attn.head_out": ("attn.c_proj", "in", "heads"),
    "attn.out": ("attn", "out", None),
    "attn.pattern": ("attn", "out1", "pattern"),
    "mlp.in": ("mlp", "in", None),
    "mlp.up": ("mlp.c_fc", "out", None),
    "mlp.act": ("mlp.c_proj", "in", None),
    "mlp.out": ("mlp", "out", None),
}
NEOX: dict[str, Spec] = {
    "resid_pre": ("", "in", None),
    "resid_mid": ("post_attention_layernorm", "in", None),  # removed below when use_parallel_residual
    "resid_post": ("", "out", None),
    "attn.q": ("attention.query_key_value", "out", "neox_q"),
    "attn.k": ("attention.query_key_value", "out", "neox_k"),
    "attn.v": ("attention.query_key_value", "out", "neox_v"),
    "attn.head_out": ("attention.dense", "in", "heads"),
    "attn.out": ("attention", "out", None),
    "attn.pattern": ("attention", "out1", "pattern"),
    "mlp.in": ("mlp", "in", None),
    "mlp.up": ("mlp.dense_h_to_4h", "out", None),
    "mlp.act": ("mlp.dense_4h_to_h", "in", None),
    "mlp.out": ("mlp", "out", None),
}
BERT: dict[str, Spec] = {
    "resid_pre": ("", "in", None),
    "resid_mid": ("attention", "out", None),  # post-LN: LayerNorm(x + attn) is the new residual
    "resid_post": ("", "out", None),
    "attn.q": ("attention.self.query", "out", None),
    "attn.k": ("attention.self.key", "out", None),
    "attn.v": ("attention.self.value", "out", None),
    "attn.head_out": ("attention.output.dense", "in", "heads"),
    "attn.out": ("attention.output.dense", "out", None),
    "attn.pattern": ("attention.self", "out1", "pattern"),
    "mlp.in": ("intermediate", "in", None),
    "mlp.up": ("intermediate.dense", "out", None),
    "mlp.act": ("output.dense", "in", None),
    "mlp.out": ("output.dense", "out", None),
}


@dataclass
class Family:
    """A table row: how to recognise a decoder/encoder layer and where its components live."""

    name: str
    match: Callable[[nn.Module], bool]
    table: dict[str, Spec]
    final_norm: tuple[str, ...] = ("norm", "ln_f", "final_layer_norm", "final_layernorm")


def _has(mod: nn.Module, *paths: str) -> bool:
    return all(_get(mod, p) is not None for p in paths)


def _get(mod: nn.Module, path: str) -> nn.Module | None:
    if not path:
        return mod
    try:
        return mod.get_submodule(path)
    except AttributeError:
        return None


_FAMILIES: list[Family] = [
    Family("gpt2", lambda m: _has(m, "attn.c_attn", "mlp.c_fc", "ln_2"), GPT2),
    Family("gpt_neox", lambda m: _has(m, "attention.query_key_value", "mlp.dense_h_to_4h"), NEOX),
    Family("bert", lambda m: _has(m, "attention.self.query", "intermediate.dense", "output.dense"), BERT),
    Family(
        "gemma2",
        lambda m: _has(
            m, "self_attn.o_proj", "mlp.down_proj", "pre_feedforward_layernorm", "post_feedforward_layernorm"
        ),
        GEMMA2,
    ),
    Family(
        "llama",
        lambda m: _has(m, "self_attn.o_proj", "mlp.gate_proj", "mlp.down_proj", "post_attention_layernorm"),
        LLAMA,
    ),
]


def register_family(name: str, match: Callable[[nn.Module], bool], table: dict[str, Spec]) -> None:
    """Add an architecture: ``match(layer_module) -> bool`` and a component table like ``LLAMA``.

    Registered families are tried before the built-in ones.
    """
    _FAMILIES.insert(0, Family(name, match, table))


@dataclass(frozen=True)
class Site:
    """A resolved site: which module to hook, how, and how to view the tensor."""

    name: str  # canonical, e.g. "layers.3.mlp.out"
    layer: int  # layer index; embed = 0 (input of layer 0), final_norm = n_layers, logits = n_layers + 1
    module_name: str
    module: nn.Module = field(repr=False, compare=False)
    kind: str  # "in" | "out" | "out1"
    view: Callable[[torch.Tensor], torch.Tensor] | None = field(default=None, repr=False, compare=False)
    # unview(module_tensor, new_viewed) -> module_tensor with the viewed part replaced
    unview: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = field(
        default=None, repr=False, compare=False
    )
    read_only: str | None = field(default=None, compare=False)  # why the site cannot be replaced

    @property
    def needs_eager(self) -> bool:
        return self.kind == "out1"


_LAYER_RE = re.compile(r"^(?:layers|blocks)\.(\d+)\.(.+)$")
_ALIASES = {"attn.z": "attn.head_out", "hook_resid_pre": "resid_pre", "hook_resid_post": "resid_post"}


def canonical_name(name: str) -> str:
    """Spell a site name canonically without a model: ``blocks.3.attn.z`` -> ``layers.3.attn.head_out``.

    Only the aliases are rewritten; whether the site exists is for :meth:`ModelAdapter.resolve` to say.
    """
    m = _LAYER_RE.match(name)
    if not m:
        return name
    return f"layers.{m.group(1)}.{_ALIASES.get(m.group(2), m.group(2))}"


class ModelAdapter:
    """Site resolution for one model instance (cheap; built on demand by :func:`get_adapter`)."""

    def __init__(self, model: nn.Module):
        self.model = model
        cfg = getattr(model, "config", None)
        if cfg is None:
            raise UserError(f"{type(model).__name__} has no .config; site adapters need a Hugging Face model")
        self.text_config = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        self.n_layers = int(self.text_config.num_hidden_layers)
        self.n_heads = int(self.text_config.num_attention_heads)
        self.layers_name, self.layers = self._find_layers()
        layer0 = self.layers[0]
        for fam in _FAMILIES:
            if fam.match(layer0):
                self.family = fam
                break
        else:
            subs = sorted({n for n, _ in layer0.named_modules() if n and n.count(".") < 2})
            raise UserError(
                f"unknown layer type {type(layer0).__name__} at {self.layers_name}; sub-modules: {subs}; "
                "register it with iclr26.lm.sites.register_family(name, match=lambda layer: ..., "
                "table={'resid_pre': ('', 'in', None), 'mlp.out': ('mlp', 'out', None), ...})"
            )
        self.table = dict(self.family.table)
        if self.family.name == "gpt_neox" and getattr(self.text_config, "use_parallel_residual", False):
            # x + attn(ln1(x)) + mlp(ln2(x)): no residual state exists between attention and MLP
            self.table.pop("resid_mid")
        self.table = {k: v for k, v in self.table.items() if _get(layer0, v[0]) is not None}
        self.final_norm_name = self._find_final_norm()
        out_emb = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        self.lm_head = out_emb if isinstance(out_emb, nn.Module) else None
        self.lm_head_name = next((n for n, m in model.named_modules() if m is self.lm_head), None)

    # -- discovery -------------------------------------------------------------------------------------
    def _find_layers(self) -> tuple[str, nn.ModuleList]:
        cands = [
            (n, m)
            for n, m in self.model.named_modules()
            if isinstance(m, nn.ModuleList) and len(m) == self.n_layers and len(m) > 0
        ]
        if not cands:
            lists = [(n, len(m)) for n, m in self.model.named_modules() if isinstance(m, nn.ModuleList)]
            raise UserError(
                f"no ModuleList of length num_hidden_layers={self.n_layers} in {type(self.model).__name__}; "
                f"found {lists}"
            )
        # the shallowest list whose name says layers (decoders: model.layers / transformer.h)
        cands.sort(key=lambda nm: (nm[0].count("."), not re.search(r"(layers?|\.h)$", nm[0])))
        return cands[0][0], cands[0][1]

    def _find_final_norm(self) -> str | None:
        parent = self.layers_name.rsplit(".", 1)[0] if "." in self.layers_name else ""
        base = _get(self.model, parent)
        for attr in self.family.final_norm:
            if base is not None and isinstance(getattr(base, attr, None), nn.Module):
                return f"{parent}.{attr}" if parent else attr
        return None

    # -- names -----------------------------------------------------------------------------------------
    def site_names(self) -> list[str]:
        """Every valid canonical site name for this model."""
        names = ["embed"]
        for i in range(self.n_layers):
            names += [f"layers.{i}.{c}" for c in self.table]
        if self.final_norm_name is not None:
            names.append("final_norm")
        if self.lm_head is not None:
            names.append("logits")
        return names

    def _valid_summary(self) -> str:
        comps = ",".join(self.table)
        tail = [n for n in ("final_norm", "logits") if n in self.site_names()]
        return f"embed, layers.{{0..{self.n_layers - 1}}}.{{{comps}}}" + "".join(f", {t}" for t in tail)

    def canonical(self, name: str) -> str:
        """The canonical name of a valid site (aliases resolved); unknown names raise ``UserError``."""
        return self.resolve(name).name

    def resolve(self, name: str) -> Site:
        """Resolve a site name (canonical or alias) to a :class:`Site`; unknown names list the valid ones."""
        if not isinstance(name, str):
            raise UserError(f"site must be a string like 'layers.3.resid_post', got {type(name).__name__}")
        if name == "embed":
            # the tensor entering layer 0 == hidden_states[0] (scaled for Gemma, + positions for GPT-2/BERT)
            return Site("embed", 0, self.layers_name + ".0", self.layers[0], "in", None)
        if name == "final_norm" and self.final_norm_name is not None:
            return Site(
                name,
                self.n_layers,
                self.final_norm_name,
                self.model.get_submodule(self.final_norm_name),
                "out",
                None,
            )
        if name == "logits" and self.lm_head is not None:
            cap = getattr(self.text_config, "final_logit_softcapping", None)
            # Gemma 2 soft-caps logits after the head, inline in forward(): repeat the same three ops
            view = None if cap is None else (lambda x: torch.tanh(x / cap) * cap)
            why = (
                None
                if cap is None
                else "the model soft-caps logits after the head; replace final_norm instead"
            )
            return Site(
                name,
                self.n_layers + 1,
                self.lm_head_name or "lm_head",
                self.lm_head,
                "out",
                view,
                read_only=why,
            )
        m = _LAYER_RE.match(name)
        if m:
            i, comp = int(m.group(1)), _ALIASES.get(m.group(2), m.group(2))
            if comp in self.table and 0 <= i < self.n_layers:
                path, kind, view = self.table[comp]
                layer = self.layers[i]
                mod_name = f"{self.layers_name}.{i}" + (f".{path}" if path else "")
                fwd, inv = self._view(view)
                return Site(
                    f"layers.{i}.{comp}",
                    i,
                    mod_name,
                    _get(layer, path),
                    kind,
                    fwd,
                    inv,
                    read_only=self._read_only(comp, kind, path),
                )
        raise UserError(
            f"unknown site {name!r} for {type(self.model).__name__} ({self.family.name}); "
            f"valid: {self._valid_summary()}"
        )

    @staticmethod
    def _read_only(comp: str, kind: str, path: str) -> str | None:
        if comp == "attn.pattern":
            return (
                "attention weights are returned after they were used; edit attn.head_out or attn.out instead"
            )
        if comp == "resid_mid" and kind == "in" and path:
            return (
                f"resid_mid is read at the input of {path}, which feeds only the MLP branch (the residual add "
                "keeps its own copy); edit attn.out or mlp.in instead"
            )
        return None

    def _view(self, view: str | None) -> tuple[Callable | None, Callable | None]:
        """(view, unview) for a table view name; unview(full, new) writes ``new`` back into ``full``."""
        if view is None:
            return None, None
        h = self.n_heads
        if view == "heads":
            # [B, T, H*dh] <-> [B, T, H, dh]
            return (lambda x: x.unflatten(-1, (h, -1))), (lambda _x, y: y.flatten(-2))
        if view == "pattern":
            # [B, H, Tq, Tk] <-> [B, Tq, H, Tk] so that position selection applies to queries
            return (lambda x: x.transpose(1, 2)), (lambda _x, y: y.transpose(1, 2))
        if view.startswith("fused_"):
            j = "qkv".index(view[-1])

            def fused_back(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
                parts = list(x.chunk(3, dim=-1))
                parts[j] = y
                return torch.cat(parts, dim=-1)

            return (lambda x: x.chunk(3, dim=-1)[j]), fused_back  # GPT-2 c_attn: [q | k | v] along channels
        if view.startswith("neox_"):
            j = "qkv".index(view[-1])

            # NeoX query_key_value: per head [q_h | k_h | v_h] -> [B, T, H, 3*dh] -> slice -> [B, T, H*dh]
            def neox_back(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
                parts = list(x.unflatten(-1, (h, -1)).chunk(3, dim=-1))
                parts[j] = y.unflatten(-1, (h, -1))
                return torch.cat(parts, dim=-1).flatten(-2)

            return (lambda x: x.unflatten(-1, (h, -1)).chunk(3, dim=-1)[j].flatten(-2)), neox_back
        raise ValueError(view)


def get_adapter(model: nn.Module) -> ModelAdapter:
    """The :class:`ModelAdapter` for ``model``.

    Built afresh on each call (a walk over ``named_modules``, well under a millisecond per hundred modules), so
    it never goes stale when a model is edited and never keeps a model alive through a cache.
    """
    return ModelAdapter(model)


def list_sites(model: nn.Module) -> list[str]:
    """All canonical site names of ``model``."""
    return get_adapter(model).site_names()


def resolve_site(model: nn.Module, name: str) -> Site:
    return get_adapter(model).resolve(name)
