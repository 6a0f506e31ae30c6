"""Activation capture: only the requested sites and token positions, batched, streamed, hooks always removed.

Interpretability core shared by the ICLR 2026 interpretability reproductions (probes, SAEs, steering).
Forward hooks (:mod:`iclr26.interp.hooks`) on the real Hugging Face modules (resolved by
:mod:`iclr26.lm.sites`) select token positions and apply per-sequence reductions *inside* the hook, so
only the requested vectors leave the forward pass.
The forward pass stops (an internal ``StopForward`` raised by a hook on the deepest needed module) right
after the last requested site, so later layers and the LM head are never computed unless ``logits`` is
requested: on Gemma 3 270M (262k-token vocabulary) the head alone costs more than the whole trunk.

Typical use (the SAE-training path: every non-pad token of MiniLM's layer-3 MLP output as rows)::

    from iclr26.lm import load_model
    from iclr26.interp.capture import capture, iter_batches
    model, tok = load_model("minilm")
    cap = capture(model, iter_batches(tok, texts, batch_size=32, max_length=128), "layers.3.mlp.out")
    X = cap["layers.3.mlp.out"]            # [N_tokens, 384] fp32 on CPU, pads excluded
    cap.index, cap.token_ids               # [N_tokens, 2] (sequence, position) and [N_tokens] token ids

Positions: ``"all"`` (non-pad tokens), ``"last"`` (last non-pad token, left or right padding), an int or a
list of ints counted within each row's non-pad span (``-1`` = last real token), a boolean mask [B, T] (single
batch) or a ``capture_mask`` entry in each batch dict, or a callable ``(input_ids, attention_mask) -> mask``.
Pads never enter a selection. Reductions: ``"none"`` stacks selected vectors ([N_selected, *feat]);
``"mean"``, ``"sum"``, ``"max"`` (masked with -inf), ``"last"`` give [N_sequences, *feat] (NaN for a row
with no selected position, 0 for ``sum``). Storage: in memory up to ``memory_budget_bytes`` (then a clear
error), or safetensors shards plus a JSON manifest in ``shard_dir`` flushed whenever the buffer passes the
budget (``Capture.iter_shards`` streams them back), or a user ``sink(site, acts, meta)`` callable.
Left-padded batches get ``position_ids`` from the attention mask, so a row's activations do not depend on
how much padding it received.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.io import atomic_write_json, save_tensors
from iclr26.core.progress import progress
from iclr26.interp.hooks import eval_mode, hooks, register_site_hook
from iclr26.lm.sites import Site, canonical_name, get_adapter

log = logging.getLogger(__name__)

REDUCTIONS = ("none", "mean", "sum", "max", "last")
MANIFEST = "manifest.json"
_META_KEYS = ("index", "token_ids", "n_selected")


class StopForward(Exception):  # noqa: N818 - control flow, not an error
    """Raised by the early-stop hook once every requested site has been captured."""


# ---------------------------------------------------------------------------------------------------------
# positions and reductions
# ---------------------------------------------------------------------------------------------------------
def select_positions(
    positions: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    batch_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Boolean mask [B, T] of the selected positions (always within ``attention_mask``)."""
    am = attention_mask.bool()
    B, T = am.shape
    if batch_mask is not None:
        sel = batch_mask
    elif isinstance(positions, str):
        if positions == "all":
            return am
        if positions == "last":
            last = torch.where(am, torch.arange(T, device=am.device), -1).amax(1)  # [B]
            sel = torch.zeros_like(am)
            ok = last >= 0
            sel[ok.nonzero().squeeze(1), last[ok]] = True
            return sel
        raise UserError(
            f"positions={positions!r}; use 'all', 'last', int(s), a bool mask [B,T] or a callable"
        )
    elif callable(positions):
        sel = positions(input_ids, attention_mask)
    elif isinstance(positions, int) or (
        isinstance(positions, Sequence) and positions and all(isinstance(p, int) for p in positions)
    ):
        idx = [positions] if isinstance(positions, int) else list(positions)
        n = am.sum(1)  # real tokens per row
        rank = am.long().cumsum(1) - 1  # [B, T]: index of each real token within its row
        sel = torch.zeros_like(am)
        for p in idx:
            want = p if p >= 0 else n + p  # [B] or scalar
            want = torch.as_tensor(want, device=am.device).expand(B)
            if ((want < 0) | (want >= n)).any():
                raise UserError(f"position {p} is out of range for a row with {int(n.min())} real tokens")
            sel |= am & (rank == want[:, None])
        return sel
    elif isinstance(positions, torch.Tensor):
        sel = positions
    else:
        raise UserError(
            f"positions of type {type(positions).__name__}; use 'all', 'last', int(s), a bool "
            "mask [B,T] or a callable (input_ids, attention_mask) -> mask"
        )
    sel = torch.as_tensor(sel, device=am.device)
    if sel.shape != am.shape:
        raise UserError(
            f"position mask has shape {tuple(sel.shape)}, expected {tuple(am.shape)} (batch x tokens)"
        )
    return sel.bool() & am


