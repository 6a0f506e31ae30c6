"""Merging baselines over state dicts: task arithmetic, TIES, weight averaging, OPCM, WUDI.

The baselines NUFILT (*Null-Space Filtering for Data-Free Continual Model Merging*, ICLR 2026,
arXiv 2509.21413) is compared with, in the continual forms its official code (a FusionBench fork)
uses. Each continual ``*_step`` maps ``(base, merged so far, new fine-tuned model)`` to the next
merged state dict; the one-shot functions (:func:`task_arithmetic`, :func:`ties_merging`,
:func:`wudi_merging`) merge a list of models at once.

- Task arithmetic: ``theta <- theta + s * tau_t`` (s = 0.3).
- TIES: keep the top-k magnitudes of each task vector, elect a sign per entry by summed mass,
  sum (or average) the entries that agree. Continual form: ``theta <- theta + s * TIES(tau_m, tau_t)``.
- Weight averaging: running mean ``theta_t = theta_{t-1} + (theta_t' - theta_{t-1}) / t``.
- OPCM (orthogonal projection-based continual merging): project the new task vector off the
  merged task vector's leading singular pairs, then rescale the merged task vector to the mean norm
  of the task vectors seen so far.
- WUDI: minimise ``sum_i ||(tau - tau_i) tau_i^T||_F^2 / ||tau_i||_F^2`` over ``tau`` with Adam.

Every function takes a name filter ``keys`` (parameters that merge); all other parameters stay
equal to the base. Inputs are never mutated.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import Tensor

from iclr26.core.errors import UserError
from iclr26.merging.task_vectors import (
    ModelLike,
    StateDict,
    as_matrix,
    as_state_dict,
    check_compatible,
    from_matrix,
    select_keys,
    task_vector,
    transposed_keys,
    tv_norm,
    wrap_like,
)

log = logging.getLogger(__name__)


def _check_fraction(name: str, v: float, *, low_open: bool = True) -> None:
    if not (0.0 < v <= 1.0) if low_open else not (0.0 <= v <= 1.0):
        raise UserError(f"{name}={v}: must lie in (0, 1]")


# --------------------------------------------------------------------------- task arithmetic
def task_arithmetic_step(
    base: StateDict, merged: StateDict, task: StateDict, *, keys: Sequence[str], scaling: float = 0.3
) -> StateDict:
    """Continual task arithmetic: ``theta <- theta + scaling * (theta_t - theta_0)`` on ``keys``."""
    out = {k: v.clone() for k, v in merged.items()}
    for k in keys:
        out[k] = merged[k] + scaling * (task[k] - base[k])
    return out


def task_arithmetic(
    base: ModelLike,
    finetuned: Sequence[ModelLike],
    *,
    scaling: float = 0.3,
    layers: Sequence[str] | None = None,
) -> ModelLike:
    """One-shot task arithmetic ``theta_0 + scaling * sum_t tau_t`` (same result as the continual form)."""
    b = as_state_dict(base, what="base")
    keys = select_keys(b, layers)
    merged = {k: v.clone() for k, v in b.items()}
    for i, ft in enumerate(finetuned):
        t = as_state_dict(ft, what=f"finetuned[{i}]")
        check_compatible(b, t, what=f"finetuned[{i}]")
        merged = task_arithmetic_step(b, merged, t, keys=keys, scaling=scaling)
    return wrap_like(merged, base)


# --------------------------------------------------------------------------- TIES
def ties_vectors(tvs: Tensor, *, density: float = 0.2, merge: str = "sum") -> Tensor:
    """TIES over flattened task vectors ``tvs`` ``[n_tasks, n_params]`` -> ``[n_params]``.

    1. Trim: per task, keep the top ``density`` fraction of magnitudes (FusionBench's rounding).
    2. Elect: sign of the summed trimmed values; zero-sum entries take the sign of the grand total.
    3. Disjoint merge: sum (``"sum"``) or mean (``"mean"``) of the entries whose sign agrees.
    """
    if tvs.ndim != 2:
        raise UserError(f"ties_vectors expects [n_tasks, n_params], got shape {tuple(tvs.shape)}")
    _check_fraction("density", density)
    if merge not in ("sum", "mean"):
        raise UserError(f"merge={merge!r}: allowed values are sum, mean")
    n = tvs.shape[1]
    # FusionBench's rounding: threshold = the (n - int(n * density))-th smallest magnitude, kept
    # with ">=", so int(n * density) + 1 entries survive when magnitudes are distinct
    k = max(n - int(n * density), 1)
    kth = tvs.abs().kthvalue(k, dim=1, keepdim=True).values  # [n_tasks, 1]
    trimmed = tvs * (tvs.abs() >= kth)
    sign = torch.sign(trimmed.sum(dim=0))  # [n_params]
    sign[sign == 0] = torch.sign(sign.sum())
    agree = torch.where(sign.unsqueeze(0) > 0, trimmed > 0, trimmed < 0)
    selected = trimmed * agree
    if merge == "sum":
        return selected.sum(dim=0)
    count = (selected != 0).sum(dim=0).clamp(min=1)
    return selected.sum(dim=0) / count


def _flatten(tv: StateDict, keys: Sequence[str]) -> Tensor:
    # sorted order, like FusionBench's state_dict_to_vector (only matters for ties at the threshold)
    return torch.cat([tv[k].reshape(-1) for k in sorted(keys)])


def _unflatten(vec: Tensor, like: StateDict, keys: Sequence[str]) -> StateDict:
    out, i = {}, 0
    for k in sorted(keys):
        n = like[k].numel()
        out[k] = vec[i : i + n].view_as(like[k]).clone()
        i += n
    return out


def ties_step(
    base: StateDict,
    merged: StateDict,
    task: StateDict,
    *,
    keys: Sequence[str],
    t: int,
    scaling: float = 0.5,
    density: float = 0.2,
    merge: str = "sum",
    mode: str = "fusionbench",
) -> StateDict:
    """Continual TIES. ``t`` = 1-based index of the incoming task.

    ``mode="fusionbench"`` (official code): t = 1 gives ``theta_0 + s * tau_1`` (no trimming); later
    ``theta <- theta + s * TIES(theta - theta_0, tau_t)``, i.e. the TIES vector is added on top of
    the current merged model. ``mode="rebase"``: ``theta <- theta_0 + s * TIES(...)`` instead.
    """
    if mode not in ("fusionbench", "rebase"):
        raise UserError(f"mode={mode!r}: allowed values are fusionbench, rebase")
    tau_t = task_vector(task, base, keys)
    if t <= 1:
        delta = tau_t
    else:
        tau_m = task_vector(merged, base, keys)
        flat = torch.stack([_flatten(tau_m, keys), _flatten(tau_t, keys)])
        delta = _unflatten(ties_vectors(flat, density=density, merge=merge), tau_t, keys)
    out = {k: v.clone() for k, v in merged.items()}
    start = merged if mode == "fusionbench" else base
    for k in keys:
        out[k] = start[k] + scaling * delta[k]
    return out


def ties_merging(
    base: ModelLike,
    finetuned: Sequence[ModelLike],
    *,
    scaling: float = 0.3,
    density: float = 0.2,
    merge: str = "sum",
    layers: Sequence[str] | None = None,
) -> ModelLike:
    """One-shot TIES-merging: ``theta_0 + scaling * TIES(tau_1..tau_n)``."""
    b = as_state_dict(base, what="base")
    keys = select_keys(b, layers)
    flats = []
    for i, ft in enumerate(finetuned):
        t = as_state_dict(ft, what=f"finetuned[{i}]")
        check_compatible(b, t, what=f"finetuned[{i}]")
        flats.append(_flatten(task_vector(t, b, keys), keys))
    if not flats:
        raise UserError("ties_merging needs at least one fine-tuned model")
    delta = _unflatten(ties_vectors(torch.stack(flats), density=density, merge=merge), b, keys)
    out = {k: v.clone() for k, v in b.items()}
    for k in keys:
        out[k] = b[k] + scaling * delta[k]
    return wrap_like(out, base)


# --------------------------------------------------------------------------- weight averaging
def weight_average_step(
    base: StateDict, merged: StateDict, task: StateDict, *, keys: Sequence[str], t: int
) -> StateDict:
    """Running mean of the fine-tuned weights: ``theta <- theta + (theta_t - theta) / t`` (t = 1 gives theta_1)."""
    out = {k: v.clone() for k, v in merged.items()}
    for k in keys:
        out[k] = merged[k] + (task[k] - merged[k]) / t
    return out


# --------------------------------------------------------------------------- OPCM
def opcm_project(tau_m: Tensor, tau_t: Tensor, *, alpha: float = 0.5) -> Tensor:
    """OPCM's cleaned task vector for one ``[out, in]`` matrix.

    ``tau_m = U S V^T`` (full SVD, as in FusionBench); ``Pi = U^T tau_t V``; zero Pi's diagonal and
    its top-left ``s x s`` block, ``s`` = first index where the cumulative singular-value mass
    exceeds ``alpha``; return ``U Pi V^T``.
    """
    if float(tau_m.abs().max()) == 0.0:
        return tau_t.clone()  # nothing merged in this matrix yet: nothing to protect
    dtype = tau_t.dtype
    u, s, vh = torch.linalg.svd(tau_m.double(), full_matrices=True)
    split = int((s.cumsum(0) / s.sum() > alpha).double().argmax())
    proj = u.T @ tau_t.double() @ vh.T  # [out, in]
    proj.diagonal().zero_()
    proj[:split, :split] = 0
    return (u @ proj @ vh).to(dtype)


def opcm_step(
    base: StateDict,
    merged: StateDict,
    task: StateDict,
    *,
    keys: Sequence[str],
    matrix_keys: set[str],
    transposed: set[str],
    t: int,
    prev_lambda: float,
    norms: list[float],
    alpha: float = 0.5,
) -> tuple[StateDict, float, list[float]]:
    """One OPCM step; returns ``(merged', lambda_t, norms')``.

    ``norms`` holds the task-vector norms of the tasks merged so far (over ``keys``). At t = 1 the
    merged model is the first fine-tuned model and ``lambda = 1``.
    """
    _check_fraction("alpha", alpha, low_open=False)
    tau_t = task_vector(task, base, keys)
    norms = [*norms, tv_norm(tau_t)]
    out = {k: v.clone() for k, v in merged.items()}
    if t <= 1:
        for k in keys:
            out[k] = task[k].clone()
        return out, 1.0, norms
    mean_norm = sum(norms) / len(norms)
    new_tv: StateDict = {}
    for k in keys:
        tau_m = merged[k] - base[k]
        if k in matrix_keys:
            cleaned = from_matrix(
                opcm_project(
                    as_matrix(tau_m, k, transposed), as_matrix(tau_t[k], k, transposed), alpha=alpha
                ),
                k,
                transposed,
            )
        else:
            cleaned = tau_t[k]
        new_tv[k] = prev_lambda * tau_m + cleaned
    norm = tv_norm(new_tv)
    lam = (
        norm / mean_norm if mean_norm > 0 else prev_lambda
    )  # lambda_t = ||lambda_{t-1} tau_m + delta|| / mean
    scale = mean_norm / norm if norm > 0 else 1.0
    for k in keys:
        out[k] = base[k] + new_tv[k] * scale
    return out, lam, norms


# --------------------------------------------------------------------------- WUDI
def wudi_solve(
    tvs: Tensor, *, iters: int = 300, lr: float = 1e-5, lr_relative: float | None = None
) -> tuple[Tensor, list[float]]:
    """WUDI for one matrix: ``tvs`` ``[n, out, in]`` -> merged ``[out, in]`` and the loss curve.

    Start from ``sum_i tau_i`` and minimise ``sum_i ||(tau - tau_i) tau_i^T||_F^2 / ||tau_i||_F^2`` with
    Adam. ``lr_relative`` sets ``lr = lr_relative * rms(sum_i tau_i)``: Adam's step size does not
    scale with the gradient, so a fixed 1e-5 only suits weights of CLIP's scale.
    """
    if iters < 0:
        raise UserError(f"iters={iters}: must be >= 0")
    out_dtype = tvs.dtype
    # float64 on CPU: float32 Adam states decay into denormals there and run ~10x slower
    tvs = tvs.detach().to(torch.float64 if tvs.device.type == "cpu" else tvs.dtype)
    init = tvs.sum(dim=0)
    if lr_relative is not None:
        lr = float(lr_relative * init.pow(2).mean().sqrt())
    tau = torch.nn.Parameter(init.clone())
    sq = tvs.reshape(tvs.shape[0], -1).pow(2).sum(dim=1).clamp(min=1e-30)  # [n]
    losses: list[float] = []
    if iters == 0 or lr <= 0:
        return init.to(out_dtype), losses
    opt = torch.optim.Adam([tau], lr=lr)
    with torch.enable_grad():
        for _ in range(iters):
            prod = (tau.unsqueeze(0) - tvs) @ tvs.transpose(1, 2)  # [n, out, out]
            loss = (prod.pow(2) / sq[:, None, None]).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    return tau.detach().to(out_dtype), losses


def _wudi_combine(
    tvs: list[StateDict],
    keys: Sequence[str],
    matrix_keys: set[str],
    transposed: set[str],
    iters: int,
    lr: float,
    lr_relative: float | None,
) -> tuple[StateDict, dict]:
    out: StateDict = {}
    first, last = 0.0, 0.0
    for k in keys:
        stack = torch.stack([as_matrix(tv[k], k, transposed) for tv in tvs]) if k in matrix_keys else None
        if stack is not None:
            merged, losses = wudi_solve(stack, iters=iters, lr=lr, lr_relative=lr_relative)
            out[k] = from_matrix(merged, k, transposed)
            if losses:
                first += losses[0]
                last += losses[-1]
        else:
            out[k] = sum(tv[k] for tv in tvs) / len(tvs)
    return out, {"loss_first": first, "loss_last": last}


def wudi_step(
    base: StateDict,
    merged: StateDict,
    task: StateDict,
    *,
    keys: Sequence[str],
    matrix_keys: set[str],
    transposed: set[str],
    t: int,
    iters: int = 300,
    lr: float = 1e-5,
    lr_relative: float | None = None,
) -> tuple[StateDict, dict]:
    """Continual WUDI (NUFILT's repository): t = 1 takes theta_1; later WUDI over {tau_m, tau_t}."""
    out = {k: v.clone() for k, v in merged.items()}
    if t <= 1:
        for k in keys:
            out[k] = task[k].clone()
        return out, {}
    tvs = [task_vector(merged, base, keys), task_vector(task, base, keys)]
    merged_tv, info = _wudi_combine(tvs, keys, matrix_keys, transposed, iters, lr, lr_relative)
    for k in keys:
        out[k] = base[k] + merged_tv[k]
    return out, info


def wudi_merging(
    base: ModelLike,
    finetuned: Sequence[ModelLike],
    *,
    iters: int = 300,
    lr: float = 1e-5,
    lr_relative: float | None = None,
    layers: Sequence[str] | None = None,
) -> ModelLike:
    """One-shot WUDI over all task vectors (2-D tensors optimised, other parameters averaged)."""
    b = as_state_dict(base, what="base")
    keys = select_keys(b, layers)
    matrix_keys = {k for k in keys if b[k].ndim == 2}  # official: every 2-D tensor, embeddings included
    tvs = []
    for i, ft in enumerate(finetuned):
        t = as_state_dict(ft, what=f"finetuned[{i}]")
        check_compatible(b, t, what=f"finetuned[{i}]")
        tvs.append(task_vector(t, b, keys))
    if not tvs:
        raise UserError("wudi_merging needs at least one fine-tuned model")
    merged_tv, _ = _wudi_combine(tvs, keys, matrix_keys, transposed_keys(base), iters, lr, lr_relative)
    out = {k: v.clone() for k, v in b.items()}
    for k in keys:
        out[k] = b[k] + merged_tv[k]
    return wrap_like(out, base)
