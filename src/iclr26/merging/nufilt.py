"""NUFILT: null-space filtering for data-free continual model merging.

*Null-Space Filtering for Data-Free Continual Model Merging: Preserving Stability, Promoting
Plasticity* (ICLR 2026, arXiv 2509.21413; official code zihuanqiu/NUFILT). Per merged linear layer
(weight ``[out, in]``), with ``T = W_t - W_0`` the new task vector and ``M = W_merged - W_0``:

1. Stability: ``V_M`` = the top ``null_rank`` right singular vectors of ``M`` (earlier tasks'
   input directions); the filter ``P = I - V_M V_M^T`` removes them from the new update ``T P``.
2. Plasticity: a low-rank correction ``G = P + B A`` (``A ~ N(0, 0.02^2)``, ``B = 0``) is fitted
   jointly over all layers with Adam on the data-free surrogate
   ``sum ||T V_T - (M + T G) V_T||^2 + ||M V_M - (M + T G) V_M||^2`` (``V_T`` = top ``grad_rank``
   right singular vectors of ``T``).
3. Fuse: ``W_merged <- W_merged + T G`` (no inference cost). Parameters outside the filter stay at theta_0.

Library default: ``P = I`` while nothing is merged (the official code builds ``P`` from the SVD of
a zero matrix at the first task; ``faithful_first_task=True`` reproduces that).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import Tensor

from iclr26.core.errors import UserError
from iclr26.core.seed import make_generator
from iclr26.merging.task_vectors import (
    ModelLike,
    StateDict,
    as_matrix,
    as_state_dict,
    check_compatible,
    from_matrix,
    linear_weight_keys,
    select_keys,
    transposed_keys,
    wrap_like,
)

log = logging.getLogger(__name__)


def top_right_singular(
    mat: Tensor, rank: int, *, rank_tol: float | None = None, allow_zero: bool = False
) -> Tensor:
    """First ``rank`` right singular vectors of ``mat`` ``[out, in]`` -> ``[in, k]`` (float64 SVD).

    ``rank`` is clamped to ``min(out, in)``. With ``rank_tol``, only directions with
    ``sigma > rank_tol * sigma_max`` are kept (the rest are arbitrary when ``rank(mat) < rank``).
    A zero matrix gives ``[in, 0]`` unless ``allow_zero`` (then the SVD back end's basis is used).
    """
    if rank < 0:
        raise UserError(f"rank={rank}: must be >= 0")
    d = mat.shape[1]
    k = min(rank, *mat.shape)
    if k == 0 or (float(mat.abs().max()) == 0.0 and not allow_zero):
        return mat.new_zeros(d, 0)
    _, s, vh = torch.linalg.svd(mat.double(), full_matrices=False)
    if rank_tol is not None and s.numel() and float(s[0]) > 0:
        k = min(k, int((s > rank_tol * s[0]).sum()))
    return vh[:k].T.to(mat.dtype).contiguous()  # [in, k]


def null_space_projector(
    merged_tv: Tensor, null_rank: int, *, rank_tol: float | None = None, faithful_first_task: bool = False
) -> Tensor:
    """``P = I - V_M V_M^T`` ``[in, in]`` from a merged task vector ``[out, in]``; ``I`` when it is zero."""
    v = top_right_singular(merged_tv, null_rank, rank_tol=rank_tol, allow_zero=faithful_first_task)
    eye = torch.eye(merged_tv.shape[1], dtype=merged_tv.dtype, device=merged_tv.device)
    return eye - v @ v.T


class _Layer:
    """Per-layer tensors of one NUFILT step (all ``[out, in]`` orientation)."""

    def __init__(
        self,
        key: str,
        T: Tensor,
        M: Tensor,
        v_m: Tensor,
        v_t: Tensor,
        u: Tensor | None,
        lora_rank: int,
        init_std: float,
        gen: torch.Generator,
    ):
        self.key, self.T, self.M, self.v_m, self.v_t, self.u = key, T, M, v_m, v_t, u
        d = T.shape[1]
        r = max(lora_rank, 1)
        # drawn from the CPU generator (the same values whatever T's device), then moved to T's device
        a = torch.randn(r, d, generator=gen, dtype=T.dtype) * init_std
        self.A = torch.nn.Parameter(a.to(T.device))  # [r, in]
        self.B = torch.nn.Parameter(torch.zeros(d, r, dtype=T.dtype, device=T.device))  # [in, r]

    def proj(self, v: Tensor) -> Tensor:
        """``P v`` for ``v`` ``[in, k]`` without forming ``P``."""
        return v if self.u is None else v - self.u @ (self.u.T @ v)

    def loss(self, lambda1: float, lambda2: float) -> Tensor:
        total = self.T.new_zeros(())
        # term 1: match the new task's response along its own top input directions V_T;
        # term 2: keep the merged model's response along the earlier tasks' directions V_M
        for lam, v, source in ((lambda1, self.v_t, self.T), (lambda2, self.v_m, self.M)):
            if lam == 0.0 or v.shape[1] == 0:
                continue
            target = source @ v  # [out, k]
            pred = self.M @ v + self.T @ (self.proj(v) + self.B @ (self.A @ v))
            total = total + lam * (target - pred).pow(2).sum()
        return total

    @torch.no_grad()
    def right_factor(self, use_lora: bool) -> Tensor:
        """``G = P + B A`` ``[in, in]``."""
        d = self.T.shape[1]
        eye = torch.eye(d, dtype=self.T.dtype, device=self.T.device)
        g = eye if self.u is None else eye - self.u @ self.u.T
        if use_lora:
            g = g + self.B @ self.A
        return g


def nufilt_step(
    base: StateDict,
    merged: StateDict,
    task: StateDict,
    *,
    keys: Sequence[str],
    transposed: set[str] | None = None,
    null_rank: int = 128,
    grad_rank: int = 8,
    lora_rank: int = 64,
    steps: int = 50,
    lr: float = 1e-3,
    lambda1: float = 1.0,
    lambda2: float = 1.0,
    null_space: bool = True,
    solve: bool = True,
    faithful_first_task: bool = False,
    rank_tol: float | None = None,
    init_std: float = 0.02,
    seed: int = 0,
) -> tuple[StateDict, dict]:
    """Merge one fine-tuned state dict into ``merged``; returns ``(merged', info)``.

    ``keys`` are the 2-D linear weights that merge; all other entries of ``merged`` are copied
    unchanged (the caller starts from theta_0, so they stay at theta_0). The adapter is solved only
    when something is merged already (``M != 0`` in some layer), ``solve`` is true, ``lora_rank > 0``
    and ``steps > 0``. ``null_space=False`` keeps ``P = I`` (ablation). ``info["loss"]`` is the
    surrogate-loss curve; ``info["adapters"]`` maps each key to its fitted ``(A [r, in], B [in, r])``
    in ``[out, in]`` orientation (empty when nothing was solved).
    """
    for name, v in (
        ("null_rank", null_rank),
        ("grad_rank", grad_rank),
        ("lora_rank", lora_rank),
        ("steps", steps),
    ):
        if v < 0:
            raise UserError(f"{name}={v}: must be >= 0")
    transposed = transposed or set()
    gen = make_generator(seed)
    layers: list[_Layer] = []
    anything_merged = False
    for k in keys:
        if base[k].ndim != 2:
            raise UserError(f"NUFILT merges 2-D linear weights; {k} has shape {tuple(base[k].shape)}")
        # float64 on CPU: float32 Adam states decay into denormals there and run ~10x slower
        dtype = torch.float64 if base[k].device.type == "cpu" else torch.float32
        T = as_matrix(task[k] - base[k], k, transposed).to(dtype)  # [out, in]
        M = as_matrix(merged[k] - base[k], k, transposed).to(dtype)  # [out, in]
        anything_merged |= float(M.abs().max()) > 0
        v_m = top_right_singular(M, null_rank, rank_tol=rank_tol, allow_zero=faithful_first_task)
        v_t = top_right_singular(T, grad_rank)
        layers.append(_Layer(k, T, M, v_m, v_t, v_m if null_space else None, lora_rank, init_std, gen))
    do_solve = solve and anything_merged and lora_rank > 0 and steps > 0
    losses: list[float] = []
    if do_solve:
        params = [p for layer in layers for p in (layer.A, layer.B)]
        opt = torch.optim.Adam(params, lr=lr, foreach=True)
        with torch.enable_grad():
            for _ in range(steps):
                loss = sum(layer.loss(lambda1, lambda2) for layer in layers)
                if not loss.requires_grad:  # both ranks 0 or both lambdas 0: nothing to fit
                    break
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
    out = {k: v.clone() for k, v in merged.items()}
    with torch.no_grad():
        for layer in layers:
            k = layer.key
            upd = layer.T @ layer.right_factor(do_solve)  # [out, in]
            out[k] = merged[k] + from_matrix(upd, k, transposed).to(merged[k].dtype)
    adapters = (
        {layer.key: (layer.A.detach().clone(), layer.B.detach().clone()) for layer in layers}
        if do_solve
        else {}
    )
    return out, {"loss": losses, "solved": do_solve, "adapters": adapters}


def nufilt_keys(base: ModelLike, layers: Sequence[str] | None) -> tuple[list[str], set[str]]:
    """Keys NUFILT merges (2-D; Linear/Conv1D weights when a module is given) and the transposed ones."""
    sd = base.state_dict() if isinstance(base, torch.nn.Module) else base
    keys = select_keys(dict(sd), layers, matrices_only=True, allowed=linear_weight_keys(base))
    return keys, transposed_keys(base)


def nufilt_merge(
    base: ModelLike,
    finetuned: ModelLike | Sequence[ModelLike],
    *,
    layers: Sequence[str] | None = None,
    null_rank: int = 128,
    grad_rank: int = 8,
    lora_rank: int = 64,
    steps: int = 50,
    lr: float = 1e-3,
    null_space: bool = True,
    faithful_first_task: bool = False,
    rank_tol: float | None = None,
    seed: int = 0,
) -> ModelLike:
    """Merge fine-tuned models into ``base`` one after another with NUFILT (pure; inputs untouched).

    ``layers``: name substrings of the linear layers that merge (CLIP: ``["attn", "fc1"]``;
    ``None`` = every Linear weight). Returns a module if ``base`` is one, else a state dict.
    """
    if isinstance(finetuned, (torch.nn.Module, dict)):
        finetuned = [finetuned]
    b = as_state_dict(base, what="base")
    keys, transposed = nufilt_keys(base, layers)
    merged = {k: v.clone() for k, v in b.items()}
    for i, ft in enumerate(finetuned):
        t = as_state_dict(ft, what=f"finetuned[{i}]")
        check_compatible(b, t, what=f"finetuned[{i}]")
        merged, _ = nufilt_step(
            b,
            merged,
            t,
            keys=keys,
            transposed=transposed,
            null_rank=null_rank,
            grad_rank=grad_rank,
            lora_rank=lora_rank,
            steps=steps,
            lr=lr,
            null_space=null_space,
            faithful_first_task=faithful_first_task,
            rank_tol=rank_tol,
            seed=seed + i + 1,  # same seeds as ContinualMerger (task t uses seed + t)
        )
    return wrap_like(merged, base)