def _reduce(x: torch.Tensor, sel: torch.Tensor, how: str) -> torch.Tensor:
    """x [B, T, *feat], sel [B, T] bool -> [N_sel, *feat] (none) or [B, *feat]; pads never enter."""
    if x.shape[:2] != sel.shape:
        raise RuntimeError(
            f"activation shape {tuple(x.shape)} does not start with batch x tokens {tuple(sel.shape)}"
        )
    if how == "none":
        return x[sel]
    m = sel.view(*sel.shape, *([1] * (x.dim() - 2)))  # [B, T, 1, ...]
    n = sel.sum(1).view(-1, *([1] * (x.dim() - 2))).to(x.dtype)  # [B, 1, ...]
    if how == "sum":
        return torch.where(m, x, 0).sum(1)
    if how == "mean":
        return torch.where(m, x, 0).sum(1) / n  # 0/0 = NaN for empty rows
    if how == "max":
        out = torch.where(m, x, float("-inf")).amax(1)
        return torch.where(n > 0, out, float("nan"))
    # last selected position per row
    T = sel.shape[1]
    last = torch.where(sel, torch.arange(T, device=sel.device), -1).amax(1)  # [B]
    out = x[torch.arange(x.shape[0], device=x.device), last.clamp(min=0)]
    return torch.where(n > 0, out, float("nan"))


# ---------------------------------------------------------------------------------------------------------
# result object
# ---------------------------------------------------------------------------------------------------------
class Capture(Mapping):
    """Captured activations keyed by canonical site name (a read-only mapping).

    In memory: ``cap[site]`` is a tensor. Sharded: ``cap[site]`` loads and concatenates the shards (use
    ``iter_shards(site)`` to stream). Audit data: ``index`` [N, 2] (sequence, position) and ``token_ids``
    [N] for ``reduce="none"``; ``n_selected`` [N_sequences] selected positions per sequence otherwise.
    """

    def __init__(
        self,
        sites: list[str],
        *,
        reduce: str,
        positions: str,
        shard_dir: Path | None = None,
        data: dict[str, torch.Tensor] | None = None,
        manifest: dict | None = None,
    ):
        self.sites = list(sites)
        self.reduce = reduce
        self.positions = positions
        self.shard_dir = shard_dir
        self._data = data or {}
        self.manifest = manifest or {}

    # Mapping protocol
    def __getitem__(self, site: str) -> torch.Tensor:
        key = self._key(site)
        if key in self._data:
            return self._data[key]
        if self.shard_dir is None:
            raise KeyError(site)
        parts = list(self.iter_shards(key))
        return torch.cat(parts) if parts else torch.empty(0)

    def __iter__(self) -> Iterator[str]:
        return iter(self.sites)

    def __len__(self) -> int:
        return len(self.sites)

    def _key(self, site: str) -> str:
        if site in self.sites or site in _META_KEYS:
            return site
        alias = canonical_name(site)
        if alias in self.sites:
            return alias
        raise KeyError(f"{site!r} was not captured; captured: {self.sites}")

    @property
    def index(self) -> torch.Tensor | None:
        return self._meta("index")

    @property
    def token_ids(self) -> torch.Tensor | None:
        return self._meta("token_ids")

    @property
    def n_selected(self) -> torch.Tensor | None:
        return self._meta("n_selected")

    def _meta(self, key: str) -> torch.Tensor | None:
        try:
            return self[key]
        except KeyError:
            return None

    def iter_shards(self, site: str) -> Iterator[torch.Tensor]:
        """Yield the site's tensor shard by shard (one shard in memory at a time)."""
        from safetensors import safe_open

        key = self._key(site)
        if self.shard_dir is None:
            yield self._data[key]
            return
        for sh in self.manifest["shards"]:
            with safe_open(str(self.shard_dir / sh["file"]), framework="pt") as f:
                if key in f.keys():
                    yield f.get_tensor(key).float() if key in self.sites else f.get_tensor(key)

    @classmethod
    def load(cls, shard_dir: str | Path) -> Capture:
        """Reopen a sharded capture from its ``manifest.json``."""
        shard_dir = Path(shard_dir)
        if not (shard_dir / MANIFEST).exists():
            raise UserError(f"no {MANIFEST} in {shard_dir}")
        man = json.loads((shard_dir / MANIFEST).read_text())
        return cls(
            man["sites"], reduce=man["reduce"], positions=man["positions"], shard_dir=shard_dir, manifest=man
        )

    def __repr__(self) -> str:
        where = f"shards in {self.shard_dir}" if self.shard_dir else "in memory"
        return f"Capture(sites={self.sites}, reduce={self.reduce!r}, positions={self.positions!r}, {where})"


