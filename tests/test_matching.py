"""Feature matching: exact Hungarian against brute force, sparse matcher against exact, paper metrics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

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


def test_match_sparse_falls_back_to_greedy_with_warning():
    # rows 0 and 1 only have B0 as a candidate at k=1: no full matching exists in that graph
    A = torch.tensor([[1.0, 0.0], [1.0, 0.01], [1.0, 0.02]])
    B = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    with pytest.warns(RuntimeWarning, match="greedy"):
        m = match_sparse(A, B, k=1, max_k=1)
    assert m.method == "greedy"
    used = m.partner[m.partner >= 0]
    assert len(set(used.tolist())) == len(used)
    # growing k instead recovers the optimum
    m2 = match_sparse(A, B, k=1, max_k=4)
    assert m2.method == "sparse" and m2.k > 1
    np.testing.assert_allclose(m2.cosine.sum(), match_exact(cosine_matrix(A, B)).cosine.sum(), rtol=1e-6)


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
