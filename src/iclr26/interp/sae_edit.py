"""Editing a model through a sparse dictionary (SAE or transcoder) with the reconstruction error kept.

``with sae_edit(model, sae, edit_fn):`` encodes the activation at the dictionary's input site, applies
``edit_fn`` to the latents ``f`` and writes back, at the output site,

    x' = x + (dec(edit(f)) − dec(f))

which equals ``dec(edit(f)) + (x − dec(f))``: the part of x the dictionary does not explain (the error term) is
kept, and the identity edit returns ``x`` bit for bit (it is computed as ``(edit(f) − f)·W_dec``, exactly zero when
nothing changed).
For an SAE the input and output sites are the same; for a transcoder the latents are computed from the input site
(e.g. ``layers.3.mlp.in``) and the difference is added at the output site (``layers.3.mlp.out``).

Edit functions map latents ``[B, T, n]`` to edited latents of the same shape:
``zero(idx)``, ``scale(idx, factor)``, ``clamp(idx, value)`` and ``add_scaled(idx, k, ref)`` (f_j += k·ref, with
``ref`` ``"max"`` = the largest latent of the current forward, ``"latent_max"``, or a number). With a numeric
``ref`` the latents change by a constant, so the write-back is the constant ``k·ref·Σ_j W_dec[j]`` and the
dictionary is not even run (same result up to float rounding, at the cost of a vector add).
Positions follow :mod:`iclr26.interp.interventions` (``"all"``, ``"prompt"``, ``"generated"``, a mask or indices);
latents at other positions are left as they are, so the write-back there is exactly zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.interp.interventions import _check_positions, _install, _Tracker, _where
from iclr26.interp.sae import SparseDictionary
from iclr26.lm.sites import get_adapter

EditFn = Callable[[torch.Tensor], torch.Tensor]


def _latent_index(idx: int | Sequence[int], n: int | None = None) -> torch.Tensor:
    t = torch.as_tensor([idx] if isinstance(idx, int) else list(idx))
    if t.ndim != 1 or t.dtype.is_floating_point or t.dtype == torch.bool or t.numel() == 0:
        raise UserError(f"latent indices must be a non-empty list of ints, got {idx!r}")
    t = t.long()
    if int(t.min()) < 0 or (n is not None and int(t.max()) >= n):
        raise UserError(f"latent index out of range 0..{(n or 0) - 1}: {t.tolist()}")
    return t


class _Edit:
    """An edit function that knows its latent indices (checked against the dictionary at install time)."""

    def __init__(self, idx: int | Sequence[int], fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], desc: str,
                 shift: float | None = None):
        self.idx = _latent_index(idx)
        self.cols = torch.unique(self.idx)  # the only latents the edit can change (a repeated index counts once)
        self._fn = fn
        self.desc = desc
        # the edit adds this same number to each of ``cols`` whatever f is (add_scaled with a numeric ref): then
        # dec(edit(f)) - dec(f) = shift * sum_j W_dec[j] for every input, and sae_edit need not encode at all
        self.shift = shift

    def __call__(self, f: torch.Tensor) -> torch.Tensor:
        return self._fn(f, self.idx.to(f.device))

    def __repr__(self) -> str:
        return self.desc


def zero(idx: int | Sequence[int]) -> _Edit:
    """Set latents ``idx`` to 0 (ablation)."""

    def fn(f, i):
        f = f.clone()
        f[..., i] = 0
        return f

    return _Edit(idx, fn, f"zero({idx})")


def scale(idx: int | Sequence[int], factor: float) -> _Edit:
    """Multiply latents ``idx`` by ``factor`` (e.g. ×5 to amplify a planning feature)."""
    factor = float(factor)

    def fn(f, i):
        f = f.clone()
        f[..., i] = f[..., i] * factor
        return f

    return _Edit(idx, fn, f"scale({idx}, {factor})")


def clamp(idx: int | Sequence[int], value: float) -> _Edit:
    """Set latents ``idx`` to ``value`` at every edited position (active or not)."""
    value = float(value)

    def fn(f, i):
        f = f.clone()
        f[..., i] = value
        return f

    return _Edit(idx, fn, f"clamp({idx}, {value})")


def add_scaled(idx: int | Sequence[int], k: float, ref: float | str = "max") -> _Edit:
    """``f_j += k · ref`` for each latent j in ``idx``.

    ``ref``: ``"max"`` — the largest latent activation of the current forward over all latents and positions (the
    rule of the SAE-bias paper, P10: f_j ← f_j + k·max(f)); ``"latent_max"`` — latent j's own maximum in the current
    forward; or a number (e.g. the latent's maximum over a reference dataset). During KV-cached generation a forward
    sees one position, so the two data-dependent refs change per step; pass a number to hold it fixed. ``k = 0`` is
    the identity here (the P10 code uses k = 0 to mean ablation; use :func:`zero` for that).
    """
    k = float(k)
    if isinstance(ref, str):
        if ref not in ("max", "latent_max"):
            raise UserError(f"add_scaled: ref={ref!r}; allowed: 'max', 'latent_max' or a number")
    elif not isinstance(ref, int | float):
        raise UserError(f"add_scaled: ref must be 'max', 'latent_max' or a number, got {type(ref).__name__}")

    def fn(f, i):
        f = f.clone()
        if ref == "max":
            r = f.amax().expand(i.numel())
        elif ref == "latent_max":
            r = f[..., i].reshape(-1, i.numel()).amax(0)  # [len(idx)]
        else:
            r = torch.full((i.numel(),), float(ref), dtype=f.dtype, device=f.device)
        f[..., i] = f[..., i] + k * r
        return f

    return _Edit(idx, fn, f"add_scaled({idx}, {k}, ref={ref})", shift=None if isinstance(ref, str) else k * float(ref))


def _constant_difference(sae: SparseDictionary, edit_fn: _Edit) -> torch.Tensor:
    """``dec(edit(f)) − dec(f)`` for an edit that adds ``edit_fn.shift`` to its latents whatever ``f`` is: the
    vector ``shift · Σ_j W_dec[j] / input_scale`` ``[d_out]``, the same for every position and input, so no
    encoding is needed (equal to the encoded path up to float rounding; exactly zero for a zero shift)."""
    W = sae.W_dec
    out = edit_fn.shift * W[edit_fn.cols.to(W.device)].sum(0)
    return out / sae.input_scale if sae.input_scale != 1.0 else out


def _decoded_difference(sae: SparseDictionary, f: torch.Tensor, f2: torch.Tensor, edit_fn: EditFn) -> torch.Tensor:
    """``dec(f2) − dec(f)`` as one product: ``(f2 − f) · W_dec / input_scale`` (b_dec cancels).

    For the built-in edits only the columns they name can change, so the product runs over those rows of W_dec
    alone (a handful instead of n_latents). Unchanged latents give exact zeros, so an identity edit still returns
    a zero difference.
    """
    W = sae.W_dec
    if isinstance(edit_fn, _Edit):
        i = edit_fn.cols.to(f.device)
        out = (f2[..., i] - f[..., i]).to(W.dtype) @ W[i]
    else:
        out = (f2 - f).to(W.dtype) @ W
    return out / sae.input_scale if sae.input_scale != 1.0 else out


@contextmanager
def sae_edit(
    model: nn.Module,
    sae: SparseDictionary,
    edit_fn: EditFn,
    positions: Any = "all",
    *,
    site: str | None = None,
    output_site: str | None = None,
    prompt_len: int | None = None,
) -> Iterator[SparseDictionary]:
    """Edit the model's activations through ``sae`` while the context is open (hooks removed on exit).

    ``site`` / ``output_site`` default to ``sae.input_site`` / ``sae.output_site`` (the output site defaults to the
    input site: an SAE). Site names are the project's (``layers.{i}.resid_post``, ``layers.{i}.mlp.in``, …).
    """
    if not isinstance(sae, SparseDictionary):
        raise UserError(f"sae_edit needs an iclr26 SparseDictionary, got {type(sae).__name__} (see the loaders in "
                        "iclr26.interp.sae)")
    if not callable(edit_fn):
        raise UserError("sae_edit: edit_fn must be callable f -> f' (e.g. zero([3]), add_scaled(5, 4.0))")
    in_name = site or sae.input_site
    if in_name is None:
        raise UserError("sae_edit: the dictionary names no input site; pass site='layers.{i}.resid_post' (or "
                        "similar)")
    out_name = output_site or (sae.output_site if site is None else None) or in_name
    if isinstance(edit_fn, _Edit):
        _latent_index(edit_fn.idx.tolist(), sae.n_latents)
    ad = get_adapter(model)
    s_in, s_out = ad.resolve(in_name), ad.resolve(out_name)
    pos = _check_positions(positions)
    tracker = _Tracker(prompt_len)
    same = s_in.name == s_out.name
    state: dict[str, torch.Tensor] = {}

    def _check(x: torch.Tensor, want: int, where: str) -> None:
        if x.shape[-1] != want:
            raise UserError(f"{where}: activation width {x.shape[-1]} does not match the dictionary ({want})")

    def delta(x_in: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        if isinstance(edit_fn, _Edit) and edit_fn.shift is not None:  # a constant latent shift: no encoding needed
            d = _constant_difference(sae, edit_fn).to(like.dtype).expand_as(like)  # one [d_out] row, a view
            return _where(tracker.select(like.shape[1], pos, like.device), d, torch.zeros_like(d))
        f = sae.encode(x_in)
        f2 = edit_fn(f)
        if f2.shape != f.shape:
            raise UserError(f"sae_edit: edit_fn changed the latent shape {tuple(f.shape)} -> {tuple(f2.shape)}")
        d = _decoded_difference(sae, f, f2, edit_fn).to(like.dtype)
        return _where(tracker.select(like.shape[1], pos, like.device), d, torch.zeros_like(d))

    if same:
        def fn(x: torch.Tensor) -> torch.Tensor:
            _check(x, sae.d_in, s_in.name)
            return x + delta(x, x)

        edits = [(s_in, fn)]
    else:
        def read(x: torch.Tensor) -> torch.Tensor:
            _check(x, sae.d_in, s_in.name)
            state["f_in"] = x
            return x

        def write(y: torch.Tensor) -> torch.Tensor:
            _check(y, sae.d_out, s_out.name)
            x = state.pop("f_in", None)
            if x is None or x.shape[:2] != y.shape[:2]:
                raise UserError(f"sae_edit: {s_out.name} ran before {s_in.name}; a transcoder's input site must "
                                "come first in the forward")
            return y + delta(x, y)

        edits = [(s_in, read), (s_out, write)]
    with _install(model, edits, tracker):
        yield sae
