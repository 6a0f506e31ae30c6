"""A time-conditioned 1-D Fourier neural operator (Li et al., 2021) used as a functional velocity field.

For functional rectified flow (P13, Zhang & Scott, ICLR 2026, arXiv 2509.10384): the velocity network must be
discretisation-agnostic so a model trained on a grid of M points can be evaluated on 2M. Each layer is a
spectral convolution (complex weights on the lowest ``modes`` Fourier coefficients) plus a pointwise linear
path plus a per-layer time embedding, followed by GELU. Inputs are the function values and the grid coordinate.
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor, nn

from iclr26.core import UserError
from iclr26.flows.core import timestep_embedding

log = logging.getLogger(__name__)

__all__ = ["SpectralConv1d", "FNO1d"]


class SpectralConv1d(nn.Module):
    """``[B, M, C_in] -> [B, M, C_out]`` (channels last): multiply the lowest ``modes`` rFFT coefficients by
    learned complex weights, zero the rest.

    The rfft/irfft pair with ``norm="forward"`` maps Fourier-series coefficients to values, so for a band-limited
    input the output is the same function whatever the grid size (modes at or beyond M//2 are dropped).
    The complex product is done as one real batched matmul per mode with the block matrix [[Wr, Wi], [-Wi, Wr]].
    """

    def __init__(self, in_channels: int, out_channels: int, modes: int):
        super().__init__()
        if modes < 1:
            raise UserError(f"SpectralConv1d: modes must be >= 1, got {modes}")
        self.modes, self.in_channels, self.out_channels = modes, in_channels, out_channels
        scale = 1.0 / (in_channels * out_channels)
        self.weight = nn.Parameter(scale * torch.randn(modes, in_channels, out_channels, 2))

    def forward(self, x: Tensor) -> Tensor:
        b, m, _ = x.shape
        k = min(self.modes, m // 2)  # keep modes strictly below Nyquist
        xf = torch.fft.rfft(x, dim=1, norm="forward")[:, :k]  # [B, k, C_in] complex
        xr = torch.cat([xf.real, xf.imag], dim=-1).transpose(0, 1)  # [k, B, 2 C_in]
        wr, wi = self.weight[:k, ..., 0], self.weight[:k, ..., 1]  # [k, C_in, C_out]
        w = torch.cat(
            [torch.cat([wr, wi], dim=-1), torch.cat([-wi, wr], dim=-1)], dim=1
        )  # [k, 2C_in, 2C_out]
        yr = torch.bmm(xr, w).transpose(0, 1)  # [B, k, 2 C_out]: (xr Wr - xi Wi, xr Wi + xi Wr)
        out = torch.zeros(b, m // 2 + 1, self.out_channels, dtype=xf.dtype, device=x.device)
        out[:, :k] = torch.complex(yr[..., : self.out_channels], yr[..., self.out_channels :])
        return torch.fft.irfft(out, n=m, dim=1, norm="forward")


class FNO1d(nn.Module):
    """Velocity field ``v(x [B, M], t [B]) -> [B, M]`` on any uniform periodic grid of M >= 2 points.

    modes: Fourier modes per layer; width: channels; n_layers: Fourier layers; time_dim: t-embedding size.
    Layer: ``h <- SiLU(K h + W h + T(t))`` with K spectral, W pointwise, T a per-layer time projection.
    """

    def __init__(self, modes: int = 16, width: int = 32, n_layers: int = 4, time_dim: int = 32):
        super().__init__()
        if width < 1 or n_layers < 1 or time_dim < 2:
            raise UserError("FNO1d: need width >= 1, n_layers >= 1, time_dim >= 2")
        self.modes, self.width, self.n_layers, self.time_dim = modes, width, n_layers, time_dim
        self.lift = nn.Linear(2, width)  # channels: function value, grid coordinate
        self.time_mlp = nn.Sequential(nn.Linear(time_dim, width), nn.SiLU(), nn.Linear(width, width))
        self.spectral = nn.ModuleList(SpectralConv1d(width, width, modes) for _ in range(n_layers))
        self.pointwise = nn.ModuleList(nn.Linear(width, width) for _ in range(n_layers))
        self.time_proj = nn.ModuleList(nn.Linear(width, width) for _ in range(n_layers))
        self.proj = nn.Sequential(nn.Linear(width, 2 * width), nn.SiLU(), nn.Linear(2 * width, 1))

    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        if x.ndim != 2:
            raise UserError(f"FNO1d: expected x of shape [B, M], got {tuple(x.shape)}")
        b, m = x.shape
        t = torch.as_tensor(t, dtype=x.dtype, device=x.device).reshape(-1).expand(b)
        grid = (torch.arange(m, dtype=x.dtype, device=x.device) / m).expand(b, m)
        h = self.lift(torch.stack([x, grid], dim=-1))  # [B, M, width]
        temb = self.time_mlp(timestep_embedding(t, self.time_dim))  # [B, width]
        for spec, pw, tp in zip(self.spectral, self.pointwise, self.time_proj, strict=True):
            h = nn.functional.silu(spec(h) + pw(h) + tp(temb)[:, None, :])
        return self.proj(h)[..., 0]
