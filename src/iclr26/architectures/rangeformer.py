"""RangeFormer (ICLR 2026, OpenReview GBkRMi3qjD) — a RECONSTRUCTION from the abstract, plus a LAWT baseline.

Only the abstract was available: transformers for linear algebra in the style of Charton (LAWT, TMLR 2022)
generalise poorly across matrix distributions and sizes; four interventions fix much of it: (1) matrix
embeddings through a learnable projection of a sketch, (2) linear attention, (3) looping, (4) pre-training on
structured matrices. Our reading ("RangeFormer-lite", every piece switchable):

- normalise ``Ã = A / s`` (s = mean diagonal), draw a Gaussian sketch ``Ω ∈ R^{n×k}`` (/√k), ``Y = ÃΩ``;
  token i = ``Linear([Ã_ii, Y_i, Ω_i])`` — n tokens of width d for any n (k fixed);
- linear attention ``φ(Q)(φ(K)ᵀV)/n`` (O(n d²)), or softmax attention as the ablation;
- one weight-tied pre-RMSNorm block looped L times with input injection, ``h ← h + block(h + E)``; L drawn
  per batch in training and free at test time (``tied=False``: L distinct blocks, the unlooped ablation);
- readouts: ``ŷ = mean_i g(h_i)`` estimates ``log det(Ã)/n`` (log det = tr log); for solves a per-token x_i.

The LAWT-style baseline :class:`ChartonEncoder` reads the n² entries as P1000 tokens (sign, 3-digit mantissa,
exponent; summed embeddings) with learned row/column embeddings, a softmax encoder and a regression head (a
documented simplification of LAWT's autoregressive decoder). :func:`slq_logdet` is the non-learned yardstick
(stochastic Lanczos quadrature).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.io import load_cfg, load_module_state, save_module

log = logging.getLogger(__name__)

__all__ = [
    "RangeFormerConfig",
    "RangeFormer",
    "ChartonConfig",
    "ChartonEncoder",
    "LinearAttention",
    "p1000_encode",
    "slq_logdet",
    "train_logdet",
    "save_pretrained",
    "load_pretrained",
    "as_batch",
]


# ---- inputs -----------------------------------------------------------------------------------------------


def as_batch(mats, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A, mask)`` from a [B, n, n] array/tensor or a list of square matrices of varying n (zero-padded).

    mask: [B, n] bool, True on real rows. Raises a one-line ``UserError`` on non-square input.
    """
    if isinstance(mats, (list, tuple)):
        if not mats:
            raise UserError("as_batch: empty list of matrices")
        ms = [torch.as_tensor(np.asarray(m), dtype=dtype) for m in mats]
        for m in ms:
            if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 1:
                raise UserError(f"as_batch: every matrix must be square n x n, got shape {tuple(m.shape)}")
        n = max(m.shape[0] for m in ms)
        a = torch.zeros(len(ms), n, n, dtype=dtype)
        mask = torch.zeros(len(ms), n, dtype=torch.bool)
        for i, m in enumerate(ms):
            a[i, : m.shape[0], : m.shape[0]] = m
            mask[i, : m.shape[0]] = True
        return a, mask
    a = torch.as_tensor(np.asarray(mats) if not torch.is_tensor(mats) else mats, dtype=dtype)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise UserError(f"expected square matrices [batch, n, n] (or a list of them), got shape {tuple(a.shape)}")
    return a, torch.ones(a.shape[0], a.shape[1], dtype=torch.bool)


