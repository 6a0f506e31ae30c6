"""HUMOF-lite forward time per scene window against the ego-only and flat models, and its growth with the
number of other people and boxes (one run, same inputs for every model).

    python bench/humof_forward.py --threads 1 --repeats 20

Inputs are random canonical windows (H = 10, T = 20, 15 joints, 32 points per box); the models are
untrained (forward cost does not depend on the weights). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr26.motion.humof import HumofConfig, HumofModel, count_parameters, matched_flat_config


def batch(B: int, people: int, boxes: int, pts: int = 32, H: int = 10, J: int = 15) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "ego": torch.randn(B, H, J, 3, generator=g),
        "others": torch.randn(B, people, H, J, 3, generator=g) + 2.0,
        "others_mask": torch.ones(B, people, dtype=torch.bool),
        "points": torch.randn(B, boxes, pts, 3, generator=g) + 1.5,
        "boxes": torch.randn(B, boxes, 6, generator=g).abs(),
        "boxes_mask": torch.ones(B, boxes, dtype=torch.bool),
    }


@torch.no_grad()
def time_forward(model: HumofModel, b: dict, repeats: int) -> float:
    model.eval()
    model(b)
    t = time.perf_counter()
    for _ in range(repeats):
        model(b)
    return (time.perf_counter() - t) / repeats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    base = HumofConfig()
    models = {"ego-only": HumofModel(HumofConfig(mode="ego")), "flat": HumofModel(matched_flat_config(base)),
              "HUMOF-lite": HumofModel(base)}
    print(f"threads {a.threads}, batch {a.batch} windows, forward only, ms per window (per batch / batch)\n")
    print("| people (others) | boxes | " + " | ".join(f"{k} ({count_parameters(m) / 1e3:.0f}k params)"
                                                    for k, m in models.items()) + " |")
    print("|---|---|" + "---|" * len(models))
    for people, boxes in ((1, 2), (3, 2), (7, 2), (1, 4), (1, 8)):
        b = batch(a.batch, people, boxes)
        row = [1e3 * time_forward(m, b, a.repeats) / a.batch for m in models.values()]
        print(f"| {people + 1} ({people}) | {boxes} | " + " | ".join(f"{v:.3f}" for v in row) + " |")


if __name__ == "__main__":
    main()
