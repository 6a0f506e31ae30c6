"""Oracle tests for the flow-matching core (iclr26.flows.core)."""

import pytest
import torch

from iclr26.core import UserError
from iclr26.flows import MLPVelocity, encode, fit_velocity, interpolate, odeint, reflow_pairs, sample


def gaussian_velocity(m: torch.Tensor, s: float):
    """Exact rectified-flow velocity for x0 ~ N(0, I), x1 ~ N(m, s^2 I), independent coupling.

    X_t ~ N(t m, c_t I) with c_t = t^2 s^2 + (1-t)^2 and v(x, t) = m + (t s^2 - (1-t)) / c_t (x - t m).
    """

    def v(x, t):
        t = t[:, None]
        c = t**2 * s**2 + (1 - t) ** 2
        return m + (t * s**2 - (1 - t)) / c * (x - t * m)

    return v


def test_interpolate_straight_and_ffm_paths():
    g = torch.Generator().manual_seed(0)
    x0, x1 = torch.randn(4, 3, 5, generator=g), torch.randn(4, 3, 5, generator=g)
    t = torch.tensor([0.0, 0.3, 0.7, 1.0])
    xt, target = interpolate(x0, x1, t)
    assert torch.equal(target, x1 - x0)
    tb = t[:, None, None]
    torch.testing.assert_close(xt, (1 - tb) * x0 + tb * x1)
    torch.testing.assert_close(xt[0], x0[0])
    torch.testing.assert_close(xt[-1], x1[-1])
    sm = 1e-2
    xt, target = interpolate(x0, x1, t, sigma_min=sm)
    torch.testing.assert_close(xt, (1 - (1 - sm) * tb) * x0 + tb * x1)
    torch.testing.assert_close(target, x1 - (1 - sm) * x0)
    # target is the time derivative of the path
    eps = 1e-3
    xa, _ = interpolate(x0, x1, t * 0 + 0.5 + eps, sigma_min=sm)
    xb, _ = interpolate(x0, x1, t * 0 + 0.5 - eps, sigma_min=sm)
    torch.testing.assert_close((xa - xb) / (2 * eps), target, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize(
    ("method", "steps", "tol"),
    [("euler", 400, 2e-2), ("midpoint", 100, 1e-3), ("rk4", 50, 1e-6), ("dopri5", 0, 1e-6)],
)
def test_odeint_linear_ode_closed_form(method, steps, tol):
    # dx/dt = A x  ->  x(1) = expm(A) x(0); backwards gives x(0) again
    a = torch.tensor([[-1.0, 2.0], [-2.0, -0.5]], dtype=torch.float64)
    x = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    exact = x @ torch.linalg.matrix_exp(a).T
    kw = dict(atol=1e-9, rtol=1e-9) if method == "dopri5" else dict(steps=steps)
    y = odeint(lambda z, t: z @ a.T, x, method=method, **kw)
    assert (y - exact).abs().max() < tol
    back = odeint(lambda z, t: z @ a.T, exact, t0=1.0, t1=0.0, method=method, **kw)
    assert (back - x).abs().max() < tol * 10


def test_odeint_time_dependent_and_differentiable():
    # dx/dt = 2 t x  ->  x(1) = e x(0); gradient of x(1) w.r.t. x(0) is e
    x = torch.ones(3, 1, dtype=torch.float64, requires_grad=True)
    y = odeint(lambda z, t: 2 * t[:, None] * z, x, method="dopri5", atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(y.detach(), torch.full((3, 1), torch.e, dtype=torch.float64))
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3, 1), torch.e, dtype=torch.float64), rtol=1e-6, atol=1e-6)


def test_bad_method_is_user_error():
    with pytest.raises(UserError, match="allowed: euler, midpoint, rk4, dopri5"):
        odeint(lambda z, t: z, torch.zeros(2, 2), method="heun")


def test_encode_inverts_sample_for_analytic_field():
    m, s = torch.tensor([2.0, -1.0], dtype=torch.float64), 0.5
    v = gaussian_velocity(m, s)
    x0 = torch.randn(2000, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x1 = sample(v, x0, steps=200, method="rk4")
    # the analytic flow transports N(0, I) to N(m, s^2 I)
    torch.testing.assert_close(x1.mean(0), m, atol=0.05, rtol=0)
    torch.testing.assert_close(x1.std(0), torch.full((2,), s, dtype=torch.float64), atol=0.03, rtol=0)
    torch.testing.assert_close(encode(v, x1, steps=200), x0, atol=1e-6, rtol=1e-6)


def test_learned_gaussian_flow_matches_optimal_velocity_and_inverts():
    torch.manual_seed(0)
    m, s = torch.tensor([2.0, -1.0]), 0.5
    g = torch.Generator().manual_seed(3)
    x1 = m + s * torch.randn(4000, 2, generator=g)
    model = MLPVelocity(2, hidden=64, depth=2)
    losses = fit_velocity(model, x1, steps=1500, batch_size=256, lr=3e-3, seed=0, lr_schedule="cosine")
    assert losses[-1] < losses[0]
    # compare with the exact field on points from the true marginals, away from the endpoints
    t = torch.rand(2000, generator=g) * 0.9 + 0.05
    xt = t[:, None] * m + torch.sqrt(t**2 * s**2 + (1 - t) ** 2)[:, None] * torch.randn(2000, 2, generator=g)
    with torch.no_grad():
        err = (model(xt, t) - gaussian_velocity(m, s)(xt, t)).pow(2).mean()
        ref = gaussian_velocity(m, s)(xt, t).pow(2).mean()
        assert err / ref < 0.02
        x0 = torch.randn(1000, 2, generator=g)
        z1 = sample(model, x0, steps=50, method="rk4")
        assert (z1.mean(0) - m).abs().max() < 0.1
        assert (z1.std(0) - s).abs().max() < 0.1
        torch.testing.assert_close(encode(model, z1, steps=50), x0, atol=2e-2, rtol=0)


def test_fixed_couplings_and_reflow_pairs():
    model = MLPVelocity(3, hidden=16, depth=1)
    x0 = torch.randn(64, 3, generator=torch.Generator().manual_seed(4))
    before = x0.clone()
    p0, p1 = reflow_pairs(model, x0, steps=4)
    assert torch.equal(x0, before) and torch.equal(p0, x0) and model.training
    assert not p1.requires_grad
    with torch.no_grad():
        torch.testing.assert_close(p1, sample(model, x0, steps=4, method="rk4"))
    # with exact straight couplings x1 = x0 + c, the optimal velocity is the constant c
    c = torch.tensor([1.0, -2.0, 0.5])
    fit_velocity(model, x0 + c, x0=x0, steps=300, batch_size=32, lr=1e-2, seed=1)
    with torch.no_grad():
        out = model(torch.randn(10, 3), torch.rand(10))
    assert (out - c).abs().max() < 0.2


def test_fit_velocity_is_deterministic_and_validates():
    def run():
        torch.manual_seed(123)
        model = MLPVelocity(2, hidden=8, depth=1)
        return fit_velocity(
            model, torch.randn(50, 2, generator=torch.Generator().manual_seed(0)), steps=5, seed=7
        )

    assert run() == run()
    with pytest.raises(UserError):
        fit_velocity(MLPVelocity(2), torch.zeros(4, 2), x0=torch.zeros(3, 2), steps=1)
    with pytest.raises(UserError):
        MLPVelocity(2)(torch.zeros(4, 3), torch.zeros(4))
