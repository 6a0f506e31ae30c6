"""Synthetic activations drawn from a known sparse dictionary (ground truth for SAE studies).

Built for the reproduction of "Sparse Autoencoders Trained on the Same Data Learn Different
Features" (Paulo & Belrose, ICLR 2026, arXiv 2501.16615): x = Σ_i c_i·m_i·φ_i with φ_i random unit
vectors in R^d, c_i ~ Bernoulli(p_i) where p_i ∝ (i + offset)^-a (a Zipf law; the paper's a = 1
is the default) is scaled so that E[L0] equals a target (each p_i capped), and magnitudes
m_i = |N(μ, σ²)|. Because the dictionary is known, an SAE latent can be scored by its best cosine
to a true feature.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch

from iclr26.core.errors import UserError
from iclr26.core.seed import make_generator

log = logging.getLogger(__name__)


@dataclass
class SparseDictionaryData:
    """Samples ``X [N, d]``, the true dictionary ``features [n_features, d]`` (unit rows) and
    firing probabilities ``probs [n_features]``; ``mean_l0`` is the achieved mean active count."""

    X: torch.Tensor
    features: torch.Tensor
    probs: torch.Tensor
    mean_l0: float


def _check_zipf_exponent(zipf_exponent: float) -> float:
    a = float(zipf_exponent)
    if not (math.isfinite(a) and a >= 0):
        raise UserError(
            f"zipf_exponent={zipf_exponent} must be a finite number >= 0 (0 = uniform, 1 = default)"
        )
    return a


def firing_probabilities(
    n_features: int,
    expected_l0: float,
    offset: float = 20.0,
    cap: float = 0.5,
    *,
    zipf_exponent: float = 1.0,
) -> torch.Tensor:
    """p_i ∝ (i + offset)^-zipf_exponent, scaled so Σ p_i = expected_l0 with every p_i ≤ cap
    (water-filling: capped entries sit at ``cap``, the rest keep the exact power law)."""
    a = _check_zipf_exponent(zipf_exponent)
    if not 0 < expected_l0 <= cap * n_features:
        raise UserError(f"expected_l0={expected_l0} must be in (0, cap·n_features={cap * n_features}]")
    # x ** 1.0 is x exactly, so the default reproduces the former 1/(i + offset) bit for bit
    base = 1.0 / (torch.arange(n_features, dtype=torch.float64) + offset) ** a
    p = torch.zeros_like(base)
    capped = torch.zeros(n_features, dtype=torch.bool)
    # repeatedly scale the uncapped part to fill the remaining mass; converges in a few rounds
    for _ in range(n_features):
        remaining = expected_l0 - cap * capped.sum().item()
        scale = remaining / base[~capped].sum()
        p = torch.where(capped, torch.full_like(base, cap), base * scale)
        newly = (p > cap) & ~capped
        if not newly.any():
            break
        capped |= newly
    return p.clamp_max(cap).float()


def sparse_dictionary_activations(
    n_samples: int = 200_000,
    d: int = 64,
    n_features: int = 512,
    expected_l0: float = 8.0,
    *,
    magnitude_mean: float = 1.0,
    magnitude_std: float = 0.3,
    offset: float = 20.0,
    cap: float = 0.5,
    zipf_exponent: float = 1.0,
    seed: int = 0,
    chunk: int = 16_384,
) -> SparseDictionaryData:
    """Draw ``n_samples`` activations from a random sparse dictionary (deterministic in ``seed``).

    Feature i fires with probability ∝ (i + offset)^-zipf_exponent (see :func:`firing_probabilities`).
    """
    if min(n_samples, d, n_features) <= 0:
        raise UserError(f"n_samples, d, n_features must be positive, got {n_samples}, {d}, {n_features}")
    _check_zipf_exponent(zipf_exponent)  # before any sampling work
    gen = make_generator(seed)
    feats = torch.randn(n_features, d, generator=gen)
    feats = feats / feats.norm(dim=1, keepdim=True)  # [n_features, d]
    probs = firing_probabilities(n_features, expected_l0, offset, cap, zipf_exponent=zipf_exponent)
    X = torch.empty(n_samples, d)
    active_total = 0
    for i in range(0, n_samples, chunk):
        m = min(chunk, n_samples - i)
        on = torch.rand(m, n_features, generator=gen) < probs  # [m, n_features]
        mag = (magnitude_mean + magnitude_std * torch.randn(m, n_features, generator=gen)).abs()
        X[i : i + m] = (on * mag) @ feats
        active_total += int(on.sum())
    return SparseDictionaryData(X=X, features=feats, probs=probs, mean_l0=active_total / n_samples)
