"""AMPO advantages for 1,024 groups of 8 against TRL's own GRPO advantage on the same rewards.

Rewards, modes and lengths come from the negotiation environment (iclr26.rl.negotiation) under the uniform
mode policy, so the strict AMPO gate (all 4 modes, each >= 2 times, no format failure) opens in a few
groups of 8 and stays shut in the rest. Compared, side by side in one run:

* ``TRL GRPO``: TRL 1.16's group-normalised advantage, ``(r - mean_g) / (nanstd_g + 1e-4)`` with TRL's own
  ``trl.trainer.utils.nanstd`` (the lines of ``GRPOTrainer._generate_and_score_completions`` for
  ``scale_rewards="group"``; TRL has no stand-alone function for it);
* ``grpo_advantages`` and ``ampo_advantages`` (iclr26.rl.advantages, vectorised over groups), with
  eps = 1e-4 so that they are comparable with TRL, and with the authors' 1e-6;
* a per-group Python loop written from the authors' verl ``compute_ampo_outcome_advantage``.

Checks: AMPO equals TRL's GRPO (to float32 rounding) in every group where the gate is off, and differs
where it is on. Groups whose rewards are all equal are reported apart: there iclr26 returns exactly 0,
while TRL (like the authors' code) divides a float32 rounding residue of the mean by (std + eps). Usage: .venv/bin/python bench/ampo_advantage.py [--groups 1024] [--k 8] [--repeats 20]
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

import numpy as np
import torch

from iclr26.rl.advantages import ampo_advantages, grpo_advantages, mode_advantages
from iclr26.rl.negotiation import NegotiationEnv, NegotiationStates


def trl_group_advantages(rewards: torch.Tensor, k: int) -> torch.Tensor:
    from trl.trainer.utils import nanstd

    mean = torch.nanmean(rewards.view(-1, k), dim=1).repeat_interleave(k, dim=0)
    std = nanstd(rewards.view(-1, k), dim=1).repeat_interleave(k, dim=0)
    return torch.nan_to_num((rewards - mean) / (std + 1e-4), nan=0.0)


def verl_style_loop(rewards, lengths, modes, index, eps=1e-6) -> torch.Tensor:
    """Per-group loop in the shape of the authors' verl code (dicts of lists, one group at a time)."""
    by = defaultdict(list)
    for i, g in enumerate(index):
        by[g].append(i)
    out = rewards.clone()
    for ids in by.values():
        r = rewards[ids]
        mean, std = (r.mean(), r.std()) if len(ids) > 1 else (torch.tensor(0.0), torch.tensor(1.0))
        lv = [modes[i] for i in ids]
        term = {}
        if -1 not in lv and len(set(lv)) == 4 and min(lv.count(v) for v in set(lv)) >= 2:
            order = list(dict.fromkeys(lv))
            Rm = torch.stack([rewards[[i for i in ids if modes[i] == v]].mean() for v in order])
            Lm = torch.stack([lengths[[i for i in ids if modes[i] == v]].mean() for v in order])
            if bool((Rm == Rm.mean()).all()):
                t = torch.tanh(-(Lm - Lm.mean()) / (Lm.std() + eps))
            else:
                t = (Rm - Rm.mean()) / (Rm.std() + eps)
            term = dict(zip(order, t.tolist(), strict=True))
        for i in ids:
            out[i] = (rewards[i] - mean) / (std + eps) + term.get(modes[i], 0.0)
    return out


def _time(fn, repeats: int) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=1024)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    env = NegotiationEnv()
    rng = np.random.default_rng(0)
    st = env.sample_states(args.groups, rng)
    rep = np.repeat(np.arange(args.groups), args.k)
    sub = NegotiationStates(**{f: v[rep] for f, v in vars(st).items()})
    roll = env.step(sub, rng.integers(1, 5, args.groups * args.k), rng)
    r = torch.from_numpy(roll.rewards)
    L = torch.from_numpy(roll.lengths).float()
    m = torch.from_numpy(roll.modes)
    g = torch.from_numpy(rep)

    trl = trl_group_advantages(r, args.k)
    ours_grpo = grpo_advantages(r, g, eps=1e-4)
    ampo = ampo_advantages(r, L, m, g, eps=1e-4)
    term = mode_advantages(r, L, m, g, eps=1e-4)
    on = term.gate_on[g]  # per reply
    flat = (r.view(-1, args.k) == r.view(-1, args.k)[:, :1]).all(1)[g]  # all rewards of the group equal
    off_err = float((ampo[~on & ~flat] - trl[~on & ~flat]).abs().max())
    flat_residue = float(trl[flat].abs().max()) if flat.any() else 0.0
    on_diff = float((ampo[on] - trl[on]).abs().max()) if on.any() else float("nan")
    loop = verl_style_loop(r, L, m.tolist(), g.tolist())
    loop_err = float((loop - ampo_advantages(r, L, m, g)).abs().max())

    rows = [
        ("TRL GRPO (group scaling, its nanstd)", lambda: trl_group_advantages(r, args.k)),
        ("iclr26 grpo_advantages", lambda: grpo_advantages(r, g, eps=1e-4)),
        ("iclr26 ampo_advantages (strict gate)", lambda: ampo_advantages(r, L, m, g)),
        ("per-group loop, verl-style AMPO", lambda: verl_style_loop(r, L, m.tolist(), g.tolist())),
    ]
    times = [(name, _time(fn, args.repeats if "loop" not in name else max(2, args.repeats // 10)))
             for name, fn in rows]  # fmt: skip
    base = times[0][1]
    print(f"{args.groups} groups x {args.k} replies, {args.threads} thread(s), load {os.getloadavg()[0]:.2f}; gate on "
          f"in {float(term.gate_on.float().mean()):.1%} of groups (ties {int(term.tie.sum())})\n")  # fmt: skip
    print("| computation | ms per batch (median) | vs TRL |")
    print("|---|---:|---:|")
    for name, t in times:
        print(f"| {name} | {1e3 * t:.2f} | {t / base:.1f}x |")
    print(f"\nmax |AMPO - TRL GRPO| where the gate is off: {off_err:.2e} (eps 1e-4 both; groups with all rewards "
          f"equal left out: {int(flat.sum()) // args.k} groups, where ours is exactly 0 and TRL's rounding residue "
          f"reaches {flat_residue:.1e}); where the gate is on: {on_diff:.3f}")
    print(f"max |our GRPO - TRL GRPO|: {float((ours_grpo - trl).abs().max()):.2e}; "
          f"max |vectorised AMPO - verl-style loop| (eps 1e-6): {loop_err:.2e}")
    assert off_err < 1e-5, "AMPO must equal GRPO where the gate is off"


if __name__ == "__main__":
    main()
