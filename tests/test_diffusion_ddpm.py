"""The shared small DDPM (iclr26.diffusion.ddpm): backbones, schedules checked against diffusers, CFG batching,
checkpoints and the training cache."""

from __future__ import annotations

import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.diffusion import (
    DDPM,
    DDPMConfig,
    cached_ddpm,
    cfg_eps,
    ddim_sample,
    images_to_latents,
    latents_to_images,
    q_sample,
    train_ddpm,
)

SMALL = dict(block_out_channels=[8, 16], hidden=32, depth=1, t_dim=8, cond_dim=8)


@pytest.mark.parametrize("backbone", ["mlp", "unet2d", "unet2dcond"])
def test_backbones_forward_save_load(backbone, tmp_path):
    torch.manual_seed(0)
    m = DDPM(DDPMConfig(backbone=backbone, n_cond=3, cond_tokens=2, **SMALL)).eval()
    x = torch.randn(2, 4, 4, 4)
    e = m.embed([0, 2])
    with torch.no_grad():
        out = m(x, torch.tensor([10, 500]), e)
        out_null = m(x, 10)
    assert out.shape == x.shape and torch.isfinite(out).all()
    assert out_null.shape == x.shape
    m.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file() and (tmp_path / "cfg.json").is_file()
    m2 = DDPM.from_pretrained(tmp_path)
    with torch.no_grad():
        assert torch.equal(m2(x, torch.tensor([10, 500]), m2.embed([0, 2])), out)


def test_conditioning_changes_output_and_null_is_last_row():
    torch.manual_seed(0)
    m = DDPM(DDPMConfig(n_cond=4, **SMALL)).eval()
    with torch.no_grad():  # the residual blocks start as the identity; randomise them
        for p in m.parameters():
            p.normal_(0, 0.3)
    x = torch.randn(1, 4, 4, 4)
    with torch.no_grad():
        assert not torch.allclose(m(x, 100, m.embed([0])), m(x, 100, m.embed([1])))
        assert torch.equal(m(x, 100), m(x, 100, m.embed([4])))


def test_bad_inputs_raise_user_error():
    with pytest.raises(UserError, match="backbone"):
        DDPMConfig(backbone="transformer")
    with pytest.raises(UserError, match="divisible"):
        DDPMConfig(backbone="unet2d", sample_size=6, block_out_channels=[8, 16, 32])
    m = DDPM(DDPMConfig(n_cond=2, **SMALL))
    with pytest.raises(UserError, match=r"\[B, 4, 4, 4\]"):
        m(torch.randn(1, 3, 4, 4), 5)
    with pytest.raises(UserError, match="0..2"):
        m.embed([3])
    with pytest.raises(UserError, match="unconditional"):
        DDPM(DDPMConfig(**SMALL))(torch.randn(1, 4, 4, 4), 5, torch.zeros(1, 8))
    with pytest.raises(UserError, match="cond_ids"):
        train_ddpm(m, torch.randn(4, 4, 4, 4), steps=1)


def test_q_sample_matches_diffusers_add_noise_and_velocity():
    m = DDPM(DDPMConfig(**SMALL))
    sched = m.train_scheduler()
    x0, eps = torch.randn(5, 4, 4, 4), torch.randn(5, 4, 4, 4)
    t = torch.tensor([0, 10, 300, 700, 999])
    xt, target = q_sample(sched.alphas_cumprod, x0, eps, t)
    torch.testing.assert_close(xt, sched.add_noise(x0, eps, t))
    assert torch.equal(target, eps)
    _, v = q_sample(sched.alphas_cumprod, x0, eps, t, "v_prediction")
    torch.testing.assert_close(v, sched.get_velocity(x0, eps, t))


def test_ddim_scheduler_is_stable_diffusions_grid():
    m = DDPM(DDPMConfig(**SMALL))
    s = m.ddim_scheduler()
    s.set_timesteps(50)
    ts = s.timesteps.tolist()
    assert ts[0] == 981 and ts[-3] == 41 and ts[-1] == 1 and len(ts) == 50
    # SD's betas: scaled_linear from 0.00085 to 0.012
    torch.testing.assert_close(s.betas[[0, -1]], torch.tensor([0.00085, 0.012]), rtol=1e-4, atol=1e-7)


