"""The ptq-meta-weighting reproduction (reconstruction of P18): smoke wiring (default-preset claims: test_common.py)."""

import dataclasses

import numpy as np
import pytest
import torch

from iclr26.core.config import check_config
from iclr26.core.errors import UserError
from iclr26.experiments import ptq_meta_weighting as exp
from iclr26.runs import RunContext


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ptq")
    cfg = dataclasses.replace(exp.Config(), **exp.PRESETS["smoke"])
    return exp.run(cfg, RunContext(tmp, torch.device("cpu"), 0, "smoke")), tmp, cfg


def test_smoke_wires_everything(smoke):
    res, tmp, cfg = smoke
    claims = {c.name: c for c in res.claims}
    gated = {"C1_traj_l2", "C1_fd", "sanity_rtn_gap", "sanity_uniform_beats_rtn"}
    assert gated == {n for n, c in claims.items() if c.gated} and exp.HEADLINE in gated
    reported = {"C1_traj_l2_noises", "C1_fd_real", "C2_sample_only", "C2_freq_only", "C2_complementary", "C3_beats_random",
                "C4_freq_shift"}  # fmt: skip
    assert reported <= set(claims) and not any(claims[n].gated for n in reported)
    assert claims["sanity_rtn_gap"].kind == "sanity"
    for n in ("C1_traj_l2", "C1_fd"):  # decided over calibration seeds, against the random-weight control
        c = claims[n]
        assert c.trained and c.estimate.unit == "seed" and c.estimate.n == cfg.seeds and c.null.unit == "seed"
    # the null arm is the control's gain over uniform, mean over seeds
    ctrl_gain = np.mean([m - c for m, c in zip((res.metrics[f"w4_uniform_s{s}_traj_l2"] for s in range(cfg.seeds)),
                                               (res.metrics[f"w4_ctrl_random_s{s}_traj_l2"] for s in range(cfg.seeds)),
                                               strict=True)])  # fmt: skip
    assert claims["C1_traj_l2"].null.value == pytest.approx(ctrl_gain)
    assert all(np.isfinite(v) for v in res.metrics.values())
    # issue 27: FD against the FP samples (gated) beside the real-digit FD (reported); learned weight ranges
    for s in range(cfg.seeds):
        assert f"w4_both_s{s}_fd_fp" in res.metrics and f"w4_both_s{s}_fd" in res.metrics
        assert res.metrics[f"w4_both_s{s}_w_min"] <= 1 <= res.metrics[f"w4_both_s{s}_w_max"]
    assert res.metrics["fp_resample_fd"] > 0 and res.metrics["meta_lr"] == pytest.approx(exp.meta_lr(cfg))
    assert claims["C1_fd"].estimate.value == pytest.approx(np.mean(
        [res.metrics[f"w4_uniform_s{s}_fd_fp"] - res.metrics[f"w4_both_s{s}_fd_fp"] for s in range(cfg.seeds)]))
    for a in ("rtn", "uniform", "sample", "freq", "both", "ctrl_random"):
        for s in range(cfg.seeds):
            assert f"w4_{a}_s{s}_traj_l2" in res.metrics
    for fig in ("metrics", "freq_weights", "sample_weights", "samples"):
        assert (tmp / "figures" / f"{fig}.png").exists()
    assert "RECONSTRUCTION" in " ".join(res.notes.upper().split()) or "Reconstruction" in res.notes


def test_smoke_metrics_are_consistent(smoke):
    res, _, cfg = smoke
    m = res.metrics
    # the paired bootstrap CI brackets the mean paired gain it resamples
    gain = np.mean([m[f"w4_uniform_s{s}_traj_l2"] - m[f"w4_both_s{s}_traj_l2"] for s in range(cfg.seeds)])
    assert m["C1_traj_l2_ci_lo"] <= gain + 1e-9 <= m["C1_traj_l2_ci_hi"] + 2e-9
    # quantized samples differ from the FP ones, but stay on the same data scale
    assert 0 < m["w4_rtn_traj_l2_mean"] < 16  # 8x8 pixels in [-1, 1]: at most 2 * 8 = 16


def test_seed_moves_the_calibration(smoke, tmp_path):
    res, _, cfg = smoke
    other = exp.run(cfg, RunContext(tmp_path, torch.device("cpu"), 1, "smoke"))
    assert other.metrics["w4_uniform_s0_traj_l2"] != res.metrics["w4_uniform_s0_traj_l2"]
    assert other.metrics["fp_fd"] == res.metrics["fp_fd"]  # the FP model and evaluation noises stay fixed


def test_control_weights_match_entropy():
    from iclr26.diffusion.ptq import entropy

    cfg = dataclasses.replace(exp.Config(), bands=4)
    g = torch.Generator().manual_seed(0)
    w = 64 * torch.softmax(torch.randn(64, generator=g), 0)
    beta = 4 * torch.softmax(torch.randn(3, 4, generator=g), 1)
    w_r, beta_r = exp._control_weights({"w": w, "beta": beta}, 0, cfg)
    assert abs(entropy(w_r) - entropy(w)) < 2e-3 and abs(float(w_r.mean()) - 1) < 1e-5
    for r, rr in zip(beta, beta_r, strict=True):
        assert abs(entropy(rr) - entropy(r)) < 2e-3
    assert not torch.allclose(w_r, w)


def test_spearman_centroid_sign():
    low_then_high = np.array([[4.0, 1, 1, 1], [1, 4, 1, 1], [1, 1, 4, 1], [1, 1, 1, 4]])
    assert exp._spearman_centroid(low_then_high) == pytest.approx(1.0)
    assert exp._spearman_centroid(low_then_high[::-1]) == pytest.approx(-1.0)
    assert np.isnan(exp._spearman_centroid(np.ones((4, 4))))  # undefined when beta never moved


@pytest.mark.parametrize("over, match", [
    (dict(ddim_steps=30, train_timesteps=20), "exceeds train_timesteps"),
    (dict(groups=8, ddim_steps=4), "groups=8"),
    (dict(w_bits=1), "w_bits"),
])  # fmt: skip
def test_bad_config(over, match):
    cfg = dataclasses.replace(exp.Config(), **{**exp.PRESETS["smoke"], **over})
    with pytest.raises(UserError, match=match):
        check_config(cfg)


def test_meta_lr_rule():
    """ln(meta_range) / meta steps: 100 iterations with a meta step every 10 give ln 4 / 10."""
    cfg = dataclasses.replace(exp.Config(), **exp.PRESETS["default"])
    assert exp.meta_lr(cfg) == pytest.approx(np.log(4) / 10)
    assert exp.meta_lr(dataclasses.replace(cfg, iters=101)) == pytest.approx(np.log(4) / 11)
