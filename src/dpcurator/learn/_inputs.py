"""Input checks shared by the DP estimators: features, labels, choices, candidate sources.

Every check raises :class:`~dpcurator.errors.InvalidParameterError` naming the argument, and
never echoes private values (arrays are described by their shape only).

The :class:`~dpcurator.errors.PrivacyWarning` of the estimators live here too:
:func:`warn_classes_from_data` (class labels read from ``y``) and :class:`FitLedgerMixin`
(the same estimator, or its scikit-learn clones, fitted again: each fit spends the budget).

Examples
--------
>>> import numpy as np
>>> validate_labels([0, 1, 1], 3).tolist()
[0, 1, 1]
>>> check_choice("output", "method", ("objective", "output"))
'output'
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone  # type: ignore[import-untyped, unused-ignore]
from sklearn.utils.validation import column_or_1d, validate_data  # type: ignore[import-untyped, unused-ignore]

from dpcurator.errors import InvalidParameterError, PrivacyWarning
from dpcurator.learn._bounds import check_matrix
from dpcurator.noise import RandomSource

__all__ = [
    "FitLedger",
    "FitLedgerMixin",
    "check_choice",
    "check_flag",
    "describe",
    "internal_fits",
    "validate_features",
    "validate_labels",
    "warn_classes_from_data",
    "with_source",
]

# True while an estimator of this package fits others on purpose (DPModelSelector's candidates,
# whose budgets it accounts itself): those fits are neither counted nor warned about.
_INTERNAL_FIT: ContextVar[bool] = ContextVar("dpcurator_learn_internal_fit", default=False)


def describe(array: object) -> str:
    """Describe an argument by its shape (or type), never by its values.

    Examples
    --------
    >>> import numpy as np
    >>> describe(np.zeros((2, 3)))
    '<array of shape (2, 3)>'
    """
    shape = getattr(array, "shape", None)
    return f"<array of shape {shape}>" if shape is not None else type(array).__name__


def check_choice(value: object, name: str, options: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``options``.

    Examples
    --------
    >>> check_choice("ovr", "multi_class", ("multinomial", "ovr"))
    'ovr'
    """
    if not isinstance(value, str) or value not in options:
        raise InvalidParameterError(name, value, f"must be one of {tuple(options)}")
    return value


def check_flag(value: object, name: str) -> bool:
    """Return ``value`` if it is a bool (Python's or numpy's).

    Examples
    --------
    >>> check_flag(True, "refit")
    True
    """
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterError(name, value, "must be a bool")
    return bool(value)


def validate_features(estimator: Any, X: ArrayLike, *, reset: bool) -> NDArray[np.float64]:
    """Check ``X`` the scikit-learn way (``n_features_in_``), then finite and 2-D.

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> validate_features(BaseEstimator(), [[1, 2]], reset=True).shape
    (1, 2)
    """
    try:
        array = validate_data(estimator, X, reset=reset, ensure_all_finite=False, dtype=np.float64)
    except ValueError as exc:
        raise InvalidParameterError("X", describe(X), f"is invalid: {exc}") from None
    return check_matrix(array)


def validate_labels(y: object, n: int) -> NDArray[Any]:
    """Return ``y`` as a 1-D array of ``n`` labels (finite if numeric).

    Examples
    --------
    >>> validate_labels(["a", "b"], 2).tolist()
    ['a', 'b']
    """
    if y is None:
        raise InvalidParameterError(
            "y", None, "is required: requires y to be passed, but the target y is None"
        )
    try:
        labels: NDArray[Any] = np.asarray(column_or_1d(y, warn=True))
    except ValueError as exc:
        raise InvalidParameterError("y", describe(y), f"is invalid: {exc}") from None
    if labels.shape[0] != n:
        raise InvalidParameterError(
            "y", describe(labels), f"must have one label per row of X ({n} rows)"
        )
    if labels.dtype.kind in "fc" and not np.isfinite(labels).all():
        raise InvalidParameterError(
            "y", describe(labels), "must be finite (no NaN, inf or infinity)"
        )
    return labels


@contextmanager
def internal_fits() -> Iterator[None]:
    """Fits inside are accounted by the caller: no refit count, no class-label warning.

    Examples
    --------
    >>> with internal_fits():
    ...     pass
    """
    token = _INTERNAL_FIT.set(True)
    try:
        yield
    finally:
        _INTERNAL_FIT.reset(token)


