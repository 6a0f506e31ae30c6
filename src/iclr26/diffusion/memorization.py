"""Detecting and Mitigating Memorization in Diffusion Models through Anisotropy of the Log-Probability
(ICLR 2026, Asthana & Belagiannis, arXiv 2601.20642) — the detection metric, the denoising-based baseline of
Wen et al. (ICLR 2024) and prompt-embedding mitigation.

With ``d(x, t) = eps(x, t, c) - eps(x, t, null)`` (the guidance direction) and one pure-noise input ``x_T``:

- the isotropic term ``N = ||d(x_T, t_hi)||_2`` at the high-noise timestep (Wen et al.'s first-step magnitude),
- the anisotropic term ``C = mean_{h,w} cos(eps(x_T, t_lo, null)[:, h, w], d(x_T, t_lo)[:, h, w])`` at the
  low-noise timestep, the cosine over channels at each position, on the *same* ``x_T`` (never denoised),
- ``S = w_1 N + w_2 C`` (higher = memorized); two CFG network calls per prompt and no denoising steps.

For Stable Diffusion's DDIM grid (50 leading steps, offset 1) ``t_hi = timesteps[0] = 981`` and
``t_lo = timesteps[-3] = 41`` (:func:`select_timesteps`). A denoiser is any callable ``(x, t, cond) -> out``
with ``cond`` a batch of conditioning tensors (prompt embeddings); :class:`PipelineDenoiser` adapts a diffusers
``StableDiffusionPipeline`` (its UNet and text encoder). v-prediction models: ``N`` uses the score-space
outputs are converted to epsilon with the scheduler's own formula ``eps = sqrt(abar_t) v + sqrt(1 - abar_t) x_t``
(``v_space="epsilon"``, the default), so ``N`` and ``C`` mean the same as for an epsilon model; ``v_space="official"``
keeps the official code's reading (``N`` from the score-space difference ``sqrt(abar_t) (v_c - v_null) / (1 - abar_t)``,
``C`` from the raw v outputs), to which the paper's SD2 weights (1, 0.1) belong. The prediction type and
``alphas_cumprod`` are read from ``scheduler`` (or the denoiser's ``prediction_type`` / ``cfg.prediction_type``) when
not given; a plain callable without either is taken as epsilon.

:func:`nonneg_logistic` fits ``S``'s weights by logistic regression with sign constraints (the paper's sign: a
higher norm and a higher alignment both mean memorized, so both weights are ``>= 0``).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from iclr26.core.errors import UserError
from iclr26.stats import tpr_at_fpr  # noqa: F401  (re-exported: the paper's detection metric)

log = logging.getLogger(__name__)

Denoiser = Callable[[Tensor, Tensor, Tensor], Tensor]

__all__ = ["CallCounter", "MemorizationScores", "PipelineDenoiser", "denoising_score", "memorization_score",
           "mitigate_prompt", "nearest_distance", "nonneg_logistic", "replication_threshold", "select_timesteps",
           "tpr_at_fpr"]  # fmt: skip

PREDICTION_TYPES = ("epsilon", "v_prediction")
V_SPACES = ("epsilon", "official")


def select_timesteps(scheduler, num_inference_steps: int = 50, hi_index: int = 0, lo_index: int = -3
                     ) -> tuple[int, int]:  # fmt: skip
    """``(t_hi, t_lo)`` = ``timesteps[hi_index]``, ``timesteps[lo_index]`` of ``scheduler`` set to
    ``num_inference_steps`` (a copy is set; the caller's scheduler is untouched). SD's DDIM: (981, 41)."""
    if num_inference_steps < 1:
        raise UserError(f"num_inference_steps must be >= 1, got {num_inference_steps}")
    s = copy.deepcopy(scheduler)
    s.set_timesteps(num_inference_steps)
    ts = [int(t) for t in s.timesteps]
    for name, i in (("hi_index", hi_index), ("lo_index", lo_index)):
        if not -len(ts) <= i < len(ts):
            raise UserError(f"{name}={i} is outside the {len(ts)} timesteps of the grid")
    return ts[hi_index], ts[lo_index]


class CallCounter:
    """Wraps a denoiser and counts its calls (``calls``) and the samples it saw (``samples``)."""

    def __init__(self, denoiser: Denoiser):
        self.denoiser, self.calls, self.samples = denoiser, 0, 0

    def __call__(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        self.calls += 1
        self.samples += x.shape[0]
        return self.denoiser(x, t, cond)


@dataclass
class MemorizationScores:
    """Per-prompt ``norm`` (N), ``align`` (C) and ``score`` (S = w1 N + w2 C), each [P], and what was used."""

    norm: Tensor
    align: Tensor
    score: Tensor
    t_hi: int
    t_lo: int
    weights: tuple[float, float]
    calls: int  # denoiser calls made in total


def _check_cond(cond: Tensor, uncond: Tensor) -> None:
    if not isinstance(cond, Tensor) or not isinstance(uncond, Tensor) or cond.ndim < 2:
        raise UserError("cond must be a tensor [P, ...] of prompt embeddings and uncond a tensor [1 or P, ...]")
    if uncond.shape[1:] != cond.shape[1:] or uncond.shape[0] not in (1, cond.shape[0]):
        raise UserError(f"uncond must be [1 or {cond.shape[0]}, {', '.join(map(str, cond.shape[1:]))}], "
                        f"got {tuple(uncond.shape)}")  # fmt: skip


def _noise(latent_shape: Sequence[int], gen_num: int, seed: int, like: Tensor) -> Tensor:
    g = torch.Generator().manual_seed(int(seed))
    return torch.randn((gen_num, *latent_shape), generator=g).to(device=like.device, dtype=like.dtype)


def _pair(denoiser: Denoiser, x: Tensor, t: int, cond: Tensor, uncond: Tensor, gen_num: int, scheduler=None
          ) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """One call on the CFG batch [uncond, cond] for p prompts x gen_num noises: returns the raw outputs
    (out_u, out_c) in fp32 and the model input x_t (fp32) they were computed on."""
    p = cond.shape[0]
    xin = scheduler.scale_model_input(x, t) if scheduler is not None else x  # identity for DDIM; kept for generality
    c = cond.repeat_interleave(gen_num, 0)  # [p * g, ...]
    u = uncond.expand(p, *uncond.shape[1:]).repeat_interleave(gen_num, 0)
    tt = torch.full((2 * xin.shape[0],), int(t), device=x.device, dtype=torch.long)
    out = denoiser(torch.cat([xin, xin]), tt, torch.cat([u, c])).float()
    return out[: xin.shape[0]], out[xin.shape[0]:], xin.float()


def _resolve_prediction(denoiser, scheduler, prediction_type: str | None, alphas_cumprod: Tensor | None,
                        v_space: str) -> tuple[str, Tensor | None]:  # fmt: skip
    """The prediction type (explicit > ``scheduler.config`` > the denoiser's ``prediction_type`` or
    ``cfg.prediction_type`` > epsilon) and ``alphas_cumprod`` (explicit > the scheduler's)."""
    inner = denoiser.denoiser if isinstance(denoiser, CallCounter) else denoiser
    sched_pt = getattr(getattr(scheduler, "config", None), "prediction_type", None)
    if prediction_type is not None and sched_pt is not None and prediction_type != sched_pt:
        raise UserError(f"prediction_type={prediction_type!r} but the scheduler predicts {sched_pt!r}")
    pt = (prediction_type or sched_pt or getattr(inner, "prediction_type", None)
          or getattr(getattr(inner, "cfg", None), "prediction_type", None) or "epsilon")  # fmt: skip
    if pt not in PREDICTION_TYPES:
        raise UserError(f"prediction_type={pt!r}; allowed: {', '.join(PREDICTION_TYPES)}")
    if v_space not in V_SPACES:
        raise UserError(f"v_space={v_space!r}; allowed: {', '.join(V_SPACES)}")
    if alphas_cumprod is None and scheduler is not None:
        alphas_cumprod = getattr(scheduler, "alphas_cumprod", None)
    if pt == "v_prediction" and alphas_cumprod is None:
        raise UserError("v_prediction needs alphas_cumprod (the scheduler's) to convert v to epsilon / the score")
    return pt, alphas_cumprod


def _abar(alphas_cumprod: Tensor, t: int) -> float:
    return float(alphas_cumprod[int(t)])


def _guidance_terms(u: Tensor, c: Tensor, xin: Tensor, t: int, prediction_type: str, alphas_cumprod: Tensor | None,
                    v_space: str) -> tuple[Tensor, Tensor, float]:  # fmt: skip
    """(unconditional output, guidance difference, norm factor) in the space the detector reads: epsilon for an
    epsilon model or ``v_space="epsilon"`` (v converted with the scheduler's formula
    ``eps = sqrt(abar) v + sqrt(1 - abar) x_t``); for ``v_space="official"`` the raw v outputs and the factor
    ``sqrt(abar) / (1 - abar)`` that turns a v difference into the official score-space difference."""
    if prediction_type == "epsilon":
        return u, c - u, 1.0
    a = _abar(alphas_cumprod, t)
    if v_space == "official":
        return u, c - u, a**0.5 / (1 - a)
    ue = a**0.5 * u + (1 - a) ** 0.5 * xin
    return ue, a**0.5 * (c - u), 1.0  # eps_c - eps_u = sqrt(abar) (v_c - v_u): x_t cancels


def _terms(denoiser, x, cond, uncond, gen_num, t_hi, t_lo, prediction_type, alphas_cumprod, scheduler, v_space
           ) -> tuple[Tensor, Tensor]:  # fmt: skip
    """(N, C) per prompt for the prompts in ``cond`` on the noise ``x`` [p * gen_num, C, H, W] (two calls)."""
    p = cond.shape[0]
    u_hi, c_hi, x_hi = _pair(denoiser, x, t_hi, cond, uncond, gen_num, scheduler)
    _, d_hi, f_hi = _guidance_terms(u_hi, c_hi, x_hi, t_hi, prediction_type, alphas_cumprod, v_space)
    norm = (d_hi * f_hi).reshape(p, gen_num, -1).norm(dim=-1).mean(1)  # [p]
    u_lo, c_lo, x_lo = _pair(denoiser, x, t_lo, cond, uncond, gen_num, scheduler)
    u, d, _ = _guidance_terms(u_lo, c_lo, x_lo, t_lo, prediction_type, alphas_cumprod, v_space)
    cos = F.cosine_similarity(u, d, dim=1, eps=1e-12)  # over channels: [p * g, H, W]
    align = cos.reshape(p, gen_num, -1).mean(dim=(1, 2))  # [p]
    return norm, align


def memorization_score(
    denoiser: Denoiser,
    cond: Tensor,
    uncond: Tensor,
    *,
    latent_shape: Sequence[int],
    t_hi: int,
    t_lo: int,
    weights: tuple[float, float] = (1.0, 2.0),
    gen_num: int = 1,
    seed: int = 0,
    prompts_per_call: int = 1,
    prediction_type: str | None = None,
    alphas_cumprod: Tensor | None = None,
    scheduler=None,
    v_space: str = "epsilon",
) -> MemorizationScores:
    """N, C and S for every prompt embedding in ``cond`` [P, ...] against the null embedding ``uncond``.

    The noise ``x_T`` [gen_num, *latent_shape] is drawn from ``seed`` and is the same for every prompt (the
    official code re-seeds before each prompt). ``prompts_per_call`` prompts share one CFG call (batch
    ``2 * prompts_per_call * gen_num``); with the default 1 the cost is exactly two calls per prompt.
    ``t_hi``/``t_lo`` are explicit (see :func:`select_timesteps`); values are recorded in the result.
    ``prediction_type`` (``None``: from ``scheduler`` or the denoiser, else epsilon), ``alphas_cumprod`` (``None``:
    the scheduler's) and ``v_space`` say how a v-prediction output is read (module docstring).
    """
    _check_cond(cond, uncond)
    prediction_type, alphas_cumprod = _resolve_prediction(denoiser, scheduler, prediction_type, alphas_cumprod,
                                                          v_space)
    if gen_num < 1 or prompts_per_call < 1:
        raise UserError(f"gen_num and prompts_per_call must be >= 1, got {gen_num}, {prompts_per_call}")
    if len(weights) != 2:
        raise UserError(f"weights must be (w_norm, w_align), got {weights}")
    counter = CallCounter(denoiser)
    x1 = _noise(latent_shape, gen_num, seed, cond)
    norms, aligns = [], []
    with torch.no_grad():
        for i in range(0, cond.shape[0], prompts_per_call):
            c = cond[i : i + prompts_per_call]
            u = uncond if uncond.shape[0] == 1 else uncond[i : i + prompts_per_call]
            x = x1.repeat(c.shape[0], *([1] * x1.ndim))[: c.shape[0]].reshape(-1, *x1.shape[1:])
            n, a = _terms(counter, x, c, u, gen_num, t_hi, t_lo, prediction_type, alphas_cumprod, scheduler, v_space)
            norms.append(n)
            aligns.append(a)
    norm, align = torch.cat(norms).cpu(), torch.cat(aligns).cpu()
    w = (float(weights[0]), float(weights[1]))
    return MemorizationScores(norm, align, w[0] * norm + w[1] * align, int(t_hi), int(t_lo), w, counter.calls)


def denoising_score(
    denoiser: Denoiser,
    cond: Tensor,
    uncond: Tensor,
    scheduler,
    *,
    latent_shape: Sequence[int],
    k: int,
    num_inference_steps: int = 50,
    guidance: float = 7.5,
    gen_num: int = 1,
    seed: int = 0,
    prompts_per_call: int = 1,
    v_space: str = "epsilon",
) -> Tensor:
    """Wen et al.'s denoising-based detector: ``||d(x_t, t)||`` along the first ``k`` steps of the CFG DDIM
    trajectory from ``x_T``. Returns the per-step magnitudes [P, k] (mean over ``gen_num`` noises); Wen-j is
    ``out[:, :j].mean(1)``. Costs ``k`` CFG calls per group of ``prompts_per_call`` prompts. The scheduler's
    ``prediction_type`` drives the steps; a v difference is read as in :func:`memorization_score` (``v_space``),
    so Wen-1 equals ``N`` on the same noise for either prediction type."""
    _check_cond(cond, uncond)
    pt, acp = _resolve_prediction(denoiser, scheduler, None, None, v_space)
    s = copy.deepcopy(scheduler)
    s.set_timesteps(num_inference_steps)
    if not 1 <= k <= len(s.timesteps):
        raise UserError(f"k={k} must be in 1..{len(s.timesteps)} (the denoising steps)")
    x1 = _noise(latent_shape, gen_num, seed, cond)
    out = []
    with torch.no_grad():
        for i in range(0, cond.shape[0], prompts_per_call):
            c = cond[i : i + prompts_per_call]
            u = uncond if uncond.shape[0] == 1 else uncond[i : i + prompts_per_call]
            p = c.shape[0]
            x = x1.repeat(p, *([1] * (x1.ndim - 1))) * s.init_noise_sigma  # [p * g, C, H, W]
            mags = []
            for t in s.timesteps[:k]:
                eu, ec, xin = _pair(denoiser, x, int(t), c, u, gen_num, s)
                _, d, f = _guidance_terms(eu, ec, xin, int(t), pt, acp, v_space)
                mags.append((d * f).reshape(p, gen_num, -1).norm(dim=-1).mean(1))
                x = s.step((eu + guidance * (ec - eu)).to(x.dtype), t, x).prev_sample  # raw outputs: the scheduler converts
            out.append(torch.stack(mags, 1))
    return torch.cat(out).cpu()


def mitigate_prompt(
    denoiser: Denoiser,
    cond: Tensor,
    uncond: Tensor,
    *,
    latent_shape: Sequence[int],
    t_hi: int,
    t_lo: int,
    weights: tuple[float, float] = (1.0, 2.0),
    objective: str = "score",
    steps: int = 50,
    lr: float = 0.05,
    reg: float = 0.1,
    n_noise: int = 4,
    target: float | None = None,
    seed: int = 0,
    prediction_type: str | None = None,
    alphas_cumprod: Tensor | None = None,
    scheduler=None,
    v_space: str = "epsilon",
) -> tuple[Tensor, list[float]]:
    """Prompt adaptation: Adam on a copy of the embeddings ``cond`` [P, ...] to minimise the mean over P prompts
    of ``objective`` (``"score"``: S, ``"norm"``: N only, Wen et al.'s mitigation) averaged over ``n_noise`` fresh
    noises per step, plus ``reg * ||e - e0||^2`` per prompt. Stops early when every prompt's objective is below
    ``target``. ``prediction_type`` / ``alphas_cumprod`` / ``scheduler`` / ``v_space`` are as in
    :func:`memorization_score` (read from the scheduler or the denoiser when not given), so a v-prediction model is
    mitigated on the same S that detected it. Returns ``(new_embeddings,
    objective history)``; gradients flow through the denoiser."""
    _check_cond(cond, uncond)
    if objective not in ("score", "norm"):
        raise UserError(f"objective={objective!r}; allowed: score, norm")
    prediction_type, alphas_cumprod = _resolve_prediction(denoiser, scheduler, prediction_type, alphas_cumprod,
                                                          v_space)
    if steps < 0 or n_noise < 1 or lr <= 0 or reg < 0:
        raise UserError("need steps >= 0, n_noise >= 1, lr > 0, reg >= 0")
    e0 = cond.detach()
    e = e0.clone().requires_grad_(True)
    opt = torch.optim.Adam([e], lr=lr)
    g = torch.Generator().manual_seed(int(seed))
    p = e0.shape[0]
    w = (1.0, 0.0) if objective == "norm" else (float(weights[0]), float(weights[1]))
    hist: list[float] = []
    for _ in range(steps):
        x = torch.randn((p * n_noise, *latent_shape), generator=g).to(e0)
        n, a = _terms(denoiser, x, e, uncond.detach(), n_noise, t_hi, t_lo, prediction_type, alphas_cumprod,
                      scheduler, v_space)
        obj = w[0] * n + w[1] * a  # [P]
        hist.append(float(obj.detach().mean()))
        if target is not None and bool((obj.detach() < target).all()):
            break
        loss = obj.mean() + reg * (e - e0).pow(2).reshape(p, -1).sum(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return e.detach(), hist


def nearest_distance(samples: Tensor, reference: Tensor) -> Tensor:
    """L2 distance of every sample [S, ...] to its nearest reference item [M, ...] (flattened): [S]."""
    a, b = samples.reshape(samples.shape[0], -1).float(), reference.reshape(reference.shape[0], -1).float()
    if a.shape[1] != b.shape[1]:
        raise UserError(f"samples ({a.shape[1]} values each) and reference ({b.shape[1]}) differ in size")
    return torch.cdist(a, b).min(1).values


def replication_threshold(reference: Tensor, q: float = 0.05) -> float:
    """The ``q``-quantile of nearest-neighbour distances between *distinct* reference items: a generated sample
    closer than this to a training item counts as a replication."""
    if not 0 < q < 1:
        raise UserError(f"q={q} must lie in (0, 1)")
    r = reference.reshape(reference.shape[0], -1).float()
    if r.shape[0] < 2:
        raise UserError("need at least two reference items")
    d = torch.cdist(r, r)
    d.fill_diagonal_(float("inf"))
    return float(torch.quantile(d.min(1).values, q))


class PipelineDenoiser:
    """Adapter of a diffusers ``StableDiffusionPipeline`` to the ``(x, t, cond) -> out`` denoiser protocol.

    ``encode(prompts)`` returns ``(cond [P, L, D], uncond [1, L, D])`` through the pipeline's text encoder
    (uncond = the empty prompt, as in CFG); ``latent_shape``, ``prediction_type``, ``alphas_cumprod`` and
    ``scheduler`` are read from the pipeline. The UNet runs in its own dtype; reductions are done in fp32.
    """

    def __init__(self, pipe, height: int | None = None, width: int | None = None):
        self.pipe = pipe
        self.unet = pipe.unet
        sf = getattr(pipe, "vae_scale_factor", 8)
        size = self.unet.config.sample_size
        h = (height // sf) if height else size
        w = (width // sf) if width else size
        self.latent_shape = (self.unet.config.in_channels, h, w)
        self.scheduler = pipe.scheduler
        self.prediction_type = pipe.scheduler.config.prediction_type
        self.alphas_cumprod = pipe.scheduler.alphas_cumprod

    def __call__(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        return self.unet(x.to(self.unet.dtype), t, encoder_hidden_states=cond.to(self.unet.dtype)).sample

    @torch.no_grad()
    def encode(self, prompts: list[str]) -> tuple[Tensor, Tensor]:
        if isinstance(prompts, str) or not prompts:
            raise UserError("prompts must be a non-empty list of strings")
        dev = self.unet.device
        cond, uncond = self.pipe.encode_prompt(list(prompts), dev, 1, True, [""] * len(prompts))
        return cond, uncond[:1]

    def score(self, prompts: list[str], *, num_inference_steps: int = 50, weights=(1.0, 2.0), gen_num: int = 1,
              seed: int = 42, **kw) -> MemorizationScores:  # fmt: skip
        """:func:`memorization_score` of text prompts, with ``t_hi``/``t_lo`` from the pipeline's scheduler."""
        t_hi, t_lo = select_timesteps(self.scheduler, num_inference_steps)
        cond, uncond = self.encode(prompts)
        return memorization_score(self, cond, uncond, latent_shape=self.latent_shape, t_hi=t_hi, t_lo=t_lo,
                                  weights=weights, gen_num=gen_num, seed=seed,
                                  prediction_type=self.prediction_type, alphas_cumprod=self.alphas_cumprod,
                                  scheduler=self.scheduler, **kw)  # fmt: skip


def nonneg_logistic(X, y, *, C: float = 1.0, nonneg: Sequence[bool] | bool = True, max_iter: int = 1000
                    ) -> tuple[np.ndarray, float]:  # fmt: skip
    """L2-penalised logistic regression with sign constraints: ``(coef [d], intercept)``.

    Minimises sklearn's ``LogisticRegression(C=C)`` objective ``0.5 ||w||^2 + C sum_i log(1 + exp(-s_i (x_i w + b)))``
    (``s_i = +-1``, intercept not penalised) with ``w_j >= 0`` wherever ``nonneg[j]`` (``True``: every weight),
    by L-BFGS-B. With no active constraint it is sklearn's fit; this is how S keeps the paper's sign (both the
    norm and the alignment count towards "memorized") instead of learning whatever sign fits.
    """
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise UserError(f"X must be [n, d] and y [n], got {X.shape} and {y.shape}")
    if set(np.unique(y).tolist()) != {0, 1}:
        raise UserError("y must hold both classes, as 0 / 1")
    if C <= 0:
        raise UserError(f"C must be > 0, got {C}")
    d = X.shape[1]
    mask = [bool(nonneg)] * d if isinstance(nonneg, bool | np.bool_) else [bool(v) for v in nonneg]
    if len(mask) != d:
        raise UserError(f"nonneg has {len(mask)} entries for {d} features")
    s = np.where(y == 1, 1.0, -1.0)

    def f(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:d], theta[d]
        m = s * (X @ w + b)
        loss = 0.5 * float(w @ w) - C * float(log_expit(m).sum())
        r = -C * s * expit(-m)  # d loss / d (x w + b)
        return loss, np.r_[w + X.T @ r, r.sum()]

    bounds = [(0.0, None) if m else (None, None) for m in mask] + [(None, None)]
    res = minimize(f, np.zeros(d + 1), jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": max_iter, "gtol": 1e-10, "ftol": 1e-14})  # fmt: skip
    return res.x[:d].copy(), float(res.x[d])
