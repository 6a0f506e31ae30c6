"""P6 memorization detection (iclr26.diffusion.memorization): timestep selection, the N / C / S terms against a
hand transcription, exactly two UNet calls per prompt on a tiny Stable Diffusion pipeline, the denoising baseline,
mitigation and the evaluation helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from diffusers import DDIMScheduler

from iclr26.core.errors import UserError
from iclr26.diffusion.ddpm import tiny_sd_pipeline
from iclr26.diffusion.memorization import (
    CallCounter,
    PipelineDenoiser,
    denoising_score,
    memorization_score,
    mitigate_prompt,
    nearest_distance,
    nonneg_logistic,
    replication_threshold,
    select_timesteps,
    tpr_at_fpr,
)


def _sd_ddim(**kw):
    base = dict(num_train_timesteps=1000, beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
                clip_sample=False, set_alpha_to_one=False, steps_offset=1, timestep_spacing="leading")  # fmt: skip
    return DDIMScheduler(**{**base, **kw})


def test_timestep_selection_sd_leading_grid():
    s = _sd_ddim()
    assert select_timesteps(s, 50) == (981, 41)  # not 999: leading spacing with offset 1
    assert select_timesteps(s, 10) == (901, 201)
    assert select_timesteps(s, 50, hi_index=1, lo_index=-1) == (961, 1)
    s.set_timesteps(50)
    ref = s.timesteps.tolist()
    assert select_timesteps(s, 50) == (ref[0], ref[-3])
    assert s.num_inference_steps == 50  # a copy is set, not the caller's scheduler
    trailing = _sd_ddim(timestep_spacing="trailing", steps_offset=0)
    assert select_timesteps(trailing, 50)[0] == 999  # other spacings shift the grid
    with pytest.raises(UserError, match="outside"):
        select_timesteps(s, 5, lo_index=-6)


class _Table:
    """Denoiser with fixed outputs per (timestep, branch): uncond rows give A[t], cond rows B[t] + cond offset."""

    def __init__(self, shape, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.A = {t: torch.randn(shape, generator=g) for t in (981, 41)}
        self.B = {t: torch.randn(shape, generator=g) for t in (981, 41)}
        self.calls = 0

    def __call__(self, x, t, cond):
        self.calls += 1
        out = []
        for i in range(x.shape[0]):
            ti = int(t[i])
            c = float(cond[i].flatten()[0])
            out.append(self.A[ti] if c == 0 else self.B[ti] * c)
        return torch.stack(out)


def test_norm_and_alignment_match_hand_transcription():
    shape = (4, 3, 2)
    den = _Table(shape)
    cond = torch.tensor([[1.0], [2.0]])
    uncond = torch.zeros(1, 1)
    r = memorization_score(den, cond, uncond, latent_shape=shape, t_hi=981, t_lo=41, weights=(1.0, 2.0))
    for p, c in enumerate((1.0, 2.0)):
        d_hi = den.B[981] * c - den.A[981]
        n_ref = math.sqrt(sum(float(v) ** 2 for v in d_hi.flatten()))
        u, d = den.A[41], den.B[41] * c - den.A[41]
        cosines = []
        for h in range(shape[1]):
            for w in range(shape[2]):
                a, b = u[:, h, w], d[:, h, w]
                cosines.append(float((a * b).sum() / (a.norm() * b.norm())))
        c_ref = sum(cosines) / len(cosines)
        assert r.norm[p].item() == pytest.approx(n_ref, rel=1e-5)
        assert r.align[p].item() == pytest.approx(c_ref, abs=1e-6)
        assert r.score[p].item() == pytest.approx(n_ref + 2 * c_ref, rel=1e-5)
    assert r.calls == 4 == den.calls  # two CFG calls per prompt
    assert (r.t_hi, r.t_lo) == (981, 41)


def test_v_prediction_norm_is_score_space():
    shape = (4, 2, 2)
    den = _Table(shape)
    acp = _sd_ddim().alphas_cumprod
    cond, uncond = torch.ones(1, 1), torch.zeros(1, 1)
    eps = memorization_score(den, cond, uncond, latent_shape=shape, t_hi=981, t_lo=41)
    v = memorization_score(den, cond, uncond, latent_shape=shape, t_hi=981, t_lo=41, prediction_type="v_prediction",
                           alphas_cumprod=acp, v_space="official")  # fmt: skip
    a = float(acp[981])
    assert v.norm.item() == pytest.approx(eps.norm.item() * a**0.5 / (1 - a), rel=1e-5)
    assert v.align.item() == pytest.approx(eps.align.item())  # raw v for the cosine (the official reading)
    with pytest.raises(UserError, match="alphas_cumprod"):
        memorization_score(den, cond, uncond, latent_shape=shape, t_hi=981, t_lo=41, prediction_type="v_prediction")


@pytest.fixture(scope="module")
def tiny_pipe(tmp_path_factory):
    return tiny_sd_pipeline(seed=0, folder=tmp_path_factory.mktemp("tok"))


def test_exactly_two_unet_calls_per_prompt_on_tiny_sd(tiny_pipe):
    torch.use_deterministic_algorithms(True)
    try:
        den = PipelineDenoiser(tiny_pipe)
        seen = []
        orig = tiny_pipe.unet.forward

        def counting(sample, timestep, *a, **kw):
            seen.append((sample.shape[0], int(timestep.flatten()[0])))
            return orig(sample, timestep, *a, **kw)

        tiny_pipe.unet.forward = counting
        try:
            prompts = ["a cat", "a dog on a mat", "x"]
            r = den.score(prompts, gen_num=2)
            r2 = den.score(list(reversed(prompts)), gen_num=2)
        finally:
            tiny_pipe.unet.forward = orig
        assert len(seen) == 2 * 2 * len(prompts)  # two calls per prompt, for each of the two scorings
        assert all(b == 2 * 2 for b, _ in seen)  # CFG batch [uncond, cond] x gen_num
        assert [t for _, t in seen[:2]] == [981, 41]
        assert r.calls == 2 * len(prompts)
        # the noise is re-seeded per prompt: the order of prompts does not matter
        torch.testing.assert_close(r.score, r2.score.flip(0))
        assert torch.isfinite(r.score).all() and not torch.equal(r.norm[0], r.norm[1])
    finally:
        torch.use_deterministic_algorithms(False)


def test_denoising_baseline_first_step_is_the_norm_term(tiny_pipe):
    den = PipelineDenoiser(tiny_pipe)
    cond, uncond = den.encode(["a cat", "x"])
    counter = CallCounter(den)
    w = denoising_score(counter, cond, uncond, tiny_pipe.scheduler, latent_shape=den.latent_shape, k=4, seed=3)
    assert w.shape == (2, 4) and counter.calls == 2 * 4  # k calls per prompt
    r = memorization_score(den, cond, uncond, latent_shape=den.latent_shape, t_hi=981, t_lo=41, seed=3)
    torch.testing.assert_close(w[:, 0], r.norm, rtol=1e-5, atol=1e-6)  # Wen-1 = N at t_hi on the same noise
    with pytest.raises(UserError, match="k=51"):
        denoising_score(den, cond, uncond, tiny_pipe.scheduler, latent_shape=den.latent_shape, k=51)


def test_batched_prompts_give_the_same_scores(tiny_pipe):
    den = PipelineDenoiser(tiny_pipe)
    cond, uncond = den.encode(["a cat", "a dog", "zebra 7"])
    one = memorization_score(den, cond, uncond, latent_shape=den.latent_shape, t_hi=981, t_lo=41, gen_num=2)
    allp = memorization_score(den, cond, uncond, latent_shape=den.latent_shape, t_hi=981, t_lo=41, gen_num=2,
                              prompts_per_call=3)  # fmt: skip
    assert allp.calls == 2 and one.calls == 6
    torch.testing.assert_close(one.score, allp.score, rtol=1e-4, atol=1e-5)


def test_mitigation_lowers_its_objective():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8 + 3 + 1, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))

    def den(x, t, cond):
        b = x.shape[0]
        h = torch.cat([x.reshape(b, -1), cond, t.float().view(-1, 1) / 1000], 1)
        return net(h).reshape(x.shape)

    cond = torch.randn(2, 3)
    uncond = torch.zeros(1, 3)
    kw = dict(latent_shape=(2, 2, 2), t_hi=981, t_lo=41, n_noise=8, seed=0)
    e, hist = mitigate_prompt(den, cond, uncond, steps=40, lr=0.05, reg=0.0, objective="norm", **kw)
    assert hist[-1] < 0.7 * hist[0]
    assert not torch.equal(e, cond) and cond.grad is None
    e_stop, hist_stop = mitigate_prompt(den, cond, uncond, steps=40, target=1e9, **kw)
    assert len(hist_stop) == 1 and torch.equal(e_stop, cond)  # already below the target: no step taken
    with pytest.raises(UserError, match="objective"):
        mitigate_prompt(den, cond, uncond, objective="sharpness", **kw)
    # a v-prediction model: the objective is the detector's own S in score space (it was scored as epsilon)
    ac = torch.linspace(0.999, 0.01, 1000)
    one = cond[:1]
    s_v = memorization_score(den, one, uncond, latent_shape=(2, 2, 2), t_hi=981, t_lo=41, gen_num=8, seed=0,
                             prediction_type="v_prediction", alphas_cumprod=ac).score
    _, h_v = mitigate_prompt(den, one, uncond, steps=1, prediction_type="v_prediction", alphas_cumprod=ac, **kw)
    _, h_e = mitigate_prompt(den, one, uncond, steps=1, **kw)
    assert h_v[0] == pytest.approx(float(s_v[0]), rel=1e-5) and h_v[0] != pytest.approx(h_e[0], rel=1e-3)
    with pytest.raises(UserError, match="prediction_type"):
        mitigate_prompt(den, cond, uncond, prediction_type="sample", **kw)


def test_tpr_at_fpr_rules():
    # negatives 0..9, positives 8.5, 20, 30: ROC points (FPR, TPR) (0, 0), (0, 2/3), (0.1, 2/3), (0.1, 1), (1, 1)
    scores = np.r_[np.arange(10.0), [8.5, 20.0, 30.0]]
    labels = np.r_[np.zeros(10), np.ones(3)]
    assert tpr_at_fpr(scores, labels, 0.01, "conservative") == pytest.approx(2 / 3)
    assert tpr_at_fpr(scores, labels, 0.16, "conservative") == pytest.approx(1.0)
    # closest: the first ROC point at the FPR nearest the target (numpy argmin, as the official evaluation)
    assert tpr_at_fpr(scores, labels, 0.16, "closest") == pytest.approx(2 / 3)
    assert tpr_at_fpr(scores, labels, 0.9, "closest") == pytest.approx(1.0)
    assert math.isnan(tpr_at_fpr(scores, np.zeros(13), 0.01))
    with pytest.raises(UserError):
        tpr_at_fpr(scores, labels, 1.5)


def test_replication_helpers():
    ref = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [10.0, 10.0]])
    # NN distances between distinct items: 3, 3, 4, ~10.8 -> the 0.25-quantile is 3
    assert replication_threshold(ref, 0.25) == pytest.approx(3.0)
    d = nearest_distance(torch.tensor([[0.0, 1.0], [9.0, 10.0]]), ref)
    torch.testing.assert_close(d, torch.tensor([1.0, 1.0]))
    with pytest.raises(UserError, match="differ"):
        nearest_distance(torch.zeros(1, 3), ref)


def test_bad_conditioning_shapes_raise():
    den = _Table((4, 2, 2))
    with pytest.raises(UserError, match="uncond"):
        memorization_score(den, torch.ones(2, 3), torch.zeros(2, 4), latent_shape=(4, 2, 2), t_hi=981, t_lo=41)


def test_nonneg_logistic_hand_case_and_sklearn():
    from scipy.optimize import brentq
    from sklearn.linear_model import LogisticRegression

    # hand case: x = +1 (y = 1) and x = -1 (y = 0). By symmetry b = 0 and the objective is
    # 0.5 w^2 + 2 log(1 + exp(-w)), minimised where w = 2 sigmoid(-w)
    X = np.array([[1.0], [-1.0]])
    w_ref = brentq(lambda w: w - 2 / (1 + math.exp(w)), 0.0, 2.0)
    w, b = nonneg_logistic(X, np.array([1, 0]))
    assert w[0] == pytest.approx(w_ref, abs=1e-6) and b == pytest.approx(0.0, abs=1e-6)
    # the same points with the labels swapped want w < 0: the constraint holds it at 0 (loss 2 log 2)
    w, b = nonneg_logistic(X, np.array([0, 1]))
    assert w[0] == 0.0 and b == pytest.approx(0.0, abs=1e-6)
    w, _ = nonneg_logistic(X, np.array([0, 1]), nonneg=False)
    assert w[0] == pytest.approx(-w_ref, abs=1e-6)

    # against sklearn's LogisticRegression(C=1): the same fit when no constraint is active; with feature 2
    # anti-related its weight is 0 and the rest is sklearn's fit on feature 1 alone
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(200, 2))
    y = (Z[:, 0] + 0.7 * Z[:, 1] + rng.normal(size=200) > 0).astype(int)
    sk = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(Z, y)
    assert (sk.coef_[0] > 0).all()
    w, b = nonneg_logistic(Z, y)
    np.testing.assert_allclose(w, sk.coef_[0], atol=1e-4)
    assert b == pytest.approx(sk.intercept_[0], abs=1e-4)
    y2 = (Z[:, 0] - 0.7 * Z[:, 1] + rng.normal(size=200) > 0).astype(int)
    free = nonneg_logistic(Z, y2, nonneg=False)[0]
    assert free[1] < 0 and free == pytest.approx(
        LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(Z, y2).coef_[0], abs=1e-4)
    w, b = nonneg_logistic(Z, y2)
    sk1 = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(Z[:, :1], y2)
    assert w[1] == 0.0 and w[0] == pytest.approx(sk1.coef_[0][0], abs=1e-4)
    assert b == pytest.approx(sk1.intercept_[0], abs=1e-4)
    w, _ = nonneg_logistic(Z, y2, nonneg=[False, True])  # per-feature constraints
    assert w[1] == 0.0
    with pytest.raises(UserError, match="both classes"):
        nonneg_logistic(Z, np.zeros(200, dtype=int))


def _tiny_cond_unet(seed=0):
    from diffusers import UNet2DConditionModel

    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        sample_size=4, in_channels=4, out_channels=4, block_out_channels=(8, 16), layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=8, attention_head_dim=4, norm_num_groups=4,
    ).eval()  # fmt: skip
    return lambda x, t, cond: unet(x, t, encoder_hidden_states=cond).sample


def _eps_from_v_by_scheduler(v_model, sched_v):
    """The epsilon model equivalent to a v model, through diffusers' own conversion: DDIMScheduler.step's
    x0 prediction for v, then eps = (x_t - sqrt(abar) x0) / sqrt(1 - abar)."""
    s = _sd_ddim(prediction_type="v_prediction")
    s.set_timesteps(50)
    assert s.config.prediction_type == sched_v.config.prediction_type

    def eps(x, t, cond):
        ti = int(t[0])
        assert (t == ti).all()
        x0 = s.step(v_model(x, t, cond), ti, x).pred_original_sample
        a = s.alphas_cumprod[ti]
        return (x - a.sqrt() * x0) / (1 - a).sqrt()

    return eps


def test_v_prediction_is_read_as_epsilon_through_the_scheduler_on_a_tiny_unet():
    unet = _tiny_cond_unet()
    s_eps, s_v = _sd_ddim(), _sd_ddim(prediction_type="v_prediction")
    as_eps = _eps_from_v_by_scheduler(unet, s_v)
    g = torch.Generator().manual_seed(1)
    cond, uncond = torch.randn(3, 2, 8, generator=g), torch.randn(1, 2, 8, generator=g)
    kw = dict(latent_shape=(4, 4, 4), t_hi=981, t_lo=41, gen_num=2, seed=5)
    with torch.no_grad():
        # epsilon mode: the prediction type comes from the scheduler (the same as saying it)
        e1 = memorization_score(unet, cond, uncond, scheduler=s_eps, **kw)
        e2 = memorization_score(unet, cond, uncond, prediction_type="epsilon", **kw)
        torch.testing.assert_close(e1.score, e2.score)
        # v mode: the same network read as v (prediction type from the scheduler) equals the epsilon model that
        # diffusers' conversion makes of it
        v = memorization_score(unet, cond, uncond, scheduler=s_v, **kw)
        ref = memorization_score(as_eps, cond, uncond, scheduler=s_eps, **kw)
        torch.testing.assert_close(v.norm, ref.norm, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(v.align, ref.align, rtol=1e-4, atol=1e-5)
        assert not torch.allclose(v.align, e1.align, atol=1e-3)  # the reading matters
        # Wen-k on the v model: the scheduler steps on v, magnitudes in epsilon; Wen-1 is N
        wv = denoising_score(unet, cond, uncond, s_v, latent_shape=(4, 4, 4), k=3, gen_num=2, seed=5)
        we = denoising_score(as_eps, cond, uncond, s_eps, latent_shape=(4, 4, 4), k=3, gen_num=2, seed=5)
        torch.testing.assert_close(wv, we, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(wv[:, 0], v.norm, rtol=1e-5, atol=1e-6)
    # mitigation descends the same S for the v model as for its epsilon equivalent
    mk = dict(latent_shape=(4, 4, 4), t_hi=981, t_lo=41, steps=3, n_noise=2, seed=0)
    ev, hv = mitigate_prompt(unet, cond[:2], uncond, scheduler=s_v, **mk)
    ee, he = mitigate_prompt(as_eps, cond[:2], uncond, scheduler=s_eps, **mk)
    _, h_raw = mitigate_prompt(unet, cond[:2], uncond, scheduler=s_eps, **mk)
    assert hv == pytest.approx(he, rel=1e-4) and hv[0] != pytest.approx(h_raw[0], rel=1e-3)
    torch.testing.assert_close(ev, ee, rtol=1e-3, atol=1e-4)
    # a prediction type that contradicts the scheduler, or v without alphas_cumprod, is refused
    with pytest.raises(UserError, match="scheduler predicts"):
        mitigate_prompt(unet, cond[:1], uncond, scheduler=s_v, prediction_type="epsilon", **mk)
    with pytest.raises(UserError, match="alphas_cumprod"):
        memorization_score(unet, cond, uncond, prediction_type="v_prediction", **kw)


def test_prediction_type_is_read_from_a_ddpm():
    from iclr26.diffusion.ddpm import DDPM, DDPMConfig

    m = DDPM(DDPMConfig(n_cond=3, cond_dim=8, hidden=16, depth=1, prediction_type="v_prediction")).eval()
    cond, unc = m.embed(torch.arange(3)).detach(), m.null(1).detach()
    kw = dict(latent_shape=(4, 4, 4), t_hi=981, t_lo=41, seed=0)
    with pytest.raises(UserError, match="alphas_cumprod"):  # v from the model's config, not silently epsilon
        memorization_score(m, cond, unc, **kw)
    with torch.no_grad():
        a = memorization_score(m, cond, unc, scheduler=m.ddim_scheduler(), **kw)
        b = memorization_score(m, cond, unc, prediction_type="v_prediction",
                               alphas_cumprod=m.ddim_scheduler().alphas_cumprod, **kw)
    torch.testing.assert_close(a.score, b.score)
