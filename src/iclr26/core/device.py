"""Device choice: ``auto`` picks CUDA when present, else CPU."""

from __future__ import annotations

import torch

from iclr26.core.errors import UserError


def resolve_device(name: str | torch.device = "auto") -> torch.device:
    if isinstance(name, torch.device):
        return name
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError(f"--device {name}: CUDA is not available on this machine; use cpu or auto")
        return torch.device(name)
    raise UserError(f"unknown device {name!r}; allowed: auto, cpu, cuda, cuda:N")
