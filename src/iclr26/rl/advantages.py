"""GRPO and AMPO advantages over groups of sampled replies (P14).

*Adaptive Social Learning via Mode Policy Optimization for Language Agents* (ICLR 2026, arXiv 2505.02156).
GRPO gives each reply its reward standardised within its group (one prompt / dialogue state):
``(r_i - mean(r)) / (std(r) + eps)`` with the unbiased std. AMPO adds a *mode-level* term: the group's
replies are pooled by thinking mode (1..4); when every mode occurs at least twice and no reply failed
the format (mode -1), each mode gets ``(R_m - mu_R) / (s_R + eps)`` over the four per-mode mean rewards,
or, when the four means are exactly equal, ``tanh(-(L_m - mu_L) / (s_L + eps))`` over the per-mode
mean response lengths, so shorter modes win ties. The term is added to every reply of that mode.

Everything is computed in float32 on CPU, vectorised over groups, and matches a direct per-group
transcription of the authors' ``compute_grpo_outcome_advantage`` / ``compute_mode_adv`` (verl fork) bit
for bit on exactly representable rewards, and to float32 rounding otherwise: group of one -> mean 0,
std 1; zero-variance group -> 0; ties compared with exact float32 equality (``exact_ties=False`` also
counts groups whose rewards are all equal, which float32 rounding can otherwise split).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

__all__ = ["grpo_advantages", "ampo_advantages", "mode_advantages", "ModeTerm", "N_MODES", "FORMAT_FAILURE_MODE"]

N_MODES = 4  # thinking levels 1..4
FORMAT_FAILURE_MODE = -1
GATES = ("strict", "relaxed", "off")


def _as_1d(x, name: str, dtype: torch.dtype) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.dim() != 1:
        raise UserError(f"{name} must be a 1-D sequence (one value per reply), got shape {tuple(t.shape)}")
    if t.is_floating_point() and dtype != torch.float32 and not torch.equal(t, t.round()):
        raise UserError(f"{name} must hold integers")
    return t.detach().to(device="cpu", dtype=dtype)


def _groups(group_ids, n: int) -> tuple[torch.Tensor, int]:
    """Inverse index [n] into 0..G-1 (groups in order of first appearance) and G."""
    g = _as_1d(group_ids, "group_ids", torch.int64)
    if g.numel() != n:
        raise UserError(f"group_ids has {g.numel()} entries, rewards {n}; give one group id per reply")
    uniq, inv = torch.unique(g, return_inverse=True)
    return inv, int(uniq.numel())


def _check_rewards(rewards) -> torch.Tensor:
    r = _as_1d(rewards, "rewards", torch.float32)
    if r.numel() == 0:
        raise UserError("rewards is empty; give at least one reply")
    if not torch.isfinite(r).all():
        raise UserError("rewards must be finite (no nan / inf)")
    return r


def _group_mean_std(x: torch.Tensor, inv: torch.Tensor, G: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-group mean, unbiased std and size of a float32 vector, as [G] tensors.

    Replies are laid out densely as [G, n_max] (zeros where a group is shorter), so every group is reduced
    with the same torch kernel over its own row, like ``torch.mean`` / ``torch.std`` on that group alone.
    """
    n = x.numel()
    count = torch.bincount(inv, minlength=G)  # [G]
    order = torch.argsort(inv, stable=True)
    starts = torch.cumsum(count, 0) - count
    pos = torch.arange(n) - starts[inv[order]]  # slot of each reply inside its group row
    width = int(count.max())
    dense = torch.zeros(G, width, dtype=x.dtype)
    dense[inv[order], pos] = x[order]
    valid = torch.zeros(G, width, dtype=torch.bool)
    valid[inv[order], pos] = True
    if bool((count == width).all()):  # equal groups (the usual case): torch's own mean / std per row
        std = dense.std(1) if width > 1 else torch.zeros(G, dtype=x.dtype)
        return dense.mean(1), std, count
    cnt = count.to(x.dtype)
    mean = dense.sum(1) / cnt  # [G]
    dev = torch.where(valid, dense - mean[:, None], torch.zeros((), dtype=x.dtype))
    var = (dev * dev).sum(1) / (cnt - 1).clamp(min=1)
    return mean, var.sqrt(), count


