"""Planning features: transcoder latents at the last position that represent a word the model has yet to write.

"Latent Planning Emerges with Scale" (Hanna & Ameisen, ICLR 2026, arXiv 2604.12493). A model plans a word w when
an internal representation of w, before w is written, both causes w and shapes the context before it (the article
"an" before "accountant"). The paper finds such features with transcoders (input ``mlp.in``, output ``mlp.out``)
at the last prompt position and edits them. This module gives those pieces for any Hugging Face causal LM:

- :func:`train_transcoder` — a TopK transcoder ``mlp.in -> mlp.out`` (CPU-sized, seeded, unit-norm decoder rows);
  :func:`mlp_pairs` captures its training data;
- :func:`last_position_latents` — each transcoder's latents at the last token (left padding supported);
- :func:`lens_top_tokens` / :func:`select_planning_latents` — the output-logit criterion: a latent is a planning
  feature for w if it is active and w is among the ``top`` tokens its decoder row promotes through the unembedding
  (final norm weight applied); :func:`context_hits` — the top-activating-contexts criterion (w within ±window
  tokens of the activation peak in more than ``min_hits`` of a latent's top contexts);
- :func:`random_latents` — the baseline: as many latents, drawn per item from the other active latents;
- :func:`edited_logits` — last-position logits with latents edited as ``f' = f·mult + add`` (zero: mult 0;
  ×5: mult 5; steering: add). ``mode="all"``: the edit propagates freely (through :func:`~iclr26.interp.sae_edit.
  sae_edit`, error term kept); ``mode="direct"``: every layer's MLP output at that position is frozen at its clean
  value plus the edit's own decoder difference, so downstream transcoder features (and error terms) cannot carry it.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.seed import make_generator
from iclr26.interp.capture import capture
from iclr26.interp.hooks import replace_sites
from iclr26.interp.sae import SparseDictionary
from iclr26.interp.sae_edit import sae_edit
from iclr26.lm.sites import get_adapter

log = logging.getLogger(__name__)

MODES = ("all", "direct")
LatentMap = Mapping[int, torch.Tensor]  # layer -> [B, n_latents]


# ---------------------------------------------------------------------------------------------- transcoders
def mlp_pairs(model: nn.Module, batches: Any, layers: Sequence[int], *, positions: Any = "all") -> dict[int, tuple]:
    """``{layer: (X [N, d], Y [N, d])}``: ``layers.{i}.mlp.in`` and ``layers.{i}.mlp.out`` over ``batches``
    (pads never included), the training pairs of a transcoder."""
    sites = [s for i in layers for s in (f"layers.{i}.mlp.in", f"layers.{i}.mlp.out")]
    cap = capture(model, batches, sites, positions=positions, desc="mlp pairs")
    return {i: (cap[f"layers.{i}.mlp.in"], cap[f"layers.{i}.mlp.out"]) for i in layers}


def train_transcoder(
    X: torch.Tensor,
    Y: torch.Tensor,
    n_latents: int,
    k: int,
    *,
    steps: int = 1000,
    batch_size: int = 512,
    lr: float = 2e-3,
    seed: int = 0,
    input_site: str | None = None,
    output_site: str | None = None,
) -> tuple[SparseDictionary, dict[str, float]]:
    """Train a TopK transcoder ``Y ≈ dec(topk(enc(X)))`` with Adam; returns ``(dictionary, stats)``.

    Decoder rows are held at unit norm (their gradient component along the row is removed, then rows are
    renormalised), ``b_dec`` starts at the mean of ``Y`` and the encoder is not applied to ``X - b_dec``
    (``apply_b_dec_to_input=False``: input and output spaces differ). Batches are seeded permutations of the rows.
    ``stats``: ``fvu`` (fraction of the variance of Y unexplained, on all rows), ``l0``, ``dead_frac``.
    """
    X, Y = torch.as_tensor(X).float(), torch.as_tensor(Y).float()
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0] or X.shape[0] < 2:
        raise UserError(f"train_transcoder: X and Y must be [N, d] with the same N >= 2, got {tuple(X.shape)} and "
                        f"{tuple(Y.shape)}")
    if not 1 <= k <= n_latents:
        raise UserError(f"train_transcoder: need 1 <= k <= n_latents, got k={k}, n_latents={n_latents}")
    if steps < 1 or batch_size < 1 or not (lr > 0 and math.isfinite(lr)):
        raise UserError(f"train_transcoder: steps, batch_size and lr must be positive, got {steps}, {batch_size}, {lr}")
    N, d_in = X.shape
    d_out = Y.shape[1]
    tc = SparseDictionary(d_in, n_latents, d_out=d_out, activation="topk", k=k, apply_b_dec_to_input=False,
                          input_site=input_site, output_site=output_site)
    gen = make_generator(seed)
    with torch.no_grad():
        W = torch.randn(n_latents, d_out, generator=gen)
        tc.W_dec.copy_(W / W.norm(dim=1, keepdim=True))
        E = torch.randn(n_latents, d_in, generator=gen)
        # encoder rows of norm 0.5·|Y|/|X| (mean norms): a random latent starts at ~0.5·|Y|/sqrt(d_in), so the
        # first reconstructions are small against Y instead of overshooting it
        ratio = (Y - Y.mean(0)).norm(dim=1).mean() / X.norm(dim=1).mean().clamp_min(1e-6)
        tc.W_enc_T.copy_(E / E.norm(dim=1, keepdim=True) * 0.5 * ratio)
        tc.b_dec.copy_(Y.mean(0))
    opt = torch.optim.Adam(tc.parameters(), lr=lr, foreach=True)
    var = (Y - Y.mean(0)).pow(2).sum(1).mean().clamp_min(1e-12)
    B = min(batch_size, N)
    perm, at = torch.randperm(N, generator=gen), 0
    for _ in range(steps):
        if at + B > N:
            perm, at = torch.randperm(N, generator=gen), 0
        idx = perm[at: at + B]
        at += B
        x_hat = tc.decode(tc.encode(X[idx]))
        loss = (Y[idx] - x_hat).pow(2).sum(1).mean() / var
        opt.zero_grad(set_to_none=True)
        loss.backward()
        with torch.no_grad():
            Wd, g = tc.W_dec, tc.W_dec.grad
            g -= Wd * (g * Wd).sum(1, keepdim=True)
        opt.step()
        with torch.no_grad():
            tc.W_dec /= tc.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-8)
    tc.eval()
    with torch.no_grad():
        f = torch.cat([tc.encode(X[i: i + 4096]) for i in range(0, N, 4096)])
        fvu = float((Y - tc.decode(f)).pow(2).sum(1).mean() / var)
        stats = {"fvu": fvu, "l0": float((f > 0).sum(1).float().mean()),
                 "dead_frac": float(((f > 0).sum(0) == 0).float().mean())}
    return tc, stats


def _check_transcoders(model: nn.Module, transcoders: Mapping[int, SparseDictionary]) -> dict[int, SparseDictionary]:
    if not transcoders:
        raise UserError("planning: pass at least one {layer: transcoder}")
    n_layers = len(get_adapter(model).layers)
    out = {}
    for layer, tc in transcoders.items():
        if not isinstance(tc, SparseDictionary):
            raise UserError(f"planning: transcoder for layer {layer} is a {type(tc).__name__}, not a SparseDictionary")
        if not (isinstance(layer, int) and 0 <= layer < n_layers):
            raise UserError(f"planning: layer {layer!r} is not in 0..{n_layers - 1}")
        out[int(layer)] = tc
    return dict(sorted(out.items()))


def _check_ids(input_ids: Any, attention_mask: Any) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.as_tensor(input_ids)
    if ids.ndim != 2 or ids.shape[1] < 1 or ids.dtype.is_floating_point:
        raise UserError(f"planning: input_ids must be an integer tensor [B, T], got shape {tuple(ids.shape)}")
    am = torch.ones_like(ids) if attention_mask is None else torch.as_tensor(attention_mask)
    if am.shape != ids.shape:
        raise UserError(f"planning: attention_mask shape {tuple(am.shape)} != input_ids shape {tuple(ids.shape)}")
    if not bool(am[:, -1].bool().all()):
        raise UserError("planning: the last column must be a real token in every row (use left padding)")
    return ids.long(), am.long()


@torch.no_grad()
def last_position_latents(model: nn.Module, transcoders: Mapping[int, SparseDictionary], input_ids: Any,
                          attention_mask: Any = None) -> dict[int, torch.Tensor]:
    """``{layer: f [B, n]}``: each transcoder's latents at the last token (input ``layers.{layer}.mlp.in``)."""
    tcs = _check_transcoders(model, transcoders)
    ids, am = _check_ids(input_ids, attention_mask)
    sites = {i: (tc.input_site or f"layers.{i}.mlp.in") for i, tc in tcs.items()}
    cap = capture(model, {"input_ids": ids, "attention_mask": am}, list(dict.fromkeys(sites.values())),
                  positions="last", desc="last-position latents")
    return {i: tcs[i].encode(cap[s]) for i, s in sites.items()}


