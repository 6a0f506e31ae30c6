"""Feature matching: exact Hungarian against brute force, sparse matcher against exact, paper metrics."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import min_weight_full_bipartite_matching

from iclr26.core.errors import UserError
from iclr26.interp.matching import (
    Matching,
    compare_saes,
    cosine_blocks,
    cosine_matrix,
    lenient_agreement,
    match,
    match_exact,
    match_sparse,
    max_cosine,
    shared_fraction,
    topk_candidates,
)
from iclr26.interp.sae import SparseDictionary


def _pair(n=300, d=32, noise=0.6, seed=0):
    """B = a permutation of A plus noise: a structured matching problem like two SAE seeds."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, d, generator=g)
    perm = torch.randperm(n, generator=g)
    B = A[perm] + noise * torch.randn(n, d, generator=g)
    return A, B, perm


def test_cosine_blocks_equal_full_matrix():
    A, B, _ = _pair(103, 8)
    full = torch.nn.functional.normalize(A, dim=1) @ torch.nn.functional.normalize(B, dim=1).T
    got = torch.cat([C for _, C in cosine_blocks(A, B, block=17, device="cpu")])
    torch.testing.assert_close(got, full)
    torch.testing.assert_close(max_cosine(A, B, block=10), full.max(1).values)


def test_match_exact_equals_brute_force():
    g = np.random.default_rng(0)
    C = g.uniform(-1, 1, size=(6, 6))
    best = max(itertools.permutations(range(6)), key=lambda p: sum(C[i, p[i]] for i in range(6)))
    m = match_exact(C)
    assert list(m.partner) == list(best)
    np.testing.assert_allclose(m.cosine, C[np.arange(6), list(best)])


def test_match_sparse_equals_exact_on_random_costs_with_all_candidates():
    g = torch.Generator().manual_seed(1)
    A, B = torch.randn(60, 6, generator=g), torch.randn(60, 6, generator=g)
    ex = match_exact(cosine_matrix(A, B))
    sp = match_sparse(A, B, k=60)
    assert np.array_equal(ex.partner, sp.partner)
    np.testing.assert_allclose(sp.cosine.sum(), ex.cosine.sum(), rtol=1e-6)


@pytest.mark.parametrize("noise", [0.3, 0.8, 1.2])
def test_match_sparse_equals_exact_on_structured_problem(noise):
    A, B, perm = _pair(400, 32, noise)
    ex = match_exact(cosine_matrix(A, B))
    sp = match_sparse(A, B, k=16, block=64)
    assert sp.method == "sparse"
    # the optimum lies inside the candidate graph: same total and same shared latents
    np.testing.assert_allclose(sp.cosine.sum(), ex.cosine.sum(), rtol=1e-5)
    assert np.array_equal(ex.cosine > 0.7, sp.cosine > 0.7)
    assert (sp.partner == ex.partner).mean() > 0.98


def test_match_sparse_rectangular_and_one_to_one():
    A, B, _ = _pair(200, 16, 0.5)
    for X, Y in ((A[:120], B), (A, B[:120])):
        sp, ex = match_sparse(X, Y, k=8), match_exact(cosine_matrix(X, Y))
        assert (sp.partner >= 0).sum() == min(len(X), len(Y))
        used = sp.partner[sp.partner >= 0]
        assert len(set(used.tolist())) == len(used)
        np.testing.assert_allclose(np.nansum(sp.cosine), np.nansum(ex.cosine), rtol=1e-5)


def _graph_optimum(nA, nB, r, c, C):
    """Maximum-cosine full matching restricted to the edges (r, c): dense Hungarian with the
    missing pairs priced out (the oracle for "optimal over the candidate graph")."""
    W = np.full((nA, nB), -1e6)
    W[r, c] = C[r, c]
    rows, cols = linear_sum_assignment(W, maximize=True)
    assert (W[rows, cols] > -1e5).all()
    return C[rows, cols].sum()


def test_match_sparse_uses_diagonal_feasibility_edges_with_warning():
    # at k=1 rows 0 and 1 only have B0 as a candidate: the candidate graph has no full matching
    A = torch.tensor([[1.0, 0.0], [1.0, 0.01], [1.0, 0.02]])
    B = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    r, c, _ = topk_candidates(A, B, k=1, device="cpu")
    C = cosine_matrix(A, B).double().numpy()
    with pytest.raises(ValueError):  # scipy's solver on the bare candidate graph
        min_weight_full_bipartite_matching(csr_matrix((2 - C[r, c], (r, c)), shape=(3, 3)))
    with pytest.warns(RuntimeWarning, match="feasibility edge"):
        m = match_sparse(A, B, k=1)
    assert m.method == "sparse" and "feasibility edge" in m.notes
    assert sorted(m.partner.tolist()) == [0, 1, 2]
    # the result is the optimum over candidates ∪ diagonal
    d = np.arange(3)
    opt = _graph_optimum(3, 3, np.r_[r, d], np.r_[c, d], C)
    np.testing.assert_allclose(m.cosine.sum(), opt, rtol=1e-6)
    # with enough candidates no diagonal edge is needed and the optimum is the exact one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m2 = match_sparse(A, B, k=3)
    assert m2.notes == ""
    np.testing.assert_allclose(m2.cosine.sum(), match_exact(cosine_matrix(A, B)).cosine.sum(), rtol=1e-6)