def _constant_groups(x: torch.Tensor, inv: torch.Tensor, G: int) -> torch.Tensor:
    """[G] bool: every entry of the group is the same value (groups without entries: False)."""
    hi = torch.full((G,), -float("inf")).scatter_reduce(0, inv, x, reduce="amax")
    lo = torch.full((G,), float("inf")).scatter_reduce(0, inv, x, reduce="amin")
    return hi == lo


def grpo_advantages(rewards, group_ids, *, eps: float = 1e-6) -> torch.Tensor:
    """GRPO's sample-level advantage ``(r_i - mean_g) / (std_g + eps)`` per reply, float32 [N].

    ``std`` is the unbiased (ddof=1) std of the reply's group; a group of one uses mean 0 and std 1, as
    the authors' verl code does. ``group_ids``: one hashable integer per reply (its prompt / state).
    ``eps`` is added to the std (1e-6 in verl; TRL uses 1e-4). A group of >= 2 equal rewards gets exactly
    0 (the authors' code leaves a rounding residue there when the float32 group mean is inexact, e.g.
    0.056 for eight rewards of 5/6; otherwise the results are identical).
    """
    r = _check_rewards(rewards)
    if not eps >= 0:
        raise UserError(f"eps must be >= 0, got {eps}")
    inv, G = _groups(group_ids, r.numel())
    mean, std, count = _group_mean_std(r, inv, G)
    single = count == 1
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    adv = (r - mean[inv]) / (std[inv] + eps)
    flat = _constant_groups(r, inv, G) & ~single
    return torch.where(flat[inv], torch.zeros((), dtype=adv.dtype), adv)


@dataclass
class ModeTerm:
    """AMPO's mode-level term: ``per_sample`` [N] (0 where the gate is off), and per group [G] (groups in
    ascending order of their id): ``gate_on``, ``tie`` (all per-mode mean rewards exactly equal, so the
    length term was used), ``per_mode`` [G, 4] (the term of modes 1..4; 0 where not computed)."""

    per_sample: torch.Tensor
    gate_on: torch.Tensor
    tie: torch.Tensor
    per_mode: torch.Tensor


