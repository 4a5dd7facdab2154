"""Input checks shared by the DP estimators: features, labels, choices, candidate sources.

Every check raises :class:`~dpcurator.errors.InvalidParameterError` naming the argument, and
never echoes private values (arrays are described by their shape only).

Examples
--------
>>> import numpy as np
>>> validate_labels([0, 1, 1], 3).tolist()
[0, 1, 1]
>>> check_choice("output", "method", ("objective", "output"))
'output'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone  # type: ignore[import-untyped, unused-ignore]
from sklearn.utils.validation import column_or_1d, validate_data  # type: ignore[import-untyped, unused-ignore]

from dpcurator.errors import InvalidParameterError
from dpcurator.learn._bounds import check_matrix
from dpcurator.noise import RandomSource

__all__ = [
    "check_choice",
    "check_flag",
    "describe",
    "validate_features",
    "validate_labels",
    "with_source",
]


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