class _Store:
    """Buffers per-batch outputs; keeps them in memory (budget enforced) or flushes safetensors shards."""

    def __init__(self, sites: list[str], budget: int, shard_dir: Path | None, dtype: torch.dtype, meta: dict):
        self.sites, self.budget, self.shard_dir, self.dtype = sites, budget, shard_dir, dtype
        self.buf: dict[str, list[torch.Tensor]] = {k: [] for k in [*sites, *_META_KEYS]}
        self.buf_bytes = 0
        self.total_bytes = 0
        self.manifest = {
            **meta,
            "sites": sites,
            "dtype": str(dtype).removeprefix("torch."),
            "shards": [],
            "complete": False,
        }
        if shard_dir is not None:
            shard_dir.mkdir(parents=True, exist_ok=True)
            if (shard_dir / MANIFEST).exists():
                raise UserError(f"{shard_dir} already holds a capture ({MANIFEST}); choose an empty folder")

    def add(self, out: dict[str, torch.Tensor]) -> None:
        nb = 0
        for k, v in out.items():
            v = v.to(self.dtype) if k in self.sites else v
            self.buf[k].append(v)
            nb += v.numel() * v.element_size()
        self.buf_bytes += nb
        self.total_bytes += nb
        if self.shard_dir is None:
            if self.total_bytes > self.budget:
                raise UserError(
                    f"capture exceeded memory_budget_bytes={self.budget:,} ({self.total_bytes:,} bytes so far); "
                    "pass shard_dir=... to stream to disk, select fewer positions/sites, or raise the budget"
                )
        elif self.buf_bytes > self.budget:
            self.flush()

    def flush(self) -> None:
        if self.shard_dir is None or not any(self.buf[k] for k in self.buf):
            return
        k = len(self.manifest["shards"])
        name = f"shard_{k:05d}.safetensors"
        tensors = {key: torch.cat(v).contiguous() for key, v in self.buf.items() if v}
        save_tensors(self.shard_dir / name, tensors)
        first = self.sites[0]
        self.manifest["shards"].append({"file": name, "rows": int(tensors[first].shape[0])})
        self._write_manifest()
        self.buf = {key: [] for key in self.buf}
        self.buf_bytes = 0

    def _write_manifest(self) -> None:
        atomic_write_json(self.shard_dir / MANIFEST, self.manifest)

    def finish(self) -> Capture:
        m = self.manifest
        if self.shard_dir is not None:
            self.flush()
            m["complete"] = True
            self._write_manifest()
            return Capture(
                self.sites, reduce=m["reduce"], positions=m["positions"], shard_dir=self.shard_dir, manifest=m
            )
        data = {k: torch.cat(v) for k, v in self.buf.items() if v}
        return Capture(self.sites, reduce=m["reduce"], positions=m["positions"], data=data, manifest=m)


# ---------------------------------------------------------------------------------------------------------
# main entry point
# ---------------------------------------------------------------------------------------------------------
def _normalise_batches(batches: Any) -> Iterable[Mapping]:
    if isinstance(batches, torch.Tensor):
        return [{"input_ids": batches if batches.dim() == 2 else batches.unsqueeze(0)}]
    if isinstance(batches, Mapping):
        return [batches]
    return batches


