"""Oracle tests for functional rectified flow (iclr26.flows.priors / fno / functional)."""

import math

import pytest
import torch

from iclr26.core import UserError
from iclr26.flows import (
    FNO1d,
    FourierPrior,
    FunctionalRectifiedFlow,
    IIDNoise,
    LogitNormal,
    MaternGP,
    SpectralConv1d,
    X1Prediction,
    bimodal_functions,
    functional_loss,
    functional_sq_norm,
    gaussian_rf_velocity,
    interpolate,
    make_noise,
    matern_kernel,
    mmd_rbf,
    odeint,
    relative_cov_error,
    spectrum_mse,
    straightness,
    uniform_grid,
)


def test_matern_half_kernel_and_empirical_covariance():
    x = uniform_grid(24, dtype=torch.float64)
    sigma, ell = 0.7, 0.15
    k = matern_kernel(x, x, sigma=sigma, length=ell, nu=0.5)
    torch.testing.assert_close(k, sigma**2 * torch.exp(-(x[:, None] - x[None]).abs() / ell))
    gp = MaternGP(sigma, ell, nu=0.5)
    f = gp.sample(40000, x, torch.Generator().manual_seed(0)).double()
    emp = f.T @ f / f.shape[0]  # zero-mean prior
    assert (emp - k).abs().max() < 0.03 * sigma**2
    assert f.mean(0).abs().max() < 0.02
    # same samples for the same generator seed; other grids work
    torch.testing.assert_close(
        gp.sample(3, x, torch.Generator().manual_seed(1)), gp.sample(3, x, torch.Generator().manual_seed(1))
    )
    assert gp.sample(2, uniform_grid(50), torch.Generator()).shape == (2, 50)


def test_matern_three_halves_formula():
    x = torch.tensor([0.0, 0.05, 0.3], dtype=torch.float64)
    r = (x[:, None] - x[None]).abs() / 0.1
    ref = (1 + math.sqrt(3) * r) * torch.exp(-math.sqrt(3) * r)
    torch.testing.assert_close(matern_kernel(x, x, length=0.1, nu=1.5), ref)
    with pytest.raises(UserError):
        MaternGP(nu=0.7)


