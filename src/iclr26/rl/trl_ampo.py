"""AMPO advantages inside TRL's ``GRPOTrainer`` (P14) — needs ``trl`` (tested with trl 1.16).

``AMPOGRPOTrainer`` is a drop-in ``GRPOTrainer``: TRL samples ``num_generations`` completions per prompt
and scores them with the reward functions as usual; then the trainer replaces TRL's advantages by
:func:`~iclr26.rl.advantages.ampo_advantages` over the same (weighted-sum) rewards. Groups are TRL's:
every ``num_generations`` consecutive completions of the gathered batch. Modes come from the decoded
completions (:func:`~iclr26.rl.reward.parse_mode` by default: -1 on a format failure), lengths from the
completion mask (total response tokens). A completion that no reward function scored (all ``None``) is
a judge failure: reward 0, mode -1, as in the authors' reward. The std epsilon is the authors' 1e-6
(TRL's own is 1e-4). Only ``scale_rewards="group"`` with ``multi_objective_aggregation=
"sum_then_normalize"`` has AMPO's meaning, so the trainer refuses other settings.

Per step it logs ``ampo/gate_on`` (share of groups whose mode-level term was computed), ``ampo/tie``
and ``ampo/format_failure``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from trl import GRPOTrainer

from iclr26.core.errors import UserError
from iclr26.rl.advantages import FORMAT_FAILURE_MODE, grpo_advantages, mode_advantages
from iclr26.rl.reward import JUDGE_FAILURE_REWARD, parse_mode

log = logging.getLogger(__name__)

__all__ = ["AMPOGRPOTrainer", "completion_text"]


def completion_text(completion) -> str:
    """The text of one TRL completion: a str, or a conversational list of messages (their contents)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") if isinstance(m.get("content"), str) else "" for m in completion)


class AMPOGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages are AMPO's (GRPO + the gated mode-level term).

    Extra keyword arguments: ``mode_parser`` (completion text -> mode 1..4 or -1; default
    :func:`~iclr26.rl.reward.parse_mode`), ``ampo_eps`` (1e-6), ``ampo_gate`` (``"strict"``) and
    ``ampo_tie_break`` (True), as in :func:`~iclr26.rl.advantages.mode_advantages`.
    """

    def __init__(self, *args, mode_parser: Callable[[str], int] = parse_mode, ampo_eps: float = 1e-6,
                 ampo_gate: str = "strict", ampo_tie_break: bool = True, **kwargs):  # fmt: skip
        super().__init__(*args, **kwargs)
        if self.scale_rewards != "group":
            raise UserError(f"AMPOGRPOTrainer needs scale_rewards='group' (per-group std), got {self.scale_rewards!r}")
        if getattr(self, "multi_objective_aggregation", "sum_then_normalize") != "sum_then_normalize":
            raise UserError("AMPOGRPOTrainer needs multi_objective_aggregation='sum_then_normalize'")
        self.mode_parser = mode_parser
        self.ampo_eps, self.ampo_gate, self.ampo_tie_break = ampo_eps, ampo_gate, ampo_tie_break
        self._ampo_rewards_per_func: torch.Tensor | None = None
        self._ampo_local_modes: list[int] | None = None
        self.last_ampo: dict | None = None  # rewards / lengths / modes / advantages of the last batch (all ranks)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._ampo_rewards_per_func = rewards_per_func  # gathered over processes by TRL
        self._ampo_local_modes = [int(self.mode_parser(completion_text(c))) for c in completions]
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        from accelerate.utils import gather_object

        rpf = self._ampo_rewards_per_func
        modes = torch.tensor(gather_object(self._ampo_local_modes), dtype=torch.int64)
        lengths = self.accelerator.gather(out["completion_mask"].sum(-1)).cpu()
        weights = self.reward_weights.to(rpf.device)
        unscorable = torch.isnan(rpf).all(dim=1).cpu()
        rewards = (rpf * weights.unsqueeze(0)).nansum(dim=1).float().cpu()
        rewards[unscorable] = JUDGE_FAILURE_REWARD
        modes[unscorable] = FORMAT_FAILURE_MODE
        mode = "train" if self.model.training else "eval"
        k = self.num_generations if mode == "train" else self.num_generations_eval
        groups = torch.arange(rewards.numel()) // k  # TRL's groups: consecutive completions
        term = mode_advantages(rewards, lengths, modes, groups, eps=self.ampo_eps, gate=self.ampo_gate,
                               tie_break=self.ampo_tie_break)  # fmt: skip
        adv = grpo_advantages(rewards, groups, eps=self.ampo_eps) + term.per_sample
        n_local = out["completion_ids"].shape[0]
        pi = self.accelerator.process_index
        out["advantages"] = adv[pi * n_local : (pi + 1) * n_local].to(out["advantages"].device)
        self.last_ampo = {"rewards": rewards, "lengths": lengths, "modes": modes, "advantages": adv,
                          "gate_on": term.gate_on, "tie": term.tie}  # fmt: skip
        self._metrics[mode]["ampo/gate_on"].append(float(term.gate_on.float().mean()))
        self._metrics[mode]["ampo/tie"].append(float(term.tie.float().mean()))
        self._metrics[mode]["ampo/format_failure"].append(float((modes == FORMAT_FAILURE_MODE).float().mean()))
        return out