def mode_advantages(rewards, lengths, modes, group_ids, *, eps: float = 1e-6, gate: str = "strict",
                    tie_break: bool = True, exact_ties: bool = True) -> ModeTerm:
    """AMPO's mode-level advantage term per reply (see the module docstring).

    ``lengths``: total response tokens per reply (thinking + answer), used only by the tie-break.
    ``modes``: thinking level 1..4 per reply, or -1 for a format failure.
    ``gate``: ``"strict"`` (the paper's: no -1 in the group, all 4 modes present, each >= 2 times);
    ``"relaxed"`` (ablation: computed over the modes that occur >= 2 times whenever there are >= 2 of
    them, format failures and rarer modes get 0); ``"off"`` (never computed: AMPO = GRPO).
    ``tie_break=False`` (ablation) gives 0 instead of the length term when the mean rewards tie.
    ``exact_ties=True`` (the authors' rule) calls a tie only when the four float32 per-mode means are
    exactly equal; rounding can break it even when every reply has the same reward (k copies of 2/3 do not
    always average to 2/3 in float32). ``exact_ties=False`` also counts such all-equal groups as ties.
    """
    if gate not in GATES:
        raise UserError(f"gate must be one of {GATES}, got {gate!r}")
    r = _check_rewards(rewards)
    n = r.numel()
    L = _as_1d(lengths, "lengths", torch.float32)
    m = _as_1d(modes, "modes", torch.int64)
    if L.numel() != n or m.numel() != n:
        raise UserError(f"rewards, lengths and modes need one entry per reply: {n}, {L.numel()}, {m.numel()}")
    if not torch.isfinite(L).all() or (L < 0).any():
        raise UserError("lengths must be finite and >= 0 (response tokens)")
    bad = ~(((m >= 1) & (m <= N_MODES)) | (m == FORMAT_FAILURE_MODE))
    if bad.any():
        raise UserError(f"modes must be 1..{N_MODES} or {FORMAT_FAILURE_MODE} (format failure), got "
                        f"{sorted(set(m[bad].tolist()))[:5]}")  # fmt: skip
    inv, G = _groups(group_ids, n)
    per_mode = torch.zeros(G, N_MODES)
    gate_on = torch.zeros(G, dtype=torch.bool)
    tie = torch.zeros(G, dtype=torch.bool)
    if gate == "off":
        return ModeTerm(torch.zeros(n), gate_on, tie, per_mode)

    ok = m >= 1
    # per (group, mode) cell: index g * 4 + (m - 1); format failures go to no cell
    cell = inv * N_MODES + (m - 1).clamp(min=0)
    C = G * N_MODES
    cnt = torch.bincount(cell[ok], minlength=C).view(G, N_MODES)  # [G, 4]
    R_m, _, _ = _group_mean_std(r[ok], cell[ok], C) if ok.any() else (torch.zeros(C),) * 3
    L_m, _, _ = _group_mean_std(L[ok], cell[ok], C) if ok.any() else (torch.zeros(C),) * 3
    R_m, L_m = R_m.view(G, N_MODES), L_m.view(G, N_MODES)  # per-mode means; nan where a mode is absent
    has_fail = torch.bincount(inv[~ok], minlength=G) > 0
    if gate == "strict":
        used = torch.ones(G, N_MODES, dtype=torch.bool)
        gate_on = ~has_fail & ((cnt >= 2).sum(1) == N_MODES)  # (.all(1) is slow on [G, 4] in torch)
    else:  # relaxed
        used = cnt >= 2
        gate_on = used.sum(1) >= 2
    used = used & gate_on[:, None]
    k = used.sum(1).clamp(min=1).to(torch.float32)  # modes in the statistic
    first = torch.full((C,), n, dtype=torch.int64)  # first reply index of each (group, mode) cell
    first = first.scatter_reduce(0, cell[ok], torch.arange(n)[ok], reduce="amin").view(G, N_MODES)
    first_order = torch.argsort(first, dim=1, stable=True)  # [G, 4]

    def stats(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        Xz = torch.where(used, X, torch.zeros((), dtype=X.dtype))
        if gate == "strict":  # torch's own mean / std over the four modes in order of first appearance,
            Xo = Xz.gather(1, first_order)  # as the authors' code sums them (float sums depend on the order)
            return Xo.mean(1), Xo.std(1)
        mu = Xz.sum(1) / k
        d = torch.where(used, X - mu[:, None], torch.zeros((), dtype=X.dtype))
        return mu, ((d * d).sum(1) / (k - 1).clamp(min=1)).sqrt()

    mu_R, s_R = stats(R_m)
    mu_L, s_L = stats(L_m)
    # exact float32 equality of every mode's mean reward with their mean, as in the authors' code
    tie = gate_on & ((used & (R_m != mu_R[:, None])).sum(1) == 0)
    if not exact_ties:  # a group whose replies all have the same reward is a tie, whatever the rounding
        tie = tie | (gate_on & _constant_groups(r[ok], inv[ok], G))
    reward_term = (R_m - mu_R[:, None]) / (s_R[:, None] + eps)
    length_term = torch.tanh(-(L_m - mu_L[:, None]) / (s_L[:, None] + eps))
    if not tie_break:
        length_term = torch.zeros_like(length_term)
    term = torch.where(tie[:, None], length_term, reward_term)
    per_mode = torch.where(used, term, torch.zeros((), dtype=term.dtype))
    per_sample = torch.where(ok, per_mode[inv, (m - 1).clamp(min=0)], torch.zeros(()))
    return ModeTerm(per_sample, gate_on, tie, per_mode)


def ampo_advantages(rewards, lengths, modes, group_ids, *, eps: float = 1e-6, gate: str = "strict",
                    tie_break: bool = True, exact_ties: bool = True) -> torch.Tensor:
    """AMPO's advantage per reply: :func:`grpo_advantages` + :func:`mode_advantages`, float32 [N].

    With ``gate="off"``, or in any group where the gate is closed, this is exactly GRPO's advantage.
    """
    a = grpo_advantages(rewards, group_ids, eps=eps)
    return a + mode_advantages(rewards, lengths, modes, group_ids, eps=eps, gate=gate, tie_break=tie_break,
                               exact_ties=exact_ties).per_sample
