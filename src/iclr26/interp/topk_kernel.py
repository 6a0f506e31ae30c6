"""Sparse TopK autoencoder step: forward by ``embedding_bag``, backward by CSR products.

Used by :class:`iclr26.interp.train.SAETrainer` ("Sparse Autoencoders Trained on the Same Data
Learn Different Features", Paulo & Belrose, ICLR 2026, arXiv 2501.16615). Only the encoder forward
``x W_encᵀ`` is dense; the decoder forward gathers the k selected rows per sample, and the weight
gradients are sparse [n, N] selection matrices times dense [N, d] operands, so no dense [N, n]
gradient is ever formed.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as F

from iclr26.core.errors import UserError
from iclr26.interp.sae import SparseDictionary


def _csr(crow: torch.Tensor, col: torch.Tensor, val: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    with warnings.catch_warnings():  # torch flags CSR as beta; the product used here is stable
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, val, shape, check_invariants=False)


# Below this many latents numpy's introselect (argpartition) beats torch.topk on CPU by 1.5-2.2x (measured on
# [1024, n] float32, k = 8-16, one thread: 0.32 vs 0.70 ms at n = 64, 1.49 vs 2.42 ms at n = 256); from n = 384 on
# torch is as fast or faster.
_NUMPY_TOPK_MAX_N = 256


def topk_rows(pre: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values, indices)`` of the k largest entries of each row of ``pre [N, n]``, in no particular order.

    The same set as ``pre.topk(k, dim=-1, sorted=False)`` (up to ties); on CPU for narrow rows the selection
    runs in numpy, which is faster there. Deterministic either way."""
    n = pre.shape[-1]
    numpy_ok = pre.device.type == "cpu" and pre.dtype in (torch.float32, torch.float64)  # numpy has no bf16
    if not numpy_ok or pre.ndim != 2 or n > _NUMPY_TOPK_MAX_N or k >= n or pre.requires_grad:
        return pre.topk(k, dim=-1, sorted=False)
    a = pre.detach().numpy()
    idx = np.argpartition(a, n - k, axis=1)[:, n - k :]
    vals = np.take_along_axis(a, idx, axis=1)
    return torch.from_numpy(vals), torch.from_numpy(idx)


class TopKWorkspace:
    """Buffers reused across the steps of one training run (what :class:`SAETrainer` passes).

    A fresh 64 MB pre-activation buffer and two fresh 42 MB weight gradients per step (d = 640, 16,384 latents,
    batch 1024) cost more in first-touch page faults than the sparse products that fill them: on a 2-core CPU the
    forward product went from 170 to 145 ms with a reused output, and each CSR product from 30 to 3 ms when it
    accumulates into an existing ``.grad`` instead of allocating. So the workspace (1) keeps the [N, n]
    pre-activation buffer, and (2) with ``accumulate_grads=True``, when ``W_enc_T.grad`` / ``W_dec.grad`` already
    exist (the caller zeroes them with ``zero_grad(set_to_none=False)``), adds the weight gradients into them in
    place and hands autograd no tensor for those two inputs; with ``overwrite_grads`` it writes them instead, so
    they need no zeroing (only valid when nothing else in the loss reaches the two weights). Results are
    bit-identical to the allocating path (tests/test_sae.py). Do not use ``accumulate_grads`` with hooks that
    expect the weight gradients to pass through autograd (e.g. ``DistributedDataParallel``); ``SAETrainer`` all-reduces ``.grad`` itself.
    """

    def __init__(self, sae: SparseDictionary, accumulate_grads: bool = False):
        self.W_enc_T, self.W_dec = sae.W_enc_T, sae.W_dec
        self.accumulate_grads = accumulate_grads
        #: set by a caller that knows this step's loss reaches the two weights only through this kernel: the
        #: kept ``.grad`` is then overwritten (not zeroed first, then added to)
        self.overwrite_grads = False
        self._pre: torch.Tensor | None = None

    def pre(self, N: int, n: int, like: torch.Tensor) -> torch.Tensor:
        b = self._pre
        if b is None or b.shape != (N, n) or b.dtype != like.dtype or b.device != like.device:
            b = self._pre = torch.empty(N, n, dtype=like.dtype, device=like.device)
        return b

    def grad_target(self, which: str, like: torch.Tensor) -> torch.Tensor | None:
        """The existing dense ``.grad`` to accumulate into, or None (then the gradient goes through autograd)."""
        if not self.accumulate_grads:
            return None
        p = getattr(self, which)
        g = p.grad
        if g is None:
            return None
        if g.layout != torch.strided or g.shape != like.shape or g.dtype != like.dtype or g.device != like.device \
                or not g.is_contiguous():
            if self.overwrite_grads:  # its stale content must not be added to: autograd starts it afresh
                p.grad = None
            return None
        return g


