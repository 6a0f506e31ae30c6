"""HUMOF's library pieces against the libraries they now use (issue 28): the DCT against scipy.fft.dct / idct
(norm="ortho"), the rotations against scipy's Rotation and hand-written matrices, the URDF reader (an XML
parser) against the DeepMimic humanoid's known joint origins and a small hand-made file."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.fft import dct, idct
from scipy.spatial.transform import Rotation

from iclr26.core.errors import UserError
from iclr26.data import mocap as M
from iclr26.motion import dct as D


def test_to_dct_and_from_dct_equal_scipy_on_data():
    x = torch.from_numpy(np.random.default_rng(1).normal(size=(3, 17, 4, 3)))
    for k in (1, 6, 17):
        want = dct(x.numpy(), type=2, norm="ortho", axis=1)[:, :k]
        np.testing.assert_allclose(D.to_dct(x, k).numpy(), want, atol=1e-12)
        padded = np.zeros_like(x.numpy())
        padded[:, :k] = want  # the inverse of kept coefficients is idct with the dropped ones set to 0
        np.testing.assert_allclose(D.from_dct(torch.from_numpy(want), 17).numpy(),
                                   idct(padded, type=2, norm="ortho", axis=1), atol=1e-12)


def test_dct_matrix_is_a_fresh_tensor_each_call():
    a = D.dct_matrix(6, 3, dtype=torch.float64)
    a.zero_()  # the cached matrix must not be changed by a caller writing into its copy
    assert D.dct_matrix(6, 3, dtype=torch.float64).abs().sum() > 0


def test_axis_rotations_equal_the_hand_formula_and_scipy():
    a = np.random.default_rng(2).uniform(-np.pi, np.pi, size=(4, 5))
    c, s = np.cos(a), np.sin(a)
    Rz, Ry = M.rot_z(a), M.rot_y(a)
    assert Rz.shape == Ry.shape == (4, 5, 3, 3)
    np.testing.assert_allclose(Rz[..., 0, 0], c, atol=1e-12)
    np.testing.assert_allclose(Rz[..., 0, 1], -s, atol=1e-12)
    np.testing.assert_allclose(Rz[..., 1, 0], s, atol=1e-12)
    np.testing.assert_allclose(Ry[..., 0, 2], s, atol=1e-12)
    np.testing.assert_allclose(Ry[..., 2, 0], -s, atol=1e-12)
    np.testing.assert_allclose(Rz[..., 2, 2], 1.0, atol=1e-12)
    np.testing.assert_allclose(M.rot_z(0.3), Rotation.from_rotvec([0, 0, 0.3]).as_matrix(), atol=1e-12)
    # the w-first quaternion of a z rotation (used by the parametric fallback) is (cos a/2, 0, 0, sin a/2)
    np.testing.assert_allclose(M._qz(a), np.stack([np.cos(a / 2), 0 * a, 0 * a, np.sin(a / 2)], -1), atol=1e-12)
    np.testing.assert_allclose(M.quat_to_matrix(M._qz(a)), Rz, atol=1e-12)


def test_urdf_reader_gives_the_humanoid_origins():
    pytest.importorskip("pybullet_data")
    off = M.urdf_offsets()
    ref = M._fallback_offsets()  # the humanoid's joint origins typed in from the URDF, x 0.25
    for j in M.JOINTS:
        np.testing.assert_allclose(off[M.URDF_NAME[j]], ref[M.URDF_NAME[j]], atol=1e-9)


def test_urdf_reader_on_a_hand_made_file(tmp_path):
    names = {M.URDF_NAME[j] for j in M.JOINTS}
    body = "".join(f'<joint name="{n}" type="spherical">\n  <parent link="a"/>\n  <child link="b"/>\n'
                   f'  <origin rpy="0 0 0" xyz="1 {i} -2.5"/>\n</joint>\n' for i, n in enumerate(sorted(names)))
    p = tmp_path / "h.urdf"
    p.write_bytes(f'<?xml version="1.0"?>\n<robot name="h">\n<link name="a"/>\n{body}</robot>\n\x00'.encode())
    off = M.urdf_offsets(str(p), 2.0)
    for i, n in enumerate(sorted(names)):
        np.testing.assert_allclose(off[n], [2.0, 2.0 * i, -5.0])
    p.write_text('<robot name="h"><joint name="root"><origin xyz="0 0 0"/></joint></robot>')
    with pytest.raises(UserError, match="lacks joints"):
        M.urdf_offsets(str(p), 1.0)
    p.write_text("<robot><joint>")
    with pytest.raises(UserError, match="not valid XML"):
        M.urdf_offsets(str(p), 0.5)
