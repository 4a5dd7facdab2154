r"""Declared data bounds: row-norm clipping and feature scaling by public ranges.

A DP learner's sensitivity depends on how large one record can be. Here that bound is always
*declared* (a public parameter), never read from the private data: rows are clipped to the
declared L2 norm, features are clipped to declared ranges, labels to a declared interval. Each
of these is a fixed function applied to every row separately, so two neighbouring datasets (one
row replaced) stay neighbours after it, and the transformation costs no privacy.

Examples
--------
>>> import numpy as np
>>> clip_rows(np.array([[3.0, 4.0], [0.3, 0.4]]), data_norm=1.0)
array([[0.6, 0.8],
       [0.3, 0.4]])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin  # type: ignore[import-untyped, unused-ignore]
from sklearn.utils.validation import check_is_fitted, validate_data  # type: ignore[import-untyped, unused-ignore]

from dpcurator._validation import check_finite, check_positive
from dpcurator.errors import InvalidParameterError

__all__ = ["BoundedScaler", "check_bounds_pair", "check_matrix", "clip_rows", "row_norm_bound"]


def _summary(array: NDArray[Any]) -> str:
    # Never echo private values into an error message.
    return f"<array of shape {array.shape} and dtype {array.dtype}>"


def check_matrix(X: ArrayLike, name: str = "X") -> NDArray[np.float64]:
    """Return ``X`` as a finite 2-D float64 array, or raise :class:`InvalidParameterError`.

    Examples
    --------
    >>> check_matrix([[1, 2]]).dtype
    dtype('float64')
    """
    try:
        array = np.asarray(X)
    except (TypeError, ValueError):
        raise InvalidParameterError(name, type(X).__name__, "must be array-like") from None
    if array.dtype.kind not in "biuf":
        raise InvalidParameterError(name, _summary(array), "must hold real numbers")
    if array.ndim != 2:
        raise InvalidParameterError(
            name, _summary(array), "must be a 2-D array (n_samples, n_features)"
        )
    out = array.astype(np.float64)
    if not np.isfinite(out).all():
        raise InvalidParameterError(
            name,
            _summary(array),
            "must be finite (no NaN, inf or infinity): DP needs bounded data",
        )
    return out


def clip_rows(X: ArrayLike, data_norm: float) -> NDArray[np.float64]:
    r"""Scale down every row whose L2 norm exceeds ``data_norm`` onto the sphere of that radius.

    .. math:: \bar x_i = x_i \min\left(1, \frac{R}{\|x_i\|_2}\right)

    A per-row map: neighbouring datasets stay neighbours, and every row of the result has norm
    at most ``R`` (the bound the ERM sensitivities use). Rows already inside are unchanged.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
        Finite values.
    data_norm : float
        ``R``, > 0 and finite (declared, not computed from ``X``).

    Returns
    -------
    numpy.ndarray of float64, same shape

    Examples
    --------
    >>> import numpy as np
    >>> clip_rows([[6.0, 8.0]], data_norm=5.0)
    array([[3., 4.]])
    """
    radius = check_positive(data_norm, "data_norm")
    array = check_matrix(X)
    norms = np.linalg.norm(array, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # A shrink of 2**-50 below R absorbs the rounding of the norm and of the product, so
        # every clipped row has a computed norm below R however the norm is evaluated.
        factor = np.where(norms > radius, radius / norms * (1.0 - 2.0**-50), 1.0)
    out: NDArray[np.float64] = array * factor[:, None]
    return out


def check_bounds_pair(bounds: object, name: str) -> tuple[float, float]:
    """Validate a declared interval ``(low, high)`` of finite numbers with ``low < high``.

    Examples
    --------
    >>> check_bounds_pair((0, 10), "label_bounds")
    (0.0, 10.0)
    """
    if isinstance(bounds, str) or not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise InvalidParameterError(name, bounds, "must be a pair (low, high)")
    low = check_finite(bounds[0], f"{name}[0]")
    high = check_finite(bounds[1], f"{name}[1]")
    if not low < high:
        raise InvalidParameterError(name, bounds, "must have low < high")
    return low, high


def _as_bound_vector(value: object, name: str, n_features: int) -> NDArray[np.float64]:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(name, value, "must be a number or a 1-D array") from None
    if array.ndim == 0:
        array = np.full(n_features, float(array))
    if array.shape != (n_features,):
        raise InvalidParameterError(
            name, f"<shape {array.shape}>", f"must be a scalar or have {n_features} entries"
        )
    if not np.isfinite(array).all():
        raise InvalidParameterError(name, "<non-finite bound>", "must be finite")
    return array


class BoundedScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):  # type: ignore[misc, unused-ignore]
    r"""Clip every feature to a declared range and map it linearly onto ``feature_range``.

    .. math:: x'_j = a + (b - a)\,\frac{\operatorname{clip}(x_j, l_j, u_j) - l_j}{u_j - l_j}

    The ranges ``[l_j, u_j]`` are *declared* (a data dictionary, domain knowledge): ``fit``
    reads only the number of features, never the values, so unlike
    :class:`sklearn.preprocessing.MinMaxScaler` this transformer spends no privacy and can sit
    in a :class:`~sklearn.pipeline.Pipeline` in front of a DP estimator. After it, every row has
    L2 norm at most ``max(|a|, |b|) sqrt(n_features)``.

    Parameters
    ----------
    lower, upper : float or array_like of shape (n_features,)
        Declared bounds per feature (a scalar applies to all), finite, ``lower < upper``.
    feature_range : tuple (a, b), default (0.0, 1.0)
        Target interval, ``a < b``.

    Attributes
    ----------
    lower_, upper_ : numpy.ndarray of shape (n_features,)
        The bounds, broadcast.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> scaler = BoundedScaler(lower=[0, 0], upper=[10, 100]).fit(np.zeros((1, 2)))
    >>> scaler.transform([[5.0, 250.0]])
    array([[0.5, 1. ]])
    """

    def __init__(
        self,
        lower: float | ArrayLike = 0.0,
        upper: float | ArrayLike = 1.0,
        *,
        feature_range: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        self.lower = lower
        self.upper = upper
        self.feature_range = feature_range

    def fit(self, X: ArrayLike, y: object = None) -> BoundedScaler:
        """Check the declared bounds against the number of features of ``X``.

        The values of ``X`` are only checked to be finite; nothing is learnt from them.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        BoundedScaler
            ``self``.
        """
        array = check_matrix(validate_data(self, X, ensure_all_finite=False, dtype=np.float64))
        n_features = int(array.shape[1])
        lower = _as_bound_vector(self.lower, "lower", n_features)
        upper = _as_bound_vector(self.upper, "upper", n_features)
        if not (lower < upper).all():
            raise InvalidParameterError("upper", "<bounds>", "must exceed lower in every feature")
        check_bounds_pair(self.feature_range, "feature_range")
        self.lower_ = lower
        self.upper_ = upper
        return self

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """Clip to the declared ranges and rescale.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Finite values.

        Returns
        -------
        numpy.ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        array = validate_data(self, X, reset=False, ensure_all_finite=False, dtype=np.float64)
        array = check_matrix(array)
        a, b = check_bounds_pair(self.feature_range, "feature_range")
        clipped = np.clip(array, self.lower_, self.upper_)
        out: NDArray[np.float64] = a + (b - a) * (clipped - self.lower_) / (
            self.upper_ - self.lower_
        )
        return out

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        return tags


def row_norm_bound(feature_range: tuple[float, float], n_features: int) -> float:
    """L2 norm bound of a row after :class:`BoundedScaler` (``max(|a|, |b|) sqrt(d)``).

    Examples
    --------
    >>> row_norm_bound((0.0, 1.0), 4)
    2.0
    """
    a, b = check_bounds_pair(feature_range, "feature_range")
    return max(abs(a), abs(b)) * math.sqrt(n_features)
