"""iclr26.diffusion.ptq's rollout outer objective (issue 27): the differentiable DDIM rollout against diffusers'
own DDIMScheduler.step (the oracle), the held-out RolloutSet, and the look-ahead meta-gradient through a whole
rollout against finite differences."""

import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.diffusion.ptq import (
    QuantConfig,
    ReconConfig,
    RolloutSet,
    band_weights,
    calibrate_activations,
    collect_calibration,
    collect_rollouts,
    ddim_coefficients,
    ddim_generate,
    ddim_rollout,
    lookahead_meta_grad,
    quant_parameters,
    quantize_model,
    radial_bands,
    reconstruct,
    set_quant_state,
)
from test_ptq import _unet  # the tiny random-weight UNet2DModel of the library tests


def _scheduler(**kw):  # the tiny tests' DDIM schedule (T = 20, linear), with overrides
    from diffusers import DDIMScheduler

    return DDIMScheduler(**{"num_train_timesteps": 20, "beta_start": 1e-4, "beta_end": 0.02,
                            "beta_schedule": "linear", **kw})  # fmt: skip


@pytest.mark.parametrize("kw", [dict(), dict(clip_sample=False, set_alpha_to_one=False, steps_offset=1),
                                dict(clip_sample=False, timestep_spacing="trailing")])  # fmt: skip
def test_rollout_matches_diffusers_ddim_step(kw):
    """ddim_rollout (our eta = 0 formula) against ddim_generate, which calls DDIMScheduler.step: the same final
    samples for the default grid, an SD-style offset without alpha_to_one, and trailing spacing."""
    m = _unet()
    if "clip_sample" not in kw:
        kw = {**kw, "clip_sample": False}
    noise = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    ref, _ = ddim_generate(m, _scheduler(**kw), noise, 5)
    ts, a, ap = ddim_coefficients(_scheduler(**kw), 5)
    with torch.no_grad():
        out = ddim_rollout(m, noise, ts, a, ap)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    rs = collect_rollouts(m, _scheduler(**kw), 3, 5, sample_shape=(1, 8, 8), seed=1)
    torch.testing.assert_close(rs.noise, noise)
    torch.testing.assert_close(rs.target, ref, atol=1e-5, rtol=1e-5)
    assert len(rs) == 3 and rs.timesteps.dtype == torch.long


def test_rollout_refuses_what_it_does_not_implement():
    with pytest.raises(UserError, match="clip_sample"):
        ddim_coefficients(_scheduler(clip_sample=True), 4)
    with pytest.raises(UserError, match="epsilon"):
        ddim_coefficients(_scheduler(clip_sample=False, prediction_type="v_prediction"), 4)
    z = torch.zeros(2, 1, 8, 8)
    with pytest.raises(UserError, match="differ"):
        RolloutSet(z, torch.zeros(3, 1, 8, 8), torch.tensor([1]), torch.ones(1), torch.ones(1))
    with pytest.raises(UserError, match="one row per noise"):
        RolloutSet(z, z, torch.tensor([1]), torch.ones(1), torch.ones(1), {"class_labels": torch.zeros(3)})


