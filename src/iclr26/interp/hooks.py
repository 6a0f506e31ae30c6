"""Hooks on named sites of Hugging Face models: read an activation, or replace it.

Interpretability core shared by the ICLR 2026 interpretability reproductions (capture, probes, steering,
ablation, SAE splicing). Sites are resolved by :mod:`iclr26.lm.sites`; this module owns everything that
touches the module hooks:

- :func:`hooks` — a context that removes every handle it registered, on success, error or interrupt;
- :func:`eval_mode` — eval mode (and eager attention when attention weights are read) for one call;
- :func:`register_site_hook` — a read-only hook calling ``fn(activation)``;
- :func:`register_replace_hook` / :func:`replace_sites` — hooks whose ``fn(activation)`` returns the
  tensor the model should use instead (``None`` keeps the original). The new value is written back
  through the site's view (``Site.unview``: heads re-flattened, a fused q/k/v slice spliced back), so
  editing ``layers.0.attn.q`` of GPT-2 changes only the query third of ``c_attn``'s output.

Hooks on one module run in registration order and each sees what the previous one returned, so a
capture opened inside :func:`replace_sites` reads the edited values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from iclr26.core.errors import UserError
from iclr26.lm.sites import Site, get_adapter

Replacement = Callable[[torch.Tensor], torch.Tensor | None]


@contextmanager
def hooks(install: Callable[[list[RemovableHandle]], None]) -> Iterator[list[RemovableHandle]]:
    """Run ``install(handles)`` (which appends ``RemovableHandle``s) and remove them all on exit.

    Removal happens in ``finally``: exceptions, ``KeyboardInterrupt`` and a partial registration included.
    """
    handles: list[RemovableHandle] = []
    try:
        install(handles)
        yield handles
    finally:
        for h in reversed(handles):
            h.remove()
        handles.clear()


@contextmanager
def eval_mode(model: nn.Module, need_eager: bool = False) -> Iterator[nn.Module]:
    """Put ``model`` in eval mode (and eager attention if ``need_eager``) for the block, then restore."""
    was_training = model.training
    cfg = getattr(model, "config", None)
    old_impl = getattr(cfg, "_attn_implementation", None)
    switched = False
    try:
        model.eval()
        if need_eager and old_impl not in (None, "eager"):
            # sdpa/flash kernels return no attention weights; switch for this call only
            model.set_attn_implementation("eager")
            switched = True
        yield model
    finally:
        if switched:
            model.set_attn_implementation(old_impl)
        model.train(was_training)


def _first_input(args: tuple, kwargs: dict) -> tuple[str | int, torch.Tensor]:
    """A module's first tensor input and where it sits: index 0 of ``args`` or a keyword name."""
    if args:
        return 0, args[0]
    if "hidden_states" in kwargs:
        return "hidden_states", kwargs["hidden_states"]
    for k, v in kwargs.items():  # e.g. ``input=`` on a Linear called by keyword
        if isinstance(v, torch.Tensor):
            return k, v
    raise RuntimeError("hooked module received no tensor input")


def _viewed(site: Site, x: torch.Tensor) -> torch.Tensor:
    return site.view(x) if site.view is not None else x


def _output_tensor(site: Site, output: Any) -> torch.Tensor:
    idx = 1 if site.kind == "out1" else 0
    x = output[idx] if isinstance(output, tuple | list) else output
    if x is None:
        raise UserError(f"{site.name}: the module returned no attention weights; use eager attention")
    return x


def register_site_hook(site: Site, fn: Callable[[torch.Tensor], None]) -> RemovableHandle:
    """Register a read-only hook calling ``fn(tensor)`` with the site's (viewed) activation.

    Returns the handle; register inside :func:`hooks` so that it is always removed.
    """
    if site.kind == "in":

        def pre_hook(module, args, kwargs):
            fn(_viewed(site, _first_input(args, kwargs)[1]))

        return site.module.register_forward_pre_hook(pre_hook, with_kwargs=True)

    def hook(module, args, output):
        fn(_viewed(site, _output_tensor(site, output)))

    return site.module.register_forward_hook(hook)


def _write_back(site: Site, x: torch.Tensor, y: torch.Tensor | None) -> torch.Tensor | None:
    """The module tensor with the viewed value ``y`` in place of the original (None: unchanged)."""
    if y is None:
        return None
    if not isinstance(y, torch.Tensor):
        raise UserError(f"{site.name}: a replacement must return a tensor or None, got {type(y).__name__}")
    viewed_shape = _viewed(site, x).shape
    if y.shape != viewed_shape:
        raise UserError(
            f"{site.name}: replacement has shape {tuple(y.shape)}, the site has {tuple(viewed_shape)}"
        )
    y = y.to(device=x.device, dtype=x.dtype)
    return site.unview(x, y) if site.unview is not None else y


def register_replace_hook(site: Site, fn: Replacement) -> RemovableHandle:
    """Register a hook that replaces the site's activation with ``fn(activation)``.

    ``fn`` sees the viewed tensor (e.g. ``[B, T, H, dh]`` for ``attn.head_out``) and returns a tensor of
    the same shape (cast to the model's dtype) or ``None`` to keep it. Read-only sites raise ``UserError``.
    """
    if site.read_only:
        raise UserError(f"{site.name} cannot be replaced: {site.read_only}")

    if site.kind == "in":

        def pre_hook(module, args, kwargs):
            key, x = _first_input(args, kwargs)
            new = _write_back(site, x, fn(_viewed(site, x)))
            if new is None:
                return None
            if key == 0:
                return (new, *args[1:]), kwargs
            return args, {**kwargs, key: new}

        return site.module.register_forward_pre_hook(pre_hook, with_kwargs=True)

    def hook(module, args, output):
        x = _output_tensor(site, output)
        new = _write_back(site, x, fn(_viewed(site, x)))
        if new is None:
            return None
        if isinstance(output, tuple | list):
            return type(output)([new, *output[1:]])
        return new

    return site.module.register_forward_hook(hook)


@contextmanager
def replace_sites(model: nn.Module, edits: Mapping[str, Replacement]) -> Iterator[list[Site]]:
    """Within the block, every forward pass of ``model`` uses ``edits[site](activation)`` at each site.

    ``edits`` maps site names (aliases allowed) to replacement functions; see
    :func:`register_replace_hook`. The hooks are removed on exit, whatever happens. Yields the
    resolved sites. Neither the training mode nor ``requires_grad`` is touched, so gradients flow
    through the replacement (steering vectors can be trained this way).
    """
    if not edits:
        raise UserError("replace_sites needs at least one {site: function} edit")
    adapter = get_adapter(model)
    resolved = [(adapter.resolve(name), fn) for name, fn in edits.items()]
    for site, _ in resolved:  # refuse before registering anything
        if site.read_only:
            raise UserError(f"{site.name} cannot be replaced: {site.read_only}")

    def install(handles: list[RemovableHandle]) -> None:
        for site, fn in resolved:
            handles.append(register_replace_hook(site, fn))

    with hooks(install):
        yield [s for s, _ in resolved]
