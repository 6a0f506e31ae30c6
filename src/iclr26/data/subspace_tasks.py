"""Task sequences whose input subspaces overlap by a tunable amount (for continual merging, P8).

Built from real low-dimensional features ``z`` (e.g. PCA-whitened sklearn digits or Fashion-MNIST):
task ``t`` sees ``x = Q_t R_t z + noise * eps`` with ``R_t`` a random ``k x k`` rotation and
``Q_t`` (``dim x k``, orthonormal columns) made of ``shared`` columns common to every task plus
``k - shared`` columns private to task ``t``; labels are permuted by a per-task ``pi_t``. So
``shared / k`` is the overlap of the tasks' input subspaces (0 = disjoint, 1 = identical), while
every task stays equally hard. Used by the NUFILT reproduction (arXiv 2509.21413).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import Tensor

from iclr26.core.errors import UserError
from iclr26.core.seed import make_generator

log = logging.getLogger(__name__)


def pca_whiten(X_fit: Tensor, k: int, *others: Tensor) -> tuple[Tensor, ...]:
    """Standardise features on ``X_fit`` ``[N, D]``, project on its top-``k`` principal axes, whiten.

    Returns the transformed ``X_fit`` followed by each of ``others`` with the same transform
    (float64 SVD for determinism; output float32 ``[N, k]``).
    """
    X_fit = X_fit.reshape(X_fit.shape[0], -1).double()
    if not 1 <= k <= min(X_fit.shape):
        raise UserError(f"k={k}: must lie in [1, {min(X_fit.shape)}] for data of shape {tuple(X_fit.shape)}")
    mu = X_fit.mean(0)
    sd = X_fit.std(0).clamp(min=1e-6)
    Xs = (X_fit - mu) / sd
    _, s, vh = torch.linalg.svd(Xs, full_matrices=False)
    comp = vh[:k].T  # [D, k]
    scale = s[:k] / (X_fit.shape[0] - 1) ** 0.5  # per-component std
    outs = [((x.reshape(x.shape[0], -1).double() - mu) / sd @ comp / scale).float() for x in (X_fit, *others)]
    return tuple(outs)


def random_rotation(k: int, gen: torch.Generator) -> Tensor:
    """A Haar-random ``k x k`` orthogonal matrix (QR of a Gaussian with the sign fix)."""
    q, r = torch.linalg.qr(torch.randn(k, k, generator=gen, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r))).float()


@dataclass
class SubspaceTask:
    """One task: inputs ``[N, dim]`` and permuted labels for train and test, plus its basis ``Q``."""

    X_train: Tensor
    y_train: Tensor
    X_test: Tensor
    y_test: Tensor
    basis: Tensor  # [dim, k] orthonormal columns
    perm: Tensor  # [n_classes] label permutation


def make_subspace_tasks(
    z_train: Tensor,
    y_train: Tensor,
    z_test: Tensor,
    y_test: Tensor,
    *,
    n_tasks: int = 6,
    dim: int = 96,
    shared: int = 4,
    noise: float = 0.05,
    seed: int = 0,
) -> list[SubspaceTask]:
    """``n_tasks`` tasks over features ``z`` ``[N, k]`` with ``shared`` of ``k`` input directions in common.

    Needs ``shared + n_tasks * (k - shared) <= dim``. Deterministic in ``seed``.
    """
    k = z_train.shape[1]
    if z_test.shape[1] != k:
        raise UserError(f"z_train has {k} features but z_test has {z_test.shape[1]}")
    if not 0 <= shared <= k:
        raise UserError(f"shared={shared}: must lie in [0, {k}] (the feature dimension)")
    if n_tasks < 1:
        raise UserError(f"n_tasks={n_tasks}: must be >= 1")
    need = shared + n_tasks * (k - shared)
    if need > dim:
        raise UserError(f"dim={dim} too small: {n_tasks} tasks with k={k}, shared={shared} need {need} dims")
    gen = make_generator(seed)
    # one random orthonormal frame; shared columns first, then each task's private block
    frame, _ = torch.linalg.qr(torch.randn(dim, need, generator=gen, dtype=torch.float64))
    frame = frame.float()
    n_classes = int(max(int(y_train.max()), int(y_test.max())) + 1)
    tasks = []
    for t in range(n_tasks):
        start = shared + t * (k - shared)
        Q = torch.cat([frame[:, :shared], frame[:, start : start + k - shared]], dim=1)  # [dim, k]
        R = random_rotation(k, gen)
        perm = torch.randperm(n_classes, generator=gen)
        xs = []
        for z in (z_train, z_test):
            eps = torch.randn(z.shape[0], dim, generator=gen)
            xs.append(z.float() @ R.T @ Q.T + noise * eps)  # [N, dim]
        tasks.append(SubspaceTask(xs[0], perm[y_train], xs[1], perm[y_test], Q, perm))
    return tasks