# ---------------------------------------------------------------------------------------------- selection
@torch.no_grad()
def lens_top_tokens(tc: SparseDictionary, unembed: Any, *, top: int = 10, candidates: Sequence[int] | None = None,
                    final_norm: nn.Module | None = None, sign: str = "pos",
                    latents: Sequence[int] | None = None) -> torch.Tensor:
    """``[n_latents, top]`` token ids each latent's decoder row most promotes (``sign="pos"``) or suppresses
    (``"neg"``) through the unembedding ``[vocab, d]``, among ``candidates`` (default: the whole vocabulary).
    ``latents`` computes only those rows (the others are ``-1``): with a 262k-token vocabulary, score only the
    latents that are active somewhere.

    The final norm's weight (``final_norm.weight``; Gemma's ``1 + weight``) scales each coordinate first, as in
    :func:`iclr26.interp.latents.logit_lens_latents`, which ranks latents for a token; this ranks tokens per latent.
    """
    W_U = torch.as_tensor(unembed).detach().float()
    if W_U.ndim != 2 or W_U.shape[1] != tc.d_out:
        raise UserError(f"lens_top_tokens: unembed must be [vocab, {tc.d_out}], got {tuple(W_U.shape)}")
    if sign not in ("pos", "neg"):
        raise UserError(f"lens_top_tokens: sign={sign!r}; allowed: pos, neg")
    cand = torch.arange(W_U.shape[0]) if candidates is None else torch.as_tensor(list(candidates), dtype=torch.long)
    if cand.numel() == 0 or int(cand.min()) < 0 or int(cand.max()) >= W_U.shape[0]:
        raise UserError(f"lens_top_tokens: candidates must be token ids in 0..{W_U.shape[0] - 1}")
    if not 1 <= top <= cand.numel():
        raise UserError(f"lens_top_tokens: top must be in 1..{cand.numel()}, got {top}")
    rows = torch.arange(tc.n_latents) if latents is None else torch.as_tensor(list(latents), dtype=torch.long)
    if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= tc.n_latents):
        raise UserError(f"lens_top_tokens: latents must be in 0..{tc.n_latents - 1}")
    D = tc.W_dec.detach().float()[rows]  # [r, d]
    if final_norm is not None and getattr(final_norm, "weight", None) is not None:
        w = final_norm.weight.detach().float()
        D = D * (1.0 + w if type(final_norm).__name__.startswith("Gemma") else w)
    cand, rows = cand.to(D.device), rows.to(D.device)  # checked on the CPU above; the table follows tc
    out = torch.full((tc.n_latents, top), -1, dtype=torch.long, device=D.device)
    Wc = W_U[cand]
    for lo in range(0, D.shape[0], 256):  # [256, |cand|] at a time
        s = D[lo: lo + 256] @ Wc.T
        out[rows[lo: lo + 256]] = cand[(s if sign == "pos" else -s).topk(top, dim=1).indices]
    return out


