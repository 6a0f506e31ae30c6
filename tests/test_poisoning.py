"""iclr26.poisoning: unlearnable examples, defenses and MI proxies, against hand-written oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from iclr26.core.errors import UserError
from iclr26.poisoning import defenses as dfn
from iclr26.poisoning import mi
from iclr26.poisoning import models as pm
from iclr26.poisoning import training as tr
from iclr26.poisoning import unlearnable as ue


def _data(n_per_class=12, k=4, hw=(8, 8), c=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(k).repeat_interleave(n_per_class)
    X = torch.rand(len(y), c, *hw, generator=g)
    return X, y


def _oracle_mi_loss(f, y, tau):
    """Direct transcription of L_MI with explicit loops."""
    z = f / f.norm(dim=1, keepdim=True)
    total = 0.0
    for i in range(len(y)):
        s = [float(z[i] @ z[j]) / tau for j in range(len(y))]
        num = sum(math.exp(s[j]) for j in range(len(y)) if y[j] == y[i])
        den = sum(math.exp(v) for v in s)
        total += -math.log(num / den)
    return total / len(y)


def test_mi_loss_matches_loop_oracle():
    g = torch.Generator().manual_seed(1)
    f = torch.randn(9, 5, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1, 1, 2, 2, 0, 2])
    assert float(ue.mi_loss(f, y, 0.5)) == pytest.approx(_oracle_mi_loss(f, y, 0.5), rel=1e-10)
    # all-zero ReLU features do not give nan
    assert math.isfinite(float(ue.mi_loss(torch.zeros(4, 3), torch.tensor([0, 0, 1, 1]))))


@pytest.mark.parametrize("method", ue.METHODS)
@pytest.mark.parametrize("shape", [(1, 8, 8), (3, 5, 7)])
def test_perturbations_respect_budget_exactly(method, shape):
    X, y = _data(hw=shape[1:], c=shape[0])
    X[0] = 0.0
    X[1] = 1.0  # images at both ends of the range
    model = pm.make_cnn(shape[0], shape[1:], 4, seed=0)
    eps = 0.07
    res = ue.make_unlearnable(X, y, model, method, eps=eps, epochs=2, steps=5, batch_size=16, alpha_start=0.5,
                              alpha_end=0.9, seed=3)
    assert res.delta.shape == X.shape
    assert bool((res.delta.abs() <= eps).all())  # exact: no tolerance
    assert bool(((res.images >= 0) & (res.images <= 1)).all())
    assert bool(((X + res.delta >= 0) & (X + res.delta <= 1)).all())
    assert float(res.delta.abs().max()) > 0.5 * eps  # it does move
    if method == "random":  # uniform noise covers +-eps (where the range allows)
        inner = (X > eps) & (X < 1 - eps)
        assert float(res.delta[inner].max()) > 0.95 * eps and float(res.delta[inner].min()) < -0.95 * eps


def test_em_lowers_training_loss_on_source_model():
    X, y = _data(n_per_class=20)
    model = pm.make_cnn(1, (8, 8), 4, seed=0)
    # frozen source model (no training): the error-minimising noise alone must lower its CE on x + delta
    res = ue.make_unlearnable(X, y, model, "em", eps=8 / 255 * 4, epochs=3, steps=10, batch_size=40,
                              train_source=False, seed=0)
    m = res.model.eval()
    with torch.no_grad():
        before = float(F.cross_entropy(m(X), y))
        after = float(F.cross_entropy(m(res.images), y))
    assert after < before - 0.01
    # a sign flip (error-maximising) would raise it; the losses the generator recorded fall too
    assert all(h["loss_after"] < h["loss_before"] for h in res.history)


def test_miue_lowers_mi_loss_over_steps_for_fixed_model():
    X, y = _data(n_per_class=20)
    model = pm.make_cnn(1, (8, 8), 4, seed=0)
    res = ue.make_unlearnable(X, y, model, "mi-ue", eps=0.1, epochs=2, steps=10, batch_size=40,
                              train_source=False, seed=0)
    assert res.history[0]["loss_after"] < res.history[0]["loss_before"]
    assert res.history[-1]["loss_after"] < res.history[0]["loss_before"]
    # the input model is not modified
    fresh = pm.make_cnn(1, (8, 8), 4, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True))


def test_em_and_miue_differ_only_in_loss():
    """Same seed, batches and schedule: MI-UE run with EM's loss swapped in (monkeypatched) reproduces EM
    bit for bit, so nothing but the loss (batches, steps, source training) differs; the real MI-UE differs."""
    X, y = _data(n_per_class=10)
    model = pm.make_cnn(1, (8, 8), 4, seed=0)
    kw = dict(eps=0.1, epochs=2, steps=3, batch_size=20, seed=5)
    a = ue.make_unlearnable(X, y, model, "em", **kw)
    orig = ue.poison_loss
    try:
        ue.poison_loss = lambda method, *args, **k: orig("em", *args, **k)
        b = ue.make_unlearnable(X, y, model, "mi-ue", **kw)
    finally:
        ue.poison_loss = orig
    assert torch.equal(a.delta, b.delta)
    c = ue.make_unlearnable(X, y, model, "mi-ue", **kw)
    assert not torch.equal(a.delta, c.delta)


def test_balanced_batches_cover_every_index_with_equal_class_counts():
    y = torch.arange(10).repeat_interleave(50)
    batches = ue.balanced_batches(y, 100, torch.Generator().manual_seed(0))
    allidx = torch.cat(batches)
    assert torch.equal(torch.sort(allidx).values, torch.arange(500))
    for b in batches:
        assert torch.bincount(y[b], minlength=10).tolist() == [10] * 10


def test_delta_pairs_with_its_image_under_shuffling():
    """delta[i] belongs to X[i] under the shuffled batches: the all-white image can only be darkened."""
    X, y = _data()
    X[5] = 1.0
    res = ue.make_unlearnable(X, y, pm.make_cnn(1, (8, 8), 4, seed=0), "em", eps=0.2, epochs=1, steps=3,
                              batch_size=16)
    assert bool((res.delta[5] <= 0).all())
    assert bool((res.delta[5] < 0).any())  # and it was perturbed at all


def test_any_module_with_feature_layer_or_tuple_output():
    X, y = _data(hw=(6, 6))

    class TupleNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(nn.Flatten(), nn.Linear(36, 8), nn.ReLU())
            self.h = nn.Linear(8, 4)

        def forward(self, x):
            f = self.f(x)
            return f, self.h(f)

    plain = nn.Sequential(nn.Flatten(), nn.Linear(36, 8), nn.ReLU(), nn.Linear(8, 4))
    for model, layer in ((TupleNet(), None), (plain, "2")):
        res = ue.make_unlearnable(X, y, model, "mi-ue", eps=0.05, epochs=1, steps=2, batch_size=16,
                                  feature_layer=layer)
        assert bool((res.delta.abs() <= 0.05).all())
    with pytest.raises(UserError, match="feature"):
        ue.make_unlearnable(X, y, plain, "mi-ue", eps=0.05, epochs=1, steps=1)
    with pytest.raises(UserError, match="not a submodule"):
        ue.make_unlearnable(X, y, plain, "mi-ue", eps=0.05, epochs=1, steps=1, feature_layer="nope")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(method="fgsm"), "allowed values are 'mi-ue', 'em', 'random'"),
        (dict(eps=0.0), "eps"),
        (dict(eps=float("nan")), "eps"),
        (dict(steps=0), "steps"),
        (dict(X=torch.rand(8, 8, 8)), r"\[N, C, H, W\]"),
        (dict(y=torch.zeros(3, dtype=torch.long)), "y must be"),
        (dict(y=torch.zeros(48)), "integer"),
        (dict(X=torch.rand(48, 1, 8, 8) * 2), "inside clip"),
        (dict(source_model=None), "source_model"),
    ],
)
def test_bad_input_one_line_errors(kwargs, match):
    X, y = _data()
    args = dict(X=X, y=y, source_model=pm.make_cnn(1, (8, 8), 4, seed=0), method="em", eps=0.1, epochs=1, steps=1)
    args.update(kwargs)
    with pytest.raises(UserError, match=match) as e:
        ue.make_unlearnable(**args)
    assert "\n" not in str(e.value)


def test_within_class_covariance_matches_hand_computation():
    f = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0], [1.0, 1.0], [2.0, 0.0]])
    y = np.array([0, 0, 1, 1, 1])
    # unnormalised: class 0 points (1,0), (0,2): var x = 0.5, var y = 2 -> 2.5
    # class 1 (3,4), (1,1), (2,0): var x = 1, var y = (1.667^2 + 0.667^2 + 1.333^2)... via numpy's np.var by hand
    c1 = np.array([[3.0, 4.0], [1.0, 1.0], [2.0, 0.0]])
    m = c1.mean(0)
    tr1 = ((c1 - m) ** 2).sum() / 2
    assert mi.within_class_covariance(f, y, normalize=False) == pytest.approx((2.5 + tr1) / 2)
    z = f / np.linalg.norm(f, axis=1, keepdims=True)
    hand = np.mean([np.trace(np.cov(z[y == c], rowvar=False)) for c in (0, 1)])
    assert mi.within_class_covariance(torch.tensor(f), torch.tensor(y)) == pytest.approx(hand)
    # identical features within each class: zero covariance
    assert mi.within_class_covariance(np.repeat(np.eye(2), 3, axis=0), np.repeat([0, 1], 3)) == pytest.approx(0.0)


def test_gaussian_and_ksg_mi_match_the_analytic_value():
    rng = np.random.default_rng(0)
    n, rho = 3000, 0.8
    x = rng.standard_normal((n, 2))
    yv = rho * x + math.sqrt(1 - rho**2) * rng.standard_normal((n, 2))
    truth = -2 * 0.5 * math.log(1 - rho**2)  # two independent pairs
    assert mi.gaussian_mi(x, yv, q=2, ridge=0.0) == pytest.approx(truth, abs=0.05)
    # KSG on the raw coordinates (a joint PCA would mix X and Y directions, which changes nothing for the
    # Gaussian MI but not for the kNN estimate)
    assert mi.ksg_mi(x, yv, k=3, q=None) == pytest.approx(truth, abs=0.1)
    indep = rng.standard_normal((n, 2))
    assert mi.gaussian_mi(x, indep, q=2, ridge=0.0) < 0.01
    assert mi.ksg_mi(x, indep, k=3, q=None) < 0.03
    assert mi.feature_label_mi(np.c_[np.repeat([0.0, 5.0], 100), rng.standard_normal(200)], np.repeat([0, 1], 100)) > 0.5


def test_mi_bad_input():
    with pytest.raises(UserError, match="same shape"):
        mi.gaussian_mi(np.zeros((5, 3)), np.zeros((5, 2)))
    with pytest.raises(UserError, match="k must be"):
        mi.ksg_mi(np.random.rand(5, 2), np.random.rand(5, 2), k=5, q=None)
    with pytest.raises(UserError, match="labels"):
        mi.within_class_covariance(np.zeros((4, 2)), np.zeros(3))
    with pytest.raises(UserError, match="non-finite"):
        mi.gaussian_mi(np.full((4, 2), np.nan), np.zeros((4, 2)))


def test_defenses_against_oracles():
    X = torch.rand(2, 2, 6, 5, generator=torch.Generator().manual_seed(0))
    # median filter vs. a direct loop (reflect padding)
    med = dfn.median_blur(X, 3)
    P = F.pad(X, (1, 1, 1, 1), mode="reflect")
    for n, c, i, j in [(0, 0, 0, 0), (1, 1, 3, 2), (0, 1, 5, 4)]:
        assert float(med[n, c, i, j]) == pytest.approx(float(P[n, c, i : i + 3, j : j + 3].flatten().median()))
    # bit depth: 1 bit -> {0, 1}; 3 bits -> 8 levels
    assert set(dfn.bit_depth(X, 1).unique().tolist()) <= {0.0, 1.0}
    assert len(dfn.bit_depth(X, 3).unique()) <= 8
    # blur keeps constants and the mean of a constant image
    assert torch.allclose(dfn.gaussian_blur(torch.full((1, 1, 5, 5), 0.3)), torch.full((1, 1, 5, 5), 0.3))
    # cutout zeroes exactly one size x size square away from the border
    out = dfn.cutout(torch.ones(50, 1, 12, 12), 4, torch.Generator().manual_seed(0))
    zeros = (out == 0).sum(dim=(1, 2, 3))
    assert int(zeros.max()) == 16 and int(zeros.min()) >= 4
    for bad in (lambda: dfn.median_blur(X, 2), lambda: dfn.bit_depth(X, 0), lambda: dfn.preprocess(X, "jpeg"),
                lambda: dfn.gaussian_blur(torch.rand(3, 3))):
        with pytest.raises(UserError):
            bad()


def test_pgd_attack_raises_loss_within_radius_and_adv_training_runs():
    X, y = _data(hw=(6, 6))
    model = tr.train_classifier(pm.make_cnn(1, (6, 6), 4, seed=0), X, y, epochs=3, seed=0)
    xa = dfn.pgd_attack(model, X, y, eps=0.05, steps=5, step_size=0.02, generator=torch.Generator().manual_seed(0))
    assert bool(((xa - X).abs() <= 0.05 + 1e-7).all()) and bool(((xa >= 0) & (xa <= 1)).all())
    model.eval()
    with torch.no_grad():
        assert float(F.cross_entropy(model(xa), y)) > float(F.cross_entropy(model(X), y))
    m2 = dfn.train_with_defense(pm.make_cnn(1, (6, 6), 4, seed=0), X, y, "adv", epochs=1, adv_eps=0.05, adv_steps=2)
    assert 0 <= tr.accuracy(m2, X, y) <= 1
    with pytest.raises(UserError, match="allowed values"):
        dfn.train_with_defense(m2, X, y, "mixup", epochs=1)


def test_training_is_deterministic():
    X, y = _data()
    a = tr.train_classifier(pm.make_cnn(1, (8, 8), 4, seed=0), X, y, epochs=2, seed=1)
    b = tr.train_classifier(pm.make_cnn(1, (8, 8), 4, seed=0), X, y, epochs=2, seed=1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    with pytest.raises(UserError, match="arch"):
        pm.make_cnn(1, (8, 8), 4, "resnet", seed=0)


@pytest.mark.parametrize("defense", dfn.DEFENSES)
def test_victim_training_stays_on_the_input_device(defense):
    """Issue 27: every defense's victim training, feature reading and prediction run on ``meta`` (no data), so a
    tensor built on the CPU and mixed with the batch (a mask, a PGD start, a shuffled index moved wrongly) or a
    hard-coded ``.cpu()`` raises here; the outputs come back on the input's device."""
    meta = torch.device("meta")
    model = pm.FeatureCNN(1, (8, 8), 4).to(meta)
    X, y = torch.zeros(6, 1, 8, 8, device=meta), torch.zeros(6, dtype=torch.long, device=meta)
    dfn.train_with_defense(model, X, y, defense, epochs=1, batch_size=4, adv_eps=0.1, adv_steps=1)
    assert all(p.device == meta for p in model.parameters())
    assert tr.extract_features(model, X).device == meta and tr.predict(model, X).device == meta
    assert dfn.pgd_attack(model, X, y, eps=0.1, steps=1, step_size=0.1).device == meta
