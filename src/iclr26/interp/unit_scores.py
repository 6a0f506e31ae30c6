"""Attribution scores of individual units and the culture-neuron selection rules.

Neuron-Level Analysis of Cultural Understanding in Large Language Models (ICLR 2026, arXiv 2510.08284).
A unit is one output channel of an MLP gate projection or of a q / k / v projection. For one example with gold
answer token g read at the last prompt position, p = P(g) and the unit's score is

    s(n) = p · max_t a_t(n) · ∂p/∂a_t(n)                      (pads excluded from the max)

Culture-general units have a large mean score on cultural questions minus the mean score on an options-only
control (control scores clamped at >= 0); the top fraction per unit type is kept and units that also rank high
on a reading task that merely names the countries are dropped. Culture-specific units use per-country sums
normalised by the *total* counts, a top fraction per country over all unit types pooled, the same reading-task
filter per country, and a z-score across countries (population sd) of at least ``z_min``.

Any HF causal LM that the site adapters know works: sites ``layers.{i}.mlp.gate``, ``layers.{i}.attn.q|k|v``
(fused projections are sliced by the adapters). Suppress (×0) and enhance (×2) go through
:func:`edit_unit_set`, which composes :func:`iclr26.interp.interventions.edit_units` over sites::

    sites = unit_sites(model)
    S, layout = unit_scores(model, batches, gold_ids, sites)          # [N, U], (site, start, width) blocks
    C, _ = unit_scores(model, control_batches, gold_ids_ctrl, sites)
    sel = select_general(S, C, R, layout)                              # flat unit indices
    with edit_unit_set(model, layout, sel, factor=0.0):                # suppress
        ...
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.interp.attribution import act_x_grad, gold_prob
from iclr26.interp.interventions import edit_units
from iclr26.interp.neurons import top_m_units, unit_site
from iclr26.lm.sites import get_adapter

UNIT_KINDS = ("mlp.gate", "attn.q", "attn.k", "attn.v")
Layout = Sequence[tuple[str, int, int]]


def unit_sites(model: nn.Module, kinds: Sequence[str] = UNIT_KINDS) -> list[str]:
    """Every layer's sites of the given unit kinds, in layer order (``layers.{i}.<kind>``)."""
    bad = [k for k in kinds if k not in UNIT_KINDS]
    if bad or not kinds:
        raise UserError(f"unit kinds {bad or list(kinds)} not allowed; choose from {', '.join(UNIT_KINDS)}")
    n = int(get_adapter(model).text_config.num_hidden_layers)
    return [f"layers.{i}.{k}" for i in range(n) for k in kinds]


def unit_kind(site: str) -> str:
    """``"mlp"`` for gate channels, ``"attn"`` for q / k / v channels."""
    comp = site.split(".", 2)[-1] if site.startswith("layers.") else site
    if comp == "mlp.gate":
        return "mlp"
    if comp in ("attn.q", "attn.k", "attn.v"):
        return "attn"
    raise UserError(f"{site} is not a unit site; allowed components: {', '.join(UNIT_KINDS)}")


def unit_scores(
    model: nn.Module,
    batches: Any,
    targets: Any,
    sites: str | Sequence[str],
    *,
    position: int = -1,
    clamp_nonnegative: bool = False,
) -> tuple[torch.Tensor, list[tuple[str, int, int]]]:
    """Per-example unit scores ``[N, U]`` (p · max over positions of a ⊙ ∂p/∂a) and their layout.

    ``targets``: the gold token id per example; p is read at ``position`` (counted within real tokens).
    ``clamp_nonnegative`` clamps the scores at 0 (the rule for control examples).
    """
    names = [sites] if isinstance(sites, str) else list(sites)
    if not names:
        raise UserError("unit_scores needs at least one site")
    for s in names:
        unit_kind(s)
    att = act_x_grad(model, batches, names, gold_prob(targets, position), reduce_pos="max", desc="unit scores")
    p = att.metric.float()  # [N]
    blocks, layout, start = [], [], 0
    for name in att.scores:
        x = att.scores[name]
        if x.ndim != 2:  # [N, channels] for flat sites
            x = x.reshape(x.shape[0], -1)
        blocks.append(x * p[:, None])
        layout.append((name, start, int(x.shape[1])))
        start += int(x.shape[1])
    S = torch.cat(blocks, 1)
    return (S.clamp_min(0) if clamp_nonnegative else S), layout


def _kinds(layout: Layout) -> torch.Tensor:
    """Per-unit kind code: 0 = MLP gate channel, 1 = attention q/k/v channel."""
    return torch.cat([torch.full((w,), 0 if unit_kind(name) == "mlp" else 1, dtype=torch.long)
                      for name, _, w in layout])


