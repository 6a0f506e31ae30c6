"""Gradient attribution on named sites of any HF model: activation × gradient and attribution patching.

Interpretability core (interp-core §6), used by the neuron-level reproductions (culture neurons, reasoning-induced
misalignment, SAE bias latents). Two estimators, both on the site names of :mod:`iclr26.lm.sites`:

- :func:`act_x_grad` — ``s = a ⊙ ∂m/∂a`` per unit, for a per-example scalar metric ``m`` (gold-token probability,
  a logit difference, ...), reduced over positions inside the loop (``max`` / ``sum`` / ``mean`` / ``last`` /
  ``none``) and returned per example in fp32.
- :func:`atp` — attribution patching: the first-order estimate of ``m(patched) − m(clean)`` when a site's
  activation is replaced by its value on a *patch* input (or by zero), ``(a_patch − a_clean) · ∇m``; with
  ``steps > 1`` the gradient is averaged along the straight path a_clean → a_patch (integrated gradients, midpoint
  rule), which is exact for a metric that is linear along the path and converges to the true effect otherwise.

How the gradient is taken: every parameter is frozen for the call (``requires_grad`` restored afterwards) and each
requested site's output is replaced by ``a + z`` with a zero leaf ``z`` that requires grad. ``∂m/∂z = ∂m/∂a`` is the
*total* derivative (paths through later requested sites included), the graph only exists downstream of the first
requested site, and no parameter gradient is ever allocated. Per-example metrics are summed before one backward
pass, which is valid because examples in a batch do not interact in eval mode; models with batch-coupled modules
(batch norm in training mode) are refused.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.progress import progress
from iclr26.interp.capture import _normalise_batches, _reduce, forward_kwargs, select_positions
from iclr26.interp.hooks import eval_mode, hooks, register_replace_hook
from iclr26.lm.sites import get_adapter

REDUCE_POS = ("max", "sum", "mean", "last", "none")
Metric = Callable[[torch.Tensor, Mapping[str, torch.Tensor]], torch.Tensor]


# ------------------------------------------------------------------------------------------------ metrics
def gold_prob(targets: torch.Tensor | Sequence[int], position: int = -1, *, log: bool = False) -> Metric:
    """Metric: probability (or log-probability) of ``targets[b]`` predicted at ``position`` of each row.

    ``position`` counts within the row's real tokens (``-1`` = the last one, the next-token prediction of a
    prompt), so left and right padding give the same value.
    """
    tg = torch.as_tensor(targets, dtype=torch.long)

    def metric(logits: torch.Tensor, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        pos = _row_positions(batch, position, logits.device) - int(batch.get("_logits_offset", 0))
        lp = torch.log_softmax(_fp32_at_least(logits[torch.arange(logits.shape[0], device=logits.device), pos]), -1)
        t = _slice_targets(tg, batch, logits.device)
        v = lp.gather(1, t[:, None]).squeeze(1)
        return v if log else v.exp()

    metric.reads_position = position
    return metric


def logit_diff(good: torch.Tensor | Sequence[int], bad: torch.Tensor | Sequence[int], position: int = -1) -> Metric:
    """Metric: ``logit[good[b]] − logit[bad[b]]`` at ``position`` (counted within real tokens) of each row."""
    g, b = torch.as_tensor(good, dtype=torch.long), torch.as_tensor(bad, dtype=torch.long)

    def metric(logits: torch.Tensor, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        pos = _row_positions(batch, position, logits.device) - int(batch.get("_logits_offset", 0))
        row = _fp32_at_least(logits[torch.arange(logits.shape[0], device=logits.device), pos])
        gi, bi = _slice_targets(g, batch, logits.device), _slice_targets(b, batch, logits.device)
        return row.gather(1, gi[:, None]).squeeze(1) - row.gather(1, bi[:, None]).squeeze(1)

    metric.reads_position = position
    return metric


def _fp32_at_least(x: torch.Tensor) -> torch.Tensor:
    """bf16/fp16 -> fp32; fp32 and fp64 unchanged."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _row_positions(batch: Mapping[str, torch.Tensor], position: int, device) -> torch.Tensor:
    am = batch["attention_mask"].to(device).bool()
    n = am.sum(1)
    rank = am.long().cumsum(1) - 1
    want = position if position >= 0 else n + position
    want = torch.as_tensor(want, device=device).expand(am.shape[0])
    if ((want < 0) | (want >= n)).any():
        raise UserError(f"metric position {position} is out of range for a row with {int(n.min())} real tokens")
    return ((rank == want[:, None]) & am).long().argmax(1)


