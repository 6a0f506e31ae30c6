"""Matching the latents of two sparse dictionaries (exact Hungarian and sparse candidate matching).

From "Sparse Autoencoders Trained on the Same Data Learn Different Features" (Paulo & Belrose,
ICLR 2026, arXiv 2501.16615): L2-normalise the encoder rows (and separately the decoder rows) of
two SAEs, find the one-to-one assignment maximising the summed cosine, and call a latent *shared*
when its partner's cosine exceeds 0.7 under both the encoder and the decoder matching. Exact
Hungarian (scipy ``linear_sum_assignment``) is O(n³); above 16k latents the sparse route keeps the
top-k cosine candidates of every row and column (blocked matmuls, never an n×n matrix) and solves
a minimum-weight full bipartite matching on that graph (costs 1 − cos + ε). The diagonal pairs
(i, i) are added with their true cosines so that a full matching always exists and the solver runs
once; a warning says when the optimum needed one of them.
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
    unmatched), ``method`` (``exact`` or ``sparse``), ``k`` (candidates per row for sparse),
    ``notes``.
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


_GROUP = 16  # entries per max-pooling group in the candidate pass


def _row_topk(C: torch.Tensor, k: int, g: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k ``(values, column indices)`` of every row of a block ``C [b, g·G]``.

    The columns are split into the G strided groups {j, j+G, …, j+(g−1)G}. The k groups with the
    largest maxima contain a top-k of the row (any entry outside them is exceeded by k group maxima),
    so only those k·g entries are ranked. The strided layout keeps the max-pooling a contiguous
    reduction, which is several times cheaper than ranking every entry.
    """
    b = C.shape[0]
    G = C.shape[1] // g
    C3 = C.view(b, g, G)
    _, gi = C3.amax(1).topk(k, dim=1)  # [b, k] best groups per row
    cand = C3.gather(2, gi[:, None, :].expand(b, g, k)).reshape(b, g * k)  # [b, g·k], index t·k + q
    v, j = cand.topk(k, dim=1)
    cols = torch.div(j, k, rounding_mode="floor") * G + gi.gather(1, j % k)
    return v, cols


