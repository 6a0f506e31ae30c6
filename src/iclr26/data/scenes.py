"""Multi-person scenes with obstacles and scripted interactions, driven by real mocap poses.

A scene is a 6 x 6 m room with 2-4 boxes (tall ones are walked around; a low one is jumped over) and
2-3 people planned at the frame rate with social forces (attraction to a goal, repulsion from people and
tall boxes). Each scene scripts one interaction for its first two people:

- ``jump``: a low box lies across person 0's way; reaching it plays the real jump clip (human-scene);
- ``follow``: person 1 heads for where person 0 was 1 s ago (human-human);
- ``meet``: persons 0 and 1 stop 1 m apart, face to face, and person 0 plays a gesture clip (human-human,
  affects the pose);
- ``avoid``: a tall box sits on person 0's straight line to its goal, so it detours (human-scene).

Poses come from :class:`iclr26.data.mocap.PoseBank`: the walk cycle is driven by a gait phase that
advances with the distance walked divided by the clip's stride; standing people take a neutral pose.
Everything depends only on ``(seed, scene index)``. :func:`make_windows` cuts H past + T future frames per
person into canonical windows (the primary's last past root at the origin, facing +x) with the other
people's past, the box geometry, and per-window event tags of the future.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iclr26.core.errors import UserError
from iclr26.data.mocap import PoseBank

EVENTS = ("jump", "follow", "meet", "avoid")
ROOM = 6.0
TALL, LOW = 1.0, 0.25


@dataclass
class Box:
    cx: float
    cy: float
    hx: float  # half extent along x
    hy: float  # half extent along y
    height: float

    def surface_points(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``[n, 3]`` points on the box's side faces and top (area-proportional)."""
        faces = np.array([2 * self.hy * self.height, 2 * self.hy * self.height, 2 * self.hx * self.height,
                          2 * self.hx * self.height, 4 * self.hx * self.hy])
        f = rng.choice(5, size=n, p=faces / faces.sum())
        u, v = rng.uniform(-1, 1, n), rng.uniform(0, 1, n)
        x = np.where(f == 0, self.hx, np.where(f == 1, -self.hx, u * self.hx))
        y = np.where(f == 2, self.hy, np.where(f == 3, -self.hy, np.where(f < 2, u * self.hy,
                                                                           rng.uniform(-1, 1, n) * self.hy)))
        z = np.where(f == 4, self.height, v * self.height)
        order = np.argsort(np.arctan2(y, x), kind="stable")  # by azimuth: contiguous quarters are spatial groups
        return np.stack([x + self.cx, y + self.cy, z], -1)[order]

    def distance(self, p: np.ndarray) -> np.ndarray:
        """Horizontal distance of points ``[..., 2]`` to the box footprint (0 inside)."""
        dx = np.maximum(np.abs(p[..., 0] - self.cx) - self.hx, 0)
        dy = np.maximum(np.abs(p[..., 1] - self.cy) - self.hy, 0)
        return np.hypot(dx, dy)


@dataclass
class Scene:
    joints: np.ndarray  # [P, F, 15, 3] world, z-up, metres
    boxes: list[Box]
    points: np.ndarray  # [n_boxes, points_per_box, 3] box surface points, each box's sorted by azimuth
    events: np.ndarray  # [P, F, 4] bool: which scripted event acts on person p at frame f
    kind: str
    fps: float
    meta: dict = field(default_factory=dict)


def _facing(vel: np.ndarray, prev: float) -> float:
    sp = float(np.hypot(*vel))
    return float(np.arctan2(vel[1], vel[0])) if sp > 0.15 else prev


def _place(pose: np.ndarray, xy: np.ndarray, heading: float, lift: float = 0.0) -> np.ndarray:
    c, s = np.cos(heading), np.sin(heading)
    R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])
    out = pose @ R.T
    out[:, 0] += xy[0]
    out[:, 1] += xy[1]
    out[:, 2] += lift
    return out