def _normalise(a: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A / s, s)`` with s the mean of the real diagonal entries (padding excluded)."""
    cnt = mask.sum(1).clamp(min=1)
    s = (torch.diagonal(a, dim1=1, dim2=2) * mask).sum(1) / cnt  # [B]
    if torch.any(s <= 0):
        raise UserError("RangeFormer expects SPD matrices: a matrix has a non-positive mean diagonal")
    return a / s[:, None, None], s


# ---- RangeFormer ------------------------------------------------------------------------------------------


@dataclass
class RangeFormerConfig:
    """Hyperparameters of :class:`RangeFormer` (defaults: the spec's RangeFormer-lite)."""

    d: int = 64  # token width
    k: int = 16  # sketch columns (token width does not depend on n)
    heads: int = 4
    mlp_ratio: int = 2
    loops: int = 8  # test-time loop count (for tied=False: the number of distinct blocks)
    train_loops: tuple[int, int] = (4, 8)  # L ~ U{lo..hi} per training batch (tied only)
    attn: str = "linear"  # "linear" | "softmax"
    feature_map: str = "identity"  # linear attention φ: "identity" | "elu" (elu + 1)
    tied: bool = True  # one block looped (True) or `loops` distinct blocks (False)
    task: str = "logdet"  # "logdet" (one scalar per matrix) | "solve" (x_i per token for Ãx = b)

    def validate(self) -> None:
        for name in ("d", "k", "heads", "mlp_ratio", "loops"):
            if int(getattr(self, name)) < 1:
                raise UserError(f"RangeFormerConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.d % self.heads:
            raise UserError(f"RangeFormerConfig: d={self.d} must be divisible by heads={self.heads}")
        lo, hi = self.train_loops
        if not 1 <= lo <= hi:
            raise UserError(f"RangeFormerConfig.train_loops must satisfy 1 <= lo <= hi, got {self.train_loops}")
        for name, allowed in (("attn", ("linear", "softmax")), ("feature_map", ("identity", "elu")),
                              ("task", ("logdet", "solve"))):
            if getattr(self, name) not in allowed:
                raise UserError(f"RangeFormerConfig.{name} must be one of {allowed}, got {getattr(self, name)!r}")


class LinearAttention(nn.Module):
    """Multi-head linear attention ``φ(Q)(φ(K)ᵀV)/n`` over the real tokens (padding masked out)."""

    def __init__(self, d: int, heads: int, feature_map: str = "identity"):
        super().__init__()
        self.heads, self.dh, self.feature_map = heads, d // heads, feature_map
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)

    def _phi(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.elu(x) + 1 if self.feature_map == "elu" else x

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)  # [B, h, n, dh] each
        m = mask[:, None, :, None].to(x.dtype)
        k, v = self._phi(k) * m, v * m
        kv = k.transpose(-1, -2) @ v  # [B, h, dh, dh]: the only n-sized reduction, O(n dh²)
        cnt = mask.sum(1).clamp(min=1).to(x.dtype)[:, None, None, None]
        o = (self._phi(q) @ kv) / cnt  # [B, h, n, dh]
        return self.out(o.transpose(1, 2).reshape(b, n, -1))


class SoftmaxAttention(nn.Module):
    """Standard multi-head softmax attention with a key padding mask (the ablation of linear attention)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, heads, bias=False, batch_first=True)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x, key_padding_mask=~mask, need_weights=False)[0]


class _Block(nn.Module):
    def __init__(self, cfg: RangeFormerConfig):
        super().__init__()
        self.n1, self.n2 = nn.RMSNorm(cfg.d), nn.RMSNorm(cfg.d)
        self.attn = (LinearAttention(cfg.d, cfg.heads, cfg.feature_map) if cfg.attn == "linear"
                     else SoftmaxAttention(cfg.d, cfg.heads))  # fmt: skip
        self.mlp = nn.Sequential(nn.Linear(cfg.d, cfg.mlp_ratio * cfg.d), nn.GELU(),
                                 nn.Linear(cfg.mlp_ratio * cfg.d, cfg.d))  # fmt: skip

    def forward(self, h: torch.Tensor, e: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # input injection: every loop sees the embedding E again
        h = h + self.attn(self.n1(h + e), mask)
        return h + self.mlp(self.n2(h + e))


class RangeFormer(nn.Module):
    """Sketch-embedded, looped linear-attention transformer for SPD log-determinants (and solves).

    ``forward(A, mask)`` returns ``y = log det(A/s)/n`` per matrix ([B]; ``task="solve"``: x per token,
    [B, n], for ``(A/s) x = b``); :meth:`logdet` returns ``log det A``. Ω is drawn from ``generator``
    (or passed as ``omega``: [B, n, k]); all parameters are shared across n.
    """

    def __init__(self, cfg: RangeFormerConfig | None = None, **kw):
        super().__init__()
        cfg = dataclasses.replace(cfg or RangeFormerConfig(), **kw)
        cfg.train_loops = tuple(cfg.train_loops)
        cfg.validate()
        self.cfg = cfg
        n_in = 1 + 2 * cfg.k + (2 if cfg.task == "solve" else 0)  # [Ã_ii, Y_i, Ω_i (, b_i, (Ãb)_i)]
        self.embed = nn.Linear(n_in, cfg.d)
        self.blocks = nn.ModuleList([_Block(cfg) for _ in range(1 if cfg.tied else cfg.loops)])
        self.norm = nn.RMSNorm(cfg.d)
        self.head = nn.Sequential(nn.Linear(cfg.d, cfg.d), nn.GELU(), nn.Linear(cfg.d, 1))

    def sketch(self, a: torch.Tensor, mask: torch.Tensor, omega: torch.Tensor | None = None,
               generator: torch.Generator | None = None, b: torch.Tensor | None = None) -> torch.Tensor:
        """Token features [B, n, 1 + 2k (+2)] of normalised matrices ``a`` (padding rows zero)."""
        bsz, n, _ = a.shape
        if omega is None:
            # drawn on the CPU (``generator`` is a CPU one, as in :meth:`predict`), then moved to a's device
            omega = torch.randn(bsz, n, self.cfg.k, generator=generator, dtype=a.dtype) / math.sqrt(self.cfg.k)
            omega = omega.to(a.device)
        elif omega.shape != (bsz, n, self.cfg.k):
            raise UserError(f"omega must have shape {(bsz, n, self.cfg.k)}, got {tuple(omega.shape)}")
        m = mask[..., None].to(a.dtype)
        omega = omega * m
        feats = [torch.diagonal(a, dim1=1, dim2=2)[..., None], a @ omega, omega]  # Y = ÃΩ: [B, n, k]
        if self.cfg.task == "solve":
            if b is None:
                raise UserError("a RangeFormer with task='solve' needs a right-hand side b of shape [batch, n]")
            b = b.to(a.dtype)[..., None] * m
            feats += [b, a @ b]
        return torch.cat(feats, -1) * m

    def forward(self, a, mask: torch.Tensor | None = None, *, loops: int | None = None,
                omega: torch.Tensor | None = None, generator: torch.Generator | None = None,
                b: torch.Tensor | None = None, return_all: bool = False) -> torch.Tensor:
        """``y`` [B] (or, with ``return_all``, [L, B]: the readout after every loop)."""
        if mask is None:
            a, mask = as_batch(a, dtype=self.embed.weight.dtype)
        a = a.to(self.embed.weight.dtype)
        an, _ = _normalise(a, mask)
        e = self.embed(self.sketch(an, mask, omega, generator, b))  # [B, n, d]
        n_loops = self.cfg.loops if loops is None else int(loops)
        if n_loops < 1 or (not self.cfg.tied and n_loops > self.cfg.loops):
            raise UserError(f"loops must be in 1..{self.cfg.loops if not self.cfg.tied else 'any'}, got {loops}")
        h = torch.zeros_like(e)
        outs = []
        for t in range(n_loops):
            h = self.blocks[0 if self.cfg.tied else t](h, e, mask)
            if return_all or t == n_loops - 1:
                outs.append(self._readout(h, mask))
        return torch.stack(outs) if return_all else outs[-1]

    def _readout(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        g = self.head(self.norm(h))[..., 0] * mask  # [B, n]
        if self.cfg.task == "solve":
            return g
        return g.sum(1) / mask.sum(1).clamp(min=1)

    @torch.no_grad()
    def logdet(self, mats, *, loops: int | None = None, draws: int = 4, seed: int = 0) -> torch.Tensor:
        """``log det A`` [B] (float64) for SPD ``mats`` ([B, n, n] or a list), averaged over ``draws`` sketches."""
        if self.cfg.task != "logdet":
            raise UserError("logdet() needs a RangeFormer trained with task='logdet'")
        a, mask = as_batch(mats, dtype=torch.float64)
        y = self.predict(a, mask, loops=loops, draws=draws, seed=seed)
        _, s = _normalise(a, mask)
        n = mask.sum(1).to(torch.float64)
        return n * (y.to(torch.float64) + torch.log(s))

    @torch.no_grad()
    def predict(self, a: torch.Tensor, mask: torch.Tensor, *, loops: int | None = None, draws: int = 4,
                seed: int = 0) -> torch.Tensor:
        """``y = log det(A/s)/n`` [B], averaged over ``draws`` fixed sketches (deterministic given ``seed``)."""
        was = self.training
        self.eval()
        try:
            g = torch.Generator().manual_seed(seed)
            return torch.stack([self(a, mask, loops=loops, generator=g) for _ in range(draws)]).mean(0)
        finally:
            self.train(was)


# ---- Charton-style baseline -------------------------------------------------------------------------------


def p1000_encode(x: torch.Tensor, exp_range: int = 16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """P1000 tokens of real numbers: sign (0/1), 3-digit mantissa (100..999; 0 for zero) and exponent.

    ``x ≈ (-1)^sign · mantissa · 10^exponent``; the exponent index is ``exponent + exp_range`` clipped to
    ``0..2·exp_range``. Rounding to 3 significant digits is the encoding's own limitation (kept).
    """
    ax = x.abs().to(torch.float64)
    nz = ax > 0
    e = torch.where(nz, torch.floor(torch.log10(torch.where(nz, ax, torch.ones_like(ax)))) - 2, torch.zeros_like(ax))
    m = torch.where(nz, torch.round(ax / 10.0**e), torch.zeros_like(ax))
    over = m >= 1000  # 999.5 rounds up: renormalise
    m, e = torch.where(over, torch.round(m / 10), m), torch.where(over, e + 1, e)
    sign = (x < 0).long()
    return sign, m.long(), (e.long() + exp_range).clamp(0, 2 * exp_range)


@dataclass
class ChartonConfig:
    """Hyperparameters of :class:`ChartonEncoder` (LAWT-style entry tokens)."""

    d: int = 32
    heads: int = 4
    layers: int = 3
    max_n: int = 16  # learned row/column positions (positions beyond the training sizes stay untrained)
    exp_range: int = 16

    def validate(self) -> None:
        for name in ("d", "heads", "layers", "max_n", "exp_range"):
            if int(getattr(self, name)) < 1:
                raise UserError(f"ChartonConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.d % self.heads:
            raise UserError(f"ChartonConfig: d={self.d} must be divisible by heads={self.heads}")


class ChartonEncoder(nn.Module):
    """LAWT-style baseline: n² P1000 entry tokens + row/column embeddings -> softmax encoder -> mean -> ŷ."""

    def __init__(self, cfg: ChartonConfig | None = None, **kw):
        super().__init__()
        cfg = dataclasses.replace(cfg or ChartonConfig(), **kw)
        cfg.validate()
        self.cfg = cfg
        d = cfg.d
        self.sign, self.mant = nn.Embedding(2, d), nn.Embedding(1000, d)
        self.expo = nn.Embedding(2 * cfg.exp_range + 1, d)
        self.row, self.col = nn.Embedding(cfg.max_n, d), nn.Embedding(cfg.max_n, d)
        layer = nn.TransformerEncoderLayer(d, cfg.heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))

    def forward(self, a, mask: torch.Tensor | None = None, **_ignored) -> torch.Tensor:
        """``y`` [B] for matrices [B, n, n] (normalised by the mean diagonal first, like RangeFormer)."""
        if mask is None:
            a, mask = as_batch(a)
        bsz, n, _ = a.shape
        if n > self.cfg.max_n:
            raise UserError(f"ChartonEncoder has {self.cfg.max_n} positions; got n={n}")
        an, _ = _normalise(a.to(torch.float64), mask)
        s, m, e = p1000_encode(an, self.cfg.exp_range)  # [B, n, n] each
        idx = torch.arange(n, device=a.device)
        x = self.sign(s) + self.mant(m) + self.expo(e) + self.row(idx)[None, :, None] + self.col(idx)[None, None, :]
        tok_mask = (mask[:, :, None] & mask[:, None, :]).reshape(bsz, n * n)  # [B, n²]
        h = self.encoder(x.reshape(bsz, n * n, -1), src_key_padding_mask=~tok_mask)
        pooled = (h * tok_mask[..., None]).sum(1) / tok_mask.sum(1, keepdim=True)
        return self.head(pooled)[:, 0]

    @torch.no_grad()
    def predict(self, a: torch.Tensor, mask: torch.Tensor, **_ignored) -> torch.Tensor:
        was = self.training
        self.eval()
        try:
            return self(a, mask)
        finally:
            self.train(was)


# ---- training ---------------------------------------------------------------------------------------------


def _rel_mse(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """MSE scaled by max(1, |y|)²: the error measured in the units of the acc@5% tolerance."""
    return (((pred - y) / y.abs().clamp(min=1)) ** 2).mean()


#: regression losses of :func:`train_logdet`
LOSSES: dict[str, Callable] = {"mse": nn.functional.mse_loss, "huber": nn.functional.smooth_l1_loss,
                               "rel_mse": _rel_mse}


def train_logdet(model: nn.Module, sample_batch: Callable[[np.random.Generator, int, int], tuple],
                 *, steps: int, batch: int = 64, sizes: tuple[int, int] = (4, 8), lr: float = 1e-3,
                 weight_decay: float = 0.01, loss: str = "mse", seed: int = 0) -> list[float]:
    """Regress ``y = log det(Ã)/n`` with AdamW (cosine schedule); returns the loss per step.

    ``sample_batch(rng, batch, n) -> (A/s [b, n, n], y [b])`` gives fresh samples each step; n ~ U{sizes}
    per step. A tied RangeFormer draws L ~ U{train_loops} per step and is supervised at every loop from
    ``train_loops[0]`` on (so that extra test-time loops refine rather than drift); Ω is resampled per step.
    """
    if steps < 1 or batch < 1:
        raise UserError(f"train_logdet: steps and batch must be >= 1, got {steps}, {batch}")
    if loss not in LOSSES:
        raise UserError(f"train_logdet: loss must be one of {', '.join(LOSSES)}, got {loss!r}")
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    lossf = LOSSES[loss]
    is_rf = isinstance(model, RangeFormer)
    hist = []
    model.train()
    for _ in range(steps):
        n = int(rng.integers(sizes[0], sizes[1] + 1))
        a, y = sample_batch(rng, batch, n)
        a, y = torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)
        mask = torch.ones(a.shape[0], n, dtype=torch.bool)
        if is_rf and model.cfg.tied:
            lo, hi = model.cfg.train_loops
            n_loops = int(rng.integers(lo, hi + 1))
            pred = model(a, mask, loops=n_loops, generator=gen, return_all=True)[lo - 1:]  # [L-lo+1, B]
            err = lossf(pred, y.expand_as(pred))
        else:
            err = lossf(model(a, mask, generator=gen), y)
        opt.zero_grad(set_to_none=True)
        err.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        hist.append(float(err.detach()))
    model.eval()
    return hist


# ---- stochastic Lanczos quadrature ------------------------------------------------------------------------


def slq_logdet(a, *, steps: int = 8, probes: int = 8, seed: int = 0) -> torch.Tensor:
    """Stochastic Lanczos quadrature estimate of ``log det A`` [B] for SPD ``a`` ([B, n, n] or [n, n]).

    ``probes`` Rademacher vectors z, ``steps`` Lanczos steps each (capped at n; full reorthogonalisation):
    ``log det A ≈ n/p Σ_z Σ_j τ_j² log θ_j`` with θ, τ the Ritz values and first eigenvector components of
    the tridiagonal matrix. Exact when steps >= n (and on diagonal matrices for any probe).
    """
    a = torch.as_tensor(np.asarray(a) if not torch.is_tensor(a) else a, dtype=torch.float64)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise UserError(f"slq_logdet: expected [batch, n, n] square matrices, got {tuple(a.shape)}")
    if steps < 1 or probes < 1:
        raise UserError(f"slq_logdet: steps and probes must be >= 1, got {steps}, {probes}")
    bsz, n, _ = a.shape
    m = min(steps, n)
    g = torch.Generator().manual_seed(seed)
    z = (torch.randint(0, 2, (bsz, probes, n), generator=g) * 2 - 1).to(device=a.device, dtype=torch.float64)
    v = z / math.sqrt(n)  # unit vectors [B, p, n]
    basis = [v]
    alpha = torch.zeros(bsz, probes, m, dtype=torch.float64, device=a.device)
    beta = torch.zeros(bsz, probes, m, dtype=torch.float64, device=a.device)
    for j in range(m):
        w = torch.einsum("bij,bpj->bpi", a, basis[j])
        alpha[..., j] = (w * basis[j]).sum(-1)
        for q in basis:  # full reorthogonalisation (twice is enough)
            w = w - (w * q).sum(-1, keepdim=True) * q
        for q in basis:
            w = w - (w * q).sum(-1, keepdim=True) * q
        if j < m - 1:
            nb = w.norm(dim=-1)
            ok = nb > 1e-10 * alpha[..., : j + 1].abs().amax(-1).clamp(min=1e-300)
            beta[..., j] = torch.where(ok, nb, torch.zeros_like(nb))  # breakdown: an invariant subspace
            basis.append(torch.where(ok[..., None], w / nb.clamp(min=1e-300)[..., None], torch.zeros_like(w)))
    t = torch.diag_embed(alpha) + torch.diag_embed(beta[..., : m - 1], 1) + torch.diag_embed(beta[..., : m - 1], -1)
    theta, vec = torch.linalg.eigh(t)  # [B, p, m], [B, p, m, m]
    tau2 = vec[..., 0, :] ** 2
    # after a breakdown the decoupled zero block has θ = 0 and τ = 0: it contributes nothing
    contrib = torch.where(tau2 > 1e-14, tau2 * torch.log(theta.clamp(min=1e-300)), torch.zeros_like(tau2))
    return n * contrib.sum(-1).mean(-1)


# ---- save / load ------------------------------------------------------------------------------------------

_CLASSES = {"RangeFormer": (RangeFormer, RangeFormerConfig), "ChartonEncoder": (ChartonEncoder, ChartonConfig)}


def save_pretrained(model: RangeFormer | ChartonEncoder, folder: str | Path) -> Path:
    """Write ``model.safetensors`` and ``cfg.json`` (class name + config) into ``folder``."""
    name = type(model).__name__
    if name not in _CLASSES:
        raise UserError(f"save_pretrained: expected a RangeFormer or ChartonEncoder, got {name}")
    cfg = {"class": name, "config": dataclasses.asdict(model.cfg)}
    return save_module(model, folder, cfg)


def load_pretrained(folder: str | Path) -> RangeFormer | ChartonEncoder:
    """The model saved by :func:`save_pretrained` in ``folder``."""
    meta = load_cfg(folder)
    if meta.get("class") not in _CLASSES:
        raise UserError(f"{folder}/cfg.json: unknown model class {meta.get('class')!r}")
    cls, cfg_cls = _CLASSES[meta["class"]]
    conf = dict(meta["config"])
    if "train_loops" in conf:
        conf["train_loops"] = tuple(conf["train_loops"])
    model = cls(cfg_cls(**conf))
    load_module_state(model, Path(folder) / "model.safetensors")
    return model.eval()
