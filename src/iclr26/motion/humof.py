"""HUMOF: Human Motion Forecasting in Interactive Social Scenes (ICLR 2026, arXiv 2506.03753).

The target's past (H frames of J joints, root absolute and the other joints root-relative) is padded to
H + T frames with its last frame and turned into one DCT token per joint. An ego GCN encodes the tokens;
a stack of pre-LN layers (self-attention -> cross-attention -> FFN) then reasons over interaction
context organised as a hierarchy: early layers attend to coarse tokens (one per box from a pooled
point-cloud encoder with contact features; one per other person from joint-distance kernels and the
person's trajectory), later layers to fine tokens (sub-box point groups; the other people's per-joint
tokens). Each layer scales its residual branches per DCT coefficient (initialised as a low-pass filter,
trainable from mid-training) and gates them with an SE-style rescaler. An output GCN plus a residual
from the ego tokens gives the DCT of the forecast.

``HumofModel(cfg)`` with ``cfg.mode``: ``"humof"`` (coarse-to-fine), ``"flat"`` (coarse and fine tokens
together at every layer), ``"ego"`` (GCNs only, no context). ``cfg.freq=False`` drops the DCT scaling and
the SE gates. Deviations from the official code (PointNet++/PVCNN set abstraction replaced by per-box and
per-face pooling; the canonical frame) are listed in docs/humof.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.motion.dct import dct_matrix, joint_tokens, tokens_to_seq

MODES = ("humof", "flat", "ego")


@dataclass
class HumofConfig:
    joints: int = 15
    past: int = 10
    future: int = 20
    dct_n: int = 10
    contact_dct: int = 5
    contact_sigma: float = 0.15  # metres; the official 0.02 is too tight for sparse boxes (spec deviation)
    hhi_sigma: float = 0.5
    gcn_hidden: int = 64
    gcn_stages: int = 2
    coarse_dim: int = 128
    fine_dim: int = 64
    heads: int = 3
    ffn_mult: int = 4
    coarse_layers: int = 2
    fine_layers: int = 2
    se_hidden: int = 8
    dropout: float = 0.1
    mode: str = "humof"
    freq: bool = True
    flat_ffn: int | None = None  # FFN width of the flat arm (matched to the hierarchical parameter count)
    # low-pass initial scales per layer: ((last coef at 1, last at w1, w1), (..., w2)); beyond: all 1
    lowpass: tuple = (((3, 6), (0.7, 0.3)), ((4, 7), (0.7, 0.5)))

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"HumofConfig.mode={self.mode!r}; allowed: {', '.join(MODES)}")
        if self.dct_n > self.past + self.future or self.dct_n < 1:
            raise UserError(f"dct_n must be in [1, past + future = {self.past + self.future}], got {self.dct_n}")
        if (3 * self.dct_n) % self.heads:
            raise UserError(f"token width 3 * dct_n = {3 * self.dct_n} must be divisible by heads={self.heads}")

    @property
    def n(self) -> int:
        return self.past + self.future

    @property
    def token(self) -> int:
        return 3 * self.dct_n


# ---------------------------------------------------------------------------------------------- blocks
class GraphConv(nn.Module):
    """LTD-style graph convolution: a learnable J x J adjacency mixing joints, a linear map of features."""

    def __init__(self, joints: int, d_in: int, d_out: int):
        super().__init__()
        self.adj = nn.Parameter(torch.eye(joints) + 0.01 * torch.randn(joints, joints))
        self.lin = nn.Linear(d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, J, d_in] -> [B, J, d_out]
        return self.lin(torch.einsum("ij,bjd->bid", self.adj, x))


class GCN(nn.Module):
    """token -> hidden -> (stages residual blocks) -> token, with tanh and dropout."""

    def __init__(self, joints: int, d: int, hidden: int, stages: int, dropout: float):
        super().__init__()
        self.inp = GraphConv(joints, d, hidden)
        self.blocks = nn.ModuleList(GraphConv(joints, hidden, hidden) for _ in range(stages))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(stages))
        self.out = GraphConv(joints, hidden, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.inp(x))
        for blk, ln in zip(self.blocks, self.norms, strict=True):
            h = h + self.drop(torch.tanh(ln(blk(h))))
        return self.out(h)


class SEGate(nn.Module):
    """Squeeze-excitation over channels: mean over tokens -> d->h->d -> sigmoid gate."""

    def __init__(self, d: int, h: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.net(x.mean(1, keepdim=True)))


def lowpass_scale(dct_n: int, cut: tuple[int, int], w: tuple[float, float]) -> torch.Tensor:
    """``[3 * dct_n]`` per-coefficient scales: 1 up to ``cut[0]``, ``w[0]`` up to ``cut[1]``, then ``w[1]``
    (the same for the x, y and z blocks of a token)."""
    k = torch.arange(dct_n)
    s = torch.where(k <= cut[0], 1.0, torch.where(k <= cut[1], w[0], w[1]))
    return s.repeat(3)


class Attention(nn.Module):
    """Multi-head attention of ``x`` over ``ctx`` (key width ``ctx_dim``) through
    ``scaled_dot_product_attention``; ``pad`` [B, Nk] marks keys to ignore (a row with every key padded
    attends to nothing and returns zeros)."""

    def __init__(self, d: int, ctx_dim: int, heads: int, dropout: float):
        super().__init__()
        self.h, self.dropout = heads, dropout
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(ctx_dim, 2 * d)
        self.o = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        B, Nq, d = x.shape
        q = self.q(x).view(B, Nq, self.h, -1).transpose(1, 2)
        k, v = self.kv(ctx).view(B, ctx.shape[1], 2, self.h, -1).permute(2, 0, 3, 1, 4)
        mask = None
        if pad is not None:
            mask = ~pad[:, None, None, :]  # True = attend
            mask = mask | pad.all(1)[:, None, None, None]  # all padded: attend uniformly, zeroed below
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                       dropout_p=self.dropout if self.training else 0.0)
        y = self.o(y.transpose(1, 2).reshape(B, Nq, d))
        if pad is not None:
            y = y.masked_fill(pad.all(1)[:, None, None], 0.0)
        return y


class ReasonLayer(nn.Module):
    """Pre-LN self-attention -> cross-attention -> FFN over the J ego tokens, each branch scaled per DCT
    coefficient and SE-gated when ``freq``."""

    def __init__(self, d: int, ctx_dim: int, heads: int, ffn: int, dropout: float, freq: bool,
                 scale: torch.Tensor, se_hidden: int):
        super().__init__()
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.sa = Attention(d, d, heads, dropout)
        self.ca = Attention(d, ctx_dim, heads, dropout)
        self.ctx_ln = nn.LayerNorm(ctx_dim)
        self.ffn = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Dropout(dropout), nn.Linear(ffn, d))
        self.freq = freq
        if freq:
            self.scale = nn.Parameter(scale.clone(), requires_grad=False)  # trainable from mid-training
            self.se = nn.ModuleList(SEGate(d, se_hidden) for _ in range(3))

    def _branch(self, i: int, y: torch.Tensor) -> torch.Tensor:
        return self.se[i](y) * self.scale if self.freq else y

    def forward(self, x: torch.Tensor, ctx: torch.Tensor, ctx_pad: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self._branch(0, self.sa(h, h))
        x = x + self._branch(1, self.ca(self.ln2(x), self.ctx_ln(ctx), ctx_pad))
        x = x + self._branch(2, self.ffn(self.ln3(x)))
        return x


def _mlp(d_in: int, d_hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.GELU(), nn.Linear(d_hidden, d_out))


# ---------------------------------------------------------------------------------------------- context
def pad_past(ego: torch.Tensor, future: int) -> torch.Tensor:
    """``[B, H, J, 3]`` -> ``[B, H + T, J, 3]`` by repeating the last past frame."""
    return torch.cat([ego, ego[:, -1:].expand(-1, future, -1, -1)], 1)


def to_root_relative(seq: torch.Tensor) -> torch.Tensor:
    """Absolute joints -> root absolute + the other joints relative to the root (the model's layout)."""
    out = seq.clone()
    out[..., 1:, :] = seq[..., 1:, :] - seq[..., :1, :]
    return out


def from_root_relative(seq: torch.Tensor) -> torch.Tensor:
    out = seq.clone()
    out[..., 1:, :] = seq[..., 1:, :] + seq[..., :1, :]
    return out


def padded_dct(x_past: torch.Tensor, n: int, n_keep: int, dim: int = 1) -> torch.Tensor:
    """DCT over ``n`` frames of a series whose frames after the ``H`` given ones repeat the last one,
    computed from the ``H`` frames alone (the padded frames fold into the last column of the DCT)."""
    H = x_past.shape[dim]
    Dm = dct_matrix(n, n_keep, x_past.dtype).to(x_past.device)
    M = Dm[:, :H].clone()
    M[:, -1] += Dm[:, H:].sum(1)
    return torch.movedim(torch.tensordot(M, torch.movedim(x_past, dim, 0), dims=1), 0, dim)


def contact_features(ego_past: torch.Tensor, points: torch.Tensor, sigma: float, n_keep: int, n: int) -> torch.Tensor:
    """``exp(-|s - p_j(t)|^2 / 2 sigma^2)`` per point s, joint j and frame t of the past (padded to ``n`` frames
    with the last one), DCT over time: ``[B, H, J, 3]`` x ``[B, S, 3]`` -> ``[B, S, J * n_keep]``."""
    d2 = torch.cdist(points[:, None].expand(-1, ego_past.shape[1], -1, -1).reshape(-1, points.shape[1], 3),
                     ego_past.reshape(-1, ego_past.shape[2], 3)).pow(2)  # [B*H, S, J]
    c = torch.exp(-d2 / (2 * sigma**2)).view(ego_past.shape[0], ego_past.shape[1], points.shape[1], -1)
    cd = padded_dct(c, n, n_keep, dim=1)  # [B, K, S, J]
    return cd.permute(0, 2, 3, 1).reshape(points.shape[0], points.shape[1], -1)


def min_dist_kernel(a: torch.Tensor, b: torch.Tensor, sigma: float, n_keep: int, n: int) -> torch.Tensor:
    """Per joint of ``a`` the distance to the nearest joint of ``b`` at each past frame, Gaussian kernel, DCT
    over the padded ``n`` frames: ``[B, H, J, 3]`` x ``[B, H, J, 3]`` -> ``[B, J, n_keep]``."""
    d = torch.cdist(a, b).amin(-1)  # [B, H, J]
    return padded_dct(torch.exp(-d**2 / (2 * sigma**2)), n, n_keep, dim=1).transpose(1, 2)


class HumofModel(nn.Module):
    """Forecast ``[B, T, J, 3]`` (canonical, absolute) from a batch dict of tensors (see :meth:`forward`)."""

    def __init__(self, cfg: HumofConfig):
        super().__init__()
        self.cfg = cfg
        J, d = cfg.joints, cfg.token
        self.ego_gcn = GCN(J, d, cfg.gcn_hidden, cfg.gcn_stages, cfg.dropout)
        self.out_gcn = GCN(J, d, cfg.gcn_hidden, cfg.gcn_stages, cfg.dropout)
        self.pos = nn.Parameter(torch.zeros(1, J, d))
        if cfg.mode == "ego":
            self.layers = nn.ModuleList()
            return
        K = cfg.contact_dct
        # human-scene: per point [canonical xyz | contact DCT per joint]
        self.point_mlp = _mlp(3 + J * K, 64, 64)
        self.box_coarse = _mlp(64 + 6, 128, cfg.coarse_dim)
        self.group_fine = _mlp(64 + 3, 64, cfg.fine_dim)
        # human-human: per other person [primary->other and other->primary kernels | other's root DCT tokens]
        self.person_coarse = _mlp(2 * J * K + d, 128, cfg.coarse_dim)
        self.joint_fine = _mlp(d + K, 64, cfg.fine_dim)
        self.type_coarse = nn.Parameter(torch.zeros(2, cfg.coarse_dim))
        self.type_fine = nn.Parameter(torch.zeros(2, cfg.fine_dim))
        n_layers = cfg.coarse_layers + cfg.fine_layers
        scales = [lowpass_scale(cfg.dct_n, *cfg.lowpass[i]) if i < len(cfg.lowpass) else torch.ones(d)
                  for i in range(n_layers)]
        if cfg.mode == "humof":
            dims = [cfg.coarse_dim] * cfg.coarse_layers + [cfg.fine_dim] * cfg.fine_layers
            ffn = d * cfg.ffn_mult
            self.layers = nn.ModuleList(ReasonLayer(d, cd, cfg.heads, ffn, cfg.dropout, cfg.freq, s, cfg.se_hidden)
                                        for cd, s in zip(dims, scales, strict=True))
        else:  # flat: every layer sees all coarse and fine tokens, projected to one width
            self.flat_dim = cfg.fine_dim
            self.coarse_to_flat = nn.Linear(cfg.coarse_dim, self.flat_dim)
            ffn = cfg.flat_ffn or d * cfg.ffn_mult
            self.layers = nn.ModuleList(ReasonLayer(d, self.flat_dim, cfg.heads, ffn, cfg.dropout, cfg.freq, s,
                                                    cfg.se_hidden) for s in scales)

    # ------------------------------------------------------------------ context tokens
    def context(self, ego_past: torch.Tensor, batch: dict[str, torch.Tensor]):
        """(coarse [B, Nc, coarse_dim], coarse pad mask, fine [B, Nf, fine_dim], fine pad mask)."""
        cfg = self.cfg
        B, H, J, _ = ego_past.shape
        K = cfg.contact_dct
        pts, boxes, bmask = batch["points"], batch["boxes"], batch["boxes_mask"]  # [B, nb, P, 3], [B, nb, 6]
        nb, P = pts.shape[1], pts.shape[2]
        if P % 4:
            raise UserError(f"points per box must be a multiple of 4 (four azimuth groups), got {P}")
        flat = pts.reshape(B, nb * P, 3)
        contact = batch.get("contact")  # data-only and rotation-invariant: callers may precompute it
        if contact is None:
            contact = contact_features(ego_past, flat, cfg.contact_sigma, K, cfg.n)
        feat = self.point_mlp(torch.cat([flat, contact], -1))
        feat = feat.view(B, nb, 4, P // 4, -1)  # each box's points are sorted by azimuth: 4 contiguous groups
        group_feat = feat.amax(3)  # [B, nb, 4, 64]
        box_feat = group_feat.amax(2)  # [B, nb, 64]
        coarse_box = self.box_coarse(torch.cat([box_feat, boxes], -1)) + self.type_coarse[0]
        gcent = pts.view(B, nb, 4, P // 4, 3).mean(3)
        fine_scene = (self.group_fine(torch.cat([group_feat, gcent], -1)) + self.type_fine[0]).reshape(B, nb * 4, -1)
        gvalid = bmask.repeat_interleave(4, 1)
        # human-human
        oth, omask = batch["others"], batch["others_mask"]  # [B, Po, H, J, 3], [B, Po]
        Po = oth.shape[1]
        oth_past = oth.reshape(B * Po, H, J, 3)
        ego_rep = ego_past.repeat_interleave(Po, 0)
        k1 = min_dist_kernel(ego_rep, oth_past, cfg.hhi_sigma, K, cfg.n)  # [BPo, J, K]
        k2 = min_dist_kernel(oth_past, ego_rep, cfg.hhi_sigma, K, cfg.n)
        otok = joint_tokens(to_root_relative(pad_past(oth_past, cfg.future)), cfg.dct_n)  # [BPo, J, d]
        person = torch.cat([k1.flatten(1), k2.flatten(1), otok[:, 0]], -1)
        coarse_p = self.person_coarse(person).view(B, Po, -1) + self.type_coarse[1]
        fine_j = self.joint_fine(torch.cat([otok, k2], -1)).view(B, Po * J, -1) + self.type_fine[1]
        coarse = torch.cat([coarse_box, coarse_p], 1)
        coarse_pad = ~torch.cat([bmask, omask], 1)
        fine = torch.cat([fine_scene, fine_j], 1)
        fine_pad = ~torch.cat([gvalid, omask.repeat_interleave(J, 1)], 1)
        return coarse, coarse_pad, fine, fine_pad

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """batch: ``ego [B, H, J, 3]`` (canonical, absolute), ``others [B, Po, H, J, 3]``, ``others_mask``,
        ``points [B, nb, P, 3]`` (each box's surface points sorted by azimuth), ``boxes [B, nb, 6]``, ``boxes_mask``.
        Returns the forecast ``[B, T, J, 3]`` in the same frame."""
        cfg = self.cfg
        ego = batch["ego"]
        if ego.dim() != 4 or ego.shape[1] != cfg.past or ego.shape[2] != cfg.joints or ego.shape[3] != 3:
            raise UserError(f"ego must be [batch, past={cfg.past}, joints={cfg.joints}, 3], got {tuple(ego.shape)}")
        ego_abs = pad_past(ego, cfg.future)
        tok = joint_tokens(to_root_relative(ego_abs), cfg.dct_n)  # [B, J, d]
        h = tok + self.ego_gcn(tok) + self.pos
        if cfg.mode != "ego":
            coarse, cpad, fine, fpad = self.context(ego, batch)
            if cfg.mode == "humof":
                for i, layer in enumerate(self.layers):
                    h = layer(h, coarse, cpad) if i < cfg.coarse_layers else layer(h, fine, fpad)
            else:
                allc = torch.cat([self.coarse_to_flat(coarse), fine], 1)
                apad = torch.cat([cpad, fpad], 1)
                for layer in self.layers:
                    h = layer(h, allc, apad)
        out = h + self.out_gcn(h)
        seq = from_root_relative(tokens_to_seq(out, cfg.n))  # [B, N, J, 3]
        return seq[:, cfg.past:]

    def freq_parameters(self) -> list[nn.Parameter]:
        return [layer.scale for layer in self.layers if getattr(layer, "freq", False)]


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def matched_flat_config(cfg: HumofConfig) -> HumofConfig:
    """The flat arm's config with its FFN width chosen so its parameter count is closest to ``cfg``'s.

    The count is affine in the FFN width, so two probes give the exact solution."""
    target = count_parameters(HumofModel(cfg))

    def flat(ffn: int) -> HumofConfig:
        return HumofConfig(**{**asdict(cfg), "mode": "flat", "flat_ffn": ffn})

    a, b = count_parameters(HumofModel(flat(8))), count_parameters(HumofModel(flat(9)))
    ffn = max(1, round(8 + (target - a) / (b - a)))
    return flat(ffn)


# ---------------------------------------------------------------------------------------------- training
@dataclass
class TrainLog:
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def loss_fn(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared root-relative joint error + mean squared root error (metres^2)."""
    pr, tr = to_root_relative(pred), to_root_relative(target)
    pose = ((pr[..., 1:, :] - tr[..., 1:, :]) ** 2).sum(-1).mean()
    root = ((pr[..., 0, :] - tr[..., 0, :]) ** 2).sum(-1).mean()
    return pose + root


def rotate_batch(batch: dict[str, torch.Tensor], angle: torch.Tensor) -> dict[str, torch.Tensor]:
    """Rotate every geometric entry of a batch about z by ``angle`` [B] (augmentation: the model is not
    yaw-invariant)."""
    c, s = torch.cos(angle), torch.sin(angle)

    def rot(x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = x.reshape(shape[0], -1, shape[-1]).clone()
        cc, ss = c[:, None], s[:, None]
        x0, x1 = y[..., 0].clone(), y[..., 1].clone()
        y[..., 0], y[..., 1] = cc * x0 - ss * x1, ss * x0 + cc * x1
        return y.reshape(shape)

    out = dict(batch)
    for k in ("ego", "future", "others", "points"):
        out[k] = rot(batch[k])
    bx = batch["boxes"].clone()
    bx[..., :2] = rot(batch["boxes"][..., :2])
    bx[..., 5] = bx[..., 5] + angle[:, None]
    out["boxes"] = bx
    return out


def fit(model: HumofModel, data: dict[str, torch.Tensor], *, steps: int, batch: int = 64, lr: float = 1e-3,
        seed: int = 0, augment_rotation: float = 0.3, freq_from: float = 0.5, desc: str = "humof") -> TrainLog:
    """Adam with linear decay; the DCT scales join training at ``freq_from`` of the steps (they sit in the
    optimizer from the start with ``requires_grad=False``, so no other state is reset)."""
    from iclr26.core.progress import progress

    if steps < 1 or batch < 1 or not lr > 0:
        raise UserError(f"fit: need steps >= 1, batch >= 1, lr > 0; got {steps}, {batch}, {lr}")
    n = data["ego"].shape[0]
    if n < 1:
        raise UserError("fit: no training windows")
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / steps)
    log = TrainLog()
    import time

    t0 = time.perf_counter()
    model.train()
    for step in progress(range(steps), desc=desc, total=steps):
        if step == int(freq_from * steps):
            for p in model.freq_parameters():
                p.requires_grad_(True)
        idx = torch.randint(0, n, (batch,), generator=g)
        b = {k: v[idx] for k, v in data.items()}
        if augment_rotation > 0:
            b = rotate_batch(b, (torch.rand(batch, generator=g) * 2 - 1) * augment_rotation * math.pi)
        loss = loss_fn(model(b), b["future"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        log.losses.append(float(loss.detach()))
    model.eval()
    log.seconds = time.perf_counter() - t0
    return log


@torch.no_grad()
def predict(model: HumofModel, data: dict[str, torch.Tensor], batch: int = 512) -> torch.Tensor:
    model.eval()
    n = data["ego"].shape[0]
    return torch.cat([model({k: v[i:i + batch] for k, v in data.items()}) for i in range(0, n, batch)]) if n else \
        torch.zeros(0, model.cfg.future, model.cfg.joints, 3)


@torch.no_grad()
def with_contact(data: dict[str, torch.Tensor], cfg: HumofConfig, chunk: int = 512) -> dict[str, torch.Tensor]:
    """``data`` plus ``contact`` [N, nb * P, J * contact_dct]: the contact kernels depend on the inputs only
    (no parameters) and on distances only (so rotation augmentation leaves them valid); computing them once
    saves a third of a training step."""
    n = data["ego"].shape[0]
    parts = []
    for i in range(0, n, chunk):
        ego, pts = data["ego"][i:i + chunk], data["points"][i:i + chunk]
        parts.append(contact_features(ego, pts.reshape(pts.shape[0], -1, 3), cfg.contact_sigma, cfg.contact_dct, cfg.n))
    return {**data, "contact": torch.cat(parts) if parts else torch.zeros(0)}


def as_tensors(w) -> dict[str, torch.Tensor]:
    """A :class:`iclr26.data.scenes.Windows` as the model's batch dict."""
    keys = ("ego", "future", "others", "others_mask", "points", "boxes", "boxes_mask")
    out = {}
    for k in keys:
        a = getattr(w, k)
        out[k] = torch.from_numpy(np.ascontiguousarray(a)).float() if a.dtype == np.float32 else \
            torch.from_numpy(np.ascontiguousarray(a)).bool() if a.dtype == bool else torch.from_numpy(a).long()
    return out


# ---------------------------------------------------------------------------------------------- baselines
def zero_velocity(ego: np.ndarray, future: int) -> np.ndarray:
    """Repeat the last past frame: ``[N, H, J, 3]`` -> ``[N, T, J, 3]``."""
    return np.repeat(ego[:, -1:], future, axis=1)


def constant_velocity(ego: np.ndarray, future: int) -> np.ndarray:
    """Root continues at its last velocity; the pose (root-relative joints) stays as in the last frame."""
    v = ego[:, -1, 0] - ego[:, -2, 0]  # [N, 3]
    v[:, 2] = 0.0
    k = np.arange(1, future + 1, dtype=ego.dtype)[None, :, None, None]
    return ego[:, -1:] + k * v[:, None, None, :]


# ---------------------------------------------------------------------------------------------- metrics
def path_error(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Root L2 error per window and future frame, millimetres: ``[N, T]``."""
    return 1000.0 * np.linalg.norm(pred[..., 0, :] - target[..., 0, :], axis=-1)


def pose_error(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Root-relative MPJPE per window and future frame (root excluded), millimetres: ``[N, T]``."""
    pr = pred[..., 1:, :] - pred[..., :1, :]
    tr = target[..., 1:, :] - target[..., :1, :]
    return 1000.0 * np.linalg.norm(pr - tr, axis=-1).mean(-1)


def hhi_penetration(pred: np.ndarray, others_future_root: np.ndarray, others_mask: np.ndarray,
                    radius: float = 0.3) -> np.ndarray:
    """Per window: share of predicted frames whose root is within ``radius`` of another person's true root."""
    d = np.linalg.norm(pred[:, None, :, 0, :2] - others_future_root, axis=-1)  # [N, P, T]
    close = (d < radius) & others_mask[:, :, None]
    return close.any(1).mean(-1)
