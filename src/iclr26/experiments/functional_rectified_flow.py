"""Flow Straight and Fast in Hilbert Space: Functional Rectified Flow (ICLR 2026, arXiv 2509.10384) — reproduction.

Bimodal random functions (sine 70% / triangle wave 30%, random frequency, phase, amplitude, plus a Matérn-3/2
residual) on a grid of 64 points. A time-conditioned FNO-1D is trained as functional rectified flow (GP noise,
velocity and x1-prediction), as functional flow matching (sigma_min path), as rectified flow with iid noise,
and as FRF after one reflow, against a functional DDPM baseline (same FNO, GP noise and total training steps,
DDIM sampler) and an equal-compute FRF control. Checks exact marginal preservation on a Gaussian pair,
few-step quality at equal network evaluations, straightness, mode coverage, and zero-shot sampling at twice
the training resolution.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from iclr26.core import UserError, make_generator, param
from iclr26.core.parallel import parallel_map
from iclr26.flows import (
    FNO1d,
    FunctionalDDPM,
    FunctionalRectifiedFlow,
    LogitNormal,
    MaternGP,
    bimodal_functions,
    gaussian_rf_velocity,
    make_noise,
    mean_power_spectrum,
    mmd_rbf,
    odeint,
    relative_cov_error,
    spectrum_mse,
    straightness,
    uniform_grid,
    value_density_mse,
)
from iclr26.runs import Result, RunContext, claim
from iclr26.stats import Est, exact, paired_bootstrap, t_interval

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Functional rectified flow on bimodal random functions (1-D grid): FRF with Matérn-1/2 GP noise and an "
    "FNO against functional flow matching, rectified flow with iid noise, x1-prediction and FRF + 1 reflow. "
    "Compares few-step sampling with a functional DDPM (DDIM) at equal network evaluations. "
    "Shows exact marginal preservation on a Gaussian pair, quality vs number of Euler steps, straightening "
    "by reflow, mode coverage and zero-shot sampling at twice the training resolution."
)


@dataclass
class Config:
    n_train: int = param(4000, "training functions (>= 50 so the mode classifier sees both shapes)", low=50, high=1_000_000)
    n_test: int = param(2000, "held-out real functions (metric reference; figures plot 8)", low=8, high=1_000_000)
    n_eval: int = param(500, "generated functions per evaluation (figures plot 8)", low=8, high=1_000_000)
    grid: int = param(64, "training grid size M", low=8, high=4096)
    grid_hi: int = param(128, "zero-shot evaluation grid size", low=8, high=8192)
    steps: int = param(1000, "training steps per arm (Adam, cosine decay)", low=0, high=10_000_000)
    batch_size: int = param(64, "batch size", low=1, high=65536)
    lr: float = param(1e-3, "peak learning rate", low=0.0, high=1.0, low_open=True)
    modes: int = param(16, "FNO Fourier modes", low=1, high=4096)
    width: int = param(32, "FNO channels", low=1, high=1024)
    layers: int = param(4, "FNO Fourier layers", low=1, high=64)
    noise_sigma: float = param(1.0, "Matérn-1/2 noise standard deviation", low=0.0, high=100.0, low_open=True)
    noise_length: float = param(0.1, "Matérn-1/2 noise length scale", low=0.0, high=100.0, low_open=True)
    sigma_min: float = param(1e-4, "FFM path sigma_min", low=0.0, high=1.0, high_open=True)
    time_weighting: str = param(
        "uniform", "loss weighting over t ~ U(0, 1-1e-3)", choices=["uniform", "logit_normal"]
    )
    tw_mean: float = param(
        0.0, "logit-normal weight mean (when time_weighting=logit_normal)", low=-10.0, high=10.0
    )
    tw_std: float = param(1.0, "logit-normal weight std", low=0.0, high=10.0, low_open=True)
    reflow_n: int = param(4000, "reflow couplings generated from the FRF arm", low=1, high=1_000_000)
    reflow_ode_steps: int = param(8, "RK4 steps used to generate the reflow couplings", low=1, high=100_000)
    reflow_steps: int = param(1000, "further training steps on the reflow couplings", low=0, high=10_000_000)
    nfe: list[int] = param(
        [1, 2, 4, 8, 16, 100], "Euler step counts of the NFE sweep (largest = 'many steps')",
        min_len=1, max_len=32, elem_low=1, elem_high=100_000,
    )
    second_seed: bool = param(
        False, "also train FRF and FFM with a second seed (spread of the reported FFM parity control)"
    )
    low_nfe: list[int] = param(
        [1, 2, 4, 8], "NFEs of the few-step comparison (FRF+reflow, FRF, equal-compute FRF, DDPM-DDIM)",
        min_len=1, max_len=16, elem_low=1, elem_high=100_000,
    )
    eval_seeds: int = param(3, "independent noise draws of n_eval functions per few-step evaluation", low=1, high=100)
    ddpm_param: str = param("v", "functional DDPM baseline parametrisation", choices=["v", "eps", "x0"])
    gauss_seeds: int = param(3, "FNO initialisations / data seeds of the learned Gaussian check", low=1, high=100)
    gauss_grids: list[int] = param(
        [64, 128, 256], "grids of the exact-velocity marginal check (M x M covariances)",
        min_len=1, max_len=8, elem_low=8, elem_high=2048,
    )
    gauss_samples: int = param(4096, "samples in the exact-velocity Gaussian check", low=2, high=1_000_000)
    gauss_euler: int = param(200, "Euler steps in the exact-velocity Gaussian check (>= 4: t = 1/4, 1/2, 1 are distinct steps)", low=4, high=100_000)
    gauss_learned_samples: int = param(2048, "samples drawn from the learned Gaussian flow", low=2, high=1_000_000)
    gauss_learned_rk4: int = param(
        12, "RK4 steps when sampling the learned Gaussian flow (solver error kept small)",
        low=1, high=100_000,
    )
    gauss_steps: int = param(800, "training steps of the learned Gaussian flow", low=0, high=10_000_000)


PRESETS = {
    "smoke": {
        "n_train": 200,
        "n_test": 200,
        "n_eval": 100,
        "steps": 20,
        "reflow_n": 100,
        "reflow_steps": 20,
        "reflow_ode_steps": 2,
        "nfe": [1, 2, 4],
        "second_seed": False,
        "low_nfe": [1, 2],
        "eval_seeds": 2,
        "gauss_seeds": 1,
        "gauss_grids": [32],
        "gauss_samples": 256,
        "gauss_euler": 20,
        "gauss_learned_samples": 256,
        "gauss_learned_rk4": 3,
        "gauss_steps": 20,
        "modes": 8,
        "width": 16,
        "layers": 2,
    },
    "default": {},
    "paper": {
        "n_train": 20000,
        "n_test": 5000,
        "n_eval": 5000,
        "steps": 50000,
        "reflow_n": 20000,
        "reflow_steps": 50000,
        "reflow_ode_steps": 25,
        "width": 64,
        "batch_size": 128,
    },
}


def plan(cfg: Config) -> dict:
    """What a run with ``cfg`` needs and roughly costs (``iclr26 run functional-rectified-flow --plan``)."""
    from iclr26 import plan as p

    def work(c: Config) -> tuple[float, float, float]:  # FNO training, sampling, the Gaussian checks
        fno = c.grid * c.width**2 * c.layers
        train = (c.steps * (4 + 2 * c.second_seed) + c.reflow_steps) * c.batch_size * fno
        sample = (c.n_eval * c.eval_seeds * (sum(c.nfe) + sum(c.low_nfe)) + 4 * c.reflow_n * c.reflow_ode_steps) * fno
        gauss = c.gauss_seeds * (c.gauss_steps * c.batch_size + c.gauss_samples * c.gauss_euler) * max(c.gauss_grids)
        return train, sample, gauss

    return {
        "needs": [], "device": "cpu", "gpu_memory_gb": None,
        **p.cpu_time("functional-rectified-flow", cfg, work, "training steps x batch x FNO cost, sampled functions "
                     "x NFE x FNO cost and the Gaussian checks, shares assumed 0.4 / 0.3 / 0.3",
                     shares=(0.4, 0.3, 0.3)),
        "notes": ["the functions are generated (two-mode 1-D data, Matérn noise); the experiment runs on the CPU"],
        "reference": [p.Need("MNIST, CelebA 64, Navier-Stokes (user-supplied)", "data", None,
                             "files supplied by the user (spec §7: paper scale on a GPU, ~1e5-1e6 steps; FID needs "
                             "user-supplied Inception weights)")],
    }

# The abstract's central statement: few-step sampling, straight paths, against functional diffusion
HEADLINE = "straight_fast_mmd_nfe1"
SEEDS = {"smoke": 1, "default": 1, "paper": 3}
_ONE_SEED = "one training seed per arm: the interval is over the 3 noise draws only (docs/functional-rectified-flow.md)"
#: seed-to-seed SDs measured at the default preset over training seeds 0, 1, 2 (``iclr26 run functional-rectified-flow
#: --seeds 3``, docs/functional-rectified-flow.md, "Three training seeds"); only claims whose SD is under a quarter of
#: the seed-0 margin. They let the one-seed default decide these claims (claims.apply_seed_spread).
SEED_SPREAD = {
    "straight_fast_mmd_nfe1": 0.0050, "straight_fast_spectrum_nfe1": 0.0022, "straight_fast_mmd_nfe2": 0.016,
    "straight_fast_spectrum_nfe2": 0.0016, "reflow_mmd_nfe1": 0.0057, "reflow_spectrum_nfe1": 0.037,
    "reflow_mmd_nfe2": 0.017, "reflow_spectrum_nfe2": 0.0024, "reflow_straighter": 0.00037,
}  # fmt: skip
EXPECTED: dict[str, str | tuple[str, str]] = {
    "marginals_exact": "held",
    "marginals_learned": ("inconclusive", "3 seeds: excess -0.027 [-0.10, +0.047] straddles 0 (per seed -0.011, "
                                          "-0.009, -0.062; the third seed's Monte-Carlo floor is larger)"),
    "straight_fast_mmd_nfe1": "held",  # 0.009 [0.002, 0.016], bar 0.8, null 0.95; seed SD 0.005
    "straight_fast_spectrum_nfe1": ("no power", "at one step the DDPM's spectrum is so poor (1.44) that FRF trained "
                                                "as long without reflow passes the same gate (0.42 vs bar 0.8)"),
    "straight_fast_mmd_nfe2": "held",
    "straight_fast_spectrum_nfe2": "held",
    "reflow_mmd_nfe1": "held",
    "reflow_spectrum_nfe1": "held",
    "reflow_mmd_nfe2": "held",
    "reflow_spectrum_nfe2": "held",
    "reflow_straighter": "held",
    "reflow_keeps_modes": ("inconclusive", "mode error 0.17 [0.13, 0.22] fails the 0.05 bar (the base FRF misses the "
                                           "triangle mode and reflow copies it), but on " + _ONE_SEED + "; seeds 0-2 "
                                           "give 0.17 / 0.10 / 0.16, SD 0.038 > a quarter of the margin (not held "
                                           "over the 3 seeds, docs)"),
}

# Many small FNO products: one thread per process, the independent arms in parallel worker processes
# (iclr26.core.threads applies this; iclr26.core.parallel runs the arms).
WORKLOAD = "small"

HI_RES_ARMS = ("frf", "rf_iid")  # zero-shot 2x-resolution evaluation (costly: kept to the GP-vs-iid comparison)
ARMS = ("frf", "frf_x1", "ffm", "rf_iid", "frf_reflow")
SECOND_SEED_ARMS = ("frf", "ffm")
LABELS = {
    "frf": "FRF (GP noise)",
    "frf_x1": "FRF x1-pred",
    "ffm": "FFM",
    "rf_iid": "RF iid noise",
    "frf_reflow": "FRF + reflow",
    "ctrl_frf2x": "FRF, 2x steps (ctrl)",
    "ddpm": "functional DDPM (DDIM)",
}
LOW_ARMS = ("frf", "frf_reflow", "ctrl_frf2x", "ddpm")  # few-step comparison, eval_seeds noise draws each
TRAJ_STEPS = 50  # Euler steps of the trajectories drawn in the straightness figure

Tensor = torch.Tensor


# ---------------------------------------------------------------------- data
@dataclass
class _Data:
    """Everything the arms are trained and evaluated on (sent once to every worker)."""

    train: Tensor  # [n_train, grid]
    test: Tensor  # [n_test, grid]
    test_hi: Tensor  # [n_test, grid_hi]
    clf: Any  # mode classifier (sklearn pipeline) on _features
    kfeat: int
    p_real: dict[int, float]  # classifier's triangle fraction on real functions, per grid size


def _features(f: Tensor, k: int) -> np.ndarray:
    """Mode-classifier features that compare across grids: |rfft| of the first k wavenumbers (norm='forward')
    and 25 quantiles of the amplitude-normalised values (a sine's values pile up at the extremes, a triangle's
    are spread evenly)."""
    f = f.double()
    mags = torch.fft.rfft(f, norm="forward").abs()[:, :k]
    qs = torch.linspace(0.02, 0.98, 25, dtype=torch.float64)
    quant = torch.quantile(f / f.abs().amax(1, keepdim=True).clamp_min(1e-12), qs, dim=1).T
    return torch.cat([mags, quant], dim=1).numpy()


def _data(cfg: Config, seed: int) -> tuple[_Data, dict[str, float]]:
    """Training / test functions on both grids and the mode classifier (with its own metrics)."""
    m, mh = cfg.grid, cfg.grid_hi
    train, _ = bimodal_functions(cfg.n_train, m, seed=seed)
    test, test_tri = bimodal_functions(cfg.n_test, m, seed=seed + 1)
    test_hi, _ = bimodal_functions(cfg.n_test, mh, seed=seed + 2)
    kfeat = m // 2 + 1
    clf_train, clf_lab = bimodal_functions(cfg.n_train, m, seed=seed + 3)
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=3000))
    clf.fit(_features(clf_train, kfeat), clf_lab.numpy())
    metrics = {"mode_classifier_test_acc": float(clf.score(_features(test, kfeat), test_tri.numpy()))}
    # the reference fraction is the classifier's own on real functions of the same grid (cancels its bias)
    p_real = {n.shape[1]: float(clf.predict(_features(n, kfeat)).mean()) for n in (test, test_hi)}
    metrics["p_triangle_real"], metrics["p_triangle_real_hi"] = p_real[m], p_real[mh]
    return _Data(train, test, test_hi, clf, kfeat, p_real), metrics


def _evaluate(x: Tensor, real: Tensor, data: _Data, cfg: Config) -> dict[str, float]:
    """Metrics on the real grid; the spectrum is compared on the training band 1..grid/2. Samples of a flow
    whose training diverged (non-finite values, e.g. at lr = 1) get NaN metrics, so the claims that read them are
    undecided instead of the run failing inside the mode classifier."""
    if not bool(torch.isfinite(x).all()):
        log.warning("functional-rectified-flow: %d of %d samples are not finite (training diverged?); their "
                    "metrics are NaN", int((~torch.isfinite(x)).any(dim=1).sum()), x.shape[0])
        return dict.fromkeys(("density", "spectrum", "mmd", "mode_err"), float("nan"))
    return {
        "density": value_density_mse(x, real),
        "spectrum": spectrum_mse(x, real, kmax=cfg.grid // 2),
        "mmd": mmd_rbf(x, real[: cfg.n_eval]),
        "mode_err": abs(float(data.clf.predict(_features(x, data.kfeat)).mean()) - data.p_real[x.shape[1]]),
    }


# ---------------------------------------------------------------------- claims 1-2: Gaussian pair
def _gaussian_exact(cfg: Config, seed: int) -> dict[str, float]:
    """Claim 1: the exact velocity preserves N(t m, C_t) on every grid (no training; float64)."""
    out: dict[str, float] = {}
    noise = MaternGP(cfg.noise_sigma, cfg.noise_length, nu=0.5)
    target = MaternGP(0.5, 0.2, nu=1.5)
    worst_ratio = null_worst = -float("inf")
    for m in cfg.gauss_grids:
        x = uniform_grid(m, dtype=torch.float64)
        mean1 = torch.sin(2 * torch.pi * x)
        c0, c1 = noise.covariance(x), target.covariance(x) + 1e-6 * torch.eye(m, dtype=torch.float64)
        v = gaussian_rf_velocity(mean1, c0, c1)
        g = make_generator(seed + m)
        z0 = noise.sample(cfg.gauss_samples, x, g).double()
        # The field is affine in x, so each Euler step is affine and every trajectory is the same affine
        # combination of the trajectories of the points 0, e_1, ..., e_M: integrate those M + 1 rows
        # (cheap for large batches) and map the samples through them, exactly as Euler on the samples would.
        basis = torch.cat([torch.zeros(1, m, dtype=torch.float64), torch.eye(m, dtype=torch.float64)])
        h = 1.0 / cfg.gauss_euler
        checkpoints = {
            round(0.25 * cfg.gauss_euler): 0.25,
            round(0.5 * cfg.gauss_euler): 0.5,
            cfg.gauss_euler: 1.0,
        }
        for i in range(cfg.gauss_euler):
            basis = odeint(v, basis, t0=i * h, t1=(i + 1) * h, steps=1)
            if i + 1 in checkpoints:
                t = checkpoints[i + 1]
                z = basis[0] + z0 @ (basis[1:] - basis[0])  # [N, M] Euler solution from z0
                ct = t**2 * c1 + (1 - t) ** 2 * c0
                cov_err, mean_err = relative_cov_error(z, ct, t * mean1)
                # Monte-Carlo floor: the same errors for as many direct draws from N(t m, C_t)
                chol = torch.linalg.cholesky(ct + 1e-9 * torch.eye(m, dtype=torch.float64))
                direct = (
                    t * mean1 + torch.randn(cfg.gauss_samples, m, generator=g, dtype=torch.float64) @ chol.T
                )
                f_cov, f_mean = relative_cov_error(direct, ct, t * mean1)
                out[f"gauss_exact_cov_err_m{m}_t{t}"] = cov_err
                out[f"gauss_floor_cov_err_m{m}_t{t}"] = f_cov
                out[f"gauss_exact_mean_err_m{m}_t{t}"] = mean_err
                out[f"gauss_floor_mean_err_m{m}_t{t}"] = f_mean
                worst_ratio = max(
                    worst_ratio, cov_err - (1.2 * f_cov + 0.01), mean_err - (1.2 * f_mean + 0.01)
                )
                if t == 1.0:  # null arm: no transport at all (the noise draws against the target law)
                    n_cov, n_mean = relative_cov_error(z0, ct, t * mean1)
                    null_worst = max(null_worst, n_cov - (1.2 * f_cov + 0.01), n_mean - (1.2 * f_mean + 0.01))
    out["gauss_exact_worst_excess"] = worst_ratio
    out["gauss_null_worst_excess"] = null_worst
    return out


def _gaussian_learned(cfg: Config, seed: int, i: int = 0) -> dict[str, float]:
    """Claim 2: an FRF (FNO) trained on samples of the Gaussian target approximates its covariance.

    Repetition ``i`` shifts every seed (data, FNO init, training and sampling streams) by 1000 i."""
    seed = seed + 1000 * i
    noise = MaternGP(cfg.noise_sigma, cfg.noise_length, nu=0.5)
    target = MaternGP(0.5, 0.2, nu=1.5)
    m = cfg.gauss_grids[0]
    x = uniform_grid(m, dtype=torch.float64)
    mean1 = torch.sin(2 * torch.pi * x)
    c1 = target.covariance(x)
    g = make_generator(seed + 7)
    data = (mean1 + target.sample(cfg.n_train, x, g).double()).float()
    frf = FunctionalRectifiedFlow(
        FNO1d(cfg.modes, cfg.width, cfg.layers, seed=seed),  # init from seed; the rest uses explicit generators
        noise,
        steps=cfg.gauss_steps,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        seed=seed,
    ).fit(data, desc="frf-gauss")
    z1 = frf.sample(cfg.gauss_learned_samples, steps=cfg.gauss_learned_rk4, method="rk4", seed=seed + 11)
    cov_err, mean_err = relative_cov_error(z1, c1, mean1)
    direct = mean1 + target.sample(cfg.gauss_learned_samples, x, g).double()
    f_cov, _ = relative_cov_error(direct, c1, mean1)
    # null arm: a flow that transports nothing (the noise draws themselves, through the same gate)
    z0 = frf.noise_sample(cfg.gauss_learned_samples, seed=seed + 11).double()
    null_cov, _ = relative_cov_error(z0, c1, mean1)
    return {
        f"gauss_learned_cov_err_r{i}": cov_err,
        f"gauss_learned_mean_err_r{i}": mean_err,
        f"gauss_learned_floor_r{i}": f_cov,
        f"gauss_learned_excess_r{i}": cov_err - (2 * f_cov + 0.05),
        f"gauss_null_excess_r{i}": null_cov - (2 * f_cov + 0.05),
    }


# ---------------------------------------------------------------------- method: the arms
def _noises(cfg: Config) -> tuple[MaternGP, Any]:
    return MaternGP(cfg.noise_sigma, cfg.noise_length, nu=0.5), make_noise("iid", sigma=cfg.noise_sigma)


def _fit_arm(cfg: Config, arm: str, train: Tensor, seed: int, desc: str) -> FunctionalRectifiedFlow:
    """Train one base arm from a fresh FNO initialised from ``seed``."""
    gp, iid = _noises(cfg)
    specs = {
        "frf": (gp, dict(param="velocity")),
        "frf_x1": (gp, dict(param="x1")),
        "ffm": (gp, dict(sigma_min=cfg.sigma_min)),
        "rf_iid": (iid, dict(param="velocity")),
    }
    noise, kw = specs[arm]
    return FunctionalRectifiedFlow(  # FNO init from seed; the generators inside fit carry the rest
        FNO1d(cfg.modes, cfg.width, cfg.layers, seed=seed), noise, seed=seed, **kw, **_common(cfg)
    ).fit(train, desc=desc)


def _common(cfg: Config) -> dict[str, Any]:
    tw = LogitNormal(cfg.tw_mean, cfg.tw_std) if cfg.time_weighting == "logit_normal" else None
    return dict(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, time_density=tw)


def _sweep(
    cfg: Config, frf: FunctionalRectifiedFlow, arm: str, data: _Data, seed: int
) -> tuple[dict[str, float], dict[str, Tensor]]:
    """NFE sweep, straightness and (HI_RES_ARMS) zero-shot metrics of one arm, with the samples figures use.

    Every arm is sampled from the same noise seed (the iid arm draws from its own prior)."""
    nfes = sorted(set(cfg.nfe))
    many = max(nfes)
    mt: dict[str, float] = {}
    samples: dict[str, Tensor] = {}
    for k in nfes:
        x = frf.sample(cfg.n_eval, steps=k, seed=seed + 500)
        for key, val in _evaluate(x, data.test, data, cfg).items():
            mt[f"{arm}_nfe{k}_{key}"] = val
        if k == many:
            samples[arm] = x
    per = _straightness(cfg, frf, seed)
    mt[f"{arm}_straightness"] = float(per.mean())
    samples[f"{arm}_straightness"] = per
    if arm in HI_RES_ARMS:  # zero-shot at the higher resolution (noise drawn on that grid)
        xh = frf.sample(cfg.n_eval, cfg.grid_hi, steps=many, seed=seed + 502)
        samples[f"{arm}_hi"] = xh
        for key, val in _evaluate(xh, data.test_hi, data, cfg).items():
            mt[f"{arm}_hi_{key}"] = val
        mt[f"{arm}_hi_spectrum_full"] = spectrum_mse(xh, data.test_hi)
    return mt, samples


def _straightness(cfg: Config, frf: FunctionalRectifiedFlow, seed: int) -> Tensor:
    """Per-trajectory straightness ``[n_eval // 2]`` from one noise draw shared by every GP-noise arm."""
    many = max(cfg.nfe)
    return straightness(frf.model_, frf.noise_sample(cfg.n_eval // 2, seed=seed + 501), steps=min(many, 50),
                        per_sample=True)


def _eval_seed(seed: int, j: int) -> int:
    """Noise seed of the j-th few-step evaluation draw (j = 0 is the NFE sweep's)."""
    return seed + 500 + 17 * j


def _low_sweep(cfg: Config, sampler: Any, name: str, data: _Data, seed: int) -> dict[str, float]:
    """``{name}_lo_nfe{k}_{metric}_e{j}``: ``sampler(k, noise_seed)`` at each low NFE and noise draw j."""
    mt: dict[str, float] = {}
    for k in sorted(set(cfg.low_nfe)):
        for j in range(cfg.eval_seeds):
            x = sampler(k, _eval_seed(seed, j))
            for key, val in _evaluate(x, data.test, data, cfg).items():
                mt[f"{name}_lo_nfe{k}_{key}_e{j}"] = val
    return mt


def _frf_sampler(frf: FunctionalRectifiedFlow, n: int) -> Any:
    return lambda k, s: frf.sample(n, steps=k, seed=s)


@torch.no_grad()
def _trajectory(frf: FunctionalRectifiedFlow, cfg: Config, seed: int) -> np.ndarray:
    """Euler paths of 6 noise draws at the grid point M // 3, ``[TRAJ_STEPS + 1, 6]`` (straightness figure)."""
    m = cfg.grid
    z = frf.noise_sample(6, seed=seed + 700)
    traj = [z[:, m // 3]]
    for i in range(TRAJ_STEPS):
        z = odeint(frf.model_, z, t0=i / TRAJ_STEPS, t1=(i + 1) / TRAJ_STEPS, steps=1)
        traj.append(z[:, m // 3])
    return torch.stack(traj).numpy()


def _jobs(cfg: Config) -> list[str]:
    """Independent units of work, longest first (the pool hands them out in this order)."""
    jobs = ["frf+reflow", "ddpm", "ffm", "rf_iid", "frf_x1"] + [f"gauss-{i}" for i in range(cfg.gauss_seeds)]
    if cfg.second_seed:
        jobs += [f"{a}-s2" for a in SECOND_SEED_ARMS]
    return jobs


def _run_job(job: str, shared: dict[str, Any]) -> dict[str, Any]:
    """One unit of work (in a worker process or in-process): {"metrics", "samples", "traj"} by arm.

    "frf+reflow" trains FRF, evaluates it, generates the reflow couplings from it and trains and evaluates
    the reflow model and the equal-compute control (FRF trained on for ``reflow_steps`` more steps on the
    independent coupling; both depend on FRF, so they share a job); "ddpm" is the functional diffusion
    baseline trained for ``steps + reflow_steps`` steps (FRF + reflow's total) and sampled with DDIM;
    "gauss-<i>" is repetition i of claim 2; "<arm>-s2" is the second-seed run of an arm (100 steps only).
    """
    cfg: Config = shared["cfg"]
    data: _Data = shared["data"]
    seed: int = shared["seed"]
    out: dict[str, Any] = {"metrics": {}, "samples": {}, "traj": {}}
    if job.startswith("gauss-"):
        out["metrics"][job] = _gaussian_learned(cfg, seed, int(job.split("-")[1]))
    elif job == "ddpm":
        gp, _ = _noises(cfg)
        ddpm = FunctionalDDPM(  # the same FNO initialisation as the FRF arm
            FNO1d(cfg.modes, cfg.width, cfg.layers, seed=seed), gp, param=cfg.ddpm_param, seed=seed + 7,
            steps=cfg.steps + cfg.reflow_steps, batch_size=cfg.batch_size, lr=cfg.lr,
        ).fit(data.train, desc="ddpm")
        out["metrics"]["ddpm"] = _low_sweep(
            cfg, lambda k, s: ddpm.sample(cfg.n_eval, steps=k, seed=s), "ddpm", data, seed
        )
    elif job.endswith("-s2"):
        arm = job[: -len("-s2")]
        frf = _fit_arm(cfg, arm, data.train, seed + 1000, desc=job)
        many = max(cfg.nfe)
        x = frf.sample(cfg.n_eval, steps=many, seed=seed + 500)
        out["metrics"][job] = {
            f"{arm}_s2_nfe{many}_{key}": val for key, val in _evaluate(x, data.test, data, cfg).items()
        }
    else:
        arm = "frf" if job == "frf+reflow" else job
        frf = _fit_arm(cfg, arm, data.train, seed, desc=arm)
        out["metrics"][arm], out["samples"][arm] = _sweep(cfg, frf, arm, data, seed)
        if job == "frf+reflow":
            out["traj"]["frf"] = _trajectory(frf, cfg, seed)
            # reflow: couplings from the FRF arm, then continue training its weights on them
            x0_pairs, x1_pairs = frf.reflow_pairs(
                cfg.reflow_n, steps=cfg.reflow_ode_steps, method="rk4", seed=seed + 99
            )
            gp, _ = _noises(cfg)
            reflow = FunctionalRectifiedFlow(
                frf.net_, gp, seed=seed + 5, **{**_common(cfg), "steps": cfg.reflow_steps}
            ).fit(x1_pairs, x0=x0_pairs, desc="reflow")
            name = "frf_reflow"
            out["metrics"][name], out["samples"][name] = _sweep(cfg, reflow, name, data, seed)
            out["traj"][name] = _trajectory(reflow, cfg, seed)
            # equal-compute control: FRF trained on for reflow_steps more steps (fresh cosine schedule, as
            # reflow), on the independent coupling instead of the reflow couplings
            ctrl = FunctionalRectifiedFlow(
                frf.net_, gp, seed=seed + 6, **{**_common(cfg), "steps": cfg.reflow_steps}
            ).fit(data.train, desc="ctrl-frf2x")
            for nm, model in (("frf", frf), (name, reflow), ("ctrl_frf2x", ctrl)):
                out["metrics"][f"{nm}_lo"] = _low_sweep(cfg, _frf_sampler(model, cfg.n_eval), nm, data, seed)
            # straightness of the equal-compute control (the null arm of reflow_straighter)
            per = _straightness(cfg, ctrl, seed)
            out["metrics"]["ctrl_frf2x_lo"]["ctrl_frf2x_straightness"] = float(per.mean())
            out["samples"]["ctrl_frf2x"] = {"ctrl_frf2x_straightness": per}
    log.info("%s done", job)
    return out


def run(cfg: Config, ctx: RunContext) -> Result:
    for name in ("grid", "grid_hi"):
        if getattr(cfg, name) < 8:
            raise UserError(f"{name} must be >= 8, got {getattr(cfg, name)}")
    if not cfg.nfe or min(cfg.nfe) < 1:
        raise UserError(f"nfe must be a non-empty list of positive step counts, got {cfg.nfe}")
    seed = ctx.seed
    metrics: dict[str, float] = _gaussian_exact(cfg, seed)
    data, data_metrics = _data(cfg, seed)
    log.info("gaussian check and data done")

    jobs = _jobs(cfg)
    shared = {"cfg": cfg, "data": data, "seed": seed}
    # the engine's thread plan fixes the worker processes (results do not depend on their number)
    results = dict(zip(jobs, parallel_map(_run_job, jobs, common=shared), strict=True))
    log.info("arms trained and evaluated")
    by_arm: dict[str, dict[str, float]] = {}
    samples: dict[str, Tensor] = {}
    traj: dict[str, np.ndarray] = {}
    for res in results.values():
        by_arm.update(res["metrics"])
        for s in res["samples"].values():
            samples.update(s)
        traj.update(res["traj"])
    # metrics in a fixed order whatever the scheduling: Gaussian checks, classifier, arms, seeds, controls
    for i in range(cfg.gauss_seeds):
        metrics.update(by_arm[f"gauss-{i}"])
    metrics.update(data_metrics)
    for arm in ARMS:
        metrics.update(by_arm[arm])
    for arm in ("frf", "frf_reflow", "ctrl_frf2x"):
        metrics.update(by_arm[f"{arm}_lo"])
    metrics.update(by_arm["ddpm"])
    if cfg.second_seed:
        for arm in SECOND_SEED_ARMS:
            metrics.update(by_arm[f"{arm}-s2"])
    # controls: noise only (no training) and real-vs-real
    gp, iid = _noises(cfg)
    m, mh = cfg.grid, cfg.grid_hi
    for name, noise in (("noise_gp", gp), ("noise_iid", iid)):
        for key, val in _evaluate(
            noise.sample(cfg.n_eval, uniform_grid(m), make_generator(seed + 600)), data.test, data, cfg
        ).items():
            metrics[f"{name}_{key}"] = val
    real2, _ = bimodal_functions(cfg.n_eval, m, seed=seed + 4)
    for key, val in _evaluate(real2, data.test, data, cfg).items():
        metrics[f"real_{key}"] = val
    real2_hi, _ = bimodal_functions(cfg.n_eval, mh, seed=seed + 5)
    for key, val in _evaluate(real2_hi, data.test_hi, data, cfg).items():
        metrics[f"real_hi_{key}"] = val

    nfes = sorted(set(cfg.nfe))
    straight = {k: v for k, v in samples.items() if k.endswith("_straightness")}
    claims = _claims(cfg, metrics, max(nfes), straight)
    _figures(cfg, ctx, samples, traj, metrics, data.test, data.test_hi, nfes)
    notes = (
        f"Mode classifier test accuracy {metrics['mode_classifier_test_acc']:.3f}. Time weighting: "
        f"{cfg.time_weighting}. Reflow couplings: {cfg.reflow_n} pairs from FRF with {cfg.reflow_ode_steps} RK4 "
        f"steps. Functional DDPM baseline: {cfg.ddpm_param}-prediction, cosine schedule, "
        f"{cfg.steps + cfg.reflow_steps} steps, DDIM (eta = 0). The paper's comparisons with FDP, infinity-Diff, DDO and GANO at image / PDE scale are not tested. "
        "Arms ran in the engine's worker processes (results do not depend on their number)."
    )
    return Result(metrics=metrics, claims=claims, notes=notes)


def _per_draw(mt: dict[str, float], arm: str, k: int, key: str, n: int) -> np.ndarray:
    """``key`` of ``arm`` at ``k`` steps for each of the ``n`` few-step noise draws (paired across arms)."""
    return np.array([mt[f"{arm}_lo_nfe{k}_{key}_e{j}"] for j in range(n)])


def _claims(cfg: Config, mt: dict[str, float], many: int, straight: dict[str, Tensor]) -> list:
    """Gated claims decided on an interval with a null arm; controls and the rest reported.

    Every claim on a trained flow is ``trained=True``: one training seed per arm (the Gaussian-pair check trains
    ``gauss_seeds``), so the few-step claims' intervals are over the ``eval_seeds`` noise draws (sampling
    noise only) and the engine calls them inconclusive unless ``--seeds 3`` is run.
    """
    out = []
    out.append(
        claim(
            "marginals_exact",
            "Integrating the exact Gaussian FRF velocity (Euler) reproduces N(t m, C_t) at t in {0.25, 0.5, 1} on every "
            "grid: covariance and mean errors <= 1.2 x Monte-Carlo floor + 0.01 (value = worst excess; the Monte-Carlo "
            "noise sits in the gate)",
            exact(mt["gauss_exact_worst_excess"]),
            "<=",
            0.0,
            null=exact(mt["gauss_null_worst_excess"]),
            null_what="no transport: the noise draws themselves against N(m, C_1)",
        )
    )
    exc = np.array([mt[f"gauss_learned_excess_r{i}"] for i in range(cfg.gauss_seeds)])
    nul = np.array([mt[f"gauss_null_excess_r{i}"] for i in range(cfg.gauss_seeds)])
    mt["gauss_learned_excess_mean"] = float(exc.mean())
    mt["gauss_learned_excess_sd"] = float(exc.std(ddof=1)) if len(exc) > 1 else 0.0
    out.append(
        claim(
            "marginals_learned",
            f"An FRF (FNO) trained on the Gaussian pair matches C_1: covariance error minus (2 x floor + 0.05) <= 0, "
            f"mean over {cfg.gauss_seeds} initialisations / data seeds",
            t_interval(exc, unit="seed"),
            "<=",
            0.0,
            null=t_interval(nul, unit="seed"),
            null_what="no transport: the GP noise draws against C_1",
            trained=True,
            detail="per seed " + ", ".join(f"{e:+.4f}" for e in exc),
        )
    )
    for key in ("density", "spectrum", "mmd"):
        frf = [mt[f"frf_nfe{many}_{key}"]]
        ffm = [mt[f"ffm_nfe{many}_{key}"]]
        if cfg.second_seed:
            frf.append(mt[f"frf_s2_nfe{many}_{key}"])
            ffm.append(mt[f"ffm_s2_nfe{many}_{key}"])
        spread = max(max(frf) - min(frf), max(ffm) - min(ffm))
        out.append(
            claim(
                f"ctrl_frf_matches_ffm_{key}",
                f"control: at {many} Euler steps FRF's {key} metric is no worse than FFM's (sigma_min = "
                f"{cfg.sigma_min:g}, same init and streams: nearly the same objective, so this cannot fail; "
                f"value = mean FRF - mean FFM - seed spread)",
                float(np.mean(frf) - np.mean(ffm) - spread),
                "<=",
                0.0,
                gated=False,
                detail=f"FRF {np.mean(frf):.4g}, FFM {np.mean(ffm):.4g}, spread {spread:.3g}",
            )
        )
    # headline "straight and fast": FRF + reflow vs a functional DDPM (same FNO, GP noise and total training
    # steps) sampled with DDIM at the same number of network evaluations. Interval: t over the eval_seeds noise
    # draws of the paired ratio; null arm: FRF trained for the same total steps without reflow (equal compute)
    lo = sorted(set(cfg.low_nfe))
    n_e = cfg.eval_seeds
    total = cfg.steps + cfg.reflow_steps

    def draws(arm: str, k: int, key: str) -> np.ndarray:
        return _per_draw(mt, arm, k, key, n_e)

    def ratio(a: np.ndarray, b: np.ndarray) -> Est:
        return t_interval(a / np.maximum(b, 1e-12), unit="noise draw")

    for arm in LOW_ARMS:
        for k in lo:
            for key in ("mmd", "spectrum", "density", "mode_err"):
                d = draws(arm, k, key)
                mt[f"{arm}_lo_nfe{k}_{key}_mean"], mt[f"{arm}_lo_nfe{k}_{key}_sd"] = float(d.mean()), float(d.std())
    for k in (1, 2):
        if k not in lo:
            continue
        for key in ("mmd", "spectrum"):
            rf, dd, c2 = draws("frf_reflow", k, key), draws("ddpm", k, key), draws("ctrl_frf2x", k, key)
            out.append(
                claim(
                    f"straight_fast_{key}_nfe{k}",
                    f"FRF + reflow beats a functional DDPM (same FNO, GP noise, {total} training steps) sampled by "
                    f"DDIM at {k} network evaluation(s) on {key} by >= 20% (value = reflow / DDPM, mean over "
                    f"{n_e} paired noise draws)",
                    ratio(rf, dd),
                    "<=",
                    0.8,
                    null=ratio(c2, dd),
                    null_what=f"FRF trained {total} steps without reflow (equal compute) / DDPM",
                    trained=True,
                    detail=f"reflow {rf.mean():.4g} ± {rf.std():.2g}, DDPM {dd.mean():.4g} ± {dd.std():.2g}, "
                    f"equal-compute FRF {c2.mean():.4g} ± {c2.std():.2g}",
                )
            )
    for k in lo:
        if k < 2:
            continue
        for key in ("mmd", "spectrum"):
            fr, dd = draws("frf", k, key), draws("ddpm", k, key)
            out.append(
                claim(
                    f"frf_vs_ddpm_{key}_nfe{k}",
                    f"FRF without reflow ({cfg.steps} steps) is no worse than the functional DDPM "
                    f"({total} steps) at {k} network evaluations on {key} (value = FRF / DDPM over paired noise "
                    f"draws; reported)",
                    ratio(fr, dd),
                    "<=",
                    1.0,
                    gated=False,
                    trained=True,
                    detail=f"FRF {fr.mean():.4g} ± {fr.std():.2g}, DDPM {dd.mean():.4g} ± {dd.std():.2g}",
                )
            )
    if len(lo) > 1:
        d1, dk = draws("ddpm", lo[0], "mmd").mean(), draws("ddpm", lo[-1], "mmd").mean()
        out.append(
            claim(
                "sanity_ddpm_improves_with_nfe",
                f"sanity: the DDPM baseline's MMD falls from {lo[0]} to {lo[-1]} DDIM steps (value = ratio)",
                float(dk / max(d1, 1e-12)),
                "<",
                1.0,
                gated=False,
            )
        )
    for k in (1, 2):
        if k not in lo:
            continue
        for key in ("mmd", "spectrum"):
            before, after, c2 = draws("frf", k, key), draws("frf_reflow", k, key), draws("ctrl_frf2x", k, key)
            out.append(
                claim(
                    f"reflow_{key}_nfe{k}",
                    f"FRF + reflow cuts {key} at {k} Euler step(s) by >= 20% vs FRF (value = after / before, mean "
                    f"over {n_e} paired noise draws)",
                    ratio(after, before),
                    "<=",
                    0.8,
                    null=ratio(c2, before),
                    null_what=f"FRF trained on for {cfg.reflow_steps} more steps without reflow (equal compute) / FRF",
                    trained=True,
                    detail=f"FRF {before.mean():.4g} -> reflow {after.mean():.4g}; equal-compute FRF {c2.mean():.4g}",
                )
            )

    def sratio(a: Tensor, b: Tensor) -> Est:
        return paired_bootstrap(a.numpy(), b.numpy(), lambda x, y: float(np.mean(x) / max(np.mean(y), 1e-12)),
                                unit="trajectory", seed=0)

    s_frf = straight["frf_straightness"]
    s_ref, s_ctrl = straight["frf_reflow_straightness"], straight["ctrl_frf2x_straightness"]
    out.append(
        claim(
            "reflow_straighter",
            "Reflow cuts the straightness S by >= 50% (value = S_reflow / S_FRF over the same noise draws)",
            sratio(s_ref, s_frf),
            "<=",
            0.5,
            null=sratio(s_ctrl, s_frf),
            null_what="FRF trained on for the same steps without reflow (equal compute)",
            trained=True,
        )
    )
    k2 = 2 if 2 in lo else min(lo)
    out.append(
        claim(
            "reflow_keeps_modes",
            f"FRF + reflow keeps the rare triangle mode at {k2} steps: |p_triangle - p_triangle(real)| <= 0.05 "
            f"(mean over {n_e} noise draws)",
            t_interval(draws("frf_reflow", k2, "mode_err"), unit="noise draw"),
            "<=",
            0.05,
            null=t_interval(draws("ctrl_frf2x", k2, "mode_err"), unit="noise draw"),
            null_what="FRF trained on for the same steps without reflow (equal compute)",
            trained=True,
        )
    )
    # zero-shot resolution: degradation = metric at grid_hi / metric at grid (spectrum on the training band)
    for key in ("spectrum", "mmd"):
        ratios = {a: mt[f"{a}_hi_{key}"] / max(mt[f"{a}_nfe{many}_{key}"], 1e-12) for a in HI_RES_ARMS}
        for a, r in ratios.items():
            mt[f"{a}_hi_ratio_{key}"] = r
        out.append(
            claim(
                f"zero_shot_frf_{key}",
                f"FRF trained at {cfg.grid} and sampled at {cfg.grid_hi} loses <= 25% in {key} (value = hi / lo ratio)",
                ratios["frf"],
                "<=",
                1.25,
                gated=False,
            )
        )
        out.append(
            claim(
                f"zero_shot_iid_degrades_more_{key}",
                f"RF with iid noise degrades more than FRF in {key} at {cfg.grid_hi} points (value = iid ratio / FRF ratio)",
                ratios["rf_iid"] / max(ratios["frf"], 1e-12),
                ">",
                1.0,
                gated=False,
            )
        )
    return out


def _figures(cfg, ctx, samples, traj, mt, test, test_hi, nfes) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m, mh = cfg.grid, cfg.grid_hi
    x = uniform_grid(m).numpy()
    arms = list(ARMS)
    fig, axes = plt.subplots(1, len(arms) + 1, figsize=(3.2 * (len(arms) + 1), 2.8), sharey=True)
    for i in range(8):
        axes[0].plot(x, test[i].numpy(), lw=0.8)
    axes[0].set_title("real")
    for ax, arm in zip(axes[1:], arms, strict=True):
        for i in range(8):
            ax.plot(x, samples[arm][i].numpy(), lw=0.8)
        ax.set_title(f"{LABELS[arm]} ({max(nfes)} steps)", fontsize=9)
    ctx.save_figure(fig, "samples", "Real functions and samples of each arm at the many-step reference")

    fig, axes = plt.subplots(1, 4, figsize=(15, 3.2))
    for ax, key in zip(axes, ("mmd", "spectrum", "density", "mode_err"), strict=True):
        for arm in arms:
            # MMD^2 is an unbiased estimate and can dip below 0: clip for the log axis
            ys = [max(mt[f"{arm}_nfe{k}_{key}"], 1e-5) for k in nfes]
            ax.plot(nfes, ys, marker="o", label=LABELS[arm])
        lo = sorted(set(cfg.low_nfe))
        for arm, ls in (("ctrl_frf2x", "--"), ("ddpm", "-.")):
            ys = [max(mt[f"{arm}_lo_nfe{k}_{key}_mean"], 1e-5) for k in lo]
            ax.plot(lo, ys, marker="s", ls=ls, color="k" if arm == "ddpm" else "C7", label=LABELS[arm])
        ax.axhline(max(mt[f"real_{key}"], 1e-5), color="k", ls=":", lw=1, label="real vs real")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("Euler steps (NFE)")
        ax.set_title(key)
    axes[0].legend(fontsize=7)
    ctx.save_figure(fig, "metrics_vs_nfe", "Metrics vs number of Euler steps per arm (lower is better)")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    for ax, (real, suffix, title) in zip(
        axes, ((test, "", f"M={m}"), (test_hi, "_hi", f"M={mh} (zero-shot)")), strict=True
    ):
        ax.loglog(
            np.arange(1, real.shape[1] // 2 + 1),
            mean_power_spectrum(real)[1:].numpy(),
            "k",
            lw=2,
            label="real",
        )
        for arm in arms:
            if suffix and arm not in HI_RES_ARMS:
                continue
            s = samples[f"{arm}{suffix}"] if suffix else samples[arm]
            ax.loglog(
                np.arange(1, s.shape[1] // 2 + 1), mean_power_spectrum(s)[1:].numpy(), lw=1, label=LABELS[arm]
            )
        ax.set_title(f"mean power spectrum, {title}")
        ax.set_xlabel("wavenumber")
    axes[0].legend(fontsize=7)
    ctx.save_figure(
        fig, "spectra", "Mean power spectra of real functions and samples, at the training and 2x grid"
    )

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
    axes[0].bar([LABELS[a] for a in arms], [mt[f"{a}_straightness"] for a in arms])
    axes[0].set_title("straightness S (lower = straighter)")
    axes[0].tick_params(axis="x", labelrotation=30, labelsize=7)
    for arm, color in (("frf", "C0"), ("frf_reflow", "C4")):
        axes[1].plot(np.linspace(0, 1, TRAJ_STEPS + 1), traj[arm], color=color, lw=0.9)
    axes[1].set_title(f"ODE trajectories at x={x[m // 3]:.2f} (blue FRF, purple reflow)")
    axes[1].set_xlabel("t")
    ctx.save_figure(
        fig, "straightness", "Straightness per arm and trajectories of FRF vs FRF + reflow at one x"
    )
