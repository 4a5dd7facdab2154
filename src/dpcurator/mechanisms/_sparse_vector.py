"""The sparse vector technique: AboveThreshold (Dwork and Roth 2014, Algorithm 1).

Answers a stream of queries with "below" until the first query that is (noisily) above a
threshold, then halts: the whole interaction costs epsilon, however many queries were asked.
All noise is exact discrete Laplace on a public grid (sensitivity charged for the rounding).

Examples
--------
>>> from dpcurator.noise import InsecureSeededSource
>>> svt = AboveThreshold(100.0, epsilon=1.0, source=InsecureSeededSource(0))
>>> answers = [svt.test(q) for q in (3.0, 7.0, 1000.0)]
>>> answers[-1], svt.halted, svt.event
(True, True, PureDPEvent(epsilon=1.0))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import (
    check_epsilon,
    check_finite,
    check_integer,
    check_positive,
    check_probability,
)
from dpcurator.accounting import PureDPEvent
from dpcurator.errors import BudgetExceededError, InvalidParameterError
from dpcurator.mechanisms._common import (
    MAX_NOISE_UNITS,
    PRECISION_BITS,
    as_float_array,
    check_scale_range,
    l1_grid_sensitivity,
    scale_at_least,
)
from dpcurator.noise import RandomSource, discrete_laplace, grid_exponent, resolve_source, to_grid

__all__ = ["AboveThreshold"]


@dataclass(frozen=True, slots=True)
class _Parameters:
    """Everything AboveThreshold derives from its public parameters (grid units)."""

    epsilon: float
    bits: int
    threshold_units: int
    sensitivity_units: int
    rho_scale: float
    nu_scale: float


def _parameters(threshold: float, epsilon: float, sensitivity: float) -> _Parameters:
    t = check_finite(threshold, "threshold")
    eps = check_epsilon(epsilon)
    sens = check_positive(sensitivity, "sensitivity")
    check_scale_range(eps, sens)
    bits = grid_exponent(sens, PRECISION_BITS)
    units = l1_grid_sensitivity(sens, bits, 1)  # one query moves by < 1 unit more when rounded
    rho = scale_at_least(2 * units, eps)  # rho ~ Lap(2 Delta / eps)
    nu = scale_at_least(4 * units, eps)  # nu_i ~ Lap(4 Delta / eps)
    if nu > MAX_NOISE_UNITS:
        raise InvalidParameterError("epsilon", epsilon, "is too small (must be >= 2**-20)")
    threshold_units = int(np.asarray(to_grid(np.array([t]), bits), dtype=np.int64)[0])
    return _Parameters(eps, bits, threshold_units, units, rho, nu)


def _noisy_thresholds(params: _Parameters, size: int, source: RandomSource) -> NDArray[np.int64]:
    rho = np.asarray(discrete_laplace(params.rho_scale, size, source=source), dtype=np.int64)
    return params.threshold_units + rho


def _tests(
    params: _Parameters,
    query_units: NDArray[np.int64],
    noisy_thresholds: NDArray[np.int64],
    source: RandomSource,
) -> NDArray[np.bool_]:
    nu = np.asarray(
        discrete_laplace(params.nu_scale, int(query_units.size), source=source), dtype=np.int64
    )
    out: NDArray[np.bool_] = query_units + nu >= noisy_thresholds
    return out


def _query_units(params: _Parameters, query_value: float) -> int:
    value, _ = as_float_array(query_value, "query_value")
    if value.ndim != 0:
        raise InvalidParameterError(
            "query_value", f"<array of shape {value.shape}>", "must be a single number"
        )
    return int(np.asarray(to_grid(value.reshape(1), params.bits), dtype=np.int64)[0])


class AboveThreshold:
    r"""Report whether each query is above a threshold, halting after the first "above".

    Dwork and Roth 2014, Algorithm 1 (AboveThreshold), with discrete Laplace noise on the grid
    ``2**-k <= Delta 2**-16``: draw ``rho ~ DLap(2 Delta_k / epsilon)`` once and set
    ``T_hat = T + rho``; for each query ``f_i``, draw ``nu_i ~ DLap(4 Delta_k / epsilon)`` and
    answer True (and halt) if ``f_i(D) + nu_i >= T_hat``, else False. Here
    ``Delta_k = floor(Delta 2^k) + 1`` is the sensitivity of a rounded query in grid units.

    Guarantee (Dwork and Roth 2014, Theorem 3.23): the whole sequence of answers is
    epsilon-DP for queries that each have sensitivity ``Delta`` under the chosen neighbour
    relation, even when the queries are chosen adaptively. The proof shifts ``rho`` by
    ``Delta_k`` and the halting query's ``nu`` by ``2 Delta_k`` (costs ``epsilon/2`` each); both
    shifts are integers, so it holds verbatim for discrete Laplace noise. Accuracy (Theorem
    3.24): over ``k`` queries, with probability ``1 - beta`` every answer is correct up to
    ``alpha = 8 Delta (ln k + ln(2/beta)) / epsilon``.

    After the first True, further :meth:`test` calls raise
    :class:`~dpcurator.errors.BudgetExceededError`: another round needs a new instance (and
    another epsilon).

    Parameters
    ----------
    threshold : float
        The public threshold ``T``.
    epsilon : float
        > 0; the cost of the whole interaction.
    sensitivity : float, default 1.0
        ``Delta``, the sensitivity of every query.
    source : RandomSource, optional
        Randomness (secure by default).

    Attributes
    ----------
    event : PureDPEvent
        What the whole interaction costs (charge it once, when creating the instance).
    halted : bool
        Whether a query has been reported above the threshold.
    queries_answered : int
        Number of :meth:`test` calls answered.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> svt = AboveThreshold(50.0, epsilon=0.5, source=InsecureSeededSource(1))
    >>> svt.test(-1000.0), svt.queries_answered
    (False, 1)
    """

    def __init__(
        self,
        threshold: float,
        *,
        epsilon: float,
        sensitivity: float = 1.0,
        source: RandomSource | None = None,
    ) -> None:
        self._params = _parameters(threshold, epsilon, sensitivity)
        self._source = resolve_source(source)
        self._noisy_threshold = _noisy_thresholds(self._params, 1, self._source)
        self._halted = False
        self._answered = 0

    @property
    def event(self) -> PureDPEvent:
        """``PureDPEvent(epsilon)``: the cost of the whole interaction."""
        return PureDPEvent(epsilon=self._params.epsilon)

    @property
    def halted(self) -> bool:
        """True once a query was reported above the threshold."""
        return self._halted

    @property
    def queries_answered(self) -> int:
        """How many queries have been answered."""
        return self._answered

    def test(self, query_value: float) -> bool:
        """Answer whether ``query_value`` (a query evaluated on the data) is above the threshold.

        Parameters
        ----------
        query_value : float
            ``f_i(D)``, finite, with sensitivity at most the declared ``sensitivity``.

        Returns
        -------
        bool
            True at most once; the instance halts after it.

        Raises
        ------
        BudgetExceededError
            If the instance has already halted.
        """
        if self._halted:
            raise BudgetExceededError(
                "AboveThreshold halted after its first True answer and answers no more "
                "queries; create a new AboveThreshold (it costs another epsilon)."
            )
        units = np.array([_query_units(self._params, query_value)], dtype=np.int64)
        above = bool(_tests(self._params, units, self._noisy_threshold, self._source)[0])
        self._answered += 1
        if above:
            self._halted = True
        return above

    def accuracy_bound(self, queries: int, beta: float) -> float:
        """Return ``alpha`` such that all of ``queries`` answers are right with prob. ``1 - beta``.

        "Right" means: a True answer only for ``f_i(D) >= T - alpha``, and a False answer only
        for ``f_i(D) <= T + alpha`` (Dwork and Roth 2014, Theorem 3.24:
        ``alpha = 8 Delta (ln k + ln(2/beta)) / epsilon``), inflated for this implementation by
        a relative ``2**-15`` (grid sensitivity) plus the rounding of the queries and threshold
        (one grid unit).

        Parameters
        ----------
        queries : int
            ``k``, the number of queries, >= 1.
        beta : float
            Failure probability in (0, 1).

        Returns
        -------
        float

        Examples
        --------
        >>> svt = AboveThreshold(0.0, epsilon=1.0)
        >>> round(svt.accuracy_bound(10, 0.05), 1)  # 8 (ln 10 + ln 40)
        47.9
        """
        k = check_integer(queries, "queries", minimum=1)
        b = check_probability(beta, "beta", open_left=True, open_right=True)
        p = self._params
        delta = p.sensitivity_units * math.ldexp(1.0, -p.bits)
        ideal = 8.0 * delta * (math.log(k) + math.log(2.0 / b)) / p.epsilon
        return ideal + math.ldexp(1.0, -p.bits)

    def __repr__(self) -> str:
        return (
            f"AboveThreshold(epsilon={self._params.epsilon!r}, halted={self._halted}, "
            f"queries_answered={self._answered})"
        )


def _above_threshold_runs(
    threshold: float,
    queries: object,
    *,
    epsilon: float,
    sensitivity: float,
    size: int,
    source: RandomSource | None,
) -> NDArray[np.int64]:
    """``size`` independent runs of AboveThreshold on a fixed query sequence (vectorised).

    Returns, for each run, the index of the first True answer, or ``len(queries)`` when every
    answer was False. Uses the same parameters and noise calls as :class:`AboveThreshold`; the
    privacy audits rely on it.
    """
    params = _parameters(threshold, epsilon, sensitivity)
    n = check_integer(size, "size", minimum=0)
    values, _ = as_float_array(queries, "queries")
    flat = values.reshape(-1)
    units = np.asarray(to_grid(flat, params.bits), dtype=np.int64)
    src = resolve_source(source)
    noisy = _noisy_thresholds(params, n, src)
    first = np.full(n, flat.size, dtype=np.int64)
    active = np.arange(n)
    for i in range(flat.size):
        if active.size == 0:
            break
        above = _tests(params, np.full(active.size, units[i]), noisy[active], src)
        first[active[above]] = i
        active = active[~above]
    return first
