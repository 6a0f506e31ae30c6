"""Flow matching: the shared core (paths, velocity regression, ODE solvers), functional rectified flow
(P13, :mod:`~iclr26.flows.functional`) and flow-disentangled feature importance (P16,
:mod:`~iclr26.flows.fdfi`; its statistics and baselines are in :mod:`~iclr26.flows.fdfi_stats` and
:mod:`~iclr26.flows.fdfi_baselines`)."""

from iclr26.flows.core import (
    ODE_METHODS,
    MLPVelocity,
    encode,
    fit_velocity,
    interpolate,
    odeint,
    reflow_pairs,
    sample,
)
from iclr26.flows.diffusion import FunctionalDDPM
from iclr26.flows.fdfi import FDFI, FlowDisentangler, GaussianDisentangler
from iclr26.flows.fno import FNO1d, SpectralConv1d
from iclr26.flows.functional import (
    FunctionalRectifiedFlow,
    X1Prediction,
    bimodal_functions,
    functional_loss,
    functional_sq_norm,
    gaussian_rf_velocity,
    mean_power_spectrum,
    mmd_rbf,
    relative_cov_error,
    spectrum_mse,
    straightness,
    value_density_mse,
)
from iclr26.flows.priors import (
    RBFGP,
    FourierPrior,
    GridGP,
    IIDNoise,
    LogitNormal,
    MaternGP,
    make_noise,
    matern_kernel,
    rbf_kernel,
    uniform_grid,
)

__all__ = [
    "ODE_METHODS",
    "MLPVelocity",
    "encode",
    "fit_velocity",
    "interpolate",
    "odeint",
    "reflow_pairs",
    "sample",
    "FunctionalDDPM",
    "FDFI",
    "FlowDisentangler",
    "GaussianDisentangler",
    "FNO1d",
    "SpectralConv1d",
    "FunctionalRectifiedFlow",
    "X1Prediction",
    "bimodal_functions",
    "functional_loss",
    "functional_sq_norm",
    "gaussian_rf_velocity",
    "mean_power_spectrum",
    "mmd_rbf",
    "relative_cov_error",
    "spectrum_mse",
    "straightness",
    "value_density_mse",
    "FourierPrior",
    "IIDNoise",
    "LogitNormal",
    "GridGP",
    "MaternGP",
    "RBFGP",
    "make_noise",
    "matern_kernel",
    "rbf_kernel",
    "uniform_grid",
]
