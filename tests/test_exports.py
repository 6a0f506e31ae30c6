"""The package export rule (docs/architecture.md): collections export nothing; technique packages
re-export entry points they define, with an exact ``__all__``; no package import loads transformers."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

COLLECTIONS = ["iclr26", "iclr26.data", "iclr26.experiments"]
TECHNIQUES = [
    "iclr26.core",
    "iclr26.lm",
    "iclr26.interp",
    "iclr26.sparsity",
    "iclr26.merging",
    "iclr26.flows",
]


def _public(mod: types.ModuleType) -> set[str]:
    return {
        k
        for k, v in vars(mod).items()
        if not k.startswith("_") and not isinstance(v, types.ModuleType) and k != "annotations"
    }


@pytest.mark.parametrize("name", COLLECTIONS)
def test_collections_export_nothing(name):
    mod = importlib.import_module(name)
    assert _public(mod) == set(), f"{name} must only document its submodules"
    assert not getattr(mod, "__all__", [])


@pytest.mark.parametrize("name", TECHNIQUES)
def test_techniques_export_exactly_what_they_define(name):
    mod = importlib.import_module(name)
    assert mod.__doc__ and mod.__doc__.strip()
    exported = list(mod.__all__)
    assert len(exported) == len(set(exported)), "duplicates in __all__"
    assert set(exported) == _public(mod), "__all__ must list exactly the imported names"
    for k in exported:
        home = getattr(getattr(mod, k), "__module__", None)
        if home is not None and not isinstance(getattr(mod, k), str | int | float | tuple | dict):
            assert home.startswith(name + "."), f"{name}.{k} is defined in {home}, outside the package"


def test_no_package_import_loads_transformers():
    code = (
        "import sys\n"
        + "".join(f"import {n}\n" for n in COLLECTIONS + TECHNIQUES)
        + "print('transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
