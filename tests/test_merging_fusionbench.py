"""Cross-checks of the merging baselines against FusionBench (``pip install fusion-bench``) on tiny models.

FusionBench's CLIP-specific package ``__init__`` files do not import beside transformers 5, so the checks use
its model-agnostic pieces (``task_arithmetic_merge``, the TIES utilities, ``wudi_merging``, the general
``OPCM`` algorithm on a ``BaseModelPool`` of tiny modules) and its continual-TIES class imported past those
files (:mod:`iclr26.merging.fusionbench_anchor`).
"""

from __future__ import annotations

import copy
import pathlib
import sys
import types

import pytest
import torch
from torch import nn

from iclr26.merging import ContinualMerger, continual_merge, task_arithmetic, ties_merging, wudi_merging

pytestmark = pytest.mark.optional


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 5)
        self.fc2 = nn.Linear(5, 4)


def _family(n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = Tiny()
    with torch.no_grad():
        for p in base.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    fts = []
    for _ in range(n):
        m = copy.deepcopy(base)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(0.1 * torch.randn(p.shape, generator=g))
        fts.append(m)
    return base, fts


@pytest.fixture(scope="module")
def fb():
    return pytest.importorskip("fusion_bench")


def _close(a: dict, b: dict, atol=1e-5):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k].float(), b[k].float(), atol=atol), (k, float((a[k] - b[k]).abs().max()))


def test_task_arithmetic_matches_fusionbench(fb):
    from fusion_bench import BaseModelPool
    from fusion_bench.method import TaskArithmeticAlgorithm

    base, fts = _family()
    ours = task_arithmetic(base, fts, scaling=0.3).state_dict()
    pool = BaseModelPool(
        {"_pretrained_": copy.deepcopy(base), **{f"t{i}": copy.deepcopy(f) for i, f in enumerate(fts)}}
    )
    theirs = TaskArithmeticAlgorithm(scaling_factor=0.3).run(pool).state_dict()
    _close(ours, theirs)


def test_ties_matches_fusionbench(fb):
    from fusion_bench.method.ties_merging.ties_merging_utils import state_dict_to_vector, vector_to_state_dict
    from fusion_bench.method.ties_merging.ties_merging_utils import ties_merging as fb_ties

    base, fts = _family(seed=1)
    b = base.state_dict()
    flat = torch.vstack([state_dict_to_vector({k: f.state_dict()[k] - b[k] for k in b}) for f in fts])
    tv = vector_to_state_dict(fb_ties(flat, reset_thresh=20, merge_func="sum"), b)
    theirs = {k: b[k] + 0.3 * tv[k] for k in b}
    _close(ties_merging(base, fts, scaling=0.3, density=0.2).state_dict(), theirs)


def test_continual_ties_step_matches_fusionbench(fb):
    """Continual TIES (FusionBench mode): theta <- theta + 0.5 * TIES(theta - theta_0, tau_t)."""
    from fusion_bench.method.ties_merging.ties_merging_utils import state_dict_to_vector, vector_to_state_dict
    from fusion_bench.method.ties_merging.ties_merging_utils import ties_merging as fb_ties

    base, fts = _family(seed=2)
    b = base.state_dict()
    merged = {k: b[k] + 0.5 * (fts[0].state_dict()[k] - b[k]) for k in b}
    for f in fts[1:]:
        flat = torch.vstack(
            [
                state_dict_to_vector({k: merged[k] - b[k] for k in b}),
                state_dict_to_vector({k: f.state_dict()[k] - b[k] for k in b}),
            ]
        )
        tv = vector_to_state_dict(fb_ties(flat, reset_thresh=20, merge_func="sum"), b)
        merged = {k: merged[k] + 0.5 * tv[k] for k in b}
    ours = continual_merge(base, fts, "ties", scaling=0.5, density=0.2).state_dict()
    _close(ours, merged)


def test_continual_ties_matches_fusionbench_class(fb):
    """Our continual TIES equals FusionBench's ContinualTiesMergingForCLIP.run step for step (the class,
    not a re-implementation of its loop): the merged model is re-added to, never rebased on theta_0."""
    pytest.importorskip("lightning")
    from iclr26.merging.fusionbench_anchor import fusionbench_continual_ties

    base, fts = _family(n=5, seed=5)
    order = [3, 0, 4, 1, 2]
    theirs = fusionbench_continual_ties(base, fts, order, scaling=0.5, threshold=20).state_dict()
    ours = continual_merge(base, [fts[i] for i in order], "ties", scaling=0.5, density=0.2).state_dict()
    _close(ours, theirs)


def test_wudi_matches_fusionbench(fb):
    from fusion_bench.method.wudi.wudi import wudi_merging as fb_wudi

    base, fts = _family(seed=3)
    b = base.state_dict()
    tvs = [{k: f.state_dict()[k] - b[k] for k in b} for f in fts]
    tv = fb_wudi(tvs, accelerator="cpu", iter_num=50)
    theirs = {k: b[k] + tv[k].detach() for k in b}
    ours = wudi_merging(base, fts, iters=50, lr=1e-5).state_dict()
    _close(ours, theirs, atol=1e-6)
    # continual form: WUDI over {tau_merged, tau_t} starting from theta_1
    merged = {k: v.clone() for k, v in fts[0].state_dict().items()}
    for f in fts[1:]:
        pair = [{k: merged[k] - b[k] for k in b}, {k: f.state_dict()[k] - b[k] for k in b}]
        tv = fb_wudi(pair, accelerator="cpu", iter_num=50)
        merged = {k: b[k] + tv[k].detach() for k in b}
    _close(continual_merge(base, fts, "wudi", iters=50, lr=1e-5).state_dict(), merged, atol=1e-6)


def _import_fb_opcm():
    """Import FusionBench's general OPCM without its package ``__init__`` (which needs CLIP classes
    that transformers 5 no longer has)."""
    import fusion_bench

    name = "fusion_bench.method.opcm"
    if name not in sys.modules or not hasattr(sys.modules[name], "__path__"):
        stub = types.ModuleType(name)
        stub.__path__ = [str(pathlib.Path(fusion_bench.__file__).parent / "method" / "opcm")]
        sys.modules[name] = stub
    from fusion_bench.method.opcm.opcm_general import OPCM

    return OPCM


def test_opcm_matches_fusionbench(fb):
    pytest.importorskip("lightning")
    import lightning as L
    from fusion_bench import BaseModelPool

    OPCM = _import_fb_opcm()
    base, fts = _family(n=4, seed=4)
    merger = ContinualMerger(base, "opcm", alpha=0.5)
    for f in fts:
        merger.add(f)
    # FusionBench mutates the models it loads, so hand it copies
    pool = BaseModelPool(
        {"_pretrained_": copy.deepcopy(base), **{f"t{i}": copy.deepcopy(f) for i, f in enumerate(fts)}}
    )
    alg = OPCM(alpha=0.5, shuffle_order=False, save_on_every_step=False)
    alg.fabric = L.Fabric(accelerator="cpu", devices=1)
    theirs = alg.run(pool).state_dict()
    _close(merger.state_dict(), theirs)
    assert abs(merger.lambda_ - float(alg.previous_lambda_t)) < 1e-5
