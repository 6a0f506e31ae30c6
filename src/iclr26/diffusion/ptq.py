"""Beyond Uniformity: Sample and Frequency Meta Weighting for Post-Training Quantization of Diffusion Models
(ICLR 2026, OpenReview FdDOD3qwS7) — **reconstruction of P18**, not the authors' algorithm.

Only the paper's abstract was available: everything below is our reading, assembled from Q-Diffusion, BRECQ,
AdaRound, LSQ and MW-Net practice (docs/ptq-meta-weighting.md lists what must be checked against the paper).

- :func:`quantize_model` wraps every ``nn.Conv2d`` / ``nn.Linear`` of any ``nn.Module`` (e.g. a diffusers UNet)
  in a :class:`QuantLayer`: per-output-channel symmetric weights with AdaRound's learnable rounding
  ``W_q = s * clip(floor(W / s) + h(V), -2^(b-1), 2^(b-1) - 1)`` and a per-tensor asymmetric input quantizer
  with an LSQ learnable step. This is **fake quantization**: integer arithmetic is simulated in float, so it
  measures accuracy, not speed or memory.
- :func:`collect_calibration` records ``(x_t, t, eps_fp(x_t, t))`` along full-precision DDIM trajectories.
- :func:`reconstruct` learns the rounding and the steps so that ``eps_q`` mimics ``eps_fp`` under a per-sample,
  per-frequency-band weighted loss: ``l_i = (1/N_pix) sum_k beta_{g(t_i),k} sum_{(u,v) in band k} |DCT2(e_i)|^2``,
  with sample weights ``w = N softmax(a)`` and band weights ``beta_g = K softmax(b_g)``; ``a`` and ``b`` are
  meta-learned by a one-step look-ahead on a held-out validation set (MW-Net style bi-level step).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr26.core.errors import UserError

log = logging.getLogger(__name__)

ZETA, GAMMA = 1.1, -0.1  # AdaRound's stretch of the rectified sigmoid


# ---------------------------------------------------------------------------- straight-through helpers
def round_ste(x: Tensor) -> Tensor:
    """Round in the forward pass, identity gradient in the backward pass."""
    return (x.round() - x).detach() + x


def grad_scale(x: Tensor, g: float) -> Tensor:
    """Value ``x``, gradient multiplied by ``g`` (LSQ's step-size gradient scale)."""
    return (x - x * g).detach() + x * g


# ---------------------------------------------------------------------------- quantizers
class AdaRoundWeight(nn.Module):
    """Per-output-channel symmetric ``bits``-bit weights with a learnable rounding variable ``V``.

    ``mode``: ``"soft"`` (h(V) in [0, 1], used while learning), ``"hard"`` (h >= 1/2 -> 1, used at evaluation)
    or ``"nearest"`` (round to nearest, the RTN baseline). The step ``s`` per channel is the clipping ratio of
    ``max |W|`` (searched on a grid) with the smallest squared rounding error, and then stays fixed.
    """

    def __init__(self, weight: Tensor, bits: int):
        super().__init__()
        if not 2 <= bits <= 16:
            raise UserError(f"weight bits must be in 2..16, got {bits}")
        self.bits = bits
        self.qmin, self.qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        w = weight.detach()
        self.register_buffer("scale", self._search_scale(w))  # [out, 1, ...]
        frac = w / self.scale - torch.floor(w / self.scale)
        # V such that h(V) = frac(W / s): sigma(V) = (frac - gamma) / (zeta - gamma)
        p = ((frac - GAMMA) / (ZETA - GAMMA)).clamp(1e-4, 1 - 1e-4)
        self.V = nn.Parameter(torch.log(p / (1 - p)))
        self.mode = "soft"

    def _search_scale(self, w: Tensor) -> Tensor:
        flat = w.reshape(w.shape[0], -1)
        amax = flat.abs().amax(1).clamp_min(1e-8)  # [out]
        best_err = torch.full_like(amax, float("inf"))
        best = amax / self.qmax
        for ratio in torch.linspace(0.5, 1.0, 11).tolist():
            s = (amax * ratio / self.qmax)[:, None]
            err = ((torch.clamp(torch.round(flat / s), self.qmin, self.qmax) * s - flat) ** 2).sum(1)
            better = err < best_err
            best_err = torch.where(better, err, best_err)
            best = torch.where(better, s[:, 0], best)
        return best.reshape(-1, *([1] * (w.dim() - 1)))

    def h(self) -> Tensor:
        return torch.clamp(torch.sigmoid(self.V) * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)

    def forward(self, w: Tensor) -> Tensor:
        if self.mode == "nearest":
            q = torch.round(w / self.scale)
        elif self.mode == "hard":
            q = torch.floor(w / self.scale) + (self.V >= 0).to(w.dtype)  # h(V) >= 1/2  <=>  V >= 0
        else:
            q = torch.floor(w / self.scale) + self.h()
        return torch.clamp(q, self.qmin, self.qmax) * self.scale

    def regularizer(self, beta: float) -> Tensor:
        """Mean over weights of ``1 - |2 h(V) - 1|^beta`` (0 once every h is 0 or 1)."""
        return (1 - (2 * self.h() - 1).abs().pow(beta)).mean()


class LSQActivation(nn.Module):
    """Per-tensor asymmetric ``bits``-bit fake quantizer with a learnable step (LSQ gradient).

    ``x_q = s * (clamp(round(x / s) + z, 0, 2^b - 1) - z)``; the step ``s`` gets the gradient scale
    ``1 / sqrt(N * Q_P)`` with N the elements per sample and ``Q_P = 2^b - 1``. The integer zero point ``z`` is
    fixed at calibration (from the 0.01 / 99.99 percentiles, via :meth:`init_range`). Until then, and whenever
    ``enabled`` is False, the quantizer is the identity.
    """

    def __init__(self, bits: int):
        super().__init__()
        if not 2 <= bits <= 16:
            raise UserError(f"activation bits must be in 2..16, got {bits}")
        self.bits = bits
        self.qp = 2**bits - 1
        self.step = nn.Parameter(torch.tensor(1.0))
        self.register_buffer("zero_point", torch.tensor(0.0))
        self.register_buffer("initialized", torch.tensor(False))
        self.enabled = True
        self.observe: list[Tensor] | None = None  # set by calibrate_activations

    @torch.no_grad()
    def init_range(self, lo: float, hi: float) -> None:
        lo, hi = min(lo, 0.0), max(hi, 0.0)  # zero stays exactly representable
        s = max(hi - lo, 1e-8) / self.qp
        self.step.fill_(s)
        self.zero_point.fill_(round(-lo / s))
        self.initialized.fill_(True)

    def forward(self, x: Tensor) -> Tensor:
        if self.observe is not None:
            flat = x.detach().reshape(-1)
            if flat.numel() > 20000:  # a strided subsample keeps the percentile cheap
                flat = flat[:: flat.numel() // 20000 + 1]
            self.observe.append(flat)
        if not self.enabled or not bool(self.initialized):
            return x
        fused = not (torch.is_grad_enabled() and self.step.requires_grad) and math.isfinite(float(self.step))
        if fused:  # evaluation: one fused kernel
            return torch.fake_quantize_per_tensor_affine(x, float(self.step), int(self.zero_point), 0, self.qp)
        g = 1.0 / math.sqrt(x[0].numel() * self.qp)
        s = grad_scale(self.step, g)
        q = torch.clamp(round_ste(x / s) + self.zero_point, 0, self.qp)
        return (q - self.zero_point) * s


class QuantLayer(nn.Module):
    """A ``nn.Conv2d`` or ``nn.Linear`` whose input and weight pass through fake quantizers.

    The float layer is kept (frozen) as ``self.fp``; its weight never changes.
    """

    def __init__(self, layer: nn.Module, w_bits: int, a_bits: int):
        super().__init__()
        if not isinstance(layer, (nn.Conv2d, nn.Linear)):
            raise UserError(f"QuantLayer wraps nn.Conv2d or nn.Linear, got {type(layer).__name__}")
        self.fp = layer
        for p in self.fp.parameters():
            p.requires_grad_(False)
        self.wq = AdaRoundWeight(layer.weight, w_bits)
        self.aq = LSQActivation(a_bits)
        self.w_enabled = True

    def forward(self, x: Tensor) -> Tensor:
        x = self.aq(x)
        w = self.wq(self.fp.weight) if self.w_enabled else self.fp.weight
        if isinstance(self.fp, nn.Linear):
            return F.linear(x, w, self.fp.bias)
        c = self.fp
        if c.padding_mode != "zeros":
            x = F.pad(x, c._reversed_padding_repeated_twice, mode=c.padding_mode)
            return F.conv2d(x, w, c.bias, c.stride, 0, c.dilation, c.groups)
        return F.conv2d(x, w, c.bias, c.stride, c.padding, c.dilation, c.groups)


@dataclass(frozen=True)
class QuantConfig:
    """What :func:`quantize_model` does.

    w_bits / a_bits: weight and activation bits. first_last_bits: bits of the first and last quantizable
    layers (in registration order: a UNet's ``conv_in`` and ``conv_out``); ``None`` treats them like the others.
    keep_fp: name prefixes of layers left in float. Only per-channel weights are implemented.
    """

    w_bits: int = 4
    a_bits: int = 8
    per_channel: bool = True
    first_last_bits: int | None = 8
    keep_fp: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("w_bits", "a_bits"):
            if not 2 <= getattr(self, name) <= 16:
                raise UserError(f"QuantConfig.{name} must be in 2..16, got {getattr(self, name)}")
        if self.first_last_bits is not None and not 2 <= self.first_last_bits <= 16:
            raise UserError(f"QuantConfig.first_last_bits must be None or in 2..16, got {self.first_last_bits}")
        if not self.per_channel:
            raise UserError("QuantConfig.per_channel=False is not implemented; use per-channel weights")


def quantize_model(model: nn.Module, qcfg: QuantConfig | None = None) -> nn.Module:
    """A deep copy of ``model`` with every Conv2d / Linear wrapped in a :class:`QuantLayer` (input unchanged).

    Normalisation layers, attention matmuls (softmax(QK^T)V) and embeddings stay in float. Every parameter of
    the copy is frozen except the rounding variables ``V`` and the activation steps (:func:`quant_parameters`).
    Call :func:`calibrate_activations` before use: uncalibrated activation quantizers are the identity.
    """
    qcfg = qcfg or QuantConfig()
    if not isinstance(model, nn.Module):
        raise UserError(f"quantize_model expects a torch.nn.Module, got {type(model).__name__}")
    q = copy.deepcopy(model)
    for p in q.parameters():
        p.requires_grad_(False)
    names = [n for n, m in q.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))
             and not any(n == k or n.startswith(k + ".") for k in qcfg.keep_fp)]  # fmt: skip
    if not names:
        raise UserError("quantize_model: the model has no nn.Conv2d / nn.Linear layer to quantize")
    edge = {names[0], names[-1]} if qcfg.first_last_bits is not None else set()
    for n in names:
        parent_name, _, child = n.rpartition(".")
        parent = q.get_submodule(parent_name) if parent_name else q
        layer = getattr(parent, child)
        bits_w = qcfg.first_last_bits if n in edge else qcfg.w_bits
        bits_a = max(qcfg.first_last_bits, qcfg.a_bits) if n in edge else qcfg.a_bits
        setattr(parent, child, QuantLayer(layer, bits_w, bits_a))
    return q