@pytest.mark.parametrize(
    ("nA", "nB", "k", "block"),
    [(300, 300, 8, 64), (200, 517, 5, 48), (517, 200, 5, 17), (40, 37, 50, None), (700, 1500, 4, 160)],
)
@pytest.mark.parametrize("ties", [False, True])
def test_topk_candidates_hold_every_row_and_column_top_k(nA, nB, k, block, ties):
    g = torch.Generator().manual_seed(nA + nB)
    d = 8
    A, B = torch.randn(nA, d, generator=g), torch.randn(nB, d, generator=g)
    if ties:  # repeated rows on both sides: many exactly equal cosines at every top-k boundary
        A = A[torch.randint(0, max(2, nA // 8), (nA,), generator=g)]
        B = B[torch.randint(0, max(2, nB // 8), (nB,), generator=g)]
    r, c, v = topk_candidates(A, B, k=k, block=block, device="cpu")
    C = cosine_matrix(A, B).numpy()
    np.testing.assert_allclose(v, C[r, c], atol=1e-6)
    key = r * nB + c
    assert len(np.unique(key)) == len(key) and (np.diff(key) > 0).all()  # unique, sorted by row
    # the candidates of each row (column) contain a top-k of that row (column) of C: their best
    # min(k, n) values equal the best values of the full row (column), whichever tied entries won
    S = np.full((nA, nB), -np.inf, dtype=np.float32)
    S[r, c] = C[r, c]
    kr, kc = min(k, nB), min(k, nA)
    np.testing.assert_array_equal(-np.sort(-S, 1)[:, :kr], -np.sort(-C, 1)[:, :kr])
    np.testing.assert_array_equal(-np.sort(-S, 0)[:kc], -np.sort(-C, 0)[:kc])
    if not ties:  # without ties the candidate set is exactly row top-k ∪ column top-k
        Ct = torch.from_numpy(C)
        ref = set()
        for a, row in enumerate(Ct.topk(kr, 1).indices.tolist()):
            ref.update((a, b) for b in row)
        for b, col in enumerate(Ct.topk(kc, 0).indices.T.tolist()):
            ref.update((a, b) for a in col)
        assert set(zip(r.tolist(), c.tolist(), strict=True)) == ref


def test_match_sparse_is_optimal_over_its_graph_on_a_hard_random_problem():
    # pure random directions: many near-ties, and at k=2 the candidate graph is thin
    g = torch.Generator().manual_seed(5)
    A, B = torch.randn(150, 6, generator=g), torch.randn(150, 6, generator=g)
    r, c, _ = topk_candidates(A, B, k=2, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        m = match_sparse(A, B, k=2)
    assert sorted(m.partner.tolist()) == list(range(150))
    C = cosine_matrix(A, B).double().numpy()
    d = np.arange(150)
    np.testing.assert_allclose(
        m.cosine.sum(), _graph_optimum(150, 150, np.r_[r, d], np.r_[c, d], C), rtol=1e-6
    )
    np.testing.assert_allclose(m.cosine, C[np.arange(150), m.partner], atol=1e-6)


def test_shared_fraction_and_lenient_agreement_by_hand():
    enc = Matching(np.array([0, 1, 2, 3]), np.array([0.9, 0.8, 0.75, 0.2]), "exact")
    dec = Matching(np.array([0, 2, 2, 3]), np.array([0.95, 0.6, 0.71, 0.9]), "exact")
    # shared iff both cosines > 0.7: latents 0 and 2
    assert shared_fraction(enc, dec) == 0.5
    assert shared_fraction(enc, dec, live=np.array([True, True, True, False])) == pytest.approx(2 / 3)
    # lenient: same partner under both matchings: latents 0, 2, 3
    assert lenient_agreement(enc, dec) == 0.75


def test_compare_saes_identical_and_permuted():
    g = torch.Generator().manual_seed(0)
    sae = SparseDictionary(16, 48, activation="topk", k=4)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    perm = torch.randperm(48, generator=g)
    other = SparseDictionary(16, 48, activation="topk", k=4)
    with torch.no_grad():
        other.W_enc.copy_(sae.W_enc[:, perm])
        other.W_dec.copy_(sae.W_dec[perm])
    cmp = compare_saes(sae, other)
    assert cmp.shared_fraction == 1.0 and cmp.lenient_agreement == 1.0
    assert np.array_equal(perm[cmp.enc.partner].numpy(), np.arange(48))
    assert cmp.mean_enc_cosine == pytest.approx(1.0)


def test_match_auto_and_errors():
    A, B, _ = _pair(50, 8)
    assert match(A, B).method == "exact"
    assert match(A, B, method="sparse", k=8).method == "sparse"
    assert match(A, B, method="auto", exact_max=10, k=8).method == "sparse"
    with pytest.raises(UserError):
        match_exact(np.zeros((20, 20)), max_size=10)
    with pytest.raises(UserError):
        match(A, torch.randn(50, 9))
    with pytest.raises(UserError):
        match(A, B, method="hungarian")


def test_match_sparse_bf16_candidates_keep_shared_set():
    A, B, _ = _pair(400, 32, 0.6, seed=3)
    ex = match_exact(cosine_matrix(A, B))
    sp = match_sparse(A, B, k=16, precision="bf16")
    assert "bf16" in sp.notes
    assert np.array_equal(ex.cosine > 0.7, sp.cosine > 0.7)
    np.testing.assert_allclose(sp.cosine.sum(), ex.cosine.sum(), rtol=1e-3)
