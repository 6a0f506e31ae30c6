"""Hyper-SET library: oracles from the paper's energies (autograd), hand transcriptions, and the 4x4 Sudoku data."""

import math

import numpy as np
import pytest
import torch

from iclr26.architectures.hyper_set import (
    HyperSETConfig,
    HyperSETEncoder,
    HyperSETForImageClassification,
    HyperSETForSudoku,
    _heads,
    attention_energy,
    ff_energy,
    load_hyper_set,
    rms_norm,
    save_hyper_set,
)
from iclr26.architectures.vit import ViTConfig, ViTEncoder, ViTForImageClassification, fit, n_params
from iclr26.core.errors import UserError
from iclr26.data.sudoku import all_grids, count_solutions, is_valid_grid, split_grids, sudoku_puzzles

torch.set_default_dtype(torch.float32)


def _enc(**kw) -> HyperSETEncoder:
    torch.manual_seed(0)
    return HyperSETEncoder(HyperSETConfig(d=16, heads=2, mlp_hidden=24, n_recur=4, **kw)).double()


def _x(b=3, n=5, d=16, seed=1):
    return torch.randn(b, n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("kw", [{}, {"attn": "linear"}, {"ff": "gated", "ff_act": "gelu"}, {"lora_rank": 2},
                                {"input_cond": True}, {"faithful_init": True}])  # fmt: skip
def test_zero_step_sizes_at_init_make_the_identity(kw):
    enc, x = _enc(**kw), _x()
    a, b = enc.step_sizes(x, 0)
    assert torch.count_nonzero(a) == 0 and torch.count_nonzero(b) == 0
    out, trace = enc(x, n_recur=7, return_trace=True)
    assert len(trace) == 8 and all(torch.equal(t, x) for t in trace) and torch.equal(out, x)


def test_untrained_layer_is_not_the_identity_once_steps_are_nonzero():
    enc, x = _enc(), _x()
    torch.nn.init.normal_(enc.to_steps.weight, std=0.1)
    assert (enc(x) - x).abs().max() > 1e-3  # the identity test above could fail


@pytest.mark.parametrize("attn", ["softmax", "sigmoid", "linear"])
def test_attention_update_is_the_gradient_of_the_attention_energy(attn):
    """Norms removed: the update direction W^T[S V] equals autograd's grad_x of E_ATTN(W x)."""
    enc, x = _enc(attn=attn), _x().requires_grad_(True)
    w = _heads(torch.nn.functional.linear(x, enc.W.weight), 2)
    (g,) = torch.autograd.grad(attention_energy(w, None, attn).sum(), x)
    torch.testing.assert_close(enc.attn_direction(x, norm=False), g, rtol=1e-9, atol=1e-10)


def test_attention_gradient_with_a_padding_mask():
    enc, x = _enc(), _x().requires_grad_(True)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0]], dtype=torch.bool)
    w = _heads(torch.nn.functional.linear(x, enc.W.weight), 2)
    (g,) = torch.autograd.grad(attention_energy(w, mask).sum(), x)
    torch.testing.assert_close(enc.attn_direction(x, mask=mask, norm=False), g, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("ff", ["standard", "gated"])
def test_ff_update_is_minus_the_gradient_of_the_ff_energy(ff):
    enc, x = _enc(ff=ff), _x().requires_grad_(True)
    (g,) = torch.autograd.grad(ff_energy(torch.nn.functional.linear(x, enc.D.weight), None, ff).sum(), x)
    torch.testing.assert_close(enc.ff_direction(x, norm=False), -g, rtol=1e-9, atol=1e-10)


def test_attention_energy_by_hand():
    """E_ATTN = sqrt(d_h) sum_h sum_i log sum_j exp(<w_i, w_j>/sqrt(d_h)), written out with loops."""
    w = torch.randn(1, 2, 3, 4, dtype=torch.float64)
    ref = 0.0
    for h in range(2):
        for i in range(3):
            ref += 2.0 * math.log(sum(math.exp(float(w[0, h, i] @ w[0, h, j]) / 2.0) for j in range(3)))
    assert attention_energy(w).item() == pytest.approx(ref, rel=1e-12)
    hh = torch.randn(1, 3, 5, dtype=torch.float64)
    assert ff_energy(hh).item() == pytest.approx(-0.5 * float((hh.clamp(min=0) ** 2).sum()), rel=1e-12)


def test_column_softmax_is_the_transpose_of_the_row_softmax_for_symmetric_scores():
    a = torch.randn(6, 6, dtype=torch.float64)
    A = a + a.T
    torch.testing.assert_close(torch.softmax(A, -2), torch.softmax(A, -1).T)
    assert not torch.allclose(torch.softmax(a, -2), torch.softmax(a, -1).T)  # not for an asymmetric one


def test_linear_attention_matches_its_explicit_formula():
    """y_i = phi'(q_i) * sum_j phi(v_j) (phi(q)^T phi(k))_{..} / sqrt(d_h), per head, then W^T (by loops)."""
    enc, x = _enc(attn="linear"), _x(b=1, n=4)
    with torch.no_grad():
        for nrm in (enc.norm_q, enc.norm_k, enc.norm_v):
            nrm.weight.uniform_(0.5, 1.5)  # distinct gains so Q, K, V differ
    got = enc.attn_direction(x)
    w = _heads(torch.nn.functional.linear(x, enc.W.weight), 2)[0]  # [heads, tokens, d_h]
    q, k, v = enc.norm_q(w), enc.norm_k(w), enc.norm_v(w)
    phi = lambda z: torch.where(z > 0, z + 1, torch.exp(z))  # noqa: E731  (ELU + 1)
    dphi = lambda z: torch.where(z > 0, torch.ones_like(z), torch.exp(z))  # noqa: E731
    y = torch.zeros(4, 16, dtype=torch.float64)
    for h in range(2):
        M = sum(torch.outer(phi(q[h, j]), phi(k[h, j])) for j in range(4)) / math.sqrt(8)  # [d_h, d_h]
        for i in range(4):
            y[i, h * 8 : (h + 1) * 8] = (phi(v[h, i]) @ M) * dphi(q[h, i])
    torch.testing.assert_close(got[0], y @ enc.W.weight, rtol=1e-9, atol=1e-10)


def test_energy_descends_for_small_steps_along_the_exact_gradients():
    """Norms removed: each sub-step lowers its own energy, a joint small step lowers the total, and the
    opposite sign raises it."""
    enc, x = _enc(), _x(b=8)
    W, D = enc.W.weight, enc.D.weight

    def Ea(z):
        return attention_energy(_heads(torch.nn.functional.linear(z, W), 2))

    def Ef(z):
        return ff_energy(torch.nn.functional.linear(z, D))

    for _ in range(20):
        a, f = enc.attn_direction(x, norm=False), enc.ff_direction(x, norm=False)
        assert (Ea(x - 1e-3 * a) <= Ea(x)).all() and (Ef(x + 1e-3 * f) <= Ef(x)).all()
        x_new = x - 1e-3 * a + 1e-3 * f
        assert (Ea(x_new) + Ef(x_new) <= Ea(x) + Ef(x)).all()
        x = x_new
    a, f = enc.attn_direction(x, norm=False), enc.ff_direction(x, norm=False)
    x_up = x + 1e-3 * a - 1e-3 * f
    assert (Ea(x_up) + Ef(x_up) > Ea(x) + Ef(x)).all()


def test_layer_energy_descends_for_small_fixed_steps():
    """The real layer (RMSNorms with unit gains, fixed step 1e-3): the parameter-free energy falls at every step."""
    torch.manual_seed(0)
    enc = HyperSETEncoder(HyperSETConfig(d=16, heads=2, mlp_hidden=24, step="fixed", fixed_step=1e-3)).double()
    x = _x(b=8, n=6)
    _, trace = enc(x, n_recur=20, return_trace=True)
    E = torch.stack([enc.energy(t)["total"] for t in trace])  # [21, batch]
    assert (E.diff(dim=0) <= 1e-9).all()
    assert (E[-1] < E[0]).all()


def test_time_mlp_receives_gradient_by_default_and_not_with_the_official_init():
    for faithful, expect in ((False, True), (True, False)):
        torch.manual_seed(0)
        enc = HyperSETEncoder(HyperSETConfig(d=16, heads=2, mlp_hidden=24, faithful_init=faithful))
        with torch.no_grad():
            enc.to_steps.weight.normal_(std=0.1)  # as after one optimizer step
        enc(_x().float()).pow(2).sum().backward()
        grads = [p.grad for p in (enc.time_mlp.fc1.weight, enc.time_mlp.fc2.weight)]
        nonzero = all(g is not None and g.abs().sum() > 0 for g in grads)
        assert nonzero is expect


def test_parameter_count_does_not_depend_on_recurrences_except_with_lora():
    def count(**kw):
        return n_params(HyperSETEncoder(HyperSETConfig(d=16, heads=2, mlp_hidden=24, **kw)))

    assert count(n_recur=2) == count(n_recur=12)
    assert count(n_recur=12, lora_rank=2) - count(n_recur=2, lora_rank=2) == 10 * 2 * (16 + 16 + 16 + 24)


def test_padding_does_not_change_real_tokens():
    enc = _enc()
    torch.nn.init.normal_(enc.to_steps.weight, std=0.1)
    x = _x(b=1, n=5)
    pad = torch.cat([x, torch.randn(1, 3, 16, dtype=torch.float64)], 1)
    mask = torch.tensor([[True] * 5 + [False] * 3])
    torch.testing.assert_close(enc(pad, mask=mask)[:, :5], enc(x), rtol=1e-9, atol=1e-10)


def test_depth_at_call_time_and_lora_reuses_the_last_adapter():
    enc = _enc(lora_rank=2)
    torch.nn.init.normal_(enc.to_steps.weight, std=0.1)
    torch.nn.init.normal_(enc.lora_W_B, std=0.1)
    x = _x()
    a, b = enc(x, n_recur=2), enc(x, n_recur=9)
    assert a.shape == b.shape and not torch.allclose(a, b)
    assert torch.equal(enc(x, n_recur=0), x)


def test_save_load_round_trip(tmp_path):
    torch.manual_seed(0)
    m = HyperSETForImageClassification(HyperSETConfig(d=16, heads=2, mlp_hidden=24, attn="linear"), image_size=8,
                                       patch=4, num_classes=3)  # fmt: skip
    torch.nn.init.normal_(m.encoder.to_steps.weight, std=0.1)
    save_hyper_set(m, tmp_path)
    m2 = load_hyper_set(tmp_path)
    X = torch.rand(2, 8, 8)
    torch.testing.assert_close(m(X), m2(X))
    assert m2.encoder.cfg.attn == "linear"


def test_classifier_trains_on_a_tiny_task():
    torch.manual_seed(0)
    X = torch.rand(64, 8, 8)
    y = (X[:, :4].mean((1, 2)) > X[:, 4:].mean((1, 2))).long()  # top half brighter than bottom half
    m = HyperSETForImageClassification(HyperSETConfig(d=16, heads=2, mlp_hidden=24, n_recur=2), image_size=8,
                                       patch=4, num_classes=2)  # fmt: skip
    hist = fit(m, X, y, epochs=15, batch_size=16, lr=3e-3, label_smoothing=0.0)
    assert hist[-1] < hist[0] - 0.1
    assert m.encoder.to_steps.weight.abs().sum() > 0  # the steps left zero


@pytest.mark.parametrize("bad, match", [
    (dict(d=10, heads=3), "multiple of heads"),
    (dict(attn="relu"), "allowed values are softmax, linear, sigmoid"),
    (dict(time_dim=5), "even"),
    (dict(n_recur=0), "n_recur=0"),
])  # fmt: skip
def test_bad_config_raises_user_error(bad, match):
    with pytest.raises(UserError, match=match):
        HyperSETEncoder(HyperSETConfig(**bad))


def test_bad_inputs_raise_user_error():
    enc = _enc()
    with pytest.raises(UserError, match=r"\[batch, tokens, 16\]"):
        enc(torch.zeros(2, 5, 8))
    with pytest.raises(UserError, match="mask must be a bool tensor"):
        enc(_x(), mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(UserError, match="int64"):
        HyperSETForSudoku(HyperSETConfig(d=16, heads=2, mlp_hidden=24))(torch.zeros(2, 16))
    with pytest.raises(UserError, match="fixed depth"):
        ViTEncoder(ViTConfig(d=16, heads=2, depth=2))(torch.zeros(1, 3, 16), n_recur=4)
    with pytest.raises(UserError, match="expected images"):
        ViTForImageClassification(ViTConfig(d=16, heads=2), image_size=8, patch=4)(torch.zeros(2, 7, 7))


def test_looped_vit_shares_one_block():
    a = n_params(ViTEncoder(ViTConfig(d=16, heads=2, depth=6, looped=True)))
    b = n_params(ViTEncoder(ViTConfig(d=16, heads=2, depth=1)))
    assert a == b and n_params(ViTEncoder(ViTConfig(d=16, heads=2, depth=4))) == 4 * b


def test_rms_norm_puts_rows_on_the_sphere():
    z = rms_norm(torch.randn(5, 8, dtype=torch.float64), eps=0.0)
    torch.testing.assert_close(z.norm(dim=-1), torch.full((5,), math.sqrt(8), dtype=torch.float64))


# ---- 4x4 Sudoku data


def test_there_are_288_valid_grids():
    g = all_grids()
    assert g.shape == (288, 16) and len({tuple(r) for r in g}) == 288
    assert all(is_valid_grid(r) for r in g)
    bad = g[0].copy()
    bad[[0, 1]] = bad[[1, 0]]
    assert not is_valid_grid(bad)


def test_puzzles_have_a_unique_solution_that_the_targets_spell():
    tr, te = split_grids(48, seed=0)
    assert len(tr) == 240 and not {tuple(r) for r in tr} & {tuple(r) for r in te}
    P, Y = sudoku_puzzles(te, 30, blanks=10, seed=3)
    for p, y in zip(P.numpy(), Y.numpy(), strict=True):
        assert (p == 0).sum() == 10 and count_solutions(p) == 1
        sol = np.where(p == 0, y + 1, p)
        assert is_valid_grid(sol) and (y[p != 0] == -100).all()
        assert any((sol == g).all() for g in te)
    assert count_solutions(np.zeros(16, dtype=int), limit=500) == 288
    with pytest.raises(UserError, match="blanks=13"):
        sudoku_puzzles(te, 2, blanks=13, seed=0)