class _TopKAutoencode(torch.autograd.Function):
    """recon = Σ_j relu(topk(x W_encᵀ + b_enc))_j · W_dec[idx_j] with a sparse backward.

    Inputs: x [N, d], W_encT [n, d] (contiguous encoder rows), b_enc [n], W_dec [n, d_out], k.
    Outputs: recon [N, d_out] (without b_dec), acts [N, k], idx [N, k].
    Backward never forms a dense [N, n] gradient: weight gradients are CSR [n, N] @ dense [N, d].
    """

    @staticmethod
    def forward(ctx, x, W_encT, b_enc, W_dec, k: int, ws: TopKWorkspace | None = None):  # noqa: N803
        if ws is None:
            pre = torch.addmm(b_enc, x, W_encT.T)  # [N, n]
        else:  # into the reused buffer (no page faults on a fresh [N, n] allocation)
            pre = torch.addmm(b_enc, x, W_encT.T, out=ws.pre(x.shape[0], W_encT.shape[0], x))
        # top-k of pre then ReLU: same values as sparsify's ReLU-then-top-k, one pass fewer
        vals, idx = topk_rows(pre, k)
        del pre
        acts = vals.clamp_min_(0)
        recon = F.embedding_bag(idx, W_dec, per_sample_weights=acts, mode="sum")  # [N, d_out]
        ctx.save_for_backward(x, W_encT, W_dec, acts, idx)
        ctx.ws = ws
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
        # With a workspace that accumulates, the product is added into the existing .grad in place (addmm with
        # out= that tensor) and autograd gets None for that input; into a zeroed .grad that is bit-identical.
        ws = ctx.ws
        if ctx.needs_input_grad[1]:
            G = _csr(crow, col, g.reshape(-1)[order], (n, N))
            tgt = ws.grad_target("W_enc_T", W_encT) if ws is not None else None
            if tgt is None:
                grad_WencT = torch.sparse.addmm(torch.empty_like(W_encT), G, x, beta=0.0)
            else:
                torch.addmm(tgt, G, x, beta=0.0 if ws.overwrite_grads else 1.0, out=tgt)
        if ctx.needs_input_grad[2]:
            grad_benc = torch.zeros(n, dtype=g.dtype, device=g.device).index_add_(0, flat, g.reshape(-1))
        if ctx.needs_input_grad[3]:
            A = _csr(crow, col, acts.reshape(-1)[order], (n, N))
            tgt = ws.grad_target("W_dec", W_dec) if ws is not None else None
            if tgt is None:
                grad_Wdec = torch.sparse.addmm(torch.empty_like(W_dec), A, grad_recon, beta=0.0)
            else:
                torch.addmm(tgt, A, grad_recon, beta=0.0 if ws.overwrite_grads else 1.0, out=tgt)
        if ctx.needs_input_grad[0]:
            grad_x = F.embedding_bag(idx, W_encT, per_sample_weights=g, mode="sum")  # [N, d]
        return grad_x, grad_WencT, grad_benc, grad_Wdec, None, None


def topk_autoencode(
    sae: SparseDictionary, x_in: torch.Tensor, workspace: TopKWorkspace | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(recon incl. b_dec [N, d_out], acts [N, k], idx [N, k]) for an already-processed input.

    ``workspace``: a :class:`TopKWorkspace` of this ``sae`` reused across steps (buffers; optionally in-place
    weight gradients)."""
    if workspace is not None and (workspace.W_enc_T is not sae.W_enc_T or workspace.W_dec is not sae.W_dec):
        raise UserError("topk_autoencode: the workspace was built for another dictionary")
    recon, acts, idx = _TopKAutoencode.apply(x_in, sae.W_enc_T, sae.b_enc, sae.W_dec, sae.k, workspace)
    return recon + sae.b_dec, acts, idx