def _stop_hook_target(adapter, sites: list[Site]) -> tuple[nn.Module, str] | None:
    """The module and hook kind after which nothing requested remains to be computed."""
    if any(s.name == "logits" for s in sites):
        return None
    if any(s.name == "final_norm" for s in sites):
        return adapter.model.get_submodule(adapter.final_norm_name), "out"
    L = max(s.layer for s in sites)
    deepest = [s for s in sites if s.layer == L]
    if all(s.kind == "in" and s.module is adapter.layers[L] for s in deepest):
        return adapter.layers[L], "in"  # only resid_pre/embed at layer L: stop before computing layer L
    return adapter.layers[L], "out"


def forward_kwargs(
    params: set[str], batch: Mapping, ids: torch.Tensor, am: torch.Tensor, device: torch.device
) -> dict[str, Any]:
    """Keyword arguments for ``model(**kw)`` from a batch: the keys ``forward`` accepts, on ``device``;
    ``position_ids`` counted from each row's first real token under left padding (as ``generate`` does);
    no KV cache. ``params`` is the set of ``model.forward``'s parameter names."""
    kw = {
        k: v.to(device) if isinstance(v, torch.Tensor) else v
        for k, v in batch.items()
        if k in params and k not in ("input_ids", "attention_mask", "labels")
    }
    kw["input_ids"], kw["attention_mask"] = ids.to(device), am.to(device)
    if "position_ids" in params and "position_ids" not in kw and (am[:, 0] == 0).any():
        kw["position_ids"] = (am.long().cumsum(1) - 1).clamp(min=0).to(device)
    if "use_cache" in params:
        kw["use_cache"] = False
    return kw


def capture(
    model: nn.Module,
    batches: Any,
    sites: str | Sequence[str],
    *,
    positions: Any = "all",
    reduce: str = "none",
    sink: Callable[[str, torch.Tensor, dict], None] | None = None,
    stop_after: bool = True,
    memory_budget_bytes: int = 2 * 1024**3,
    shard_dir: str | Path | None = None,
    store_dtype: torch.dtype = torch.float32,
    desc: str = "capture",
) -> Capture:
    """Capture ``sites`` over ``batches`` (see the module docstring for every option).

    ``batches``: an iterable of dicts / ``BatchEncoding`` (``input_ids``, optional ``attention_mask``,
    ``token_type_ids``, ``capture_mask``), or a single dict or ``input_ids`` tensor. Activations are detached,
    moved to CPU and stored as ``store_dtype`` (fp32 by default; fp16 halves shard size). ``sink``: called as
    ``sink(site, acts, meta)`` per batch instead of storing. ``stop_after``: stop the forward pass after the
    deepest requested site (the LM head runs only when ``logits`` is requested).
    """
    if reduce not in REDUCTIONS:
        raise UserError(f"reduce={reduce!r}; choose from {', '.join(REDUCTIONS)}")
    names = [sites] if isinstance(sites, str) else list(sites)
    if not names:
        raise UserError("capture needs at least one site name")
    adapter = get_adapter(model)
    resolved = [adapter.resolve(n) for n in names]
    resolved = list({s.name: s for s in resolved}.values())  # dedupe aliases, keep order
    site_names = [s.name for s in resolved]
    pos_desc = positions if isinstance(positions, str | int) else type(positions).__name__
    store = None
    if sink is None:
        store = _Store(
            site_names,
            memory_budget_bytes,
            Path(shard_dir) if shard_dir is not None else None,
            store_dtype,
            {"reduce": reduce, "positions": str(pos_desc), "model": type(model).__name__},
        )
    params = set(inspect.signature(model.forward).parameters)
    device = next(model.parameters()).device
    stop = _stop_hook_target(adapter, resolved) if stop_after else None

    state: dict[str, Any] = {"sel": None, "out": {}}

    def make_fn(site: Site):
        def fn(x: torch.Tensor) -> None:
            if site.name in state["out"]:
                raise RuntimeError(f"{site.name}: module {site.module_name} ran twice in one forward pass")
            # [B, T, *feat] -> selected/reduced, fp32 on CPU; only this leaves the forward pass
            state["out"][site.name] = _reduce(x.detach().float(), state["sel"], reduce).cpu()

        return fn

    def stop_fn(*_):
        raise StopForward

    def install(handles: list) -> None:
        for s in resolved:
            handles.append(register_site_hook(s, make_fn(s)))
        if stop is not None:
            mod, kind = stop
            if kind == "in":
                handles.append(mod.register_forward_pre_hook(lambda m, a: stop_fn()))
            else:
                handles.append(mod.register_forward_hook(lambda m, a, o: stop_fn()))

    need_eager = any(s.needs_eager for s in resolved)
    row0 = 0
    with eval_mode(model, need_eager), hooks(install), torch.no_grad():
        for batch in progress(_normalise_batches(batches), desc=desc):
            batch = dict(batch) if isinstance(batch, Mapping) else {"input_ids": batch}
            if "input_ids" not in batch:
                raise UserError(f"each batch needs input_ids; got keys {sorted(batch)}")
            ids = torch.as_tensor(batch["input_ids"])
            ids = ids.unsqueeze(0) if ids.dim() == 1 else ids
            am = batch.get("attention_mask")
            am = torch.ones_like(ids) if am is None else torch.as_tensor(am)
            bmask = batch.pop("capture_mask", None)
            sel = select_positions(
                positions, ids, am, None if bmask is None else torch.as_tensor(bmask).bool()
            )
            kw = forward_kwargs(params, batch, ids, am, device)
            state["sel"], state["out"] = sel.to(device), {}
            try:
                model(**kw)
            except StopForward:
                pass
            missing = [n for n in site_names if n not in state["out"]]
            if missing:
                raise RuntimeError(f"sites {missing} did not fire during the forward pass")
            out = state["out"]
            state["out"] = {}
            sel = sel.cpu()
            if reduce == "none":
                nz = sel.nonzero()  # [N, 2] (row within batch, position)
                out["index"] = nz + torch.tensor([row0, 0])
                out["token_ids"] = ids.cpu()[sel]
            else:
                out["n_selected"] = sel.sum(1)
            row0 += ids.shape[0]
            if sink is not None:
                meta = {k: out[k] for k in _META_KEYS if k in out}
                for n in site_names:
                    sink(n, out[n], meta)
            else:
                store.add(out)
    state.clear()
    if sink is not None:
        return Capture(site_names, reduce=reduce, positions=str(pos_desc))
    return store.finish()


