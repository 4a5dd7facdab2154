r"""Generalised (k-ary) randomized response, and the arithmetic every pure protocol shares.

A *pure* frequency protocol (Wang, Blocki, Li and Jha, "Locally Differentially Private Protocols
for Frequency Estimation", USENIX Security 2017, Section 3, Definition 2 and Theorem 2) is one
where each report ``y`` *supports* a set of values, with

.. math:: p = P[y \text{ supports } v \mid v], \qquad q = P[y \text{ supports } v \mid v' \ne v].

Counting the reports that support ``v`` (``C_v``) gives the unbiased estimator
``c_v = (C_v - n q) / (p - q)``, whose variance, for fixed data and randomness from the
mechanism only, is exactly

.. math:: \mathrm{Var}[c_v] = \frac{n q (1 - q)}{(p - q)^2} + \frac{n_v (1 - p - q)}{p - q}

(``C_v`` is a sum of ``n_v`` Bernoulli(p) and ``n - n_v`` Bernoulli(q) independent bits); the
first term alone is ``Var*``. The helpers here implement that estimator and variance once, and
the rounding that turns irrational probabilities such as ``e^eps / (e^eps + d - 1)`` into exact
rationals that are at least as private (research note ``security_attacks_ldp.md``, section D).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer
from dpcurator.accounting import PrivacyEvent, RandomizedResponseEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._protocol import FrequencyEstimate, FrequencyOracle, check_values
from dpcurator.noise import RandomSource, resolve_source, uniform_integers

__all__ = ["GeneralizedRandomizedResponse"]

_GRID = 2**52
"""Small probabilities rounded up are multiples of ``2**-52`` (exact in float64)."""

_SAFETY = Fraction(2**40 + 1, 2**40)
"""Relative margin over the float evaluation of a probability (a few ulps of error at most)."""


# --------------------------------------------------------------------------------------------
# exact probabilities


def round_up_probability(value: float, limit: Fraction, epsilon: float) -> Fraction:
    """Smallest multiple of ``2**-52`` that is ``>= value (1 + 2**-40)``, and at least ``2**-52``.

    ``value`` is a float evaluation (a few ulps of relative error) of a probability whose exact
    value is irrational, such as ``1 / (e^eps + 1)``; the result is a rational that is provably
    above the exact value. Rounding the *small* probability of a protocol up makes it at least
    as private as the exact protocol. A result ``>= limit`` (where the protocol would lose all
    utility) means that ``epsilon`` is too small for 52-bit probabilities.
    """
    out = Fraction(max(1, math.ceil(Fraction(value) * _SAFETY * _GRID)), _GRID)
    if out >= limit:
        raise InvalidParameterError(
            "epsilon", epsilon, "is too small to be represented with 52-bit probabilities"
        )
    return out


def round_down_probability(value: float, limit: Fraction, epsilon: float) -> Fraction:
    """Largest dyadic rational with 53 significant bits that is ``<= value (1 - 2**-40)``.

    For a *truth* probability that is small (GRR over a domain much larger than ``e^eps``, where
    ``p = e^eps / (e^eps + d - 1)`` may be ``1e-9``): rounding it down relatively keeps its
    precision, where a fixed ``2**-52`` grid would not. A result ``<= limit`` (no better than
    uniform) means that ``epsilon`` is too small.
    """
    exact = Fraction(value) * (1 - Fraction(1, 2**40))
    shift = 53 - math.floor(math.log2(value)) if value > 0 else 0
    out = Fraction(math.floor(exact * 2**shift), 2**shift) if shift >= 0 else Fraction(0)
    if out <= limit:
        raise InvalidParameterError(
            "epsilon", epsilon, "is too small to be represented with 53-bit probabilities"
        )
    return out


def exp_or_inf(epsilon: float) -> float:
    """``e^epsilon``, or ``inf`` where it overflows a float."""
    return math.exp(epsilon) if epsilon < 700.0 else math.inf


def log_upper(ratio: Fraction) -> float:
    """Return a float that is ``>= ln(ratio)`` and within a few ulps of it (``ratio > 1``)."""
    value = math.log(float(ratio))  # float(ratio) is correctly rounded; log within 1 ulp
    return math.nextafter(value + 2.0**-52 + 2.0**-51 * abs(value), math.inf)


def achieved_epsilon(ratio: Fraction, nominal: float) -> float:
    """Return the epsilon a protocol achieves: ``ln(ratio)`` rounded up, never above ``nominal``.

    ``ratio`` is the exact maximal likelihood ratio of the rounded protocol; the rounding makes it
    at most ``e^nominal``, so the minimum is an upper bound of the true privacy loss.
    """
    return min(nominal, log_upper(ratio))


def float_at_least(p: Fraction) -> float:
    """Return the float nearest ``p`` from above (an event then never understates epsilon)."""
    out = float(p)
    if Fraction(out) < p:
        out = math.nextafter(out, math.inf)
    return out


# --------------------------------------------------------------------------------------------
# the pure-protocol estimator


def check_n(n: object) -> int:
    """Validate a number of reports."""
    return check_integer(n, "n", minimum=1)


def check_counts(counts: object, domain_size: int) -> NDArray[np.float64]:
    """Validate counts (true or estimated) given to ``variance``: ``domain_size`` finite reals."""
    arr = np.asarray(counts, dtype=np.float64).reshape(-1)
    if arr.size != domain_size:
        raise InvalidParameterError(
            "counts", f"<array of {arr.size} values>", f"must hold domain_size = {domain_size}"
        )
    if not np.isfinite(arr).all():
        raise InvalidParameterError("counts", "<array with NaN or inf>", "must be finite")
    return arr


def support_variance(
    n: int, p: float, q: float, domain_size: int, counts: NDArray[np.float64] | None
) -> NDArray[np.float64]:
    """Exact variance ``n q(1-q)/(p-q)^2 + n_v (1-p-q)/(p-q)`` (``Var*`` without counts).

    Wang et al. 2017, Theorem 2; research note D.
    """
    base = n * q * (1.0 - q) / (p - q) ** 2
    out = np.full(domain_size, base, dtype=np.float64)
    if counts is not None:
        out += counts * ((1.0 - p - q) / (p - q))
    return np.maximum(out, 0.0)


def debias(
    supports: NDArray[np.int64] | NDArray[np.float64], n: int, p: float, q: float
) -> NDArray[np.float64]:
    """Unbiased counts ``(C_v - n q) / (p - q)`` from the support counts ``C_v``."""
    return (np.asarray(supports, dtype=np.float64) - n * q) / (p - q)


def pure_variance(
    n: object, counts: object | None, p: Fraction, q: Fraction, domain_size: int
) -> NDArray[np.float64]:
    """Validate ``n`` and ``counts``, then :func:`support_variance` (a pure protocol's variance)."""
    size = check_n(n)
    c = None if counts is None else check_counts(counts, domain_size)
    return support_variance(size, float(p), float(q), domain_size, c)


def estimate_from_supports(
    supports: NDArray[np.int64],
    n: int,
    p: Fraction,
    q: Fraction,
    variance: Callable[[int, NDArray[np.float64]], NDArray[np.float64]],
) -> FrequencyEstimate:
    """Debias the support counts ``C_v`` into a :class:`FrequencyEstimate` (pure protocols).

    The variances are ``variance`` (the protocol's) at the estimated counts clipped to ``[0, n]``.
    """
    counts = debias(supports, n, float(p), float(q))
    variances = variance(n, np.clip(counts, 0.0, n))
    return FrequencyEstimate(counts=counts, variances=variances, n=n)


# --------------------------------------------------------------------------------------------
# GRR: one exact uniform draw per device

_FAST_RANGE = 2**32
"""Draws from ``[0, M)`` with ``M <= 2**32`` take the fast 32-bit lane path of the sampler."""

_WIDE_RANGE = 2**63
"""The largest range :func:`dpcurator.noise.uniform_integers` draws from (one 64-bit word)."""

_FLOAT_GRID = 2**53
"""Above ``e^eps > 2**10 (d - 1)`` (lie probability below ``~2**-10``) ``M = 2**53``, so that
``p = A / 2**53`` is a float exactly and the event's epsilon stays exact."""

_HIGH_RATIO = 2**10

_MARGIN = 1 - Fraction(1, 2**40)
"""``Fraction(math.exp(eps)) * _MARGIN < e^eps``: libm's ``exp`` is within a few ulps."""


def _best_lower(x: Fraction, bmax: int) -> tuple[int, int]:
    """Return the largest ``a / b <= x`` with ``1 <= b <= bmax`` (``x >= 0``, ``bmax >= 1``).

    Batched Stern-Brocot descent (the semiconvergents of the continued fraction of ``x``):
    ``a/b <= x < c/d`` are Farey neighbours; the descent stops when their mediant's denominator
    exceeds ``bmax``, leaving ``a/b`` the best lower approximation: every fraction strictly
    between Farey neighbours ``a/b < c/d`` has a denominator ``>= b + d`` (Graham, Knuth and
    Patashnik, *Concrete Mathematics*, Section 4.5). ``O(log bmax)`` batched steps.
    """
    num, den = x.numerator, x.denominator
    a, b = num // den, 1
    c, d = a + 1, 1
    while b + d <= bmax:
        below = num * b - a * den  # den * (x - a/b) >= 0
        if below == 0:
            break
        above = c * den - num * d  # den * (d x - c) < 0, negated
        steps = min(below // above, (bmax - b) // d)  # lo moves while its mediant stays <= x
        if steps > 0:
            a, b = a + steps * c, b + steps * d
            continue
        steps = min(-(-above // below) - 1, (bmax - d) // b)  # hi moves while it stays > x
        c, d = c + steps * a, d + steps * b
    return a, b


def _largest_b(ratio: Fraction, others: int, limit: int) -> int:
    """Largest ``B >= 0`` with ``floor(ratio B) + others B <= limit`` (nondecreasing in ``B``)."""
    b = limit * ratio.denominator // (ratio.numerator + others * ratio.denominator)
    while (ratio * (b + 1)).__floor__() + others * (b + 1) <= limit:
        b += 1
    return b


def grr_integers(epsilon: float, domain_size: int) -> tuple[int, int, int]:
    r"""Integers ``A, B >= 1`` with ``A / B <= e^eps``, and ``M = A + (d - 1) B``.

    A device draws one exact uniform ``r`` in ``[0, M)`` and reports its value for ``A`` of the
    ``M`` outcomes and each other value for ``B`` of them: ``p = A/M``, ``q = B/M``, and the
    likelihood ratio is exactly ``A / B <= e^eps``. ``A/B`` is the best lower rational
    approximation of ``e^eps (1 - 2**-40)`` (a provable lower bound of ``e^eps``) with
    ``M <= 2**32`` (the sampler's fast path) when it is within a relative ``2**-32 min(1, eps)``
    of that bound (so the achieved epsilon is within about ``2.3e-10 eps`` of ``eps``; among the
    bounds ``M <= 2**20, ..., 2**32`` that qualify, the most precise one whose largest multiple
    below ``2**32`` leaves under ``2**-6`` of the sampler's lanes rejected, if any), else with
    ``M <= 2**63``; where the lie probability would fall below ``~2**-10`` (very large
    ``eps``), ``M = 2**53`` instead, so that ``p`` is a float exactly.

    Examples
    --------
    >>> import math
    >>> from dpcurator.local._grr import grr_integers
    >>> a, b, m = grr_integers(1.0, 1000)
    >>> m == a + 999 * b, m <= 2**32, a / b <= math.e, math.isclose(a / b, math.e, rel_tol=1e-9)
    (True, True, True, True)
    """
    others = domain_size - 1
    e = exp_or_inf(epsilon)
    if e > _HIGH_RATIO * others and others < 2**40:
        m = _FLOAT_GRID
        b = 1 if math.isinf(e) else max(1, math.ceil(m / (Fraction(e) * _MARGIN + others)))
        return m - others * b, b, m
    bound = Fraction(e) * _MARGIN
    tolerance = bound * Fraction(min(1.0, epsilon)) / 2**32
    a, b, best = 0, 1, (True, tolerance)
    for shift in range(32, 19, -1):  # the fast range: few rejected lanes, then the most precise
        b_max = _largest_b(bound, others, 2**shift)
        if b_max < 1:
            break
        a_s, b_s = _best_lower(bound, b_max)
        m = a_s + others * b_s
        lanes = _FAST_RANGE - _FAST_RANGE // m * m  # rejected by Lemire's method (scaled m)
        score = (lanes > _FAST_RANGE >> 6, bound - Fraction(a_s, b_s))
        if a_s > b_s and score[1] <= tolerance and (a <= b or score < best):
            a, b, best = a_s, b_s, score
    if a <= b:  # the fast range is too coarse: the 2**63 range
        b_max = _largest_b(bound, others, _WIDE_RANGE)
        if b_max >= 1:
            a, b = _best_lower(bound, b_max)
        elif _WIDE_RANGE - others > 1:  # e^eps > 2**63 - others: B = 1, A as large as possible
            a, b = _WIDE_RANGE - others, 1
    if a <= b:
        raise InvalidParameterError(
            "epsilon", epsilon, f"is too small for randomized response over {domain_size} values"
        )
    return a, b, a + others * b


def _indices(values: object, domain_size: int, name: str) -> NDArray[np.int64]:
    """Run :func:`check_values` in one pass over an int64 array, without copying it.

    The max of its ``uint64`` view is ``>= domain_size`` exactly when some entry lies outside
    ``[0, domain_size)`` (negative entries view as ``>= 2**63``).
    """
    arr = np.asarray(values)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer) or arr.size == 0:
        return check_values(arr, domain_size, name)
    flat = arr.reshape(-1).astype(np.int64, copy=False)
    if int(flat.view(np.uint64).max()) >= domain_size:
        check_values(flat, domain_size, name)  # raises, counting the entries out of range
    return flat


class GeneralizedRandomizedResponse(FrequencyOracle):
    r"""Generalised (k-ary) randomized response, also called direct encoding (GRR, k-RR).

    Each device reports its true value ``v`` with probability ``p`` and each of the ``d - 1``
    other values with probability ``q = (1 - p) / (d - 1)``, where ideally
    ``p = e^eps / (e^eps + d - 1)``. So for any two inputs ``v, v'`` and any report ``y``

    .. math:: P[y \mid v] \le \frac{p}{q}\, P[y \mid v'] \le e^\epsilon\, P[y \mid v'],

    epsilon-LDP (one device changing its value).

    **Randomisation**: one exact uniform draw per device. Integers ``A, B >= 1`` with
    ``A / B <= e^eps`` (the best rational approximation from below of a provable lower bound of
    ``e^eps``; see :func:`grr_integers`) give ``M = A + (d - 1) B``; each device draws ``r``
    uniformly in ``[0, M)`` (:func:`dpcurator.noise.uniform_integers`, exact rejection sampling;
    ``M <= 2**32`` takes its fast 32-bit path) and reports the ``floor(r / B)``-th of the other
    values (``o + (o >= v)``) when ``r < (d - 1) B``, its true value otherwise. So
    ``p = A / M`` and ``q = B / M`` exactly, the likelihood ratio is exactly ``A / B``, and
    :attr:`event` reports the epsilon actually achieved, ``ln(A/B)`` (never more than ``eps``).

    **Report**: one integer in ``[0, d)`` per device (``log2 d`` bits).
    **Estimator**: ``c_v = (C_v - n q) / (p - q)`` with ``C_v`` the number of reports equal to
    ``v``; unbiased. **Exact variance** (data fixed):

    .. math::

        \mathrm{Var}[c_v] = n \frac{q (1 - q)}{(p - q)^2} + n_v \frac{1 - p - q}{p - q},
        \qquad \mathrm{Var}^* = n \frac{e^\epsilon + d - 2}{(e^\epsilon - 1)^2}.

    GRR has the lowest variance of the pure protocols when ``d < 3 e^eps + 2``.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``d >= 2``.

    Attributes
    ----------
    p, q : fractions.Fraction
        Exact probabilities that a report supports (equals) ``v`` when the input is ``v``, and
        when it is another value.

    References
    ----------
    S. L. Warner, "Randomized response", JASA 1965. T. Wang, J. Blocki, N. Li, S. Jha, "Locally
    Differentially Private Protocols for Frequency Estimation", USENIX Security 2017, Section 4.1
    (direct encoding) and Theorem 2 (variance). Research note D.

    Examples
    --------
    >>> from dpcurator.local._grr import GeneralizedRandomizedResponse
    >>> from dpcurator.noise import InsecureSeededSource
    >>> grr = GeneralizedRandomizedResponse(epsilon=2.0, domain_size=4)
    >>> est = grr.estimate([0] * 600 + [1] * 300 + [3] * 100, source=InsecureSeededSource(0))
    >>> est.n, bool(abs(est.counts[0] - 600) < 4 * est.std[0])
    (1000, True)
    >>> grr.p.denominator <= 2**32, round(grr.event.epsilon, 9)
    (True, 2.0)
    """

    name: ClassVar[str] = "grr"

    def __init__(self, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        a, _, m = grr_integers(self.epsilon, self.domain_size)
        self._set_probability(Fraction(a, m))

    def _set_probability(self, p: Fraction) -> None:
        """Use ``P[truth] = p``: ``M`` is the common denominator of ``p`` and ``q``."""
        d = self.domain_size
        if p <= Fraction(1, d) or p >= 1:
            raise InvalidParameterError(
                "epsilon", self.epsilon, f"is too small for randomized response over {d} values"
            )
        self.p: Fraction = p
        self.q: Fraction = (1 - p) / (d - 1)
        m = math.lcm(p.denominator, self.q.denominator)
        if m > _WIDE_RANGE:
            raise InvalidParameterError("p", p, "must have a denominator <= 2**63")
        # scaling A, B, M by f = floor(2**32 / M) changes no probability and rejects fewer lanes
        scale = _FAST_RANGE // m if m <= _FAST_RANGE and m & (m - 1) else 1
        self._lie, self._range = int(self.q * m) * scale, m * scale
        # The event's float p: exact where possible, else rounded up until the event's (float)
        # epsilon is at least ln(p/q) rounded up, so that it never understates the privacy loss.
        self._event_p = float_at_least(p)
        if Fraction(self._event_p) != p:
            target = log_upper(p / self.q)
            while RandomizedResponseEvent(self._event_p, d).epsilon < target:
                self._event_p = math.nextafter(self._event_p, math.inf)

    @property
    def event(self) -> PrivacyEvent:
        """k-ary randomized response with the ``p`` actually used (as a float, rounded up)."""
        return RandomizedResponseEvent(p_truth=self._event_p, categories=self.domain_size)

    def report_probability(self, report: int, value: int) -> Fraction:
        """Exact ``P[report | value]``: ``p`` if they are equal, else ``q``.

        Examples
        --------
        >>> from dpcurator.local._grr import GeneralizedRandomizedResponse
        >>> grr = GeneralizedRandomizedResponse(epsilon=1.0, domain_size=3)
        >>> grr.report_probability(0, 0) + 2 * grr.report_probability(1, 0) == 1
        True
        """
        return self.p if int(report) == int(value) else self.q

    def privatize(self, values: object, *, source: RandomSource | None = None) -> NDArray[np.int64]:
        """Randomise each device's value (one exact uniform draw each); one report per device.

        Examples
        --------
        >>> from dpcurator.local._grr import GeneralizedRandomizedResponse
        >>> from dpcurator.noise import InsecureSeededSource
        >>> grr = GeneralizedRandomizedResponse(epsilon=1.0, domain_size=5)
        >>> grr.privatize([0, 4, 2], source=InsecureSeededSource(1)).shape
        (3,)
        """
        flat = _indices(values, self.domain_size, "values")
        out = uniform_integers(self._range, flat.size, source=resolve_source(source))
        if self._lie > 1:
            np.floor_divide(out, self._lie, out=out)
        truth = out >= self.domain_size - 1  # r >= (d - 1) B: the A outcomes that tell the truth
        out += out >= flat  # the o-th other value: skip the true one
        np.copyto(out, flat, where=truth)
        return out

    def aggregate(self, reports: object) -> FrequencyEstimate:
        """Count the reports of each value and debias them.

        Examples
        --------
        >>> from dpcurator.local._grr import GeneralizedRandomizedResponse
        >>> grr = GeneralizedRandomizedResponse(epsilon=1.0, domain_size=3)
        >>> est = grr.aggregate([0, 0, 1, 2])
        >>> est.n, est.counts.shape
        (4, (3,))
        """
        flat = _indices(reports, self.domain_size, "reports")
        n = int(flat.size)
        supports = np.bincount(flat, minlength=self.domain_size)
        return estimate_from_supports(supports, n, self.p, self.q, self.variance)

    def variance(self, n: int, counts: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """Exact variance of each count for ``n`` reports (``Var*`` without ``counts``).

        Examples
        --------
        >>> import math
        >>> from dpcurator.local._grr import GeneralizedRandomizedResponse
        >>> grr = GeneralizedRandomizedResponse(epsilon=1.0, domain_size=4)
        >>> e = math.e
        >>> math.isclose(grr.variance(100)[0], 100 * (e + 2) / (e - 1) ** 2, rel_tol=1e-9)
        True
        """
        return pure_variance(n, counts, self.p, self.q, self.domain_size)
