"""Is continual TIES below the base model in the NUFILT reproduction a bug or TIES's real behaviour?

Builds the reproduction's own tasks and fine-tuned MLPs (default preset, digits-derived, every
overlap, and the Fashion-MNIST-derived sequence when available), then merges each seeded task order
twice: with ``iclr26.merging.ContinualMerger(method="ties")`` and with FusionBench's own
``ContinualTiesMergingForCLIP.run`` (its CLIP task pool is never touched: evaluation is off).
Prints, per sequence, the final ACC of both, the largest weight difference, the base-head lower
bound, and how the merged task vector's norm grows against the task vectors' norm.

    .venv/bin/python bench/nufilt_ties_vs_fusionbench.py        # needs: pip install fusion-bench
"""

from __future__ import annotations

import numpy as np
import torch

from iclr26.merging.fusionbench_anchor import fusionbench_continual_ties


def main() -> None:
    torch.set_num_threads(1)
    from iclr26.core.errors import MissingAssetError
    from iclr26.experiments import nufilt as exp
    from iclr26.merging import ContinualMerger, ties_merging

    cfg = exp.Config()
    seed = 0
    seqs = {}
    z = exp._digits_features(cfg, seed)
    for s in cfg.overlaps:
        seqs[f"digits s={s}"] = exp.make_subspace_tasks(
            *z, n_tasks=cfg.n_tasks, dim=cfg.in_dim, shared=s, noise=cfg.noise, seed=seed + 11 * s
        )
    try:
        zf = exp._fmnist_features(cfg, seed)
        seqs[f"fmnist s={cfg.fmnist_overlap}"] = exp.make_subspace_tasks(
            *zf, n_tasks=cfg.n_tasks, dim=cfg.in_dim, shared=cfg.fmnist_overlap, noise=cfg.noise, seed=seed + 500
        )
    except MissingAssetError as e:
        print(f"(Fashion-MNIST skipped: {e})")
    print("| sequence | base-head ACC | fine-tuned ACC | TIES ACC, iclr26 | TIES ACC, FusionBench | "
          "max abs weight diff | ‖τ_merged‖ / mean ‖τ_i‖ after 6 | one-shot TIES ACC (λ 0.3) | "
          "continual TIES rebased on θ0 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, tasks in seqs.items():
        base = exp._base_model(cfg, seed)
        heads, fts, lo, hi = [], [], [], []
        n_classes = int(max(int(t.y_train.max()) for t in tasks) + 1)
        for j, task in enumerate(tasks):
            with torch.no_grad():
                feats = base(task.X_train)
            head = exp._prototype_head(feats, task.y_train, n_classes, cfg.shots, seed + j)
            ft = exp._finetune(base, head, task.X_train, task.y_train, cfg, seed + 100 + j)
            heads.append(head)
            fts.append(ft)
            lo.append(exp._accuracy(base, head, task.X_test, task.y_test))
            hi.append(exp._accuracy(ft, head, task.X_test, task.y_test))
        gen = exp.make_generator(seed + 7)
        orders = [torch.randperm(len(tasks), generator=gen).tolist() for _ in range(cfg.n_orders)]
        acc_ours, acc_fb, diffs, growth, acc_rebase = [], [], [], [], []
        b = base.state_dict()
        tv_norm = np.mean([float(torch.cat([(f.state_dict()[k] - b[k]).flatten() for k in b]).norm()) for f in fts])
        for order in orders:
            m = ContinualMerger(base, "ties")
            for i in order:
                m.add(fts[i])
            ours = m.model
            theirs = fusionbench_continual_ties(base, fts, order)
            so, st = ours.state_dict(), theirs.state_dict()
            diffs.append(max(float((so[k] - st[k]).abs().max()) for k in so))
            acc_ours.append(np.mean([exp._accuracy(ours, heads[i], tasks[i].X_test, tasks[i].y_test) for i in order]))
            acc_fb.append(np.mean([exp._accuracy(theirs, heads[i], tasks[i].X_test, tasks[i].y_test) for i in order]))
            growth.append(float(torch.cat([(so[k] - b[k]).flatten() for k in b]).norm()) / tv_norm)
            r = ContinualMerger(base, "ties", mode="rebase")
            for i in order:
                r.add(fts[i])
            rb = r.model
            acc_rebase.append(np.mean([exp._accuracy(rb, heads[i], tasks[i].X_test, tasks[i].y_test) for i in order]))
        one = ties_merging(base, fts, scaling=0.3, density=0.2)
        acc_one = np.mean([exp._accuracy(one, heads[i], tasks[i].X_test, tasks[i].y_test) for i in range(len(tasks))])
        print(
            f"| {label} | {100 * np.mean(lo):.1f} | {100 * np.mean(hi):.1f} | "
            f"{100 * np.mean(acc_ours):.1f} ± {100 * np.std(acc_ours):.1f} | "
            f"{100 * np.mean(acc_fb):.1f} ± {100 * np.std(acc_fb):.1f} | {max(diffs):.1e} | "
            f"{np.mean(growth):.2f} | {100 * acc_one:.1f} | "
            f"{100 * np.mean(acc_rebase):.1f} ± {100 * np.std(acc_rebase):.1f} |"
        )


if __name__ == "__main__":
    main()
