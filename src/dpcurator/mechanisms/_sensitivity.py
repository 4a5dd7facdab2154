"""Sensitivities of common statistics, each for a named neighbour relation.

The sensitivity of ``f`` is ``sup ||f(D) - f(D')||`` over neighbouring datasets (lecture 000,
L1 sensitivity; lecture 002, L2 sensitivity). Which datasets are neighbours is a choice that
must be stated: one privacy unit added or removed (:attr:`NeighbourRelation.ADD_REMOVE`), or one
unit's data replaced (:attr:`NeighbourRelation.REPLACE`). ``contributions`` is the number of rows
one privacy unit may contribute after contribution bounding (1 when a unit is a row).

Examples
--------
>>> from dpcurator.accounting import NeighbourRelation
>>> count_sensitivity()
1
>>> sum_sensitivity(3.0, 5.0)  # lecture 003: values in [3, 5], add/remove: 5
5.0
>>> sum_sensitivity(3.0, 5.0, relation=NeighbourRelation.REPLACE)
2.0
>>> mean_sensitivity(1.0, 100)  # lecture 002: 2c/n under replace-one
0.02
"""

from __future__ import annotations

import math

from dpcurator._validation import check_finite, check_integer, check_positive
from dpcurator.accounting import NeighbourRelation
from dpcurator.errors import InvalidParameterError, UnsupportedError

__all__ = [
    "count_sensitivity",
    "histogram_sensitivity",
    "mean_sensitivity",
    "sum_sensitivity",
]


def _relation(value: object) -> NeighbourRelation:
    if isinstance(value, NeighbourRelation):
        return value
    if isinstance(value, str):
        try:
            return NeighbourRelation(value)
        except ValueError:
            pass
    raise InvalidParameterError(
        "relation", value, "must be NeighbourRelation.ADD_REMOVE or NeighbourRelation.REPLACE"
    )


def count_sensitivity(
    *,
    relation: NeighbourRelation | str = NeighbourRelation.ADD_REMOVE,
    contributions: int = 1,
) -> int:
    """Sensitivity of a count of rows (matching a predicate): ``contributions``.

    Adding or removing a unit changes the count by at most its number of rows; replacing a
    unit's rows changes it by at most as much (each row may stop or start matching). Lecture 003
    (count query, sensitivity 1).

    Parameters
    ----------
    relation : NeighbourRelation or str, default ADD_REMOVE
        The neighbour relation (the answer is the same for both).
    contributions : int, default 1
        Rows per privacy unit, >= 1.

    Returns
    -------
    int

    Examples
    --------
    >>> count_sensitivity(contributions=3)
    3
    """
    _relation(relation)
    return check_integer(contributions, "contributions", minimum=1)


def sum_sensitivity(
    lower: float,
    upper: float,
    *,
    relation: NeighbourRelation | str = NeighbourRelation.ADD_REMOVE,
    contributions: int = 1,
) -> float:
    """Sensitivity of a sum of values clamped to ``[lower, upper]``.

    Add/remove: ``contributions * max(|lower|, |upper|)`` (the added or removed rows);
    replace: ``contributions * (upper - lower)`` (each row moves within the interval).
    Lecture 003 (SUM query, values in ``[a, b]`` with ``a, b >= 0``: sensitivity ``b``).

    Parameters
    ----------
    lower, upper : float
        Finite clamping bounds, ``lower <= upper``.
    relation : NeighbourRelation or str, default ADD_REMOVE
    contributions : int, default 1

    Returns
    -------
    float

    Examples
    --------
    >>> sum_sensitivity(-2.0, 1.0)
    2.0
    """
    lo = check_finite(lower, "lower")
    hi = check_finite(upper, "upper")
    if hi < lo:
        raise InvalidParameterError("upper", upper, f"must be >= lower = {lo}")
    k = check_integer(contributions, "contributions", minimum=1)
    if _relation(relation) is NeighbourRelation.ADD_REMOVE:
        return k * max(abs(lo), abs(hi))
    return k * (hi - lo)


def mean_sensitivity(
    radius: float,
    n: int,
    *,
    relation: NeighbourRelation | str = NeighbourRelation.REPLACE,
) -> float:
    """L2 sensitivity ``2c/n`` of the mean of ``n`` vectors with ``||x_i||_2 <= c`` (replace-one).

    Replacing ``x_i`` by ``x_i'`` moves the mean by ``||x_i - x_i'||_2 / n <= 2c / n``
    (lecture 002, mean estimation). ``n`` must be public, which holds under replace-one only.

    Parameters
    ----------
    radius : float
        ``c``, the public bound on each record's L2 norm (after clipping), > 0.
    n : int
        The public number of records, >= 1.
    relation : NeighbourRelation or str, default REPLACE
        Must be ``REPLACE``.

    Returns
    -------
    float

    Raises
    ------
    UnsupportedError
        Under add/remove, where ``n`` itself is private: release a noisy sum and a noisy count
        (:func:`sum_sensitivity`, :func:`count_sensitivity`) and divide.

    Examples
    --------
    >>> mean_sensitivity(2.0, 1000)
    0.004
    """
    c = check_positive(radius, "radius")
    count = check_integer(n, "n", minimum=1)
    if _relation(relation) is not NeighbourRelation.REPLACE:
        raise UnsupportedError(
            "the mean has no fixed sensitivity under add/remove neighbours (n is private); "
            "release a noisy sum and a noisy count and divide, or use relation=REPLACE."
        )
    return 2.0 * c / count


def histogram_sensitivity(
    *,
    relation: NeighbourRelation | str = NeighbourRelation.ADD_REMOVE,
    norm: str = "l1",
    contributions: int = 1,
) -> float:
    """Sensitivity of a histogram (counts over disjoint bins).

    Add/remove: the unit's ``k`` rows add or leave counts, ``L1 = k``, ``L2 <= k``
    (all in one bin). Replace: each row may move from one bin to another, ``L1 = 2k``,
    ``L2 <= k sqrt(2)``. Lecture 004 (counts over disjoint buckets have L1 sensitivity 1).

    Parameters
    ----------
    relation : NeighbourRelation or str, default ADD_REMOVE
    norm : {"l1", "l2"}, default "l1"
    contributions : int, default 1

    Returns
    -------
    float

    Examples
    --------
    >>> from dpcurator.accounting import NeighbourRelation
    >>> histogram_sensitivity(relation=NeighbourRelation.REPLACE)
    2.0
    >>> round(histogram_sensitivity(relation="replace", norm="l2"), 6)
    1.414214
    """
    k = check_integer(contributions, "contributions", minimum=1)
    if norm not in ("l1", "l2"):
        raise InvalidParameterError("norm", norm, "must be 'l1' or 'l2'")
    if _relation(relation) is NeighbourRelation.ADD_REMOVE:
        return float(k)
    return 2.0 * k if norm == "l1" else k * math.sqrt(2.0)
