"""Hyper-SET: Designing Transformers via Hyperspherical Energy Minimization (ICLR 2026, arXiv 2502.11646).

One weight-shared layer applied for T recurrences. Each recurrence takes a gradient step on two energies
of the tokens projected onto per-head hyperspheres (RMSNorm): an attention energy
``E_ATTN = sqrt(d_h) * sum_h sum_i log sum_j exp(<w_i, w_j> / sqrt(d_h))`` (uniformity; its gradient is the
symmetric attention ``softmax(A, -1) + softmax(A, -2)`` with tied input/output weights ``W``/``W^T``) and a
feed-forward energy ``E_FF = -1/2 sum_i ||ReLU(RMSNorm(D x_i))||^2`` (alignment; its descent step is
``D^T ReLU(RMSNorm(D x))``). The per-token, per-channel step sizes ``alpha_t, beta_t`` come from a time
embedding of the recurrence index; their projection is zero-initialised, so the layer starts as the identity.
Variants: linear and sigmoid attention, gated feed-forward, depth-wise LoRA, fixed scalar steps.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.architectures.vit import PatchEmbed, sinusoidal_positions
from iclr26.core.errors import UserError
from iclr26.core.io import load_cfg, load_module_state, save_module

log = logging.getLogger(__name__)

__all__ = [
    "HyperSETConfig",
    "HyperSETEncoder",
    "HyperSETForImageClassification",
    "HyperSETForSudoku",
    "rms_norm",
    "attention_energy",
    "ff_energy",
    "effective_rank",
    "save_hyper_set",
    "load_hyper_set",
]

ATTN_CHOICES = ("softmax", "linear", "sigmoid")
FF_CHOICES = ("standard", "gated")
ACT_CHOICES = ("relu", "gelu")
STEP_CHOICES = ("learned", "fixed")


def rms_norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Parameter-free RMSNorm over the last axis: every row lands on the sphere of radius sqrt(dim)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _elu1(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0  # the linear-attention feature map phi (positive, smooth)


def _elu1_grad(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, torch.ones_like(x), torch.exp(torch.clamp(x, max=0.0)))


def _check_tokens(x: torch.Tensor, d: int, mask: torch.Tensor | None) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != d:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise UserError(f"Hyper-SET expects tokens of shape [batch, tokens, {d}]; got {shape}")
    if mask is not None and (mask.shape != x.shape[:2] or mask.dtype != torch.bool):
        raise UserError(f"mask must be a bool tensor of shape {tuple(x.shape[:2])} (True = real token); "
                        f"got {mask.dtype} {tuple(mask.shape)}")  # fmt: skip


def _heads(z: torch.Tensor, heads: int) -> torch.Tensor:
    b, n, d = z.shape
    return z.view(b, n, heads, d // heads).transpose(1, 2)  # [batch, heads, tokens, d_h]


def attention_energy(w: torch.Tensor, mask: torch.Tensor | None = None, kind: str = "softmax") -> torch.Tensor:
    """Attention energy per sample from normalised head features ``w`` [batch, heads, tokens, d_h].

    softmax: ``sqrt(d_h) sum_h sum_i lse_j(<w_i, w_j>/sqrt(d_h))``; sigmoid: ``sqrt(d_h) sum_{h,i,j}
    sigmoid(<w_i, w_j>/sqrt(d_h))``; linear: ``sum_h ||phi(w)^T phi(w)||_F^2 / (4 sqrt(d_h))`` with
    phi = ELU + 1. Masked tokens (mask False) take no part. Returns [batch].
    """
    dh = w.shape[-1]
    s = math.sqrt(dh)
    m = None if mask is None else mask[:, None, :]  # [batch, 1, tokens]
    if kind == "linear":
        phi = _elu1(w)
        if m is not None:
            phi = phi * m[..., None]
        G = phi.transpose(-1, -2) @ phi  # [batch, heads, d_h, d_h]
        return G.pow(2).sum((-1, -2, -3)) / (4 * s)
    A = w @ w.transpose(-1, -2) / s  # [batch, heads, tokens, tokens]
    if kind == "sigmoid":
        e = torch.sigmoid(A)
        if m is not None:
            e = e * (m[..., :, None] & m[..., None, :])
        return s * e.sum((-1, -2, -3))
    if m is not None:
        A = A.masked_fill(~m[..., None, :], float("-inf"))
    lse = torch.logsumexp(A, -1)  # [batch, heads, tokens]
    if m is not None:
        lse = lse.masked_fill(~m, 0.0)
    return s * lse.sum((-1, -2))


def ff_energy(h: torch.Tensor, mask: torch.Tensor | None = None, kind: str = "standard") -> torch.Tensor:
    """Feed-forward energy per sample from ``h = RMSNorm(D x)`` [batch, tokens, m].

    standard: ``-1/2 sum_i ||ReLU(h_i)||^2``; gated: ``-1/2 sum_i (1^T ReLU(h_i))^2``. Returns [batch].
    """
    r = F.relu(h)
    e = r.pow(2).sum(-1) if kind == "standard" else r.sum(-1).pow(2)  # [batch, tokens]
    if mask is not None:
        e = e * mask
    return -0.5 * e.sum(-1)


@dataclass
class HyperSETConfig:
    """Hyperparameters of one Hyper-SET encoder (saved as ``cfg.json``)."""

    d: int = 48  # token width
    heads: int = 4
    mlp_hidden: int = 96  # rows m of the FF matrix D
    n_recur: int = 6  # recurrences used in training (the default of forward; LoRA keeps one adapter per step)
    attn: str = "softmax"  # softmax | linear | sigmoid
    ff: str = "standard"  # standard | gated
    ff_act: str = "relu"  # relu | gelu (sigma of the FF update)
    time_dim: int = 64  # width of the sinusoidal embedding of the recurrence index
    step: str = "learned"  # learned (alpha_t, beta_t from the time embedding) | fixed (one scalar for both)
    fixed_step: float = 1.0
    input_cond: bool = False  # condition the step sizes on x_0 instead of x_t
    lora_rank: int = 0  # depth-wise LoRA rank on W and D (0 = off)
    lora_alpha: float = 8.0
    faithful_init: bool = False  # also zero-init both TimeMLP linears, as the official code does
    norm_eps: float = 1e-6

    def validate(self) -> HyperSETConfig:
        if self.d < 1 or self.heads < 1 or self.d % self.heads:
            raise UserError(f"d={self.d} must be a positive multiple of heads={self.heads}")
        for name, lo in (("mlp_hidden", 1), ("n_recur", 1), ("time_dim", 2), ("lora_rank", 0)):
            if getattr(self, name) < lo:
                raise UserError(f"{name}={getattr(self, name)} must be >= {lo}")
        if self.time_dim % 2:
            raise UserError(f"time_dim={self.time_dim} must be even (sin and cos halves)")
        for name, allowed in (("attn", ATTN_CHOICES), ("ff", FF_CHOICES), ("ff_act", ACT_CHOICES),
                              ("step", STEP_CHOICES)):  # fmt: skip
            if getattr(self, name) not in allowed:
                raise UserError(f"{name}={getattr(self, name)!r}: allowed values are {', '.join(allowed)}")
        return self


class _TimeMLP(nn.Module):
    """SinEmb(t) -> Linear -> RMSNorm -> GELU -> RMSNorm -> Linear -> RMSNorm (width d)."""

    def __init__(self, time_dim: int, d: int, eps: float):
        super().__init__()
        self.time_dim = time_dim
        self.fc1, self.fc2 = nn.Linear(time_dim, d), nn.Linear(d, d)
        self.n1, self.n2, self.n3 = nn.RMSNorm(d, eps=eps), nn.RMSNorm(d, eps=eps), nn.RMSNorm(d, eps=eps)

    def forward(self, t: int, like: torch.Tensor) -> torch.Tensor:
        half = self.time_dim // 2
        freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, dtype=like.dtype, device=like.device) / half)
        ang = float(t) * freqs
        emb = torch.cat([ang.sin(), ang.cos()])  # [time_dim]
        return self.n3(self.fc2(self.n2(F.gelu(self.n1(self.fc1(emb))))))  # [d]


class HyperSETEncoder(nn.Module):
    """The recurrent Hyper-SET layer on any ``[batch, tokens, d]`` token tensor.

    ``forward(x, n_recur=None, mask=None, return_trace=False)``: ``n_recur`` is chosen at call time (the
    config's value by default); ``mask`` [batch, tokens] bool marks real tokens (padding is masked before
    both softmaxes). ``energy(x)`` gives the per-sample energies; ``step_sizes(x, t)`` the (alpha, beta).
    """

    def __init__(self, cfg: HyperSETConfig | None = None, **kw):
        super().__init__()
        cfg = dataclasses.replace(cfg or HyperSETConfig(), **kw).validate()
        self.cfg = cfg
        d, m, dh = cfg.d, cfg.mlp_hidden, cfg.d // cfg.heads
        self.W = nn.Linear(d, d, bias=False)  # Q = K = V = W x; the update goes back through W^T
        self.D = nn.Linear(d, m, bias=False)  # FF matrix; the update goes back through D^T
        self.norm_q, self.norm_k, self.norm_v = (nn.RMSNorm(dh, eps=cfg.norm_eps) for _ in range(3))
        self.norm_ff = nn.RMSNorm(m, eps=cfg.norm_eps)
        if cfg.step == "learned":
            self.time_mlp = _TimeMLP(cfg.time_dim, d, cfg.norm_eps)
            self.norm_x = nn.RMSNorm(d, eps=cfg.norm_eps)
            self.to_steps = nn.Linear(d, 2 * d)
            nn.init.zeros_(self.to_steps.weight)  # alpha = beta = 0 at init: the layer starts as the identity
            nn.init.zeros_(self.to_steps.bias)
            if cfg.faithful_init:  # the official init: TimeMLP then never trains (docs/hyper-set.md)
                for lin in (self.time_mlp.fc1, self.time_mlp.fc2):
                    nn.init.zeros_(lin.weight)
                    nn.init.zeros_(lin.bias)
        if cfg.lora_rank:
            r, T = cfg.lora_rank, cfg.n_recur
            # one (B_t, A_t) pair per recurrence on W and on D; B zero-init so every Delta starts at zero
            self.lora_W_A = nn.Parameter(torch.randn(T, r, d) / math.sqrt(d))
            self.lora_W_B = nn.Parameter(torch.zeros(T, d, r))
            self.lora_D_A = nn.Parameter(torch.randn(T, r, d) / math.sqrt(d))
            self.lora_D_B = nn.Parameter(torch.zeros(T, m, r))

    # ---- weights of recurrence t (LoRA adds a per-step low-rank delta; steps past training reuse the last)
    def _weights(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        W, D = self.W.weight, self.D.weight
        if self.cfg.lora_rank:
            k = min(t, self.cfg.n_recur - 1)
            s = self.cfg.lora_alpha / self.cfg.lora_rank
            W = W + s * self.lora_W_B[k] @ self.lora_W_A[k]
            D = D + s * self.lora_D_B[k] @ self.lora_D_A[k]
        return W, D

    def step_sizes(self, x: torch.Tensor, t: int, x0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(alpha_t, beta_t), each [batch, tokens, d] (or scalars broadcast to it for ``step='fixed'``)."""
        if self.cfg.step == "fixed":
            a = torch.full_like(x, self.cfg.fixed_step)
            return a, a
        cond = x0 if (self.cfg.input_cond and x0 is not None) else x
        e = self.time_mlp(t, x)  # [d]
        ab = self.to_steps(F.gelu(e + self.norm_x(cond)))  # [batch, tokens, 2d]
        return ab[..., : self.cfg.d], ab[..., self.cfg.d :]

    def attn_direction(self, x: torch.Tensor, t: int = 0, mask: torch.Tensor | None = None,
                       norm: bool = True) -> torch.Tensor:  # fmt: skip
        """The vector g of the attention step ``x <- x - alpha * g``; with ``norm=False`` g = grad E_ATTN(Wx)."""
        W, _ = self._weights(t)
        H = self.cfg.heads
        w = _heads(F.linear(x, W), H)  # [batch, heads, tokens, d_h]
        q, k, v = (self.norm_q(w), self.norm_k(w), self.norm_v(w)) if norm else (w, w, w)
        s = math.sqrt(w.shape[-1])
        m = None if mask is None else mask[:, None, :]
        if self.cfg.attn == "linear":
            pq, pk, pv = _elu1(q), _elu1(k), _elu1(v)
            if m is not None:
                pk, pv = pk * m[..., None], pv * m[..., None]
            y = (pv @ (pq.transpose(-1, -2) @ pk) / s) * _elu1_grad(q)  # [batch, heads, tokens, d_h]
        else:
            A = q @ k.transpose(-1, -2) / s  # [batch, heads, tokens, tokens]
            if self.cfg.attn == "sigmoid":
                sg = torch.sigmoid(A)
                S = 2 * sg * (1 - sg)  # sigma'(A) + sigma'(A)^T for a symmetric A
                if m is not None:
                    S = S * (m[..., :, None] & m[..., None, :])
            else:
                if m is not None:
                    pair = m[..., :, None] & m[..., None, :]
                    A = A.masked_fill(~pair, float("-inf"))
                    row = torch.softmax(A.masked_fill(~m[..., :, None], 0.0), -1)  # padded rows: finite
                    col = torch.softmax(A.masked_fill(~m[..., None, :], 0.0), -2)
                    S = (row + col) * pair
                else:
                    S = torch.softmax(A, -1) + torch.softmax(A, -2)
            y = S @ v
        if m is not None:
            y = y * m[..., None]
        y = y.transpose(1, 2).reshape(x.shape)  # [batch, tokens, d]
        return F.linear(y, W.t())  # back through W^T

    def ff_direction(self, x: torch.Tensor, t: int = 0, mask: torch.Tensor | None = None,
                     norm: bool = True) -> torch.Tensor:  # fmt: skip
        """The vector g of the FF step ``x <- x + beta * g``; with ``norm=False`` g = -grad E_FF(Dx)."""
        _, D = self._weights(t)
        h = F.linear(x, D)  # [batch, tokens, m]
        if norm:
            h = self.norm_ff(h)
        act = F.relu if self.cfg.ff_act == "relu" else F.gelu
        if self.cfg.ff == "gated":
            y = act(h).sum(-1, keepdim=True) * (h > 0).to(h.dtype)  # (1^T phi(h)) * phi'(h), phi = ReLU
        else:
            y = act(h)
        if mask is not None:
            y = y * mask[..., None]
        return F.linear(y, D.t())

    def recurrence(self, x: torch.Tensor, t: int, mask: torch.Tensor | None = None,
                   x0: torch.Tensor | None = None, step_scale: float = 1.0) -> torch.Tensor:  # fmt: skip
        a, b = self.step_sizes(x, t, x0)
        x = x - step_scale * a * self.attn_direction(x, t, mask)
        return x + step_scale * b * self.ff_direction(x, t, mask)

    def forward(self, x: torch.Tensor, n_recur: int | None = None, mask: torch.Tensor | None = None,
                return_trace: bool = False, step_scale: float = 1.0):  # fmt: skip
        """``step_scale`` multiplies every alpha and beta (analysis: 0 = the identity, -1 = reversed steps)."""
        _check_tokens(x, self.cfg.d, mask)
        T = self.cfg.n_recur if n_recur is None else int(n_recur)
        if T < 0:
            raise UserError(f"n_recur={T} must be >= 0")
        x0, trace = x, [x]
        for t in range(T):
            x = self.recurrence(x, t, mask, x0, step_scale)
            if return_trace:
                trace.append(x)
        return (x, trace) if return_trace else x

    @torch.no_grad()
    def step_sign_shares(self, x: torch.Tensor, n_recur: int | None = None) -> list[tuple[float, float]]:
        """Share of positive alpha and beta entries at every recurrence along the trajectory from ``x``."""
        out, x0 = [], x
        for t in range(self.cfg.n_recur if n_recur is None else n_recur):
            a, b = self.step_sizes(x, t, x0)
            out.append((float((a > 0).float().mean()), float((b > 0).float().mean())))
            x = self.recurrence(x, t, None, x0)
        return out

    def energy(self, x: torch.Tensor, t: int = 0, mask: torch.Tensor | None = None,
               learned_norms: bool = False) -> dict[str, torch.Tensor]:  # fmt: skip
        """Per-sample energies ``{"attn", "ff", "total"}`` (each [batch], fp32) of the tokens ``x``.

        ``learned_norms=False`` (the official analysis): parameter-free RMSNorm. ``True``: the update's own
        norms (the key-norm gains for the attention term, the FF norm's gains). The FF term always uses
        ReLU, as the official energy does (with ``ff_act='gelu'`` the update is not its exact gradient).
        """
        _check_tokens(x, self.cfg.d, mask)
        x = x.float()
        W, D = (w.float() for w in self._weights(t))
        w = _heads(F.linear(x, W), self.cfg.heads)
        w = self.norm_k(w).float() if learned_norms else rms_norm(w, self.cfg.norm_eps)
        h = F.linear(x, D)
        h = self.norm_ff(h).float() if learned_norms else rms_norm(h, self.cfg.norm_eps)
        ea = attention_energy(w, mask, self.cfg.attn)
        ef = ff_energy(h, mask, self.cfg.ff)
        return {"attn": ea, "ff": ef, "total": ea + ef}

    @torch.no_grad()
    def head_angles(self, x: torch.Tensor) -> torch.Tensor:
        """Mean pairwise angle (radians) between distinct tokens in each head's space ``W_h x``: [batch]."""
        w = F.normalize(_heads(F.linear(x.float(), self.W.weight.float()), self.cfg.heads), dim=-1)
        cos = (w @ w.transpose(-1, -2)).clamp(-1, 1)  # [batch, heads, tokens, tokens]
        n = cos.shape[-1]
        off = ~torch.eye(n, dtype=torch.bool, device=x.device)
        return torch.arccos(cos[..., off]).mean((-1, -2))


