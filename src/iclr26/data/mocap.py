"""Real motion-capture clips (DeepMimic humanoid) and forward kinematics onto a 15-joint skeleton.

The ``pybullet`` wheel ships 15 DeepMimic clips (``pybullet_data/data/motions/humanoid3d_*.txt``) and the
skeleton they drive (``pybullet_data/humanoid/humanoid.urdf``). Only the data package is read: the pybullet
C module is never imported. A frame holds 44 floats: its duration, the root position (3), the root
quaternion (4, w first), then per joint a w-first quaternion (spherical joints) or one angle about the
local z axis (knees and elbows), in the order of :data:`FRAME_JOINTS`. The clips are y-up; the URDF is
loaded at scale 0.25 (as DeepMimic does), which puts the feet near the floor with the root at ~0.85 m.

:func:`forward_kinematics` places the 15 joints of :data:`JOINTS`; :class:`PoseBank` turns clips into
root-local, z-up poses facing +x (yaw and horizontal translation removed) that the scene composer of
:mod:`iclr26.data.scenes` drives along planned paths.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from iclr26.core.errors import MissingAssetError, UserError

#: the 15 joints of the skeleton, in output order
JOINTS = ("root", "chest", "neck", "r_hip", "r_knee", "r_ankle", "r_shoulder", "r_elbow", "r_wrist",
          "l_hip", "l_knee", "l_ankle", "l_shoulder", "l_elbow", "l_wrist")
#: index of each joint's parent in :data:`JOINTS` (-1 for the root)
PARENTS = (-1, 0, 1, 0, 3, 4, 1, 6, 7, 0, 9, 10, 1, 12, 13)
#: URDF joint name of each skeleton joint
URDF_NAME = {"root": "root", "chest": "chest", "neck": "neck", "r_hip": "right_hip", "r_knee": "right_knee",
             "r_ankle": "right_ankle", "r_shoulder": "right_shoulder", "r_elbow": "right_elbow",
             "r_wrist": "right_wrist", "l_hip": "left_hip", "l_knee": "left_knee", "l_ankle": "left_ankle",
             "l_shoulder": "left_shoulder", "l_elbow": "left_elbow", "l_wrist": "left_wrist"}
#: rotating joints in frame order after the root: (name, 4 = quaternion w-first, 1 = angle about local z)
FRAME_JOINTS = (("chest", 4), ("neck", 4), ("r_hip", 4), ("r_knee", 1), ("r_ankle", 4), ("r_shoulder", 4),
                ("r_elbow", 1), ("l_hip", 4), ("l_knee", 1), ("l_ankle", 4), ("l_shoulder", 4), ("l_elbow", 1))
FRAME_WIDTH = 1 + 3 + 4 + sum(n for _, n in FRAME_JOINTS)  # 44
URDF_SCALE = 0.25
CLIPS = ("walk", "run", "jump", "kick", "punch", "backflip", "cartwheel", "crawl", "roll", "spin", "spinkick",
         "dance_a", "dance_b", "getup_facedown", "getup_faceup")
INSTALL = "pip install pybullet  (its wheel ships the DeepMimic clips; `make demo` installs it)"


def data_path() -> Path:
    """The ``pybullet_data`` folder; :class:`MissingAssetError` naming the install command if absent."""
    try:
        import pybullet_data  # the pure-data package inside the pybullet wheel (no C module)
    except ImportError as e:
        raise MissingAssetError(f"motion-capture clips need the pybullet wheel: {INSTALL}") from e
    return Path(pybullet_data.getDataPath())


# ---------------------------------------------------------------------------------------------- rotations
def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices ``[..., 3, 3]`` of unit quaternions ``[..., 4]`` in w-first order (normalised here),
    through :class:`scipy.spatial.transform.Rotation` (which wants x, y, z, w: the order is rolled here)."""
    from scipy.spatial.transform import Rotation

    q = np.asarray(q, dtype=np.float64)
    if q.shape[-1] != 4:
        raise UserError(f"quaternions need a last dimension of 4 (w, x, y, z), got shape {q.shape}")
    flat = q.reshape(-1, 4)
    if not len(flat):
        return np.zeros((*q.shape[:-1], 3, 3))
    return Rotation.from_quat(flat[:, [1, 2, 3, 0]]).as_matrix().reshape(*q.shape[:-1], 3, 3)