def _merge_column_best(
    kv: torch.Tensor, ki: torch.Tensor, r: torch.Tensor, c: torch.Tensor, v: torch.Tensor
) -> None:
    """Merge new entries ``(row r, column c, value v)`` into the running per-column top-k
    ``kv, ki [nB, k]`` (values descending, row indices) in place."""
    if c.numel() == 0:
        return
    k = kv.shape[1]
    order = torch.argsort(c, stable=True)
    r, c, v = r[order], c[order], v[order]
    touched, cnt = torch.unique_consecutive(c, return_counts=True)
    ends = cnt.cumsum(0)
    pos = torch.arange(c.numel(), device=c.device) - (ends - cnt).repeat_interleave(cnt)
    width = int(cnt.max())
    step = max(1, 2**22 // (width + k))  # bound the dense merge buffer to ~4M entries
    for t0 in range(0, touched.numel(), step):
        t1 = min(t0 + step, touched.numel())
        e0 = int(ends[t0 - 1]) if t0 else 0
        e1 = int(ends[t1 - 1])
        cols = touched[t0:t1]
        slot = torch.arange(t1 - t0, device=c.device).repeat_interleave(cnt[t0:t1])
        dv = torch.full((t1 - t0, width), float("-inf"), dtype=kv.dtype, device=kv.device)
        di = torch.full((t1 - t0, width), -1, dtype=ki.dtype, device=ki.device)
        dv[slot, pos[e0:e1]] = v[e0:e1]
        di[slot, pos[e0:e1]] = r[e0:e1]
        mv, sel = torch.cat([kv[cols], dv], 1).topk(k, dim=1)
        kv[cols] = mv
        ki[cols] = torch.cat([ki[cols], di], 1).gather(1, sel)


def _column_update(C: torch.Tensor, s: int, nB: int, kv: torch.Tensor, ki: torch.Tensor, g: int) -> None:
    """Fold block ``C [b, ·]`` (rows s…s+b of the cosine matrix) into the running column top-k.

    Rows are max-pooled in groups of g (a contiguous reduction). Only groups whose maximum beats a
    column's current k-th best can change its top-k; their entries are gathered and filtered. A column
    with more than k such groups (always the case in the first block) is ranked exactly instead.
    """
    b, k = C.shape[0], kv.shape[1]
    C3 = C.view(b // g, g, C.shape[1])[:, :, :nB]
    thr = kv[:, -1]  # current k-th best per column (−inf until k rows have been seen)
    hit = C3.amax(1) > thr  # [b/g, nB]
    heavy = hit.sum(0) > k
    rs, cs, vs = [], [], []
    if bool(heavy.any()):
        hc = heavy.nonzero().squeeze(1)
        sub = C[:, :nB] if hc.numel() == nB else C[:, hc]
        hv, hr = sub.topk(min(k, b), dim=0)  # [k', h]
        rs.append((hr + s).reshape(-1))
        cs.append(hc.repeat(hv.shape[0]))
        vs.append(hv.reshape(-1))
        hit &= ~heavy
    gi, ci = hit.nonzero(as_tuple=True)
    if gi.numel():
        vals = C3[gi, :, ci]  # [S, g]: the g entries of every hit group
        si, sj = (vals > thr[ci, None]).nonzero(as_tuple=True)
        rs.append(s + gi[si] * g + sj)
        cs.append(ci[si])
        vs.append(vals[si, sj])
    if rs:
        _merge_column_best(kv, ki, torch.cat(rs), torch.cat(cs), torch.cat(vs))


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
    ``both_sides``, of every column, from one blocked pass (duplicates removed, sorted by row then
    column; ties at the k-th value may be broken either way).

    Every block of C is computed once; its row top-k and its contribution to a running column top-k
    both come from max-pooled summaries, so the block is read a few times but never sorted.
    ``block`` (rounded up to a multiple of 16) defaults to the rows whose slice of C fits in 512 MB
    (at most 4096). Cosines are those of the matmul in ``dtype``.
    """
    An, Bn = _as_rows(A, "A"), _as_rows(B, "B")
    if An.shape[1] != Bn.shape[1]:
        raise UserError(f"A and B rows must have the same dimension, got {An.shape[1]} and {Bn.shape[1]}")
    if k <= 0:
        raise UserError(f"k must be positive, got {k}")
    nA, nB = An.shape[0], Bn.shape[0]
    dev = (
        torch.device(device)
        if device is not None
        else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    g = _GROUP
    if block is None:
        block = int(max(256, min(4096, 2**27 // max(nB, 1))))
    block = -(-max(int(block), 1) // g) * g
    nBp = -(-nB // g) * g
    Bd = torch.zeros(nBp, Bn.shape[1], dtype=dtype, device=dev)
    Bd[:nB] = Bn.to(dev, dtype)
    kr, kc = min(k, nB), min(k, nA)
    grouped_rows = nBp // g >= 4 * kr
    kv = torch.full((nB, kc), float("-inf"), dtype=dtype, device=dev)
    ki = torch.full((nB, kc), -1, dtype=torch.long, device=dev)
    rows, cols, vals = [], [], []
    for s in progress(range(0, nA, block), desc="match candidates", total=-(-nA // block)):
        a = An[s : s + block].to(dev, dtype)
        nreal = a.shape[0]
        if nreal % g:
            a = torch.cat([a, a.new_zeros(g - nreal % g, a.shape[1])])
        C = a @ Bd.T  # [b, nBp]
        if nBp > nB:
            C[:, nB:] = float("-inf")
        if nreal < C.shape[0]:
            C[nreal:] = float("-inf")
        if grouped_rows:
            v, i = _row_topk(C, kr, g)
        else:
            v, i = C[:, :nB].topk(kr, dim=1)
        rows.append((torch.arange(nreal, device=dev) + s).repeat_interleave(kr))
        cols.append(i[:nreal].reshape(-1))
        vals.append(v[:nreal].reshape(-1))
        if both_sides:
            _column_update(C, s, nB, kv, ki, g)
        del C
    if both_sides:
        ok = (ki >= 0) & torch.isfinite(kv)
        rows.append(ki[ok])
        cols.append(torch.arange(nB, device=dev)[:, None].expand(nB, kc)[ok])
        vals.append(kv[ok])
    r = torch.cat(rows).cpu().numpy().astype(np.int64)
    c = torch.cat(cols).cpu().numpy().astype(np.int64)
    v = torch.cat(vals).float().cpu().numpy().astype(np.float64)
    key = r * nB + c
    key, first = np.unique(key, return_index=True)  # an edge can be both a row and a column candidate
    return key // nB, key % nB, v[first]


def _edge_cosines(
    An: torch.Tensor, Bn: torch.Tensor, r: np.ndarray, c: np.ndarray, chunk: int = 4096
) -> np.ndarray:
    """fp32 cosines of the edges (r[e], c[e]) of unit rows, in chunks of edges."""
    out = np.empty(len(r), dtype=np.float64)
    rt, ct = torch.from_numpy(r), torch.from_numpy(c)
    for e in range(0, len(r), chunk):
        x = An[rt[e : e + chunk]]
        x.mul_(Bn[ct[e : e + chunk]])
        out[e : e + chunk] = x.sum(1).double().numpy()
    return out


def match_sparse(
    A: torch.Tensor | np.ndarray,
    B: torch.Tensor | np.ndarray,
    k: int = 32,
    *,
    block: int | None = None,
    eps: float = 1e-6,
    device: str | torch.device | None = None,
    both_sides: bool = True,
    precision: str = "auto",
) -> Matching:
    """One-to-one matching of the rows of A to rows of B from top-k cosine candidates.

    Solves ``scipy.sparse.csgraph.min_weight_full_bipartite_matching`` on costs 1 − cos + ε (the
    routine needs strictly positive weights) over the candidate edges of :func:`topk_candidates`
    plus the "diagonal" edges (i, i), i < min(nA, nB), with their true cosines. The diagonal is itself
    a full matching, so the solver always succeeds in one pass; the result is the maximum-cosine
    matching over that graph. Should the optimum use a diagonal edge that is not a top-k candidate
    (the candidate graph alone had no full matching, or only a worse one), a warning says how many
    rows did and suggests a larger k. ``precision``: ``fp32``, ``bf16`` (candidate matmuls in bf16,
    ≈2x faster on CPUs with bf16 units; the candidate edges' cosines are then recomputed in fp32, so
    bf16 only affects which near-threshold edges enter the graph) or ``auto`` (bf16 above 16k rows).
    Returned cosines are always fp32 dot products of the normalised rows.
    """
    if precision not in ("auto", "fp32", "bf16"):
        raise UserError(f"precision={precision!r}; allowed: auto, fp32, bf16")
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    An, Bn = _as_rows(A, "A"), _as_rows(B, "B")
    nA, nB = An.shape[0], Bn.shape[0]
    if k <= 0:
        raise UserError(f"k must be positive, got {k}")
    use_bf16 = precision == "bf16" or (precision == "auto" and max(nA, nB) > EXACT_MAX)
    dtype = torch.bfloat16 if use_bf16 else torch.float32
    r, c, v = topk_candidates(An, Bn, k, block, device, both_sides, dtype)
    # feasibility edges (i, i): guarantee a full matching without growing k and redoing the pass
    m = min(nA, nB)
    diag = np.arange(m, dtype=np.int64)
    key = np.concatenate([r * nB + c, diag * nB + diag])
    v = np.concatenate([v, _edge_cosines(An, Bn, diag, diag)])
    is_cand = np.concatenate([np.ones(len(r), bool), np.zeros(m, bool)])
    key, first = np.unique(key, return_index=True)  # a candidate (i, i) keeps its candidate flag
    r, c, v, is_cand = key // nB, key % nB, v[first], is_cand[first]
    if use_bf16:
        v = _edge_cosines(An, Bn, r, c)
    cost = np.clip(1.0 - v, 0.0, None) + eps
    if nA <= nB:  # scipy matches every row of the smaller side; keep rows as the smaller one
        indptr = np.zeros(nA + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=nA), out=indptr[1:])
        G = csr_matrix((cost, c, indptr), shape=(nA, nB))  # edges are sorted by row, then column
        rr, cc = min_weight_full_bipartite_matching(G)
    else:
        G = csr_matrix((cost, (c, r)), shape=(nB, nA))
        cc, rr = min_weight_full_bipartite_matching(G)
    partner = np.full(nA, -1, dtype=np.int64)
    cos = np.full(nA, np.nan)
    partner[rr] = cc
    # cosine of each chosen edge, recomputed from the rows (cheap: one dot product per pair)
    cos[rr] = _edge_cosines(An, Bn, np.asarray(rr, np.int64), np.asarray(cc, np.int64))
    notes = []
    n_extra = int((~is_cand[np.searchsorted(key, rr * nB + cc)]).sum())
    if n_extra:
        msg = (
            f"{n_extra} of {len(rr)} rows matched through a feasibility edge (i, i) outside the top-{k} "
            "candidates; the matching is optimal only over candidates ∪ diagonal, try a larger k"
        )
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
        log.warning(msg)
        notes.append(msg)
    if use_bf16:
        notes.append("candidate edges chosen by bf16 matmuls, costs recomputed in fp32")
    return Matching(partner, cos, "sparse", k, "; ".join(notes))


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
