"""Run FusionBench's own continual TIES on any ``nn.Module`` family: the anchor the NUFILT reproduction's
continual TIES is checked against (``pip install fusion-bench lightning``; the ``anchors`` extra).

FusionBench's ``ContinualTiesMergingForCLIP`` (the class the NUFILT repository's configs call) lives in a
package whose ``__init__`` files import CLIP classes that transformers 5 no longer has; the class itself
uses them only for evaluation, which is switched off here. :func:`continual_ties_class` imports it past
those files; :func:`fusionbench_continual_ties` runs it on a base model and fine-tuned models in a given
order and returns the merged module.
"""

from __future__ import annotations

import contextlib
import copy
import os
import pathlib
import sys
import types
from collections.abc import Sequence

from torch import nn

from iclr26.core.errors import MissingAssetError

__all__ = ["continual_ties_class", "fusionbench_continual_ties"]


def continual_ties_class() -> type:
    """FusionBench's ``ContinualTiesMergingForCLIP``, imported without its CLIP-only package ``__init__``."""
    try:
        import fusion_bench
    except ImportError:
        raise MissingAssetError("FusionBench", "pip install -e '.[anchors]'") from None
    name = "fusion_bench.method.opcm"
    if name not in sys.modules or not hasattr(sys.modules[name], "__path__"):
        stub = types.ModuleType(name)
        stub.__path__ = [str(pathlib.Path(fusion_bench.__file__).parent / "method" / "opcm")]
        sys.modules[name] = stub
    # its task-pool package is lazy and fails on first attribute access; the class names it only in a
    # typing cast, so a stand-in is enough while the module is imported
    real = sys.modules.get("fusion_bench.taskpool")
    tp = types.ModuleType("fusion_bench.taskpool")
    tp.CLIPVisionModelTaskPool = object
    sys.modules["fusion_bench.taskpool"] = tp
    try:
        from fusion_bench.method.opcm.ties_merging import ContinualTiesMergingForCLIP
    finally:
        if real is not None:
            sys.modules["fusion_bench.taskpool"] = real
        else:
            sys.modules.pop("fusion_bench.taskpool", None)
    return ContinualTiesMergingForCLIP


def fusionbench_continual_ties(
    base: nn.Module, finetuned: Sequence[nn.Module], order: Sequence[int], *,
    scaling: float = 0.5, threshold: float = 20, quiet: bool = True,
) -> nn.Module:
    """FusionBench's continual TIES over ``finetuned[i] for i in order`` (scaling 0.5, top-20 % trimming,
    ``sum`` merge by default, as in the NUFILT configs); returns the merged module. ``quiet`` silences
    the lines it prints at every step."""
    try:
        import lightning as L
        from fusion_bench import BaseModelPool
    except ImportError:
        raise MissingAssetError("FusionBench and lightning", "pip install -e '.[anchors]'") from None
    cls = continual_ties_class()
    pool = BaseModelPool(
        {"_pretrained_": copy.deepcopy(base), **{f"t{i}": copy.deepcopy(finetuned[i]) for i in order}}
    )
    alg = cls(scaling_factor=scaling, threshold=threshold, merge_func="sum", shuffle_order=False,
              save_on_every_step=False, evaluate_on_every_step=False)
    alg.fabric = L.Fabric(accelerator="cpu", devices=1)
    alg._program = types.SimpleNamespace(taskpool=types.SimpleNamespace(_test_datasets={}))
    if not quiet:
        return alg.run(pool)
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        return alg.run(pool)