def _axis_rotation(axis: str, angle: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    a = np.asarray(angle, dtype=np.float64)
    flat = a.reshape(-1)
    if not len(flat):
        return np.zeros((*a.shape, 3, 3))
    return Rotation.from_euler(axis, flat[:, None]).as_matrix().reshape(*a.shape, 3, 3)


def rot_z(angle: np.ndarray) -> np.ndarray:
    """Rotations ``[..., 3, 3]`` about the z axis by ``angle`` radians (scipy's ``Rotation.from_euler``)."""
    return _axis_rotation("z", angle)


def rot_y(angle: np.ndarray) -> np.ndarray:
    """Rotations ``[..., 3, 3]`` about the y axis by ``angle`` radians (scipy's ``Rotation.from_euler``)."""
    return _axis_rotation("y", angle)


def y_up_to_z_up(p: np.ndarray) -> np.ndarray:
    """(x, y, z) y-up -> (x, -z, y) z-up: a proper rotation (+90 degrees about x); +x stays +x."""
    p = np.asarray(p)
    return np.stack([p[..., 0], -p[..., 2], p[..., 1]], -1)


# ---------------------------------------------------------------------------------------------- skeleton
@lru_cache(maxsize=4)
def urdf_offsets(path: str | None = None, scale: float = URDF_SCALE) -> dict[str, np.ndarray]:
    """Each joint's origin in its parent's frame (metres, y-up), read from the humanoid URDF and scaled."""
    p = Path(path) if path else data_path() / "humanoid" / "humanoid.urdf"
    if not p.exists():
        raise MissingAssetError(f"no humanoid URDF at {p}: {INSTALL}")
    text = p.read_bytes().decode("latin-1").replace("\x00", "")  # the shipped file ends with a NUL byte
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as e:
        raise UserError(f"URDF {p} is not valid XML: {e}") from e
    out: dict[str, np.ndarray] = {}
    for joint in root.iter("joint"):
        origin = joint.find("origin")
        if joint.get("name") and origin is not None and origin.get("xyz"):
            out[joint.get("name")] = np.array([float(v) for v in origin.get("xyz").split()]) * scale
    missing = [URDF_NAME[j] for j in JOINTS if URDF_NAME[j] not in out]
    if missing:
        raise UserError(f"URDF {p} lacks joints {missing}; expected the DeepMimic humanoid")
    return out


def bone_lengths(offsets: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """``[15]`` distance of each joint from its parent (0 for the root) implied by the URDF."""
    off = offsets or urdf_offsets()
    return np.array([0.0 if PARENTS[i] < 0 else float(np.linalg.norm(off[URDF_NAME[j]]))
                     for i, j in enumerate(JOINTS)])


@dataclass
class Clip:
    """One DeepMimic clip: per-frame durations, root position / quaternion and joint rotations (y-up)."""

    name: str
    loop: bool
    dt: np.ndarray  # [F] seconds
    root_pos: np.ndarray  # [F, 3]
    root_quat: np.ndarray  # [F, 4] w first
    rot: dict[str, np.ndarray]  # joint -> [F, 4] quaternion or [F] angle

    @property
    def n_frames(self) -> int:
        return int(self.dt.shape[0])


def parse_clip(frames: list[list[float]], name: str = "clip", loop: bool = False) -> Clip:
    """A :class:`Clip` from raw 44-float frames (the DeepMimic layout described in the module docstring)."""
    F = np.asarray(frames, dtype=np.float64)
    if F.ndim != 2 or F.shape[1] != FRAME_WIDTH or F.shape[0] < 2:
        raise UserError(f"clip {name!r}: frames must be [n >= 2, {FRAME_WIDTH}], got {F.shape}")
    rot, c = {}, 8
    for j, n in FRAME_JOINTS:
        rot[j] = F[:, c] if n == 1 else F[:, c:c + 4]
        c += n
    return Clip(name, loop, F[:, 0].copy(), F[:, 1:4].copy(), F[:, 4:8].copy(), rot)


@lru_cache(maxsize=32)
def load_clip(name: str) -> Clip:
    """Load ``humanoid3d_<name>.txt`` from the pybullet wheel (``name`` one of :data:`CLIPS`)."""
    if name not in CLIPS:
        raise UserError(f"unknown clip {name!r}; allowed: {', '.join(CLIPS)}")
    p = data_path() / "data" / "motions" / f"humanoid3d_{name}.txt"
    if not p.exists():
        raise MissingAssetError(f"clip {p} not found: {INSTALL}")
    d = json.loads(p.read_text())
    return parse_clip(d["Frames"], name, loop=str(d.get("Loop", "none")).lower() == "wrap")


def forward_kinematics(root_pos: np.ndarray, root_quat: np.ndarray, rot: dict[str, np.ndarray],
                       offsets: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Joint positions ``[F, 15, 3]`` (the clip's y-up frame) of :data:`JOINTS`.

    A joint sits at its parent's position plus the parent's world rotation applied to its URDF origin;
    its own world rotation is the parent's times its local rotation (a quaternion, or an angle about the
    local z axis for knees and elbows; wrists are fixed).
    """
    off = offsets or urdf_offsets()
    root_pos = np.asarray(root_pos, dtype=np.float64)
    F = root_pos.shape[0]
    pos = np.zeros((F, len(JOINTS), 3))
    R = np.zeros((F, len(JOINTS), 3, 3))
    pos[:, 0] = root_pos
    R[:, 0] = quat_to_matrix(root_quat)
    for i, j in enumerate(JOINTS):
        if i == 0:
            continue
        par = PARENTS[i]
        pos[:, i] = pos[:, par] + np.einsum("fab,b->fa", R[:, par], off[URDF_NAME[j]])
        if j in rot:
            r = rot[j]
            local = rot_z(r) if r.ndim == 1 else quat_to_matrix(r)
            R[:, i] = R[:, par] @ local
        else:
            R[:, i] = R[:, par]
    return pos


def clip_positions(clip: Clip) -> np.ndarray:
    """``[F, 15, 3]`` joint positions of a clip (y-up, the clip's own world frame)."""
    return forward_kinematics(clip.root_pos, clip.root_quat, clip.rot)


def _yaw_y_up(root_quat: np.ndarray) -> np.ndarray:
    """Heading about the vertical (y) axis of the character, whose forward axis is +x."""
    fwd = quat_to_matrix(root_quat)[..., :, 0]  # image of +x
    return np.arctan2(-fwd[..., 2], fwd[..., 0])


def root_local_poses(clip: Clip, fps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resample ``clip`` to ``fps`` and return (poses [K, 15, 3], forward [K], heading [K]).

    poses are z-up, facing +x, with the root above the origin (its height kept); ``forward`` is the root's
    displacement along the clip's initial heading since the first frame (metres), and ``heading`` the yaw
    change since the first frame; both let a caller replay the clip's own travel.
    """
    if fps <= 0:
        raise UserError(f"fps must be > 0, got {fps}")
    t = np.concatenate([[0.0], np.cumsum(clip.dt[:-1])])  # start time of each frame
    tk = np.arange(0.0, t[-1] + 1e-9, 1.0 / fps)
    idx = np.clip(np.searchsorted(t, tk, side="right") - 1, 0, clip.n_frames - 1)  # nearest earlier frame
    yaw = _yaw_y_up(clip.root_quat[idx])
    # remove the yaw: pre-rotate the root by -yaw about y; then drop the horizontal root translation
    unyaw = rot_y(-yaw)  # [K, 3, 3]
    Rq = quat_to_matrix(clip.root_quat[idx])
    R0 = unyaw @ Rq
    # back to a w-first quaternion is not needed: forward_kinematics takes matrices through a tiny shim
    root = np.zeros((len(idx), 3))
    root[:, 1] = clip.root_pos[idx, 1]
    pos = _fk_with_root_matrix(root, R0, {k: v[idx] for k, v in clip.rot.items()})
    heading0 = _yaw_y_up(clip.root_quat[:1])[0]
    d = clip.root_pos[idx] - clip.root_pos[0]
    fwd = d[:, 0] * np.cos(heading0) - d[:, 2] * np.sin(heading0)
    return y_up_to_z_up(pos), fwd, yaw - heading0


def _fk_with_root_matrix(root_pos: np.ndarray, R_root: np.ndarray, rot: dict[str, np.ndarray]) -> np.ndarray:
    off = urdf_offsets()
    F = root_pos.shape[0]
    pos = np.zeros((F, len(JOINTS), 3))
    R = np.zeros((F, len(JOINTS), 3, 3))
    pos[:, 0], R[:, 0] = root_pos, R_root
    for i, j in enumerate(JOINTS[1:], start=1):
        par = PARENTS[i]
        pos[:, i] = pos[:, par] + np.einsum("fab,b->fa", R[:, par], off[URDF_NAME[j]])
        r = rot.get(j)
        R[:, i] = R[:, par] if r is None else R[:, par] @ (rot_z(r) if r.ndim == 1 else quat_to_matrix(r))
    return pos


@dataclass
class PoseBank:
    """Root-local z-up poses from the real clips, at the scene frame rate.

    walk / run: one cycle each on a phase grid with its stride (metres per cycle); jump, kick, punch:
    whole clips played in time; stand: a neutral pose (the first punch frame, feet apart, arms down-ish).
    """

    fps: float
    walk: np.ndarray  # [P, 15, 3] one gait cycle
    walk_stride: float
    run: np.ndarray
    run_stride: float
    jump: np.ndarray  # [K, 15, 3]
    jump_forward: np.ndarray  # [K] metres travelled along the heading
    gestures: dict[str, np.ndarray]
    stand: np.ndarray  # [15, 3]
    source: str = "mocap"

    @classmethod
    def from_clips(cls, fps: float = 10.0, phases: int = 48) -> PoseBank:
        walk, walk_stride = _cycle("walk", phases)
        run, run_stride = _cycle("run", phases)
        jump, jf, _ = root_local_poses(load_clip("jump"), fps)
        gest = {g: root_local_poses(load_clip(g), fps)[0] for g in ("punch", "kick")}
        return cls(fps, walk, walk_stride, run, run_stride, jump, jf, gest, gest["punch"][0].copy())

    def gait(self, phase: np.ndarray, kind: str = "walk") -> np.ndarray:
        """Poses ``[..., 15, 3]`` at gait ``phase`` (cycles, any real; wrapped)."""
        cyc = self.walk if kind == "walk" else self.run
        P = cyc.shape[0]
        x = (np.asarray(phase) % 1.0) * P
        i0 = np.floor(x).astype(int) % P
        w = (x - np.floor(x))[..., None, None]
        return (1 - w) * cyc[i0] + w * cyc[(i0 + 1) % P]


def _cycle(name: str, phases: int) -> tuple[np.ndarray, float]:
    """One cycle of a looping clip on a uniform phase grid, and its stride (root travel per cycle)."""
    clip = load_clip(name)
    fine_fps = 1.0 / float(np.median(clip.dt))
    poses, fwd, _ = root_local_poses(clip, fine_fps)
    n = poses.shape[0]
    grid = np.linspace(0, n - 1, phases, endpoint=False)
    i0 = np.floor(grid).astype(int)
    w = (grid - i0)[:, None, None]
    cyc = (1 - w) * poses[i0] + w * poses[np.minimum(i0 + 1, n - 1)]
    stride = float(np.linalg.norm(clip.root_pos[-1, [0, 2]] - clip.root_pos[0, [0, 2]]))
    return cyc, stride


def synthetic_pose_bank(fps: float = 10.0, phases: int = 48) -> PoseBank:
    """Fallback without the clips: the same skeleton driven by parametric gait curves (hip / knee /
    shoulder sinusoids), a crouch-lift jump and an arm-raise gesture. Results on it are not the
    reproduction's verdicts (``source == "synthetic"``)."""
    off = _fallback_offsets()
    ph = np.arange(phases) / phases

    def pose(hip_r, hip_l, knee_r, knee_l, sh_r, sh_l, el=0.3, root_h=0.85):
        Fn = np.asarray(hip_r).shape[0]
        rot = {"r_hip": _qz(hip_r), "l_hip": _qz(hip_l), "r_knee": -np.abs(knee_r), "l_knee": -np.abs(knee_l),
               "r_shoulder": _qz(sh_r), "l_shoulder": _qz(sh_l), "r_elbow": np.full(Fn, el), "l_elbow": np.full(Fn, el)}
        root = np.zeros((Fn, 3))
        root[:, 1] = root_h
        return y_up_to_z_up(forward_kinematics(root, np.tile([1.0, 0, 0, 0], (Fn, 1)), rot, off))

    s = 2 * np.pi * ph
    walk = pose(0.4 * np.sin(s), -0.4 * np.sin(s), 0.6 * np.clip(np.sin(s + 1), 0, None),
                0.6 * np.clip(np.sin(s + 1 + np.pi), 0, None), -0.3 * np.sin(s), 0.3 * np.sin(s))
    run = pose(0.7 * np.sin(s), -0.7 * np.sin(s), 1.2 * np.clip(np.sin(s + 1), 0, None),
               1.2 * np.clip(np.sin(s + 1 + np.pi), 0, None), -0.6 * np.sin(s), 0.6 * np.sin(s))
    K = int(round(1.6 * fps))
    u = np.linspace(0, 1, K)
    crouch = np.clip(np.sin(np.pi * u * 2), 0, None) * (u < 0.5)
    lift = np.sin(np.pi * np.clip((u - 0.3) / 0.5, 0, 1))
    jump = pose(0.8 * crouch + 0.6 * lift, 0.8 * crouch + 0.6 * lift, 1.4 * crouch + 1.0 * lift,
                1.4 * crouch + 1.0 * lift, 0.5 * lift, 0.5 * lift, root_h=0.85)
    jump[:, :, 2] += (0.35 * lift - 0.25 * crouch)[:, None]
    G = int(round(1.5 * fps))
    g = np.sin(np.pi * np.linspace(0, 1, G))
    zeros = np.zeros(G)
    raise_arm = pose(zeros, zeros, zeros, zeros, 2.5 * g, zeros, el=0.2)
    stand = pose(np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1))[0]
    stride = 1.2
    return PoseBank(fps, walk, stride, run, 2.8, jump, np.linspace(0, 1.0, K), {"punch": raise_arm, "kick": raise_arm},
                    stand, source="synthetic")


def _qz(angle: np.ndarray) -> np.ndarray:
    """w-first quaternions of rotations about z by ``angle`` (scipy's ``Rotation``)."""
    from scipy.spatial.transform import Rotation

    a = np.asarray(angle, dtype=np.float64)
    return Rotation.from_euler("z", a.reshape(-1, 1)).as_quat(scalar_first=True).reshape(*a.shape, 4)


def _fallback_offsets() -> dict[str, np.ndarray]:
    """The DeepMimic humanoid's joint origins (URDF values x 0.25), for when the wheel is absent."""
    raw = {"root": (0, 0, 0), "chest": (0, 0.944604, 0), "neck": (0, 0.895576, 0), "right_hip": (0, 0, 0.339548),
           "right_knee": (0, -1.686184, 0), "right_ankle": (0, -1.63948, 0), "right_shoulder": (-0.0962, 0.974, 0.73244),
           "right_elbow": (0, -1.099152, 0), "right_wrist": (0, -1.035788, 0), "left_hip": (0, 0, -0.339548),
           "left_knee": (0, -1.686184, 0), "left_ankle": (0, -1.63948, 0), "left_shoulder": (-0.0962, 0.974, -0.73244),
           "left_elbow": (0, -1.099152, 0), "left_wrist": (0, -1.035788, 0)}
    return {k: np.array(v, dtype=np.float64) * URDF_SCALE for k, v in raw.items()}


def pose_bank(fps: float = 10.0, source: str = "mocap") -> PoseBank:
    """:class:`PoseBank` from the real clips (``source="mocap"``) or the parametric fallback (``"synthetic"``)."""
    if source == "mocap":
        return PoseBank.from_clips(fps)
    if source == "synthetic":
        return synthetic_pose_bank(fps)
    raise UserError(f"unknown motion source {source!r}; allowed: mocap, synthetic")
