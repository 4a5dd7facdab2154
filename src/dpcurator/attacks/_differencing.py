r"""Differencing and averaging attacks on aggregate-query interfaces.

- **Differencing** (lecture 004, "differencing attack and side information"; lecture 001,
  "average salary before/after resignation"): ``q(everyone with a property) - q(everyone with it
  except the target)`` is the target's own value. It defeats query-size restrictions ("no counts
  below k"), since both queries are large.
- **Averaging** (lecture 004, composition): an interface that adds fresh noise to each answer of
  the same query lets ``k`` repeats average the noise away; with Laplace noise of scale ``b`` the
  mean has standard deviation ``sqrt(2) b / sqrt(k)``, so about ``2 b^2 z^2 / w^2`` repeats pin the
  value to ``+- w`` (:func:`repeats_to_pin`). Against a differentially private interface every
  repeat is charged to the budget, and the budget refuses the rest (research note C.2).

The attacks take an ``ask`` callable, ``ask(query) -> number``, and opaque queries: an
:class:`AggregateInterface` method here, a curator session's SQL tomorrow. An ``ask`` that raises
:class:`~dpcurator.errors.BudgetExceededError` (or another error in ``stop_on``) stops the attack,
which reports what it got before the refusal.

Examples
--------
Bo's salary from two large sums, though no query may select fewer than 2 people:

>>> import pandas as pd
>>> staff = pd.DataFrame({"name": ["Ann", "Bo", "Cy", "Di", "Ed", "Flo"],
...                       "dept": ["R&D", "R&D", "R&D", "R&D", "Ops", "Ops"],
...                       "salary": [50., 60., 70., 80., 40., 45.]})
>>> interface = AggregateInterface(staff, min_query_size=2)
>>> rnd = staff["dept"] == "R&D"
>>> result = differencing_attack(lambda where: interface.sum("salary", where),
...                              rnd, rnd & (staff["name"] != "Bo"))
>>> result.estimate
60.0
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from dpcurator._validation import check_integer, check_positive, check_probability
from dpcurator.accounting import LaplaceEvent, PrivacyFilter
from dpcurator.errors import BudgetExceededError, InvalidParameterError, QueryError
from dpcurator.mechanisms import laplace_mechanism
from dpcurator.noise import RandomSource, resolve_source

__all__ = [
    "AggregateInterface",
    "AveragingResult",
    "DifferencingResult",
    "QueryRefusedError",
    "averaging_attack",
    "differencing_attack",
    "repeats_to_pin",
]

Ask = Callable[[Any], float]
"""An interface: ``ask(query) -> number`` for whatever queries it understands."""


class QueryRefusedError(QueryError):
    """An :class:`AggregateInterface` refused a query (a query-size restriction)."""


class AggregateInterface:
    """A naive aggregate-query interface over a table: the kind of system these attacks break.

    Answers counts and sums over the rows selected by a predicate, with optional defences that
    do not compose: a query-size restriction (refuse a query that selects fewer than
    ``min_query_size`` rows or all but fewer than that, Denning's classic rule) and fresh
    Laplace noise of scale ``noise_scale`` on every answer. With a ``budget`` (a
    :class:`~dpcurator.accounting.PrivacyFilter`), each noisy answer is charged as a
    ``sensitivity / noise_scale``-DP release *before* it is computed, and refused (with
    :class:`~dpcurator.errors.BudgetExceededError`) once the budget is spent: a minimal
    differentially private interface, for comparison.

    Parameters
    ----------
    frame : pandas.DataFrame
        The table (one row per person).
    min_query_size : int, default 0
    noise_scale : float, default 0.0
        Laplace scale ``b`` of each answer (0: exact answers).
    budget : PrivacyFilter, optional
        Requires ``noise_scale > 0``.
    source : RandomSource, optional
        Randomness of the noise (secure by default).

    Attributes
    ----------
    queries_answered : int

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"age": [30, 41, 52, 63], "smoker": [1, 0, 1, 1]})
    >>> AggregateInterface(frame).count(frame["age"] > 40)
    3.0
    >>> AggregateInterface(frame, min_query_size=2).count(lambda f: f["age"] > 60)
    Traceback (most recent call last):
    ...
    dpcurator.attacks._differencing.QueryRefusedError: Refused: the query selects 1 rows; \
