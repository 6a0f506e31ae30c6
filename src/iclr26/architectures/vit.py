"""Small Vision Transformer baselines and the shared token-model pieces (patch embedding, sinusoidal
positions, a seeded Adam trainer with warm-up + cosine schedule).

``ViTEncoder`` is a stack of pre-LayerNorm blocks (multi-head self-attention + GELU MLP). With
``looped=True`` one block is applied ``n_recur`` times with plain residuals (the "naively looped ViT"
that Hyper-SET is compared against); the depth is then chosen at call time.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError
from iclr26.core.seed import make_generator

log = logging.getLogger(__name__)

__all__ = [
    "PatchEmbed",
    "sinusoidal_positions",
    "ViTConfig",
    "ViTEncoder",
    "ViTForImageClassification",
    "TransformerForSudoku",
    "fit",
    "predict",
    "n_params",
]


def sinusoidal_positions(n: int, d: int) -> torch.Tensor:
    """Fixed sin/cos position table [1, n, d] (d even)."""
    if d % 2:
        raise UserError(f"sinusoidal positions need an even width; got d={d}")
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    out = torch.zeros(n, d)
    out[:, 0::2], out[:, 1::2] = torch.sin(pos * freqs), torch.cos(pos * freqs)
    return out[None]


class PatchEmbed(nn.Module):
    """Non-overlapping ``patch x patch`` patches -> LayerNorm -> Linear -> LayerNorm; images [B, H, W] or [B, C, H, W]."""

    def __init__(self, image_size: int, patch: int, channels: int, d: int):
        super().__init__()
        if patch < 1 or image_size % patch:
            raise UserError(f"patch={patch} must divide image_size={image_size}")
        self.image_size, self.patch, self.channels = image_size, patch, channels
        self.n_patches = (image_size // patch) ** 2
        p = channels * patch * patch
        self.net = nn.Sequential(nn.LayerNorm(p), nn.Linear(p, d), nn.LayerNorm(d))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.ndim == 3:
            images = images[:, None]
        if images.ndim != 4 or tuple(images.shape[1:]) != (self.channels, self.image_size, self.image_size):
            raise UserError(f"expected images [batch, {self.channels}, {self.image_size}, {self.image_size}] "
                            f"(or [batch, H, W] for one channel); got {tuple(images.shape)}")  # fmt: skip
        p = self.patch
        x = F.unfold(images, kernel_size=p, stride=p)  # [batch, C*p*p, patches]
        return self.net(x.transpose(1, 2))  # [batch, patches, d]


@dataclass
class ViTConfig:
    d: int = 48
    heads: int = 4
    mlp_hidden: int = 96
    depth: int = 4  # unshared blocks; with looped=True, the default number of loops of the one block
    looped: bool = False

    def validate(self) -> ViTConfig:
        if self.d < 1 or self.heads < 1 or self.d % self.heads:
            raise UserError(f"d={self.d} must be a positive multiple of heads={self.heads}")
        if self.depth < 1 or self.mlp_hidden < 1:
            raise UserError(f"depth={self.depth} and mlp_hidden={self.mlp_hidden} must be >= 1")
        return self


class _Block(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.n1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.n2(x))


class ViTEncoder(nn.Module):
    """``depth`` unshared pre-LN blocks, or one block looped ``n_recur`` times (``looped=True``)."""

    def __init__(self, cfg: ViTConfig | None = None, **kw):
        super().__init__()
        self.cfg = dataclasses.replace(cfg or ViTConfig(), **kw).validate()
        c = self.cfg
        self.blocks = nn.ModuleList(_Block(c.d, c.heads, c.mlp_hidden) for _ in range(1 if c.looped else c.depth))

    def forward(self, x: torch.Tensor, n_recur: int | None = None) -> torch.Tensor:
        if x.ndim != 3 or x.shape[-1] != self.cfg.d:
            raise UserError(f"ViT expects tokens [batch, tokens, {self.cfg.d}]; got {tuple(x.shape)}")
        if not self.cfg.looped:
            if n_recur not in (None, self.cfg.depth):
                raise UserError(f"an unshared ViT has a fixed depth {self.cfg.depth}; n_recur={n_recur}")
            for b in self.blocks:
                x = b(x)
            return x
        for _ in range(self.cfg.depth if n_recur is None else int(n_recur)):
            x = self.blocks[0](x)
        return x


class ViTForImageClassification(nn.Module):
    """The same patch embedding, CLS token, fixed positions and CLS readout as Hyper-SET's image model."""

    def __init__(self, cfg: ViTConfig, *, image_size: int = 28, patch: int = 7, channels: int = 1,
                 num_classes: int = 10):  # fmt: skip
        super().__init__()
        self.embed = PatchEmbed(image_size, patch, channels, cfg.d)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.d))
        self.register_buffer("pos", sinusoidal_positions(self.embed.n_patches + 1, cfg.d), persistent=False)
        self.encoder = ViTEncoder(cfg)
        self.head_norm = nn.LayerNorm(cfg.d)
        self.head = nn.Linear(cfg.d, num_classes)

    def forward(self, images: torch.Tensor, n_recur: int | None = None) -> torch.Tensor:
        z = self.embed(images)
        z = torch.cat([self.cls.expand(z.shape[0], -1, -1), z], 1) + self.pos
        return self.head(self.head_norm(self.encoder(z, n_recur)[:, 0]))