def select_planning_latents(latents: LatentMap, top_tokens: Mapping[int, torch.Tensor], targets: Any, *,
                            extra: Mapping[int, torch.Tensor] | None = None) -> dict[int, torch.Tensor]:
    """``{layer: bool [B, n]}``: latents active on row b (f > 0) whose ``top_tokens`` include ``targets[b]``
    (the planned word's first token), or-ed with ``extra[layer] [B, n]`` (another criterion, e.g. from
    :func:`context_hits`) restricted to active latents."""
    t = torch.as_tensor(targets).long().reshape(-1)
    out = {}
    for layer, f in latents.items():
        if layer not in top_tokens:
            raise UserError(f"select_planning_latents: no top tokens for layer {layer}")
        if f.ndim != 2 or f.shape[0] != t.numel():
            raise UserError(f"select_planning_latents: latents of layer {layer} are {tuple(f.shape)}, expected "
                            f"[{t.numel()}, n]")
        tt = top_tokens[layer].to(f.device)  # [n, top]
        hit = (tt[None, :, :] == t.to(f.device)[:, None, None]).any(-1)  # [B, n]
        if extra is not None and layer in extra:
            hit = hit | extra[layer].bool().to(f.device)
        out[layer] = hit & (f > 0)
    return out


@torch.no_grad()
def context_hits(F_sample: torch.Tensor, tokens: torch.Tensor, words: Sequence[int], *, top: int = 20,
                 window: int = 10) -> torch.Tensor:
    """``[n_latents, len(words)]``: in how many of each latent's ``top`` activating contexts ``words[w]`` occurs
    within ±``window`` tokens of the peak. ``F_sample [S, T, n]``: latents on a token sample ``tokens [S, T]``
    (pads may be marked with any id not in ``words``; give them latents ≤ 0 so they are never peaks)."""
    if F_sample.ndim != 3 or tokens.shape != F_sample.shape[:2]:
        raise UserError(f"context_hits: F_sample must be [S, T, n] over tokens [S, T], got {tuple(F_sample.shape)} "
                        f"and {tuple(tokens.shape)}")
    S, T, n = F_sample.shape
    top = min(top, S * T)
    flat = F_sample.reshape(S * T, n)
    val, where = flat.topk(top, dim=0)  # [top, n]
    s, t = where // T, where % T
    offs = torch.arange(-window, window + 1, device=t.device)
    tt = (t[..., None] + offs).clamp(0, T - 1)  # [top, n, 2w+1]
    inside = ((t[..., None] + offs) >= 0) & ((t[..., None] + offs) < T)
    ctx = torch.where(inside, tokens[s[..., None].expand_as(tt), tt], torch.full_like(tt, -1))
    w = torch.as_tensor(list(words), dtype=ctx.dtype, device=ctx.device)
    present = (ctx[..., None] == w).any(2)  # [top, n, |words|]
    present &= (val > 0)[..., None]
    return present.sum(0)


