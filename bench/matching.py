"""Feature matching time and peak memory: exact Hungarian against the sparse top-k matcher.

Usage: .venv/bin/python bench/matching.py [--sizes 4096 16384 65536 --d 512 --k 32]
Two synthetic "SAE dictionaries" of n unit rows in d dimensions: half of B's rows are noisy copies
(cosine ≈ 0.8) of a permutation of A's rows, the other half are fresh random directions, like two
seeds sharing half their latents. Every case runs in its own process so peak RSS (ru_maxrss) is
attributable; the baseline RSS of a process that only imported torch/scipy is reported too, and
CPU time (process_time, all threads) next to wall time, since wall time on a shared machine is noise;
set OMP_NUM_THREADS to choose the thread count.
Exact Hungarian (scipy linear_sum_assignment on the dense cosine matrix) is skipped where its
float64 cost matrix alone would exceed --exact-mem-gb. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time


def make_pair(n: int, d: int, seed: int = 0):
    import torch

    g = torch.Generator().manual_seed(seed)
    A = torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=1)
    perm = torch.randperm(n, generator=g)
    B = torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=1)
    half = n // 2
    noisy = A[perm[:half]] + 0.7 * torch.randn(half, d, generator=g) / d**0.5
    B[:half] = torch.nn.functional.normalize(noisy, dim=1)
    return A, B


def run_case(method: str, n: int, d: int, k: int) -> dict:
    import numpy as np
    import torch

    from iclr26.interp.matching import cosine_matrix, match_exact, match_sparse

    A, B = make_pair(n, d)
    load = os.getloadavg()[0]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    if method == "exact":
        m = match_exact(cosine_matrix(A, B), max_size=max(n, 16384))
    else:
        m = match_sparse(A, B, k=k)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "seconds": dt,
        "cpu_seconds": cpu,
        "threads": torch.get_num_threads(),
        "load": load,
        "peak_mb": peak,
        "base_mb": base,
        "matched_above_0.7": float((m.cosine > 0.7).mean()),
        "mean_cos": float(np.nanmean(m.cosine)),
        "method": m.method,
        "k": m.k,
        "partner": m.partner[:2000].tolist(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384, 65536])
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--exact-mem-gb", type=float, default=8.0)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--case", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.case:
        print(json.dumps(run_case(a.case[0], int(a.case[1]), a.d, a.k)))
        return
    load0 = os.getloadavg()[0]
    rows = []
    for n in a.sizes:
        res = {}
        for method in ("exact", "sparse"):
            need_gb = n * n * 8 / 1e9
            if method == "exact" and need_gb > a.exact_mem_gb:
                res[method] = (
                    f"skipped: the float64 cost matrix alone is {need_gb:.0f} GB and Hungarian is O(n³)"
                )
                continue
            cmd = [sys.executable, __file__, "--case", method, str(n), "--d", str(a.d), "--k", str(a.k)]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, check=True)
                res[method] = json.loads(out.stdout.strip().splitlines()[-1])
            except subprocess.TimeoutExpired:
                res[method] = f"skipped: exceeded {a.timeout} s"
            except subprocess.CalledProcessError as e:
                res[method] = f"failed: {e.stderr.strip().splitlines()[-1] if e.stderr.strip() else e}"
        rows.append((n, res))
    load1 = os.getloadavg()[0]
    import torch

    print(f"Matching two dictionaries of n unit rows, d={a.d}; sparse matcher k={a.k} (rows and columns)")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}; "
        f"load average {load0:.1f} → {load1:.1f}"
    )
    print()
    print(
        "| n | method | wall (s) | CPU (s) | threads | load | peak RSS (MB) | process baseline (MB) "
        "| shared (cos > 0.7) | same partners as exact |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, res in rows:
        ex = res.get("exact")
        for method in ("exact", "sparse"):
            r = res[method]
            if isinstance(r, str):
                print(f"| {n} | {method} | {r} | | | | | | | |")
                continue
            agree = ""
            if isinstance(ex, dict) and method == "sparse":
                same = sum(x == y for x, y in zip(ex["partner"], r["partner"], strict=True)) / len(
                    ex["partner"]
                )
                agree = f"{same:.4f}"
            label = method if r["method"] == method else f"{method} ({r['method']})"
            print(
                f"| {n} | {label} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {r['threads']} | {r['load']:.1f} | "
                f"{r['peak_mb']:.0f} | {r['base_mb']:.0f} | "
                f"{r['matched_above_0.7']:.4f} | {agree} |"
            )


if __name__ == "__main__":
    main()