class RunningMoments:
    """A ``sink`` keeping per-site running mean and variance (Welford/Chan, float64) over captured rows."""

    def __init__(self) -> None:
        self.count_: dict[str, int] = {}
        self.mean_: dict[str, torch.Tensor] = {}
        self._m2: dict[str, torch.Tensor] = {}

    def __call__(self, site: str, acts: torch.Tensor, meta: dict) -> None:
        x = acts.double()
        n_b = x.shape[0]
        if n_b == 0:
            return
        mean_b = x.mean(0)
        m2_b = ((x - mean_b) ** 2).sum(0)
        n_a = self.count_.get(site, 0)
        if n_a == 0:
            self.count_[site], self.mean_[site], self._m2[site] = n_b, mean_b, m2_b
            return
        n = n_a + n_b
        delta = mean_b - self.mean_[site]
        self.mean_[site] = self.mean_[site] + delta * n_b / n
        self._m2[site] = self._m2[site] + m2_b + delta**2 * n_a * n_b / n
        self.count_[site] = n

    def var(self, site: str, ddof: int = 0) -> torch.Tensor:
        if site not in self.count_:
            raise UserError(f"no rows seen for {site!r}")
        return self._m2[site] / (self.count_[site] - ddof)


def iter_batches(
    tokenizer,
    texts: Sequence[str],
    batch_size: int = 16,
    max_length: int = 128,
    *,
    padding_side: str = "left",
    add_special_tokens: bool = True,
) -> Iterator[dict]:
    """Tokenize ``texts`` in order into padded batches (left padding by default; truncation at max_length).

    A tokenizer without a pad token (GPT-2 style) pads with its EOS token for these calls only.
    """
    if isinstance(texts, str):
        raise UserError("iter_batches takes a list of texts, got a single string")
    if padding_side not in ("left", "right"):
        raise UserError(f"padding_side={padding_side!r}; use 'left' or 'right'")
    texts = list(texts)
    restore = False
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise UserError("the tokenizer has neither a pad nor an eos token; set tokenizer.pad_token")
        tokenizer.pad_token, restore = tokenizer.eos_token, True
    try:
        for i in range(0, len(texts), batch_size):
            enc = tokenizer(
                texts[i : i + batch_size],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
                padding_side=padding_side,
                add_special_tokens=add_special_tokens,
            )
            yield dict(enc)
    finally:
        if restore:
            tokenizer.pad_token = None
