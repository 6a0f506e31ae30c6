"""One conformance battery over every estimator in the library (as test_common.py does over every paper).

The contract (see :mod:`iclr26.core.estimators`): ``__init__`` only stores its parameters; ``get_params``
round-trips and ``sklearn.base.clone`` works; using an unfitted estimator raises ``NotFittedError``
(a ``UserError`` and scikit-learn's) naming the class and ``fit``; ``fit`` returns ``self``, leaves the
parameters untouched and stores what it learned in attributes ending in ``_``. A discovery test makes
sure a new class with a ``fit`` method cannot skip the battery.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import sklearn.exceptions
import torch
from torch import nn

import iclr26
from iclr26.core.errors import UserError
from iclr26.core.estimators import BaseEstimator, NotFittedError, clone


@dataclass
class Case:
    make: Callable[[], Any]  # a small unfitted instance
    fit: Callable[[Any], Any]  # calls est.fit(...) on tiny data and returns its result
    use: Callable[[Any], Any]  # a method that needs the fitted state


def _rng(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _sae() -> Case:
    from iclr26.interp.train import SAETrainer

    X = torch.randn(64, 4, generator=_rng())
    return Case(
        make=lambda: SAETrainer(8, k=2, steps=3, batch_size=16, log_every=1),
        fit=lambda e: e.fit(X),
        use=lambda e: e.transform(X[:3]),
    )


def _maxent_imp() -> Case:
    from iclr26.sparsity.subnetworks import MaxEntIMP

    g = _rng(1)
    X, y = torch.randn(40, 4, generator=g), torch.randint(0, 3, (40,), generator=g)
    init = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    return Case(
        make=lambda: MaxEntIMP([1, 0], 3, target_sparsity=0.5, rounds=1, epochs=2, batch_size=16),
        fit=lambda e: e.fit(init, X[:30], y[:30], X[30:], y[30:]),
        use=lambda e: e.predict_logits(X[:5]),
    )


def _fdfi() -> Case:
    from iclr26.flows.fdfi import FDFI

    X = np.random.default_rng(2).normal(size=(30, 3))
    return Case(
        make=lambda: FDFI("gaussian", n_resamples=2, n_jacobian=8),
        fit=lambda e: e.fit(X),
        use=lambda e: e.encode(X[:4]),
    )


def _gaussian_disentangler() -> Case:
    from iclr26.flows.fdfi import GaussianDisentangler

    X = np.random.default_rng(3).normal(size=(30, 3))
    return Case(
        make=lambda: GaussianDisentangler(kind="cholesky"), fit=lambda e: e.fit(X), use=lambda e: e.encode(X)
    )


def _flow_disentangler() -> Case:
    from iclr26.flows.fdfi import FlowDisentangler

    X = np.random.default_rng(4).normal(size=(32, 2))
    return Case(
        make=lambda: FlowDisentangler(hidden=8, time_dim=4, steps=3, batch_size=16, ode_steps=2),
        fit=lambda e: e.fit(X),
        use=lambda e: e.encode(X[:4]),
    )


def _functional_rf() -> Case:
    from iclr26.flows.fno import FNO1d
    from iclr26.flows.functional import FunctionalRectifiedFlow
    from iclr26.flows.priors import MaternGP

    x1 = torch.randn(16, 16, generator=_rng(5))
    return Case(
        make=lambda: FunctionalRectifiedFlow(
            FNO1d(modes=4, width=8, n_layers=1), MaternGP(1.0, 0.1), steps=2, batch_size=8
        ),
        fit=lambda e: e.fit(x1),
        use=lambda e: e.sample(2, steps=2),
    )


def _functional_ddpm() -> Case:
    from iclr26.flows.diffusion import FunctionalDDPM
    from iclr26.flows.fno import FNO1d
    from iclr26.flows.priors import MaternGP

    x0 = torch.randn(16, 16, generator=_rng(6))
    return Case(
        make=lambda: FunctionalDDPM(FNO1d(modes=4, width=8, n_layers=1), MaternGP(1.0, 0.1), steps=2, batch_size=8),
        fit=lambda e: e.fit(x0),
        use=lambda e: e.sample(2, steps=2),
    )


def _probe(cls_name: str) -> Callable[[], Case]:
    def make_case() -> Case:
        from iclr26.interp import probes

        X = torch.randn(40, 4, generator=_rng(7))
        y = (X[:, 0] > 0).long()
        return Case(make=getattr(probes, cls_name), fit=lambda e: e.fit(X, y), use=lambda e: e.decision_function(X))

    return make_case


CASES: dict[str, Callable[[], Case]] = {
    "LinearProbe": _probe("LinearProbe"),
    "DiffMeansProbe": _probe("DiffMeansProbe"),
    "SAETrainer": _sae,
    "MaxEntIMP": _maxent_imp,
    "FDFI": _fdfi,
    "GaussianDisentangler": _gaussian_disentangler,
    "FlowDisentangler": _flow_disentangler,
    "FunctionalRectifiedFlow": _functional_rf,
    "FunctionalDDPM": _functional_ddpm,
}


def _params(est: BaseEstimator) -> dict[str, Any]:
    return est.get_params(deep=False)


def _library_classes_with_fit() -> set[str]:
    found = set()
    for info in pkgutil.walk_packages(iclr26.__path__, "iclr26."):
        if info.name.endswith("__main__"):
            continue
        mod = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ != mod.__name__ or getattr(cls, "_is_protocol", False):
                continue
            if issubclass(cls, nn.Module) or not callable(getattr(cls, "fit", None)):
                continue
            found.add(name)
    return found


def test_every_library_estimator_is_in_the_battery():
    assert _library_classes_with_fit() == set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_init_stores_parameters_only(name):
    est = CASES[name]().make()
    assert type(est).__name__ == name
    assert isinstance(est, BaseEstimator)
    assert set(vars(est)) == set(_params(est)), "__init__ must store exactly its parameters"
    assert not any(k.endswith("_") for k in vars(est))


@pytest.mark.parametrize("name", CASES)
def test_get_params_round_trip_and_clone(name):
    est = CASES[name]().make()
    p = _params(est)
    again = type(est)(**p)
    assert _params(again).keys() == p.keys()
    assert all(_params(again)[k] is v for k, v in p.items())
    twin = clone(est)  # raises if __init__ modified a parameter
    assert type(twin) is type(est) and _params(twin).keys() == p.keys()
    key = next((k for k, v in p.items() if isinstance(v, int | float) and not isinstance(v, bool)), None)
    if key is None:  # an estimator without numeric hyperparameters (DiffMeansProbe has none at all)
        assert est.set_params() is est
        return
    assert est.set_params(**{key: p[key] * 2 + 1}) is est and getattr(est, key) == p[key] * 2 + 1


@pytest.mark.parametrize("name", CASES)
def test_unfitted_use_names_class_and_fit(name):
    case = CASES[name]()
    with pytest.raises(NotFittedError, match=rf"{name} is not fitted yet; call fit\(") as e:
        case.use(case.make())
    assert isinstance(e.value, UserError) and isinstance(e.value, sklearn.exceptions.NotFittedError)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", CASES)
def test_fit_returns_self_and_learned_attributes_end_in_underscore(name):
    case = CASES[name]()
    est = case.make()
    before = _params(est)
    assert case.fit(est) is est
    assert all(_params(est)[k] is v for k, v in before.items()), "fit must not change parameters"
    learned = set(vars(est)) - set(before)
    public = {a for a in learned if not a.startswith("_")}
    assert public, "fit stored nothing"
    assert all(a.endswith("_") for a in public), f"learned attributes must end in '_': {sorted(public)}"
    case.use(est)  # works once fitted
    with pytest.raises(NotFittedError):
        case.use(clone(est))  # a clone has the parameters, not the learned state