class TransformerForSudoku(nn.Module):
    """Cell tokens -> embedding + learnable positions -> ViT encoder -> digit logits per cell."""

    def __init__(self, cfg: ViTConfig, *, cells: int = 16, digits: int = 4):
        super().__init__()
        self.tok = nn.Embedding(digits + 1, cfg.d)
        self.pos = nn.Parameter(torch.randn(1, cells, cfg.d))  # unit scale, like the cell embeddings
        self.encoder = ViTEncoder(cfg)
        self.head_norm = nn.LayerNorm(cfg.d)
        self.head = nn.Linear(cfg.d, digits)

    def forward(self, grid: torch.Tensor, n_recur: int | None = None) -> torch.Tensor:
        if grid.ndim != 2 or grid.shape[1] != self.pos.shape[1] or grid.dtype != torch.int64:
            raise UserError(f"Sudoku input must be int64 [batch, {self.pos.shape[1]}]; got {grid.dtype} "
                            f"{tuple(grid.shape)}")  # fmt: skip
        return self.head(self.head_norm(self.encoder(self.tok(grid) + self.pos, n_recur)))


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _loss(logits: torch.Tensor, y: torch.Tensor, smoothing: float) -> torch.Tensor:
    # per-token outputs [batch, cells, k] with targets [batch, cells] (-100 = not scored) or [batch, k] / [batch]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100,
                           label_smoothing=smoothing)  # fmt: skip


def fit(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, epochs: int, lr: float = 1e-3,
        batch_size: int = 128, warmup_epochs: float = 1.0, min_lr: float = 1e-5, weight_decay: float = 5e-5,
        label_smoothing: float = 0.1, seed: int = 0, grad_clip: float = 1.0) -> list[float]:  # fmt: skip
    """Adam with coupled L2 ``weight_decay``, linear warm-up then cosine to ``min_lr`` (per step), seeded
    shuffling; targets -100 are ignored. Returns the mean training loss per epoch."""
    if len(X) != len(y) or len(X) == 0:
        raise UserError(f"X and y must be non-empty and of equal length; got {len(X)} and {len(y)}")
    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise UserError(f"epochs={epochs}, batch_size={batch_size} must be >= 1 and lr={lr} > 0")
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)
    steps_per = math.ceil(len(X) / batch_size)
    total, warm = epochs * steps_per, max(1, int(warmup_epochs * steps_per))

    def lr_at(s: int) -> float:
        if s < warm:
            return lr * (s + 1) / warm
        p = (s - warm) / max(1, total - warm)
        return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * p))

    g = make_generator(seed)
    model.train()
    hist, step = [], 0
    for _ in range(epochs):
        perm, tot = torch.randperm(len(X), generator=g), 0.0
        for i in range(0, len(X), batch_size):
            idx = perm[i : i + batch_size]
            for grp in opt.param_groups:
                grp["lr"] = lr_at(step)
            loss = _loss(model(X[idx]), y[idx], label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip:
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            opt.step()
            tot += float(loss.detach()) * len(idx)
            step += 1
        hist.append(tot / len(X))
    model.eval()
    return hist


@torch.no_grad()
def predict(model: nn.Module, X: torch.Tensor, *, batch_size: int = 1000, **kw) -> torch.Tensor:
    """Argmax predictions (keyword arguments such as ``n_recur`` go to the model)."""
    model.eval()
    return torch.cat([model(X[i : i + batch_size], **kw).argmax(-1) for i in range(0, len(X), batch_size)])
