"""Max-entropy loss, IMP with rewinding, masks, composition and barrier (iclr26.sparsity.subnetworks)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn
from torch.nn.utils import prune as torch_prune

from iclr26.core.errors import UserError
from iclr26.sparsity import subnetworks as sn


@pytest.fixture(autouse=True)
def _deterministic():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is fastest and deterministic
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(threads)


def _mlp(seed=0, d_in=6, h=8, c=4, bias_out=False):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, h), nn.ReLU(), nn.Dropout(0.1), nn.Linear(h, c, bias=bias_out))


def _cnn(seed=0, c=4):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(3 * 2 * 2, 5), nn.ReLU(), nn.Linear(5, c, bias=False),
    )  # fmt: skip


def _blobs(n=120, d=6, c=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % c
    centers = torch.randn(c, d, generator=g) * 3
    return centers[y] + torch.randn(n, d, generator=g), y


def _state_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---- loss ------------------------------------------------------------------------------------


def _kl_transcribed(logits, y, S, t):
    """KL(q || softmax(z/t)) written out sample by sample: sum_c q_c (log q_c - log p_c), 0 log 0 = 0."""
    B, C = logits.shape
    total = 0.0
    for i in range(B):
        z = [float(v) / t for v in logits[i]]
        mx = max(z)
        den = sum(math.exp(v - mx) for v in z)
        p = [math.exp(v - mx) / den for v in z]
        q = [1.0 if c == int(y[i]) else 0.0 for c in range(C)] if int(y[i]) in S else [1.0 / C] * C
        total += sum(qc * (math.log(qc) - math.log(pc)) for qc, pc in zip(q, p, strict=True) if qc > 0)
    return total / B


def test_loss_matches_transcription_and_closed_forms():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 5, generator=g) * 4
    y = torch.tensor([0, 1, 2, 3, 4, 1, 3])
    S = {1, 3}
    before = logits.clone(), y.clone()
    got = sn.maxent_kl_loss(logits, y, S, temperature=5.0)
    assert float(got) == pytest.approx(_kl_transcribed(logits, y, S, 5.0), rel=1e-5)
    assert torch.equal(logits, before[0]) and torch.equal(y, before[1])
    # y outside S: KL(uniform || p) = -log C - (1/C) sum_c log p_c
    per = sn.maxent_kl_loss(logits, y, S, temperature=5.0, reduction="none")
    logp = torch.log_softmax(logits / 5.0, -1)
    out = torch.tensor([int(v) not in S for v in y])
    torch.testing.assert_close(per[out], -math.log(5) - logp[out].mean(-1))
    # S = all classes: plain cross-entropy on z / t
    ce = nn.functional.cross_entropy(logits / 2.0, y)
    torch.testing.assert_close(sn.maxent_kl_loss(logits, y, range(5), temperature=2.0), ce)
    # sum reduction and the module form
    torch.testing.assert_close(sn.maxent_kl_loss(logits, y, S, reduction="sum"), per.sum())
    torch.testing.assert_close(sn.MaxEntLoss(S, 5)(logits, y), got)
    # uniform output on an off-S sample costs exactly 0
    assert float(sn.maxent_kl_loss(torch.zeros(1, 5), torch.tensor([0]), {1})) == pytest.approx(0.0, abs=1e-7)


def test_targets_and_bad_inputs():
    q = sn.maxent_targets(torch.tensor([0, 2]), [2], 4)
    torch.testing.assert_close(q, torch.tensor([[0.25] * 4, [0.0, 0.0, 1.0, 0.0]]))
    with pytest.raises(UserError, match="classes"):
        sn.maxent_targets(torch.tensor([0]), [7], 4)
    with pytest.raises(UserError, match="empty"):
        sn.MaxEntLoss([], 4)
    with pytest.raises(UserError, match="reduction"):
        sn.maxent_kl_loss(torch.zeros(2, 3), torch.tensor([0, 1]), [0], reduction="mean")


# ---- pruning schedule ------------------------------------------------------------------------


def test_round_ratio_formula():
    assert sn.imp_round_ratio(0.9, 2) == pytest.approx(1 - 0.1**0.5)
    assert sn.imp_round_ratio(0.99, 2) == pytest.approx(0.9)
    assert sn.imp_round_ratio(0.6, 1) == pytest.approx(0.6)
    for bad in [(1.0, 2), (-0.1, 2), (0.5, 0)]:
        with pytest.raises(UserError):
            sn.imp_round_ratio(*bad)


def test_l1_prune_matches_torch_prune_over_rounds():
    torch.manual_seed(3)
    lin = nn.Linear(30, 20)
    ref = copy.deepcopy(lin)
    masks = {
        "weight": torch.ones_like(lin.weight, dtype=torch.bool),
        "bias": torch.ones_like(lin.bias, dtype=torch.bool),
    }
    for amount in (0.4, 0.4, 0.25):
        masks = sn.l1_prune_masks(dict(lin.named_parameters()), masks, {"weight": amount, "bias": amount})
        torch_prune.l1_unstructured(ref, "weight", amount)
        torch_prune.l1_unstructured(ref, "bias", amount)
        assert torch.equal(masks["weight"], ref.weight_mask.bool())
        assert torch.equal(masks["bias"], ref.bias_mask.bool())


def test_layer_ratios_after_k_rounds():
    model = _mlp(h=40, d_in=50, c=10)
    est = sn.MaxEntIMP([0], 10, target_sparsity=0.9, rounds=2)
    masks = sn.ones_masks(model)
    amounts = est.layer_amounts(masks)
    r = 1 - 0.1**0.5
    assert amounts == pytest.approx({"0.weight": r, "0.bias": r, "3.weight": r / 2})
    params = dict(model.named_parameters())
    for _ in range(2):
        masks = sn.l1_prune_masks(params, masks, amounts)
    kept = {k: float(m.float().mean()) for k, m in masks.items()}
    assert kept["0.weight"] == pytest.approx((1 - r) ** 2, abs=2e-3)  # 2000 entries
    assert kept["0.bias"] == pytest.approx((1 - r) ** 2, abs=0.03)  # 40 entries: rounding
    assert kept["3.weight"] == pytest.approx((1 - r / 2) ** 2, abs=5e-3)
    with pytest.raises(UserError, match="output_layer"):
        sn.MaxEntIMP([0], 10, output_layer="nope").layer_amounts(masks)


def test_prunable_filters():
    m = _cnn()
    assert list(sn.prunable_parameters(m)) == ["0.weight", "0.bias", "4.weight", "4.bias", "6.weight"]
    assert list(sn.prunable_parameters(m, exclude=["0"], prune_bias=False)) == ["4.weight", "6.weight"]
    assert list(sn.prunable_parameters(m, include=["6"])) == ["6.weight"]
    with pytest.raises(UserError):
        sn.prunable_parameters(m, include=["zzz"])


# ---- IMP training ----------------------------------------------------------------------------


class _RecordingIMP(sn.MaxEntIMP):
    def _rewind_(self, model, masks):
        super()._rewind_(model, masks)
        self.rewinds = [
            *getattr(self, "rewinds", []),
            ({k: v.clone() for k, v in model.state_dict().items()}, {k: v.clone() for k, v in masks.items()}),
        ]


@pytest.mark.parametrize("make", [_mlp, _cnn])
def test_imp_rewinds_to_shared_theta0(make):
    X, y = _blobs()
    if make is _cnn:
        X = (
            torch.randn(120, 1, 4, 4, generator=torch.Generator().manual_seed(1))
            + y[:, None, None, None].float()
        )
    init = make()
    init_state = copy.deepcopy(init.state_dict())
    ests = []
    for S in ([0], [1, 2]):
        est = _RecordingIMP(S, 4, target_sparsity=0.75, rounds=2, epochs=2, batch_size=32, seed=0)
        est.fit(init, X[:80], y[:80], X[80:], y[80:])
        ests.append(est)
        assert _state_equal(est.theta0_, init_state)
        assert len(est.rewinds) == 2
        for state, masks in est.rewinds:
            for k, m in masks.items():
                assert torch.equal(state[k][m], init_state[k][m])  # survivors equal theta0
                assert bool((state[k][~m] == 0).all())  # pruned entries are zero
        for k, m in est.masks_.items():  # final module: pruned entries stay zero after training
            assert bool((dict(est.module_.named_parameters())[k][~m] == 0).all())
        assert not est.module_.training
    assert _state_equal(init.state_dict(), init_state)  # input module untouched
    assert _state_equal(ests[0].theta0_, ests[1].theta0_)


def test_fit_is_deterministic_and_leaves_global_rng_alone():
    X, y = _blobs()
    init = _mlp()
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = sn.MaxEntIMP([0], 4, epochs=2, rounds=1, target_sparsity=0.5, batch_size=32).fit(init, X, y, X, y)
    assert torch.equal(before, torch.random.get_rng_state())
    b = sn.MaxEntIMP([0], 4, epochs=2, rounds=1, target_sparsity=0.5, batch_size=32).fit(init, X, y, X, y)
    assert _state_equal(a.module_.state_dict(), b.module_.state_dict())
    assert len(a.history_) >= 2 and {"stage", "val_loss"} <= a.history_[0].keys()


def test_dense_training_learns_and_unfitted_errors():
    X, y = _blobs(n=200)
    est = sn.MaxEntIMP(range(4), 4, rounds=0, epochs=15, lr=1e-2, batch_size=32)
    with pytest.raises(UserError, match="not fitted"):
        est.predict_logits(X)
    est.fit(_mlp(), X, y, X, y)
    assert est.masks_ and all(bool(m.all()) for m in est.masks_.values())
    assert est.score(X, y)["accuracy"] > 0.9


# ---- masks I/O and metrics --------------------------------------------------------------------


def test_masks_roundtrip_safetensors(tmp_path):
    g = torch.Generator().manual_seed(0)
    masks = {"0.weight": torch.rand(8, 6, generator=g) > 0.5, "3.weight": torch.rand(4, 8, generator=g) > 0.5}
    sn.save_masks(tmp_path / "m.safetensors", masks, cfg={"P": 0.9})
    back = sn.load_masks(tmp_path / "m.safetensors")
    assert back.keys() == masks.keys()
    for k in masks:
        assert back[k].dtype == torch.bool and torch.equal(back[k], masks[k])
    assert (tmp_path / "cfg.json").exists()


def test_sparsity_jaccard_merge():
    a = {"l.weight": torch.tensor([True, True, False, False]), "l.bias": torch.tensor([True, False])}
    b = {"l.weight": torch.tensor([True, False, True, False]), "l.bias": torch.tensor([True, True])}
    assert sn.mask_sparsity(a) == {"l": 0.5, "total": 0.5}
    assert sn.mask_jaccard(a, b) == pytest.approx(2 / 5)  # kept: a={w0,w1,b0}, b={w0,w2,b0,b1}
    merged = sn.merge_masks([a, b])
    assert merged["l.weight"].tolist() == [True, True, True, False] and bool(merged["l.bias"].all())


def test_subnetwork_metrics_by_hand():
    logits = torch.tensor([[10.0, 0, 0], [0, 10.0, 0], [0, 0, 0], [20.0, 0, 0]])
    y = torch.tensor([0, 0, 1, 2])
    m = sn.subnetwork_metrics(logits, y, [0], temperature=1.0)
    assert m["accuracy"] == pytest.approx(0.25)
    assert m["rewarded_accuracy"] == pytest.approx(0.5)
    # off-S samples: uniform (entropy ln 3) and a confident class-0 prediction (leak)
    p = torch.softmax(logits[3], -1)
    assert m["entropy_outside"] == pytest.approx((math.log(3) - float((p * p.log()).sum())) / 2, rel=1e-5)
    assert m["leakage"] == pytest.approx(0.5)
    recall = sn.per_class_recall(logits, y, 3)
    assert recall.tolist()[:2] == [0.5, 0.0] and recall[2] == 0.0
    # precision side: of the two off-S samples, the uniform one's argmax (ties -> class 0) and the
    # confident one both land in S, although only one counts as leakage
    assert m["off_argmax_share"] == pytest.approx(1.0)


def test_precision_side_catches_over_prediction():
    # A "module" that predicts class 0 with near-uniform logits on every sample: perfect recall,
    # ~0 leakage, but it picks class 0 on all off-class samples, and its F1 drops to 2p/(1+p).
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 10, (500,), generator=g)
    logits = torch.zeros(500, 10)
    logits[:, 0] = 0.01
    m = sn.subnetwork_metrics(logits, y, [0], temperature=5.0)
    assert m["rewarded_accuracy"] == 1.0 and m["leakage"] == 0.0 and m["off_argmax_share"] == 1.0
    p = float((y == 0).float().mean())
    assert sn.one_vs_rest_f1(logits, y, 0) == pytest.approx(2 * p / (1 + p))


def test_one_vs_rest_f1_matches_sklearn():
    from sklearn.metrics import f1_score

    g = torch.Generator().manual_seed(1)
    logits = torch.randn(300, 4, generator=g)
    y = torch.randint(0, 4, (300,), generator=g)
    pred = logits.argmax(-1)
    for c in range(4):
        ref = f1_score((y == c).numpy(), (pred == c).numpy())
        assert sn.one_vs_rest_f1(logits, y, c) == pytest.approx(ref)
    assert math.isnan(sn.one_vs_rest_f1(torch.tensor([[1.0, 0.0]]), torch.tensor([0]), 1))


# ---- composition, interpolation, barrier, permutation -----------------------------------------


def test_weight_sum_and_logit_average():
    mods = [_mlp(seed=s, bias_out=True) for s in range(3)]
    states = [copy.deepcopy(m.state_dict()) for m in mods]
    g = torch.Generator().manual_seed(0)
    masks = [
        {k: torch.rand(p.shape, generator=g) > 0.5 for k, p in sn.prunable_parameters(m).items()}
        for m in mods
    ]
    out = sn.weight_sum(mods, masks)
    for k, v in out.state_dict().items():
        torch.testing.assert_close(v, sum(s[k] * masks[i][k] for i, s in enumerate(states)))
    assert all(_state_equal(m.state_dict(), s) for m, s in zip(mods, states, strict=True))
    X = torch.randn(5, 6)
    avg = sn.LogitAverage(mods).eval()
    torch.testing.assert_close(avg(X), torch.stack([m.eval()(X) for m in mods]).mean(0))
    with pytest.raises(UserError, match="architecture"):
        sn.weight_sum([_mlp(), _mlp(h=9)])


def test_sum_is_scaled_midpoint_for_bias_free_relu():
    # Bias-free 2-layer ReLU net: (A + B)(x) = 2^2 * midpoint(x); same argmax, different entropy.
    def net(seed):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(6, 8, bias=False), nn.ReLU(), nn.Linear(8, 4, bias=False)).eval()

    a, b = net(0), net(1)
    X = torch.randn(10, 6)
    torch.testing.assert_close(sn.weight_sum([a, b])(X), 4 * sn.interpolate(a, b, 0.5)(X))


def test_interpolation_and_barrier():
    a, b = _mlp(seed=0).eval(), _mlp(seed=1).eval()
    X, y = _blobs(n=40)
    mid = sn.interpolate(a, b, 0.3)
    for k, v in mid.state_dict().items():
        torch.testing.assert_close(v, 0.3 * a.state_dict()[k] + 0.7 * b.state_dict()[k])
    res = sn.loss_barrier(a, copy.deepcopy(a), X, y, [0, 1, 2, 3], n_alphas=5)
    assert res.barrier == pytest.approx(0.0, abs=1e-6)
    res = sn.loss_barrier(a, b, X, y, [0, 1], n_alphas=5)
    L = lambda m: float(sn.maxent_kl_loss(m(X).detach(), y, [0, 1]))  # noqa: E731
    expected = [L(sn.interpolate(a, b, al)) for al in (0.0, 0.25, 0.5, 0.75, 1.0)]
    torch.testing.assert_close(res.losses, torch.tensor(expected, dtype=torch.float64), rtol=1e-5, atol=1e-6)
    assert res.barrier == pytest.approx(max(expected) - 0.5 * (expected[0] + expected[-1]), abs=1e-5)
    assert res.barrier >= 0
    assert len(res.to_dict()["alphas"]) == 5


@pytest.mark.parametrize("make,shape", [(_mlp, (9, 6)), (_cnn, (9, 1, 4, 4))])
def test_permutation_preserves_function(make, shape):
    model = make().eval()
    g = torch.Generator().manual_seed(0)
    masks = {k: torch.rand(p.shape, generator=g) > 0.3 for k, p in sn.prunable_parameters(model).items()}
    model_m = copy.deepcopy(model)
    with torch.no_grad():
        for k, p in model_m.named_parameters():
            if k in masks:
                p.mul_(masks[k])
    before = copy.deepcopy(model_m.state_dict())
    X = torch.randn(*shape)
    perm, pmasks = sn.permute_hidden_units(model_m, masks, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(perm.eval()(X), model_m(X))
    assert _state_equal(model_m.state_dict(), before)  # input untouched
    assert not torch.equal(perm.state_dict()["0.weight"], before["0.weight"])
    for k, m in pmasks.items():  # permuted masks still describe the permuted weights' support
        w = dict(perm.named_parameters())[k]
        assert bool((w[~m] == 0).all())
        assert int(m.sum()) == int(masks[k].sum())


def test_permutation_rejects_norm_layers():
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    with pytest.raises(UserError, match="normalisation"):
        sn.permute_hidden_units(m, generator=torch.Generator())


def test_recalibrate_batchnorm():
    m = nn.Sequential(nn.Identity(), nn.BatchNorm1d(3), nn.Linear(3, 2))
    X = torch.randn(50, 3) * 2 + 1
    out = sn.recalibrate_batchnorm(m, X, batch_size=10)
    torch.testing.assert_close(out[1].running_mean, X.mean(0), rtol=1e-4, atol=1e-5)
    assert float(m[1].running_mean.abs().sum()) == 0.0  # original untouched
    assert not out.training


def test_barrier_excess_is_the_bump_above_the_endpoint_line():
    """The official barrier max L - (L0 + L1)/2 is half the endpoint gap on a monotone path (so a permuted module,
    with the same endpoint losses, gets the same value); excess is the bump above the straight line."""
    import torch

    from iclr26.sparsity.subnetworks import BarrierResult

    a = torch.linspace(0, 1, 5)
    line = BarrierResult(a, torch.tensor([1.0, 1.5, 2.0, 2.5, 3.0], dtype=torch.float64), 0.0)
    assert line.excess == pytest.approx(0.0)
    bump = BarrierResult(a, torch.tensor([1.0, 1.5, 3.5, 2.5, 3.0], dtype=torch.float64), 0.0)
    assert bump.excess == pytest.approx(1.5)  # 3.5 above the line's 2.0 at alpha = 0.5
    assert "excess" in bump.to_dict()
