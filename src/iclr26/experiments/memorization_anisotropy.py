"""Detecting and Mitigating Memorization in Diffusion Models through Anisotropy of the Log-Probability
(ICLR 2026, arXiv 2601.20642) — CPU reproduction on 8x8 digits.

A small conditional DDPM (iclr26.diffusion.ddpm; SD's noise schedule and DDIM grid, so t_hi = 981 and
t_lo = 41) is trained on digits mapped to a 4x4x4 "latent" by pixel-unshuffle, with learned prompt embeddings:
memorized prompts (one image duplicated 4-32 times), normal prompts (24 images of a class) and narrow-but-novel
prompts (one digit plus jittered copies). Ground truth comes from generation: a prompt is memorized when most of
its CFG samples replicate a training image. The detectors (N: guidance norm at t_hi; C: alignment of the guidance
with the unconditional prediction at t_lo, on the same pure noise; S: their combination; Wen-k: the denoising
baseline) are compared by out-of-fold AUROC and by cost (network calls counted); S-guided prompt-embedding
mitigation is compared with an N-only objective and a random perturbation of the same norm.
S's weights are fitted by logistic regression on z-scored (N, C) with the paper's sign (gamma_N, gamma_C >= 0:
a larger norm and a larger alignment both mean memorized); that detector is the one gated and mitigated with. The
free fit (any sign) is reported only: on the MLP backbone it learns gamma_C < 0, a detector the paper does not propose.
The matched-accuracy cost ratio uses the cheapest Wen-k whose AUROC reaches S's (no tolerance, no fallback).
The denoiser is spatial by default: diffusers' ``UNet2DModel`` (channels 16/32, attention in the low-resolution
block, the prompt through its class embedding), so C is a per-position cosine over the latent's 4 channels of a
network that sees the 4x4 grid, as in SD. The FiLM MLP (``--set backbone=mlp --set hidden=128``) is ~15x cheaper
but sees the flattened latent; its 13-seed result is in docs/memorization-anisotropy.md.
Claims carry a 95 % interval over prompts (one run) or over training seeds (the default preset runs seven: data,
DDPM and noises all follow ``ctx.seed``) and a null arm: S built with a shuffled C (no alignment information),
the untrained model, the N-only detector, or the random perturbation. Claims named ``ctrl_*`` / ``sanity_*``
are controls and sanity checks, counted apart.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch

from iclr26.core import param
from iclr26.core.errors import UserError
from iclr26.data.images import load_digits
from iclr26.data.planted_duplicates import planted_duplicate_prompts
from iclr26.diffusion.ddpm import (
    DDPM,
    DDPMConfig,
    cached_ddpm,
    ddim_sample,
    images_to_latents,
    latents_to_images,
    seeded_ddpm,
)
from iclr26.diffusion.memorization import (
    CallCounter,
    denoising_score,
    memorization_score,
    mitigate_prompt,
    nearest_distance,
    nonneg_logistic,
    replication_threshold,
    select_timesteps,
)
from iclr26.runs import Result, RunContext, claim
from iclr26.stats import Est, auroc, cluster_bootstrap, exact, tpr_at_fpr

log = logging.getLogger(__name__)
_WARNED_MLP_WIDTH = False  # Config.validate: the backbone=mlp, hidden=64 warning was given

DESCRIPTION = (
    "8x8 digits as 4x4x4 latents, a small conditional DDPM (SD's schedule and DDIM grid) with learned prompt\n"
    "embeddings: planted duplicates at several counts, normal and narrow-but-novel prompts. Ground truth by\n"
    "generation (nearest-neighbour replication). N (norm at t=981), C (alignment at t=41, same pure noise) and\n"
    "their combination S against Wen et al.'s denoising baseline: out-of-fold AUROC and UNet calls per prompt;\n"
    "S-guided prompt-embedding mitigation against N-only and a random perturbation of the same norm."
)

WORKLOAD = "small"  # a 0.18M-parameter UNet on 4x4 latents: one intra-op thread (iclr26.core.threads)
PAPER_WEIGHTS = (1.0, 2.0)  # the official gamma for SD v1.4, reported on raw (unscaled) N and C
LATENT = (4, 4, 4)
UNET_COST = 15 * 128**2 * 3  # plan(): the default UNet2D (hidden 64) per call, in MLP width^2 x depth units

HEADLINE = "C1b_S_beats_N"
# one seed = one data draw, one DDPM, one set of noises. On the MLP backbone the default grew 3 -> 8 -> 13 seeds on
# 2026-12-07 (each count from iclr26.stats.seeds_to_decide + 1, fixed before its new seeds ran) and decided the
# headline not held there (docs). The default became the spatial UNet2D the same day (issue 27): a 3-seed pilot read
# S - N = 0.0098 [-0.011, 0.031], about 6 seeds would decide it, so the default runs 7, fixed at 20:16 UTC before
# seeds 3-6 were trained. A new backbone is a new organism: this is the UNet's first count, not a fourth look.
SEEDS = {"smoke": 1, "default": 7, "paper": 3}
# S - N per seed 0-6 on the UNet2D default: both signs, centred on 0
_PER = "0.0004, 0.017, 0.012, 0.0004, -0.025, -0.013, 0.003"
_C = ("C separates memorized prompts in the paper's direction in 3 of 7 seeds (AUROC of C at t_lo 0.71-0.74) and sits "
      "at or below chance in 4 (0.30-0.46; C@41 - C@981 per seed: -0.16, +0.19, +0.18, -0.04, -0.03, -0.13, +0.15), "
      "so on average the sign-constrained S adds nothing to N")
EXPECTED = {  # default preset: UNet2D, 7 seeds (t-interval over seeds); measured 2026-12-07, docs/memorization-anisotropy.md
    "C1_combination": ("inconclusive", "S - max(N, C) = -0.0006 [-0.014, 0.012] straddles -0.005 (about 44 seeds)"),
    "C1b_S_beats_N": ("inconclusive", f"{_C}: AUROC S - N = {_PER} -> -0.0006 [-0.014, 0.012] over 7 seeds, a mean "
                      "too close to 0 for any affordable seed count (null, shuffled C: -0.019 [-0.030, -0.008]). The "
                      "FiLM MLP (--set backbone=mlp --set hidden=128) decides not held over 13 seeds, with C anti-aligned"),
    "C1c_low_dup": ("inconclusive", "gain at x4 +0.011 [-0.006, 0.029] against 0.01"),
    "C2a_alignment_low_noise": ("inconclusive", f"{_C}: +0.022 [-0.113, 0.158] against +0.05"),
    "C2b_norm_high_noise": ("not held", "N separates better at t_lo than at t_hi: -0.022 [-0.041, -0.004] over 7 "
                            "seeds (6 of 7 negative)"),
    "C3a_speed_calls": ("inconclusive", "matched Wen-k / S calls 3.4 [-1.6, 8.4] over the 6 seeds where a Wen-k "
                        "reaches S (ratios 0.5 to 12.5) against 5"),
    "sanity_mitigation_score": ("no power", "S falls to 0.52 of its value, but a random perturbation of the same norm "
                                "lowers it too (0.996)"),
    "C5b_mitigation_replication": ("inconclusive", "replication cut 0.44 [0.19, 0.70] against 0.5 (random "
                                   "perturbation of the same norm 0.42)"),
    "C5c_mitigation_nn": ("no power", "NN distance +0.30 [0.08, 0.52] > 0, but a random perturbation of the same norm "
                          "passes too (+0.18)"),
    "C5d_class_consistency": ("no power", "0.88 [0.82, 0.94] >= 0.8, and a random perturbation of the same norm keeps "
                              "the class better (0.97): preservation is passed by doing little"),
    "ctrl_untrained": "held",  # |AUROC - 0.5| of the untrained model 0.051 [0.025, 0.077] <= 0.15
    "ctrl_permutation": "held",
    "sanity_planted_memorized": "held",  # 0.71 [0.58, 0.85]
    "sanity_normal_not_memorized": "held",  # 0.007 [-0.006, 0.020]
}

@dataclass
class Config:
    dup_counts: list[int] = param([4, 12, 32], "duplication counts of the memorized prompts' images", min_len=1,
                                  max_len=8, elem_low=1, elem_high=1000)
    n_per_dup: int = param(12, "memorized prompts per duplication count", low=1, high=200)
    n_normal: int = param(80, "normal prompts (several images of one class each)", low=2, high=1000)
    per_normal: int = param(12, "images per normal prompt", low=2, high=500)
    n_narrow: int = param(20, "narrow-but-novel prompts (one digit plus jittered copies)", low=0, high=500)
    per_narrow: int = param(25, "images per narrow prompt (the seed digit and its jittered copies)", low=2, high=500)
    jitter_noise: float = param(0.1, "pixel noise sd of the narrow prompts' jittered copies", low=0.0, high=1.0)
    backbone: str = param("unet2d", "denoiser: FiLM MLP, diffusers UNet2DModel or UNet2DConditionModel",
                          choices=["mlp", "unet2d", "unet2dcond"])
    hidden: int = param(64, "unet channels are hidden/4 and hidden/2; the MLP's width (128 in docs)", low=32, high=2048)
    depth: int = param(3, "MLP residual FiLM blocks", low=1, high=16)
    cond_dim: int = param(32, "prompt-embedding width", low=4, high=1024)
    train_steps: int = param(2000, "AdamW steps of DDPM training (cached afterwards)", low=1, high=1_000_000)
    batch_size: int = param(128, "training batch", low=2, high=65536)
    lr: float = param(5e-3, "peak AdamW learning rate (cosine decay)", low=0.0, high=1.0, low_open=True)
    cfg_dropout: float = param(0.1, "probability of replacing the prompt by the null embedding in training",
                               low=0.0, high=1.0, low_open=True, high_open=True)
    inference_steps: int = param(50, "DDIM steps (leading spacing, offset 1): the grid of t_hi, t_lo and Wen-k",
                                 low=3, high=1000)
    guidance: float = param(7.5, "CFG scale of the generations and of Wen-k's trajectory", low=1.0, high=50.0)
    n_samples: int = param(16, "generations per prompt for the replication ground truth", low=1, high=1000)
    rep_quantile: float = param(0.05, "replication threshold: this quantile of NN distances between distinct "
                                "training images", low=0.0, high=1.0, low_open=True, high_open=True)
    mem_fraction: float = param(0.5, "a prompt is memorized when at least this share of its samples replicate",
                                low=0.0, high=1.0, low_open=True)
    gen_num: int = param(4, "noises per prompt averaged by the detectors", low=1, high=256)
    n_splits: int = param(20, "random 50/50 prompt splits for fitting S's weights and held-out AUROCs", low=1,
                          high=1000)
    wen_ks: list[int] = param([1, 2, 5, 10, 25, 50], "Wen-k baselines: steps of the denoising trajectory",
                              min_len=1, max_len=12, elem_low=1, elem_high=1000)
    count_prompts: int = param(4, "prompts run one at a time through call-counting detectors (cost)", low=1,
                               high=1000)
    n_mitigate: int = param(24, "most memorized prompts that are mitigated (the first ones)", low=1, high=1000)
    mitigate_steps: int = param(50, "Adam steps of prompt-embedding mitigation", low=0, high=10_000)
    mitigate_lr: float = param(0.05, "Adam learning rate of mitigation", low=0.0, high=10.0, low_open=True)
    mitigate_reg: float = param(0.1, "weight of ||e - e0||^2 in the mitigation loss", low=0.0, high=100.0)
    mitigate_noises: int = param(4, "fresh noises per mitigation step", low=1, high=256)
    n_permutations: int = param(1000, "label permutations of the permutation control", low=10, high=100_000)
    sweep_points: int = param(10, "timesteps of the DDIM grid in the AUROC-vs-t sweep", low=2, high=1000)
    n_bootstrap: int = param(200, "bootstrap resamples of prompts for each claim's interval", low=20, high=100_000)
    use_cache: bool = param(True, "load / store the trained DDPM in the cache (cache_home()/diffusion)")

    def validate(self) -> None:
        if max(self.wen_ks) > self.inference_steps:
            raise UserError(f"wen_ks={self.wen_ks} must not exceed inference_steps={self.inference_steps}")
        if len(self.dup_counts) * self.n_per_dup + self.n_narrow >= 1700:
            raise UserError("too many memorized + narrow prompts for the 1797 digits (need < 1700)")
        if self.backbone != "mlp" and self.hidden % 32:
            raise UserError(f"unet backbones need hidden divisible by 32 (channels hidden/4, hidden/2), got {self.hidden}")
        global _WARNED_MLP_WIDTH
        if self.backbone == "mlp" and self.hidden == 64 and not _WARNED_MLP_WIDTH:
            # hidden's default (64) sizes the UNet; the MLP arm the docs report is 128 wide. Once per process: a run
            # validates its config more than once
            _WARNED_MLP_WIDTH = True
            log.warning("backbone=mlp with hidden=64 (the UNet's default); the MLP results in "
                        "docs/memorization-anisotropy.md use --set hidden=128")


PRESETS = {
    "smoke": {"dup_counts": [8, 32], "n_per_dup": 3, "n_normal": 10, "per_normal": 8, "n_narrow": 3,
              "per_narrow": 6, "hidden": 32, "depth": 1, "cond_dim": 8, "train_steps": 60, "batch_size": 32,
              "inference_steps": 10, "n_samples": 4, "gen_num": 2, "n_splits": 3, "wen_ks": [1, 2, 5, 10],
              "count_prompts": 2, "n_mitigate": 2, "mitigate_steps": 3,
              "n_permutations": 50, "sweep_points": 3, "n_bootstrap": 50, "use_cache": False},
    "default": {},
    "paper": {"dup_counts": [2, 4, 8, 16, 32, 64], "n_per_dup": 40, "n_normal": 500, "n_narrow": 100,
              "per_normal": 24, "hidden": 256, "depth": 4, "train_steps": 40000, "lr": 2e-3, "batch_size": 512, "n_samples": 64,
              "n_mitigate": 200, "n_bootstrap": 2000},
}  # fmt: skip


def plan(cfg: Config) -> dict:
    """What a run with ``cfg`` needs and roughly costs (``iclr26 run memorization-anisotropy --plan``)."""
    from iclr26 import plan as p

    def work(c: Config) -> tuple[float, float]:  # DDPM training; CFG network calls of generation and detection
        # cost per sample of one network call: width^2 x depth for the MLP; the UNets scale with their channels^2,
        # and the 16/32-channel UNet2D took ~15x the 128-wide, 3-block MLP per seed (196 s vs 13 s, one thread)
        net = c.hidden**2 * c.depth if c.backbone == "mlp" else UNET_COST * (c.hidden / 64) ** 2
        prompts = len(c.dup_counts) * c.n_per_dup + c.n_normal + c.n_narrow
        calls = 2 * (prompts * (c.n_samples * c.inference_steps + c.gen_num * (2 + sum(c.wen_ks) + c.sweep_points))
                     + c.n_mitigate * (3 * c.mitigate_steps * c.mitigate_noises + 2 * c.n_samples * c.inference_steps))
        return c.train_steps * c.batch_size * net, calls * net

    needs = [p.digits()]
    if cfg.backbone != "mlp":
        needs.append(p.package("diffusers", "diffusers", note=f"the {cfg.backbone} backbone"))
    return {
        "needs": needs, "device": "cpu", "gpu_memory_gb": None,
        **p.cpu_time("memorization-anisotropy", cfg, work, "DDPM steps x batch x per-call cost (width^2 x depth for "
                     "the MLP, channels^2 for the UNets; share 0.65) and CFG network calls x per-call cost (0.35)",
                     shares=(0.65, 0.35)),  # UNet seed: ~130 s of 196 s is training (2000 x 66 ms)
        "notes": ["every preset is the 8x8-digits reproduction on the CPU (the experiment uses no GPU); the paper's "
                  "Stable Diffusion setting goes through iclr26.diffusion's PipelineDenoiser, below",
                  "with use_cache a DDPM trained before with the same config is loaded (iclr26 cache list), which "
                  "skips the training share"],
        "reference": [
            p.hub_weights("CompVis/stable-diffusion-v1-4", note="the user supplies the memorized / normal prompt "
                          "lists (500 / 500 for SD v1.4)"),
            p.cuda(8, note="spec §7: the SD v1.4 UNet takes ~1.7 GB in bf16; mitigation backpropagates through it "
                   "(8 GB is our margin for that)"),
        ],
    }


def _zfit(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = train.mean(0), train.std(0) + 1e-12
    return (train - mu) / sd, (test - mu) / sd


def _logit(z: np.ndarray, y: np.ndarray, signed: bool) -> tuple[np.ndarray, float]:
    """Logistic regression (sklearn's C = 1 objective) on z-scored (N, C); ``signed``: both weights >= 0 (the
    paper's sign: a larger norm and a larger alignment both mean memorized), else free."""
    return nonneg_logistic(z, y, C=1.0, nonneg=signed)


def _fit_combination(NC: np.ndarray, gt: np.ndarray, n_splits: int, seed: int, low_mask: np.ndarray,
                     signed: bool = True) -> dict:  # fmt: skip
    """Held-out AUROCs over random 50/50 splits: S (logistic regression on z-scored N, C; with ``signed`` its
    weights keep the paper's sign) against N and C."""
    rng = np.random.default_rng(seed)
    rows = {"S": [], "N": [], "C": [], "S_low": [], "N_low": []}
    coefs = []
    oof = np.zeros(len(gt))
    for _ in range(n_splits):
        perm = rng.permutation(len(gt))
        tr, te = perm[: len(gt) // 2], perm[len(gt) // 2 :]
        if gt[tr].min() == gt[tr].max() or gt[te].min() == gt[te].max():
            continue
        ztr, zte = _zfit(NC[tr], NC[te])
        w, b = _logit(ztr, gt[tr], signed)
        coefs.append(w)
        s = zte @ w + b
        rows["S"].append(auroc(s, gt[te]))
        rows["N"].append(auroc(NC[te, 0], gt[te]))
        rows["C"].append(auroc(NC[te, 1], gt[te]))
        lm = low_mask[te]
        rows["S_low"].append(auroc(s[lm], gt[te][lm]))
        rows["N_low"].append(auroc(NC[te, 0][lm], gt[te][lm]))
    # out-of-fold S for every prompt (two folds), used by the permutation control and the narrow-prompt check
    perm = np.random.default_rng(seed + 1).permutation(len(gt))
    for a, b in ((perm[: len(gt) // 2], perm[len(gt) // 2 :]), (perm[len(gt) // 2 :], perm[: len(gt) // 2])):
        if gt[a].min() == gt[a].max():
            oof[b] = NC[b, 0]
            continue
        za, zb = _zfit(NC[a], NC[b])
        w, c = _logit(za, gt[a], signed)
        oof[b] = zb @ w + c
    out = {k: np.asarray(v, dtype=float) for k, v in rows.items()}
    out["coef"] = np.mean(coefs, 0) if coefs else np.array([np.nan, np.nan])
    out["oof"] = oof
    return out


def _fit_weights(NC: np.ndarray, gt: np.ndarray, signed: bool = True) -> tuple[float, float]:
    """Raw-unit weights (w_N, w_C) of the logistic combination fitted on z-scored (N, C) of all prompts."""
    if gt.min() == gt.max():
        return PAPER_WEIGHTS
    sd = NC.std(0) + 1e-12
    coef, _ = _logit((NC - NC.mean(0)) / sd, gt, signed)
    return float(coef[0] / sd[0]), float(coef[1] / sd[1])


def _generate(model: DDPM, emb: torch.Tensor, n: int, cfg: Config, seed: int) -> torch.Tensor:
    """n CFG samples per embedding row, as images [P, n, 8, 8]."""
    p = emb.shape[0]
    noise = torch.randn((p * n, *LATENT), generator=torch.Generator().manual_seed(seed))
    lat = ddim_sample(model, noise, emb.repeat_interleave(n, 0), steps=cfg.inference_steps, guidance=cfg.guidance)
    return latents_to_images(lat).reshape(p, n, 8, 8)


def _point(value: float, n: int, unit: str = "prompt") -> Est:
    """A null arm's value from the same run (its interval is not resampled: only its value meets the gate)."""
    return Est(value, math.nan, math.nan, unit, n, "point")


def _k_star(scores_S: np.ndarray, wen_mean: dict[int, np.ndarray], gt: np.ndarray, idx: np.ndarray) -> float:
    """Smallest Wen-k whose AUROC on the prompts ``idx`` actually reaches AUROC(S) (no tolerance: issue 27); NaN
    when none does (then there is no matched accuracy, and no cost ratio at it)."""
    a = auroc(scores_S[idx], gt[idx])
    if not np.isfinite(a):
        return math.nan
    for k in sorted(wen_mean):
        if auroc(wen_mean[k][idx], gt[idx]) >= a:
            return float(k)
    return math.nan


def run(cfg: Config, ctx: RunContext) -> Result:
    seed = ctx.seed
    X, y = load_digits()
    data = planted_duplicate_prompts(X, y, dup_counts=list(cfg.dup_counts), n_per_dup=cfg.n_per_dup,
                                     n_normal=cfg.n_normal, per_normal=cfg.per_normal, n_narrow=cfg.n_narrow,
                                     per_narrow=cfg.per_narrow, jitter_noise=cfg.jitter_noise, seed=seed)  # fmt: skip
    P = data.n_prompts
    kind = np.array(data.kind)
    dup = data.dup.numpy()
    lat = images_to_latents(data.images)
    mcfg = DDPMConfig(backbone=cfg.backbone, n_cond=P, cond_dim=cfg.cond_dim, hidden=cfg.hidden, depth=cfg.depth,
                      block_out_channels=[cfg.hidden // 4, cfg.hidden // 2], norm_num_groups=8)  # fmt: skip
    train_kw = dict(steps=cfg.train_steps, batch_size=cfg.batch_size, lr=cfg.lr, cfg_dropout=cfg.cfg_dropout,
                    seed=seed)  # fmt: skip
    model, info = cached_ddpm("memorization-digits", mcfg, lat, data.prompt_ids, train_kwargs=train_kw,
                              use_cache=cfg.use_cache)  # fmt: skip
    model.requires_grad_(False)
    ctx.note_cache("ddpm", info["cached"])
    metrics: dict[str, float] = {"n_prompts": P, "n_train_rows": float(lat.shape[0])}
    sched = model.ddim_scheduler()
    t_hi, t_lo = select_timesteps(sched, cfg.inference_steps)
    metrics.update(t_hi=t_hi, t_lo=t_lo)
    det = dict(latent_shape=LATENT, scheduler=sched)  # the detectors read the prediction type from the scheduler

    # ---------------------------------------------------------------- ground truth by generation
    with torch.no_grad():
        cond = model.embed(torch.arange(P))
        unc = model.null(1)
    samples = _generate(model, cond, cfg.n_samples, cfg, seed + 1)  # [P, n, 8, 8]
    tau = replication_threshold(data.unique_images, cfg.rep_quantile)
    nn_d = nearest_distance(samples.reshape(P * cfg.n_samples, -1), data.unique_images).reshape(P, -1)
    rep = (nn_d < tau).float().mean(1).numpy()
    gt = (rep >= cfg.mem_fraction).astype(int)
    metrics.update(tau_rep=tau, gt_memorized=float(gt.sum()))
    for k in ("mem", "normal", "narrow"):
        if (kind == k).any():
            metrics[f"gt_rate_{k}"] = float(gt[kind == k].mean())
            metrics[f"replication_{k}"] = float(rep[kind == k].mean())
    for d in cfg.dup_counts:
        metrics[f"gt_rate_mem_dup{d}"] = float(gt[(kind == "mem") & (dup == d)].mean())

    # ---------------------------------------------------------------- detectors (all prompts in one batch)
    sc = memorization_score(model, cond, unc, **det, t_hi=t_hi, t_lo=t_lo, weights=PAPER_WEIGHTS,
                            gen_num=cfg.gen_num, seed=seed, prompts_per_call=P)  # fmt: skip
    N, C = sc.norm.numpy(), sc.align.numpy()
    NC = np.stack([N, C], 1)
    low = min(cfg.dup_counts)
    low_mask = (gt == 0) | ((kind == "mem") & (dup == low))
    # the gated detector keeps the paper's sign (gamma_N, gamma_C >= 0: higher norm, higher alignment = memorized);
    # the free fit (any sign) is a reported variant: it can learn that memorized prompts are ANTI-aligned here
    fit = _fit_combination(NC, gt, cfg.n_splits, seed, low_mask, signed=True)
    fit_free = _fit_combination(NC, gt, cfg.n_splits, seed, low_mask, signed=False)
    # null arm of C1: the same combination with C shuffled across prompts (the alignment carries no information)
    C_shuf = C[np.random.default_rng(seed + 13).permutation(P)]
    fit0 = _fit_combination(np.stack([N, C_shuf], 1), gt, cfg.n_splits, seed, low_mask, signed=True)
    oof, oof0, oof_free = fit["oof"], fit0["oof"], fit_free["oof"]
    aS, aN, aC = (float(np.nanmean(fit[k])) if len(fit[k]) else float("nan") for k in ("S", "N", "C"))
    beats = float(np.mean(fit["S"] > fit["N"])) if len(fit["S"]) else float("nan")
    metrics.update(auroc_S=aS, auroc_N=aN, auroc_C=aC, S_beats_N_share=beats,
                   auroc_S_low=float(np.nanmean(fit["S_low"])) if len(fit["S_low"]) else float("nan"),
                   auroc_N_low=float(np.nanmean(fit["N_low"])) if len(fit["N_low"]) else float("nan"),
                   gamma_N=float(fit["coef"][0]), gamma_C=float(fit["coef"][1]),
                   gamma_N_free=float(fit_free["coef"][0]), gamma_C_free=float(fit_free["coef"][1]),
                   auroc_S_free_oof=auroc(oof_free, gt),
                   auroc_S_free=float(np.nanmean(fit_free["S"])) if len(fit_free["S"]) else float("nan"),
                   auroc_S_paper_weights=auroc(sc.score.numpy(), gt), auroc_N_all=auroc(N, gt), auroc_C_all=auroc(C, gt),
                   auroc_S_oof=auroc(oof, gt), auroc_S_oof_shuffledC=auroc(oof0, gt),
                   tpr1_S_closest=tpr_at_fpr(oof, gt, 0.01), tpr1_S_conservative=tpr_at_fpr(oof, gt, 0.01, "conservative"),
                   tpr3_S_closest=tpr_at_fpr(oof, gt, 0.03))  # fmt: skip

    # AUROC of N and C along the DDIM grid (same noise, one timestep for both terms)
    s2 = sched.__class__.from_config(sched.config)
    s2.set_timesteps(cfg.inference_steps)
    grid = [int(t) for t in s2.timesteps]
    sweep_idx = sorted({int(round(i)) for i in np.linspace(0, len(grid) - 1, cfg.sweep_points)} | {0, len(grid) - 3})
    sweep, sweep_scores = {}, {}
    for i in sweep_idx:
        r = memorization_score(model, cond, unc, **det, t_hi=grid[i], t_lo=grid[i], gen_num=cfg.gen_num,
                               seed=seed, prompts_per_call=P)  # fmt: skip
        sweep_scores[grid[i]] = (r.norm.numpy(), r.align.numpy())
        sweep[grid[i]] = (auroc(r.norm.numpy(), gt), auroc(r.align.numpy(), gt))
    aC_lo, aC_hi = sweep[t_lo][1], sweep[t_hi][1]
    aN_hi, aN_lo = sweep[t_hi][0], sweep[t_lo][0]
    metrics.update(auroc_C_tlo=aC_lo, auroc_C_thi=aC_hi, auroc_N_thi=aN_hi, auroc_N_tlo=aN_lo)

    # Wen-k: one trajectory of the largest k, all prompts in one batch
    kmax = max(cfg.wen_ks)
    wen = denoising_score(model, cond, unc, sched, latent_shape=LATENT, k=kmax, num_inference_steps=cfg.inference_steps,
                          guidance=cfg.guidance, gen_num=cfg.gen_num, seed=seed, prompts_per_call=P).numpy()  # fmt: skip
    wen_mean = {k: wen[:, :k].mean(1) for k in sorted(cfg.wen_ks)}
    wen_auc = {k: auroc(v, gt) for k, v in wen_mean.items()}
    for k, a in wen_auc.items():
        metrics[f"auroc_wen{k}"] = a
    everyone = np.arange(P)
    k_match = _k_star(oof, wen_mean, gt, everyone)
    reach = bool(np.isfinite(k_match))
    k_star = int(k_match) if reach else kmax  # the cost comparison's k (figures); the claim uses k_match
    metrics.update(wen_k_star=float(k_star), wen_reaches_S=float(reach))

    # ---------------------------------------------------------------- cost: network calls, one prompt at a time
    n_c = min(cfg.count_prompts, P)
    cS, cW = CallCounter(model), CallCounter(model)
    with torch.no_grad():
        for i in range(n_c):
            memorization_score(cS, cond[i : i + 1], unc, **det, t_hi=t_hi, t_lo=t_lo, gen_num=cfg.gen_num,
                               seed=seed)  # fmt: skip
            denoising_score(cW, cond[i : i + 1], unc, sched, latent_shape=LATENT, k=k_star,
                            num_inference_steps=cfg.inference_steps, guidance=cfg.guidance, gen_num=cfg.gen_num,
                            seed=seed)  # fmt: skip
    calls_S, calls_W = cS.calls / n_c, cW.calls / n_c
    calls_per_wen_step = calls_W / k_star
    metrics.update(calls_S=calls_S, calls_wen=calls_W, calls_ratio_at_k_star=calls_W / calls_S)

    # ---------------------------------------------------------------- narrow prompts (soft)
    nonmem = gt == 0
    normal_nm = (kind == "normal") & nonmem
    narrow_nm = (kind == "narrow") & nonmem
    fpr_S = fpr_N = float("nan")
    if normal_nm.sum() >= 5 and narrow_nm.any():
        thS, thN = np.quantile(oof[normal_nm], 0.95), np.quantile(N[normal_nm], 0.95)
        fpr_S, fpr_N = float((oof[narrow_nm] > thS).mean()), float((N[narrow_nm] > thN).mean())
    metrics.update(narrow_fpr_S=fpr_S, narrow_fpr_N=fpr_N)

    # ---------------------------------------------------------------- mitigation
    mem_ids = np.nonzero(gt == 1)[0][: cfg.n_mitigate]
    mit: dict[str, dict[str, np.ndarray]] = {}
    grid_imgs = None
    if len(mem_ids):
        e0 = cond[torch.as_tensor(mem_ids)]
        # the S that is minimised is the gated detector: the sign-constrained logistic combination fitted on all
        # prompts, in raw units (w = gamma / sd of each z-scored term); the stop is its 95th percentile on normal
        # prompts. (The paper's raw weights (1, 2) are for SD's scales.)
        w_mit = _fit_weights(NC, gt, signed=True)
        s_mit = NC @ np.asarray(w_mit)
        tau_S = float(np.quantile(s_mit[kind == "normal"], 0.95)) if (kind == "normal").any() else None
        metrics.update(mit_weight_N=w_mit[0], mit_weight_C=w_mit[1])
        with torch.enable_grad():
            eS, histS = mitigate_prompt(model, e0, unc, **det, t_hi=t_hi, t_lo=t_lo, weights=w_mit,
                                        objective="score", steps=cfg.mitigate_steps, lr=cfg.mitigate_lr, reg=cfg.mitigate_reg,
                                        n_noise=cfg.mitigate_noises, target=tau_S, seed=seed)  # fmt: skip
            eN, _ = mitigate_prompt(model, e0, unc, **det, t_hi=t_hi, t_lo=t_lo, objective="norm",
                                    steps=cfg.mitigate_steps, lr=cfg.mitigate_lr, reg=cfg.mitigate_reg,
                                    n_noise=cfg.mitigate_noises, seed=seed)  # fmt: skip
        g = torch.Generator().manual_seed(seed + 7)
        dirs = torch.randn(e0.shape, generator=g)
        delta = (eS - e0).norm(dim=1, keepdim=True)
        eR = e0 + dirs / dirs.norm(dim=1, keepdim=True) * delta  # random direction, same ||e - e0|| per prompt
        clf = _digit_classifier(X, y, seed)
        labels = data.label.numpy()[mem_ids]
        for name, e in (("before", e0), ("score", eS), ("norm", eN), ("random", eR)):
            imgs = _generate(model, e, cfg.n_samples, cfg, seed + 1)  # the same noises as the ground truth
            d = nearest_distance(imgs.reshape(-1, 64), data.unique_images).reshape(len(mem_ids), -1)
            flat = np.nan_to_num(imgs.reshape(-1, 64).numpy())  # a diverged mitigation (huge lr) gives NaN images
            pred = clf.predict(flat).reshape(len(mem_ids), -1)
            s_after = memorization_score(model, e, unc, **det, t_hi=t_hi, t_lo=t_lo, weights=w_mit,
                                         gen_num=cfg.gen_num, seed=seed + 3, prompts_per_call=len(mem_ids))  # fmt: skip
            # per mitigated prompt (the unit of the mitigation claims' intervals)
            mit[name] = {"replication": (d < tau).float().mean(1).numpy(), "nn_dist": d.mean(1).numpy(),
                         "class_consistency": (pred == labels[:, None]).mean(1),
                         "score": s_after.score.numpy(), "delta_norm": (e - e0).norm(dim=1).numpy()}  # fmt: skip
            if name in ("before", "score"):
                grid_imgs = (grid_imgs or {}) | {name: imgs[:, 0]}
        for name, v in mit.items():
            for k2, val in v.items():
                metrics[f"mit_{name}_{k2}"] = float(np.mean(val))
        metrics["mitigate_steps_used"] = float(len(histS))

    # ---------------------------------------------------------------- untrained model (null arm of C2, control)
    untrained = seeded_ddpm(mcfg, seed + 11).eval().requires_grad_(False)
    g_init = torch.Generator().manual_seed(seed + 12)
    for mod in untrained.modules():  # zero-initialised output layers would make the prompt irrelevant (N = 0)
        if isinstance(mod, torch.nn.Linear) and not bool(mod.weight.any()):
            bound = 1 / math.sqrt(mod.in_features)
            with torch.no_grad():
                mod.weight.copy_(torch.empty_like(mod.weight).uniform_(-bound, bound, generator=g_init))
    with torch.no_grad():
        ue, un = untrained.embed(torch.arange(P)), untrained.null(1)
        su = memorization_score(untrained, ue, un, **det, t_hi=t_hi, t_lo=t_lo, gen_num=cfg.gen_num,
                                seed=seed, prompts_per_call=P)  # fmt: skip
        su_swap = memorization_score(untrained, ue, un, **det, t_hi=t_lo, t_lo=t_hi, gen_num=cfg.gen_num,
                                     seed=seed, prompts_per_call=P)  # norm at t_lo, alignment at t_hi  # fmt: skip
    uN_hi, uC_lo, uN_lo, uC_hi = (v.numpy() for v in (su.norm, su.align, su_swap.norm, su_swap.align))
    fit_u = _fit_combination(np.stack([uN_hi, uC_lo], 1), gt, cfg.n_splits, seed, low_mask, signed=True)
    metrics["ctrl_untrained_auroc_S"] = auroc(fit_u["oof"], gt)
    metrics["ctrl_untrained_mean_N"] = float(su.norm.mean())  # > 0: the prompt does reach the untrained output
    rng = np.random.default_rng(seed + 5)
    a_obs = auroc(oof, gt)
    perm_aucs = np.array([auroc(oof, rng.permutation(gt)) for _ in range(cfg.n_permutations)])
    p_perm = float((1 + np.sum(perm_aucs >= a_obs)) / (1 + cfg.n_permutations)) if np.isfinite(a_obs) else float("nan")
    metrics["ctrl_permutation_p"] = p_perm

    # ---------------------------------------------------------------- claims: intervals over prompts
    def boot(stat, rows: np.ndarray) -> Est:
        return cluster_bootstrap(lambda ix: stat(rows[ix]), rows, unit="prompt", n_resamples=cfg.n_bootstrap,
                                 seed=seed)  # fmt: skip

    def auc_gap(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None):
        """AUROC(a) - AUROC(b) (or - max(AUROC b, AUROC c)) on a set of prompts."""
        def f(ix: np.ndarray) -> float:
            base = auroc(b[ix], gt[ix]) if c is None else max(auroc(b[ix], gt[ix]), auroc(c[ix], gt[ix]))
            return auroc(a[ix], gt[ix]) - base
        return f

    low_rows = np.flatnonzero(low_mask)
    Nlo, Clo, Nhi, Chi = sweep_scores[t_lo][0], sweep_scores[t_lo][1], sweep_scores[t_hi][0], sweep_scores[t_hi][1]
    ratio = lambda sc_: lambda ix: _k_star(sc_, wen_mean, gt, ix) * calls_per_wen_step / calls_S  # noqa: E731
    est = {
        "C1": (boot(auc_gap(oof, N, C), everyone), _point(auc_gap(oof0, N, C_shuf)(everyone), P)),
        "C1b": (boot(auc_gap(oof, N), everyone), _point(auc_gap(oof0, N)(everyone), P)),
        "C1b_free": boot(auc_gap(oof_free, N), everyone),
        "C1c": (boot(auc_gap(oof, N), low_rows), _point(auc_gap(oof0, N)(low_rows), len(low_rows))),
        "C2a": (boot(auc_gap(Clo, Chi), everyone), _point(auc_gap(uC_lo, uC_hi)(everyone), P)),
        "C2b": (boot(auc_gap(Nhi, Nlo), everyone), _point(auc_gap(uN_hi, uN_lo)(everyone), P)),
        "C3a": (boot(ratio(oof), everyone), _point(ratio(N)(everyone), P)),
        "ctrl_untrained": boot(lambda ix: abs(auroc(fit_u["oof"][ix], gt[ix]) - 0.5), everyone),
    }
    if mit:
        rows = np.arange(len(mem_ids))
        b_, s_, r_ = mit["before"], mit["score"], mit["random"]

        def mit_stats(arm: dict[str, np.ndarray]) -> dict:
            return {
                "C5a": lambda ix: (float(arm["score"][ix].mean() / b_["score"][ix].mean())
                                   if b_["score"][ix].mean() != 0 else math.nan),  # S = 0: nothing to lower
                "C5b": lambda ix: (1 - float(arm["replication"][ix].mean() / b_["replication"][ix].mean())
                                   if b_["replication"][ix].mean() > 0 else math.nan),
                "C5c": lambda ix: float((arm["nn_dist"][ix] - b_["nn_dist"][ix]).mean()),
                "C5d": lambda ix: float(arm["class_consistency"][ix].mean()),
            }  # fmt: skip

        fs, fr = mit_stats(s_), mit_stats(r_)
        for k in fs:
            est[k] = (boot(fs[k], rows), _point(fr[k](rows), len(rows), "prompt"))
    claims = _claims(cfg, metrics, est, reach, k_star, fpr_S, fpr_N)
    _figures(ctx, cfg, N, C, gt, kind, dup, fit, wen, wen_auc, k_star, sweep, t_hi, t_lo, metrics, grid_imgs, mem_ids,
             data, samples)  # fmt: skip
    notes = [
        f"Ground truth: {int(gt.sum())}/{P} prompts memorized (>= {cfg.mem_fraction:.0%} of {cfg.n_samples} CFG "
        f"samples within tau={tau:.3f} of a training image). DDPM {'loaded from cache' if info['cached'] else 'trained'}."
        f" t_hi={t_hi}, t_lo={t_lo}.",
        f"S weights on z-scored (N, C), paper's sign (>= 0, gated): {fit['coef'][0]:+.2f}, {fit['coef'][1]:+.2f}; "
        f"free fit (reported): {fit_free['coef'][0]:+.2f}, {fit_free['coef'][1]:+.2f}.",
        f"Wen-k reached AUROC(S) at k={k_star}." if reach else
        f"No Wen-k (k <= {kmax}) reached AUROC(S): no matched accuracy, so C3a is undefined.",
    ]
    undefined = sorted(k for k, v in metrics.items() if not np.isfinite(v))
    if undefined:  # e.g. an AUROC when the ground truth holds one class only: left out, named here
        notes.append("Undefined at this preset (one class only or no prompt of the kind): " + ", ".join(undefined) + ".")
    metrics = {k: float(v) for k, v in metrics.items() if np.isfinite(v)}
    return Result(metrics=metrics, claims=claims, notes=" ".join(notes))


def _digit_classifier(X: torch.Tensor, y: torch.Tensor, seed: int):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=500, random_state=seed).fit(X.reshape(len(X), -1).numpy(), y.numpy())


def _claims(cfg, m, est, reach, k_star, fpr_S, fpr_N):
    sh = "S fitted on (N, shuffled C): no alignment information"
    un = "the untrained (random-weight) model"
    cl = [
        claim("C1_combination", "out-of-fold AUROC of S (fitted combination of N and C) >= max(AUROC N, AUROC C) - 0.005",
              est["C1"][0], ">=", -0.005, null=est["C1"][1], null_what=sh, trained=True,
              detail=f"S {m['auroc_S_oof']:.3f}, N {m['auroc_N_all']:.3f}, C {m['auroc_C_all']:.3f}"),
        claim("C1b_S_beats_N", "S (weights with the paper's sign, gamma_N, gamma_C >= 0) has a higher out-of-fold "
              "AUROC than the norm N alone (AUROC S - AUROC N > 0)",
              est["C1b"][0], ">", 0.0, null=est["C1b"][1], null_what=sh, trained=True,
              detail=f"S beats N in {m['S_beats_N_share']:.0%} of {cfg.n_splits} random splits; gamma (z-scored) "
              f"{m['gamma_N']:+.2f}, {m['gamma_C']:+.2f}; paper's raw gamma (1, 2): AUROC {m['auroc_S_paper_weights']:.3f}"),
        claim("C1b_free_fit", "variant (reported): S with freely fitted weights (any sign) beats N",
              est["C1b_free"], ">", 0.0, gated=False, trained=True,
              detail=f"gamma (z-scored) {m['gamma_N_free']:+.2f}, {m['gamma_C_free']:+.2f}: a negative gamma_C "
              "is a detector the paper does not propose"),
        claim("C1c_low_dup", f"the alignment term helps at low duplication (x{min(cfg.dup_counts)}): AUROC gain of S "
              "over N on those prompts vs all non-memorized >= 0.01", est["C1c"][0], ">=", 0.01, null=est["C1c"][1],
              null_what=sh, trained=True),
        claim("C2a_alignment_low_noise", "AUROC of C at t_lo exceeds AUROC of C at t_hi by >= 0.05", est["C2a"][0],
              ">=", 0.05, null=est["C2a"][1], null_what=un, trained=True,
              detail=f"C@{m['t_lo']:.0f} {m['auroc_C_tlo']:.3f}, C@{m['t_hi']:.0f} {m['auroc_C_thi']:.3f}"),
        claim("C2b_norm_high_noise", "AUROC of N at t_hi >= AUROC of N at t_lo", est["C2b"][0], ">=", 0.0,
              null=est["C2b"][1], null_what=un, trained=True,
              detail=f"N@hi {m['auroc_N_thi']:.3f}, N@lo {m['auroc_N_tlo']:.3f}"),
        claim("C3a_speed_calls", "at matched accuracy (smallest Wen-k with AUROC >= AUROC(S)) the denoising "
              "baseline costs >= 5x the network calls of S per prompt; undefined when no Wen-k reaches S",
              est["C3a"][0], ">=", 5.0, null=est["C3a"][1], trained=True,
              null_what="the norm N alone (its matched Wen-k against the same 2 calls)",
              detail=f"Wen-{k_star} matched" if reach else "no Wen-k reached AUROC(S): undefined"),
        claim("C4_narrow", "at 5% FPR on normal prompts, S flags fewer non-memorized narrow prompts than N "
              "(soft: reported)", fpr_N - fpr_S, ">", 0.0, gated=False, detail=f"S {fpr_S:.2f}, N {fpr_N:.2f}"),
    ]
    rnd = "a random embedding perturbation of the same norm per prompt"
    if "C5a" in est:
        cl += [
            # the mitigation descends S, so that S fell is the optimiser doing its job, not a finding (issue 27):
            # a precondition for C5b-C5d, kept with its null arm
            claim("sanity_mitigation_score", "sanity: S-guided mitigation lowers the memorization score S of memorized "
                  "prompts (mean S after / before < 1)", est["C5a"][0], "<", 1.0, null=est["C5a"][1], null_what=rnd,
                  trained=True, why="the mitigation minimises S; C5b-C5d read what that does to the generations"),
            claim("C5b_mitigation_replication", "S-guided mitigation cuts the replication rate of memorized prompts "
                  "by >= 50% (relative)", est["C5b"][0], ">=", 0.5, null=est["C5b"][1], null_what=rnd, trained=True,
                  detail=f"{m['mit_before_replication']:.2f} -> {m['mit_score_replication']:.2f} "
                  f"(random {m['mit_random_replication']:.2f}, N-only {m['mit_norm_replication']:.2f})"),
            claim("C5c_mitigation_nn", "... and raises the mean nearest-training-image distance of the generations",
                  est["C5c"][0], ">", 0.0, null=est["C5c"][1], null_what=rnd, trained=True,
                  detail=f"{m['mit_before_nn_dist']:.3f} -> {m['mit_score_nn_dist']:.3f}"),
            claim("C5d_class_consistency", "mitigated generations keep the prompt's class >= 80% of the time",
                  est["C5d"][0], ">=", 0.8, null=est["C5d"][1], null_what=rnd, trained=True),
        ]
    cl += [
        claim("ctrl_untrained", "control: an untrained model's S has out-of-fold AUROC within 0.15 of chance",
              est["ctrl_untrained"], "<=", 0.15, why="guards against the prompt ids leaking the labels; "
              "the untrained model is also C2's null arm", detail=f"AUROC {m['ctrl_untrained_auroc_S']:.3f}"),
        claim("ctrl_permutation", "control: label-permutation p-value of the out-of-fold S AUROC < 0.01",
              exact(m["ctrl_permutation_p"], why="permutation p-value"), "<", 0.01,
              why=f"a permutation test ({cfg.n_permutations} label permutations) is its own null"),
        claim("sanity_planted_memorized", f"sanity: the most duplicated prompts (x{max(cfg.dup_counts)}) are memorized "
              "by the generation ground truth (share >= 0.5)", exact(m[f"gt_rate_mem_dup{max(cfg.dup_counts)}"],
              why="share of a fixed prompt set"), ">=", 0.5, why="precondition: duplication plants memorization"),
        claim("sanity_normal_not_memorized", "sanity: normal prompts are rarely memorized (share <= 0.1)",
              exact(m.get("gt_rate_normal", float("nan")), why="share of a fixed prompt set"), "<=", 0.1,
              why="precondition: the ground truth does not flag ordinary prompts"),
    ]
    return cl


def _figures(ctx, cfg, N, C, gt, kind, dup, fit, wen, wen_auc, k_star, sweep, t_hi, t_lo, m, grid_imgs, mem_ids,
             data, samples) -> None:  # fmt: skip
    import matplotlib.pyplot as plt
    from sklearn.metrics import roc_curve

    if 0 < gt.sum() < len(gt):
        fig, ax = plt.subplots(figsize=(4.5, 4))
        for name, s in (("S (out-of-fold)", fit["oof"]), ("N @ t_hi", N), ("C @ t_lo", C),
                        (f"Wen-{k_star}", wen[:, :k_star].mean(1))):  # fmt: skip
            f, t, _ = roc_curve(gt, s)
            ax.plot(f, t, label=f"{name}: {auroc(s, gt):.3f}")
        ax.plot([0, 1], [0, 1], "k:", lw=0.8)
        ax.set(xlabel="FPR", ylabel="TPR", title="ROC (ground truth by generation)")
        ax.legend(fontsize=7)
        ctx.save_figure(fig, "roc", "ROC curves of S, N, C and the matched-accuracy denoising baseline.")

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    groups = [("normal", kind == "normal"), ("narrow", kind == "narrow")] + [
        (f"mem x{d}", (kind == "mem") & (dup == d)) for d in sorted(cfg.dup_counts)]
    groups = [(n, g) for n, g in groups if g.any()]
    for ax, vals, name in ((axes[0], N, "N (norm at t_hi)"), (axes[1], C, "C (alignment at t_lo)")):
        ax.boxplot([vals[g] for _, g in groups], tick_labels=[n for n, _ in groups])
        ax.set_title(name, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    ctx.save_figure(fig, "score_vs_duplication", "N and C by prompt kind and duplication count.")

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    ts = sorted(sweep)
    ax.plot(ts, [sweep[t][0] for t in ts], "o-", label="N(t)")
    ax.plot(ts, [sweep[t][1] for t in ts], "s-", label="C(t)")
    ax.axvline(t_hi, color="gray", ls=":")
    ax.axvline(t_lo, color="gray", ls="--")
    ax.set(xlabel="timestep t", ylabel="AUROC", title="AUROC along the DDIM grid")
    ax.legend(fontsize=8)
    ctx.save_figure(fig, "auroc_vs_t", "AUROC of the norm and alignment terms at each timestep (same pure noise).")

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    ax.scatter(N[gt == 0], C[gt == 0], s=10, label="not memorized")
    ax.scatter(N[gt == 1], C[gt == 1], s=10, label="memorized")
    ax.set(xlabel="N", ylabel="C", title="N vs C")
    ax.legend(fontsize=8)
    ctx.save_figure(fig, "n_vs_c", "Norm against alignment, coloured by the generation ground truth.")

    fig, ax = plt.subplots(figsize=(4, 3.2))
    ax.bar(["S", f"Wen-{k_star}"], [m["calls_S"], m["calls_wen"]], color=["C0", "C1"])
    ax.set_ylabel("network calls per prompt")
    ctx.save_figure(fig, "timing", "Cost per prompt: network calls of S and of the denoising baseline (counted).")

    if grid_imgs is not None and len(mem_ids):
        k = min(8, len(mem_ids))
        before, after = grid_imgs["before"][:k], grid_imgs["score"][:k]
        nn_before = data.unique_images[torch.cdist(before.reshape(k, -1), data.unique_images).argmin(1)]
        nn_after = data.unique_images[torch.cdist(after.reshape(k, -1), data.unique_images).argmin(1)]
        fig, axes = plt.subplots(4, k, figsize=(1.2 * k, 5), squeeze=False)
        for j in range(k):
            for i, (im, lab) in enumerate(((before[j], "memorized"), (nn_before[j], "nearest train"),
                                           (after[j], "mitigated"), (nn_after[j], "nearest train"))):  # fmt: skip
                axes[i, j].imshow(im.reshape(8, 8).numpy(), cmap="gray", vmin=0, vmax=1)
                axes[i, j].set_xticks([])
                axes[i, j].set_yticks([])
                if j == 0:
                    axes[i, j].set_ylabel(lab, fontsize=7)
        ctx.save_figure(fig, "mitigation_grid", "Generations of memorized prompts before and after S-guided "
                        "mitigation, each beside its nearest training image.")  # fmt: skip
