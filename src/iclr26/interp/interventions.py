"""Diff-of-means directions, steering, ablation and activation patching on named sites.

Every edit here is a replacement function handed to :func:`iclr26.interp.hooks.register_replace_hook`
inside :func:`iclr26.interp.hooks.hooks`, so hooks are removed on exit whatever happens, and the context
managers compose freely::

    with steer(model, "layers.1.resid_post", v, alpha=4.0, positions="generated"), \\
         ablate_direction(model, ["layers.0.resid_post", "layers.1.resid_post"], r_hat):
        out = model.generate(ids, max_new_tokens=5, do_sample=False)

Positions are absolute token positions. Managers that take ``positions`` also put a read-only pre-hook on
the model's root forward that records where the current forward starts (the KV-cache length, or
``cache_position`` when passed) and the prompt length. A forward starting at position 0 is a new prompt
unless its ``input_ids`` extend the recorded prompt of the same batch size (generation without cache);
so ``positions`` means the same thing in a plain forward and in ``generate`` with or without cache.
Pass ``prompt_len=`` to fix the prompt length instead of detecting it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from iclr26.core.errors import UserError
from iclr26.interp.hooks import Replacement, hooks, register_replace_hook
from iclr26.lm.sites import Site, get_adapter

Directions = torch.Tensor | Mapping[str, torch.Tensor]


# -- directions ---------------------------------------------------------------------------------------
def _unit(r: torch.Tensor) -> torch.Tensor:
    n = r.norm(dim=-1, keepdim=True)
    if bool((n == 0).any()):
        raise UserError("direction has zero norm; the two sets have identical means")
    return r / n


def diff_of_means(pos: Any, neg: Any) -> tuple[Any, Any]:
    """Mean difference ``r = mean(pos) - mean(neg)`` and its unit vector ``r_hat``.

    ``pos``/``neg``: ``[N, d]`` (gives ``[d]``), ``[L, N, d]`` (per layer, gives ``[L, d]``) or mappings
    ``site -> [N, d]`` with the same keys (gives dicts). The sign is fixed: ``r_hat`` points from the
    negative to the positive mean, so ``project(mean(pos), r_hat) > project(mean(neg), r_hat)``.
    """
    if isinstance(pos, Mapping) or isinstance(neg, Mapping):
        if not (isinstance(pos, Mapping) and isinstance(neg, Mapping)) or set(pos) != set(neg):
            raise UserError("diff_of_means: give two mappings with the same sites, or two tensors")
        pairs = {k: diff_of_means(pos[k], neg[k]) for k in pos}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    pos, neg = torch.as_tensor(pos), torch.as_tensor(neg)
    if pos.ndim not in (2, 3) or neg.ndim != pos.ndim or pos.shape[-1] != neg.shape[-1]:
        raise UserError(
            f"diff_of_means needs [N, d] or [L, N, d] tensors of equal d, got {tuple(pos.shape)} and "
            f"{tuple(neg.shape)}"
        )
    if pos.ndim == 3 and pos.shape[0] != neg.shape[0]:
        raise UserError(f"diff_of_means: {pos.shape[0]} layers of positives but {neg.shape[0]} of negatives")
    r = pos.float().mean(dim=-2) - neg.float().mean(dim=-2)
    return r, _unit(r)


def cosine_profile(v: Any, r: Any) -> Any:
    """Cosine between ``v`` and ``r`` per layer: ``[L, d]`` x ``[L, d]`` (or ``[d]``) -> ``[L]``; dicts -> dict."""
    if isinstance(r, Mapping):
        return {k: cosine_profile(v[k] if isinstance(v, Mapping) else v, r[k]) for k in r}
    v, r = torch.as_tensor(v).float(), torch.as_tensor(r).float()
    if v.shape[-1] != r.shape[-1]:
        raise UserError(f"cosine_profile: dimensions differ ({v.shape[-1]} vs {r.shape[-1]})")
    return torch.nn.functional.cosine_similarity(v, r, dim=-1)


def project(h: torch.Tensor, r_hat: torch.Tensor) -> torch.Tensor:
    """Scalar projection of ``h [..., d]`` on the direction ``r_hat [d]`` (normalised here): ``[...]``."""
    if h.shape[-1] != r_hat.shape[-1]:
        raise UserError(f"project: h has d={h.shape[-1]}, the direction d={r_hat.shape[-1]}")
    u = _unit(r_hat.to(h.dtype))
    return h @ u


# -- absolute positions -------------------------------------------------------------------------------
_POSITION_WORDS = ("all", "prompt", "generated")


def _check_positions(positions: Any) -> Any:
    """Normalise a positions spec: a word, a bool tensor [T], or a LongTensor of absolute indices."""
    if positions is None:
        return "all"
    if isinstance(positions, str):
        if positions not in _POSITION_WORDS:
            raise UserError(
                f"positions must be one of {_POSITION_WORDS}, a bool mask [T] or indices, got {positions!r}"
            )
        return positions
    if isinstance(positions, int):
        positions = [positions]
    try:
        t = torch.as_tensor(positions)
    except (TypeError, ValueError, RuntimeError) as e:
        raise UserError(
            f"positions must be a word, a bool mask [T] or a list of ints; got {positions!r}"
        ) from e
    if t.ndim != 1:
        raise UserError(
            f"positions must be one-dimensional (a mask [T] or indices), got shape {tuple(t.shape)}"
        )
    if t.dtype == torch.bool:
        return t
    if t.dtype.is_floating_point or t.dtype.is_complex:
        raise UserError(f"positions indices must be integers, got dtype {t.dtype}")
    if t.numel() and int(t.min()) < 0:
        raise UserError("positions indices are absolute token positions and must be >= 0")
    return t.long()


class _Tracker:
    """Where the current forward starts and how long the prompt is (fed by a root pre-hook)."""

    def __init__(self, prompt_len: int | None):
        self.fixed = prompt_len
        self.start = 0
        self.prompt_len: int | None = prompt_len
        self.prompt_ids: torch.Tensor | None = None

    def pre_hook(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args and isinstance(args[0], torch.Tensor) else None)
        emb = kwargs.get("inputs_embeds")
        x = ids if ids is not None else emb
        if x is None:
            return
        T = int(x.shape[1])
        start = 0
        cp = kwargs.get("cache_position")
        cache = kwargs.get("past_key_values", kwargs.get("cache"))
        if isinstance(cp, torch.Tensor) and cp.numel():
            start = int(cp.reshape(-1)[0])
        elif cache is not None and hasattr(cache, "get_seq_length"):
            start = int(cache.get_seq_length())
        self.start = start
        if start > 0 or self.fixed is not None:
            return
        prev = self.prompt_ids
        extends = (
            ids is not None
            and prev is not None
            and ids.shape[0] == prev.shape[0]
            and T > prev.shape[1]
            and torch.equal(ids[:, : prev.shape[1]], prev.to(ids.device))
        )
        if not extends:  # a new prompt
            self.prompt_len = T
            self.prompt_ids = ids.detach().clone() if ids is not None else None

    def select(self, T: int, positions: Any, device: torch.device) -> torch.Tensor | None:
        """Bool mask [T] of the current forward's positions to edit (None: all of them)."""
        if isinstance(positions, str) and positions == "all":
            return None
        pos = torch.arange(self.start, self.start + T, device=device)
        if isinstance(positions, str):
            p = self.prompt_len if self.prompt_len is not None else T
            return pos < p if positions == "prompt" else pos >= p
        if positions.dtype == torch.bool:
            m = positions.to(device)
            inside = pos < m.numel()
            return inside & m[pos.clamp(max=max(m.numel() - 1, 0))] if m.numel() else inside
        return torch.isin(pos, positions.to(device))


