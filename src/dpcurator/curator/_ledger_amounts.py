"""Exact amounts of a ledger entry: what it charged, spent and left, as rationals.

The ledger stores each amount twice, as a float (``REAL``, for people and SQL tools) and as an
exact rational (``TEXT``, ``"numerator/denominator"``, from the filter's exact sums); the float
must be the rational rounded down or up, which :func:`brackets` checks when an entry is read.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpcurator._validation import ceil_float, floor_float
from dpcurator.accounting._budget import Budget
from dpcurator.accounting._filters import PrivacyFilter
from dpcurator.errors import InvalidParameterError, UnsupportedError

__all__ = ["brackets", "exact_amounts", "exact_text", "increase", "real"]


def real(value: object) -> float:
    """Return a stored REAL amount as a float; anything else is a malformed entry."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError("value", value, "must be a number")
    return float(value)


def exact_text(value: float | Fraction) -> str:
    """Return a number as an exact rational, ``"numerator/denominator"`` (``"inf"`` for inf)."""
    if isinstance(value, float) and math.isinf(value) and value > 0:
        return "inf"
    exact = Fraction(value)
    return f"{exact.numerator}/{exact.denominator}"


def brackets(value: float, text: str) -> bool:
    """Whether ``value`` is the exact ``text`` rounded to a float (down or up)."""
    if text == "inf":
        return math.isinf(value) and value > 0
    exact = Fraction(text)
    return floor_float(exact) <= value <= ceil_float(exact)


def exact_amounts(
    budget: Budget, before: PrivacyFilter, after: PrivacyFilter
) -> tuple[Fraction | float, ...] | None:
    """Charged, spent and remaining ``(epsilon, delta)`` as the filter's exact rationals.

    None for an unlimited budget (no exact spent amount exists there).
    """
    if not budget.is_finite:
        return None
    try:
        old, new = before.spent_exact, after.spent_exact
    except UnsupportedError:
        return None
    total = budget.exact
    return (
        max(new[0] - old[0], Fraction(0)),
        max(new[1] - old[1], Fraction(0)),
        new[0],
        new[1],
        max(total[0] - new[0], Fraction(0)),
        max(total[1] - new[1], Fraction(0)),
    )


def increase(after: float, before: float) -> float:
    """``after - before`` clamped at 0; ``inf`` once ``after`` is infinite."""
    if math.isinf(after):
        return math.inf
    return max(after - before, 0.0)
