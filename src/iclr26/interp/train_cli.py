"""Command line for SAE training on stored activations: ``python -m iclr26.interp.train_cli``.

Launch under ``torchrun --nproc_per_node N -m iclr26.interp.train_cli ...`` for data-parallel
training (gloo on CPU, nccl on GPU); rank 0 writes ``sae.safetensors``, ``cfg.json`` and
``train.json`` (history, batch hash, world size) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from iclr26.core.distributed import distributed_from_env
from iclr26.core.errors import UserError
from iclr26.core.io import atomic_write_text, load_tensors
from iclr26.interp.train import SAETrainer


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m iclr26.interp.train_cli",
        description="Train a TopK or ReLU-L1 SAE on activations stored in a safetensors file. "
        "Launch with torchrun --nproc_per_node N for data-parallel training (gloo on CPU, nccl on GPU).",
    )
    p.add_argument("--data", required=True, help="safetensors file holding the activations [N, d]")
    p.add_argument("--key", default="acts", help="tensor name inside --data (default: acts)")
    p.add_argument(
        "--out", required=True, help="output folder (rank 0 writes sae.safetensors, cfg.json, train.json)"
    )
    p.add_argument("--n-latents", type=int, required=True)
    p.add_argument("--activation", choices=["topk", "relu"], default="topk")
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--l1-coeff", type=float, default=1.0)
    p.add_argument("--l1-warmup-steps", type=int, default=0)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=1024, help="global batch size (split across ranks)")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--auxk-alpha", type=float, default=1 / 32)
    p.add_argument("--dead-after-tokens", type=int, default=1_000_000)
    p.add_argument("--init-seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--log-every", type=int, default=100)
    a = p.parse_args(argv)

    with distributed_from_env(a.device) as (rank, world, dev):
        t = load_tensors(a.data)
        if a.key not in t:
            raise UserError(f"--key {a.key!r} not in {a.data}; available: {', '.join(sorted(t))}")
        tr = SAETrainer(
            a.n_latents,
            activation=a.activation,
            k=a.k,
            l1_coeff=a.l1_coeff,
            l1_warmup_steps=a.l1_warmup_steps,
            steps=a.steps,
            batch_size=a.batch_size,
            lr=a.lr,
            auxk_alpha=a.auxk_alpha,
            dead_after_tokens=a.dead_after_tokens,
            init_seed=a.init_seed,
            data_seed=a.data_seed,
            device=dev,
            log_every=a.log_every,
        ).fit(t[a.key])
        if rank == 0:
            tr.sae_.cpu().save(a.out)
            info = {
                "history": tr.history_,
                "batch_hash": tr.batch_hash_,
                "world_size": world,
                "n_steps": tr.n_steps_,
                "n_tokens": tr.n_tokens_,
            }
            atomic_write_text(Path(a.out) / "train.json", json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
