"""Matching the latents of two sparse dictionaries (exact Hungarian and sparse candidate matching).

From "Sparse Autoencoders Trained on the Same Data Learn Different Features" (Paulo & Belrose,
ICLR 2026, arXiv 2501.16615): L2-normalise the encoder rows (and separately the decoder rows) of
two SAEs, find the one-to-one assignment maximising the summed cosine, and call a latent *shared*
when its partner's cosine exceeds 0.7 under both the encoder and the decoder matching. Exact
Hungarian (scipy ``linear_sum_assignment``) is O(n³); above 16k latents the sparse route keeps the
top-k cosine candidates of every row and column (blocked matmuls, never an n×n matrix) and solves
a minimum-weight full bipartite matching on that graph (costs 1 − cos + ε), growing k and finally
falling back to greedy mutual nearest neighbours if the candidate graph has no full matching.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from iclr26.core.errors import UserError
from iclr26.core.progress import progress

log = logging.getLogger(__name__)

EXACT_MAX = 16_384


@dataclass
class Matching:
    """A one-to-one matching of the rows of A to rows of B.

    ``partner [nA]`` (−1 where a row is unmatched), ``cosine [nA]`` (cosine to the partner, NaN if
    unmatched), ``method`` (``exact``, ``sparse``, ``greedy``), ``k`` (candidates per row for
    sparse), ``notes``.
    """

    partner: np.ndarray
    cosine: np.ndarray
    method: str
    k: int | None = None
    notes: str = ""

    @property
    def mean_cosine(self) -> float:
        return float(np.nanmean(self.cosine)) if self.cosine.size else float("nan")


def _as_rows(M: torch.Tensor | np.ndarray, name: str) -> torch.Tensor:
    M = torch.as_tensor(M)
    if M.ndim != 2:
        raise UserError(f"{name} must be a 2-D matrix of row vectors [n, d], got shape {tuple(M.shape)}")
    return F.normalize(M.detach().float(), dim=1)


def cosine_blocks(
    A: torch.Tensor | np.ndarray,
    B: torch.Tensor | np.ndarray,
    block: int = 4096,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> Iterator[tuple[int, torch.Tensor]]:
    """Yield ``(row_start, C[row_start:row_start+block] [b, nB])`` of the cosine matrix of rows.

    Only one ``block × nB`` slice exists at a time. ``device`` defaults to CUDA when available;
    ``dtype=torch.bfloat16`` halves memory traffic (cosines then carry errors of a few 1e-3).
    """
    An, Bn = _as_rows(A, "A"), _as_rows(B, "B")
    if An.shape[1] != Bn.shape[1]:
        raise UserError(f"A and B rows must have the same dimension, got {An.shape[1]} and {Bn.shape[1]}")
    dev = (
        torch.device(device)
        if device is not None
        else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    Bd = Bn.to(dev, dtype)
    for s in range(0, An.shape[0], block):
        yield s, (An[s : s + block].to(dev, dtype) @ Bd.T)


def cosine_matrix(A: torch.Tensor | np.ndarray, B: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Full cosine matrix ``[nA, nB]`` (small problems only)."""
    An, Bn = _as_rows(A, "A"), _as_rows(B, "B")
    if An.shape[1] != Bn.shape[1]:
        raise UserError(f"A and B rows must have the same dimension, got {An.shape[1]} and {Bn.shape[1]}")
    return An @ Bn.T


def max_cosine(A: torch.Tensor | np.ndarray, B: torch.Tensor | np.ndarray, block: int = 4096) -> torch.Tensor:
    """For every row of A, its best cosine to any row of B: ``[nA]`` (blocked)."""
    out = []
    for _, C in cosine_blocks(A, B, block, device="cpu"):
        out.append(C.max(dim=1).values)
    return torch.cat(out)


def match_exact(C: torch.Tensor | np.ndarray, max_size: int = EXACT_MAX) -> Matching:
    """Hungarian assignment maximising the summed cosine ``C [nA, nB]`` (scipy, exact)."""
    from scipy.optimize import linear_sum_assignment

    C = np.asarray(torch.as_tensor(C).detach().cpu().double().numpy())
    if C.ndim != 2:
        raise UserError(f"cost matrix must be 2-D, got shape {C.shape}")
    if max(C.shape) > max_size:
        raise UserError(
            f"exact matching of {C.shape[0]}×{C.shape[1]} exceeds max_size={max_size} (O(n³) time, O(n²) memory); "
            "use match_sparse or raise max_size"
        )
    rows, cols = linear_sum_assignment(C, maximize=True)
    partner = np.full(C.shape[0], -1, dtype=np.int64)
    cosine = np.full(C.shape[0], np.nan)
    partner[rows] = cols
    cosine[rows] = C[rows, cols]
    return Matching(partner, cosine, "exact")


