"""The privacy budget: a frozen (epsilon, delta) value object with exact arithmetic."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpcurator._validation import (
    ceil_float,
    check_delta,
    check_epsilon,
    exact_rational,
    floor_float,
)
from dpcurator.errors import InvalidParameterError

__all__ = ["Budget"]

# The largest float below 1: where a sum of deltas that reaches 1 is kept (a vacuous guarantee).
_BELOW_ONE = math.nextafter(1.0, 0.0)


def _at_most(value: object, converted: float) -> float:
    """Return ``converted`` (the float ``value`` rounds to), moved down if it rounded up.

    Floats are taken as they are; an exact rational (a Fraction, a large int ...) becomes the
    largest float that does not exceed it, so that a budget never allows more than was given.
    """
    if isinstance(value, float):
        return converted
    exact = exact_rational(value)
    return converted if exact is None else floor_float(exact)


@dataclass(frozen=True, slots=True)
class Budget:
    r"""A total privacy budget, or what is left of one: (epsilon, delta)-DP.

    A mechanism M is (epsilon, delta)-DP if for all neighbouring D, D' and all sets of outputs S,

    .. math:: \Pr[M(D) \in S] \le e^{\epsilon} \Pr[M(D') \in S] + \delta

    (lecture 002). ``epsilon = math.inf`` means "no finite guarantee": :meth:`unlimited` builds a
    budget that never refuses, and accountants report an infinite epsilon when no finite one holds
    at the requested delta. :attr:`is_finite` tells the two kinds apart, so that code that must
    hold a real budget (a ledger, a declaration) can refuse an infinite one.

    The fields are floats, and a budget's exact value is those floats (each float is an exact
    dyadic rational; :attr:`exact` returns them as Fractions). Arithmetic is exact: ``a + b``
    adds the exact values and rounds the sum *up* to a float, ``a - b`` subtracts them and
    rounds the difference *down*, refusing any difference below 0, even by one ulp. A value
    given as an exact rational that is not a float (a Fraction, a large int) is rounded down.

    Parameters
    ----------
    epsilon : float
        Natural-log units, > 0 (or 0 for a budget that allows nothing).
    delta : float, default 0
        A probability in [0, 1).

    Examples
    --------
    >>> Budget(1.0, 1e-6)
    Budget(epsilon=1.0, delta=1e-06)
    >>> Budget(1.0) - Budget(0.25)
    Budget(epsilon=0.75, delta=0.0)
    >>> Budget(1.0) - Budget(0.1)  # 1 - 0.1000000000000000055..., rounded down
    Budget(epsilon=0.8999999999999999, delta=0.0)
    >>> Budget(0.5).exact
    (Fraction(1, 2), Fraction(0, 1))
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        eps = self.epsilon
        if isinstance(eps, float | int) and not isinstance(eps, bool) and eps == math.inf:
            eps_out = math.inf
        else:
            eps_out = _at_most(eps, check_epsilon(eps, allow_zero=True))
        object.__setattr__(self, "epsilon", float(eps_out))
        object.__setattr__(self, "delta", _at_most(self.delta, check_delta(self.delta)))

    @classmethod
    def unlimited(cls) -> Budget:
        """Return a budget that never refuses (for trusted, offline simulation only)."""
        return cls(math.inf, 0.0)

    @property
    def is_finite(self) -> bool:
        """Whether epsilon is finite (False for :meth:`unlimited` and "no finite guarantee").

        >>> Budget(1.0).is_finite, Budget.unlimited().is_finite
        (True, False)
        """
        return math.isfinite(self.epsilon)

    @property
    def exact(self) -> tuple[Fraction, Fraction]:
        """``(epsilon, delta)`` as exact Fractions (the floats' exact values).

        Raises
        ------
        InvalidParameterError
            If epsilon is infinite (see :attr:`is_finite`): it has no exact rational value.
        """
        if not self.is_finite:
            raise InvalidParameterError(
                "budget", self, "must be finite to have an exact value (check is_finite first)"
            )
        return Fraction(self.epsilon), Fraction(self.delta)

    def __add__(self, other: Budget) -> Budget:
        if not isinstance(other, Budget):
            return NotImplemented
        if self.is_finite and other.is_finite:
            eps = ceil_float(Fraction(self.epsilon) + Fraction(other.epsilon))
        else:
            eps = math.inf
        delta = ceil_float(Fraction(self.delta) + Fraction(other.delta))
        return Budget(eps, min(delta, _BELOW_ONE))

    def __sub__(self, other: Budget) -> Budget:
        if not isinstance(other, Budget):
            return NotImplemented
        delta = Fraction(self.delta) - Fraction(other.delta)
        if not other.is_finite:
            overdraft = self.is_finite
            eps = math.inf
        elif not self.is_finite:
            overdraft, eps = False, math.inf
        else:
            exact_eps = Fraction(self.epsilon) - Fraction(other.epsilon)
            overdraft = exact_eps < 0
            eps = floor_float(exact_eps) if not overdraft else 0.0
        if overdraft or delta < 0:
            raise InvalidParameterError(
                "other", other, f"must not exceed {self} (a budget cannot go negative)"
            )
        return Budget(eps, floor_float(delta))

    def __str__(self) -> str:
        return f"Budget(epsilon={self.epsilon:.6g}, delta={self.delta:.3g})"

    def covers(self, other: Budget) -> bool:
        """Whether ``other`` fits in this budget (both epsilon and delta), compared exactly."""
        return other.epsilon <= self.epsilon and other.delta <= self.delta