def test_rollout_meta_gradient_matches_finite_differences():
    """d/db of the final-sample MSE of the quantized rollout at theta' = theta - eta grad L_in(theta; b),
    through lookahead_meta_grad, against central differences (float64, activations unquantized so the
    objective is smooth in b)."""
    from iclr26.diffusion.ptq import _batch_loss, _math_attention

    m = _unet()
    sch = _scheduler(clip_sample=False)
    calib = collect_calibration(m, sch, 4, 3, 2, sample_shape=(1, 8, 8), seed=0)
    model = quantize_model(m, QuantConfig(4, 8))
    calibrate_activations(model, calib.x, calib.t)
    _math_attention(model)
    set_quant_state(model, weight="soft", act=False)
    model = model.double()
    rounding, steps = quant_parameters(model)
    theta = {**rounding, **steps}
    g0 = torch.Generator().manual_seed(0)
    with torch.no_grad():  # every h(V) inside (0, 1): no kinks
        for v in rounding.values():
            v.copy_(0.5 * torch.randn(v.shape, generator=g0, dtype=v.dtype))
    for p in theta.values():
        p.requires_grad_(True)
    from iclr26.diffusion.ptq import CalibSet

    cd = CalibSet(calib.x.double(), calib.t, calib.eps.double(), calib.group, calib.step)
    rs = collect_rollouts(m, sch, 2, 3, sample_shape=(1, 8, 8), seed=5)
    noise, target = rs.noise.double(), rs.target.double()
    bands, idx = radial_bands(8, 8, 2), torch.arange(12)
    b = torch.tensor([[0.3, -0.1], [0.0, 0.2]], dtype=torch.float64, requires_grad=True)
    eta = 300.0

    def outer(th):
        return (ddim_rollout(model, noise, rs.timesteps, rs.alpha.double(), rs.alpha_prev.double(), params=th)
                - target).pow(2).mean()  # fmt: skip

    inner = lambda th: _batch_loss(model, None, cd, idx, bands, band_weights(b)).mean()  # noqa: E731
    (g,), _ = lookahead_meta_grad(inner, outer, theta, [b], eta)

    def objective(bb):
        loss = _batch_loss(model, None, cd, idx, bands, band_weights(bb)).mean()
        grads = torch.autograd.grad(loss, list(theta.values()), allow_unused=True)
        look = {k: (v - eta * gr).detach() if gr is not None else v for (k, v), gr in zip(theta.items(), grads, strict=True)}
        with torch.no_grad():
            return float(outer(look))

    h, b0 = 1e-2, b.detach()  # central differences along each of the four band logits
    units = torch.eye(4, dtype=torch.float64).reshape(4, 2, 2)
    fd = torch.tensor([(objective(b0 + h * u) - objective(b0 - h * u)) / (2 * h) for u in units], dtype=torch.float64).reshape(2, 2)
    assert float(fd.abs().max()) > 0
    torch.testing.assert_close(g, fd, atol=2e-2 * float(fd.abs().max()), rtol=2e-2)


def test_reconstruct_with_rollout_outer_moves_weights():
    m = _unet()
    sch = _scheduler(clip_sample=False)
    calib = collect_calibration(m, sch, 4, 4, 2, sample_shape=(1, 8, 8), seed=0)
    rs = collect_rollouts(m, sch, 3, 4, sample_shape=(1, 8, 8), seed=1)
    q = calibrate_activations(quantize_model(m, QuantConfig(4, 8)), calib.x, calib.t)
    before = {n: p.clone() for n, p in q.named_parameters()}
    rec = reconstruct(q, calib, rs, ReconConfig(iters=6, batch=4, bands=2, groups=2, meta_every=2, val_batch=2,
                                                sample_meta=True, freq_meta=True, meta_lr=0.1))  # fmt: skip
    assert all(torch.equal(p, before[n]) for n, p in q.named_parameters())
    assert len(rec.history["val_mse"]) == 3 and all(v > 0 for v in rec.history["val_mse"])
    assert not torch.equal(rec.band_weights, torch.ones(2, 2))
    assert abs(float(rec.sample_weights.mean()) - 1) < 1e-5


def test_rollout_stays_on_the_model_device():
    """collect_rollouts and ddim_rollout on a model on the meta device: every tensor they build (noise, grid,
    alphas, samples) follows the model, none is left on the CPU."""
    from torch import nn

    class Eps(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 1, 3, padding=1)

        def forward(self, x, t):
            return self.conv(x) * (t.float()[:, None, None, None] + 1)

    m = Eps().to("meta")
    rs = collect_rollouts(m, _scheduler(clip_sample=False), 3, 4, sample_shape=(1, 8, 8), seed=0)
    for v in (rs.noise, rs.target, rs.timesteps, rs.alpha, rs.alpha_prev):
        assert v.device.type == "meta"
    out = ddim_rollout(m, rs.noise, rs.timesteps, rs.alpha, rs.alpha_prev, params=dict(m.named_parameters()))
    assert out.device.type == "meta" and out.shape == (3, 1, 8, 8)
