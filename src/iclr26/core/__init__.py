"""The base layer every other package uses; it imports nothing else from iclr26.

Submodules: :mod:`~iclr26.core.config` (config fields), :mod:`~iclr26.core.errors`,
:mod:`~iclr26.core.seed`, :mod:`~iclr26.core.device`, :mod:`~iclr26.core.io` (atomic writes,
safetensors), :mod:`~iclr26.core.paths` (cache and data folders), :mod:`~iclr26.core.progress`,
:mod:`~iclr26.core.estimators` (the scikit-learn estimator contract) and
:mod:`~iclr26.core.distributed` (torchrun / DDP set-up). The last two are not re-exported here, so
that ``import iclr26.core`` (done by every CLI command) does not load scikit-learn or
``torch.distributed``; import them from their modules.
"""

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
