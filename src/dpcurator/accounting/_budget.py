"""The privacy budget: a frozen (epsilon, delta) value object."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpcurator._validation import check_delta, check_epsilon
from dpcurator.errors import InvalidParameterError

__all__ = ["Budget"]


@dataclass(frozen=True, slots=True)
class Budget:
    r"""A total privacy budget, or what is left of one: (epsilon, delta)-DP.

    A mechanism M is (epsilon, delta)-DP if for all neighbouring D, D' and all sets of outputs S,

    .. math:: \Pr[M(D) \in S] \le e^{\epsilon} \Pr[M(D') \in S] + \delta

    (lecture 002). ``epsilon = math.inf`` means "no finite guarantee": :meth:`unlimited` builds a
    budget that never refuses, and accountants report an infinite epsilon when no finite one holds
    at the requested delta.

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
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        eps = self.epsilon
        if not (isinstance(eps, float | int) and not isinstance(eps, bool) and eps == math.inf):
            eps = check_epsilon(eps, allow_zero=True)
        object.__setattr__(self, "epsilon", float(eps))
        object.__setattr__(self, "delta", check_delta(self.delta))

    @classmethod
    def unlimited(cls) -> Budget:
        """Return a budget that never refuses (for trusted, offline simulation only)."""
        return cls(math.inf, 0.0)

    def __add__(self, other: Budget) -> Budget:
        if not isinstance(other, Budget):
            return NotImplemented
        return Budget(self.epsilon + other.epsilon, min(self.delta + other.delta, 1 - 1e-16))

    def __sub__(self, other: Budget) -> Budget:
        if not isinstance(other, Budget):
            return NotImplemented
        if other.epsilon == math.inf:
            if self.epsilon == math.inf:
                return Budget(math.inf, max(self.delta - other.delta, 0.0))
            raise InvalidParameterError(
                "other", other, f"must not exceed {self} (a budget cannot go negative)"
            )
        eps = self.epsilon - other.epsilon
        delta = self.delta - other.delta
        if eps < -1e-12 or delta < -1e-18:
            raise InvalidParameterError(
                "other", other, f"must not exceed {self} (a budget cannot go negative)"
            )
        return Budget(max(eps, 0.0), max(delta, 0.0))

    def __str__(self) -> str:
        return f"Budget(epsilon={self.epsilon:.6g}, delta={self.delta:.3g})"

    def covers(self, other: Budget) -> bool:
        """Whether ``other`` fits in this budget (both epsilon and delta)."""
        return other.epsilon <= self.epsilon and other.delta <= self.delta