def random_latents(latents: LatentMap, chosen: Mapping[int, torch.Tensor], *, n_draws: int, seed: int = 0,
                   exclude_chosen: bool = True) -> list[dict[int, torch.Tensor]]:
    """``n_draws`` baselines: for each row, as many latents as ``chosen`` holds on that row (over all layers), drawn
    uniformly from that row's active latents (f > 0, all layers pooled; the chosen ones left out if
    ``exclude_chosen``). A row whose pool is too small gets the whole pool."""
    if n_draws < 1:
        raise UserError(f"random_latents: n_draws must be >= 1, got {n_draws}")
    layers = sorted(latents)
    act = torch.cat([latents[i] > 0 for i in layers], 1)  # [B, L*n]
    ch = torch.cat([chosen[i].bool() for i in layers], 1)
    widths = [latents[i].shape[1] for i in layers]
    pool = act & ~ch if exclude_chosen else act
    count = ch.sum(1)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_draws):
        m = torch.zeros_like(act)
        for b in range(act.shape[0]):
            c = int(count[b])
            cand = pool[b].nonzero().reshape(-1).numpy()
            if c and cand.size:
                m[b, torch.as_tensor(rng.choice(cand, min(c, cand.size), replace=False))] = True
        draws.append(dict(zip(layers, torch.split(m, widths, 1), strict=True)))
    return draws


# ---------------------------------------------------------------------------------------------- interventions
def _edit_last(f: torch.Tensor, mult: torch.Tensor | None, add: torch.Tensor | None) -> torch.Tensor:
    """``f [B, T, n]`` with the last position replaced by ``f·mult + add`` (rows of mult/add: [B, n])."""
    last = f[:, -1]
    new = last * mult.to(last) if mult is not None else last
    new = new + add.to(last) if add is not None else new
    return torch.cat([f[:, :-1], new[:, None]], 1)