def _slice_targets(t: torch.Tensor, batch: Mapping[str, Any], device) -> torch.Tensor:
    """Targets for the rows of this batch: a scalar broadcasts; a vector is sliced by ``batch['_row0']``."""
    B = batch["attention_mask"].shape[0]
    if t.dim() == 0:
        return t.expand(B).to(device)
    r0 = int(batch.get("_row0", 0))
    if t.shape[0] < r0 + B:
        raise UserError(f"metric targets have {t.shape[0]} entries, fewer than the {r0 + B} examples seen")
    return t[r0 : r0 + B].to(device)


# ------------------------------------------------------------------------------------------------ results
@dataclass
class Attribution:
    """Per-example attribution scores per site.

    ``scores[site]``: fp32 on CPU, ``[N, *feat]`` for a position reduction, ``[N_selected, *feat]`` for
    ``reduce_pos="none"`` (rows of ``index``). ``metric``: the metric on the clean input, ``[N]``.
    For :func:`atp`, scores estimate ``m(patched) − m(clean)`` for patching that unit alone (positive = patching
    raises the metric).
    """

    scores: dict[str, torch.Tensor]
    metric: torch.Tensor
    reduce_pos: str
    method: str
    index: torch.Tensor | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, site: str) -> torch.Tensor:
        if site not in self.scores:
            raise UserError(f"no attribution for site {site!r}; have {', '.join(self.scores)}")
        return self.scores[site]

    def total(self, site: str) -> torch.Tensor:
        """Scores summed over examples (the per-unit total used to rank units), fp32 ``[*feat]``."""
        return self[site].sum(0)


# ------------------------------------------------------------------------------------------------ plumbing
def _check_batch_coupling(model: nn.Module) -> None:
    for name, mod in model.named_modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm) and (not mod.track_running_stats):
            raise UserError(
                f"{name or type(mod).__name__} couples the examples of a batch (batch norm without running "
                "statistics); per-example gradients of a summed metric would be wrong — run one example per batch"
            )


@contextmanager
def _frozen(model: nn.Module):
    flags = [(p, p.requires_grad) for p in model.parameters()]
    try:
        for p, _ in flags:
            p.requires_grad_(False)
        yield
    finally:
        for p, f in flags:
            p.requires_grad_(f)


def _resolve(model: nn.Module, sites: str | Sequence[str]):
    names = [sites] if isinstance(sites, str) else list(sites)
    if not names:
        raise UserError("attribution needs at least one site name")
    adapter = get_adapter(model)
    resolved = list({s.name: s for s in (adapter.resolve(n) for n in names)}.values())
    for s in resolved:
        if s.read_only:
            raise UserError(f"{s.name} cannot carry a gradient leaf: {s.read_only}")
    return resolved


def _forward(model, params, batch, ids, am, device, metric, edits):
    """One forward pass with ``edits[site](x) -> x'`` installed; returns the metric [B] (graph kept)."""

    def install(handles):
        for site, fn in edits:
            handles.append(register_replace_hook(site, fn))

    kw = forward_kwargs(params, batch, ids, am, device)
    offset = _logits_offset(metric, am)
    if offset and "logits_to_keep" in params:
        # the metric reads one position per row: compute the LM head from the earliest of them on, not at
        # every token (on a 262k-vocabulary model the head dominates time and graph memory)
        kw["logits_to_keep"] = ids.shape[1] - offset
    else:
        offset = 0
    with hooks(install):
        out = model(**kw)
    logits = out.logits if hasattr(out, "logits") else out[0]
    m = metric(logits, {**batch, "input_ids": ids.to(device), "attention_mask": am.to(device), "_logits_offset": offset})
    if not isinstance(m, torch.Tensor) or m.shape != (ids.shape[0],):
        raise UserError(
            f"metric must return a tensor of shape [batch]={ids.shape[0]}, got "
            f"{tuple(m.shape) if isinstance(m, torch.Tensor) else type(m).__name__}"
        )
    return m


def _logits_offset(metric: Metric, am: torch.Tensor) -> int:
    """First padded-sequence position whose logits ``metric`` reads (0 = all, or unknown)."""
    p = getattr(metric, "reads_position", None)
    if not isinstance(p, int):
        return 0
    amb = am.bool()
    n = amb.sum(1)
    want = p if p >= 0 else n + p
    if (torch.as_tensor(want) < 0).any() or (torch.as_tensor(want) >= n).any():
        return 0  # let the metric raise its own error
    rank = amb.long().cumsum(1) - 1
    pos = ((rank == torch.as_tensor(want).expand(am.shape[0])[:, None]) & amb).long().argmax(1)
    return int(pos.min())


