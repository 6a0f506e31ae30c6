"""Test utility: check that no hook registered outside transformers is left on a model.

transformers 5 installs its own output-recording hooks on decoder layers and attention modules at the
first forward pass; those are part of the model and are ignored. Anything else (iclr26 capture/steering
hooks, test hooks) must be gone after the context that registered it exits.
"""

from __future__ import annotations

from torch import nn

_OWNED = ("transformers.",)


def _owner(fn) -> str:
    fn = getattr(fn, "func", fn)  # functools.partial
    return getattr(fn, "__module__", None) or type(fn).__module__ or ""


def leftover_hooks(model: nn.Module) -> list[str]:
    """``name.kind: owner.qualname`` for every forward/pre/backward hook not installed by transformers."""
    found = []
    for name, mod in model.named_modules():
        for kind in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"):
            for fn in getattr(mod, kind, {}).values():
                owner = _owner(fn)
                if not owner.startswith(_OWNED):
                    found.append(f"{name or '<root>'}.{kind}: {owner}.{getattr(fn, '__qualname__', fn)}")
    return found


def assert_no_hooks(model: nn.Module) -> None:
    left = leftover_hooks(model)
    assert not left, f"hooks left behind: {left}"
