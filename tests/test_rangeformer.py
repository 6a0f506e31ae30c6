"""RangeFormer (P15, reconstruction), the LAWT-style baseline, SLQ and the SPD generators: oracle tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr26.architectures.rangeformer import (
    ChartonEncoder,
    LinearAttention,
    RangeFormer,
    as_batch,
    load_pretrained,
    p1000_encode,
    save_pretrained,
    slq_logdet,
    train_logdet,
)
from iclr26.core.errors import UserError
from iclr26.data import spd_matrices as spd


def _spd(n: int, seed: int = 0) -> np.ndarray:
    return spd.structured(np.random.default_rng(seed), 1, n)[0]


def test_sketch_embedding_width_independent_of_n():
    model = RangeFormer(d=16, k=8, heads=2, loops=2)
    n_params = sum(p.numel() for p in model.parameters())
    for n in (3, 8, 20):
        a, mask = as_batch(_spd(n)[None])
        feats = model.sketch(a / a.diagonal(dim1=1, dim2=2).mean(), mask, generator=torch.Generator().manual_seed(0))
        assert feats.shape == (1, n, 1 + 2 * 8)  # n tokens, width 1 + 2k whatever n
        assert model.embed(feats).shape == (1, n, 16)
        assert torch.isfinite(model(a, mask)).all()
    assert sum(p.numel() for p in model.parameters()) == n_params


def test_permutation_equivariance_and_scale():
    torch.manual_seed(0)
    model = RangeFormer(d=16, k=4, heads=2, loops=3).double().eval()
    a = torch.as_tensor(_spd(7, 1))[None]
    mask = torch.ones(1, 7, dtype=torch.bool)
    omega = torch.randn(1, 7, 4, dtype=torch.float64)
    perm = torch.randperm(7)
    y = model(a, mask, omega=omega)
    y_perm = model(a[:, perm][:, :, perm], mask, omega=omega[:, perm])
    torch.testing.assert_close(y, y_perm)
    # log det(cA) = log det(A) + n log c, exactly, because the model sees A / mean(diag A)
    ld = model.logdet(a, draws=2, seed=3)
    ld_c = model.logdet(5.0 * a, draws=2, seed=3)
    torch.testing.assert_close(ld_c - ld, torch.tensor([7 * math.log(5.0)], dtype=torch.float64))


def test_padding_with_mask_matches_unpadded():
    torch.manual_seed(1)
    model = RangeFormer(d=16, k=4, heads=2, loops=2).double().eval()
    m1, m2 = _spd(5, 2), _spd(8, 3)
    a, mask = as_batch([m1, m2], dtype=torch.float64)
    omega = torch.randn(2, 8, 4, dtype=torch.float64)
    y = model(a, mask, omega=omega)
    y1 = model(torch.as_tensor(m1)[None], torch.ones(1, 5, dtype=torch.bool), omega=omega[:1, :5])
    torch.testing.assert_close(y[:1], y1)


def test_linear_attention_matches_explicit_formula():
    torch.manual_seed(2)
    att = LinearAttention(8, 1).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    mask = torch.ones(2, 5, dtype=torch.bool)
    w_q, w_k, w_v = att.qkv.weight.split(8)
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    expected = (q @ (k.transpose(1, 2) @ v)) / 5 @ att.out.weight.T  # Q (KᵀV) / n
    torch.testing.assert_close(att(x, mask), expected)


@pytest.mark.parametrize("name", list(spd.TRAIN_FAMILIES))
@pytest.mark.parametrize("n", [2, 5, 12])
def test_generators_are_spd(name, n):
    a = spd.family(name)(np.random.default_rng(n), 20, n)
    assert a.shape == (20, n, n)
    np.testing.assert_allclose(a, np.swapaxes(a, 1, 2), atol=1e-12)
    assert np.linalg.eigvalsh(a).min() > 0


def test_ood_sets_are_spd_and_named():
    sets = spd.ood_sets(np.random.default_rng(0), count=10)
    assert set(sets) == {"hilbert", "special", "matern_ood_ell", "real_graphs"}
    for mats in sets.values():
        for a in mats:
            np.testing.assert_allclose(a, a.T, atol=1e-12)
            assert np.linalg.eigvalsh(a).min() > 0
    np.testing.assert_allclose(spd.lehmer(3), [[1, 1 / 2, 1 / 3], [1 / 2, 1, 2 / 3], [1 / 3, 2 / 3, 1]])
    np.testing.assert_allclose(np.diag(spd.pascal_unit(6)), 1.0)


def test_logdet_target_and_sample_filter():
    a = spd.kms(np.random.default_rng(0), 4, 6)
    rho = a[:, 0, 1]
    # KMS: det = (1 - ρ²)^(n-1), unit diagonal so s = 1
    np.testing.assert_allclose(spd.logdet_target(a), 5 * np.log(1 - rho**2) / 6)
    mats, y = spd.sample("structured", np.random.default_rng(1), 50, 6, max_cond=1e3)
    assert len(mats) == len(y) <= 50
    assert np.linalg.cond(mats).max() <= 1e3 * (1 + 1e-9)
    with pytest.raises(UserError, match="unknown SPD family"):
        spd.family("nope")


def test_slq_exact_on_diagonal_and_matches_slogdet_on_kms():
    d = np.diag(np.linspace(0.1, 5.0, 9))
    # Rademacher probes: zᵀ log(D) z = tr log D for every z, whatever the number of Lanczos steps >= distinct values
    torch.testing.assert_close(slq_logdet(d, steps=9, probes=1), torch.tensor([np.log(np.diag(d)).sum()],
                               dtype=torch.float64))  # fmt: skip
    rho, n = 0.6, 10
    kms = rho ** np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    exact = (n - 1) * math.log(1 - rho**2)
    assert abs(float(torch.linalg.slogdet(torch.as_tensor(kms)).logabsdet) - exact) < 1e-10
    est = float(slq_logdet(kms, steps=10, probes=2000, seed=0)[0])
    assert abs(est - exact) < 0.05 * abs(exact)
    # batched and deterministic given the seed
    both = slq_logdet(np.stack([kms, kms]), steps=6, probes=4, seed=1)
    assert both.shape == (2,) and torch.equal(both, slq_logdet(np.stack([kms, kms]), steps=6, probes=4, seed=1))


def test_p1000_encoding_round_trip():
    x = torch.tensor([0.0, 1.0, -0.012345, 123456.0, 9.9996, -3.14159])
    s, m, e = p1000_encode(x, exp_range=16)
    back = (1 - 2 * s).double() * m.double() * 10.0 ** (e.double() - 16)
    np.testing.assert_allclose(back.numpy(), x.double().numpy(), rtol=5e-3)
    assert ((m == 0) | ((m >= 100) & (m <= 999))).all()


def test_charton_encoder_shapes_and_position_limit():
    torch.manual_seed(0)
    model = ChartonEncoder(d=16, heads=2, layers=1, max_n=6)
    a, mask = as_batch([_spd(4), _spd(6, 1)])
    assert model(a, mask).shape == (2,)
    with pytest.raises(UserError, match="positions"):
        model(torch.as_tensor(_spd(7))[None].float())


def test_save_load_round_trip(tmp_path):
    torch.manual_seed(0)
    for model in (RangeFormer(d=16, k=4, heads=2, loops=3, feature_map="elu"),
                  ChartonEncoder(d=16, heads=2, layers=1, max_n=8)):  # fmt: skip
        folder = tmp_path / type(model).__name__
        save_pretrained(model, folder)
        again = load_pretrained(folder)
        assert again.cfg == model.cfg
        a, mask = as_batch([_spd(5)])
        torch.testing.assert_close(again.predict(a, mask, draws=2, seed=4), model.predict(a, mask, draws=2, seed=4))


def test_user_errors():
    with pytest.raises(UserError, match="square"):
        as_batch(np.zeros((2, 3, 4)))
    with pytest.raises(UserError, match="divisible"):
        RangeFormer(d=10, heads=3)
    with pytest.raises(UserError, match="attn"):
        RangeFormer(attn="quadratic")
    with pytest.raises(UserError, match="non-positive"):
        RangeFormer(d=8, k=2, heads=2)(-torch.eye(3)[None])
    with pytest.raises(UserError, match="loss"):
        train_logdet(RangeFormer(d=8, k=2, heads=2), lambda r, b, n: spd.sample("kms", r, b, n), steps=1, loss="l7")
    with pytest.raises(UserError, match="right-hand side"):
        RangeFormer(d=8, k=2, heads=2, task="solve")(torch.eye(3)[None])


def test_training_reduces_loss_and_loops_are_free_at_test_time():
    torch.manual_seed(0)
    model = RangeFormer(d=16, k=8, heads=2, loops=4, train_loops=(2, 4))
    hist = train_logdet(model, lambda r, b, n: spd.sample("kms", r, b, n), steps=80, batch=32, sizes=(4, 6),
                        lr=3e-3, seed=0)  # fmt: skip
    assert np.mean(hist[-10:]) < 0.5 * np.mean(hist[:10])
    a, mask = as_batch([_spd(5)])
    assert model(a, mask, loops=16, return_all=True).shape == (16, 1)
    unlooped = RangeFormer(d=8, k=2, heads=2, loops=3, tied=False)
    with pytest.raises(UserError, match="loops"):
        unlooped(a, mask, loops=4)


def test_special_matrices_match_closed_forms():
    """The generators build Hilbert, KMS and AR(2) matrices with scipy.linalg (hilbert, toeplitz); the oracle here is
    each closed form written out entry by entry."""
    from iclr26.data.spd_matrices import ar2_toeplitz, hilbert_shift, kms

    i = np.arange(7)
    np.testing.assert_allclose(hilbert_shift(7, 0.3), 1.0 / (i[:, None] + i[None, :] + 1) + 0.3 * np.eye(7),
                               rtol=1e-15, atol=0)  # fmt: skip
    mats = kms(np.random.default_rng(0), 3, 6)
    rho = np.random.default_rng(0).uniform(-0.9, 0.9, size=3)
    dist = np.abs(np.arange(6)[:, None] - np.arange(6)[None, :])
    for m, r in zip(mats, rho, strict=True):
        np.testing.assert_allclose(m, np.sign(r) ** dist * np.abs(r) ** dist, rtol=1e-12, atol=1e-15)
    # AR(2) autocovariances: Toeplitz (constant along diagonals) and the Yule-Walker recursion g_k = p1 g_k-1 + p2 g_k-2
    for a in ar2_toeplitz(np.random.default_rng(1), 4, 7):
        g = a[0]
        np.testing.assert_allclose(a, g[np.abs(i[:, None] - i[None, :])], rtol=0, atol=0)
        p1, p2 = np.linalg.solve([[g[1], g[0]], [g[2], g[1]]], [g[2], g[3]])
        np.testing.assert_allclose(g[4:], p1 * g[3:-1] + p2 * g[2:-2], atol=1e-12)


def test_slq_cross_checked_against_exact_slogdet():
    """SLQ against float64 slogdet on random SPD matrices (n = 12, structured mixture and Wishart).

    With m >= n Lanczos steps the quadrature is exact for each probe, so SLQ is Hutchinson's estimator of tr log A:
    unbiased, with standard error sqrt(2 sum_{i != j} L_ij^2 / p) for Rademacher probes (L = log A). Tolerance: 4 such
    standard errors. With m = 8 < n the Gauss quadrature adds a bias; tolerance there: 2 % of |log det| + 4 SE."""
    mats = np.concatenate([spd.structured(np.random.default_rng(5), 6, 12),
                           spd.wishart(np.random.default_rng(6), 4, 12)])
    exact = np.linalg.slogdet(mats)[1]
    w, v = np.linalg.eigh(mats)
    logm = np.einsum("bij,bj,bkj->bik", v, np.log(w), v)
    off = logm - np.einsum("bii->bi", logm)[..., None] * np.eye(12)
    probes = 1000
    se = np.sqrt(2 * (off**2).sum((1, 2)) / probes)
    full = slq_logdet(mats, steps=12, probes=probes, seed=0).numpy()
    assert np.all(np.abs(full - exact) <= 4 * se), (full - exact) / se
    short = slq_logdet(mats, steps=8, probes=probes, seed=0).numpy()
    assert np.all(np.abs(short - exact) <= 0.02 * np.abs(exact) + 4 * se), short - exact
