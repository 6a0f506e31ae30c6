"""Small shared helpers: config fields, seeding, device choice, safetensors I/O, errors, progress."""

from iclr26.core.config import param
from iclr26.core.device import resolve_device
from iclr26.core.errors import MissingAssetError, UserError
from iclr26.core.io import load_module_state, save_module
from iclr26.core.progress import progress
from iclr26.core.seed import make_generator, seed_everything

__all__ = [
    "param",
    "UserError",
    "MissingAssetError",
    "seed_everything",
    "make_generator",
    "resolve_device",
    "save_module",
    "load_module_state",
    "progress",
]