def warn_classes_from_data(estimator: object, *, stacklevel: int = 3) -> None:
    """Warn that ``estimator`` read its class labels from ``y`` (they are not private).

    Examples
    --------
    >>> import warnings
    >>> from dpcurator.learn import DPLinearSVC
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_classes_from_data(DPLinearSVC(), stacklevel=1)
    >>> caught[0].category.__name__
    'PrivacyWarning'
    """
    if _INTERNAL_FIT.get():
        return
    name = type(estimator).__name__
    warnings.warn(
        f"{name} read its class labels from y: the set of labels present is not private "
        "(a class present in one dataset and absent from a neighbouring one changes the "
        f"model's shape). Declare every label that may occur, e.g. {name}(classes=[0, 1]).",
        PrivacyWarning,
        stacklevel=stacklevel + 1,
    )


class FitLedger:
    """Fits counted across an estimator and its scikit-learn clones (shared, mutable).

    Examples
    --------
    >>> FitLedger().fits
    0
    """

    __slots__ = ("fits",)

    def __init__(self) -> None:
        self.fits = 0

    def __getstate__(self) -> int:
        return self.fits

    def __setstate__(self, state: int) -> None:
        self.fits = state


class FitLedgerMixin:
    """Warn when one estimator, or a clone of it, is fitted again: the budget is spent again.

    :func:`sklearn.base.clone` (which ``cross_val_score``, ``GridSearchCV`` and
    ``cross_validate`` call for every fold and every candidate) calls ``__sklearn_clone__``;
    here the clone shares the original's :class:`FitLedger`, so the ``k`` fits of ``k`` folds
    are counted together and every fit after the first warns a
    :class:`~dpcurator.errors.PrivacyWarning`: fits of the same rows compose, ``k`` fits spend
    ``k`` times the budget. Fits made by :class:`~dpcurator.learn.DPModelSelector` of its
    candidates (:func:`internal_fits`) are not counted: it accounts them itself. Clones fitted
    in other processes (``n_jobs`` > 1) count in their own copy of the ledger and are not seen.

    Examples
    --------
    >>> import warnings
    >>> from sklearn.base import clone
    >>> from dpcurator.learn import DPLogisticRegression
    >>> from dpcurator.noise import InsecureSeededSource
    >>> model = DPLogisticRegression(classes=[0, 1], source=InsecureSeededSource(0))
    >>> X, y = [[0.0], [1.0]] * 10, [0, 1] * 10
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = clone(model).fit(X, y)
    ...     _ = clone(model).fit(X, y)
    >>> len(caught), caught[0].category.__name__
    (1, 'PrivacyWarning')
    """

    def _fit_ledger_of(self) -> FitLedger:
        ledger = self.__dict__.get("_fit_ledger")
        if not isinstance(ledger, FitLedger):
            ledger = FitLedger()
            self._fit_ledger = ledger
        return ledger

    def __sklearn_clone__(self) -> Any:
        new = super().__sklearn_clone__()  # type: ignore[misc]
        new._fit_ledger = self._fit_ledger_of()
        return new

    def _count_fit(self, budget: object, *, stacklevel: int = 2) -> None:
        """Count a completed fit; warn from the second on (``budget`` is what one fit spent)."""
        if _INTERNAL_FIT.get():
            return
        ledger = self._fit_ledger_of()
        ledger.fits += 1
        if ledger.fits < 2:
            return
        name = type(self).__name__
        warnings.warn(
            f"{name} has been fitted {ledger.fits} times (this object or its clones, as "
            "cross_val_score and GridSearchCV make one per fold and candidate): each fit "
            f"spends its budget ({budget}) again, so k fits on the same rows spend k times "
            "the budget. Choose hyper-parameters with DPModelSelector, which accounts its "
            "fits, or add up the budgets of the fits yourself.",
            PrivacyWarning,
            stacklevel=stacklevel + 1,
        )


def with_source(estimator: Any, source: RandomSource | None) -> Any:
    """Clone ``estimator``, handing it ``source`` if it has a ``source`` left to the default.

    Examples
    --------
    >>> from dpcurator.learn import DPLogisticRegression
    >>> from dpcurator.noise import InsecureSeededSource
    >>> model = with_source(DPLogisticRegression(), InsecureSeededSource(0))
    >>> type(model.source).__name__
    'InsecureSeededSource'
    """
    model = clone(estimator)
    if source is not None and model.get_params().get("source", "") is None:
        model.set_params(source=source)
    return model
