"""A scripted negotiation environment with four thinking modes of different cost (P14's testbed).

No language model: a state is a negotiation turn (price gap, opponent type, turns left, deal-open flag,
the judge's current goal score ``s_before``), an action is a thinking mode 1..4, and the outcome is drawn
from per-mode success probabilities that depend on how hard the state is (cheap modes suffice for easy
states; only deep deliberation works in hard ones). A success raises the goal score by 2 (at most 10), a
failure lowers it by 1 half of the time. The reward is the paper's own (:func:`~iclr26.rl.reward.
sotopia_style_reward`): it does not charge for thinking tokens, which only the mode determines. A small
share of replies fail the format (reward -2, mode -1). ``expected_reward`` gives the exact expectation of
every mode in every state, so policies can be evaluated without sampling noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iclr26.core.errors import UserError
from iclr26.rl.reward import FORMAT_FAILURE_REWARD, answer_length_factor, sotopia_style_reward

__all__ = ["NegotiationEnv", "NegotiationStates", "Rollout", "DIFFICULTIES", "OPPONENTS"]

DIFFICULTIES = ("easy", "medium", "hard")
OPPONENTS = ("cooperative", "neutral", "tough")
#: P(success | difficulty, mode 1..4)
SUCCESS = ((0.92, 0.92, 0.92, 0.88), (0.55, 0.70, 0.75, 0.75), (0.15, 0.30, 0.50, 0.75))
THINK_MEAN = (0.0, 60.0, 180.0, 400.0)  # thinking tokens per mode (mode 1 does not think)
THINK_SD = (0.0, 15.0, 40.0, 80.0)


@dataclass
class NegotiationStates:
    """A batch of states; every field has shape [n]."""

    gap: np.ndarray  # price gap in [0, 1]
    opponent: np.ndarray  # 0 cooperative, 1 neutral, 2 tough
    turns_left: np.ndarray  # 1..5
    deal_open: np.ndarray  # bool
    s_before: np.ndarray  # judge goal score 2..8

    def __len__(self) -> int:
        return len(self.gap)

    @property
    def difficulty(self) -> np.ndarray:
        """0 easy (cooperative, gap < 0.4), 2 hard (tough, gap > 0.6), 1 medium otherwise."""
        easy = (self.opponent == 0) & (self.gap < 0.4)
        hard = (self.opponent == 2) & (self.gap > 0.6)
        return np.where(easy, 0, np.where(hard, 2, 1))

    def features(self) -> np.ndarray:
        """phi(s) [n, 8] float32: gap, opponent one-hot (3), turns_left / 5, deal_open, s_before / 10, bias."""
        n = len(self)
        onehot = np.zeros((n, 3))
        onehot[np.arange(n), self.opponent] = 1.0
        return np.column_stack([self.gap, onehot, self.turns_left / 5.0, self.deal_open.astype(float),
                                self.s_before / 10.0, np.ones(n)]).astype(np.float32)  # fmt: skip


@dataclass
class Rollout:
    """Sampled outcomes of replies, shape [n] each. ``modes`` is -1 for format failures."""

    rewards: np.ndarray  # float32
    modes: np.ndarray
    think_tokens: np.ndarray
    answer_tokens: np.ndarray
    s_after: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        """Total response tokens (thinking + answer), the length AMPO's tie-break compares."""
        return self.think_tokens + self.answer_tokens