def effective_rank(x: torch.Tensor) -> torch.Tensor:
    """Effective rank ``exp(H(s / sum s))`` of each token matrix [batch, tokens, d] (Roy & Vetterli): [batch]."""
    x = x.float()
    ok = torch.isfinite(x).all(-1).all(-1)  # [batch]; a diverged model gives NaN tokens: NaN rank, no error
    s = torch.linalg.svdvals(torch.where(ok[:, None, None], x, torch.zeros_like(x)))
    p = s / s.sum(-1, keepdim=True).clamp_min(1e-12)
    r = torch.exp(-(p * torch.log(p.clamp_min(1e-12))).sum(-1))
    return torch.where(ok, r, torch.full_like(r, float("nan")))


class HyperSETForImageClassification(nn.Module):
    """Patches -> LayerNorm -> Linear -> LayerNorm, CLS token, fixed sinusoidal positions, Hyper-SET encoder,
    LayerNorm + Linear on the CLS token. Input images [batch, H, W] or [batch, C, H, W]."""

    def __init__(self, cfg: HyperSETConfig, *, image_size: int = 28, patch: int = 7, channels: int = 1,
                 num_classes: int = 10):  # fmt: skip
        super().__init__()
        self.embed = PatchEmbed(image_size, patch, channels, cfg.d)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.d))
        self.register_buffer("pos", sinusoidal_positions(self.embed.n_patches + 1, cfg.d), persistent=False)
        self.encoder = HyperSETEncoder(cfg)
        self.head_norm = nn.LayerNorm(cfg.d)
        self.head = nn.Linear(cfg.d, num_classes)
        self.meta = {"image_size": image_size, "patch": patch, "channels": channels, "num_classes": num_classes}

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        z = self.embed(images)  # [batch, patches, d]
        z = torch.cat([self.cls.expand(z.shape[0], -1, -1), z], 1)
        return z + self.pos

    def forward(self, images: torch.Tensor, n_recur: int | None = None) -> torch.Tensor:
        x = self.encoder(self.tokens(images), n_recur)
        return self.head(self.head_norm(x[:, 0]))


