"""GRPO / AMPO advantages, AMPO's reply format and reward, and a scripted negotiation testbed (P14).

:mod:`~iclr26.rl.advantages` — ``grpo_advantages``, ``ampo_advantages``, ``mode_advantages`` (float32,
vectorised over groups, matching the authors' verl code); :mod:`~iclr26.rl.reward` — ``parse_mode`` (the
``Thinking Level: k`` format check) and ``sotopia_style_reward``; :mod:`~iclr26.rl.negotiation` — a
negotiation environment with four thinking modes of different cost; :mod:`~iclr26.rl.mode_policy` — a
softmax mode policy trained with either estimator; :mod:`~iclr26.rl.trl_ampo` — ``AMPOGRPOTrainer``, TRL's
``GRPOTrainer`` with AMPO advantages (needs ``trl``; not imported here).
"""

from iclr26.rl.advantages import ModeTerm, ampo_advantages, grpo_advantages, mode_advantages
from iclr26.rl.mode_policy import ModePolicy, PolicyTrace, evaluate_policy, train_mode_policy
from iclr26.rl.negotiation import NegotiationEnv, NegotiationStates, Rollout
from iclr26.rl.reward import format_reply, parse_mode, sotopia_style_reward, split_reply

__all__ = [
    "ModeTerm",
    "ampo_advantages",
    "grpo_advantages",
    "mode_advantages",
    "ModePolicy",
    "PolicyTrace",
    "evaluate_policy",
    "train_mode_policy",
    "NegotiationEnv",
    "NegotiationStates",
    "Rollout",
    "format_reply",
    "parse_mode",
    "sotopia_style_reward",
    "split_reply",
]
