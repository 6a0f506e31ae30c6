"""RangeFormer-lite log-determinant against torch.linalg.slogdet and SLQ, side by side, at n = 64, 256, 1024.

RangeFormer-lite (iclr26.architectures.rangeformer, a reconstruction from the abstract) is trained briefly on
the structured mixture at n = 4..8 (the reproduction's setting), then asked for log det A of structured
matrices far larger than it ever saw. Compared in one run, on the same matrices:

* ``torch.linalg.slogdet`` in float64 (exact, O(n³));
* stochastic Lanczos quadrature (``slq_logdet``, m Lanczos steps, p Rademacher probes, O(m p n²));
* RangeFormer-lite (float32, one sketch, L loops): sketch ``ÃΩ`` is O(n² k), then O(n d²) per loop.

Reported: matrices per second (best of ``--repeats``), acc@5% and the mean absolute error of the normalised
target ``y = log det(A/s)/n``. Usage: .venv/bin/python bench/rangeformer_logdet.py [--sizes 64 256 1024]
[--batch 8] [--train-steps 300] [--threads 1]. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from iclr26.architectures.rangeformer import RangeFormer, as_batch, slq_logdet, train_logdet
from iclr26.data import spd_matrices as spd


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--train-steps", type=int, default=300)
    ap.add_argument("--loops", type=int, default=8)
    ap.add_argument("--slq-steps", type=int, default=30)
    ap.add_argument("--slq-probes", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    model = RangeFormer(d=64, k=16, heads=4, loops=args.loops, feature_map="elu")
    t = time.perf_counter()
    train_logdet(model, lambda r, b, n: spd.sample("structured", r, b, n), steps=args.train_steps, batch=64,
                 sizes=(4, 8), lr=2e-3, loss="rel_mse", seed=0)  # fmt: skip
    print(f"RangeFormer-lite trained {args.train_steps} steps at n = 4..8 in {time.perf_counter() - t:.1f} s "
          f"({args.threads} thread(s))\n")  # fmt: skip

    rows = []
    rng = np.random.default_rng(1)
    for n in args.sizes:
        mats, y = spd.sample("structured", rng, args.batch, n)
        a64 = torch.as_tensor(mats)
        a32, mask = as_batch(mats)

        def rf(a32=a32, mask=mask):
            return model.predict(a32, mask, loops=args.loops, draws=1, seed=0).numpy()

        def exact(a64=a64, n=n):
            return torch.linalg.slogdet(a64).logabsdet.numpy() / n

        def slq(a64=a64, n=n):
            return slq_logdet(a64, steps=args.slq_steps, probes=args.slq_probes, seed=0).numpy() / n

        for name, fn in (("torch.linalg.slogdet (float64)", exact),
                         (f"SLQ (m={args.slq_steps}, p={args.slq_probes})", slq),
                         (f"RangeFormer-lite (L={args.loops}, 1 sketch)", rf)):  # fmt: skip
            sec, pred = best_of(fn, args.repeats)
            err = np.abs(pred - y)
            acc = float(np.mean(err <= 0.05 * np.maximum(1, np.abs(y))))
            rows.append((n, name, len(mats) / sec, acc, float(err.mean())))
    print("| n | method | matrices/s | acc@5% | MAE of log det(A/s)/n |")
    print("|---:|---|---:|---:|---:|")
    for n, name, mps, acc, mae in rows:
        print(f"| {n} | {name} | {mps:,.1f} | {acc:.2f} | {mae:.4f} |")


if __name__ == "__main__":
    main()