def _check_matrix(x: Any, U: int, what: str) -> torch.Tensor:
    t = torch.as_tensor(x).float()
    if t.ndim != 2 or t.shape[1] != U or t.shape[0] == 0:
        raise UserError(f"{what} must be [examples>0, {U} units], got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise UserError(f"{what} contains NaN or inf")
    return t


def _check_frac(f: float, what: str) -> float:
    if not 0 < float(f) <= 1:
        raise UserError(f"{what} must be a fraction in (0, 1], got {f}")
    return float(f)


def _top_frac(v: torch.Tensor, mask: torch.Tensor, frac: float) -> torch.Tensor:
    """Flat indices of the ``max(1, round(frac·|mask|))`` largest entries of ``v`` among ``mask``."""
    idx = mask.nonzero().reshape(-1)
    if idx.numel() == 0:
        return idx
    m = max(1, int(round(frac * idx.numel())))
    return idx[top_m_units(v[idx], m)]


def select_general(
    data: Any,
    control: Any,
    reading: Any,
    layout: Layout,
    *,
    top_mlp: float = 0.01,
    top_attn: float = 0.002,
    reading_top: float = 0.01,
) -> torch.Tensor:
    """Culture-general units (sorted flat indices).

    S(n) = mean over data examples − mean over control examples (control scores clamped at >= 0 here too);
    keep the top ``top_mlp`` of MLP units and ``top_attn`` of attention units by S; drop every kept unit that is
    in the top ``reading_top`` of its type by the summed reading-task score R.
    """
    kinds = _kinds(layout)
    U = kinds.numel()
    D = _check_matrix(data, U, "data scores")
    C = _check_matrix(control, U, "control scores").clamp_min(0)
    R = _check_matrix(reading, U, "reading-task scores").sum(0)
    S = D.sum(0) / D.shape[0] - C.sum(0) / C.shape[0]
    fracs = (_check_frac(top_mlp, "top_mlp"), _check_frac(top_attn, "top_attn"))
    rt = _check_frac(reading_top, "reading_top")
    keep = []
    for k in (0, 1):
        sel = _top_frac(S, kinds == k, fracs[k])
        high_r = set(_top_frac(R, kinds == k, rt).tolist())
        keep += [u for u in sel.tolist() if u not in high_r]
    return torch.tensor(sorted(keep), dtype=torch.long)


def select_specific(
    data: Any,
    groups: Sequence[Any],
    control: Any,
    control_groups: Sequence[Any],
    reading: Any,
    reading_groups: Sequence[Any],
    layout: Layout,
    *,
    top: float = 0.003,
    reading_top: float = 0.01,
    z_min: float = 0.5,
) -> dict[Any, torch.Tensor]:
    """Culture-specific units per group (country): ``{group: sorted flat indices}``.

    S_c(n) = Σ_{i∈c} s_i(n) / N_data − Σ_{j∈c} s_j^ctrl(n) / N_ctrl (normalised by the *total* counts); per group
    keep the top ``top`` of all units pooled, drop those in the top ``reading_top`` by the group's summed
    reading score R_c, and keep a unit only if its z-score of S_c across groups (population sd) is >= ``z_min``.
    """
    kinds = _kinds(layout)
    U = kinds.numel()
    D = _check_matrix(data, U, "data scores")
    C = _check_matrix(control, U, "control scores").clamp_min(0)
    Rm = _check_matrix(reading, U, "reading-task scores")
    for g, m, what in ((groups, D, "groups"), (control_groups, C, "control_groups"),
                       (reading_groups, Rm, "reading_groups")):
        if len(g) != m.shape[0]:
            raise UserError(f"{what} has {len(g)} entries for {m.shape[0]} examples")
    names = list(dict.fromkeys(groups))
    if len(names) < 2:
        raise UserError("select_specific needs at least two groups (the z-score is across groups)")
    top, rt = _check_frac(top, "top"), _check_frac(reading_top, "reading_top")

    def rows(gs, c):
        return torch.tensor([x == c for x in gs], dtype=torch.bool)

    Sc = torch.stack([D[rows(groups, c)].sum(0) / D.shape[0] - C[rows(control_groups, c)].sum(0) / C.shape[0]
                      for c in names])  # [G, U]
    z = (Sc - Sc.mean(0)) / Sc.std(0, unbiased=False).clamp_min(1e-12)
    everything = torch.ones(U, dtype=torch.bool)
    out = {}
    for gi, c in enumerate(names):
        sel = _top_frac(Sc[gi], everything, top)
        rc = rows(reading_groups, c)
        high_r = set(_top_frac(Rm[rc].sum(0), everything, rt).tolist()) if rc.any() else set()
        out[c] = torch.tensor(sorted(u for u in sel.tolist() if u not in high_r and z[gi, u] >= z_min),
                              dtype=torch.long)
    return out


def random_units(layout: Layout, n: int, seed: int = 0, exclude: Any = None) -> torch.Tensor:
    """``n`` units drawn uniformly without replacement from every unit of the layout (the random baseline)."""
    U = sum(w for _, _, w in layout)
    pool = torch.ones(U, dtype=torch.bool)
    if exclude is not None:
        pool[torch.as_tensor(exclude, dtype=torch.long)] = False
    idx = pool.nonzero().reshape(-1)
    if not 0 <= n <= idx.numel():
        raise UserError(f"random_units: n={n} must be in 0..{idx.numel()}")
    g = torch.Generator().manual_seed(int(seed))
    return torch.sort(idx[torch.randperm(idx.numel(), generator=g)[:n]]).values


@contextmanager
def edit_unit_set(model: nn.Module, layout: Layout, units: Any, factor: float = 0.0) -> Iterator[dict[str, list[int]]]:
    """Multiply the given flat units by ``factor`` at every position (0: suppress, 2: enhance)."""
    by_site = unit_site(layout, units)
    mode = "zero" if float(factor) == 0.0 else "scale"
    with ExitStack() as stack:
        for site, ch in by_site.items():
            stack.enter_context(edit_units(model, site, ch, mode=mode, factor=float(factor)))
        yield by_site
