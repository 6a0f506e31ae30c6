"""Merge time per task: iclr26.merging vs FusionBench, on a small random CLIP vision encoder.

Builds a ``transformers.CLIPVisionModel`` from a small config (no weights downloaded), makes
``--tasks`` fine-tuned copies by adding seeded noise, and times task arithmetic, TIES, WUDI and OPCM
in both libraries (plus NUFILT, which FusionBench's PyPI release does not ship). Prints a markdown
table with seconds per merged task and the largest absolute difference between the two results.

    .venv/bin/python bench/merging_vs_fusionbench.py [--hidden 256 --layers 4 --tasks 4]
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import sys
import time
import types

import torch


def build(hidden: int, layers: int, n_tasks: int, seed: int = 0):
    from transformers import CLIPVisionConfig, CLIPVisionModel

    cfg = CLIPVisionConfig(
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        image_size=32,
        patch_size=8,
    )
    torch.manual_seed(seed)
    base = CLIPVisionModel(cfg).eval()
    g = torch.Generator().manual_seed(seed + 1)
    fts = []
    for _ in range(n_tasks):
        m = copy.deepcopy(base)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(0.01 * p.std().clamp(min=1e-3) * torch.randn(p.shape, generator=g))
        fts.append(m)
    return base, fts


def max_diff(a: dict, b: dict) -> tuple[float, str]:
    """Largest absolute difference over floating entries, and the parameter where it occurs."""
    diffs = {k: float((a[k].float() - b[k].float()).abs().max()) for k in a if torch.is_floating_point(a[k])}
    key = max(diffs, key=diffs.get)
    return diffs[key], key


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--wudi-iters", type=int, default=50)
    # one thread: on a shared, loaded machine two OpenMP threads make LAPACK's SVD ~50x slower
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    import fusion_bench
    import lightning as L
    from fusion_bench import BaseModelPool
    from fusion_bench.method import TaskArithmeticAlgorithm
    from fusion_bench.method.ties_merging.ties_merging_utils import state_dict_to_vector, vector_to_state_dict
    from fusion_bench.method.ties_merging.ties_merging_utils import ties_merging as fb_ties
    from fusion_bench.method.wudi.wudi import wudi_merging as fb_wudi

    # FusionBench's opcm package __init__ imports CLIP classes missing from transformers 5: load the
    # general OPCM module directly
    name = "fusion_bench.method.opcm"
    stub = types.ModuleType(name)
    stub.__path__ = [str(pathlib.Path(fusion_bench.__file__).parent / "method" / "opcm")]
    sys.modules[name] = stub
    from fusion_bench.method.opcm.opcm_general import OPCM

    from iclr26.merging import ContinualMerger, task_arithmetic, ties_merging, wudi_merging

    base, fts = build(args.hidden, args.layers, args.tasks)
    n = len(fts)
    nparams = sum(p.numel() for p in base.parameters())
    b = base.state_dict()

    def pool():
        return BaseModelPool(
            {"_pretrained_": copy.deepcopy(base), **{f"t{i}": copy.deepcopy(f) for i, f in enumerate(fts)}}
        )

    rows = []
    ours, t_ours = timed(lambda: task_arithmetic(base, fts, scaling=0.3).state_dict())
    p = pool()
    theirs, t_fb = timed(lambda: TaskArithmeticAlgorithm(scaling_factor=0.3).run(p).state_dict())
    rows.append(("task arithmetic (one-shot)", t_ours / n, t_fb / n, max_diff(ours, theirs)))

    ours, t_ours = timed(lambda: ties_merging(base, fts, scaling=0.3, density=0.2).state_dict())

    def fb_ties_run():
        flat = torch.vstack([state_dict_to_vector({k: f.state_dict()[k] - b[k] for k in b}) for f in fts])
        tv = vector_to_state_dict(fb_ties(flat, reset_thresh=20, merge_func="sum"), b)
        return {k: b[k] + 0.3 * tv[k] for k in b}

    theirs, t_fb = timed(fb_ties_run)
    rows.append(("TIES (one-shot)", t_ours / n, t_fb / n, max_diff(ours, theirs)))

    ours, t_ours = timed(lambda: wudi_merging(base, fts, iters=args.wudi_iters, lr=1e-5).state_dict())

    def fb_wudi_run():
        tvs = [{k: f.state_dict()[k] - b[k] for k in b} for f in fts]
        tv = fb_wudi(tvs, accelerator="cpu", iter_num=args.wudi_iters)
        return {k: b[k] + tv[k].detach() for k in b}

    theirs, t_fb = timed(fb_wudi_run)
    rows.append((f"WUDI (one-shot, {args.wudi_iters} it)", t_ours / n, t_fb / n, max_diff(ours, theirs)))

    def ours_opcm():
        m = ContinualMerger(base, "opcm", alpha=0.5)
        for f in fts:
            m.add(f)
        return m.state_dict()

    ours, t_ours = timed(ours_opcm)
    p = pool()
    alg = OPCM(alpha=0.5, shuffle_order=False, save_on_every_step=False)
    alg.fabric = L.Fabric(accelerator="cpu", devices=1)
    theirs, t_fb = timed(lambda: alg.run(p).state_dict())
    rows.append(("OPCM (continual)", t_ours / n, t_fb / n, max_diff(ours, theirs)))

    def ours_nufilt():
        m = ContinualMerger(base, "nufilt", layers=["attn", "fc1"])
        for f in fts:
            m.add(f)
        return m.state_dict()

    _, t_ours = timed(ours_nufilt)
    rows.append(("NUFILT (continual, 50 steps)", t_ours / n, float("nan"), (float("nan"), "")))

    print(
        f"CLIP vision encoder, hidden {args.hidden}, {args.layers} layers, {nparams / 1e6:.2f}M params, "
        f"{n} tasks, {args.threads} CPU threads, torch {torch.__version__}, fusion-bench "
        f"{getattr(fusion_bench, '__version__', '0.2.x')}\n"
    )
    print("| method | iclr26 s/task | fusion-bench s/task | max abs diff (where) |")
    print("|---|---:|---:|---|")
    for name, a, f, (d, where) in rows:
        fs = "n/a" if f != f else f"{f:.3f}"
        ds = "n/a" if d != d else f"{d:.1e} (`{where}`)"
        print(f"| {name} | {a:.3f} | {fs} | {ds} |")


if __name__ == "__main__":
    main()
