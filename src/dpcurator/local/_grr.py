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
from dpcurator.mechanisms import randomized_response
from dpcurator.noise import RandomSource, resolve_source

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
# GRR


class GeneralizedRandomizedResponse(FrequencyOracle):
    r"""Generalised (k-ary) randomized response, also called direct encoding (GRR, k-RR).

    Each device reports its true value ``v`` with probability ``p`` and each of the ``d - 1``
    other values with probability ``q = (1 - p) / (d - 1)``, where
    ``p = e^eps / (e^eps + d - 1)``. So for any two inputs ``v, v'`` and any report ``y``

    .. math:: P[y \mid v] \le \frac{p}{q}\, P[y \mid v'] = e^\epsilon\, P[y \mid v'],

    epsilon-LDP (one device changing its value). ``p`` is an exact rational: the smaller of ``p``
    and ``1 - p`` is rounded towards privacy (``p`` down to 53 significant bits, or ``1 - p`` up
    to a multiple of ``2**-52``), so the protocol is at least as private as stated, and
    :attr:`event` reports the epsilon actually achieved.
    Randomisation is :func:`dpcurator.mechanisms.randomized_response` (exact Bernoulli and
    uniform draws from :mod:`dpcurator.noise`).

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
    >>> round(grr.event.epsilon, 9)
    2.0
    """

    name: ClassVar[str] = "grr"

    def __init__(self, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        d = self.domain_size
        e = exp_or_inf(self.epsilon)
        if e < d - 1:  # p < 1/2: round p itself down, keeping its relative precision
            p = round_down_probability(e / (e + d - 1), Fraction(1, d), self.epsilon)
        else:  # round the lie probability 1 - p <= 1/2 up
            p = 1 - round_up_probability((d - 1) / (e + d - 1), Fraction(d - 1, d), self.epsilon)
        self._set_probability(p)

    def _set_probability(self, p: Fraction) -> None:
        d = self.domain_size
        if p <= Fraction(1, d):
            raise InvalidParameterError(
                "epsilon", self.epsilon, f"is too small for randomized response over {d} values"
            )
        self.p: Fraction = p
        self.q: Fraction = (1 - p) / (d - 1)

    @property
    def event(self) -> PrivacyEvent:
        """k-ary randomized response with the ``p`` actually used (its float rounded up)."""
        return RandomizedResponseEvent(p_truth=float_at_least(self.p), categories=self.domain_size)

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
        """Randomise each device's value; returns one integer report per device.

        Examples
        --------
        >>> from dpcurator.local._grr import GeneralizedRandomizedResponse
        >>> from dpcurator.noise import InsecureSeededSource
        >>> grr = GeneralizedRandomizedResponse(epsilon=1.0, domain_size=5)
        >>> grr.privatize([0, 4, 2], source=InsecureSeededSource(1)).shape
        (3,)
        """
        flat = check_values(values, self.domain_size)
        release = randomized_response(
            flat, p_truth=self.p, categories=self.domain_size, source=resolve_source(source)
        )
        return np.asarray(release.value, dtype=np.int64)

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
        flat = check_values(reports, self.domain_size, "reports")
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
