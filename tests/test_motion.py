"""iclr26.motion: DCT, mocap forward kinematics, scenes and windows, the HUMOF model's invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr26.core.errors import UserError
from iclr26.data import mocap as M
from iclr26.data.scenes import EVENTS, facing_of, inside_boxes, make_scene, make_windows
from iclr26.motion import dct as D
from iclr26.motion.humof import (
    HumofConfig,
    HumofModel,
    as_tensors,
    constant_velocity,
    contact_features,
    count_parameters,
    lowpass_scale,
    matched_flat_config,
    path_error,
    pose_error,
)


def _have_clips() -> bool:
    try:
        M.data_path()
        return True
    except Exception:
        return False


needs_clips = pytest.mark.skipif(not _have_clips(), reason="pybullet wheel (mocap clips) not installed")


# ---------------------------------------------------------------------------------------------- DCT
def test_dct_matrix_is_orthonormal_and_matches_the_formula():
    n = 7
    Dm = D.dct_matrix(n, dtype=torch.float64)
    assert torch.allclose(Dm @ Dm.T, torch.eye(n, dtype=torch.float64), atol=1e-12)
    k, t = 3, 5  # one entry by hand: sqrt(2/N) cos(pi (2t+1) k / 2N)
    assert math.isclose(float(Dm[k, t]), math.sqrt(2 / n) * math.cos(math.pi * (2 * t + 1) * k / (2 * n)), rel_tol=1e-12)
    assert math.isclose(float(Dm[0, 2]), math.sqrt(1 / n), rel_tol=1e-12)


def test_dct_round_trip_exact_with_all_coefficients_and_low_pass_otherwise():
    x = torch.randn(2, 12, 4, 3, dtype=torch.float64)
    assert torch.allclose(D.from_dct(D.to_dct(x, 12), 12), x, atol=1e-12)
    tok = D.joint_tokens(x, 12)
    assert tok.shape == (2, 4, 36)
    assert torch.allclose(D.tokens_to_seq(tok, 12), x, atol=1e-12)
    # a constant trajectory lives in coefficient 0 only
    c = D.to_dct(torch.ones(1, 10, 1, 1, dtype=torch.float64), 10)
    assert torch.allclose(c[0, 1:], torch.zeros(9, 1, 1, dtype=torch.float64), atol=1e-12)
    with pytest.raises(UserError, match="n_keep"):
        D.dct_matrix(5, 6)
    with pytest.raises(UserError, match="joints"):
        D.joint_tokens(torch.zeros(2, 5, 3), 2)


# ---------------------------------------------------------------------------------------------- mocap
def test_fk_rest_pose_by_hand():
    off = M._fallback_offsets()
    F = 1
    rot = {j: (np.zeros(F) if n == 1 else np.tile([1.0, 0, 0, 0], (F, 1))) for j, n in M.FRAME_JOINTS}
    p = M.forward_kinematics(np.zeros((F, 3)), np.tile([1.0, 0, 0, 0], (F, 1)), rot, off)[0]
    J = M.JOINTS.index
    assert np.allclose(p[J("neck")], [0, (0.944604 + 0.895576) * 0.25, 0])
    assert np.allclose(p[J("r_ankle")], [0, -(1.686184 + 1.63948) * 0.25, 0.339548 * 0.25])
    assert np.allclose(p[J("l_wrist")], [-0.0962 * 0.25, (0.944604 + 0.974 - 1.099152 - 1.035788) * 0.25,
                                         -0.73244 * 0.25])
    # a 90 degree knee bend about local z swings the ankle forward (+x) by the shin length
    rot["r_knee"] = np.array([math.pi / 2])
    p2 = M.forward_kinematics(np.zeros((F, 3)), np.tile([1.0, 0, 0, 0], (F, 1)), rot, off)[0]
    assert np.allclose(p2[J("r_ankle")] - p2[J("r_knee")], [1.63948 * 0.25, 0, 0], atol=1e-12)


def test_parse_clip_rejects_a_wrong_frame_width():
    with pytest.raises(UserError, match="44"):
        M.parse_clip([[0.0] * 43, [0.0] * 43])
    with pytest.raises(UserError, match="allowed"):
        M.load_clip("moonwalk")
    with pytest.raises(UserError, match="w, x, y, z"):
        M.quat_to_matrix(np.zeros((2, 3)))


@needs_clips
def test_fk_of_real_clip_frames_keeps_the_urdf_bone_lengths_and_feet_on_the_floor():
    clip = M.load_clip("walk")
    assert clip.loop and clip.n_frames > 10
    P = M.clip_positions(clip)  # [F, 15, 3], y-up
    bl = M.bone_lengths()
    for i, par in enumerate(M.PARENTS):
        if par >= 0:
            d = np.linalg.norm(P[:, i] - P[:, par], axis=-1)
            assert np.allclose(d, bl[i], atol=1e-9), M.JOINTS[i]
    ankles = P[:, [M.JOINTS.index("r_ankle"), M.JOINTS.index("l_ankle")], 1]
    assert 0.0 < ankles.min() < 0.12  # the ankle joint sits a few cm above the floor at the lowest point
    assert 0.7 < P[:, 0, 1].mean() < 1.0  # pelvis height of a walking adult at URDF scale 0.25


@needs_clips
def test_pose_bank_is_root_local_z_up_and_facing_x():
    bank = M.PoseBank.from_clips(10)
    assert bank.source == "mocap" and 1.0 < bank.walk_stride < 1.5
    assert np.allclose(bank.walk[:, 0, :2], 0.0, atol=1e-9)  # root above the origin
    assert (bank.walk[:, M.JOINTS.index("neck"), 2] > bank.walk[:, 0, 2]).all()  # z up
    assert abs(float(np.median(facing_of(bank.walk)))) < 0.35  # facing +x
    assert bank.jump_forward[-1] > 0.5


# ---------------------------------------------------------------------------------------------- scenes
@pytest.fixture(scope="module")
def bank():
    return M.synthetic_pose_bank(10)


def test_scenes_are_deterministic_in_seed_and_index(bank):
    a, b, c = make_scene(bank, 3, 5), make_scene(bank, 3, 5), make_scene(bank, 3, 6)
    assert np.array_equal(a.joints, b.joints) and np.array_equal(a.events, b.events)
    assert not np.array_equal(a.joints[0, :, 0], c.joints[0, :, 0])
    assert [make_scene(bank, 0, i, seconds=4).kind for i in range(4)] == list(EVENTS)
    with pytest.raises(UserError, match="allowed"):
        make_scene(bank, 0, 0, kind="dance")


def test_scripted_events_happen(bank):
    follow = make_scene(bank, 0, 1)  # index 1 -> follow
    assert follow.kind == "follow" and follow.events[1, :, EVENTS.index("follow")].sum() > 50
    # the follower's later path runs near where the leader was a second before
    lead, fol = follow.joints[0, :, 0, :2], follow.joints[1, :, 0, :2]
    assert np.median(np.linalg.norm(fol[30:] - lead[20:-10], axis=-1)) < 1.2
    avoid = make_scene(bank, 0, 3)
    assert avoid.events[0, :, EVENTS.index("avoid")].any()
    # nobody walks through a tall box
    tall = [b for b in avoid.boxes if b.height > 0.5]
    roots = avoid.joints[:, :, 0, :2]
    assert min(float(b.distance(roots).min()) for b in tall) > 0.0


def test_windows_are_canonical(bank):
    w = make_windows([make_scene(bank, 0, i, seconds=6) for i in range(4)], past=10, future=20, stride=5)
    assert len(w) > 0 and w.ego.shape[1:] == (10, 15, 3) and w.future.shape[1:] == (20, 15, 3)
    assert np.allclose(w.ego[:, -1, 0, :2], 0.0, atol=1e-5)
    assert np.allclose(facing_of(w.ego[:, -1]), 0.0, atol=1e-4)
    with pytest.raises(UserError, match="past"):
        make_windows([], past=1, future=2, stride=1)


def test_inside_boxes_by_hand():
    boxes = np.array([[[1.0, 0.0, 0.5, 0.25, 1.0, math.pi / 2]]])  # rotated 90 deg: extends 0.25 along x
    pts = np.array([[[1.2, 0.4, 0.5], [1.4, 0.0, 0.5], [1.0, 0.0, 1.5]]])
    assert inside_boxes(pts, boxes, np.array([[True]])).tolist() == [[True, False, False]]
    assert not inside_boxes(pts, boxes, np.array([[False]])).any()


# ---------------------------------------------------------------------------------------------- model
def _batch(bank, n=6):
    w = make_windows([make_scene(bank, 1, i, seconds=5) for i in range(4)], past=10, future=20, stride=10)
    t = as_tensors(w)
    return {k: v[:n] for k, v in t.items()}


def test_contact_features_match_the_kernel_by_hand():
    ego = torch.randn(1, 6, 2, 3, dtype=torch.float64)
    pts = torch.randn(1, 1, 3, dtype=torch.float64)
    f = contact_features(ego, pts, 0.5, 5, 9)  # 6 past frames padded to 9, 5 coefficients: [1, 1, 2 * 5]
    c = torch.exp(-((pts[0, 0] - ego[0, :, 1]) ** 2).sum(-1) / (2 * 0.25))  # joint 1 over the past
    c_pad = torch.cat([c, c[-1:].expand(3)])  # the padded frames repeat the last one
    assert torch.allclose(f[0, 0, 5:], D.dct_matrix(9, 5, dtype=torch.float64) @ c_pad, atol=1e-12)


def test_model_output_shape_and_context_invariances(bank):
    torch.manual_seed(0)
    b = _batch(bank)
    m = HumofModel(HumofConfig()).eval()
    out = m(b)
    assert out.shape == (b["ego"].shape[0], 20, 15, 3) and torch.isfinite(out).all()
    # padded people change nothing
    b2 = dict(b)
    b2["others_mask"] = b["others_mask"].clone()
    b2["others_mask"][:, 1] = False
    ref = m(b2)
    b3 = dict(b2)
    b3["others"] = b2["others"].clone()
    b3["others"][:, 1] += 5.0
    assert torch.allclose(m(b3), ref, atol=1e-5)
    # permuting the other people, the boxes, and the points inside one azimuth group leaves it unchanged
    b4 = dict(b)
    b4["others"], b4["others_mask"] = b["others"].flip(1), b["others_mask"].flip(1)
    for k in ("points", "boxes", "boxes_mask"):
        b4[k] = b[k].flip(1)
    P = b["points"].shape[2]
    within = torch.cat([g * (P // 4) + torch.randperm(P // 4) for g in range(4)])
    b4["points"] = b4["points"][:, :, within]
    assert torch.allclose(m(b4), out, atol=1e-5)
    # the context is used: moving every box changes the forecast
    b5 = dict(b)
    b5["points"] = b["points"] + torch.tensor([0.3, 0.0, 0.0])
    assert not torch.allclose(m(b5), out, atol=1e-6)
    with pytest.raises(UserError, match="ego must be"):
        m({**b, "ego": b["ego"][:, :5]})


def test_ego_arm_ignores_the_context_and_flat_arm_is_parameter_matched(bank):
    b = _batch(bank)
    ego = HumofModel(HumofConfig(mode="ego")).eval()
    b5 = dict(b)
    b5["points"] = b["points"] + 1.0
    b5["others"] = b["others"] + 1.0
    assert torch.equal(ego(b), ego(b5))
    base = HumofConfig()
    flat = matched_flat_config(base)
    assert abs(count_parameters(HumofModel(flat)) / count_parameters(HumofModel(base)) - 1) < 0.05
    with pytest.raises(UserError, match="mode"):
        HumofConfig(mode="deep")


def test_lowpass_scale_and_frequency_scales_start_frozen():
    s = lowpass_scale(10, (3, 6), (0.7, 0.3))
    assert s.shape == (30,) and s[:4].eq(1).all() and s[4:7].eq(0.7).all() and s[7:10].eq(0.3).all()
    assert torch.equal(s[:10], s[10:20])
    m = HumofModel(HumofConfig())
    assert all(not p.requires_grad for p in m.freq_parameters()) and len(m.freq_parameters()) == 4
    assert not HumofModel(HumofConfig(freq=False)).freq_parameters()


def test_baselines_and_errors_by_hand():
    ego = np.zeros((1, 3, 2, 3), np.float32)
    ego[0, :, 0, 0] = [0.0, 0.1, 0.2]  # root moves 0.1 m per frame along x
    ego[0, :, 1] = ego[0, :, 0] + [0, 0, 0.5]
    cv = constant_velocity(ego, 4)
    assert np.allclose(cv[0, :, 0, 0], [0.3, 0.4, 0.5, 0.6])
    assert np.allclose(cv[0, :, 1] - cv[0, :, 0], [0, 0, 0.5])
    truth = cv.copy()
    truth[0, :, 0, 1] += 0.01  # 1 cm off sideways, pose shifted with the root
    truth[0, :, 1, 1] += 0.01
    assert np.allclose(path_error(cv, truth), 10.0, atol=1e-3) and np.allclose(pose_error(cv, truth), 0.0, atol=1e-3)


def test_dct_and_quaternions_equal_scipy():
    """The hand-written pieces against the libraries (issue 28): the DCT matrix is scipy.fft.dct(norm='ortho')
    applied to the identity, and quat_to_matrix (w-first) is scipy's Rotation.from_quat (x, y, z, w order)."""
    from scipy.fft import dct
    from scipy.spatial.transform import Rotation

    for n in (1, 5, 30):
        np.testing.assert_allclose(D.dct_matrix(n, dtype=torch.float64).numpy(),
                                   dct(np.eye(n), type=2, norm="ortho", axis=0), atol=1e-12)
    q = np.random.default_rng(0).normal(size=(50, 4))  # unnormalised: both normalise
    want = Rotation.from_quat(q[:, [1, 2, 3, 0]]).as_matrix()
    np.testing.assert_allclose(M.quat_to_matrix(q), want, atol=1e-12)