@torch.no_grad()
def edited_logits(
    model: nn.Module,
    transcoders: Mapping[int, SparseDictionary],
    input_ids: Any,
    attention_mask: Any = None,
    *,
    mult: LatentMap | None = None,
    add: LatentMap | None = None,
    mode: str = "all",
    batch_size: int = 256,
    _prefix: tuple[Any, int] | None = None,
) -> torch.Tensor:
    """Last-position logits ``[B, vocab]`` with each transcoder's last-position latents edited to
    ``f·mult[layer] + add[layer]`` (``[B, n]`` each; a missing layer is unedited).

    ``mode="all"``: the edits are spliced in with :func:`~iclr26.interp.sae_edit.sae_edit` (error term kept) and
    propagate freely. ``mode="direct"``: a clean forward first records each layer's ``mlp.out`` and each
    transcoder's latents at the last position; in the edited forward every layer's ``mlp.out`` there is its clean
    value plus ``dec(f_clean·mult + add) - dec(f_clean)`` for its own edit, so no downstream MLP or transcoder
    feature responds to an upstream edit (attention still does). With no edit both modes return the clean logits.

    One prompt (``input_ids [1, T]``) with ``R`` rows of edits runs its first ``T - 1`` tokens once and the last
    token ``R`` times from the key/value cache (all edits act at the last position only).
    """
    if mode not in MODES:
        raise UserError(f"edited_logits: mode={mode!r}; allowed: {', '.join(MODES)}")
    tcs = _check_transcoders(model, transcoders)
    ids, am = _check_ids(input_ids, attention_mask)
    rows = {t.shape[0] for m in (mult, add) for t in (m or {}).values()}
    if ids.shape[0] == 1 and rows - {1}:
        # one prompt, R edit variants: run the shared prefix once, then only the last token R times
        if len(rows) != 1:
            raise UserError(f"edited_logits: mult/add disagree on the number of variants: {sorted(rows)}")
        return _variants(model, tcs, ids, am, mult, add, mode, batch_size, rows.pop())
    B = ids.shape[0]
    for name, m in (("mult", mult), ("add", add)):
        for layer, t in (m or {}).items():
            if layer not in tcs:
                raise UserError(f"edited_logits: {name} names layer {layer}, which has no transcoder")
            if tuple(t.shape) != (B, tcs[layer].n_latents):
                raise UserError(f"edited_logits: {name}[{layer}] has shape {tuple(t.shape)}, expected "
                                f"({B}, {tcs[layer].n_latents})")
    if batch_size < 1:
        raise UserError(f"edited_logits: batch_size must be >= 1, got {batch_size}")
    mult, add = dict(mult or {}), dict(add or {})
    n_layers = len(get_adapter(model).layers)
    cache, n_prefix = (_prefix or (None, 0))
    chunk: dict[str, slice] = {}
    was_training = model.training
    model.eval()

    def sl(m: dict, layer: int) -> torch.Tensor | None:
        return m[layer][chunk["rows"]] if layer in m else None

    kw = _keep_last(model)

    def forward(i: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        if cache is not None:
            c = copy.deepcopy(cache)
            c.batch_repeat_interleave(i.shape[0])
            a = torch.ones(i.shape[0], n_prefix + 1, dtype=torch.long, device=i.device)
            return model(input_ids=i[:, -1:], attention_mask=a, use_cache=True, **{_cache_kw(model): c},
                         **kw).logits[:, -1].float()
        return model(input_ids=i, attention_mask=a, **kw).logits[:, -1].float()

    outs = []
    try:
        for lo in range(0, B, batch_size):
            chunk["rows"] = slice(lo, lo + batch_size)
            i, a = ids[chunk["rows"]], am[chunk["rows"]]
            if mode == "all":
                with ExitStack() as stack:
                    for layer, tc in tcs.items():
                        if layer in mult or layer in add:
                            stack.enter_context(sae_edit(
                                model, tc, lambda f, layer=layer: _edit_last(f, sl(mult, layer), sl(add, layer)),
                                site=tc.input_site or f"layers.{layer}.mlp.in",
                                output_site=tc.output_site or f"layers.{layer}.mlp.out"))
                    outs.append(forward(i, a))
                continue
            outs.append(_direct(model, tcs, n_layers, i, a, {ly: sl(mult, ly) for ly in mult},
                                {ly: sl(add, ly) for ly in add}, forward))
    finally:
        model.train(was_training)
    return torch.cat(outs)


def _direct(model, tcs, n_layers, i, a, mult, add, forward) -> torch.Tensor:
    """One chunk of the direct mode: record the clean last-position ``mlp.out`` of every layer and each
    transcoder's input, then rerun with every ``mlp.out`` there frozen at clean + its own edit's decoder difference."""
    clean: dict[str, torch.Tensor] = {}

    def rec(key):
        def fn(x):
            clean[key] = x[:, -1].detach().clone()
        return fn

    reads = {f"layers.{j}.mlp.out": rec(f"out{j}") for j in range(n_layers)}
    for layer, tc in tcs.items():
        reads[tc.input_site or f"layers.{layer}.mlp.in"] = rec(f"in{layer}")
    with replace_sites(model, reads):
        forward(i, a)
    delta = {}
    for layer, tc in tcs.items():
        f = tc.encode(clean[f"in{layer}"])  # [b, n]
        f2 = _edit_last(f[:, None], mult.get(layer), add.get(layer))[:, 0]
        delta[layer] = tc.decode(f2) - tc.decode(f)

    def frozen(j):
        def fn(x):
            v = clean[f"out{j}"] + delta[j] if j in delta else clean[f"out{j}"]
            return torch.cat([x[:, :-1], v[:, None].to(x)], 1)
        return fn

    with replace_sites(model, {f"layers.{j}.mlp.out": frozen(j) for j in range(n_layers)}):
        return forward(i, a)


def _keep_last(model: nn.Module) -> dict[str, int]:
    """``logits_to_keep=1`` where the model's forward takes it (the LM head on the last position only)."""
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}