def test_cfg_eps_is_one_call_on_the_doubled_batch():
    torch.manual_seed(0)
    m = DDPM(DDPMConfig(n_cond=2, **SMALL)).eval()
    x = torch.randn(3, 4, 4, 4)
    c, u = m.embed([0, 1, 1]), m.null(3)
    m.n_calls = 0
    with torch.no_grad():
        g, eu, ec = cfg_eps(m, x, 200, c, u, guidance=3.0)
        assert m.n_calls == 1
        torch.testing.assert_close(eu, m(x, 200, u))
        torch.testing.assert_close(ec, m(x, 200, c))
    torch.testing.assert_close(g, eu + 3.0 * (ec - eu))


def test_ddim_sample_is_deterministic_and_calls_once_per_step():
    torch.manual_seed(0)
    m = DDPM(DDPMConfig(n_cond=2, **SMALL)).eval()
    noise = torch.randn(2, 4, 4, 4)
    m.n_calls = 0
    a = ddim_sample(m, noise, m.embed([0, 1]), steps=7, guidance=4.0)
    assert m.n_calls == 7
    b = ddim_sample(m, noise, m.embed([0, 1]), steps=7, guidance=4.0)
    assert torch.equal(a, b) and a.shape == noise.shape


def test_training_fits_a_single_point():
    """Oracle: with one training image the optimal eps-predictor is (x_t - sqrt(abar) x0) / sqrt(1 - abar), so the
    trained model's x0-prediction from a noised copy must recover the image (the zero predictor cannot)."""
    torch.manual_seed(0)
    target = torch.rand(1, 4, 4, 4) * 2 - 1
    m = DDPM(DDPMConfig(n_cond=1, hidden=64, depth=2, t_dim=16, cond_dim=8))
    hist = train_ddpm(m, target.repeat(64, 1, 1, 1), torch.zeros(64, dtype=torch.long), steps=300,
                      batch_size=64, lr=3e-3, seed=0)  # fmt: skip
    assert sum(hist["losses"][-20:]) / 20 < 0.2 * sum(hist["losses"][:20]) / 20
    acp = m.train_scheduler().alphas_cumprod
    t = torch.tensor([100, 200, 300, 400])
    eps = torch.randn(4, 4, 4, 4, generator=torch.Generator().manual_seed(1))
    xt, _ = q_sample(acp, target.repeat(4, 1, 1, 1), eps, t)
    a = acp[t].view(-1, 1, 1, 1)
    with torch.no_grad():
        x0_hat = (xt - (1 - a).sqrt() * m(xt, t, m.embed([0] * 4))) / a.sqrt()
        x0_zero = xt / a.sqrt()  # what an untrained (zero) eps predictor would give
    assert (x0_hat - target).pow(2).mean() < 0.05 < (x0_zero - target).pow(2).mean()


def test_cached_ddpm_trains_once(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path))
    x0 = torch.randn(16, 4, 4, 4)
    ids = torch.arange(16) % 2
    kw = dict(steps=3, batch_size=8, seed=1)
    cfg = DDPMConfig(n_cond=2, **SMALL)
    m1, i1 = cached_ddpm("t", cfg, x0, ids, train_kwargs=kw)
    m2, i2 = cached_ddpm("t", cfg, x0, ids, train_kwargs=kw)
    assert not i1["cached"] and i2["cached"] and i1["path"] == i2["path"]
    x = torch.randn(1, 4, 4, 4)
    with torch.no_grad():
        assert torch.equal(m1(x, 3), m2(x, 3))
    _, i3 = cached_ddpm("t", cfg, x0 + 1, ids, train_kwargs=kw)  # other data: another key
    assert not i3["cached"] and i3["path"] != i1["path"]


def test_latents_roundtrip():
    img = torch.rand(3, 8, 8)
    lat = images_to_latents(img)
    assert lat.shape == (3, 4, 4, 4) and lat.min() >= -1 and lat.max() <= 1
    torch.testing.assert_close(latents_to_images(lat), img)
    with pytest.raises(UserError):
        images_to_latents(torch.rand(3, 7, 8))