def _iter(batches):
    row0 = 0
    for batch in _normalise_batches(batches):
        batch = dict(batch) if isinstance(batch, Mapping) else {"input_ids": batch}
        if "input_ids" not in batch:
            raise UserError(f"each batch needs input_ids; got keys {sorted(batch)}")
        ids = torch.as_tensor(batch["input_ids"])
        ids = ids.unsqueeze(0) if ids.dim() == 1 else ids
        am = batch.get("attention_mask")
        am = torch.ones_like(ids) if am is None else torch.as_tensor(am)
        batch["_row0"] = row0
        yield batch, ids, am
        row0 += ids.shape[0]


# ------------------------------------------------------------------------------------------------ act × grad
def act_x_grad(
    model: nn.Module,
    batches: Any,
    sites: str | Sequence[str],
    metric: Metric,
    reduce_pos: str = "max",
    *,
    positions: Any = "all",
    desc: str = "act_x_grad",
) -> Attribution:
    """Activation × gradient ``a ⊙ ∂m/∂a`` at ``sites`` for every example, reduced over ``positions``.

    ``metric(logits, batch) -> [B]`` is a per-example scalar (see :func:`gold_prob`, :func:`logit_diff`; ``batch``
    carries ``input_ids``, ``attention_mask`` and ``_row0``, the index of its first example, for per-example
    targets). ``positions`` selects the token positions whose scores enter the reduction (as in
    :func:`iclr26.interp.capture.capture`; pads never enter). ``reduce_pos``: ``max`` (the culture-neuron rule),
    ``sum``, ``mean``, ``last`` or ``none``. Scores are accumulated in fp32 even for bf16 models.
    """
    if reduce_pos not in REDUCE_POS:
        raise UserError(f"reduce_pos={reduce_pos!r}; choose from {', '.join(REDUCE_POS)}")
    resolved = _resolve(model, sites)
    _check_batch_coupling(model)
    params = set(inspect.signature(model.forward).parameters)
    device = next(model.parameters()).device
    acc: dict[str, list[torch.Tensor]] = {s.name: [] for s in resolved}
    metrics, index = [], []
    need_eager = any(s.needs_eager for s in resolved)
    with eval_mode(model, need_eager), _frozen(model), torch.enable_grad():
        for batch, ids, am in progress(_iter(batches), desc=desc):
            leaves: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

            def make(site, leaves=leaves):
                def fn(x):
                    if site.name in leaves:
                        raise RuntimeError(f"{site.name}: module {site.module_name} ran twice in one forward pass")
                    z = torch.zeros_like(x, requires_grad=True)
                    leaves[site.name] = (x.detach(), z)
                    return x + z

                return fn

            m = _forward(model, params, batch, ids, am, device, metric, [(s, make(s)) for s in resolved])
            missing = [s.name for s in resolved if s.name not in leaves]
            if missing:
                raise RuntimeError(f"sites {missing} did not fire during the forward pass")
            names = list(leaves)
            grads = torch.autograd.grad(m.sum(), [leaves[n][1] for n in names], allow_unused=True)
            sel = select_positions(positions, ids, am).to(device)
            for n, g in zip(names, grads, strict=True):
                a = leaves[n][0]
                g = torch.zeros_like(a) if g is None else g
                acc[n].append(_reduce(_fp32_at_least(a) * _fp32_at_least(g), sel, reduce_pos).cpu())
            metrics.append(m.detach().float().cpu())
            if reduce_pos == "none":
                index.append(sel.cpu().nonzero() + torch.tensor([batch["_row0"], 0]))
    if not metrics:
        raise UserError("act_x_grad got no batches")
    return Attribution(
        scores={n: torch.cat(v) for n, v in acc.items()},
        metric=torch.cat(metrics),
        reduce_pos=reduce_pos,
        method="act_x_grad",
        index=torch.cat(index) if index else None,
    )