def make_scene(bank: PoseBank, seed: int, index: int, *, seconds: float = 12.0, kind: str | None = None,
               points_per_box: int = 16) -> Scene:
    """One scene; deterministic in ``(seed, index)``. ``kind`` (one of :data:`EVENTS`) defaults to
    ``EVENTS[index % 4]``, so every block of four scenes holds each scripted interaction once."""
    rng = np.random.default_rng([seed, index])
    kind = EVENTS[index % len(EVENTS)] if kind is None else kind
    if kind not in EVENTS:
        raise UserError(f"unknown scene kind {kind!r}; allowed: {', '.join(EVENTS)}")
    fps = bank.fps
    dt = 1.0 / fps
    F = int(round(seconds * fps))
    n_people = int(rng.integers(2, 4))
    margin = 0.6

    def rand_pt():
        return rng.uniform(margin, ROOM - margin, 2)

    # ---- people: starts and goals; person 0 crosses the room so its scripted event lies on its way
    start = [rand_pt() for _ in range(n_people)]
    side = rng.integers(4)
    a = rng.uniform(margin, ROOM - margin)
    s0 = {0: (margin, a), 1: (ROOM - margin, a), 2: (a, margin), 3: (a, ROOM - margin)}[int(side)]
    b = rng.uniform(margin + 1, ROOM - margin - 1)
    g0 = {0: (ROOM - margin, b), 1: (margin, b), 2: (b, ROOM - margin), 3: (b, margin)}[int(side)]
    start[0], goal0 = np.array(s0, float), np.array(g0, float)
    goals = [goal0] + [rand_pt() for _ in range(n_people - 1)]
    speed = rng.uniform(0.9, 1.3, n_people)
    boxes: list[Box] = []
    d0 = goal0 - start[0]
    u0 = d0 / np.linalg.norm(d0)
    if kind == "avoid":  # a tall box on person 0's straight line, a bit off-centre
        c = start[0] + d0 * rng.uniform(0.4, 0.6) + np.array([-u0[1], u0[0]]) * rng.uniform(-0.15, 0.15)
        boxes.append(Box(c[0], c[1], rng.uniform(0.3, 0.45), rng.uniform(0.3, 0.45), TALL))
    if kind == "jump":  # a thin low box across the path
        c = start[0] + d0 * rng.uniform(0.35, 0.55)
        along_x = abs(u0[0]) > abs(u0[1])
        hx, hy = (0.12, 0.6) if along_x else (0.6, 0.12)
        boxes.append(Box(c[0], c[1], hx, hy, LOW))
    if kind == "meet":  # they meet between their starts
        start[1] = start[0] + d0 * rng.uniform(0.8, 1.0)
        mid = (start[0] + start[1]) / 2
        u = (start[1] - start[0]) / np.linalg.norm(start[1] - start[0])
        goals[0], goals[1] = mid - 0.5 * u, mid + 0.5 * u
    if kind == "follow":
        start[1] = start[0] - u0 * rng.uniform(0.8, 1.2)
        start[1] = np.clip(start[1], margin, ROOM - margin)
    # extra tall boxes away from everyone's start
    n_extra = int(rng.integers(1, 4)) - (1 if kind in ("avoid", "jump") else 0)
    tries = 0
    while n_extra > 0 and tries < 200:
        tries += 1
        c = rng.uniform(0.8, ROOM - 0.8, 2)
        bx = Box(c[0], c[1], rng.uniform(0.2, 0.4), rng.uniform(0.2, 0.4), TALL)
        if min(bx.distance(np.array(s)) for s in start) < 0.8 or any(
                np.hypot(bx.cx - o.cx, bx.cy - o.cy) < bx.hx + o.hx + bx.hy + o.hy for o in boxes):
            continue
        if kind == "meet" and bx.distance((start[0] + start[1]) / 2) < 1.0:
            continue
        boxes.append(bx)
        n_extra -= 1

    # ---- simulate
    pos = np.array(start, dtype=float)
    vel = np.zeros((n_people, 2))
    heading = np.array([float(np.arctan2(*(goals[i] - pos[i])[::-1])) for i in range(n_people)])
    phase = rng.uniform(0, 1, n_people)
    joints = np.zeros((n_people, F, 15, 3))
    events = np.zeros((n_people, F, len(EVENTS)), dtype=bool)
    roots = np.zeros((n_people, F, 2))
    jump_t = np.full(n_people, -1)  # frame index into the jump clip while jumping
    jumped = np.zeros(n_people, bool)
    gesture_t = -1
    gesture = "punch" if rng.random() < 0.5 else "kick"
    standing_blend = np.zeros(n_people)
    for f in range(F):
        for i in range(n_people):
            # ---- targets
            target = goals[i]
            stop_dist = 0.1
            if kind == "follow" and i == 1:
                target = roots[0, max(0, f - int(fps)), :] if f > 0 else pos[0]
                stop_dist = 0.7
                events[i, f, EVENTS.index("follow")] = f >= int(fps)
            elif not (kind == "meet" and i < 2) and np.linalg.norm(goals[i] - pos[i]) < 0.3:
                goals[i] = rand_pt()  # free walkers (and person 0 after its crossing) pick a new goal
                target = goals[i]
            d = target - pos[i]
            dist = float(np.linalg.norm(d))
            desired = np.zeros(2) if dist < stop_dist else d / dist * speed[i] * min(1.0, dist / 0.5)
            # ---- social forces: other people and tall boxes
            force = np.zeros(2)
            for k in range(n_people):
                if k != i:
                    r = pos[i] - pos[k]
                    rd = float(np.linalg.norm(r)) + 1e-6
                    if rd < 1.2 and not (kind == "meet" and {i, k} == {0, 1}):
                        force += 1.2 * np.exp(-(rd - 0.5) / 0.3) * r / rd
            box_push = 0.0
            for bx in boxes:
                if bx.height < TALL:
                    continue
                bd = float(bx.distance(pos[i]))
                if bd < 0.9:
                    away = pos[i] - np.array([np.clip(pos[i][0], bx.cx - bx.hx, bx.cx + bx.hx),
                                              np.clip(pos[i][1], bx.cy - bx.hy, bx.cy + bx.hy)])
                    an = float(np.linalg.norm(away)) + 1e-6
                    push = 2.5 * np.exp(-(bd - 0.2) / 0.25)
                    # a tangential part too, so people slide around the box instead of stalling
                    tang = np.array([-away[1], away[0]]) / an
                    if np.dot(tang, desired) < 0:
                        tang = -tang
                    force += push * (away / an + 0.8 * tang)
                    box_push = max(box_push, push)
            if box_push > 0.3 and np.linalg.norm(desired) > 0:
                events[i, f, EVENTS.index("avoid")] = True
            if jump_t[i] >= 0:  # mid-jump: the clip drives the root along the frozen heading
                k = jump_t[i]
                step = bank.jump_forward[min(k + 1, len(bank.jump_forward) - 1)] - bank.jump_forward[k]
                vel[i] = np.array([np.cos(heading[i]), np.sin(heading[i])]) * step * fps
                pos[i] = pos[i] + vel[i] * dt
                joints[i, f] = _place(bank.jump[k], pos[i], heading[i])  # the clip's own root height
                events[i, f, EVENTS.index("jump")] = True
                jump_t[i] += 1
                if jump_t[i] >= len(bank.jump):
                    jump_t[i] = -1
                roots[i, f] = pos[i]
                continue
            v_new = 0.6 * vel[i] + 0.4 * (desired + force)
            sp = float(np.linalg.norm(v_new))
            if sp > 1.6:
                v_new *= 1.6 / sp
            vel[i] = v_new
            pos[i] = np.clip(pos[i] + vel[i] * dt, 0.25, ROOM - 0.25)
            heading[i] = _facing(vel[i], heading[i])
            # ---- low box ahead: start the jump clip
            for bx in boxes:
                if bx.height < TALL and not jumped[i] and np.linalg.norm(vel[i]) > 0.3:
                    ahead = pos[i] + np.array([np.cos(heading[i]), np.sin(heading[i])]) * 0.45
                    if bx.distance(ahead) < 0.05:
                        jump_t[i], jumped[i] = 0, True
            # ---- meet: face the partner when both stopped, person 0 then gestures once
            if kind == "meet" and i < 2:
                other = pos[1 - i]
                near = float(np.linalg.norm(goals[i] - pos[i])) < 0.25
                if near:
                    heading[i] = float(np.arctan2(other[1] - pos[i][1], other[0] - pos[i][0]))
                    events[i, f, EVENTS.index("meet")] = True
                if i == 0 and near and gesture_t < 0 and np.linalg.norm(goals[1] - pos[1]) < 0.25:
                    gesture_t = 0
            sp = float(np.linalg.norm(vel[i]))
            phase[i] += sp * dt / bank.walk_stride
            standing_blend[i] = np.clip(standing_blend[i] + (0.25 if sp < 0.15 else -0.25), 0, 1)
            pose = (1 - standing_blend[i]) * bank.gait(phase[i]) + standing_blend[i] * bank.stand
            if kind == "meet" and i == 0 and gesture_t >= 0 and gesture_t < len(bank.gestures[gesture]):
                pose = bank.gestures[gesture][gesture_t]
                events[i, f, EVENTS.index("meet")] = True
                gesture_t += 1
            joints[i, f] = _place(pose, pos[i], heading[i])
            roots[i, f] = pos[i]
    points = np.stack([bx.surface_points(points_per_box, rng) for bx in boxes]) if boxes else \
        np.zeros((0, points_per_box, 3))
    return Scene(joints, boxes, points, events, kind, fps, {"n_people": n_people})


