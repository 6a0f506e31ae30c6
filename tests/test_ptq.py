"""iclr26.diffusion.ptq (reconstruction of P18): quantizers, DCT bands, frequency loss, look-ahead meta-gradient,
reconstruction invariants, on hand-computed cases and a tiny random-weight diffusers UNet2DModel."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from iclr26.core.errors import UserError
from iclr26.diffusion.ptq import (
    AdaRoundWeight,
    CalibSet,
    LSQActivation,
    QuantConfig,
    QuantLayer,
    ReconConfig,
    band_weights,
    calibrate_activations,
    collect_calibration,
    dct2,
    dct_matrix,
    dirichlet_matching_entropy,
    entropy,
    eps_call,
    frechet_distance,
    frequency_loss,
    idct2,
    lookahead_meta_grad,
    quant_layers,
    quant_parameters,
    quantize_model,
    radial_bands,
    reconstruct,
    sample_weights,
    set_quant_state,
    timestep_groups,
)


def _unet():
    from diffusers import UNet2DModel

    torch.manual_seed(0)
    return UNet2DModel(sample_size=8, in_channels=1, out_channels=1, layers_per_block=1, block_out_channels=(8, 16),
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=4).eval()  # fmt: skip


def _scheduler(T=20):
    from diffusers import DDIMScheduler

    return DDIMScheduler(num_train_timesteps=T, beta_start=1e-4, beta_end=0.02, beta_schedule="linear")


@pytest.fixture(scope="module")
def tiny():
    torch.use_deterministic_algorithms(True)
    m = _unet()
    sch = _scheduler()
    calib = collect_calibration(m, sch, 4, 4, 2, sample_shape=(1, 8, 8), seed=0)
    val = collect_calibration(m, sch, 2, 4, 2, sample_shape=(1, 8, 8), seed=1)
    q = quantize_model(m, QuantConfig(4, 8))
    calibrate_activations(q, calib.x, calib.t)
    return m, q, calib, val


# ---------------------------------------------------------------------------- quantizers
def test_weight_quantizer_round_trip_on_grid():
    s = torch.tensor([0.1, 0.25])[:, None]
    k = torch.tensor([[-7, -3, 0, 7], [-1, 2, 5, -7]], dtype=torch.float32)
    w = k * s  # every weight on its channel's 4-bit grid, max |W| = 7 s (the symmetric range)
    q = AdaRoundWeight(w, 4)
    for mode in ("nearest", "hard"):
        q.mode = mode
        torch.testing.assert_close(q(w), w, atol=1e-6, rtol=0)


def test_adaround_init_and_regulariser():
    w = torch.tensor([[0.33, -0.52, 0.07, 0.9]])
    q = AdaRoundWeight(w, 4)
    frac = w / q.scale - torch.floor(w / q.scale)
    torch.testing.assert_close(q.h(), frac, atol=1e-3, rtol=0)  # h(V) = frac(W / s) at init
    q.mode = "soft"
    torch.testing.assert_close(q(w), w, atol=1e-3 * float(q.scale.max()), rtol=0)  # soft init reproduces W
    q.mode = "hard"  # hard rounding at init = round to nearest (no frac exactly at 1/2 here)
    q2 = AdaRoundWeight(w, 4)
    q2.mode = "nearest"
    torch.testing.assert_close(q(w), q2(w))
    with torch.no_grad():
        q.V.copy_(torch.tensor([[50.0, -50.0, 0.0, 0.0]]))
    h = q.h()
    h = h.detach()
    assert h[0, 0] == 1 and h[0, 1] == 0 and abs(float(h[0, 2]) - 0.5) < 1e-6
    # 1 - |2h - 1|^beta: 0, 0, 1, 1 -> mean 0.5
    assert abs(q.regularizer(2.0).item() - 0.5) < 1e-5


def test_activation_quantizer_round_trip_and_range():
    aq = LSQActivation(8)
    aq.init_range(-1.0, 3.0)
    s, z = float(aq.step), float(aq.zero_point)
    assert abs(s - 4 / 255) < 1e-7 and z == round(1 / s)
    with torch.no_grad():
        grid = (torch.arange(0, 256, dtype=torch.float32) - z) * s  # every representable value
        torch.testing.assert_close(aq(grid[None]), grid[None], atol=1e-6, rtol=0)
        out = aq(torch.tensor([[-5.0, 10.0]]))  # clipped to the ends of the range
    torch.testing.assert_close(out, torch.tensor([[(0 - z) * s, (255 - z) * s]]))
    fresh = LSQActivation(8)  # uncalibrated: identity
    x = torch.randn(3, 5)
    assert torch.equal(fresh(x), x)


def test_lsq_step_gradient_hand_computed():
    aq = LSQActivation(2)  # Q_P = 3
    with torch.no_grad():
        aq.step.fill_(0.5)
        aq.zero_point.fill_(1.0)
        aq.initialized.fill_(True)
    x = torch.tensor([[0.2, 0.7, 5.0, -3.0]], requires_grad=True)
    y = aq(x)
    # x/s = 0.4, 1.4, 10, -6 -> round + z = 1, 2, 11, -5 -> clamp [0, 3] = 1, 2, 3, 0 -> (q - z) s
    torch.testing.assert_close(y.detach(), torch.tensor([[0.0, 0.5, 1.0, -0.5]]))
    y.sum().backward()
    # dy/ds: round(x/s) - x/s inside the range (-0.4, -0.4), Q_P - z = 2 above, -z = -1 below; times 1/sqrt(N Q_P)
    expected = (-0.4 - 0.4 + 2.0 - 1.0) / math.sqrt(4 * 3)
    assert abs(float(aq.step.grad) - expected) < 1e-6
    torch.testing.assert_close(x.grad, torch.tensor([[1.0, 1.0, 0.0, 0.0]]))  # STE inside, zero when clipped


def test_quantize_model_wraps_every_layer(tiny):
    m, q, calib, _ = tiny
    n_layers = sum(isinstance(x, (nn.Conv2d, nn.Linear)) for x in m.modules())
    layers = quant_layers(q)
    assert len(layers) == n_layers and n_layers > 10
    assert not any(isinstance(x, QuantLayer) for x in m.modules())  # the input is not mutated
    names = list(layers)
    assert names[0] == "conv_in" and names[-1] == "conv_out"
    assert layers["conv_in"].wq.bits == 8 and layers["conv_out"].wq.bits == 8
    assert all(layers[n].wq.bits == 4 for n in names[1:-1])
    rounding, steps = quant_parameters(q)
    assert len(rounding) == len(steps) == n_layers
    assert {n for n, p in q.named_parameters() if p.requires_grad} == set(rounding) | set(steps)
    kept = quantize_model(m, QuantConfig(4, 8, keep_fp=("down_blocks",)))
    assert not any(n.startswith("down_blocks") for n in quant_layers(kept))


def test_quantized_outputs_close_and_ordered(tiny):
    m, _, calib, _ = tiny
    with torch.no_grad():
        ref = eps_call(m, calib.x, calib.t)
        errs = {}
        for bits in (8, 4, 3):
            q = quantize_model(m, QuantConfig(bits, 8))
            calibrate_activations(q, calib.x, calib.t)
            set_quant_state(q, weight="nearest")
            errs[bits] = float(((eps_call(q, calib.x, calib.t) - ref) ** 2).mean())
            set_quant_state(q, weight="fp", act=False)  # both off: the float model, exactly
            assert torch.equal(eps_call(q, calib.x, calib.t), ref)
    assert errs[8] < errs[4] < errs[3]
    assert errs[8] < 1e-3 * float((ref**2).mean())


def test_bad_inputs_raise_user_errors():
    with pytest.raises(UserError, match="w_bits"):
        QuantConfig(w_bits=1)
    with pytest.raises(UserError, match="nn.Module"):
        quantize_model("not a model")
    with pytest.raises(UserError, match="no nn.Conv2d"):
        quantize_model(nn.Sequential(nn.ReLU()))
    with pytest.raises(UserError, match="empty band"):
        radial_bands(2, 2, 4)
    with pytest.raises(UserError, match="err must be"):
        frequency_loss(torch.zeros(3, 8), torch.zeros(3, dtype=torch.long), radial_bands(8, 8, 2), torch.ones(1, 2))
    with pytest.raises(UserError, match="weight mode"):
        set_quant_state(nn.Linear(2, 2), weight="rounded")
    with pytest.raises(UserError, match="iters"):
        ReconConfig(iters=-1)


# ---------------------------------------------------------------------------- frequency loss
def test_dct_is_orthonormal_and_matches_scipy():
    from scipy.fft import dctn

    c = dct_matrix(8, torch.float64)
    torch.testing.assert_close(c @ c.T, torch.eye(8, dtype=torch.float64))
    x = torch.randn(3, 2, 8, 6, dtype=torch.float64)
    torch.testing.assert_close(dct2(x), torch.as_tensor(dctn(x.numpy(), type=2, norm="ortho", axes=(-2, -1))))
    torch.testing.assert_close(idct2(dct2(x)), x)


def test_radial_bands_partition():
    b = radial_bands(8, 8, 4)
    counts = torch.bincount(b.reshape(-1), minlength=4)
    assert int(counts.sum()) == 64 and bool((counts > 0).all())
    assert int(b[0, 0]) == 0 and int(b[7, 7]) == 3
    r = torch.sqrt(torch.arange(8.0)[:, None] ** 2 + torch.arange(8.0)[None, :] ** 2)
    for k in range(3):  # bands are ordered by radius
        assert float(r[b == k].max()) <= float(r[b == k + 1].min())
    assert bool((b == b.T).all())  # equal radii share a band


def test_uniform_beta_is_exactly_mse():
    err = torch.randn(5, 2, 8, 8, dtype=torch.float64)
    groups = torch.tensor([0, 1, 2, 3, 0])
    beta = band_weights(torch.zeros(4, 4, dtype=torch.float64))
    assert bool((beta == 1).all())
    torch.testing.assert_close(frequency_loss(err, groups, radial_bands(8, 8, 4), beta), err.pow(2).mean((1, 2, 3)))
    # a weight on one band only sees that band's share of the energy
    onlylow = torch.zeros(4, 4, dtype=torch.float64)
    onlylow[:, 0] = 4.0
    e = dct2(err).pow(2).sum(1)
    mask = radial_bands(8, 8, 4) == 0
    torch.testing.assert_close(frequency_loss(err, groups, radial_bands(8, 8, 4), onlylow),
                               4 * e[:, mask].sum(1) / 128)  # fmt: skip


def test_weights_have_mean_one():
    a = torch.randn(10)
    torch.testing.assert_close(sample_weights(a).mean(), torch.tensor(1.0))
    torch.testing.assert_close(band_weights(torch.randn(3, 4)).mean(1), torch.ones(3))


# ---------------------------------------------------------------------------- the bi-level step
def test_lookahead_meta_gradient_matches_finite_differences():
    """2-parameter toy: inner = mean_i w_i (theta . x_i - y_i)^2 with w = N softmax(a); outer on a val pair."""
    torch.manual_seed(0)
    x = torch.randn(3, 2, dtype=torch.float64)
    y = torch.randn(3, dtype=torch.float64)
    xv, yv = torch.randn(2, dtype=torch.float64), torch.tensor(0.7, dtype=torch.float64)
    theta0 = torch.tensor([0.3, -0.2], dtype=torch.float64)
    eta = 0.1

    def objective(a):  # closed form of the look-ahead: grad_theta inner = 2/N sum_i w_i r_i x_i
        w = sample_weights(a)
        r = x @ theta0 - y
        look = theta0 - eta * (2 / 3) * (w * r) @ x
        return (look @ xv - yv) ** 2

    a = torch.tensor([0.1, -0.3, 0.2], dtype=torch.float64, requires_grad=True)
    theta = {"p": theta0.clone().requires_grad_(True)}
    inner = lambda th: (sample_weights(a) * (x @ th["p"] - y) ** 2).mean()  # noqa: E731
    outer = lambda th: (th["p"] @ xv - yv) ** 2  # noqa: E731
    (g,), val = lookahead_meta_grad(inner, outer, theta, [a], eta)
    assert abs(float(val) - float(objective(a.detach()))) < 1e-12
    h = 1e-6
    fd = torch.zeros(3, dtype=torch.float64)
    for i in range(3):
        e = torch.zeros(3, dtype=torch.float64)
        e[i] = h
        fd[i] = (objective(a.detach() + e) - objective(a.detach() - e)) / (2 * h)
    torch.testing.assert_close(g, fd, atol=1e-8, rtol=1e-6)
    assert float(g.abs().sum()) > 1e-4  # a non-trivial gradient


def test_meta_step_on_unet_matches_finite_differences(tiny):
    """The same check through the quantized UNet (functional_call look-ahead, band weights b; a large inner
    step makes the effect measurable above float32 noise)."""
    _, q, calib, val = tiny
    from iclr26.diffusion.ptq import _batch_loss, _math_attention

    torch.use_deterministic_algorithms(False)
    model = quantize_model(_unet(), QuantConfig(4, 8))
    calibrate_activations(model, calib.x, calib.t)
    _math_attention(model)
    set_quant_state(model, weight="soft", act=False)  # no rounding of activations: the objective is smooth in b
    model = model.double()
    rounding, steps = quant_parameters(model)
    theta = {**rounding, **steps}
    g0 = torch.Generator().manual_seed(0)
    with torch.no_grad():  # move every h(V) inside (0, 1): the clip of h and the weight clamp have kinks
        for v in rounding.values():
            v.copy_(0.5 * torch.randn(v.shape, generator=g0, dtype=v.dtype))
    for p in theta.values():
        p.requires_grad_(True)
    cd = CalibSet(calib.x.double(), calib.t, calib.eps.double(), calib.group, calib.step)
    vd = CalibSet(val.x.double(), val.t, val.eps.double(), val.group, val.step)
    bands = radial_bands(8, 8, 2)
    idx, vidx = torch.arange(0, 16, 2), torch.arange(4)  # both timestep groups
    ones = torch.ones(2, 2, dtype=torch.float64)
    b = torch.tensor([[0.3, -0.1], [0.0, 0.2]], dtype=torch.float64, requires_grad=True)
    inner = lambda th: _batch_loss(model, None, cd, idx, bands, band_weights(b)).mean()  # noqa: E731
    outer = lambda th: _batch_loss(model, th, vd, vidx, bands, ones).mean()  # noqa: E731
    (g,), _ = lookahead_meta_grad(inner, outer, theta, [b], 500.0)

    def objective(bb):
        loss = _batch_loss(model, None, cd, idx, bands, band_weights(bb)).mean()
        grads = torch.autograd.grad(loss, list(theta.values()), allow_unused=True)
        look = {k: (v - 500.0 * gr).detach() if gr is not None else v for (k, v), gr in zip(theta.items(), grads, strict=True)}
        with torch.no_grad():
            return float(_batch_loss(model, look, vd, vidx, bands, ones).mean())

    h = 1e-2  # diffusers computes the time embedding in float32: smaller steps hit its rounding noise
    fd = torch.zeros(2, 2, dtype=torch.float64)
    for i in range(2):
        for j in range(2):
            e = torch.zeros(2, 2, dtype=torch.float64)
            e[i, j] = h
            fd[i, j] = (objective(b.detach() + e) - objective(b.detach() - e)) / (2 * h)
    assert float(fd.abs().max()) > 0
    torch.testing.assert_close(g, fd, atol=2e-2 * float(fd.abs().max()), rtol=2e-2)
    assert bool((g[:, 0] != 0).all())
    torch.use_deterministic_algorithms(True)


def test_both_with_zero_meta_lr_is_uniform_bit_for_bit(tiny):
    _, q, calib, val = tiny
    kw = dict(iters=3, batch=4, bands=2, groups=2, meta_every=1, seed=3)
    uni = reconstruct(q, calib, val, ReconConfig(**kw))
    both = reconstruct(q, calib, val, ReconConfig(**kw, sample_meta=True, freq_meta=True, meta_lr=0.0))
    for (n1, p1), (n2, p2) in zip(uni.model.named_parameters(), both.model.named_parameters(), strict=True):
        assert n1 == n2 and torch.equal(p1, p2), n1
    assert uni.history["loss"] == both.history["loss"]
    assert bool((both.sample_weights == 1).all()) and bool((both.band_weights == 1).all())


def test_reconstruct_learns_weights_and_leaves_input(tiny):
    _, q, calib, val = tiny
    before = {n: p.clone() for n, p in q.named_parameters()}
    rec = reconstruct(q, calib, val, ReconConfig(iters=8, batch=4, bands=2, groups=2, meta_every=1,
                                                 sample_meta=True, freq_meta=True, meta_lr=0.1))  # fmt: skip
    assert all(torch.equal(p, before[n]) for n, p in q.named_parameters())
    assert not torch.equal(rec.band_weights, torch.ones(2, 2))
    assert abs(float(rec.sample_weights.mean()) - 1) < 1e-5 and rec.sample_weights.std() > 0
    assert len(rec.history["val_mse"]) == 8
    assert all(m.wq.mode == "hard" for m in quant_layers(rec.model).values())
    assert not any(p.requires_grad for p in rec.model.parameters())
    with pytest.raises(UserError, match="validation"):
        reconstruct(q, calib, None, ReconConfig(iters=1, groups=2, bands=2, sample_meta=True))
    with pytest.raises(UserError, match="groups"):
        reconstruct(q, calib, val, ReconConfig(iters=1, groups=1, bands=2))


def test_uniform_reconstruction_reduces_output_error(tiny):
    m, q, calib, val = tiny
    with torch.no_grad():
        ref = eps_call(m, calib.x, calib.t)
        rtn = set_quant_state(q, weight="nearest")
        e_rtn = float(((eps_call(rtn, calib.x, calib.t) - ref) ** 2).mean())
    rec = reconstruct(q, calib, val, ReconConfig(iters=60, batch=16, bands=2, groups=2))
    with torch.no_grad():
        e_rec = float(((eps_call(rec.model, calib.x, calib.t) - ref) ** 2).mean())
    set_quant_state(q, weight="soft")
    assert e_rec < e_rtn


# ---------------------------------------------------------------------------- data and helpers
def test_calibration_follows_the_ddim_grid(tiny):
    m = tiny[0]
    from diffusers import DDIMScheduler

    sch = DDIMScheduler(num_train_timesteps=100, beta_start=1e-4, beta_end=0.02, beta_schedule="linear")
    cal = collect_calibration(m, sch, 2, 20, 4, sample_shape=(1, 8, 8), seed=0)
    assert len(cal) == 40
    assert sorted(set(cal.t.tolist()), reverse=True) == list(range(95, -1, -5))  # leading spacing, offset 0
    assert cal.group[cal.t == 95].unique().tolist() == [0] and cal.group[cal.t == 0].unique().tolist() == [3]
    assert timestep_groups(20, 4).tolist() == [0] * 5 + [1] * 5 + [2] * 5 + [3] * 5
    with torch.no_grad():
        torch.testing.assert_close(eps_call(m, cal.x[:3], cal.t[:3]), cal.eps[:3])


def test_dirichlet_matches_entropy():
    g = torch.Generator().manual_seed(0)
    for n, target in ((640, math.log(640) - 0.05), (4, 1.2), (4, math.log(4))):
        p = dirichlet_matching_entropy(target, n, g)
        assert abs(entropy(p) - target) < 2e-3 and abs(float(p.sum()) - 1) < 1e-5 and bool((p > 0).all())


def test_frechet_distance_against_scipy():
    from scipy import linalg

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(200, 5)), rng.normal(1.0, 2.0, size=(300, 5))
    c1, c2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    ref = ((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(c1 + c2 - 2 * linalg.sqrtm(c1 @ c2).real)
    assert abs(frechet_distance(torch.as_tensor(a), torch.as_tensor(b)) - ref) < 1e-8 * max(1, ref)
    assert abs(frechet_distance(torch.as_tensor(a), torch.as_tensor(a))) < 1e-8


def test_class_conditional_model_is_calibrated_and_reconstructed_with_its_labels():
    """A class-conditional UNet2DModel (num_class_embeds): each trajectory's label is carried to every pair of
    it, the FP targets are the conditional model's, activation calibration and reconstruction call the model
    with the labels (it was called unconditioned, i.e. with other activations than in use)."""
    from diffusers import UNet2DModel

    torch.manual_seed(0)
    m = UNet2DModel(sample_size=8, in_channels=1, out_channels=1, layers_per_block=1, block_out_channels=(8, 16),
                    down_block_types=("DownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "UpBlock2D"),
                    norm_num_groups=4, num_class_embeds=3).eval()
    with torch.no_grad():
        m.class_embedding.weight.mul_(5)  # make the label matter visibly
    labels = torch.tensor([0, 1, 2])
    cal = collect_calibration(m, _scheduler(), 3, 4, 2, sample_shape=(1, 8, 8), seed=0,
                              cond={"class_labels": labels})
    assert len(cal) == 12 and torch.equal(cal.cond["class_labels"], labels.repeat(4))
    with torch.no_grad():
        torch.testing.assert_close(eps_call(m, cal.x, cal.t, class_labels=cal.cond["class_labels"]), cal.eps)
        other = eps_call(m, cal.x, cal.t, class_labels=(cal.cond["class_labels"] + 1) % 3)
    assert float((other - cal.eps).abs().max()) > 1e-3  # the label changes the target
    q = quantize_model(m, QuantConfig(4, 8))
    calibrate_activations(q, cal.x, cal.t, cond=cal.cond)
    rec = reconstruct(q, cal, cal, ReconConfig(iters=3, batch=4, groups=2, bands=2, sample_meta=True, meta_every=1))
    assert len(rec.history["val_mse"]) == 3 and all(math.isfinite(v) for v in rec.history["loss"])
    with pytest.raises(UserError, match="one per pair"):
        CalibSet(cal.x, cal.t, cal.eps, cal.group, cal.step, {"class_labels": labels})
