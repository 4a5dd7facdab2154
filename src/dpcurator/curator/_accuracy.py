"""Accuracy before epsilon: predicted errors of a plan, and the epsilon a target accuracy needs.

The noise of counts and sums does not depend on the data: a plan fixes every measurement's
noise scale, so the half-width of a count's or a sum's interval is known before anything is
read. :func:`predicted_errors` computes it with the same post-processing as a release (a sum
derived from a centred sum and a count included), from the noise's exact error model, with no
noise drawn. :func:`epsilon_for` searches the smallest epsilon whose predicted errors meet a
target: the released intervals of those aggregates are then at most the target, whatever the
data, and they cover the bounded query's value at their stated rate.

Averages, variances and quantiles are ratios or choices whose error depends on the data (the
noisy count divides the sum), so a target cannot be promised for them before reading; they are
refused for a target and shown without a prediction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dpcurator.curator._aggregates import (
    Count,
    CountColumn,
    CountUnits,
    Histogram,
    Sum,
    release,
)
from dpcurator.curator._estimates import HalfWidths, Measured, Noisy
from dpcurator.curator._measures import QuantileCounts
from dpcurator.curator._plan import MAX_EPSILON, MIN_EPSILON, Measurement, Plan
from dpcurator.errors import InvalidParameterError, QueryError
from dpcurator.mechanisms import ErrorModel, geometric_event

__all__ = [
    "Predicted",
    "Target",
    "epsilon_for",
    "measurement_noise",
    "predicted_errors",
    "unpredictable",
]

_PREDICTABLE = (Count, CountColumn, CountUnits, Histogram, Sum)
_SEARCH_STEPS = 60


@dataclass(frozen=True)
class Predicted:
    """The predicted error of one released aggregate (the same in every group).

    Attributes
    ----------
    alias : str
        The aggregate's output column.
    std : float
        The standard deviation of its noise.
    half_width : float
        Half the width of its interval at the session's confidence level.
    """

    alias: str
    std: float
    half_width: float


@dataclass(frozen=True)
class Target:
    """An accuracy to reach: at most ``value`` for the interval's half-width, or for the std."""

    value: float
    kind: Literal["ci", "std"]

    def __post_init__(self) -> None:
        if not (isinstance(self.value, int | float) and math.isfinite(self.value)) or not (
            self.value > 0
        ):
            raise InvalidParameterError(
                f"target_{self.kind}", self.value, "must be a positive finite number"
            )

    def met_by(self, errors: list[Predicted]) -> bool:
        """Whether every predicted error is within the target."""
        return all((p.half_width if self.kind == "ci" else p.std) <= self.value for p in errors)


def predicted_errors(plan: Plan, confidence: float) -> list[Predicted]:
    """Return the predicted errors of the plan's counts and sums (nothing read, nothing drawn).

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.accounting import Budget
    >>> from dpcurator.curator import Column, Session, Table
    >>> t = Table("t", pd.DataFrame({"x": [1.0]}), columns=[Column("x", lower=0, upper=10)])
    >>> with Session(t, Budget(1.0), ledger=":memory:") as s:
    ...     [p.half_width for p in predicted_errors(s.plan("SELECT COUNT(*) FROM t",
    ...                                                     epsilon=0.5), 0.95)]
    [6.0]
    """
    measured = Measured(plan.query.table, {v.column: v for v in plan.values}, confidence)
    for m in plan.measurements:
        error = measurement_noise(m)
        if error is None:
            continue
        half = HalfWidths(error, measured.levels)
        measured.noisy[m.measure] = Noisy(np.zeros(1, np.int64), m.unit_value, error.std, half)
    out = []
    for aggregate in plan.query.aggregates:
        if isinstance(aggregate, _PREDICTABLE):
            released = release(aggregate, measured)
            width = float(released.high[0] - released.value[0])
            out.append(Predicted(aggregate.alias, float(released.std[0]), width))
    return out


def measurement_noise(m: Measurement) -> ErrorModel | None:
    """Return the error model of a measurement's noise in grid units (None: a quantile's choice).

    The geometric mechanism's or the discrete Gaussian's exact model, at the scale it draws
    with (:func:`geometric_event`); multiply by ``m.unit_value`` for the column's units.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.accounting import Budget
    >>> from dpcurator.curator import Column, Session, Table
    >>> t = Table("t", pd.DataFrame({"x": [1.0]}), columns=[Column("x", lower=0, upper=10)])
    >>> with Session(t, Budget(1.0), ledger=":memory:") as s:
    ...     (m,) = s.plan("SELECT COUNT(*) FROM t", epsilon=1.0).measurements
    >>> round(measurement_noise(m).std, 4)
    1.357
    """
    if isinstance(m.measure, QuantileCounts):
        return None
    if m.gaussian is not None:
        return ErrorModel("discrete_gaussian", noise_scale=m.gaussian.sigma, center=np.zeros(1))
    scale = geometric_event(epsilon=m.epsilon, sensitivity=m.units).scale  # as drawn
    return ErrorModel("discrete_laplace", noise_scale=scale, center=np.zeros(1))


def unpredictable(plan: Plan) -> list[str]:
    """Return the aggregates whose error depends on the data (no target can be promised)."""
    return [a.text for a in plan.query.aggregates if not isinstance(a, _PREDICTABLE)]


def epsilon_for(plan_at: Callable[[float], Plan], target: Target, confidence: float) -> float:
    """Return the smallest epsilon (3 significant digits, rounded up) whose errors meet ``target``.

    ``plan_at(epsilon)`` plans the query at ``epsilon`` (nothing read, nothing spent).

    Raises
    ------
    QueryError
        When the query has aggregates whose error depends on the data (AVG, VARIANCE,
        quantiles), or the target cannot be met within the largest epsilon a query may have.
    """
    first = plan_at(1.0)
    refused = unpredictable(first)
    if refused:
        raise QueryError(
            f"A target accuracy cannot be promised for {', '.join(refused)}: its error depends on "
            "the data (a noisy count divides it). Ask for counts and sums with a target, or give "
            "an epsilon."
        )
    if not predicted_errors(first, confidence):
        raise QueryError("The query has no count or sum to aim a target at.")

    def meets(epsilon: float) -> bool:
        try:
            plan = plan_at(epsilon)
        except InvalidParameterError:  # an epsilon too small for the noise's range
            return False
        return target.met_by(predicted_errors(plan, confidence))

    if not meets(MAX_EPSILON):
        raise QueryError(
            f"No epsilon up to {MAX_EPSILON:g} (the largest a query may have) gives errors "
            f"within {target.value:g}. Ask for a wider target."
        )
    low, high = MIN_EPSILON, MAX_EPSILON  # meets(high); the smallest that meets is in (low, high]
    for _ in range(_SEARCH_STEPS):
        if high / low < 1.0005:
            break
        middle = math.sqrt(low * high)
        if meets(middle):
            high = middle
        else:
            low = middle
    rounded = _round_up(high)
    return rounded if meets(rounded) else high


def _round_up(x: float) -> float:
    """``x`` rounded up to 3 significant digits."""
    digits = 2 - math.floor(math.log10(x))
    factor = 10.0**digits
    return min(math.ceil(x * factor - 1e-9) / factor, MAX_EPSILON)