class HyperSETForSudoku(nn.Module):
    """Cell tokens (0 = blank, 1..k digits) -> embedding + learnable positions -> Hyper-SET -> digit logits per
    cell. Input [batch, cells] int64; output [batch, cells, k]. ``input_cond`` is on, as in the official model."""

    def __init__(self, cfg: HyperSETConfig, *, cells: int = 16, digits: int = 4):
        super().__init__()
        cfg = dataclasses.replace(cfg, input_cond=True)
        self.tok = nn.Embedding(digits + 1, cfg.d)
        self.pos = nn.Parameter(torch.randn(1, cells, cfg.d))  # unit scale, like the cell embeddings
        self.encoder = HyperSETEncoder(cfg)
        self.head_norm = nn.LayerNorm(cfg.d)
        self.head = nn.Linear(cfg.d, digits)
        self.meta = {"cells": cells, "digits": digits}

    def forward(self, grid: torch.Tensor, n_recur: int | None = None) -> torch.Tensor:
        if grid.ndim != 2 or grid.shape[1] != self.pos.shape[1] or grid.dtype != torch.int64:
            raise UserError(f"Sudoku input must be int64 [batch, {self.pos.shape[1]}]; got {grid.dtype} "
                            f"{tuple(grid.shape)}")  # fmt: skip
        x = self.encoder(self.tok(grid) + self.pos, n_recur)
        return self.head(self.head_norm(x))


def save_hyper_set(model: nn.Module, folder: str | Path) -> Path:
    """Weights as ``model.safetensors`` + ``cfg.json`` (encoder config, head metadata, class name)."""
    cfg = {"class": type(model).__name__, "meta": getattr(model, "meta", {})}
    enc = model if isinstance(model, HyperSETEncoder) else model.encoder
    cfg["encoder"] = dataclasses.asdict(enc.cfg)
    return save_module(model, folder, cfg)


def load_hyper_set(folder: str | Path) -> nn.Module:
    """Inverse of :func:`save_hyper_set`."""
    raw = load_cfg(folder)
    classes = {c.__name__: c for c in (HyperSETEncoder, HyperSETForImageClassification, HyperSETForSudoku)}
    if raw.get("class") not in classes:
        raise UserError(f"{folder}: cfg.json names class {raw.get('class')!r}; allowed: {', '.join(classes)}")
    cfg = HyperSETConfig(**raw["encoder"])
    cls = classes[raw["class"]]
    model = cls(cfg) if cls is HyperSETEncoder else cls(cfg, **raw.get("meta", {}))
    return load_module_state(model, Path(folder) / "model.safetensors")
