"""The one place that says where iclr26 keeps files it builds or fetches.

- :func:`cache_home`: ``$ICLR26_CACHE``, else ``~/.cache/iclr26`` — things iclr26 builds and may rebuild
  (the dequantized Gemma 3 270M copy, downloads).
- :func:`data_home`: ``$ICLR26_DATA``, else :func:`cache_home` — unpacked data sets (Debian packages
  fetched by ``python -m iclr26.assets fetch``, Fashion-MNIST downloads); the loaders in
  :mod:`iclr26.data` look here first.

Both are read at call time (never at import), so tests and users can set the variables at any point.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_home() -> Path:
    """``$ICLR26_CACHE`` if set (``~`` expanded), else ``~/.cache/iclr26``."""
    env = os.environ.get("ICLR26_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "iclr26"


def data_home() -> Path:
    """``$ICLR26_DATA`` if set (``~`` expanded), else :func:`cache_home`."""
    env = os.environ.get("ICLR26_DATA")
    return Path(env).expanduser() if env else cache_home()


def numerics_fingerprint() -> str:
    """The library versions whose numerics a trained artefact depends on (torch, transformers, diffusers),
    and the torch thread count it is trained with (another reduction order trains another model).

    Cache keys of trained organisms and DDPMs include it: the same seed and recipe train a different model
    under another version (weight initialisation and kernels change), so an artefact cached under one
    environment must not stand in for the model another environment would train.
    """
    import importlib.metadata as md

    parts = []
    for pkg in ("torch", "transformers", "diffusers"):
        try:
            parts.append(f"{pkg}={md.version(pkg)}")
        except md.PackageNotFoundError:
            parts.append(f"{pkg}=none")
    import torch

    parts.append(f"threads={torch.get_num_threads()}")
    return ";".join(parts)