def topk_candidates(
    A: torch.Tensor | np.ndarray,
    B: torch.Tensor | np.ndarray,
    k: int = 32,
    block: int | None = None,
    device: str | torch.device | None = None,
    both_sides: bool = True,
    dtype: torch.dtype = torch.float32,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate edges (rows, cols, cosines): the top-k of every row of C = cos(A, B) and, with
    ``both_sides``, of every column, from one blocked pass (duplicates removed).

    ``block`` defaults to the number of rows whose cosine slice fits in 512 MB (at most 4096).
    """
    An, Bn = _as_rows(A, "A"), _as_rows(B, "B")
    nA, nB = An.shape[0], Bn.shape[0]
    if block is None:
        block = int(max(256, min(4096, 2**27 // max(nB, 1))))
    kr, kc = min(k, nB), min(k, nA)
    rows, cols, vals = [], [], []
    col_best_v = col_best_i = None
    blocks = cosine_blocks(An, Bn, block, device, dtype)
    for s, C in progress(blocks, desc="match candidates", total=-(-nA // block)):
        v, i = C.topk(kr, dim=1)  # [b, kr]
        rows.append((torch.arange(C.shape[0], device=C.device) + s).repeat_interleave(kr).cpu())
        cols.append(i.reshape(-1).cpu())
        vals.append(v.reshape(-1).cpu())
        if both_sides:
            # running top-k per column: merge this block's column top-k with the best so far
            cv, ci = C.topk(min(kc, C.shape[0]), dim=0)  # [kc', nB]
            ci = ci + s
            if col_best_v is None:
                col_best_v, col_best_i = cv, ci
            else:
                mv = torch.cat([col_best_v, cv])
                mi = torch.cat([col_best_i, ci])
                col_best_v, sel = mv.topk(min(kc, mv.shape[0]), dim=0)
                col_best_i = mi.gather(0, sel)
        del C
    if both_sides and col_best_v is not None:
        kk = col_best_v.shape[0]
        rows.append(col_best_i.reshape(-1).cpu())
        cols.append(torch.arange(nB, device=col_best_i.device).repeat(kk).cpu())
        vals.append(col_best_v.reshape(-1).cpu())
    r = torch.cat(rows).numpy().astype(np.int64)
    c = torch.cat(cols).numpy().astype(np.int64)
    v = torch.cat(vals).float().numpy().astype(np.float64)
    # deduplicate edges (a pair can be both a row and a column candidate)
    key = r * nB + c
    _, first = np.unique(key, return_index=True)
    return r[first], c[first], v[first]


def _greedy_mutual(
    r: np.ndarray, c: np.ndarray, v: np.ndarray, nA: int, nB: int
) -> tuple[np.ndarray, np.ndarray]:
    """Greedy matching over candidate edges by decreasing cosine (mutual best first)."""
    order = np.argsort(-v, kind="stable")
    partner = np.full(nA, -1, dtype=np.int64)
    cos = np.full(nA, np.nan)
    used = np.zeros(nB, dtype=bool)
    for e in order:
        a, b = r[e], c[e]
        if partner[a] < 0 and not used[b]:
            partner[a], cos[a], used[b] = b, v[e], True
    return partner, cos


def match_sparse(
    A: torch.Tensor | np.ndarray,
    B: torch.Tensor | np.ndarray,
    k: int = 32,
    *,
    block: int | None = None,
    eps: float = 1e-6,
    max_k: int = 512,
    device: str | torch.device | None = None,
    both_sides: bool = True,
    precision: str = "auto",
) -> Matching:
    """One-to-one matching of the rows of A to rows of B from top-k cosine candidates.

    Solves ``scipy.sparse.csgraph.min_weight_full_bipartite_matching`` on costs 1 − cos + ε (the
    routine needs strictly positive weights). If the candidate graph admits no matching that covers
    every row of the smaller side, k is doubled up to ``max_k``; after that a greedy matching by
    decreasing cosine is returned and ``method='greedy'`` with a warning. ``precision``: ``fp32``,
    ``bf16`` (candidate cosines from bf16 matmuls, ≈2x faster on CPUs with bf16 units; edge costs then
    err by a few 1e-3) or ``auto`` (bf16 above 16k rows). Returned cosines are always recomputed in fp32.
    """
    if precision not in ("auto", "fp32", "bf16"):
        raise UserError(f"precision={precision!r}; allowed: auto, fp32, bf16")
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    An, Bn = _as_rows(A, "A"), _as_rows(B, "B")
    nA, nB = An.shape[0], Bn.shape[0]
    if k <= 0:
        raise UserError(f"k must be positive, got {k}")
    transpose = nA > nB  # scipy matches every row of the smaller side; keep rows as the smaller one
    use_bf16 = precision == "bf16" or (precision == "auto" and max(nA, nB) > EXACT_MAX)
    dtype = torch.bfloat16 if use_bf16 else torch.float32
    kk = k
    while True:
        r, c, v = topk_candidates(An, Bn, kk, block, device, both_sides, dtype)
        if transpose:
            r, c = c, r
        n_r, n_c = (nB, nA) if transpose else (nA, nB)
        cost = np.clip(1.0 - v, 0.0, None) + eps
        G = csr_matrix((cost, (r, c)), shape=(n_r, n_c))
        try:
            rr, cc = min_weight_full_bipartite_matching(G)
            break
        except ValueError:
            if kk >= min(max_k, max(nA, nB)):
                msg = (
                    f"no full matching among top-{kk} candidates; fell back to greedy matching by "
                    "decreasing cosine (not optimal)"
                )
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
                log.warning(msg)
                r0, c0, v0 = topk_candidates(An, Bn, kk, block, device, both_sides, dtype)
                partner, cos = _greedy_mutual(r0, c0, v0, nA, nB)
                return Matching(partner, cos, "greedy", kk, msg)
            log.info("no full matching with k=%d; retrying with k=%d", kk, 2 * kk)
            kk *= 2
    if transpose:
        rr, cc = cc, rr
    partner = np.full(nA, -1, dtype=np.int64)
    cos = np.full(nA, np.nan)
    partner[rr] = cc
    # cosine of each chosen edge, recomputed from the rows (cheap: one dot product per pair)
    cos[rr] = (An[torch.as_tensor(rr)] * Bn[torch.as_tensor(cc)]).sum(1).double().numpy()
    notes = "" if kk == k else f"k grown from {k} to {kk} to find a full matching"
    if use_bf16:
        notes = (notes + "; " if notes else "") + "candidate cosines from bf16 matmuls"
    return Matching(partner, cos, "sparse", kk, notes)


def match(
    A: torch.Tensor | np.ndarray,
    B: torch.Tensor | np.ndarray,
    method: str = "auto",
    k: int = 32,
    exact_max: int = EXACT_MAX,
) -> Matching:
    """Match rows of A to rows of B: ``exact`` (Hungarian on the full cosine matrix), ``sparse``,
    or ``auto`` (exact up to ``exact_max`` rows, sparse above)."""
    if method not in ("auto", "exact", "sparse"):
        raise UserError(f"method={method!r}; allowed: auto, exact, sparse")
    n = max(torch.as_tensor(A).shape[0], torch.as_tensor(B).shape[0])
    if method == "exact" or (method == "auto" and n <= exact_max):
        return match_exact(
            cosine_matrix(A, B), max_size=max(exact_max, n) if method == "exact" else exact_max
        )
    return match_sparse(A, B, k)


# ---------------------------------------------------------------------- paper metrics
def shared_mask(enc: Matching, dec: Matching, thr: float = 0.7) -> np.ndarray:
    """Latents whose partner cosine exceeds ``thr`` under both the encoder and decoder matching."""
    return (np.nan_to_num(enc.cosine, nan=-1.0) > thr) & (np.nan_to_num(dec.cosine, nan=-1.0) > thr)


def shared_fraction(enc: Matching, dec: Matching, thr: float = 0.7, live: np.ndarray | None = None) -> float:
    """Fraction of latents of A shared with B (denominator: all latents, or only ``live`` ones)."""
    m = shared_mask(enc, dec, thr)
    if live is not None:
        live = np.asarray(live, dtype=bool)
        return float(m[live].mean()) if live.any() else float("nan")
    return float(m.mean())


def lenient_agreement(enc: Matching, dec: Matching) -> float:
    """Fraction of latents whose encoder and decoder matchings pick the same partner."""
    return float(((enc.partner == dec.partner) & (enc.partner >= 0)).mean())


@dataclass
class SAEComparison:
    """Per-pair summary: shared fraction, lenient agreement, mean matched cosines, per-latent tables."""

    shared_fraction: float
    lenient_agreement: float
    mean_enc_cosine: float
    mean_dec_cosine: float
    enc: Matching
    dec: Matching
    shared: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        return {
            "shared_fraction": self.shared_fraction,
            "lenient_agreement": self.lenient_agreement,
            "mean_enc_cosine": self.mean_enc_cosine,
            "mean_dec_cosine": self.mean_dec_cosine,
        }


def compare_saes(
    sae_a: Any, sae_b: Any, *, method: str = "auto", thr: float = 0.7, k: int = 32
) -> SAEComparison:
    """Match two :class:`~iclr26.interp.sae.SparseDictionary` objects on encoder and decoder rows."""
    for s in (sae_a, sae_b):
        if not hasattr(s, "encoder_directions"):
            raise UserError(f"compare_saes expects SparseDictionary objects, got {type(s).__name__}")
    enc = match(sae_a.encoder_directions(), sae_b.encoder_directions(), method, k)
    dec = match(sae_a.decoder_directions(), sae_b.decoder_directions(), method, k)
    sh = shared_mask(enc, dec, thr)
    return SAEComparison(
        shared_fraction=float(sh.mean()),
        lenient_agreement=lenient_agreement(enc, dec),
        mean_enc_cosine=enc.mean_cosine,
        mean_dec_cosine=dec.mean_cosine,
        enc=enc,
        dec=dec,
        shared=sh,
    )