@dataclass
class Windows:
    """Canonical forecasting windows (numpy arrays, float32 geometry).

    ego [N, H, J, 3] past of the primary; future [N, T, J, 3]; others [N, K, H, J, 3] past of up to K other
    people (zeros where ``others_mask`` is False); others_future_root [N, K, T, 2] (for the human-human
    penetration metric only, never a model input); points [N, B, P, 3] the surface points of each box;
    boxes [N, B, 6] as (cx, cy, half x, half y, height, yaw) with ``boxes_mask``;
    events [N, 4] which scripted event acts on the primary in the future (:data:`EVENTS`); scene [N].
    """

    ego: np.ndarray
    future: np.ndarray
    others: np.ndarray
    others_mask: np.ndarray
    others_future_root: np.ndarray
    points: np.ndarray
    boxes: np.ndarray
    boxes_mask: np.ndarray
    events: np.ndarray
    scene: np.ndarray

    def __len__(self) -> int:
        return int(self.ego.shape[0])

    def subset(self, idx: np.ndarray) -> Windows:
        return Windows(**{k: v[idx] for k, v in self.__dict__.items()})


def facing_of(joints: np.ndarray) -> np.ndarray:
    """Heading (radians, about z) of poses ``[..., 15, 3]``: the hips' left-minus-right vector turned -90 deg."""
    lr = joints[..., 9, :2] - joints[..., 3, :2]
    return np.arctan2(-lr[..., 0], lr[..., 1])