@pytest.mark.parametrize("m", [32, 33])
def test_fourier_prior_spectrum_matches_design(m):
    prior = FourierPrior(scale=2.0)
    f = prior.sample(30000, uniform_grid(m), torch.Generator().manual_seed(0)).double()
    emp = torch.fft.rfft(f, norm="forward").abs().pow(2).mean(0)
    design = prior.spectrum(m)
    k = torch.arange(m // 2 + 1).double()
    # the transcribed design: a(k)^2 = scale^2 r/b, r = 1/(k^2+2), b = 1/(k^2+0.3) + ((k^2+2)/33^2)^(1/4)
    ref = 4.0 * (1 / (k**2 + 2)) / (1 / (k**2 + 0.3) + ((k**2 + 2) / 33**2) ** 0.25)
    torch.testing.assert_close(design, ref)
    assert ((emp / design) - 1).abs().max() < 0.05


def test_fourier_prior_is_grid_consistent_and_iid_is_not():
    prior = FourierPrior()
    var64 = prior.sample(20000, uniform_grid(64), torch.Generator().manual_seed(0)).var()
    var256 = prior.sample(20000, uniform_grid(256), torch.Generator().manual_seed(0)).var()
    assert abs(float(var256 / var64) - 1) < 0.1  # trace-class: pointwise variance converges
    # white noise: low-frequency power shrinks like 1/M (not a measure on L^2)
    iid = IIDNoise()
    p = [
        float(
            torch.fft.rfft(
                iid.sample(5000, uniform_grid(m), torch.Generator().manual_seed(0)), norm="forward"
            )[:, 1]
            .abs()
            .pow(2)
            .mean()
        )
        for m in (64, 256)
    ]
    assert p[0] / p[1] == pytest.approx(4.0, rel=0.1)
    with pytest.raises(UserError, match="allowed: matern, fourier, iid"):
        make_noise("pink")


def test_logit_normal_density_and_sampler():
    d = LogitNormal(0.5, 0.8)
    t = torch.linspace(1e-6, 1 - 1e-6, 200001, dtype=torch.float64)
    assert float(torch.trapezoid(d.pdf(t), t)) == pytest.approx(1.0, abs=1e-3)
    s = d.sample(200000, torch.Generator().manual_seed(0))
    u = torch.log(s) - torch.log1p(-s)
    assert float(u.mean()) == pytest.approx(0.5, abs=0.01) and float(u.std()) == pytest.approx(0.8, abs=0.01)
    hist = torch.histc(s, bins=10, min=0, max=1) / (len(s) * 0.1)
    centers = torch.arange(10) / 10 + 0.05
    torch.testing.assert_close(hist, d.pdf(centers).float(), atol=0.08, rtol=0.05)


@pytest.mark.parametrize("m", [16, 17])
def test_functional_norm_quadrature_and_parseval(m):
    f = torch.randn(5, m, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(functional_sq_norm(f), (f**2).sum(-1) / m)  # sum_i w_i f(x_i)^2, w_i = 1/M
    ones = torch.ones(m // 2 + 1, dtype=torch.float64)
    torch.testing.assert_close(functional_sq_norm(f, freq_weights=ones), (f**2).sum(-1) / m)
    g = torch.randn(5, m, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    torch.testing.assert_close(functional_loss(f, g), ((f - g) ** 2).mean(-1))
    # a pure mode k=2 carries weight w_2 only
    x = uniform_grid(m, dtype=torch.float64)
    w = torch.arange(m // 2 + 1, dtype=torch.float64) + 1
    cos2 = torch.cos(2 * torch.pi * 2 * x)[None]
    torch.testing.assert_close(
        functional_sq_norm(cos2, freq_weights=w), torch.tensor([0.5 * 3.0], dtype=torch.float64)
    )
    with pytest.raises(UserError):
        functional_sq_norm(f, freq_weights=torch.ones(3))


def test_spectral_conv_matches_complex_einsum_and_is_resolution_exact():
    torch.manual_seed(0)
    layer = SpectralConv1d(3, 4, modes=5).double()
    x = torch.randn(2, 32, 3, dtype=torch.float64)
    xf = torch.fft.rfft(x, dim=1, norm="forward")[:, :5]
    w = torch.view_as_complex(layer.weight.detach().contiguous())  # [k, in, out]
    out = torch.zeros(2, 17, 4, dtype=torch.complex128)
    out[:, :5] = torch.einsum("bki,kio->bko", xf, w)
    torch.testing.assert_close(layer(x), torch.fft.irfft(out, n=32, dim=1, norm="forward"))

    # a band-limited function gives the same output function on any grid
    def band(m):
        g = uniform_grid(m, dtype=torch.float64)
        return torch.stack([torch.sin(2 * torch.pi * g), torch.cos(2 * torch.pi * 3 * g), 0.3 + 0 * g], -1)[
            None
        ]

    torch.testing.assert_close(layer(band(64))[:, ::4], layer(band(16)), atol=1e-10, rtol=1e-10)


def test_fno_output_consistent_across_resolutions():
    torch.manual_seed(0)
    net = FNO1d(modes=8, width=16, n_layers=3)
    g64, g128 = uniform_grid(64), uniform_grid(128)
    f = lambda g: (torch.sin(2 * torch.pi * 2 * g) + 0.5 * torch.cos(2 * torch.pi * 5 * g))[None]  # noqa: E731
    t = torch.tensor([0.4])
    with torch.no_grad():
        lo, hi = net(f(g64), t), net(f(g128), t)
    assert lo.shape == (1, 64) and hi.shape == (1, 128)
    assert float((hi[:, ::2] - lo).norm() / lo.norm()) < 0.02


def test_x1_prediction_loss_identity():
    # with weight (1 - t + eps)^2 the velocity loss through the wrapper is the x1-prediction MSE
    torch.manual_seed(0)
    net = FNO1d(modes=4, width=8, n_layers=1)
    wrap = X1Prediction(net, eps=1e-3)
    g = torch.Generator().manual_seed(0)
    x0, x1, t = torch.randn(6, 16, generator=g), torch.randn(6, 16, generator=g), torch.rand(6, generator=g)
    xt, target = interpolate(x0, x1, t)
    with torch.no_grad():
        lhs = (1 - t + 1e-3) ** 2 * functional_loss(wrap(xt, t), target)
        rhs = functional_loss(net(xt, t), x1 + 1e-3 * (x1 - x0))
    torch.testing.assert_close(lhs, rhs, rtol=1e-4, atol=1e-5)
    # finite at t = 1
    assert torch.isfinite(wrap(xt, torch.ones(6))).all()


def test_gaussian_velocity_preserves_marginals():
    m = 16
    x = uniform_grid(m, dtype=torch.float64)
    c0 = MaternGP(1.0, 0.1).covariance(x)
    c1 = MaternGP(0.5, 0.2, nu=1.5).covariance(x) + 1e-6 * torch.eye(m, dtype=torch.float64)
    mean1 = torch.sin(2 * torch.pi * x)
    v = gaussian_rf_velocity(mean1, c0, c1)
    z = MaternGP(1.0, 0.1).sample(20000, x, torch.Generator().manual_seed(0)).double()
    z = odeint(v, z, t1=0.5, steps=20, method="rk4")
    ct = 0.25 * c1 + 0.25 * c0
    cov_err, mean_err = relative_cov_error(z, ct, 0.5 * mean1)
    assert cov_err < 0.05 and mean_err < 0.03
    # isotropic case reduces to the scalar formula m + (t s^2 - (1 - t)) / (t^2 s^2 + (1 - t)^2) (x - t m)
    eye = torch.eye(3, dtype=torch.float64)
    vi = gaussian_rf_velocity(torch.ones(3), eye, 0.25 * eye)
    xx = torch.randn(4, 3, dtype=torch.float64)
    t = 0.3
    ref = 1 + (t * 0.25 - (1 - t)) / (t**2 * 0.25 + (1 - t) ** 2) * (xx - t)
    torch.testing.assert_close(vi(xx, torch.full((4,), t)), ref)


def test_metrics_and_straightness_oracles():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(300, 32, generator=g), torch.randn(300, 32, generator=g)
    assert abs(mmd_rbf(a, b)) < 0.02 and mmd_rbf(a + 1.0, b) > 0.1
    assert spectrum_mse(a, a) == 0.0
    c = torch.tensor([0.5, -1.0, 2.0])
    assert straightness(lambda x, t: c.expand_as(x), torch.randn(10, 3), steps=5) == pytest.approx(
        0.0, abs=1e-12
    )
    assert straightness(lambda x, t: -x * t[:, None], torch.randn(10, 3), steps=20) > 1e-3


def test_bimodal_functions():
    f, tri = bimodal_functions(4000, 64, seed=0)
    assert f.shape == (4000, 64) and abs(float(tri.float().mean()) - 0.3) < 0.03
    f2, tri2 = bimodal_functions(10, 128, seed=0)
    assert torch.equal(tri[:10], tri2)


def test_frf_estimator_contract():
    net = FNO1d(modes=4, width=8, n_layers=1)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    frf = FunctionalRectifiedFlow(net, MaternGP(1.0, 0.1), steps=3, batch_size=8)
    with pytest.raises(UserError, match="not fitted"):
        frf.sample(2)
    data, _ = bimodal_functions(32, 16, seed=0)
    frf.fit(data)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())  # argument untouched
    assert len(frf.losses_) == 3 and frf.grid_size_ == 16
    assert frf.sample(3, steps=2).shape == (3, 16)
    assert frf.sample(3, 32, steps=2, method="midpoint").shape == (3, 32)  # other resolution
    x0, x1 = frf.reflow_pairs(5, steps=2)
    assert x0.shape == x1.shape == (5, 16)
    refl = FunctionalRectifiedFlow(frf.net_, MaternGP(1.0, 0.1), steps=2, batch_size=4).fit(x1, x0=x0)
    assert len(refl.losses_) == 2
    for kw in (dict(param="eps"), dict(time_mode="both"), dict(param="x1", sigma_min=0.1)):
        with pytest.raises(UserError):
            FunctionalRectifiedFlow(net, MaternGP(), steps=1, **kw).fit(data)
    x1p = FunctionalRectifiedFlow(
        net,
        MaternGP(),
        param="x1",
        time_density=LogitNormal(0.75, 1.0),
        steps=2,
        batch_size=4,
        freq_weights=torch.ones(9),
    ).fit(data)
    assert torch.isfinite(x1p.sample(2, steps=3)).all()
