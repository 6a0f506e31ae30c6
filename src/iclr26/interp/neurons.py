"""Safety-critical neurons, Reciprocal Activation Shift and first-token attention heads.

When Thinking Backfires: Mechanistic Insights Into Reasoning-Induced Misalignment (Yan et al., ICLR 2026,
arXiv 2509.00544). Units (MLP neurons, any flat site) are scored by their max-pooled activation per input;
counterfactual pairs (a request the model fulfils vs a minimal paraphrase it refuses) give one top-m set per
pair and their intersection ``A_safe``. The Reciprocal Activation Shift (RAS) measures how a neuron set is
pulled in opposite directions by fine-tuning: the mean reciprocal drop on safety inputs (delta-minus), the mean
reciprocal rise on task inputs (delta-plus), and their harmonic mean. Refusal heads are those whose attention
argmax from the position that emits the first answer token moves onto the empty think span in no-think mode.

Works on any Hugging Face causal LM through :mod:`iclr26.interp.capture` site names (``layers.{i}.mlp.act``,
``layers.{i}.attn.pattern``, ``logits``)::

    acts, layout = max_pooled_activations(model, batches, [f"layers.{i}.mlp.act" for i in range(L)])
    sets = counterfactual_unit_sets(acts_refused, acts_fulfilled, m=64)      # sets.safe: A_safe
    r = reciprocal_activation_shift(a0_safe[:, sets.safe], at_safe[:, sets.safe],
                                    a0_task[:, sets.safe], at_task[:, sets.safe])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.interp.capture import capture

log = logging.getLogger(__name__)

EPS_RULES = ("abs", "raw")


# ---------------------------------------------------------------------------------------------- activations
def max_pooled_activations(
    model: nn.Module, batches: Any, sites: str | Sequence[str], *, positions: Any = "all"
) -> tuple[torch.Tensor, list[tuple[str, int, int]]]:
    """Per-input max over the selected tokens of each unit at ``sites``: ``[N_inputs, sum of widths]``.

    The max is taken inside the capture hook (padding excluded via the attention mask), so only one vector per
    input and site leaves the forward pass. ``layout`` lists ``(site, start, width)`` of each site's block in the
    concatenated unit axis (unit ``start + j`` is channel ``j`` of ``site``).
    """
    names = [sites] if isinstance(sites, str) else list(sites)
    if not names:
        raise UserError("max_pooled_activations needs at least one site name")
    cap = capture(model, batches, names, positions=positions, reduce="max", desc="max-pool")
    blocks, layout, start = [], [], 0
    for name in cap.sites:
        x = cap[name]
        if x.ndim != 2:
            raise UserError(f"max_pooled_activations: {name} is not a flat site (shape {tuple(x.shape)}); "
                            "use a site such as layers.{i}.mlp.act")
        blocks.append(x)
        layout.append((name, start, int(x.shape[1])))
        start += int(x.shape[1])
    acts = torch.cat(blocks, dim=1)
    if torch.isnan(acts).any():
        raise UserError("max_pooled_activations: an input had no selected token (empty row or positions)")
    return acts, layout


def unit_site(layout: Sequence[tuple[str, int, int]], units: Any) -> dict[str, list[int]]:
    """Group flat unit indices by site: ``{site: [channel, ...]}`` (for :func:`edit_units` per site)."""
    idx = torch.as_tensor(units).long().reshape(-1).tolist()
    total = sum(w for _, _, w in layout)
    out: dict[str, list[int]] = {}
    for u in idx:
        if not 0 <= u < total:
            raise UserError(f"unit_site: unit {u} out of range 0..{total - 1}")
        for name, s, w in layout:
            if s <= u < s + w:
                out.setdefault(name, []).append(u - s)
                break
    return out


# ---------------------------------------------------------------------------------------------- unit sets
def _as_2d(x: Any, what: str) -> torch.Tensor:
    t = torch.as_tensor(x).float()
    if t.ndim == 1:
        t = t[None]
    if t.ndim != 2 or t.shape[1] == 0:
        raise UserError(f"{what} must be [units] or [pairs, units], got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise UserError(f"{what} contains NaN or inf")
    return t


def top_m_units(diff: Any, m: int) -> torch.Tensor:
    """Indices of the ``m`` largest entries of ``diff`` (``[U]`` -> ``[m]``, ``[K, U]`` -> ``[K, m]``).

    Ties are broken towards the lower index (a stable sort), so the result is deterministic.
    """
    t = torch.as_tensor(diff).float()
    if t.ndim not in (1, 2) or t.shape[-1] == 0:
        raise UserError(f"top_m_units: diff must be [units] or [pairs, units], got shape {tuple(t.shape)}")
    if not (isinstance(m, int) and 1 <= m <= t.shape[-1]):
        raise UserError(f"top_m_units: m must be an int in 1..{t.shape[-1]}, got {m!r}")
    return torch.sort(t, dim=-1, descending=True, stable=True).indices[..., :m]


@dataclass
class UnitSets:
    """Result of :func:`counterfactual_unit_sets`.

    ``sets`` [K, m]: top-m units of each pair; ``counts`` [U]: in how many sets each unit lies; ``safe``: units
    in every set (A_safe, sorted); ``soft``: units in at least ``ceil(q * K)`` sets; ``m``, ``q``.
    ``reached``: False only from :func:`smallest_m_on_grid` when no m on its grid gave a set of the asked size
    (the sets are then the largest m's, smaller than asked).
    """

    sets: torch.Tensor
    counts: torch.Tensor
    safe: torch.Tensor
    soft: torch.Tensor
    m: int
    q: float
    reached: bool = True

    @property
    def n_units(self) -> int:
        return int(self.counts.numel())


def counterfactual_unit_sets(acts_pos: Any, acts_neg: Any, m: int, *, q: float = 0.8) -> UnitSets:
    """Top-m units of ``acts_pos[k] - acts_neg[k]`` per pair k, their intersection and the "≥ q of sets" rule.

    ``acts_pos`` / ``acts_neg``: ``[K, U]`` max-pooled activations on the counterfactual pairs (pos = the
    variant that makes refusal explicit, neg = the request the model fulfils), row k of one paired with row k
    of the other.
    """
    p, n = _as_2d(acts_pos, "acts_pos"), _as_2d(acts_neg, "acts_neg")
    if p.shape != n.shape:
        raise UserError(f"counterfactual_unit_sets: acts_pos {tuple(p.shape)} and acts_neg {tuple(n.shape)} differ")
    if not (0.0 < q <= 1.0):
        raise UserError(f"counterfactual_unit_sets: q must be in (0, 1], got {q}")
    K, U = p.shape
    sets = top_m_units(p - n, m)  # [K, m]
    counts = torch.zeros(U, dtype=torch.long)
    counts.scatter_add_(0, sets.reshape(-1), torch.ones(sets.numel(), dtype=torch.long))
    need = max(1, int(torch.ceil(torch.tensor(q * K - 1e-9)).item()))
    safe = torch.nonzero(counts == K).reshape(-1)
    soft = torch.nonzero(counts >= need).reshape(-1)
    return UnitSets(sets=sets, counts=counts, safe=safe, soft=soft, m=m, q=q)


def smallest_m_on_grid(
    acts_pos: Any, acts_neg: Any, grid: Sequence[int], *, min_fraction: float = 0.01, q: float = 0.8,
    rule: str = "intersection",
) -> UnitSets:
    """The :class:`UnitSets` for the smallest ``m`` on ``grid`` whose set (``rule``: ``"intersection"`` =
    A_safe, ``"soft"`` = in ≥ q of the sets) holds at least ``min_fraction`` of all units.

    If no m on the grid reaches it, the largest m is returned with ``reached=False`` (and a warning logged); a
    grid that ends at the number of units always reaches it.
    """
    if rule not in ("intersection", "soft"):
        raise UserError(f"smallest_m_on_grid: rule={rule!r}; allowed: intersection, soft")
    grid = sorted(set(int(g) for g in grid))
    if not grid:
        raise UserError("smallest_m_on_grid: grid is empty")
    if not (0.0 < min_fraction <= 1.0):
        raise UserError(f"smallest_m_on_grid: min_fraction must be in (0, 1], got {min_fraction}")
    res = None
    for m in grid:
        res = counterfactual_unit_sets(acts_pos, acts_neg, m, q=q)
        chosen = res.safe if rule == "intersection" else res.soft
        if len(chosen) >= min_fraction * res.n_units:
            return res
    log.warning("no m on %s gives a %s set of %.1f%% of units", grid, rule, 100 * min_fraction)
    res.reached = False
    return res


# ---------------------------------------------------------------------------------------------- RAS
@dataclass
class RAS:
    """Reciprocal Activation Shift parts: ``delta_minus`` (safety inputs), ``delta_plus`` (task inputs),
    ``ras`` (harmonic mean), ``n`` (neurons used), ``eps`` (the ε added per input set, 0 for ``raw``)."""

    delta_minus: float
    delta_plus: float
    ras: float
    n: int
    eps: tuple[float, float]

    def to_dict(self) -> dict[str, float]:
        return {"delta_minus": self.delta_minus, "delta_plus": self.delta_plus, "ras": self.ras, "n": self.n}


def _pooled(x: Any, what: str) -> torch.Tensor:
    t = torch.as_tensor(x).double()
    if t.ndim == 2:  # [inputs, neurons] -> mean over inputs
        t = t.mean(0)
    if t.ndim != 1 or t.numel() == 0:
        raise UserError(f"{what} must be [neurons] or [inputs, neurons] with >= 1 neuron, got {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise UserError(f"{what} contains NaN or inf")
    return t


def harmonic_mean(a: float, b: float) -> float:
    """2ab/(a+b); 0 when a + b = 0."""
    return 0.0 if a + b == 0 else 2.0 * a * b / (a + b)


def reciprocal_activation_shift(
    a0_safe: Any, at_safe: Any, a0_task: Any, at_task: Any, *, eps_rule: str = "abs", eps_scale: float = 1e-3,
) -> RAS:
    """RAS of a neuron set between a base model (0) and a fine-tuned one (t).

    Inputs are ``[neurons]`` (already pooled) or ``[inputs, neurons]`` (max-pooled per input; averaged here).
    With values b (see ``eps_rule``), n = number of neurons:

    - ``delta_minus = (1/n) Σ_{j: b0_j > bt_j} (b0_j - bt_j) / (bt_j b0_j)`` on safety inputs,
    - ``delta_plus  = (1/n) Σ_{j: bt_j > b0_j} (bt_j - b0_j) / (b0_j bt_j)`` on task inputs,
    - ``ras = 2 delta_minus delta_plus / (delta_minus + delta_plus)``.

    ``eps_rule="abs"``: b = |a| + ε with ε = ``eps_scale`` · mean |a| over both models on that input set.
    ``eps_rule="raw"``: b = a, restricted to the neurons whose pooled activation is > 0 in both models on both
    input sets (n counts those; RAS = 0 when none qualifies).
    """
    if eps_rule not in EPS_RULES:
        raise UserError(f"reciprocal_activation_shift: eps_rule={eps_rule!r}; allowed: {', '.join(EPS_RULES)}")
    if not (eps_scale > 0):
        raise UserError(f"reciprocal_activation_shift: eps_scale must be > 0, got {eps_scale}")
    s0, st = _pooled(a0_safe, "a0_safe"), _pooled(at_safe, "at_safe")
    k0, kt = _pooled(a0_task, "a0_task"), _pooled(at_task, "at_task")
    if not (s0.shape == st.shape == k0.shape == kt.shape):
        raise UserError(
            "reciprocal_activation_shift: the four inputs must cover the same neurons, got "
            f"{[tuple(x.shape) for x in (s0, st, k0, kt)]}"
        )
    if eps_rule == "abs":
        e_s = eps_scale * float(torch.cat([s0.abs(), st.abs()]).mean())
        e_k = eps_scale * float(torch.cat([k0.abs(), kt.abs()]).mean())
        e_s, e_k = max(e_s, 1e-12), max(e_k, 1e-12)
        s0, st, k0, kt = s0.abs() + e_s, st.abs() + e_s, k0.abs() + e_k, kt.abs() + e_k
        eps = (e_s, e_k)
    else:
        keep = (s0 > 0) & (st > 0) & (k0 > 0) & (kt > 0)
        s0, st, k0, kt = s0[keep], st[keep], k0[keep], kt[keep]
        eps = (0.0, 0.0)
    n = int(s0.numel())
    if n == 0:
        return RAS(0.0, 0.0, 0.0, 0, eps)
    down = s0 > st
    dm = float(((s0 - st) / (st * s0))[down].sum() / n)
    up = kt > k0
    dp = float(((kt - k0) / (k0 * kt))[up].sum() / n)
    return RAS(dm, dp, harmonic_mean(dm, dp), n, eps)


# ---------------------------------------------------------------------------------------------- heads
def first_token_attention_argmax(
    model: nn.Module, batches: Any, query_index: Any, *, layers: Sequence[int] | None = None
) -> torch.Tensor:
    """Key position of maximal attention per head from one query position per input: ``[N, L, H]``.

    ``batches``: what :func:`capture` takes (one dict per batch); ``query_index``: per input the absolute
    position (column in its padded batch row) of the query token, e.g. the token whose forward emits the first
    generated token, as a LongTensor ``[N]`` over all batches in order. Reads ``layers.{i}.attn.pattern``, which
    needs eager attention: :func:`capture` switches to it for the call and restores the model's implementation.
    """
    from iclr26.lm.sites import get_adapter

    ad = get_adapter(model)
    L = len(ad.layers)
    layers = list(range(L)) if layers is None else [int(i) for i in layers]
    if not layers or any(not 0 <= i < L for i in layers):
        raise UserError(f"first_token_attention_argmax: layers must lie in 0..{L - 1}, got {layers}")
    q = torch.as_tensor(query_index).long().reshape(-1)
    batches = [dict(b) for b in (batches if isinstance(batches, (list, tuple)) else list(batches))]
    total = 0
    for b in batches:
        ids = torch.as_tensor(b["input_ids"])
        B, T = ids.shape
        am = torch.as_tensor(b.get("attention_mask", torch.ones_like(ids))).bool()
        if total + B > q.numel():
            raise UserError(f"first_token_attention_argmax: query_index has {q.numel()} entries, fewer than inputs")
        qi = q[total : total + B]
        if (qi < 0).any() or (qi >= T).any() or not am[torch.arange(B), qi.clamp(0, T - 1)].all():
            raise UserError("first_token_attention_argmax: every query_index must point at a real (non-pad) token")
        mask = torch.zeros(B, T, dtype=torch.bool)
        mask[torch.arange(B), qi] = True
        b["capture_mask"] = mask
        total += B
    if total != q.numel():
        raise UserError(f"first_token_attention_argmax: {q.numel()} query positions for {total} inputs")
    sites = [f"layers.{i}.attn.pattern" for i in layers]
    cap = capture(model, batches, sites, reduce="last", desc="attn-argmax")
    # each site: [N, H, T_key] (one selected query per row); argmax over keys
    return torch.stack([cap[s].argmax(-1) for s in cap.sites], dim=1)


@dataclass
class HeadFlags:
    """Result of :func:`flag_span_heads`: ``flagged`` [L, H] bool, the per-head fractions of inputs whose
    argmax lies in the span with thinking off (``frac_off``) and on (``frac_on``)."""

    flagged: torch.Tensor
    frac_off: torch.Tensor
    frac_on: torch.Tensor

    def heads(self) -> list[tuple[int, int]]:
        return [tuple(int(v) for v in x) for x in torch.nonzero(self.flagged).tolist()]


def flag_span_heads(
    argmax_on: Any, argmax_off: Any, span_on: Any, span_off: Any, *, min_frac: float = 0.5
) -> HeadFlags:
    """Heads whose argmax moves onto the (empty) think span when thinking is off.

    ``argmax_*``: ``[N, L, H]`` key positions (:func:`first_token_attention_argmax`) in each mode; ``span_*``:
    bool ``[N, T]`` marking each input's think-span positions (``<think>`` .. ``</think>``) in that mode. A head
    is flagged when its argmax lies in the span for at least ``min_frac`` of the think-off inputs and for less
    than ``min_frac`` of the think-on inputs.
    """
    if not (0.0 < min_frac <= 1.0):
        raise UserError(f"flag_span_heads: min_frac must be in (0, 1], got {min_frac}")

    def frac(am: Any, span: Any, what: str) -> torch.Tensor:
        a = torch.as_tensor(am).long()
        s = torch.as_tensor(span).bool()
        if a.ndim != 3 or s.ndim != 2 or a.shape[0] != s.shape[0]:
            raise UserError(f"flag_span_heads: {what} needs argmax [N, L, H] and span [N, T], got "
                            f"{tuple(a.shape)} and {tuple(s.shape)}")
        if (a < 0).any() or (a >= s.shape[1]).any():
            raise UserError(f"flag_span_heads: {what} argmax positions outside 0..{s.shape[1] - 1}")
        N, L, H = a.shape
        hit = torch.gather(s, 1, a.reshape(N, L * H)).reshape(N, L, H)
        return hit.float().mean(0)

    f_on = frac(argmax_on, span_on, "think-on")
    f_off = frac(argmax_off, span_off, "think-off")
    if f_on.shape != f_off.shape:
        raise UserError(f"flag_span_heads: modes have different head grids {tuple(f_on.shape)} vs {tuple(f_off.shape)}")
    return HeadFlags(flagged=(f_off >= min_frac) & (f_on < min_frac), frac_off=f_off, frac_on=f_on)


# ---------------------------------------------------------------------------------------------- KL
def next_token_logprobs(model: nn.Module, batches: Any, *, positions: Any = "last") -> torch.Tensor:
    """Log-softmax of the next-token logits at one position per input (``"last"`` real token by default)."""
    cap = capture(model, batches, "logits", positions=positions, reduce="last", stop_after=False, desc="logits")
    return torch.log_softmax(cap["logits"].double(), dim=-1)


def kl_divergence_at(model0: nn.Module, model_t: nn.Module, batches: Any, *, positions: Any = "last") -> torch.Tensor:
    """Per-input ``KL(π0 ‖ πτ)`` of the next-token distributions at a fixed position: ``[N]`` (nats).

    ``batches`` must be re-iterable (a list); both models see identical inputs.
    """
    if not isinstance(batches, (list, tuple, dict)):
        raise UserError("kl_divergence_at: pass batches as a list (both models must read the same inputs)")
    lp0 = next_token_logprobs(model0, batches, positions=positions)
    lpt = next_token_logprobs(model_t, batches, positions=positions)
    if lp0.shape != lpt.shape:
        raise UserError(f"kl_divergence_at: the models' vocabularies differ ({lp0.shape[-1]} vs {lpt.shape[-1]})")
    return (lp0.exp() * (lp0 - lpt)).sum(-1).float()


__all__ = [
    "max_pooled_activations",
    "unit_site",
    "top_m_units",
    "UnitSets",
    "counterfactual_unit_sets",
    "smallest_m_on_grid",
    "RAS",
    "harmonic_mean",
    "reciprocal_activation_shift",
    "first_token_attention_argmax",
    "HeadFlags",
    "flag_span_heads",
    "next_token_logprobs",
    "kl_divergence_at",
]