def quant_layers(model: nn.Module) -> dict[str, QuantLayer]:
    return {n: m for n, m in model.named_modules() if isinstance(m, QuantLayer)}


def quant_parameters(model: nn.Module) -> tuple[dict[str, nn.Parameter], dict[str, nn.Parameter]]:
    """``({name: V}, {name: activation step})`` of a quantized model, named as in ``named_parameters``."""
    rounding, steps = {}, {}
    for n, p in model.named_parameters():
        if n.endswith(".wq.V"):
            rounding[n] = p
        elif n.endswith(".aq.step"):
            steps[n] = p
    if not rounding:
        raise UserError("the model has no quantized layer; call quantize_model first")
    return rounding, steps


def set_quant_state(model: nn.Module, *, weight: str | None = None, act: bool | None = None) -> nn.Module:
    """Set every weight quantizer's mode (``soft`` / ``hard`` / ``nearest`` / ``fp``) and activation switch."""
    if weight is not None and weight not in ("soft", "hard", "nearest", "fp"):
        raise UserError(f"weight mode must be one of soft, hard, nearest, fp; got {weight!r}")
    for m in quant_layers(model).values():
        if weight is not None:
            m.w_enabled = weight != "fp"
            if weight != "fp":
                m.wq.mode = weight
        if act is not None:
            m.aq.enabled = act
    return model


