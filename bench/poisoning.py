"""Perturbation generation speed: images per second for MI-UE and EM (iclr26.poisoning) at the default budget.

Task: the mi-ue default preset's generation on random 14x14 one-channel images (the shape of the reduced
Fashion-MNIST the reproduction uses), 4,000 images, 10 classes, eps 16/255, class-balanced poison batches
of 500, the shallow source CNN; ``--epochs`` generation epochs of (1 source-model epoch + ``--steps`` PGD
steps). Reported: wall seconds and images/s = N * epochs / seconds (one "image" = one sample through one
full generation epoch), best of ``--repeats``, round-robin over the methods so load biases none.

APBench's EM (github.com/lafeat/apbench) was the intended side-by-side anchor. It is not installable here:
``pip index versions apbench`` and ``pip download apbench`` find no distribution on the package registry
(it is a research repository, not a package), and the project machines reach only registries. The
comparison is therefore between our two methods only; the MI-UE/EM ratio shows what the contrastive loss
costs over cross-entropy at matched compute.

Run: ``.venv/bin/python bench/poisoning.py [--n 4000 --epochs 2 --steps 10 --repeats 2 --threads 1]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from iclr26.poisoning import make_cnn, make_unlearnable


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    y = torch.arange(10).repeat_interleave(args.n // 10)
    X = torch.rand(len(y), 1, 14, 14, generator=g)
    source = make_cnn(1, (14, 14), 10, seed=0)
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for method in ("em", "mi-ue"):
            t = time.perf_counter()
            make_unlearnable(X, y, source, method, eps=16 / 255, epochs=args.epochs, steps=args.steps, batch_size=500)
            best[method] = min(best.get(method, float("inf")), time.perf_counter() - t)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# poisoning generation ({platform.processor() or platform.machine()}, {args.threads} thread(s), "
          f"load {load:.2f}, torch {torch.__version__})\n")
    print(f"N = {len(y)} images 1x14x14, {args.epochs} epochs x (1 train epoch + {args.steps} PGD steps)\n")
    print(f"| method | seconds (best of {args.repeats}) | images/s |")
    print("|---|---|---|")
    for method, s in best.items():
        print(f"| {method} | {s:.2f} | {len(y) * args.epochs / s:.0f} |")
    print(f"\nMI-UE / EM time: {best['mi-ue'] / best['em']:.2f}x; APBench EM: not installable (see docstring)")


if __name__ == "__main__":
    main()
