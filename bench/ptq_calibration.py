"""Calibration time of meta-weighted reconstruction against uniform reconstruction (P18, a reconstruction).

The price of the bi-level step: the same W4A8 fake-quantized UNet2DModel (the reproduction's architecture,
random weights: the cost does not depend on what the weights are), the same calibration pairs and mini-batches;
``uniform`` (plain reconstruction), ``sample`` / ``freq`` / ``both`` (meta-learned weights, one look-ahead every
``--meta-every`` iterations). Side by side in one run; prints a markdown table.

Usage: .venv/bin/python bench/ptq_calibration.py [--iters 40] [--batch 32] [--meta-every 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import time

import torch


def main() -> None:
    from diffusers import DDIMScheduler, UNet2DModel

    from iclr26.diffusion.ptq import (
        QuantConfig,
        ReconConfig,
        calibrate_activations,
        collect_calibration,
        quantize_model,  # fmt: skip
        reconstruct,
    )

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--meta-every", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    unet = UNet2DModel(sample_size=8, in_channels=1, out_channels=1, layers_per_block=1, block_out_channels=(16, 32),
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8).eval()  # fmt: skip
    ddim = DDIMScheduler(num_train_timesteps=100, beta_schedule="linear", beta_start=1e-4, beta_end=0.02)
    calib = collect_calibration(unet, ddim, 32, 20, 4, sample_shape=(1, 8, 8), seed=0)
    val = collect_calibration(unet, ddim, 16, 20, 4, sample_shape=(1, 8, 8), seed=1)
    q = calibrate_activations(quantize_model(unet, QuantConfig(4, 8)), calib.x, calib.t)
    arms = {"uniform": (False, False), "sample": (True, False), "freq": (False, True), "both": (True, True)}
    rows = []
    base = None
    for name, (sm, fm) in arms.items():
        rc = ReconConfig(iters=args.iters, batch=args.batch, meta_every=args.meta_every, sample_meta=sm, freq_meta=fm)
        t0 = time.perf_counter()
        rec = reconstruct(q, calib, val, rc)
        wall = time.perf_counter() - t0
        base = base or wall
        rows.append((name, 1000 * wall / args.iters, 1000 * rec.meta_seconds / args.iters, wall / base))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"W4A8 UNet2DModel (0.18M params), {len(calib)} calibration pairs, batch {args.batch}, {args.iters} "
          f"iterations, meta step every {args.meta_every}, {args.threads} thread(s), load {load:.1f}\n")
    print("| arm | ms / iteration | of which meta step | time vs uniform |")
    print("|---|---:|---:|---:|")
    for name, ms, meta, ratio in rows:
        print(f"| {name} | {ms:.0f} | {meta:.0f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