# ---------------------------------------------------------------------------- the epsilon network call
def eps_call(model: nn.Module, x: Tensor, t: Tensor, **kwargs) -> Tensor:
    """``model(x, t, **kwargs)`` as a tensor (diffusers returns an output object with ``.sample``)."""
    out = model(x, t, **kwargs)
    if hasattr(out, "sample"):
        out = out.sample
    elif isinstance(out, tuple):
        out = out[0]
    return out


@torch.no_grad()
def calibrate_activations(model: nn.Module, x: Tensor, t: Tensor, *, lo_pct: float = 0.01, hi_pct: float = 99.99,
                          batch: int = 256, cond: dict[str, Tensor] | None = None) -> nn.Module:  # fmt: skip
    """Initialise every activation quantizer's range from percentiles of its inputs on ``(x, t)`` (and the
    per-pair conditioning ``cond``, e.g. ``CalibSet.cond``: a conditional model's activations depend on it).

    Weights are quantized (to nearest) while the inputs are observed, layer by layer in forward order is not
    needed at this size: one pass with all activation quantizers off, as Q-Diffusion's first pass does.
    """
    if not 0 <= lo_pct < hi_pct <= 100:
        raise UserError(f"need 0 <= lo_pct < hi_pct <= 100, got {lo_pct}, {hi_pct}")
    layers = quant_layers(model)
    if not layers:
        raise UserError("calibrate_activations: the model has no quantized layer; call quantize_model first")
    saved = {n: (m.aq.enabled, m.wq.mode) for n, m in layers.items()}
    set_quant_state(model, weight="nearest", act=False)
    for m in layers.values():
        m.aq.observe = []
    try:
        for i in range(0, len(x), batch):
            eps_call(model, x[i : i + batch], t[i : i + batch], **{k: v[i : i + batch] for k, v in (cond or {}).items()})
        for m in layers.values():
            vals = torch.cat(m.aq.observe).float()
            vals = vals[torch.isfinite(vals)]  # a diverged model must not crash the calibration
            if vals.numel() == 0:
                log.warning("no finite input values at a quantized layer; activation range set to [-1, 1]")
                vals = torch.tensor([-1.0, 1.0])
            lo = float(torch.quantile(vals, lo_pct / 100))
            hi = float(torch.quantile(vals, hi_pct / 100))
            m.aq.init_range(lo, hi)
    finally:
        for n, m in layers.items():
            m.aq.observe = None
            m.aq.enabled, m.wq.mode = saved[n]
    return model


