"""P6 benchmark: the anisotropy memorization score against the denoising baseline (Wen et al.), side by side.

On (a) a tiny Stable Diffusion pipeline built from configs (random weights, 8x8 latents, CLIP text encoder) and
(b) the project's small conditional DDPM (FiLM-MLP on 4x4x4 digit latents), per prompt: median wall time and
UNet calls of ``memorization_score`` (2 CFG calls) and of ``denoising_score`` at k = 1, 10, 50 steps.

    python bench/memorization_score.py [--prompts 8] [--gen-num 4] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from iclr26.diffusion import (
    DDPM,
    CallCounter,
    DDPMConfig,
    PipelineDenoiser,
    denoising_score,
    memorization_score,
    select_timesteps,
    tiny_sd_pipeline,
)


def _median_time(fn, n: int, warmup: int = 2) -> float:
    for i in range(warmup):
        fn(i % n)
    ts = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench(name: str, den, cond, uncond, scheduler, latent_shape, n: int, gen_num: int, ks: list[int]) -> list[str]:
    t_hi, t_lo = select_timesteps(scheduler, 50)
    rows = []
    c = CallCounter(den)
    with torch.no_grad():
        t = _median_time(lambda i: memorization_score(c, cond[i : i + 1], uncond, latent_shape=latent_shape, t_hi=t_hi,
                                                      t_lo=t_lo, gen_num=gen_num), n)  # fmt: skip
        base = t
        calls = c.calls / (n + 2)
        rows.append(f"| {name} | memorization score (N + C) | {1e3 * t:.1f} | {calls:.0f} | 1.0x |")
        for k in ks:
            c = CallCounter(den)
            t = _median_time(lambda i, k=k, c=c: denoising_score(c, cond[i : i + 1], uncond, scheduler,
                                                            latent_shape=latent_shape, k=k, gen_num=gen_num), n)  # fmt: skip
            rows.append(f"| {name} | denoising baseline, k = {k} | {1e3 * t:.1f} | {c.calls / (n + 2):.0f} | "
                        f"{t / base:.1f}x |")  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--gen-num", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ks = [1, 10, 50]

    pipe = tiny_sd_pipeline(seed=0)
    den = PipelineDenoiser(pipe)
    prompts = [f"a photo of object {i}" for i in range(args.prompts)]
    cond, uncond = den.encode(prompts)
    rows = bench("tiny SD pipeline (random weights)", den, cond, uncond, pipe.scheduler, den.latent_shape,
                 args.prompts, args.gen_num, ks)  # fmt: skip

    torch.manual_seed(0)
    model = DDPM(DDPMConfig(n_cond=args.prompts, hidden=128, depth=3)).eval()
    with torch.no_grad():
        cond, uncond = model.embed(torch.arange(args.prompts)), model.null(1)
    rows += bench("small DDPM (FiLM-MLP, 4x4x4)", model, cond, uncond, model.ddim_scheduler(), (4, 4, 4),
                  args.prompts, args.gen_num, ks)  # fmt: skip

    print(f"gen_num = {args.gen_num} noises per prompt, {args.threads} thread(s), median of {args.prompts} prompts\n")
    print("| model | detector | ms per prompt | UNet calls per prompt | time vs score |")
    print("|---|---|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