class NegotiationEnv:
    """The environment's constants and its two operations, ``sample_states`` and ``step``.

    ``balanced=True`` draws the three difficulty classes equally often (then a point uniformly inside the
    class's region of (opponent, gap)); ``False`` draws opponent and gap uniformly, which makes 73% of
    states medium.
    """

    FEATURES = 8

    def __init__(self, *, success=SUCCESS, think_mean=THINK_MEAN, think_sd=THINK_SD, answer_mean: float = 110.0,
                 answer_sd: float = 25.0, format_failure: float = 0.02, balanced: bool = True):
        self.success = np.asarray(success, dtype=np.float64)
        if self.success.shape != (3, 4) or np.any(self.success < 0) or np.any(self.success > 1):
            raise UserError("success must be a 3 x 4 table of probabilities (difficulty x mode)")
        self.think_mean = np.asarray(think_mean, dtype=np.float64)
        self.think_sd = np.asarray(think_sd, dtype=np.float64)
        if self.think_mean.shape != (4,) or self.think_sd.shape != (4,) or np.any(self.think_mean < 0) \
                or np.any(self.think_sd < 0):  # fmt: skip
            raise UserError("think_mean and think_sd need 4 non-negative values (modes 1..4)")
        if not (answer_mean >= 1 and answer_sd >= 0 and 0 <= format_failure < 1):
            raise UserError("need answer_mean >= 1, answer_sd >= 0 and 0 <= format_failure < 1")
        self.answer_mean, self.answer_sd = float(answer_mean), float(answer_sd)
        self.format_failure = float(format_failure)
        self.balanced = bool(balanced)

    # ------------------------------------------------------------------ states
    def sample_states(self, n: int, rng: np.random.Generator) -> NegotiationStates:
        if n < 1:
            raise UserError(f"n must be >= 1, got {n}")
        if self.balanced:
            diff = rng.integers(0, 3, n)
            opp, gap = np.empty(n, dtype=np.int64), np.empty(n)
            # easy: cooperative & gap < 0.4; hard: tough & gap > 0.6
            e, h = diff == 0, diff == 2
            opp[e], gap[e] = 0, rng.uniform(0.0, 0.4, e.sum())
            opp[h], gap[h] = 2, rng.uniform(0.6, 1.0, h.sum())
            m = diff == 1
            # medium: uniform over the rest of the (opponent, gap) square, by rejection
            idx = np.flatnonzero(m)
            while idx.size:
                o, g = rng.integers(0, 3, idx.size), rng.uniform(0.0, 1.0, idx.size)
                ok = ~(((o == 0) & (g < 0.4)) | ((o == 2) & (g > 0.6)))
                opp[idx[ok]], gap[idx[ok]] = o[ok], g[ok]
                idx = idx[~ok]
        else:
            opp, gap = rng.integers(0, 3, n), rng.uniform(0.0, 1.0, n)
        return NegotiationStates(gap=gap, opponent=opp, turns_left=rng.integers(1, 6, n),
                                 deal_open=rng.random(n) < 0.5, s_before=rng.integers(2, 9, n))  # fmt: skip

    # ------------------------------------------------------------------ outcomes
    def step(self, states: NegotiationStates, modes, rng: np.random.Generator) -> Rollout:
        """Outcomes of one reply per entry: ``modes`` [n] in 1..4 for ``states`` [n] (repeat states for groups)."""
        m = np.asarray(modes, dtype=np.int64)
        n = len(states)
        if m.shape != (n,) or np.any(m < 1) or np.any(m > 4):
            raise UserError(f"modes must be {n} values in 1..4")
        p = self.success[states.difficulty, m - 1]
        ok = rng.random(n) < p
        drop = rng.random(n) < 0.5
        b = states.s_before.astype(np.float64)
        after = np.where(ok, np.minimum(10.0, b + 2.0), np.where(drop, b - 1.0, b))
        answer = np.maximum(1, np.rint(rng.normal(self.answer_mean, self.answer_sd, n))).astype(np.int64)
        think = np.maximum(0, np.rint(rng.normal(self.think_mean[m - 1], self.think_sd[m - 1]))).astype(np.int64)
        r = sotopia_style_reward(b, after, answer)
        fail = rng.random(n) < self.format_failure
        r = np.where(fail, FORMAT_FAILURE_REWARD, r).astype(np.float32)
        return Rollout(rewards=r, modes=np.where(fail, -1, m), think_tokens=think, answer_tokens=answer,
                       s_after=after)  # fmt: skip

    # ------------------------------------------------------------------ exact expectations
    def expected_length_factor(self) -> float:
        """E[r_len] over the (rounded, >= 1) normal answer length, by summing over token counts."""
        from scipy.stats import norm

        t = np.arange(1, int(self.answer_mean + 12 * self.answer_sd) + 400)
        if self.answer_sd == 0:
            return float(answer_length_factor(max(1, round(self.answer_mean))))
        cdf = norm.cdf((t + 0.5 - self.answer_mean) / self.answer_sd)
        pmf = np.diff(np.r_[0.0, cdf])  # mass below 1.5 goes to 1 token
        return float(np.sum(pmf * answer_length_factor(t)))

    def expected_reward(self, states: NegotiationStates) -> np.ndarray:
        """E[r | s, mode] [n, 4] (float64), exact under the environment's distributions."""
        b = states.s_before.astype(np.float64)[:, None]
        p = self.success[states.difficulty]  # [n, 4]
        r_up = (sotopia_style_reward(b, np.minimum(10.0, b + 2.0), 0) + 0.0)  # length factor 1 at 0 tokens
        r_down = sotopia_style_reward(b, b - 1.0, 0)
        r_same = sotopia_style_reward(b, b, 0)
        r_ans = p * r_up + (1 - p) * (0.5 * r_down + 0.5 * r_same)
        f = self.format_failure
        return (1 - f) * r_ans * self.expected_length_factor() + f * FORMAT_FAILURE_REWARD

    def best_modes(self, states: NegotiationStates) -> np.ndarray:
        """The oracle's mode per state [n] (1..4): highest expected reward, the cheapest among exact ties."""
        er = self.expected_reward(states)
        best = er == er.max(1, keepdims=True)
        return np.argmax(best, axis=1) + 1  # modes are ordered by cost, so the first maximum is the cheapest
