"""The squared-exponential (RBF) GP prior of iclr26.flows: covariance against scikit-learn's RBF kernel,
empirical covariance of its samples, grid consistency, and input errors."""

from __future__ import annotations

import pytest
import torch
from sklearn.gaussian_process.kernels import RBF

from iclr26.core import UserError
from iclr26.flows import RBFGP, GridGP, MaternGP, make_noise, matern_kernel, rbf_kernel, uniform_grid


@pytest.mark.parametrize(("sigma", "length", "m"), [(1.0, 0.1, 32), (0.7, 0.25, 50), (2.0, 0.03, 17)])
def test_rbf_covariance_matches_sklearn(sigma, length, m):
    x = uniform_grid(m, dtype=torch.float64)
    ref = sigma**2 * RBF(length_scale=length)(x.numpy()[:, None])  # sklearn's k = exp(-d^2 / (2 l^2))
    gp = RBFGP(sigma, length)
    torch.testing.assert_close(gp.covariance(x), torch.from_numpy(ref), rtol=1e-12, atol=1e-14)
    # the cross-kernel between two different point sets, too
    y = torch.tensor([0.0, 0.013, 0.5, 0.97], dtype=torch.float64)
    ref_xy = sigma**2 * RBF(length_scale=length)(x.numpy()[:, None], y.numpy()[:, None])
    torch.testing.assert_close(
        rbf_kernel(x, y, sigma=sigma, length=length), torch.from_numpy(ref_xy), rtol=1e-12, atol=1e-14
    )


def test_rbf_samples_have_the_kernel_covariance_and_not_materns():
    x = uniform_grid(24, dtype=torch.float64)
    sigma, ell = 0.8, 0.12
    gp = RBFGP(sigma, ell)
    f = gp.sample(40000, x, torch.Generator().manual_seed(0)).double()
    assert f.shape == (40000, 24)
    emp = f.T @ f / f.shape[0]  # zero-mean prior
    k = torch.from_numpy(sigma**2 * RBF(length_scale=ell)(x.numpy()[:, None]))
    # per-entry standard error <= sqrt(2/n)·sigma² ≈ 0.007·sigma²; 0.03·sigma² is > 4 standard errors
    assert (emp - k).abs().max() < 0.03 * sigma**2
    assert f.mean(0).abs().max() < 0.02
    # a Matérn-1/2 GP of the same length scale is rejected by the same check (the check can fail)
    k_matern = matern_kernel(x, x, sigma=sigma, length=ell, nu=0.5)
    assert (emp - k_matern).abs().max() > 0.15 * sigma**2


def test_rbf_is_grid_consistent_and_deterministic():
    gp = RBFGP(1.0, 0.1)
    coarse, fine = uniform_grid(32, dtype=torch.float64), uniform_grid(128, dtype=torch.float64)
    # the grid of 128 contains the grid of 32: the covariance restricts exactly, at any resolution
    torch.testing.assert_close(gp.covariance(fine)[::4, ::4], gp.covariance(coarse), rtol=0, atol=0)
    for m in (32, 128, 400):
        var = gp.sample(20000, uniform_grid(m), torch.Generator().manual_seed(m)).var(0)
        assert float((var - 1.0).abs().max()) < 0.06, m  # pointwise variance sigma² on every grid
    a = gp.sample(3, coarse, torch.Generator().manual_seed(1))
    b = gp.sample(3, coarse, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and a.dtype == torch.float32
    s = gp.sampler(fine)
    assert s(5, torch.Generator().manual_seed(0)).shape == (5, 128)


def test_make_noise_and_base_class():
    gp = make_noise("rbf", sigma=0.5, length=0.2)
    assert isinstance(gp, RBFGP) and isinstance(gp, GridGP) and isinstance(MaternGP(), GridGP)
    assert (gp.sigma, gp.length) == (0.5, 0.2) and repr(gp) == "RBFGP(sigma=0.5, length=0.2)"
    with pytest.raises(UserError, match="allowed: .*rbf"):
        make_noise("squared")


@pytest.mark.parametrize("kw", [{"sigma": 0.0}, {"length": -1.0}, {"jitter": 0.0}])
def test_rbf_bad_parameters_are_user_errors(kw):
    with pytest.raises(UserError, match="RBFGP"):
        RBFGP(**kw)


def test_rbf_cholesky_failure_is_a_user_error():
    # without enough jitter the near-singular RBF matrix has no Cholesky factor: say what to change
    gp = RBFGP(1.0, 0.5, jitter=1e-300)
    with pytest.raises(UserError, match="larger jitter"):
        gp.sample(1, uniform_grid(256), torch.Generator())
