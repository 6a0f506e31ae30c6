"""Training sparse autoencoders from an activation stream (single process or torchrun/DDP).

Used by "Sparse Autoencoders Trained on the Same Data Learn Different Features"
(Paulo & Belrose, ICLR 2026, arXiv 2501.16615), whose SAEs were trained with EleutherAI sparsify.
TopK follows sparsify: encoder on x − b_dec, ReLU then top-k, unit-norm decoder rows (gradient
parallel to each row removed before the step, rows renormalised after), b_dec initialised to the
first batch mean, loss = FVU + α·AuxK where AuxK makes the top k_aux = d/2 dead latents predict the
residual. ReLU + L1 adds λ·Σ_j f_j‖W_dec,j‖ with a linear warm-up. The TopK step uses the sparse
kernel in :mod:`iclr26.interp.topk_kernel`, so only the encoder forward is dense.
Data order depends only on ``data_seed`` and initialisation only on ``init_seed``.

Under ``torchrun --nproc_per_node N`` (see :mod:`iclr26.interp.train_cli` and
:mod:`iclr26.core.distributed`) each rank takes a contiguous 1/N slice of the same global batch;
losses are normalised by global-batch constants, so the all-reduced (summed) gradient equals the
single-process gradient on the global batch. Evaluation: :func:`iclr26.interp.sae.sae_stats`.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.nn.functional as F

from iclr26.core.distributed import all_reduce_, all_reduce_grads_, dist_info
from iclr26.core.errors import UserError
from iclr26.core.estimators import BaseEstimator, check_is_fitted
from iclr26.core.progress import progress
from iclr26.core.seed import make_generator
from iclr26.interp.sae import SparseDictionary
from iclr26.interp.topk_kernel import TopKWorkspace, topk_autoencode

log = logging.getLogger(__name__)


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
class SAETrainer(BaseEstimator):
    """Train one :class:`SparseDictionary` (a scikit-learn estimator: ``fit(X) -> self``; results in ``sae_``).

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
        decoder_norm: str = "auto",
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
        self.decoder_norm = decoder_norm
        self.desc = desc

    # -- setup
    def _validate(self) -> None:
        if self.activation not in ("topk", "relu"):
            raise UserError(f"SAETrainer activation={self.activation!r}; allowed: topk, relu")
        if self.steps <= 0 or self.batch_size <= 0 or self.n_latents <= 0:
            raise UserError("steps, batch_size and n_latents must be positive")
        if self.activation == "topk" and not 0 < self.k <= self.n_latents:
            raise UserError(f"k={self.k} must be in [1, n_latents={self.n_latents}]")
        if self.decoder_norm not in ("auto", "unit", "free"):
            raise UserError(f"SAETrainer decoder_norm={self.decoder_norm!r}; allowed: auto, unit, free")

    @property
    def unit_decoder(self) -> bool:
        """Whether decoder rows are held at unit norm: ``decoder_norm="unit"``, or ``"auto"`` with TopK.

        ``"auto"`` leaves the rows free for ReLU + L1, the recipe where the penalty λ·Σ_j f_j‖W_dec,j‖ does
        something: with unit rows it reduces to a plain L1 on f, while with free rows it stops the optimiser
        from shrinking f and growing the decoder to dodge the penalty (the loss is invariant to that rescale)."""
        return self.decoder_norm == "unit" or (self.decoder_norm == "auto" and self.activation == "topk")

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
        self._validate()
        unit = self.unit_decoder
        rank, world = dist_info()
        device = torch.device(self.device) if not isinstance(self.device, torch.device) else self.device
        hasher = hashlib.sha256()
        batches = _as_batches(X, self.batch_size, self.data_seed, hasher)
        sae: SparseDictionary | None = None
        opt = None
        ws: TopKWorkspace | None = None
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
                # reused buffers, and weight gradients added into the kept .grad tensors (zeroed in place below)
                ws = (TopKWorkspace(sae, accumulate_grads=True)
                      if self.activation == "topk" and self.sparse_backward else None)
            # global-batch constants, identical on every rank
            total_var = (xb - xb.mean(0)).pow(2).sum()
            lo, hi = rank * B // world, (rank + 1) * B // world
            local = xb[lo:hi]
            if self.lr_warmup_steps:
                for grp in opt.param_groups:
                    grp["lr"] = self.lr_for(self.n_latents) * min(1.0, (step + 1) / self.lr_warmup_steps)
            dead = since_fired > self.dead_after_tokens if self.activation == "topk" else None
            if ws is not None:
                # AuxK (when dead latents exist) reaches W_enc_T and W_dec outside the kernel: then the kept weight
                # gradients are zeroed and added to; otherwise the kernel alone writes them
                ws.overwrite_grads = not (dead is not None and self.auxk_alpha > 0 and bool(dead.any()))
            loss, fired, stats = self._loss(sae, local, total_var, B, step, dead, ws)
            if ws is None:
                opt.zero_grad(set_to_none=True)
            else:
                for p_ in params:
                    if p_ is sae.W_enc_T or p_ is sae.W_dec:
                        if not ws.overwrite_grads and p_.grad is not None:
                            p_.grad.zero_()
                    else:
                        p_.grad = None
            loss.backward()
            with torch.no_grad():
                if world > 1:
                    # one flat buffer → one all-reduce; SUM because losses are global-normalised
                    all_reduce_grads_(params)
                    all_reduce_(fired, "max")
                    all_reduce_(stats, "sum")
                if unit:
                    # drop the decoder-gradient component along each (unit) row, then renormalise after the step
                    Wd, gd = sae.W_dec, sae.W_dec.grad
                    par = torch.bmm(gd.unsqueeze(1), Wd.unsqueeze(2)).squeeze(2)  # [n, 1] row dots, no [n, d] temp
                    gd.addcmul_(Wd, par, value=-1.0)
            opt.step()
            with torch.no_grad():
                if unit:
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
        check_is_fitted(self, "sae_")
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
        ws: TopKWorkspace | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Local loss, normalised by global constants; returns (loss, fired mask [n], stats)."""
        x_in = x - sae.b_dec
        n = self.n_latents
        if self.activation == "topk":
            if self.sparse_backward:
                recon, acts, idx = topk_autoencode(sae, x_in, ws)
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