# ---------------------------------------------------------------------------- frequency loss
def dct_matrix(n: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """Orthonormal DCT-II matrix ``C`` (``C @ C.T = I``): ``X = C x`` transforms a length-n signal."""
    if n < 1:
        raise UserError(f"DCT size must be >= 1, got {n}")
    k = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(n, dtype=torch.float64)[None, :]
    c = torch.cos(math.pi * (2 * i + 1) * k / (2 * n)) * math.sqrt(2.0 / n)
    c[0] /= math.sqrt(2.0)
    return c.to(dtype)


def dct2(x: Tensor) -> Tensor:
    """Orthonormal 2-D DCT-II over the last two dimensions (per channel)."""
    ch, cw = dct_matrix(x.shape[-2], x.dtype).to(x.device), dct_matrix(x.shape[-1], x.dtype).to(x.device)
    return ch @ x @ cw.T


def idct2(x: Tensor) -> Tensor:
    ch, cw = dct_matrix(x.shape[-2], x.dtype).to(x.device), dct_matrix(x.shape[-1], x.dtype).to(x.device)
    return ch.T @ x @ cw


def radial_bands(h: int, w: int, k: int) -> Tensor:
    """``[h, w]`` band index in 0..k-1 of each DCT coefficient: equal-count quantile bins of ``sqrt(u^2 + v^2)``.

    Equal radii always share a band; every band must be non-empty, else a UserError names the largest k.
    """
    if k < 1:
        raise UserError(f"bands must be >= 1, got {k}")
    u = torch.arange(h, dtype=torch.float64)[:, None]
    v = torch.arange(w, dtype=torch.float64)[None, :]
    r = torch.sqrt(u**2 + v**2).reshape(-1)
    edges = torch.quantile(r, torch.linspace(0, 1, k + 1, dtype=torch.float64)[1:-1])  # k - 1 inner edges
    band = torch.searchsorted(edges, r, right=True)  # r > edge_j  ->  beyond band j
    counts = torch.bincount(band, minlength=k)
    if bool((counts == 0).any()):
        n_unique = len(torch.unique(r))
        raise UserError(f"bands={k} leaves an empty band on a {h}x{w} DCT ({n_unique} distinct radii); use fewer")
    return band.reshape(h, w)


def band_energy(err: Tensor, bands: Tensor) -> Tensor:
    """``[N, K]`` energy ``sum_{c, (u,v) in band k} |DCT2(err)|^2`` of each sample (``err`` is ``[N, C, H, W]``)."""
    e2 = dct2(err).pow(2).sum(1).reshape(err.shape[0], -1)  # [N, H*W]
    k = int(bands.max()) + 1
    onehot = F.one_hot(bands.reshape(-1).to(err.device), k).to(err.dtype)  # [H*W, K]
    return e2 @ onehot


def band_weights(b: Tensor) -> Tensor:
    """``beta_g = K softmax(b_g)`` for each row g of ``b`` ``[G, K]`` (uniform b gives beta = 1)."""
    return b.shape[-1] * torch.softmax(b, dim=-1)


def sample_weights(a: Tensor) -> Tensor:
    """``w = N softmax(a)``: positive weights whose mean is 1."""
    return a.shape[0] * torch.softmax(a, dim=0)


def frequency_loss(err: Tensor, groups: Tensor, bands: Tensor, beta: Tensor) -> Tensor:
    """Per-sample loss ``l_i = (1/N_pix) sum_k beta[g_i, k] * energy_ik`` (``[N]``).

    With beta = 1 this is exactly the per-sample mean squared error (Parseval: the DCT is orthonormal).
    """
    if err.dim() != 4:
        raise UserError(f"err must be [N, C, H, W], got shape {tuple(err.shape)}")
    energy = band_energy(err, bands)  # [N, K]
    npix = err[0].numel()
    return (beta[groups] * energy).sum(1) / npix


# ---------------------------------------------------------------------------- calibration data
@dataclass
class CalibSet:
    """``(x_t, t, eps_fp)`` pairs with the timestep group and the DDIM step index of each pair."""

    x: Tensor  # [N, C, H, W]
    t: Tensor  # [N] long, diffusion timesteps
    eps: Tensor  # [N, C, H, W] full-precision targets
    group: Tensor  # [N] long in 0..G-1 (0 = the noisiest steps)
    step: Tensor  # [N] long, index along the DDIM grid (0 = first step, largest t)
    #: per-pair conditioning passed to the model as keyword arguments, each [N, ...] (``class_labels`` for a
    #: class-conditional UNet2DModel, ``encoder_hidden_states`` for a UNet2DConditionModel); empty: unconditional
    cond: dict[str, Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = self.x.shape[0]
        bad = [k for k, v in self.cond.items() if not torch.is_tensor(v) or v.shape[0] != n]
        if bad:
            raise UserError(f"CalibSet.cond entries {bad} must be tensors with {n} rows (one per pair)")

    def __len__(self) -> int:
        return self.x.shape[0]

    def cond_at(self, idx) -> dict[str, Tensor]:
        return {k: v[idx] for k, v in self.cond.items()}


def timestep_groups(n_steps: int, groups: int) -> Tensor:
    """Group of each DDIM step index: ``groups`` runs of consecutive steps, large t first."""
    if not 1 <= groups <= n_steps:
        raise UserError(f"timestep groups must be in 1..{n_steps} (the DDIM steps), got {groups}")
    return torch.arange(n_steps) * groups // n_steps


def _model_device(model: nn.Module) -> torch.device:
    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


@torch.no_grad()
def ddim_generate(model: nn.Module, scheduler, noise: Tensor, steps: int, *, batch: int = 500,
                  record: bool = False, cond: dict[str, Tensor] | None = None,
                  ) -> tuple[Tensor, list[tuple[Tensor, int, Tensor, dict[str, Tensor]]]]:  # fmt: skip
    """Deterministic DDIM (eta = 0) from ``noise`` with a diffusers scheduler, on the model's device;
    ``cond`` holds per-sample conditioning ([N, ...] each, passed as keyword arguments). Optionally records
    every ``(x_t, step index, eps(x_t, t), cond)``. Returns the final samples and the records (one per step
    and batch)."""
    cond = cond or {}
    bad = [k for k, v in cond.items() if v.shape[0] != noise.shape[0]]
    if bad:
        raise UserError(f"ddim_generate: cond entries {bad} need {noise.shape[0]} rows (one per noise)")
    dev = _model_device(model)
    scheduler.set_timesteps(steps)
    outs, rec = [], []
    for i in range(0, noise.shape[0], batch):
        x = noise[i : i + batch].to(dev)
        c = {k: v[i : i + batch].to(dev) for k, v in cond.items()}
        for j, t in enumerate(scheduler.timesteps):
            tt = torch.full((x.shape[0],), int(t), dtype=torch.long, device=dev)
            eps = eps_call(model, x, tt, **c)
            if record:
                rec.append((x.clone(), j, eps.clone(), c))
            x = scheduler.step(eps, t, x, eta=0.0).prev_sample
        outs.append(x)
    return torch.cat(outs), rec


def collect_calibration(fp_model: nn.Module, scheduler, n_traj: int, steps: int, groups: int, *,
                        sample_shape: tuple[int, ...], seed: int, cond: dict[str, Tensor] | None = None,
                        ) -> CalibSet:  # fmt: skip
    """Q-Diffusion-style calibration: every step of ``n_traj`` full-precision DDIM trajectories (noise from
    ``seed``, run on the model's device), ``n_traj * steps`` pairs with their FP targets. ``cond``: the
    conditioning of each trajectory ([n_traj, ...] each: class labels, text embeddings), carried to every
    pair of its trajectory so that reconstruction sees the inputs the model is used with."""
    if n_traj < 1 or steps < 1:
        raise UserError(f"need n_traj >= 1 and steps >= 1, got {n_traj}, {steps}")
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(n_traj, *sample_shape, generator=g)
    _, rec = ddim_generate(fp_model, scheduler, noise, steps, batch=n_traj, record=True, cond=cond)
    dev = rec[0][0].device
    grp = timestep_groups(steps, groups).to(dev)
    ts = torch.as_tensor([int(t) for t in scheduler.timesteps], dtype=torch.long, device=dev)
    x = torch.cat([r[0] for r in rec])
    eps = torch.cat([r[2] for r in rec])
    step = torch.cat([torch.full((r[0].shape[0],), r[1], dtype=torch.long, device=dev) for r in rec])
    cat_cond = {k: torch.cat([r[3][k] for r in rec]) for k in (cond or {})}
    return CalibSet(x, ts[step], eps, grp[step], step, cat_cond)


# ---------------------------------------------------------------------------- differentiable DDIM rollouts
@dataclass
class RolloutSet:
    """Held-out noises with the full-precision model's final DDIM samples from them, and the DDIM grid: the
    data of the ``"sample"`` outer objective of :func:`reconstruct` (the error the quantized model's whole
    sampling trajectory leaves in its final sample, which is what trajectory L2 / FD against FP measure)."""

    noise: Tensor  # [M, C, H, W] initial noises x_T
    target: Tensor  # [M, C, H, W] the FP model's final DDIM samples from them (unclamped)
    timesteps: Tensor  # [S] long, the DDIM grid (largest t first)
    alpha: Tensor  # [S] alpha_bar at each grid step
    alpha_prev: Tensor  # [S] alpha_bar at the next grid step (the scheduler's final alpha after the last)
    cond: dict[str, Tensor] = field(default_factory=dict)  # per-noise conditioning, [M, ...] each

    def __post_init__(self) -> None:
        if self.noise.shape != self.target.shape:
            raise UserError(f"RolloutSet: noise {tuple(self.noise.shape)} and target {tuple(self.target.shape)} differ")
        if not (len(self.timesteps) == len(self.alpha) == len(self.alpha_prev) >= 1):
            raise UserError("RolloutSet: timesteps, alpha and alpha_prev need the same length (>= 1)")
        bad = [k for k, v in self.cond.items() if not torch.is_tensor(v) or v.shape[0] != self.noise.shape[0]]
        if bad:
            raise UserError(f"RolloutSet.cond entries {bad} need one row per noise")

    def __len__(self) -> int:
        return self.noise.shape[0]


def ddim_coefficients(scheduler, steps: int, device: torch.device | str = "cpu") -> tuple[Tensor, Tensor, Tensor]:
    """``(timesteps, alpha_bar_t, alpha_bar_prev)`` of a diffusers ``DDIMScheduler`` at ``steps`` steps, as the
    scheduler's own eta = 0 step uses them (``prev_t = t - T // steps``; the final alpha after the last step).
    Only epsilon prediction without sample clipping or thresholding is supported (a UserError otherwise)."""
    cfg = scheduler.config
    if (cfg.get("prediction_type", "epsilon") != "epsilon" or cfg.get("clip_sample", False)
            or cfg.get("thresholding", False)):  # fmt: skip
        raise UserError("ddim_coefficients: need prediction_type='epsilon', clip_sample=False, thresholding=False")
    scheduler.set_timesteps(steps)
    ts = torch.as_tensor([int(t) for t in scheduler.timesteps], dtype=torch.long)
    ac = scheduler.alphas_cumprod.double()
    prev = ts - cfg.num_train_timesteps // steps
    final = float(scheduler.final_alpha_cumprod)
    a_prev = torch.tensor([float(ac[p]) if p >= 0 else final for p in prev.tolist()], dtype=torch.float64)
    return ts.to(device), ac[ts].float().to(device), a_prev.float().to(device)


def ddim_rollout(model: nn.Module, noise: Tensor, timesteps: Tensor, alpha: Tensor, alpha_prev: Tensor, *,
                 params: dict[str, Tensor] | None = None, cond: dict[str, Tensor] | None = None) -> Tensor:  # fmt: skip
    """Deterministic DDIM (eta = 0, epsilon prediction) from ``noise`` with autograd kept: ``x_prev =
    sqrt(a_prev) x0_hat + sqrt(1 - a_prev) eps`` with ``x0_hat = (x - sqrt(1 - a) eps) / sqrt(a)``. ``params``
    overrides the model's parameters (``torch.func.functional_call``, e.g. a look-ahead theta'). Returns the
    final samples (unclamped)."""
    cond = cond or {}
    x = noise
    for j in range(len(timesteps)):
        tt = timesteps[j].expand(x.shape[0])
        if params is None:
            eps = eps_call(model, x, tt, **cond)
        else:
            eps = torch.func.functional_call(model, params, (x, tt), cond, strict=False)
            eps = eps.sample if hasattr(eps, "sample") else eps
        a, ap = alpha[j], alpha_prev[j]
        x0 = (x - (1 - a).sqrt() * eps) / a.sqrt()
        x = ap.sqrt() * x0 + (1 - ap).sqrt() * eps
    return x


def collect_rollouts(fp_model: nn.Module, scheduler, n: int, steps: int, *, sample_shape: tuple[int, ...],
                     seed: int, cond: dict[str, Tensor] | None = None) -> RolloutSet:  # fmt: skip
    """``n`` noises from ``seed`` (a CPU generator, moved to the model's device) and the FP model's final DDIM
    samples from them: the held-out set of the ``"sample"`` outer objective."""
    if n < 1 or steps < 1:
        raise UserError(f"need n >= 1 and steps >= 1, got {n}, {steps}")
    dev = _model_device(fp_model)
    noise = torch.randn(n, *sample_shape, generator=torch.Generator().manual_seed(seed)).to(dev)
    ts, a, ap = ddim_coefficients(scheduler, steps, dev)
    c = {k: v.to(dev) for k, v in (cond or {}).items()}
    with torch.no_grad():
        target = ddim_rollout(fp_model, noise, ts, a, ap, cond=c)
    return RolloutSet(noise, target, ts, a, ap, c)


# ---------------------------------------------------------------------------- reconstruction
@dataclass(frozen=True)
class ReconConfig:
    """Hyperparameters of :func:`reconstruct` (defaults: the small reproduction of the spec).

    sample_meta / freq_meta: meta-learn the sample weights a / the band weights b (both off = uniform
    reconstruction). fixed_w / fixed_beta: fixed weights used instead (the random-reweighting control).
    val_batch: validation items per meta step (pairs of a CalibSet, or noises of a RolloutSet); 0 = ``batch``.
    """

    iters: int = 200
    batch: int = 32
    lr_v: float = 5e-2  # AdaRound's 1e-3 is for ~20k iterations; V must cross 0 within a few hundred here
    lr_step: float = 4e-5
    reg_lambda: float = 10.0  # on the MEAN over weights (BRECQ's 0.01 on the sum, against a summed loss)
    beta_start: float = 20.0
    beta_end: float = 2.0
    warmup: float = 0.2  # share of iterations without the rounding regulariser (AdaRound / BRECQ)
    bands: int = 4
    groups: int = 4
    sample_meta: bool = False
    freq_meta: bool = False
    meta_every: int = 4
    inner_lr: float = 1e-2
    meta_lr: float = 1e-2
    val_batch: int = 0
    seed: int = 0
    fixed_w: Tensor | None = None
    fixed_beta: Tensor | None = None

    def __post_init__(self) -> None:
        checks = {"iters": self.iters >= 0, "batch": self.batch >= 1, "lr_v": self.lr_v >= 0,
                  "lr_step": self.lr_step >= 0, "reg_lambda": self.reg_lambda >= 0, "bands": self.bands >= 1,
                  "groups": self.groups >= 1, "meta_every": self.meta_every >= 1, "inner_lr": self.inner_lr >= 0,
                  "meta_lr": self.meta_lr >= 0, "val_batch": self.val_batch >= 0, "warmup": 0 <= self.warmup <= 1,
                  "beta_start": self.beta_start > 0, "beta_end": self.beta_end > 0}  # fmt: skip
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise UserError(f"ReconConfig: out-of-range {', '.join(f'{k}={getattr(self, k)}' for k in bad)}")


@dataclass
class Reconstruction:
    """What :func:`reconstruct` returns: the learned quantized model (hard rounding, frozen steps) and weights."""

    model: nn.Module
    sample_weights: Tensor  # [N] final w (mean 1)
    band_weights: Tensor  # [G, K] final beta
    history: dict[str, list[float]] = field(default_factory=dict)
    seconds: float = 0.0
    meta_seconds: float = 0.0


def _batch_loss(model: nn.Module, params: dict[str, Tensor] | None, data: CalibSet, idx: Tensor,
                bands: Tensor, beta: Tensor) -> Tensor:  # fmt: skip
    """Per-sample frequency loss of ``eps_q`` against ``eps_fp`` on ``data[idx]`` (``params`` overrides θ)."""
    x, t, cond = data.x[idx], data.t[idx], data.cond_at(idx)
    if params is None:
        out = eps_call(model, x, t, **cond)
    else:
        out = torch.func.functional_call(model, params, (x, t), cond, strict=False)
        out = out.sample if hasattr(out, "sample") else out
    return frequency_loss(out - data.eps[idx], data.group[idx], bands, beta)


def _reg(layers: Iterable[QuantLayer], beta_round: float) -> Tensor:
    terms = [m.wq.regularizer(beta_round) for m in layers]
    return torch.stack(terms).mean()


def lookahead_meta_grad(inner: Callable[[dict[str, Tensor]], Tensor], outer: Callable[[dict[str, Tensor]], Tensor],
                        theta: dict[str, Tensor], meta_params: list[Tensor], inner_lr: float,
                        ) -> tuple[list[Tensor], Tensor]:  # fmt: skip
    """MW-Net's one-step look-ahead: ``d/d(meta) outer(theta - inner_lr * grad_theta inner(theta))``.

    ``inner(theta)`` must read the current ``theta`` (the live parameters) and depend on ``meta_params``;
    ``outer(params)`` evaluates at the look-ahead parameters it is given. Returns the meta-gradients (zeros
    where a meta parameter does not reach the outer loss) and the outer loss.
    """
    names = list(theta)
    loss = inner(theta)
    grads = torch.autograd.grad(loss, [theta[k] for k in names], create_graph=True, allow_unused=True)
    look = {k: theta[k] - inner_lr * g if g is not None else theta[k] for k, g in zip(names, grads, strict=True)}
    val = outer(look)
    mg = torch.autograd.grad(val, meta_params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(meta_params, mg, strict=True)], val.detach()


def _math_attention(model: nn.Module) -> None:
    """Use diffusers' plain matmul attention: PyTorch has no double backward for CPU fused attention (SDPA),
    which the look-ahead needs. Same function, so uniform and meta arms share one code path."""
    for m in model.modules():
        if hasattr(m, "set_processor") and hasattr(m, "processor"):  # diffusers' Attention
            from diffusers.models.attention_processor import AttnProcessor

            m.set_processor(AttnProcessor())


def reconstruct(qmodel: nn.Module, calib: CalibSet, val: CalibSet | RolloutSet | None = None,
                rcfg: ReconConfig | None = None, *, callback: Callable[[int, dict], None] | None = None,
                ) -> Reconstruction:  # fmt: skip
    """Learn rounding and activation steps of a copy of ``qmodel`` (not mutated) on the whole-network output.

    Inner loss ``L_in = mean_i(w_i l_i(theta; b)) + lambda reg(V)``; with ``sample_meta`` / ``freq_meta``, every
    ``meta_every`` iterations a look-ahead ``theta' = theta - inner_lr grad L_in`` (graph kept) is scored by the
    outer loss ``L_val(theta')`` and ``a`` / ``b`` take an Adam step along ``-grad L_val(theta')``; then Adam on
    theta with ``a``, ``b`` detached (each meta-gradient divided by its root mean square first: they are far
    smaller than Adam's eps). Returns the model in hard-rounding mode with frozen steps.

    The outer loss depends on ``val``: a :class:`CalibSet` gives the unweighted eps-MSE on its pairs (the same
    quantity as the inner loss with uniform weights, so uniform weights are its fixed point in expectation); a
    :class:`RolloutSet` gives the mean squared error of the final sample of the quantized model's whole DDIM
    rollout (:func:`ddim_rollout` at theta') against the FP model's, so each timestep's and band's error counts
    by how it propagates to the sample.
    """
    rcfg = rcfg or ReconConfig()
    meta = rcfg.sample_meta or rcfg.freq_meta
    if meta and (val is None or len(val) == 0):
        raise UserError("meta-weighted reconstruction needs a validation CalibSet (val)")
    n = len(calib)
    if n < 1:
        raise UserError("the calibration set is empty")
    if calib.x.shape != calib.eps.shape:
        raise UserError(f"calib.x {tuple(calib.x.shape)} and calib.eps {tuple(calib.eps.shape)} differ in shape")
    if int(calib.group.max()) >= rcfg.groups:
        raise UserError(f"calibration groups go up to {int(calib.group.max())}, but ReconConfig.groups={rcfg.groups}")
    if rcfg.fixed_w is not None and rcfg.fixed_w.shape != (n,):
        raise UserError(f"fixed_w must have shape ({n},), got {tuple(rcfg.fixed_w.shape)}")
    if rcfg.fixed_beta is not None and rcfg.fixed_beta.shape != (rcfg.groups, rcfg.bands):
        raise UserError(f"fixed_beta must have shape ({rcfg.groups}, {rcfg.bands})")
    model = copy.deepcopy(qmodel)
    _math_attention(model)
    set_quant_state(model, weight="soft", act=True)
    model.train(False)
    dev = calib.x.device
    bands = radial_bands(calib.x.shape[-2], calib.x.shape[-1], rcfg.bands).to(dev)
    rounding, steps = quant_parameters(model)
    theta = {**rounding, **steps}
    for p in theta.values():
        p.requires_grad_(True)
    opt = torch.optim.Adam([{"params": list(rounding.values()), "lr": rcfg.lr_v},
                            {"params": list(steps.values()), "lr": rcfg.lr_step}])  # fmt: skip
    a = torch.zeros(n, device=dev, requires_grad=rcfg.sample_meta)
    b = torch.zeros(rcfg.groups, rcfg.bands, device=dev, requires_grad=rcfg.freq_meta)
    meta_params = [p for p, on in ((a, rcfg.sample_meta), (b, rcfg.freq_meta)) if on]
    meta_opt = torch.optim.Adam(meta_params, lr=rcfg.meta_lr) if meta_params else None
    layers = list(quant_layers(model).values())
    g = torch.Generator().manual_seed(rcfg.seed)  # calibration mini-batches: the same in every arm
    g_val = torch.Generator().manual_seed(rcfg.seed + 1)  # validation mini-batches of the meta step
    hist: dict[str, list[float]] = {"loss": [], "val_mse": []}
    t0, t_meta = time.perf_counter(), 0.0
    warm = int(rcfg.warmup * rcfg.iters)

    def weights() -> tuple[Tensor, Tensor]:
        w = rcfg.fixed_w if rcfg.fixed_w is not None else sample_weights(a)
        beta = rcfg.fixed_beta if rcfg.fixed_beta is not None else band_weights(b)
        return w, beta

    for it in range(rcfg.iters):
        if it < warm:
            lam, beta_round = 0.0, rcfg.beta_start
        else:  # anneal the regulariser's exponent from beta_start to beta_end (AdaRound's schedule)
            frac = (it - warm) / max(rcfg.iters - warm, 1)
            lam, beta_round = rcfg.reg_lambda, rcfg.beta_end + (rcfg.beta_start - rcfg.beta_end) * (1 - frac)
        idx = torch.randperm(n, generator=g)[: rcfg.batch].to(dev)
        if meta and it % rcfg.meta_every == 0:
            tm = time.perf_counter()
            vdev = val.noise.device if isinstance(val, RolloutSet) else val.x.device
            vidx = torch.randperm(len(val), generator=g_val)[: rcfg.val_batch or rcfg.batch].to(vdev)
            ones = torch.ones(rcfg.groups, rcfg.bands, device=dev)

            def inner(params: dict[str, Tensor], idx=idx, lam=lam, beta_round=beta_round) -> Tensor:
                w, beta = weights()
                loss = (w[idx] * _batch_loss(model, None, calib, idx, bands, beta)).mean()
                return loss + lam * _reg(layers, beta_round) if lam > 0 else loss

            def outer(params: dict[str, Tensor], vidx=vidx, ones=ones) -> Tensor:
                if isinstance(val, RolloutSet):  # final-sample MSE of the quantized rollout against the FP one
                    cond = {k: v[vidx] for k, v in val.cond.items()}
                    x = ddim_rollout(model, val.noise[vidx], val.timesteps, val.alpha, val.alpha_prev,
                                     params=params, cond=cond)  # fmt: skip
                    return (x - val.target[vidx]).pow(2).mean()
                return _batch_loss(model, params, val, vidx, bands, ones).mean()  # plain validation MSE (beta = 1)

            mg, val_mse = lookahead_meta_grad(inner, outer, theta, meta_params, rcfg.inner_lr)
            meta_opt.zero_grad()
            for p, gr in zip(meta_params, mg, strict=True):
                # meta-gradients carry inner_lr times a product of two gradients (~1e-10 on the digits UNet),
                # far below Adam's eps (1e-8), which then damps every step to ~1 % of meta_lr: divide each by
                # its root mean square so that Adam moves a logit by about meta_lr per step at any scale
                rms = gr.pow(2).mean().sqrt()
                p.grad = gr / rms if float(rms) > 0 else gr
            meta_opt.step()
            hist["val_mse"].append(val_mse.item())
            t_meta += time.perf_counter() - tm
        w, beta = weights()
        loss = (w[idx].detach() * _batch_loss(model, None, calib, idx, bands, beta.detach())).mean()
        if lam > 0:
            loss = loss + lam * _reg(layers, beta_round)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for p in steps.values():
                p.clamp_(min=1e-8)  # a step must stay positive
        hist["loss"].append(loss.item())
        if callback is not None:
            callback(it, {"loss": float(loss)})
    for p in model.parameters():
        p.requires_grad_(False)
    set_quant_state(model, weight="hard", act=True)
    w, beta = weights()
    return Reconstruction(model, w.detach().clone(), beta.detach().clone(), hist,
                          time.perf_counter() - t0, t_meta)  # fmt: skip


# ---------------------------------------------------------------------------- the random-reweighting control
def entropy(p: Tensor) -> float:
    p = p / p.sum()
    return float(-(p * torch.log(p.clamp_min(1e-30))).sum())


def dirichlet_matching_entropy(target: float, n: int, generator: torch.Generator, iters: int = 40) -> Tensor:
    """A Dirichlet(alpha 1_n) draw on the simplex whose entropy is ``target`` (alpha found by bisection on one
    fixed underlying Gamma draw, so the result is deterministic and the entropy matches closely)."""
    if n < 1:
        raise UserError(f"n must be >= 1, got {n}")
    target = min(max(target, 0.0), math.log(n))
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    std = torch.randn(n, generator=generator, dtype=torch.float64)

    def draw(alpha: float) -> Tensor:
        # Gamma(alpha) through the Wilson-Hilferty cube of a fixed normal (monotone in alpha for a fixed draw),
        # with the u^(1/alpha) boost for small alpha; normalised -> Dirichlet-distributed up to that approximation
        k = alpha + 1.0
        gam = k * (1 - 1 / (9 * k) + std * math.sqrt(1 / (9 * k))).clamp_min(1e-6) ** 3
        gam = gam * u.pow(1.0 / alpha)
        return gam / gam.sum()

    lo, hi = math.log(1e-3), math.log(1e4)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if entropy(draw(math.exp(mid))) < target:
            lo = mid
        else:
            hi = mid
    return draw(math.exp(0.5 * (lo + hi))).float()


# ---------------------------------------------------------------------------- evaluation helper
def frechet_distance(a: Tensor, b: Tensor) -> float:
    """Fréchet distance between Gaussians fitted to feature sets ``a`` [n, d] and ``b`` [m, d] (as in FID).

    ``tr sqrt(C1 C2)`` is computed as the sum of square roots of the eigenvalues of the symmetric
    ``sqrt(C1) C2 sqrt(C1)`` (same spectrum), which stays real and finite for singular covariances.
    """
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1] or min(len(a), len(b)) < 2:
        raise UserError(f"frechet_distance needs [n, d] and [m, d] features, n, m >= 2; got {tuple(a.shape)}, "
                        f"{tuple(b.shape)}")  # fmt: skip
    x, y = a.double(), b.double()
    if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
        return float("nan")
    mu1, mu2 = x.mean(0), y.mean(0)
    c1, c2 = torch.cov(x.T).reshape(x.shape[1], -1), torch.cov(y.T).reshape(y.shape[1], -1)
    ev, vec = torch.linalg.eigh(c1)
    s1 = vec @ torch.diag(ev.clamp_min(0).sqrt()) @ vec.T
    m = s1 @ c2 @ s1
    tr_sqrt = torch.linalg.eigvalsh((m + m.T) / 2).clamp_min(0).sqrt().sum()
    return float(((mu1 - mu2) ** 2).sum() + torch.trace(c1) + torch.trace(c2) - 2 * tr_sqrt)
