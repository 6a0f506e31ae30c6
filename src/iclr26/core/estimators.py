"""The estimator contract every trainer in the library follows: scikit-learn's, used directly.

An estimator's ``__init__`` only stores its (keyword) hyperparameters under their own names; ``fit``
validates them, learns, stores what it learned in attributes ending in ``_`` and returns ``self``.
Subclassing :class:`sklearn.base.BaseEstimator` gives ``get_params`` / ``set_params``, ``clone`` and the
parameter ``repr`` for free. Methods that need the learned state call :func:`check_is_fitted`, which
raises :class:`NotFittedError`: a :class:`~iclr26.core.errors.UserError` (one line, naming the class and
``fit``) that is also scikit-learn's ``NotFittedError``. ``tests/test_estimators.py`` checks all of this
for every estimator in the library.
"""

from __future__ import annotations

from collections.abc import Sequence

from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError as _SklearnNotFittedError
from sklearn.utils.validation import check_is_fitted as _sklearn_check_is_fitted

from iclr26.core.errors import UserError

__all__ = ["BaseEstimator", "NotFittedError", "check_is_fitted", "clone"]


class NotFittedError(UserError, _SklearnNotFittedError):
    """A method that needs learned state ran before ``fit``."""


def check_is_fitted(estimator: object, attributes: str | Sequence[str], fit: str = "fit(X)") -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has every attribute in ``attributes``.

    ``fit`` is the call shown in the message, e.g. ``"fit(init_module, X, y, X_val, y_val)"``.
    """
    attrs = [attributes] if isinstance(attributes, str) else list(attributes)
    try:
        _sklearn_check_is_fitted(estimator, attrs, all_or_any=all)
    except _SklearnNotFittedError:
        raise NotFittedError(f"this {type(estimator).__name__} is not fitted yet; call {fit} first") from None
