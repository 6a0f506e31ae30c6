"""Task vectors over state dicts: the shared plumbing of every merging method.

Shared by the merging baselines (task arithmetic, TIES, weight averaging, OPCM, WUDI) and by
NUFILT (*Null-Space Filtering for Data-Free Continual Model Merging*, ICLR 2026,
arXiv 2509.21413). A task vector is ``theta_t - theta_0`` per parameter. Every merging function
takes models or state dicts, selects the parameters that merge with a name filter, leaves all other
parameters byte-identical to the base, and never mutates its inputs.

Conventions: linear weights are ``[out, in]`` (PyTorch); Hugging Face GPT-2 ``Conv1D`` stores
``[in, out]`` and is transposed on the way in and out (detected when modules are passed).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

StateDict = dict[str, Tensor]
ModelLike = nn.Module | Mapping[str, Tensor]


def as_state_dict(model: ModelLike, *, what: str = "model") -> StateDict:
    """A detached, cloned ``{name: tensor}`` copy of a module's or mapping's floating parameters.

    Cloning keeps every later arithmetic away from the caller's storage (inputs never mutated).
    Non-floating entries (integer buffers such as position ids) are kept as they are.
    """
    if isinstance(model, nn.Module):
        sd = model.state_dict()
    elif isinstance(model, Mapping):
        sd = model
    else:
        raise UserError(f"{what}: expected an nn.Module or a state dict, got {type(model).__name__}")
    out: StateDict = {}
    for k, v in sd.items():
        if not isinstance(v, Tensor):
            raise UserError(f"{what}: entry {k!r} is a {type(v).__name__}, expected a tensor")
        out[k] = v.detach().clone()
    return out


def transposed_keys(model: ModelLike) -> set[str]:
    """Weight names stored ``[in, out]`` (Hugging Face ``Conv1D``, as in GPT-2); empty for mappings."""
    if not isinstance(model, nn.Module):
        return set()
    keys: set[str] = set()
    for name, mod in model.named_modules():
        if type(mod).__name__ == "Conv1D" and hasattr(mod, "weight"):
            keys.add(f"{name}.weight" if name else "weight")
    return keys


def linear_weight_keys(model: ModelLike) -> set[str] | None:
    """Names of ``nn.Linear`` / ``Conv1D`` weights when ``model`` is a module; ``None`` for a mapping."""
    if not isinstance(model, nn.Module):
        return None
    keys: set[str] = set()
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear) or type(mod).__name__ == "Conv1D":
            keys.add(f"{name}.weight" if name else "weight")
    return keys


def check_compatible(base: StateDict, other: StateDict, *, what: str) -> None:
    """Same parameter names and shapes as the base, or a one-line ``UserError``."""
    missing = sorted(set(base) - set(other))
    extra = sorted(set(other) - set(base))
    if missing or extra:
        raise UserError(
            f"{what}: parameter names differ from the base (missing {missing[:3]}, extra {extra[:3]})"
        )
    for k, v in base.items():
        if other[k].shape != v.shape:
            raise UserError(f"{what}: {k} has shape {tuple(other[k].shape)}, base has {tuple(v.shape)}")


def select_keys(
    base: StateDict,
    layers: Sequence[str] | None,
    *,
    matrices_only: bool = False,
    allowed: set[str] | None = None,
) -> list[str]:
    """Floating parameters that merge: names containing any substring in ``layers`` (all if ``None``).

    ``matrices_only`` keeps 2-D tensors; ``allowed`` (e.g. the Linear weights of a module)
    further restricts the set. Raises ``UserError`` when nothing matches, since a merge that
    changes nothing is almost always a typo in the filter.
    """
    if layers is not None and (isinstance(layers, str) or not all(isinstance(s, str) for s in layers)):
        raise UserError(f"layers must be a list of name substrings or None, got {layers!r}")
    keys = []
    for k, v in base.items():
        if not torch.is_floating_point(v):
            continue
        if layers is not None and not any(s in k for s in layers):
            continue
        if matrices_only and v.ndim != 2:
            continue
        if allowed is not None and k not in allowed:
            continue
        keys.append(k)
    if not keys:
        raise UserError(
            f"layer filter {list(layers) if layers is not None else None} matches no "
            f"{'2-D Linear weight' if matrices_only else 'floating parameter'}; "
            f"some names: {list(base)[:5]}"
        )
    return keys


def task_vector(finetuned: StateDict, base: StateDict, keys: Iterable[str]) -> StateDict:
    """``finetuned - base`` for ``keys`` (new tensors)."""
    return {k: finetuned[k] - base[k] for k in keys}


def tv_norm(tv: Mapping[str, Tensor], keys: Iterable[str] | None = None) -> float:
    """Frobenius norm of a task vector over ``keys`` (all entries if ``None``), in float64."""
    keys = list(tv) if keys is None else list(keys)
    if not keys:
        return 0.0
    sq = sum(float(tv[k].double().pow(2).sum()) for k in keys)
    return sq**0.5


def to_module(state: StateDict, like: nn.Module) -> nn.Module:
    """A deep copy of ``like`` carrying ``state`` (the caller's module is left untouched)."""
    out = copy.deepcopy(like)
    out.load_state_dict(state)
    return out


def wrap_like(state: StateDict, like: ModelLike) -> ModelLike:
    """Return a module when the caller passed a module, else the state dict."""
    return to_module(state, like) if isinstance(like, nn.Module) else state


def as_matrix(t: Tensor, key: str, transposed: set[str]) -> Tensor:
    """``[out, in]`` view of a linear weight (transposing ``Conv1D``'s ``[in, out]``)."""
    return t.T if key in transposed else t


def from_matrix(t: Tensor, key: str, transposed: set[str]) -> Tensor:
    return t.T.contiguous() if key in transposed else t
