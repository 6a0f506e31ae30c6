"""FunctionalDDPM / DDIM: the cosine schedule, the DDIM update with an exact denoiser, and a smoke fit."""

import math

import pytest
import torch

from iclr26.core import UserError
from iclr26.flows import FNO1d, FunctionalDDPM, MaternGP
from iclr26.flows.diffusion import _split, cosine_alpha_bar, ddim_sample


def test_cosine_alpha_bar_matches_nichol_dhariwal():
    s = 0.008
    t = torch.tensor([0.0, 0.25, 0.5, 0.9, 1.0], dtype=torch.float64)
    want = [math.cos(math.pi / 2 * (u + s) / (1 + s)) ** 2 / math.cos(math.pi / 2 * s / (1 + s)) ** 2 for u in t]
    got = cosine_alpha_bar(t)
    assert got[0] == pytest.approx(1.0)
    assert got[-1] == pytest.approx(0.0, abs=1e-12)
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64).clamp(0, 1), atol=1e-12)
    assert torch.all(got[1:] < got[:-1])  # decreasing


def _gauss_denoiser(m, s2, c=1.0):
    """Exact E[x0 | x_t] for x0 ~ N(m, s2), eps ~ N(0, c): m + a s2 / (a^2 s2 + b^2 c) (x - a m)."""

    def den(x, t):
        ab = cosine_alpha_bar(t.double()).reshape(-1, 1)
        a, b = ab.sqrt(), (1 - ab).sqrt()
        x0 = m + a * s2 / (ab * s2 + (1 - ab) * c) * (x - a * m)
        eps = (x - a * x0) / b.clamp_min(1e-12)
        return x0, eps

    return den


def test_one_step_ddim_with_exact_denoiser_is_posterior_mean():
    m, s2 = 0.7, 0.25
    den = _gauss_denoiser(m, s2)
    # from pure noise (abar(1) = 0) one step returns E[x0] = m whatever the noise
    x1 = torch.randn(1000, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = ddim_sample(den, x1, steps=1)
    assert torch.allclose(out, torch.full_like(out, m), atol=1e-9)
    # from an intermediate time, one step is the closed-form posterior mean
    t0 = 0.4
    ab = float(cosine_alpha_bar(torch.tensor(t0, dtype=torch.float64)))
    xt = torch.linspace(-2, 2, 11, dtype=torch.float64)[:, None]
    want = m + math.sqrt(ab) * s2 / (ab * s2 + 1 - ab) * (xt - math.sqrt(ab) * m)
    assert torch.allclose(ddim_sample(den, xt, steps=1, t_start=t0), want, atol=1e-9)


def test_many_step_ddim_with_exact_denoiser_transports_gaussian():
    # DDIM (eta = 0) converges to the probability-flow ODE, which maps N(0, 1) to N(m, s2) exactly
    m, s2 = -0.5, 0.09
    x1 = torch.randn(20000, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    out = ddim_sample(_gauss_denoiser(m, s2), x1, steps=400, t_start=1.0)
    assert float(out.mean()) == pytest.approx(m, abs=0.01)
    assert float(out.std()) == pytest.approx(math.sqrt(s2), rel=0.03)


@pytest.mark.parametrize("param", ["v", "eps", "x0"])
def test_split_inverts_targets(param):
    g = torch.Generator().manual_seed(2)
    x0, eps = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g)
    ab = torch.tensor([0.9, 0.5, 0.2, 0.05, 0.7])[:, None]
    xt = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
    model = FunctionalDDPM(FNO1d(2, 4, 1), MaternGP(1.0, 0.1), param=param)
    out = model._target(x0, eps, ab)
    x0h, epsh = _split(param, out, xt, ab)
    assert torch.allclose(x0h, x0, atol=1e-4) and torch.allclose(epsh, eps, atol=1e-4)


def test_fit_sample_shapes_and_validation():
    torch.manual_seed(0)
    data = torch.sin(2 * torch.pi * torch.arange(16) / 16).repeat(32, 1)
    ddpm = FunctionalDDPM(FNO1d(4, 8, 1), MaternGP(1.0, 0.1), steps=5, batch_size=8).fit(data)
    assert len(ddpm.losses_) == 5
    assert ddpm.sample(6, steps=2, seed=1).shape == (6, 16)
    assert ddpm.sample(3, 32, steps=1).shape == (3, 32)
    assert torch.equal(ddpm.sample(4, steps=2, seed=3), ddpm.sample(4, steps=2, seed=3))
    with pytest.raises(UserError):
        FunctionalDDPM(FNO1d(4, 8, 1), MaternGP(1.0, 0.1), param="score").fit(data)
