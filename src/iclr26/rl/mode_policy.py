"""A softmax mode policy over state features, trained with GRPO / AMPO advantages (P14's small policy).

``pi(mode | s) = softmax(W phi(s))``, W initialised to zero (uniform over the four modes, like the mode
coverage after behaviour cloning). Each step samples ``states`` fresh states, ``samples`` replies per
state (one group per state), computes advantages with the chosen estimator, and takes one PPO-clip step
(Adam) with a k3 KL penalty to the initial policy, as the authors' verl configuration does (one PPO
epoch, clip 0.2, ``low_var_kl`` loss 0.001). Evaluation is exact: expected reward and thinking tokens of
the policy's mode distribution on held-out states, without sampling.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import torch

from iclr26.core.errors import UserError
from iclr26.rl.advantages import grpo_advantages, mode_advantages
from iclr26.rl.negotiation import NegotiationEnv, NegotiationStates

log = logging.getLogger(__name__)

__all__ = ["ModePolicy", "PolicyTrace", "train_mode_policy", "evaluate_policy", "ESTIMATORS"]

ESTIMATORS = ("grpo", "ampo")


class ModePolicy(torch.nn.Module):
    """Linear softmax policy over the 4 modes; ``forward(phi [n, d]) -> log-probabilities [n, 4]``."""

    def __init__(self, n_features: int, n_modes: int = 4):
        super().__init__()
        self.W = torch.nn.Parameter(torch.zeros(n_features, n_modes))

    def forward(self, phi: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(phi @ self.W, dim=-1)


@dataclass
class PolicyTrace:
    """Per-step training logs ([steps] arrays) and the evaluation curve (every ``eval_every`` steps)."""

    reward: list[float] = field(default_factory=list)  # mean sampled reward (the true reward)
    think: list[float] = field(default_factory=list)  # mean sampled thinking tokens
    gate_on: list[float] = field(default_factory=list)  # share of groups whose mode term was computed
    tie: list[float] = field(default_factory=list)  # share of groups where the length tie-break applied
    entropy: list[float] = field(default_factory=list)  # mean policy entropy over the step's states (nats)
    eval_steps: list[int] = field(default_factory=list)
    eval_reward: list[float] = field(default_factory=list)
    eval_think: list[float] = field(default_factory=list)


def evaluate_policy(policy: ModePolicy, env: NegotiationEnv, states: NegotiationStates) -> dict:
    """Exact held-out evaluation: ``reward`` and ``think`` (expected), ``probs`` [n, 4]."""
    with torch.no_grad():
        probs = policy(torch.from_numpy(states.features())).exp().double().numpy()
    er = env.expected_reward(states)
    return {"reward": float((probs * er).sum(1).mean()), "think": float((probs @ env.think_mean).mean()),
            "probs": probs}  # fmt: skip


def _shuffle_within_groups(x: torch.Tensor, groups: int, gen: torch.Generator) -> torch.Tensor:
    """Permute the entries of x [groups * k] independently inside each consecutive block of k."""
    k = x.numel() // groups
    perm = torch.argsort(torch.rand(groups, k, generator=gen), dim=1)
    return x.view(groups, k).gather(1, perm).reshape(-1)


def train_mode_policy(env: NegotiationEnv, *, estimator: str = "ampo", gate: str = "strict",
                      tie_break: bool = True, exact_ties: bool = True, shuffle_modes: bool = False,
                      think_penalty: float = 0.0,
                      steps: int = 300, states: int = 16, samples: int = 16, lr: float = 0.05,
                      clip: float = 0.2, kl_coef: float = 0.001, seed: int = 0,
                      eval_states: NegotiationStates | None = None,
                      eval_every: int = 10) -> tuple[ModePolicy, PolicyTrace]:  # fmt: skip
    """Train a :class:`ModePolicy` on ``env``; returns the policy and its :class:`PolicyTrace`.

    ``estimator``: ``"grpo"`` or ``"ampo"`` (with ``gate`` / ``tie_break`` as in
    :func:`~iclr26.rl.advantages.mode_advantages`, as is ``exact_ties``). ``shuffle_modes`` (control) permutes the mode labels
    inside each group before the mode term is computed. ``think_penalty`` = lambda trains on
    ``r - lambda * thinking_tokens / 400`` (the length-penalty baseline); logs always use the true reward.
    """
    if estimator not in ESTIMATORS:
        raise UserError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    if steps < 1 or states < 1 or samples < 1 or not lr > 0 or not 0 < clip < 1 or kl_coef < 0 or think_penalty < 0:
        raise UserError("need steps, states, samples >= 1, lr > 0, 0 < clip < 1, kl_coef >= 0, think_penalty >= 0")
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    policy = ModePolicy(env.FEATURES)
    opt = torch.optim.Adam(policy.parameters(), lr=lr, foreach=True)
    trace = PolicyTrace()
    groups = torch.arange(states).repeat_interleave(samples)  # [states * samples], consecutive groups

    def log_eval(step: int) -> None:
        if eval_states is not None:
            ev = evaluate_policy(policy, env, eval_states)
            trace.eval_steps.append(step)
            trace.eval_reward.append(ev["reward"])
            trace.eval_think.append(ev["think"])

    log_eval(0)
    for step in range(1, steps + 1):
        st = env.sample_states(states, rng)
        phi = torch.from_numpy(st.features())  # [S, d]
        with torch.no_grad():
            logp_all = policy(phi)  # [S, 4]
            modes = torch.multinomial(logp_all.exp(), samples, replacement=True, generator=gen) + 1  # [S, k]
        modes = modes.reshape(-1)
        rep = np.repeat(np.arange(states), samples)
        sub = NegotiationStates(**{k: v[rep] for k, v in vars(st).items()})
        roll = env.step(sub, modes.numpy(), rng)
        r_true = torch.from_numpy(roll.rewards)
        r_train = r_true - think_penalty * torch.from_numpy(roll.think_tokens).float() / 400.0
        adv = grpo_advantages(r_train, groups)
        gate_on = tie = 0.0
        if estimator == "ampo":
            labels = torch.from_numpy(roll.modes)
            if shuffle_modes:
                labels = _shuffle_within_groups(labels, states, gen)
            term = mode_advantages(r_train, torch.from_numpy(roll.lengths), labels, groups, gate=gate,
                                   tie_break=tie_break, exact_ties=exact_ties)  # fmt: skip
            adv = adv + term.per_sample
            gate_on, tie = float(term.gate_on.float().mean()), float(term.tie.float().mean())
        # one PPO-clip step on the sampled mode choice of every reply (one action per reply)
        logp_ref = torch.full((states, 4), -float(np.log(4.0)))  # the initial (uniform) policy
        logp_new_all = policy(phi)  # [S, 4]
        idx = (modes - 1).view(states, samples)
        logp_new = logp_new_all.gather(1, idx).reshape(-1)
        logp_old = logp_all.gather(1, idx).reshape(-1)
        ratio = torch.exp(logp_new - logp_old)
        pg = -torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
        d = logp_ref.gather(1, idx).reshape(-1) - logp_new
        kl = (torch.exp(d) - d - 1).mean()  # k3 estimator of KL(pi || pi_ref)
        loss = pg + kl_coef * kl
        opt.zero_grad()
        loss.backward()
        opt.step()
        ent = float(-(logp_all.exp() * logp_all).sum(1).mean())
        trace.reward.append(float(r_true.mean()))
        trace.think.append(float(roll.think_tokens.mean()))
        trace.gate_on.append(gate_on)
        trace.tie.append(tie)
        trace.entropy.append(ent)
        if step % eval_every == 0 or step == steps:
            log_eval(step)
    return policy, trace