def _cache_kw(model: nn.Module) -> str:
    """The forward's key/value-cache argument: ``cache`` (transformers >= 5.x) or ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@torch.no_grad()
def _variants(model, tcs, ids, am, mult, add, mode, batch_size, R) -> torch.Tensor:
    if ids.shape[1] < 2:
        rep = {k: v for k, v in (("mult", mult), ("add", add)) if v}
        return edited_logits(model, tcs, ids.expand(R, -1), am.expand(R, -1), mode=mode, batch_size=batch_size,
                             **rep)
    if not bool(am.bool().all()):
        raise UserError("edited_logits: a single prompt with edit variants must not be padded")
    was_training = model.training
    model.eval()
    try:
        out = model(input_ids=ids[:, :-1], use_cache=True)
    finally:
        model.train(was_training)
    cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    if cache is None or not hasattr(cache, "batch_repeat_interleave"):
        rep = {k: v for k, v in (("mult", mult), ("add", add)) if v}
        return edited_logits(model, tcs, ids.expand(R, -1), am.expand(R, -1), mode=mode, batch_size=batch_size,
                             **rep)
    return edited_logits(model, tcs, ids.expand(R, -1), am.expand(R, -1), mult=mult, add=add, mode=mode,
                         batch_size=batch_size, _prefix=(cache, ids.shape[1] - 1))


def masks_to_mult(masks: LatentMap, factor: float) -> dict[int, torch.Tensor]:
    """``{layer: [B, n]}`` multipliers: ``factor`` where the mask is set, 1 elsewhere (zero: 0; ×5: 5)."""
    return {i: torch.where(m.bool(), torch.tensor(float(factor)), torch.tensor(1.0)) for i, m in masks.items()}


def article_prob(logits: torch.Tensor, token_ids: Any) -> torch.Tensor:
    """``[B]``: softmax probability of ``token_ids[b]`` in row b of ``logits [B, vocab]``."""
    t = torch.as_tensor(token_ids, device=logits.device).long().reshape(-1)
    return F.softmax(logits.float(), -1).gather(1, t[:, None])[:, 0]
