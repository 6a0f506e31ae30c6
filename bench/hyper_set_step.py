"""Hyper-SET forward + backward step time and parameters against the ViT baselines, side by side in one run.

Every model: d, heads, FF/MLP hidden as given, the same patch embedding and CLS readout, on a batch of
28x28 one-channel images (7x7 patches -> 16 tokens + CLS). One training step = forward, cross-entropy,
backward, Adam step. Median of ``--repeats`` steps after two warm-up steps. Prints a markdown table.

    python bench/hyper_set_step.py --threads 1 --repeats 20
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from iclr26.architectures.hyper_set import HyperSETConfig, HyperSETForImageClassification
from iclr26.architectures.vit import ViTConfig, ViTForImageClassification, n_params


def _models(d: int, heads: int, hidden: int, T: int, depth: int) -> dict:
    kw = dict(image_size=28, patch=7, channels=1, num_classes=10)
    return {
        f"Hyper-SET (1 shared layer x {T})": HyperSETForImageClassification(
            HyperSETConfig(d=d, heads=heads, mlp_hidden=hidden, n_recur=T, time_dim=64), **kw),
        f"Hyper-SET linear attention (x {T})": HyperSETForImageClassification(
            HyperSETConfig(d=d, heads=heads, mlp_hidden=hidden, n_recur=T, time_dim=64, attn="linear"), **kw),
        f"ViT-{depth} (unshared)": ViTForImageClassification(ViTConfig(d=d, heads=heads, mlp_hidden=hidden,
                                                                       depth=depth), **kw),
        "ViT-1": ViTForImageClassification(ViTConfig(d=d, heads=heads, mlp_hidden=hidden, depth=1), **kw),
        f"Looped ViT (1 block x {T})": ViTForImageClassification(
            ViTConfig(d=d, heads=heads, mlp_hidden=hidden, depth=T, looped=True), **kw),
    }  # fmt: skip


def _step_ms(model, X, y, repeats: int) -> tuple[float, float]:
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    fwd, step = [], []
    for i in range(repeats + 2):
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(X), y)
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        if i >= 2:
            fwd.append(1e3 * (t1 - t0))
            step.append(1e3 * (t2 - t0))
    return statistics.median(fwd), statistics.median(step)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=48)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=96)
    ap.add_argument("--recur", type=int, default=6)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    X, y = torch.randn(a.batch, 28, 28), torch.randint(0, 10, (a.batch,))
    rows = []
    for name, model in _models(a.d, a.heads, a.hidden, a.recur, a.depth).items():
        f, s = _step_ms(model, X, y, a.repeats)
        rows.append((name, n_params(model), f, s))
    base = rows[0][3]
    print(f"batch {a.batch}, d {a.d}, {a.heads} heads, hidden {a.hidden}, threads {a.threads}, "
          f"median of {a.repeats}\n")  # fmt: skip
    print("| model | parameters | forward ms | forward + backward + Adam ms | step vs Hyper-SET |")
    print("|---|---:|---:|---:|---:|")
    for name, p, f, s in rows:
        print(f"| {name} | {p:,} | {f:.1f} | {s:.1f} | {s / base:.2f}× |")


if __name__ == "__main__":
    main()