def make_windows(scenes: list[Scene], past: int, future: int, stride: int, max_others: int = 2,
                 max_boxes: int = 4) -> Windows:
    """Cut every person of every scene into canonical windows of ``past`` + ``future`` frames."""
    if past < 2 or future < 1 or stride < 1:
        raise UserError(f"make_windows: need past >= 2, future >= 1, stride >= 1; got {past}, {future}, {stride}")
    rows: dict[str, list] = {k: [] for k in Windows.__dataclass_fields__}
    n_pts = max((s.points.shape[1] for s in scenes), default=1)
    for si, sc in enumerate(scenes):
        P, F = sc.joints.shape[:2]
        for p in range(P):
            for s in range(0, F - past - future + 1, stride):
                seq = sc.joints[p, s:s + past + future]
                o = seq[past - 1, 0, :2].copy()
                th = float(facing_of(seq[past - 1]))
                c, sn = np.cos(-th), np.sin(-th)
                R = np.array([[c, -sn, 0], [sn, c, 0], [0, 0, 1.0]])

                def canon(x, o=o, R=R):
                    y = x.copy()
                    y[..., 0] -= o[0]
                    y[..., 1] -= o[1]
                    return y @ R.T

                cs = canon(seq)
                others = [k for k in range(P) if k != p][:max_others]
                oth = np.zeros((max_others, past, 15, 3))
                om = np.zeros(max_others, bool)
                ofr = np.zeros((max_others, future, 2))
                for n, k in enumerate(others):
                    ok = canon(sc.joints[k, s:s + past + future])
                    oth[n], om[n], ofr[n] = ok[:past], True, ok[past:, 0, :2]
                pts = np.zeros((max_boxes, n_pts, 3))
                nb = min(len(sc.boxes), max_boxes)
                pts[:nb] = canon(sc.points[:nb])
                bxs = np.zeros((max_boxes, 6))
                bm = np.zeros(max_boxes, bool)
                for bi, bx in enumerate(sc.boxes[:max_boxes]):
                    cxy = canon(np.array([bx.cx, bx.cy, 0.0]))
                    bxs[bi] = (cxy[0], cxy[1], bx.hx, bx.hy, bx.height, -th)
                    bm[bi] = True
                rows["ego"].append(cs[:past])
                rows["future"].append(cs[past:])
                rows["others"].append(oth)
                rows["others_mask"].append(om)
                rows["others_future_root"].append(ofr)
                rows["points"].append(pts)
                rows["boxes"].append(bxs)
                rows["boxes_mask"].append(bm)
                rows["events"].append(sc.events[p, s + past:s + past + future].any(0))
                rows["scene"].append(si)
    out = {}
    for k, v in rows.items():
        a = np.stack(v) if v else np.zeros((0,))
        out[k] = a.astype(np.float32) if a.dtype == np.float64 else a
    return Windows(**out)


def inside_boxes(points: np.ndarray, boxes: np.ndarray, boxes_mask: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """For joints ``[N, ..., 3]`` (canonical) and boxes ``[N, B, 6]``: True where a point is inside any box."""
    N = points.shape[0]
    flat = points.reshape(N, -1, 3)
    hit = np.zeros(flat.shape[:2], bool)
    for b in range(boxes.shape[1]):
        cx, cy, hx, hy, h, yaw = (boxes[:, b, i][:, None] for i in range(6))
        dx, dy = flat[..., 0] - cx, flat[..., 1] - cy
        c, s = np.cos(-yaw), np.sin(-yaw)  # into the box frame
        bx, by = c * dx - s * dy, s * dx + c * dy
        inside = (np.abs(bx) < hx - margin) & (np.abs(by) < hy - margin) & (flat[..., 2] < h - margin)
        hit |= inside & boxes_mask[:, b][:, None]
    return hit.reshape(points.shape[:-1])
