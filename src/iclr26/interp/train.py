"""Training sparse autoencoders from an activation stream (single process or torchrun/DDP).

Used by "Sparse Autoencoders Trained on the Same Data Learn Different Features"
(Paulo & Belrose, ICLR 2026, arXiv 2501.16615), whose SAEs were trained with EleutherAI sparsify.
TopK follows sparsify: encoder on x − b_dec, ReLU then top-k, unit-norm decoder rows (gradient
parallel to each row removed before the step, rows renormalised after), b_dec initialised to the
first batch mean, loss = FVU + α·AuxK where AuxK makes the top k_aux = d/2 dead latents predict the
residual. ReLU + L1 adds λ·Σ_j f_j‖W_dec,j‖ with a linear warm-up. The TopK step uses a sparse
decoder (embedding_bag) and a sparse backward (CSR products), so only the encoder forward is dense.
Data order depends only on ``data_seed`` and initialisation only on ``init_seed``.

Under ``torchrun --nproc_per_node N`` each rank takes a contiguous 1/N slice of the same global
batch; losses are normalised by global-batch constants, so the all-reduced (summed) gradient equals
the single-process gradient on the global batch.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from iclr26.core.errors import UserError
from iclr26.core.progress import progress
from iclr26.core.seed import make_generator
from iclr26.interp.sae import SparseDictionary

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------- distributed helpers
def dist_info() -> tuple[int, int]:
    """(rank, world_size) of the initialised default process group, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed_from_env(device: str = "auto") -> tuple[int, int, torch.device]:
    """Initialise the process group when launched by torchrun (RANK/WORLD_SIZE set).

    Backend gloo on CPU, nccl on CUDA. Returns (rank, world_size, device); (0, 1, device)
    without torchrun.
    """
    import torch.distributed as dist

    use_cuda = torch.cuda.is_available() if device == "auto" else device.startswith("cuda")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device(f"cuda:{local}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return rank, world, dev


# ---------------------------------------------------------------------- sparse TopK autograd
def _csr(crow: torch.Tensor, col: torch.Tensor, val: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    with warnings.catch_warnings():  # torch flags CSR as beta; the product used here is stable
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, val, shape, check_invariants=False)


class _TopKAutoencode(torch.autograd.Function):
    """recon = Σ_j relu(topk(x W_encᵀ + b_enc))_j · W_dec[idx_j] with a sparse backward.

    Inputs: x [N, d], W_encT [n, d] (contiguous encoder rows), b_enc [n], W_dec [n, d_out], k.
    Outputs: recon [N, d_out] (without b_dec), acts [N, k], idx [N, k].
    Backward never forms a dense [N, n] gradient: weight gradients are CSR [n, N] @ dense [N, d].
    """

    @staticmethod
    def forward(ctx, x, W_encT, b_enc, W_dec, k: int):  # noqa: N803
        pre = torch.addmm(b_enc, x, W_encT.T)  # [N, n]
        # top-k of pre then ReLU: same values as sparsify's ReLU-then-top-k, one pass fewer
        vals, idx = pre.topk(k, dim=-1, sorted=False)
        del pre
        acts = vals.clamp_min_(0)
        recon = F.embedding_bag(idx, W_dec, per_sample_weights=acts, mode="sum")  # [N, d_out]
        ctx.save_for_backward(x, W_encT, W_dec, acts, idx)
        ctx.mark_non_differentiable(idx)
        return recon, acts, idx

    @staticmethod
    def backward(ctx, grad_recon, grad_acts_out, _grad_idx):  # noqa: ARG004
        x, W_encT, W_dec, acts, idx = ctx.saved_tensors
        N, k = idx.shape
        n = W_dec.shape[0]
        grad_recon = grad_recon.contiguous()
        # d loss / d acts [N, k]: dot of the output gradient with each selected decoder row. The
        # per-sample-weight backward of embedding_bag computes exactly these dots without
        # materialising the [N, k, d] gather.
        with torch.enable_grad():
            psw = acts.detach().requires_grad_(True)
            out = F.embedding_bag(idx, W_dec.detach(), per_sample_weights=psw, mode="sum")
            (g,) = torch.autograd.grad(out, psw, grad_recon)
        if grad_acts_out is not None:
            g = g + grad_acts_out
        g = g * (acts > 0)  # ReLU gate; the top-k selection passes gradient to selected entries
        # CSR layout of the [n, N] selection matrix, shared by both weight gradients
        flat = idx.reshape(-1)
        if flat.is_cuda:
            order = torch.argsort(flat, stable=True)
        else:  # numpy's single-threaded radix sort: deterministic and immune to thread contention
            order = torch.from_numpy(np.argsort(flat.numpy(), kind="stable"))
        counts = torch.bincount(flat, minlength=n)
        crow = torch.zeros(n + 1, dtype=torch.int64, device=flat.device)
        torch.cumsum(counts, 0, out=crow[1:])
        col = torch.div(order, k, rounding_mode="floor")  # sample index of each sorted entry
        grad_x = grad_WencT = grad_benc = grad_Wdec = None
        # CSR [n, N] @ dense [N, d]; sparse.addmm with beta=0 writes every row of the output
        # (empty rows become 0) without zero-filling or copying a dense [n, d] buffer first.
        if ctx.needs_input_grad[1]:
            G = _csr(crow, col, g.reshape(-1)[order], (n, N))
            grad_WencT = torch.sparse.addmm(torch.empty_like(W_encT), G, x, beta=0.0)
        if ctx.needs_input_grad[2]:
            grad_benc = torch.zeros(n, dtype=g.dtype, device=g.device).index_add_(0, flat, g.reshape(-1))
        if ctx.needs_input_grad[3]:
            A = _csr(crow, col, acts.reshape(-1)[order], (n, N))
            grad_Wdec = torch.sparse.addmm(torch.empty_like(W_dec), A, grad_recon, beta=0.0)
        if ctx.needs_input_grad[0]:
            grad_x = F.embedding_bag(idx, W_encT, per_sample_weights=g, mode="sum")  # [N, d]
        return grad_x, grad_WencT, grad_benc, grad_Wdec, None


def topk_autoencode(
    sae: SparseDictionary, x_in: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(recon incl. b_dec [N, d_out], acts [N, k], idx [N, k]) for an already-processed input."""
    recon, acts, idx = _TopKAutoencode.apply(x_in, sae.W_enc_T, sae.b_enc, sae.W_dec, sae.k)
    return recon + sae.b_dec, acts, idx


# ---------------------------------------------------------------------- data order
def batch_index_stream(n_rows: int, batch_size: int, data_seed: int) -> Iterator[torch.Tensor]:
    """Endless stream of index batches: epochs of seeded permutations, chunked across epoch ends."""
    if batch_size > n_rows:
        raise UserError(f"batch_size={batch_size} exceeds the number of activation rows {n_rows}")
    gen = make_generator(data_seed)
    buf = torch.empty(0, dtype=torch.int64)
    while True:
        while buf.numel() < batch_size:
            buf = torch.cat([buf, torch.randperm(n_rows, generator=gen)])
        yield buf[:batch_size]
        buf = buf[batch_size:]


def _as_batches(X: Any, batch_size: int, data_seed: int, hasher: Any) -> Iterator[torch.Tensor]:
    if isinstance(X, torch.Tensor):
        if X.ndim != 2:
            raise UserError(f"activations must be a 2-D tensor [N, d], got shape {tuple(X.shape)}")
        for ib in batch_index_stream(X.shape[0], batch_size, data_seed):
            hasher.update(ib.numpy().tobytes())
            yield X[ib]
    elif isinstance(X, Iterable):
        for xb in X:
            xb = torch.as_tensor(xb)
            hasher.update(str(tuple(xb.shape)).encode())
            yield xb
    else:
        raise UserError(f"fit expects a tensor [N, d] or an iterable of batches, got {type(X).__name__}")


# ---------------------------------------------------------------------- trainer
class SAETrainer:
    """Train one :class:`SparseDictionary` (sklearn-style: ``fit(X) -> self``; results in ``sae_``).

    ``X`` is a tensor ``[N, d]`` (batches drawn by seeded permutations) or an iterable of global
    batches ``[B, d]`` (used in the given order). Learned: ``sae_``, ``history_`` (logged
    FVU / L0 / dead fraction), ``batch_hash_`` (SHA-256 of the batch indices, identical across
    init seeds when the data order is), ``n_steps_``, ``n_tokens_``.
    """

    def __init__(
        self,
        n_latents: int,
        *,
        activation: str = "topk",
        k: int = 32,
        l1_coeff: float = 1.0,
        l1_warmup_steps: int = 0,
        steps: int = 1000,
        batch_size: int = 1024,
        lr: float | None = None,
        lr_warmup_steps: int = 0,
        auxk_alpha: float = 1 / 32,
        dead_after_tokens: int = 1_000_000,
        init_seed: int = 0,
        data_seed: int = 0,
        device: str | torch.device = "cpu",
        log_every: int = 100,
        sparse_backward: bool = True,
        desc: str = "sae",
    ):
        self.n_latents = n_latents
        self.activation = activation
        self.k = k
        self.l1_coeff = l1_coeff
        self.l1_warmup_steps = l1_warmup_steps
        self.steps = steps
        self.batch_size = batch_size
        self.lr = lr
        self.lr_warmup_steps = lr_warmup_steps
        self.auxk_alpha = auxk_alpha
        self.dead_after_tokens = dead_after_tokens
        self.init_seed = init_seed
        self.data_seed = data_seed
        self.device = device
        self.log_every = log_every
        self.sparse_backward = sparse_backward
        self.desc = desc

    # -- setup
    def _validate(self) -> None:
        if self.activation not in ("topk", "relu"):
            raise UserError(f"SAETrainer activation={self.activation!r}; allowed: topk, relu")
        if self.steps <= 0 or self.batch_size <= 0 or self.n_latents <= 0:
            raise UserError("steps, batch_size and n_latents must be positive")
        if self.activation == "topk" and not 0 < self.k <= self.n_latents:
            raise UserError(f"k={self.k} must be in [1, n_latents={self.n_latents}]")

    def init_sae(self, d_in: int) -> SparseDictionary:
        """Seeded init: unit-norm Gaussian decoder rows, encoder = decoder transpose, zero biases."""
        sae = SparseDictionary(
            d_in, self.n_latents, activation=self.activation, k=self.k if self.activation == "topk" else None
        )
        gen = make_generator(self.init_seed)
        W = torch.randn(self.n_latents, d_in, generator=gen)
        W = W / W.norm(dim=1, keepdim=True)
        with torch.no_grad():
            sae.W_dec.copy_(W)
            sae.W_enc_T.copy_(W)  # encoder = decoder transpose
        return sae

    def lr_for(self, n_latents: int) -> float:
        # sparsify's default scaling: 2e-4 at 16k latents, ∝ 1/sqrt(n)
        return self.lr if self.lr is not None else 2e-4 / math.sqrt(n_latents / 2**14)

    # -- fit
    def fit(self, X: torch.Tensor | Iterable[torch.Tensor]) -> SAETrainer:
        import torch.distributed as dist

        self._validate()
        rank, world = dist_info()
        device = torch.device(self.device) if not isinstance(self.device, torch.device) else self.device
        hasher = hashlib.sha256()
        batches = _as_batches(X, self.batch_size, self.data_seed, hasher)
        sae: SparseDictionary | None = None
        opt = None
        history: list[dict[str, float]] = []
        since_fired = None
        n_tokens = 0
        step = 0
        bar = progress(total=self.steps, desc=self.desc)
        for xb in batches:
            if step >= self.steps:
                break
            xb = xb.to(device=device, dtype=torch.float32)
            B = xb.shape[0]
            if B % world:
                raise UserError(f"global batch {B} is not divisible by world size {world}")
            if sae is None:
                sae = self.init_sae(xb.shape[1]).to(device)
                with torch.no_grad():
                    sae.b_dec.copy_(xb.mean(0))  # same on every rank: all hold the global batch
                params = list(sae.parameters())
                lr = self.lr_for(self.n_latents)
                try:
                    opt = torch.optim.Adam(params, lr=lr, fused=True)
                except (RuntimeError, TypeError):
                    opt = torch.optim.Adam(params, lr=lr)
                since_fired = torch.zeros(self.n_latents, dtype=torch.int64, device=device)
            # global-batch constants, identical on every rank
            total_var = (xb - xb.mean(0)).pow(2).sum()
            lo, hi = rank * B // world, (rank + 1) * B // world
            local = xb[lo:hi]
            if self.lr_warmup_steps:
                for grp in opt.param_groups:
                    grp["lr"] = self.lr_for(self.n_latents) * min(1.0, (step + 1) / self.lr_warmup_steps)
            dead = since_fired > self.dead_after_tokens if self.activation == "topk" else None
            loss, fired, stats = self._loss(sae, local, total_var, B, step, dead)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            with torch.no_grad():
                if world > 1:
                    # one flat buffer → one all-reduce; SUM because losses are global-normalised
                    for p in params:
                        if p.grad is None:
                            p.grad = torch.zeros_like(p)
                    flat = torch.cat([p.grad.reshape(-1) for p in params])
                    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
                    off = 0
                    for p in params:
                        p.grad.copy_(flat[off : off + p.numel()].view(p.shape))
                        off += p.numel()
                    dist.all_reduce(fired, op=dist.ReduceOp.MAX)
                    dist.all_reduce(stats, op=dist.ReduceOp.SUM)
                # drop the decoder-gradient component along each (unit) row, then renormalise after the step
                Wd, gd = sae.W_dec, sae.W_dec.grad
                par = torch.bmm(gd.unsqueeze(1), Wd.unsqueeze(2)).squeeze(
                    2
                )  # [n, 1] row-wise dots, no [n, d] temporary
                gd.addcmul_(Wd, par, value=-1.0)
            opt.step()
            with torch.no_grad():
                sae.normalize_decoder_()
                since_fired += B
                since_fired[fired.bool()] = 0
            n_tokens += B
            step += 1
            bar.update(1)
            if step % self.log_every == 0 or step == self.steps:
                fvu, l0, lsum = (stats / torch.tensor([total_var.item(), B, 1.0])).tolist()
                rec = {
                    "step": step,
                    "fvu": fvu,
                    "l0": l0,
                    "loss": lsum,
                    "dead_frac": float((since_fired > self.dead_after_tokens).float().mean()),
                }
                history.append(rec)
                log.debug("%s %s", self.desc, rec)
        bar.close()
        if sae is None:
            raise UserError("fit received no activation batches")
        if step < self.steps:
            log.warning("activation stream ended after %d of %d steps", step, self.steps)
        self.sae_ = sae.eval()
        self.history_ = history
        self.batch_hash_ = hasher.hexdigest()
        self.n_steps_ = step
        self.n_tokens_ = n_tokens
        self.dead_mask_ = (since_fired > self.dead_after_tokens).cpu()
        self.world_size_ = world
        return self

    def transform(self, X: torch.Tensor) -> torch.Tensor:
        """Dense latents of the fitted SAE for ``X [N, d]`` (raises if :meth:`fit` was not called)."""
        if not hasattr(self, "sae_"):
            raise UserError("this SAETrainer is not fitted yet; call fit(X) first")
        with torch.no_grad():
            return self.sae_.encode(torch.as_tensor(X).to(self.sae_.W_dec.device))

    def _loss(
        self,
        sae: SparseDictionary,
        x: torch.Tensor,
        total_var: torch.Tensor,
        B: int,
        step: int,
        dead: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Local loss, normalised by global constants; returns (loss, fired mask [n], stats)."""
        x_in = x - sae.b_dec
        n = self.n_latents
        if self.activation == "topk":
            if self.sparse_backward:
                recon, acts, idx = topk_autoencode(sae, x_in)
            else:  # plain autograd reference: dense pre-activations, dense backward
                pre = x_in @ sae.W_enc + sae.b_enc
                vals, idx = pre.topk(self.k, dim=-1, sorted=False)
                acts = vals.clamp_min(0)
                recon = F.embedding_bag(idx, sae.W_dec, per_sample_weights=acts, mode="sum") + sae.b_dec
            e = x - recon
            l2 = e.pow(2).sum()
            loss = l2 / total_var
            fired = torch.zeros(n, dtype=torch.float32, device=x.device)
            fired[idx[acts > 0]] = 1.0
            l0 = (acts > 0).sum()
            if dead is not None and self.auxk_alpha > 0 and (n_dead := int(dead.sum())) > 0:
                k_aux = x.shape[1] // 2
                scale = min(n_dead / k_aux, 1.0)
                k_aux = min(k_aux, n_dead)
                dead_idx = dead.nonzero().squeeze(1)
                pre_dead = F.relu(x_in @ sae.W_enc_T[dead_idx].T + sae.b_enc[dead_idx])  # [N, n_dead]
                a_acts, a_loc = pre_dead.topk(k_aux, dim=-1, sorted=False)
                e_hat = F.embedding_bag(dead_idx[a_loc], sae.W_dec, per_sample_weights=a_acts, mode="sum")
                loss = loss + self.auxk_alpha * scale * (e_hat - e.detach()).pow(2).sum() / total_var
        else:
            f = F.relu(x_in @ sae.W_enc + sae.b_enc)  # [N, n]
            recon = f @ sae.W_dec + sae.b_dec
            l2 = (x - recon).pow(2).sum()
            # L1 weighted by decoder norms, scale-free: divided by N_global and the RMS input norm
            rms = torch.sqrt(total_var / B)
            lam = self.l1_coeff * (
                min(1.0, (step + 1) / self.l1_warmup_steps) if self.l1_warmup_steps else 1.0
            )
            l1 = (f.sum(0) * sae.W_dec.norm(dim=1)).sum() / (B * rms)
            loss = l2 / total_var + lam * l1
            fired = (f > 0).any(0).float()
            l0 = (f > 0).sum()
        stats = torch.stack([l2.detach(), l0.to(l2.dtype), loss.detach()])
        return loss, fired, stats


# ---------------------------------------------------------------------- evaluation
@torch.no_grad()
def sae_stats(sae: SparseDictionary, X: torch.Tensor, batch: int = 4096) -> dict[str, Any]:
    """FVU, mean L0, dead fraction and per-latent firing frequency ``[n]`` of ``sae`` on ``X [N, d]``."""
    n = sae.n_latents
    fires = torch.zeros(n, dtype=torch.float64)
    sq_err = 0.0
    l0 = 0.0
    Xf = X.float()
    mean = Xf.mean(0)
    total = float((Xf - mean).pow(2).sum())
    for i in range(0, X.shape[0], batch):
        xb = Xf[i : i + batch]
        x_hat, f = sae(xb)
        sq_err += float((xb - x_hat).pow(2).sum())
        active = f > 0
        fires += active.sum(0).double()
        l0 += float(active.sum())
    N = X.shape[0]
    freq = (fires / N).float()
    return {
        "fvu": sq_err / total,
        "l0": l0 / N,
        "dead_frac": float((freq == 0).float().mean()),
        "firing_freq": freq,
    }


# ---------------------------------------------------------------------- CLI (torchrun entry)
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m iclr26.interp.train",
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

    from iclr26.core.io import load_tensors

    rank, world, dev = init_distributed_from_env(a.device)
    try:
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
            (Path(a.out) / "train.json").write_text(json.dumps(info, indent=2))
    finally:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
