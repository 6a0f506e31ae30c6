"""EST over 1,000 graphs: all K perturbations of a group of graphs in one ``Batch`` vs per-graph loops.

A planted-degenerate SE-GNN (iclr26.graphs.segnn, briefly trained so that its explanations are
non-empty) on 1,000 red/blue counting graphs (3-15 nodes per colour). Three ways to compute the same EST
(K = 50; identical draws, so identical results, which the script checks):

* ``batched``: ``graphs_per_step`` graphs x K perturbations per forward pass (the library default, 32);
* ``per-graph``: one ``Batch`` of the K perturbations of one graph per forward pass;
* ``loop``: every perturbed graph through the model alone (K forward passes per graph).

Usage: .venv/bin/python bench/est.py [--graphs 1000] [--k 50] [--threads 1] [--skip-loop]
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from iclr26.data.graphs import color_count_graphs
from iclr26.graphs.faithfulness import est
from iclr26.graphs.segnn import SEGNN, pretrain_extractor, train_classifier


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=1000)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--graphs-per-step", type=int, default=32)
    ap.add_argument("--skip-loop", action="store_true", help="skip the slow per-perturbation loop")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    graphs = color_count_graphs(args.graphs, seed=0)
    torch.manual_seed(0)
    model = SEGNN(4)
    pretrain_extractor(model, graphs[:400], "degenerate_target", epochs=40, lr=5e-3, seed=0)
    train_classifier(model, graphs[:400], epochs=20, lr=5e-3, seed=0)
    kw = dict(K=args.k, seed=1)
    rows, ref = [], None
    modes = [("batched", dict(graphs_per_step=args.graphs_per_step)), ("per-graph", dict(graphs_per_step=1))]
    if not args.skip_loop:
        modes.append(("loop", dict(batched=False)))
    if est(model, graphs[:50], K=1).skip_rate > 0.5:
        raise SystemExit("the briefly trained model gives empty explanations; nothing to time")
    for name, extra in modes:
        t = time.perf_counter()
        res = est(model, graphs, **kw, **extra)
        dt = time.perf_counter() - t
        if ref is None:
            ref = (res, dt)
        same = torch.allclose(res.changes, ref[0].changes, atol=1e-6) and torch.equal(res.flipped, ref[0].flipped)
        rows.append((name, dt, res.info["n_forward"], ref[1], same, res.rejection_rate()))
    load = os.getloadavg()[0]
    print(f"EST, {args.graphs} graphs, K={args.k}, {args.threads} thread(s), load {load:.2f}, "
          f"skipped {ref[0].skip_rate:.1%}\n")  # fmt: skip
    print("| mode | wall s | forward passes | graphs/s | slower than batched | same result | rejection |")
    print("|---|---|---|---|---|---|---|")
    for name, dt, nf, t0, same, rej in rows:
        print(f"| {name} | {dt:.2f} | {nf} | {args.graphs / dt:.0f} | {dt / t0:.1f}x | {same} | {rej:.3f} |")


if __name__ == "__main__":
    main()