# ------------------------------------------------------------------------------------------------ patching
def atp(
    model: nn.Module,
    clean: Any,
    sites: str | Sequence[str],
    metric: Metric,
    *,
    patch: Any = None,
    steps: int = 1,
    reduce_pos: str = "sum",
    positions: Any = "all",
    desc: str = "atp",
) -> Attribution:
    """Attribution patching: per-unit estimate of ``m(patched) − m(clean)``.

    ``clean`` and ``patch`` are batch iterables of the same shapes (counterfactual pairs of equal token length);
    ``patch=None`` patches in zeros (zero ablation). ``steps == 1`` is plain AtP, ``(a_p − a_c) · ∇m(a_c)``;
    ``steps > 1`` averages ∇m at the midpoints ``a_c + α (a_p − a_c)``, α = (k + ½)/steps (integrated gradients,
    one site interpolated at a time, the others clean). The per-unit, per-position effects are reduced over
    ``positions`` with ``reduce_pos`` (``sum`` estimates patching the unit at all selected positions at once).
    """
    if reduce_pos not in REDUCE_POS:
        raise UserError(f"reduce_pos={reduce_pos!r}; choose from {', '.join(REDUCE_POS)}")
    if not isinstance(steps, int) or steps < 1:
        raise UserError(f"atp steps must be an integer >= 1, got {steps!r}")
    resolved = _resolve(model, sites)
    _check_batch_coupling(model)
    params = set(inspect.signature(model.forward).parameters)
    device = next(model.parameters()).device
    need_eager = any(s.needs_eager for s in resolved)
    clean_list = list(_iter(clean))
    patch_list = list(_iter(patch)) if patch is not None else [None] * len(clean_list)
    if len(patch_list) != len(clean_list):
        raise UserError(f"atp: {len(clean_list)} clean batches but {len(patch_list)} patch batches")
    acc: dict[str, list[torch.Tensor]] = {s.name: [] for s in resolved}
    metrics, index = [], []
    with eval_mode(model, need_eager), _frozen(model), torch.no_grad():
        for (batch, ids, am), pb in progress(list(zip(clean_list, patch_list, strict=True)), desc=desc):
            # clean and patch activations of every site (no graph)
            store: dict[str, torch.Tensor] = {}

            def reader(site, into):
                def fn(x):
                    into[site.name] = x.detach().clone()
                    return None

                return fn

            m_clean = _forward(model, params, batch, ids, am, device, metric, [(s, reader(s, store)) for s in resolved])
            if pb is not None:
                pstore: dict[str, torch.Tensor] = {}
                _, pids, pam = pb
                if pids.shape != ids.shape:
                    raise UserError(f"atp: patch batch shape {tuple(pids.shape)} != clean {tuple(ids.shape)}")
                _forward(model, params, pb[0], pids, pam, device, metric, [(s, reader(s, pstore)) for s in resolved])
            else:
                pstore = {n: torch.zeros_like(v) for n, v in store.items()}
            sel = select_positions(positions, ids, am).to(device)
            for site in resolved:
                a_c, a_p = store[site.name], pstore[site.name]
                if a_p.shape != a_c.shape:
                    raise UserError(f"atp: {site.name} has shape {tuple(a_p.shape)} on the patch, {tuple(a_c.shape)} clean")
                gsum = torch.zeros_like(_fp32_at_least(a_c))
                for k in range(steps):
                    # plain AtP (steps=1): the gradient at the clean activation; IG: midpoints of the path
                    alpha = 0.0 if steps == 1 else (k + 0.5) / steps
                    z = torch.zeros_like(a_c, requires_grad=True)
                    point = a_c + alpha * (a_p - a_c)

                    def set_point(x, z=z, point=point):
                        return point + z

                    with torch.enable_grad():
                        m = _forward(model, params, batch, ids, am, device, metric, [(site, set_point)])
                        (g,) = torch.autograd.grad(m.sum(), [z], allow_unused=True)
                    if g is not None:
                        gsum += _fp32_at_least(g)
                eff = _fp32_at_least(a_p - a_c) * gsum / steps
                acc[site.name].append(_reduce(eff, sel, reduce_pos).cpu())
            metrics.append(m_clean.float().cpu())
            if reduce_pos == "none":
                index.append(sel.cpu().nonzero() + torch.tensor([batch["_row0"], 0]))
    if not metrics:
        raise UserError("atp got no batches")
    return Attribution(
        scores={n: torch.cat(v) for n, v in acc.items()},
        metric=torch.cat(metrics),
        reduce_pos=reduce_pos,
        method="atp" if steps == 1 else f"atp_ig{steps}",
        index=torch.cat(index) if index else None,
        extra={"steps": steps, "baseline": "patch" if patch is not None else "zero"},
    )


def atp_ig(model: nn.Module, clean: Any, sites: str | Sequence[str], metric: Metric, *, steps: int = 16,
           **kw) -> Attribution:  # fmt: skip
    """:func:`atp` with the integrated-gradients path average over ``steps`` midpoints (default 16)."""
    if not isinstance(steps, int) or steps < 2:
        raise UserError(f"atp_ig needs steps >= 2 (steps=1 is plain atp), got {steps!r}")
    return atp(model, clean, sites, metric, steps=steps, **kw)