queries must select between 2 and 2 rows.
    """

    def __init__(
        self,
        frame: Any,
        *,
        min_query_size: int = 0,
        noise_scale: float = 0.0,
        budget: PrivacyFilter | None = None,
        source: RandomSource | None = None,
    ) -> None:
        if not hasattr(frame, "columns") or not hasattr(frame, "__len__"):
            raise InvalidParameterError("frame", type(frame).__name__, "must be a DataFrame")
        self._frame = frame
        self._min = check_integer(min_query_size, "min_query_size", minimum=0)
        self._scale = check_positive(noise_scale, "noise_scale", allow_zero=True)
        if budget is not None and not isinstance(budget, PrivacyFilter):
            raise InvalidParameterError("budget", budget, "must be a PrivacyFilter")
        if budget is not None and self._scale == 0.0:
            raise InvalidParameterError(
                "noise_scale", noise_scale, "must be > 0 when a budget is given"
            )
        self._budget = budget
        self._source = resolve_source(source)
        self.queries_answered = 0

    def _mask(self, where: Any) -> NDArray[np.bool_]:
        n = len(self._frame)
        if callable(where):
            where = where(self._frame)
        elif isinstance(where, str):
            where = self._frame.eval(where)
        mask = np.asarray(where)
        if mask.dtype != np.bool_ or mask.shape != (n,):
            raise InvalidParameterError(
                "where",
                f"<{mask.dtype} array of shape {mask.shape}>",
                f"must select rows: a boolean mask of length {n}, a callable or an expression",
            )
        selected = int(mask.sum())
        if self._min and not self._min <= selected <= n - self._min:
            raise QueryRefusedError(
                f"Refused: the query selects {selected} rows; queries must select between "
                f"{self._min} and {n - self._min} rows."
            )
        return mask

    def _answer(self, exact: float, sensitivity: float) -> float:
        if self._scale == 0.0:
            self.queries_answered += 1
            return exact
        epsilon = sensitivity / self._scale
        if self._budget is not None:
            # Exactly sensitivity / scale (a PureDPEvent of the float ratio would round it).
            self._budget.spend(LaplaceEvent(scale=self._scale, sensitivity=sensitivity))
        release = laplace_mechanism(
            exact, epsilon=epsilon, sensitivity=sensitivity, source=self._source
        )
        self.queries_answered += 1
        return float(release.value)

    def count(self, where: Any) -> float:
        """Count the rows selected by ``where`` (mask, ``callable(frame)`` or expression).

        Sensitivity 1 (add/remove one row).
        """
        return self._answer(float(self._mask(where).sum()), 1.0)

    def sum(self, column: str, where: Any, *, bounds: tuple[float, float] | None = None) -> float:
        """Sum ``column`` over the rows selected by ``where``.

        With ``bounds=(lo, hi)`` the values are clamped first and the sensitivity is
        ``max(|lo|, |hi|)``; noisy answers need bounds (otherwise the sensitivity is unbounded).
        """
        if column not in self._frame.columns:
            raise InvalidParameterError("column", column, "must be a column of the table")
        values = np.asarray(self._frame[column], dtype=np.float64)[self._mask(where)]
        if bounds is None:
            if self._scale > 0:
                raise InvalidParameterError(
                    "bounds", bounds, "must be given for a noisy sum (clamping bounds the change)"
                )
            return self._answer(float(values.sum()), 1.0)
        lo, hi = float(bounds[0]), float(bounds[1])
        if not lo <= hi:
            raise InvalidParameterError("bounds", bounds, "must satisfy lo <= hi")
        sensitivity = max(abs(lo), abs(hi)) or 1.0
        return self._answer(float(np.clip(values, lo, hi).sum()), sensitivity)


@dataclass(frozen=True)
class DifferencingResult:
    """The target's value as the difference of two aggregates (averaged over the repeats).

    Attributes
    ----------
    estimate : float
        Mean of ``answer(with target) - answer(without target)`` (``nan`` when nothing was
        answered).
    differences : tuple of float
        Each repeat's difference.
    refused : bool
        The interface refused before all repeats were answered.
    refusal : str or None
        Its message.
    """

    estimate: float
    differences: tuple[float, ...]
    refused: bool
    refusal: str | None

    @property
    def repeats(self) -> int:
        """Differences obtained."""
        return len(self.differences)

    @property
    def std_error(self) -> float:
        """Standard error of ``estimate`` from the spread of the differences (nan below 2)."""
        if self.repeats < 2:
            return math.nan
        return statistics.stdev(self.differences) / math.sqrt(self.repeats)


@dataclass(frozen=True)
class AveragingResult:
    """The mean of repeated answers to one query.

    Attributes
    ----------
    estimate : float
        Mean of the answers (``nan`` when none).
    answers : tuple of float
    refused : bool
        The interface refused before all repeats were answered.
    refusal : str or None
    """

    estimate: float
    answers: tuple[float, ...]
    refused: bool
    refusal: str | None

    @property
    def repeats(self) -> int:
        """Answers obtained."""
        return len(self.answers)

    @property
    def std_error(self) -> float:
        """Standard error of ``estimate`` from the spread of the answers (nan below 2)."""
        if self.repeats < 2:
            return math.nan
        return statistics.stdev(self.answers) / math.sqrt(self.repeats)


_STOP: tuple[type[BaseException], ...] = (BudgetExceededError,)


def _check_stop(stop_on: Sequence[type[BaseException]]) -> tuple[type[BaseException], ...]:
    stops = tuple(stop_on)
    if not all(isinstance(s, type) and issubclass(s, BaseException) for s in stops):
        raise InvalidParameterError("stop_on", stop_on, "must be exception classes")
    return stops


def differencing_attack(
    ask: Ask,
    with_target: Any,
    without_target: Any,
    *,
    repeats: int = 1,
    stop_on: Sequence[type[BaseException]] = _STOP,
) -> DifferencingResult:
    """Estimate one person's value as ``ask(with_target) - ask(without_target)``.

    The two queries select the same rows but the target (e.g. "all employees" and "all
    employees but Bob"). Exact answers give the target's value exactly, whatever size
    restriction applies to each query. With noisy answers the pair is asked ``repeats`` times
    and the differences averaged; an interface that raises one of ``stop_on`` (by default
    :class:`~dpcurator.errors.BudgetExceededError`: a differentially private interface whose
    budget is spent) ends the attack with what it had.

    Parameters
    ----------
    ask : callable
        ``ask(query) -> number``.
    with_target, without_target : object
        The two queries, in whatever form ``ask`` understands.
    repeats : int, default 1
    stop_on : sequence of exception classes

    Returns
    -------
    DifferencingResult

    Examples
    --------
    >>> answers = {"all": 10.0, "all but Bob": 9.0}
    >>> differencing_attack(answers.__getitem__, "all", "all but Bob").estimate
    1.0
    """
    if not callable(ask):
        raise InvalidParameterError("ask", ask, "must be callable")
    k = check_integer(repeats, "repeats", minimum=1)
    stops = _check_stop(stop_on)
    differences: list[float] = []
    refusal: str | None = None
    for _ in range(k):
        try:
            a = float(ask(with_target))
            b = float(ask(without_target))
        except stops as exc:
            refusal = str(exc)
            break
        differences.append(a - b)
    estimate = statistics.fmean(differences) if differences else math.nan
    return DifferencingResult(estimate, tuple(differences), refusal is not None, refusal)


def averaging_attack(
    ask: Ask,
    query: Any,
    *,
    repeats: int,
    stop_on: Sequence[type[BaseException]] = _STOP,
) -> AveragingResult:
    """Ask the same query ``repeats`` times and average the answers.

    Fresh, unaccounted noise on each answer averages away (the mean's standard deviation falls
    as ``1/sqrt(k)``). A differentially private interface charges every repeat: basic
    composition makes ``k`` answers ``k epsilon``-DP, and the budget refuses once spent (the
    refusal ends the attack; ``stop_on``).

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.noise import InsecureSeededSource
    >>> frame = pd.DataFrame({"hiv": [1, 0, 0, 1, 1]})
    >>> noisy = AggregateInterface(frame, noise_scale=2.0, source=InsecureSeededSource(0))
    >>> result = averaging_attack(lambda q: noisy.count(q), frame["hiv"] == 1, repeats=2000)
    >>> abs(result.estimate - 3) < 4 * result.std_error < 0.5
    True
    """
    if not callable(ask):
        raise InvalidParameterError("ask", ask, "must be callable")
    k = check_integer(repeats, "repeats", minimum=1)
    stops = _check_stop(stop_on)
    answers: list[float] = []
    refusal: str | None = None
    for _ in range(k):
        try:
            answers.append(float(ask(query)))
        except stops as exc:
            refusal = str(exc)
            break
    estimate = statistics.fmean(answers) if answers else math.nan
    return AveragingResult(estimate, tuple(answers), refusal is not None, refusal)


def repeats_to_pin(noise_scale: float, half_width: float, *, confidence: float = 0.95) -> int:
    r"""Repeats of a Laplace-noised answer after which the mean is within ``w`` of the truth.

    The mean of ``k`` answers with independent ``Lap(b)`` noise has variance ``2 b^2 / k``;
    by the normal approximation the interval ``+- w`` has the requested coverage once
    ``k >= 2 b^2 z^2 / w^2`` with ``z`` the two-sided normal quantile (research note C.2).

    Examples
    --------
    >>> repeats_to_pin(10.0, 1.0)  # a count with Laplace(10) noise, pinned to +-1
    769
    """
    b = check_positive(noise_scale, "noise_scale")
    w = check_positive(half_width, "half_width")
    level = check_probability(confidence, "confidence", open_left=True, open_right=True)
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    return max(1, math.ceil(2.0 * b * b * z * z / (w * w)))