def _where(sel: torch.Tensor | None, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    if sel is None:
        return new
    shape = (1, sel.numel()) + (1,) * (old.ndim - 2)
    return torch.where(sel.view(shape), new, old)


@contextmanager
def _install(
    model: nn.Module, edits: Sequence[tuple[Site, Replacement]], tracker: _Tracker | None = None
) -> Iterator[list[Site]]:
    for site, _ in edits:  # refuse before registering anything
        if site.read_only:
            raise UserError(f"{site.name} cannot be replaced: {site.read_only}")

    def install(handles: list[RemovableHandle]) -> None:
        if tracker is not None:
            handles.append(model.register_forward_pre_hook(tracker.pre_hook, with_kwargs=True))
        for site, fn in edits:
            handles.append(register_replace_hook(site, fn))

    with hooks(install):
        yield [s for s, _ in edits]


def _width(model: nn.Module, site: Site) -> tuple[int, ...] | None:
    """The site's per-position feature shape when it can be told without a forward (else None)."""
    comp = site.name.split(".", 2)[-1] if site.name.startswith("layers.") else site.name
    cfg = get_adapter(model).text_config
    if comp in (
        "resid_pre",
        "resid_mid",
        "resid_post",
        "attn.out",
        "mlp.out",
        "mlp.in",
        "embed",
        "final_norm",
    ):
        d = getattr(cfg, "hidden_size", None)
        return (int(d),) if d is not None else None
    mod = site.module
    if site.view is None and site.kind == "out":
        n = getattr(mod, "out_features", getattr(mod, "nf", None))
        return (int(n),) if n is not None else None
    if site.view is None and site.kind == "in":
        n = getattr(mod, "in_features", None)
        if n is None and hasattr(mod, "nf"):  # GPT-2 Conv1D: weight [in, out]
            n = mod.weight.shape[0]
        return (int(n),) if n is not None else None
    return None


def _check_shape(site: Site, got: tuple[int, ...], want: tuple[int, ...], what: str) -> None:
    if tuple(got) != tuple(want):
        raise UserError(f"{site.name}: {what} has shape {tuple(got)}, the site's features are {tuple(want)}")


# -- interventions ------------------------------------------------------------------------------------
@contextmanager
def steer(
    model: nn.Module,
    site: str,
    vector: torch.Tensor,
    alpha: float = 1.0,
    positions: Any = "all",
    prompt_len: int | None = None,
) -> Iterator[Site]:
    """Add ``alpha * vector`` to the site's activation at the chosen absolute positions.

    ``positions``: ``"all"``, ``"prompt"`` (positions < prompt length), ``"generated"`` (>= prompt
    length), a bool mask ``[T]`` over absolute positions, or a list of absolute indices. ``vector`` has
    the site's feature shape (``[d]``; ``[H, dh]`` for ``attn.head_out``). Gradients flow into ``vector``.
    """
    s = get_adapter(model).resolve(site)
    pos = _check_positions(positions)
    vector = torch.as_tensor(vector)
    w = _width(model, s)
    if w is not None:
        _check_shape(s, tuple(vector.shape), w, "the steering vector")
    tracker = _Tracker(prompt_len)

    def fn(x: torch.Tensor) -> torch.Tensor:
        _check_shape(s, tuple(vector.shape), tuple(x.shape[2:]), "the steering vector")
        new = x + alpha * vector.to(device=x.device, dtype=x.dtype)
        return _where(tracker.select(x.shape[1], pos, x.device), new, x)

    with _install(model, [(s, fn)], tracker) as sites:
        yield sites[0]


@contextmanager
def ablate_direction(model: nn.Module, sites: str | Sequence[str], r_hat: Directions) -> Iterator[list[Site]]:
    """Remove the component along ``r_hat`` at each site: ``h <- h - r r^T h`` with ``r = r_hat/|r_hat|``.

    ``r_hat``: one ``[d]`` direction for every site, or a mapping ``site -> [d]``.
    """
    names = [sites] if isinstance(sites, str) else list(sites)
    if not names:
        raise UserError("ablate_direction needs at least one site")
    ad = get_adapter(model)
    edits: list[tuple[Site, Replacement]] = []
    for name in names:
        s = ad.resolve(name)
        if isinstance(r_hat, Mapping):
            if name not in r_hat and s.name not in r_hat:
                raise UserError(f"ablate_direction: no direction given for {name}; given: {list(r_hat)}")
            r = torch.as_tensor(r_hat[name] if name in r_hat else r_hat[s.name])
        else:
            r = torch.as_tensor(r_hat)
        if r.ndim != 1:
            raise UserError(f"{s.name}: the direction must be a vector [d], got shape {tuple(r.shape)}")
        w = _width(model, s)
        if w is not None:
            _check_shape(s, tuple(r.shape), w, "the direction")
        u = _unit(r.float())

        def fn(x: torch.Tensor, s: Site = s, u: torch.Tensor = u) -> torch.Tensor:
            _check_shape(s, tuple(u.shape), tuple(x.shape[2:]), "the direction")
            uu = u.to(device=x.device, dtype=x.dtype)
            return x - (x @ uu).unsqueeze(-1) * uu

        edits.append((s, fn))
    with _install(model, edits) as resolved:
        yield resolved


def _check_mode(mode: str, allowed: tuple[str, ...], what: str) -> None:
    if mode not in allowed:
        raise UserError(f"{what}: unknown mode {mode!r}; choose from {', '.join(allowed)}")


def _check_index(idx: Any, n: int | None, what: str) -> torch.Tensor:
    t = torch.as_tensor([idx] if isinstance(idx, int) else list(idx))
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.ndim != 1:
        raise UserError(f"{what}: indices must be a list of ints, got {idx!r}")
    t = t.long()
    if t.numel() and (int(t.min()) < 0 or (n is not None and int(t.max()) >= n)):
        raise UserError(f"{what}: index out of range 0..{(n or 0) - 1}: {t.tolist()}")
    return t


@contextmanager
def edit_units(
    model: nn.Module, site: str, idx: int | Sequence[int], mode: str = "zero", factor: float = 0.0
) -> Iterator[Site]:
    """Zero (``mode="zero"``) or multiply by ``factor`` (``mode="scale"``) channels ``idx`` of a site.

    Meant for projection outputs (``mlp.gate``/``mlp.up``/``attn.q``...): zeroing a gate channel kills
    that hidden unit because act(0) = 0. The site must be flat ([B, T, C]).
    """
    _check_mode(mode, ("zero", "scale"), "edit_units")
    s = get_adapter(model).resolve(site)
    if s.view is not None and s.name.endswith("head_out"):
        raise UserError(f"{s.name} is per-head; use ablate_heads")
    w = _width(model, s)
    ch = _check_index(idx, w[0] if w else None, f"edit_units {s.name}")
    f = 0.0 if mode == "zero" else float(factor)

    def fn(x: torch.Tensor) -> torch.Tensor:
        if ch.numel() and int(ch.max()) >= x.shape[-1]:
            raise UserError(f"edit_units {s.name}: channel index out of range 0..{x.shape[-1] - 1}")
        scale = torch.ones(x.shape[-1], device=x.device, dtype=x.dtype)
        scale[ch.to(x.device)] = f
        return x * scale

    with _install(model, [(s, fn)]) as sites:
        yield sites[0]


@contextmanager
def ablate_heads(
    model: nn.Module,
    layer: int,
    heads: int | Sequence[int],
    mode: str = "zero",
    mean: torch.Tensor | None = None,
) -> Iterator[Site]:
    """Zero or mean-replace query heads ``heads`` in the input of layer ``layer``'s output projection.

    Edits ``layers.{layer}.attn.head_out`` ([B, T, H, dh], H = query heads, so GQA models index query
    heads). ``mode="mean"`` needs ``mean`` of shape ``[H, dh]`` (e.g. a captured mean over a dataset).
    """
    _check_mode(mode, ("zero", "mean"), "ablate_heads")
    ad = get_adapter(model)
    s = ad.resolve(f"layers.{layer}.attn.head_out")
    hs = _check_index(heads, ad.n_heads, f"ablate_heads layer {layer}")
    if mode == "mean":
        if mean is None:
            raise UserError("ablate_heads mode='mean' needs mean=[H, dh]")
        mean = torch.as_tensor(mean)
        if mean.ndim != 2 or mean.shape[0] != ad.n_heads:
            raise UserError(f"ablate_heads: mean must have shape [{ad.n_heads}, dh], got {tuple(mean.shape)}")

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        h = hs.to(x.device)
        if mode == "zero":
            y[:, :, h] = 0
        else:
            assert mean is not None
            _check_shape(s, tuple(mean.shape), tuple(x.shape[2:]), "mean")
            y[:, :, h] = mean.to(device=x.device, dtype=x.dtype)[h]
        return y

    with _install(model, [(s, fn)]) as sites:
        yield sites[0]


def _dense(cached: Any, site: Site) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A dense ``[B, T, ...]`` tensor and (for a Capture) a bool mask [B, T] of the captured cells."""
    if isinstance(cached, Mapping):  # an iclr26.interp.capture.Capture (reduce="none")
        try:
            acts = cached[site.name]
        except KeyError as e:
            raise UserError(f"patch: {site.name} is not in the capture") from e
        index = getattr(cached, "index", None)
        if index is None or getattr(cached, "reduce", "none") != "none":
            raise UserError("patch needs a capture made with reduce='none' (it stores token positions)")
        B, T = int(index[:, 0].max()) + 1, int(index[:, 1].max()) + 1
        dense = acts.new_zeros((B, T, *acts.shape[1:]))
        have = torch.zeros(B, T, dtype=torch.bool)
        dense[index[:, 0], index[:, 1]] = acts
        have[index[:, 0], index[:, 1]] = True
        return dense, have
    t = torch.as_tensor(cached)
    if t.ndim < 3:
        raise UserError(f"patch: cached must be [B, T, ...] or a Capture, got shape {tuple(t.shape)}")
    return t, None


@contextmanager
def patch(
    model: nn.Module, site: str, cached: Any, positions: Any = None, prompt_len: int | None = None
) -> Iterator[Site]:
    """Replace the site's activation by ``cached`` at the chosen absolute positions.

    ``cached``: a tensor ``[B or 1, T, ...]`` indexed by absolute position (positions it does not cover
    are left alone), or a :class:`~iclr26.interp.capture.Capture` made with ``reduce="none"`` (only the
    captured (sequence, position) cells are patched). ``positions`` as in :func:`steer` (None = all).
    """
    s = get_adapter(model).resolve(site)
    pos = _check_positions(positions)
    dense, have = _dense(cached, s)
    tracker = _Tracker(prompt_len)

    def fn(x: torch.Tensor) -> torch.Tensor:
        B, T = x.shape[:2]
        _check_shape(s, tuple(dense.shape[2:]), tuple(x.shape[2:]), "the cached activation")
        if dense.shape[0] not in (1, B):
            raise UserError(f"patch {s.name}: cached batch {dense.shape[0]}, the forward has {B}")
        p = torch.arange(tracker.start, tracker.start + T)
        inside = p < dense.shape[1]
        src = (
            dense[:, p.clamp(max=dense.shape[1] - 1)]
            .to(device=x.device, dtype=x.dtype)
            .expand(B, *x.shape[1:])
        )
        cell = inside.unsqueeze(0).expand(B, T).clone()
        if have is not None:
            if have.shape[0] != B:
                raise UserError(f"patch {s.name}: the capture has {have.shape[0]} sequences, the forward {B}")
            cell &= have[:, p.clamp(max=have.shape[1] - 1)]
        sel = tracker.select(T, pos, torch.device("cpu"))
        if sel is not None:
            cell &= sel.unsqueeze(0)
        cell = cell.to(x.device).view(B, T, *([1] * (x.ndim - 2)))
        return torch.where(cell, src, x)

    with _install(model, [(s, fn)], tracker) as sites:
        yield sites[0]


__all__ = [
    "diff_of_means",
    "cosine_profile",
    "project",
    "steer",
    "ablate_direction",
    "edit_units",
    "ablate_heads",
    "patch",
]
