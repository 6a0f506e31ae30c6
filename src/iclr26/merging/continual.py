"""Continual model merging: fold fine-tuned models into one model as they arrive.

The setting of NUFILT (*Null-Space Filtering for Data-Free Continual Model Merging*, ICLR 2026,
arXiv 2509.21413): tasks arrive one at a time, each as a model fine-tuned from a shared base;
no data and no earlier task models are kept. :class:`ContinualMerger` holds the base, the merged
model and whatever scalar state a method needs (OPCM's lambda and task-vector norms), and
dispatches to the per-step functions of :mod:`iclr26.merging.baselines` and
:mod:`iclr26.merging.nufilt`. :func:`continual_merge` is the pure one-call form.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from torch import nn

from iclr26.core.errors import UserError
from iclr26.merging.baselines import (
    opcm_step,
    task_arithmetic_step,
    ties_step,
    weight_average_step,
    wudi_step,
)
from iclr26.merging.nufilt import nufilt_keys, nufilt_step
from iclr26.merging.task_vectors import (
    ModelLike,
    StateDict,
    as_state_dict,
    check_compatible,
    linear_weight_keys,
    select_keys,
    transposed_keys,
    wrap_like,
)

log = logging.getLogger(__name__)

# method -> {hyperparameter: default}; defaults follow the official NUFILT/FusionBench configs
METHODS: dict[str, dict[str, Any]] = {
    "task_arithmetic": {"scaling": 0.3},
    "ties": {"scaling": 0.5, "density": 0.2, "merge": "sum", "mode": "fusionbench"},
    "weight_average": {},
    "opcm": {"alpha": 0.5},
    "wudi": {"iters": 300, "lr": 1e-5, "lr_relative": None},
    "nufilt": {
        "null_rank": 128,
        "grad_rank": 8,
        "lora_rank": 64,
        "steps": 50,
        "lr": 1e-3,
        "lambda1": 1.0,
        "lambda2": 1.0,
        "null_space": True,
        "solve": True,
        "faithful_first_task": False,
        "rank_tol": None,
        "init_std": 0.02,
    },
}


class ContinualMerger:
    """Merge fine-tuned models one at a time: ``m = ContinualMerger(base, method="nufilt"); m.add(ft)``.

    Parameters
    ----------
    base:
        The shared pre-trained model (``nn.Module``) or its state dict. Never modified.
    method:
        One of ``task_arithmetic``, ``ties``, ``weight_average``, ``opcm``, ``wudi``, ``nufilt``.
    layers:
        Name substrings selecting the parameters that merge (``None`` = all; for NUFILT all Linear
        weights). Everything else stays equal to the base.
    seed:
        Seeds NUFILT's adapter initialisation (task ``t`` uses ``seed + t``).
    **hparams:
        Method hyperparameters (see ``METHODS``); unknown names raise ``UserError``.

    Attributes: ``n_merged_`` (tasks merged), ``history_`` (one info dict per step), ``lambda_``
    and ``norms_`` (OPCM). ``model`` is a fresh module (or a state dict when ``base`` was one).
    """

    def __init__(
        self,
        base: ModelLike,
        method: str = "nufilt",
        *,
        layers: Sequence[str] | None = None,
        seed: int = 0,
        **hparams: Any,
    ):
        if method not in METHODS:
            raise UserError(f"unknown merging method {method!r}; allowed: {', '.join(METHODS)}")
        unknown = sorted(set(hparams) - set(METHODS[method]))
        if unknown:
            raise UserError(
                f"{method}: unknown hyperparameters {unknown}; allowed: {sorted(METHODS[method])}"
            )
        self.method = method
        self.layers = None if layers is None else list(layers)
        self.seed = seed
        self.hparams = {**METHODS[method], **hparams}
        self._like = base
        self._base = as_state_dict(base, what="base")
        if method == "nufilt":
            self.keys_, self.transposed_ = nufilt_keys(base, self.layers)
        else:
            self.keys_ = select_keys(self._base, self.layers)
            self.transposed_ = transposed_keys(base)
        lin = linear_weight_keys(base)
        # as in the official code: OPCM projects nn.Linear weights (all 2-D tensors when given a state
        # dict), WUDI optimises every 2-D tensor (embeddings too); other parameters are plain tensors
        if method == "wudi":
            self.matrix_keys_ = {k for k in self.keys_ if self._base[k].ndim == 2}
        else:
            self.matrix_keys_ = {
                k for k in self.keys_ if self._base[k].ndim == 2 and (lin is None or k in lin)
            }
        self._merged: StateDict = {k: v.clone() for k, v in self._base.items()}
        self.n_merged_ = 0
        self.lambda_ = 1.0
        self.norms_: list[float] = []
        self.history_: list[dict[str, Any]] = []

    def add(self, finetuned: ModelLike) -> ContinualMerger:
        """Merge one fine-tuned model (module or state dict); returns ``self``."""
        task = as_state_dict(finetuned, what="finetuned")
        check_compatible(self._base, task, what="finetuned")
        t = self.n_merged_ + 1
        hp, b, m, keys = self.hparams, self._base, self._merged, self.keys_
        info: dict[str, Any] = {"t": t}
        if self.method == "task_arithmetic":
            new = task_arithmetic_step(b, m, task, keys=keys, scaling=hp["scaling"])
        elif self.method == "ties":
            new = ties_step(
                b,
                m,
                task,
                keys=keys,
                t=t,
                scaling=hp["scaling"],
                density=hp["density"],
                merge=hp["merge"],
                mode=hp["mode"],
            )
        elif self.method == "weight_average":
            new = weight_average_step(b, m, task, keys=keys, t=t)
        elif self.method == "opcm":
            new, self.lambda_, self.norms_ = opcm_step(
                b,
                m,
                task,
                keys=keys,
                matrix_keys=self.matrix_keys_,
                transposed=self.transposed_,
                t=t,
                prev_lambda=self.lambda_,
                norms=self.norms_,
                alpha=hp["alpha"],
            )
            info["lambda"] = self.lambda_
        elif self.method == "wudi":
            new, extra = wudi_step(
                b,
                m,
                task,
                keys=keys,
                matrix_keys=self.matrix_keys_,
                transposed=self.transposed_,
                t=t,
                iters=hp["iters"],
                lr=hp["lr"],
                lr_relative=hp["lr_relative"],
            )
            info.update(extra)
        else:
            new, extra = nufilt_step(
                b, m, task, keys=keys, transposed=self.transposed_, seed=self.seed + t, **hp
            )
            info.update({k: v for k, v in extra.items() if k != "adapters"})  # keep history small
        self._merged = new
        self.n_merged_ = t
        self.history_.append(info)
        log.debug("merged task %d with %s", t, self.method)
        return self

    def state_dict(self) -> StateDict:
        """A copy of the merged state dict."""
        return {k: v.clone() for k, v in self._merged.items()}

    @property
    def model(self) -> ModelLike:
        """The merged model: a new module when the base was a module, else a state dict copy."""
        return (
            wrap_like(self.state_dict(), self._like)
            if isinstance(self._like, nn.Module)
            else self.state_dict()
        )


def continual_merge(
    base: ModelLike,
    finetuned: Sequence[ModelLike],
    method: str = "nufilt",
    *,
    layers: Sequence[str] | None = None,
    seed: int = 0,
    **hparams: Any,
) -> ModelLike:
    """Merge ``finetuned`` in the given order with ``method``; returns the final merged model."""
    merger = ContinualMerger(base, method, layers=layers, seed=seed, **hparams)
    for ft in finetuned:
        merger.add(ft)
    return merger.model


def continual_metrics(acc: Any) -> dict[str, float]:
    """ACC and BWT from an accuracy matrix ``acc[j, t]`` (task j after merging t+1 tasks; j <= t).

    ACC = mean final accuracy over all tasks; BWT = ``mean_{j < T} (acc[j, T-1] - acc[j, j])``.
    """
    import numpy as np

    a = np.asarray(acc, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise UserError(f"accuracy matrix must be square [tasks, steps], got shape {a.shape}")
    n = a.shape[0]
    final = a[:, -1]
    bwt = float(np.mean([final[j] - a[j, j] for j in range(n - 1)])) if n > 1 else 0.0
    return {"acc": float(np.mean(final)), "bwt": bwt}
