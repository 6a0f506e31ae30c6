"""Orthonormal DCT-II over time, as motion forecasters (LTD, HUMOF) use it.

``D[k, n] = sqrt(2/N) * c_k * cos(pi * (2n + 1) * k / (2N))`` with ``c_0 = 1/sqrt(2)`` and ``c_k = 1``
otherwise. Keeping the first ``n_keep`` rows low-pass filters a trajectory; with ``n_keep == N`` the round
trip ``from_dct(to_dct(x))`` is exact because ``D`` is orthonormal. The matrix is
``scipy.fft.dct(eye(N), type=2, norm="ortho", axis=0)``; it is applied with torch so gradients flow.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from iclr26.core.errors import UserError


def dct_matrix(n: int, n_keep: int | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[n_keep, n]`` orthonormal DCT-II rows (all ``n`` rows by default)."""
    k_keep = n if n_keep is None else int(n_keep)
    if n < 1 or not 1 <= k_keep <= n:
        raise UserError(f"dct_matrix: need n >= 1 and 1 <= n_keep <= n, got n={n}, n_keep={n_keep}")
    return _dct_full(n)[:k_keep].to(dtype, copy=True)


@lru_cache(maxsize=64)
def _dct_full(n: int) -> torch.Tensor:
    """All ``n`` rows in float64: column t is ``scipy.fft.dct`` of the unit vector e_t (cached: every forward
    pass asks for it)."""
    from scipy.fft import dct

    return torch.from_numpy(dct(np.eye(n), type=2, norm="ortho", axis=0))


def to_dct(x: torch.Tensor, n_keep: int, dim: int = 1) -> torch.Tensor:
    """DCT coefficients of ``x`` along ``dim`` (time), first ``n_keep`` kept."""
    D = dct_matrix(x.shape[dim], n_keep, x.dtype).to(x.device)
    return torch.movedim(torch.tensordot(D, torch.movedim(x, dim, 0), dims=1), 0, dim)


def from_dct(c: torch.Tensor, n: int, dim: int = 1) -> torch.Tensor:
    """Inverse of :func:`to_dct`: ``n`` time steps from the kept coefficients along ``dim``."""
    D = dct_matrix(n, c.shape[dim], c.dtype).to(c.device)
    return torch.movedim(torch.tensordot(D.T, torch.movedim(c, dim, 0), dims=1), 0, dim)


def joint_tokens(seq: torch.Tensor, n_keep: int) -> torch.Tensor:
    """``[B, N, J, 3]`` sequences -> ``[B, J, 3 * n_keep]`` tokens laid out [x coefs | y coefs | z coefs]."""
    if seq.dim() != 4 or seq.shape[-1] != 3:
        raise UserError(f"joint_tokens: expected [batch, time, joints, 3], got {tuple(seq.shape)}")
    c = to_dct(seq, n_keep, dim=1)  # [B, K, J, 3]
    return c.permute(0, 2, 3, 1).reshape(seq.shape[0], seq.shape[2], 3 * n_keep)


def tokens_to_seq(tok: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of :func:`joint_tokens`: ``[B, J, 3 * K]`` -> ``[B, n, J, 3]``."""
    B, J, C = tok.shape
    if C % 3:
        raise UserError(f"tokens_to_seq: token width {C} is not 3 * n_keep")
    c = tok.reshape(B, J, 3, C // 3).permute(0, 3, 1, 2)  # [B, K, J, 3]
    return from_dct(c, n, dim=1)
