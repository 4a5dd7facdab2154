"""Randomized response (Warner 1965): each respondent randomizes their own answer.

Every Bernoulli and uniform draw is exact (:mod:`dpcurator.noise`); when ``p_truth`` comes from
an irrational ``e^eps / (e^eps + k - 1)``, a rational slightly below it is used (slightly more
private) and the event reports the probability actually used.

Examples
--------
>>> from dpcurator.noise import InsecureSeededSource
>>> release = coin_randomized_response([1, 0, 1, 1], source=InsecureSeededSource(0))
>>> release.event
RandomizedResponseEvent(p_truth=0.75, categories=2)
>>> round(release.event.epsilon, 6)  # lecture 004: the coin version is ln 3-DP
1.098612
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_epsilon, check_integer, check_probability, check_rational
from dpcurator.accounting import RandomizedResponseEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms._common import unpack_int
from dpcurator.mechanisms._release import Release
from dpcurator.noise import RandomSource, bernoulli, resolve_source, uniform_integers

__all__ = [
    "FrequencyEstimate",
    "ProportionEstimate",
    "coin_randomized_response",
    "die_randomized_response",
    "estimate_frequencies",
    "estimate_proportion",
    "posterior_probability",
    "randomized_response",
]

_DENOMINATOR_BITS = 52
"""``p_truth`` derived from epsilon is a multiple of ``2**-52`` (exact in float64)."""

_MARGIN = Fraction(2**40 + 1, 2**40)
"""Relative safety margin on the float evaluation of ``(k-1) / (e^eps + k - 1)`` (a few ulps)."""

Responses = int | bool | Sequence[int] | Sequence[bool] | NDArray[Any]


def _as_responses(values: object, categories: int, name: str = "values") -> tuple[Any, bool]:
    """Validate respondents' values: integers in ``[0, categories)`` (bools for two categories)."""
    array = np.asarray(values)
    if array.size == 0 and array.dtype.kind == "f":  # an empty list: no respondents
        array = array.astype(np.int64)
    if array.dtype == np.bool_ and categories == 2:
        array = array.astype(np.int64)
    if array.dtype.kind not in "iu":
        raise InvalidParameterError(
            name,
            f"<array of dtype {array.dtype}>",
            f"must hold integers in [0, {categories})" + (" or bools" if categories == 2 else ""),
        )
    out = array.astype(np.int64)
    # Respondents' values must lie in the public domain; the message does not echo them.
    if out.size and bool(((out < 0) | (out >= categories)).any()):
        raise InvalidParameterError(
            name, f"<array of shape {array.shape}>", f"must hold values in [0, {categories})"
        )
    return out, array.ndim == 0


def _float_at_least(p: Fraction) -> float:
    """Return the float nearest ``p`` from above (an event then never understates epsilon)."""
    out = float(p)
    if Fraction(out) < p:
        out = math.nextafter(out, math.inf)
    return out


def _p_truth_for_epsilon(epsilon: float, categories: int) -> Fraction:
    """Largest multiple of ``2**-52`` that is ``<= e^eps / (e^eps + k - 1)`` (guaranteed).

    The lie probability ``q = (k-1) / (e^eps + k - 1)`` is evaluated in float64 (relative error
    below ``2**-50``), inflated by ``_MARGIN`` and rounded up to the grid, so the rational
    ``1 - q`` never exceeds the exact ``p_truth`` and the mechanism is at most epsilon-DP.
    """
    if epsilon > 700.0:
        q = Fraction(0)
    else:
        q = Fraction((categories - 1) / (math.exp(epsilon) + categories - 1)) * _MARGIN
    scale = 2**_DENOMINATOR_BITS
    numerator = max(1, math.ceil(q * scale))
    p = 1 - Fraction(numerator, scale)
    if p <= Fraction(1, categories):
        raise InvalidParameterError(
            "epsilon", epsilon, "is too small for randomized response in float64 (use >= 1e-9)"
        )
    return p


def _p_truth_given(p_truth: object, categories: int) -> Fraction:
    p = check_rational(p_truth, "p_truth")
    if not Fraction(1, categories) < p < 1:
        raise InvalidParameterError(
            "p_truth", p_truth, f"must be in (1/categories, 1) = (1/{categories}, 1)"
        )
    return p


def _respond(
    truth: NDArray[np.int64], p: Fraction, categories: int, source: RandomSource
) -> NDArray[np.int64]:
    n = int(truth.size)
    flat = truth.reshape(-1)
    keep = np.asarray(bernoulli(p, n, source=source), dtype=bool).reshape(-1)
    if categories == 2:
        lie = 1 - flat
    else:
        other = np.asarray(uniform_integers(categories - 1, n, source=source), dtype=np.int64)
        lie = other + (other >= flat)  # uniform over the k - 1 values other than the truth
    out: NDArray[np.int64] = np.where(keep, flat, lie).astype(np.int64).reshape(truth.shape)
    return out


@overload
def randomized_response(
    values: int | bool,
    *,
    epsilon: float | None = ...,
    p_truth: float | Fraction | str | None = ...,
    categories: int = ...,
    source: RandomSource | None = ...,
) -> Release[int]: ...
@overload
def randomized_response(
    values: Sequence[int] | Sequence[bool] | NDArray[Any],
    *,
    epsilon: float | None = ...,
    p_truth: float | Fraction | str | None = ...,
    categories: int = ...,
    source: RandomSource | None = ...,
) -> Release[NDArray[np.int64]]: ...
def randomized_response(
    values: Responses,
    *,
    epsilon: float | None = None,
    p_truth: float | Fraction | str | None = None,
    categories: int = 2,
    source: RandomSource | None = None,
) -> Release[Any]:
    r"""k-ary randomized response: each value kept w.p. ``p_truth``, else uniform over the others.

    Each respondent's report ``Y`` satisfies ``P[Y = x] = p`` and ``P[Y = y] = (1 - p)/(k - 1)``
    for every ``y != x``, so for any two values ``x, x'`` and any report ``y``

    .. math:: \frac{P[Y = y \mid x]}{P[Y = y \mid x']} \le \frac{p (k - 1)}{1 - p} = e^\epsilon,

    i.e. epsilon-DP (local model; neighbours: one respondent's value replaced). With ``epsilon``
    given, ``p = e^eps / (e^eps + k - 1)`` (Warner 1965; lecture 001 for ``k = 2``; Wang et al.
    2017, generalized RR), rounded down to a rational so that the release is at most epsilon-DP.

    Parameters
    ----------
    values : int, bool or array_like
        The respondents' true values in ``[0, categories)`` (bools allowed when ``k = 2``).
    epsilon : float, optional
        Privacy parameter, > 0. Exactly one of ``epsilon`` and ``p_truth``.
    p_truth : float, Fraction or str, optional
        Probability of reporting the truth, in ``(1/k, 1)``; used exactly (``"2/3"`` is 2/3).
    categories : int, default 2
        ``k``, the number of possible values.
    source : RandomSource, optional
        Randomness (secure by default).

    Returns
    -------
    Release
        ``value``: the reports (same shape, int), ``event``: a
        :class:`~dpcurator.accounting.RandomizedResponseEvent` with the ``p_truth`` used
        (rounded up to a float, so its epsilon is never understated), ``error``: None.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> release = randomized_response([0, 2, 1], epsilon=1.0, categories=3,
    ...                               source=InsecureSeededSource(0))
    >>> release.value.shape, release.event.epsilon <= 1.0
    ((3,), True)
    >>> randomized_response(1, p_truth="3/4", source=InsecureSeededSource(0)).event
    RandomizedResponseEvent(p_truth=0.75, categories=2)
    """
    k = check_integer(categories, "categories", minimum=2)
    if (epsilon is None) == (p_truth is None):
        raise InvalidParameterError(
            "epsilon", epsilon, "and p_truth are exclusive: give exactly one of them"
        )
    if epsilon is not None:
        p = _p_truth_for_epsilon(check_epsilon(epsilon), k)
    else:
        p = _p_truth_given(p_truth, k)
    truth, scalar = _as_responses(values, k)
    reports = _respond(truth, p, k, resolve_source(source))
    event = RandomizedResponseEvent(p_truth=_float_at_least(p), categories=k)
    return Release(unpack_int(reports, scalar), event)


@overload
def coin_randomized_response(
    values: int | bool, *, source: RandomSource | None = ...
) -> Release[int]: ...
@overload
def coin_randomized_response(
    values: Sequence[int] | Sequence[bool] | NDArray[Any], *, source: RandomSource | None = ...
) -> Release[NDArray[np.int64]]: ...
def coin_randomized_response(
    values: Responses, *, source: RandomSource | None = None
) -> Release[Any]:
    """Run the lecture's coin protocol: heads, answer truthfully; tails, a second flip answers.

    Flip a fair coin; on heads report the truth; on tails flip again and report "yes" (1) on
    heads, "no" (0) on tails. So ``P[truth] = 1/2 + 1/4 = 3/4`` and the ratio of any report's
    probabilities under the two answers is ``(3/4) / (1/4) = 3``: ln 3-DP (lecture 003, "Have you
    ever dodged your taxes?"; lecture 004). Both flips are exact fair bits.

    Parameters
    ----------
    values : int, bool or array_like
        True answers, 0/1 or bools.
    source : RandomSource, optional

    Returns
    -------
    Release
        Reports (0/1 ints) with ``RandomizedResponseEvent(p_truth=0.75, categories=2)``.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> coin_randomized_response(True, source=InsecureSeededSource(0)).value in (0, 1)
    True
    """
    truth, scalar = _as_responses(values, 2)
    src = resolve_source(source)
    n = int(truth.size)
    first = np.asarray(uniform_integers(2, n, source=src), dtype=np.int64)
    second = np.asarray(uniform_integers(2, n, source=src), dtype=np.int64)
    heads = 1
    flat = truth.reshape(-1)
    reports = np.where(first == heads, flat, np.where(second == heads, 1, 0))
    reports = reports.astype(np.int64).reshape(truth.shape)
    event = RandomizedResponseEvent(p_truth=0.75, categories=2)
    return Release(unpack_int(reports, scalar), event)


@overload
def die_randomized_response(
    values: int | bool, *, source: RandomSource | None = ...
) -> Release[int]: ...
@overload
def die_randomized_response(
    values: Sequence[int] | Sequence[bool] | NDArray[Any], *, source: RandomSource | None = ...
) -> Release[NDArray[np.int64]]: ...
def die_randomized_response(
    values: Responses, *, source: RandomSource | None = None
) -> Release[Any]:
    """Run the lecture's die protocol: on 1-4 report the true bit, on 5 or 6 its opposite.

    ``P[truth] = 4/6 = 2/3``; one respondent's change alters one factor of the likelihood from
    2/3 to 1/3, so every report's probability changes by a factor of at most 2: ln 2-DP
    (lecture 001, randomized response, replace-one). The die roll is an exact uniform draw.

    Parameters
    ----------
    values : int, bool or array_like
        True bits, 0/1 or bools.
    source : RandomSource, optional

    Returns
    -------
    Release
        Reports with a ``RandomizedResponseEvent`` of ``p_truth`` 2/3 (its float rounded up).

    Examples
    --------
    >>> import math
    >>> from dpcurator.noise import InsecureSeededSource
    >>> release = die_randomized_response([0, 1, 1, 0], source=InsecureSeededSource(0))
    >>> math.isclose(release.event.epsilon, math.log(2)), release.value.shape
    (True, (4,))
    """
    truth, scalar = _as_responses(values, 2)
    src = resolve_source(source)
    roll = np.asarray(uniform_integers(6, int(truth.size), source=src), dtype=np.int64)
    flat = truth.reshape(-1)
    reports = np.where(roll < 4, flat, 1 - flat).astype(np.int64).reshape(truth.shape)
    event = RandomizedResponseEvent(p_truth=_float_at_least(Fraction(2, 3)), categories=2)
    return Release(unpack_int(reports, scalar), event)


@dataclass(frozen=True, slots=True)
class ProportionEstimate:
    """An unbiased estimate of a proportion from randomized responses, with its variance.

    Attributes
    ----------
    estimate : float
        ``(mean(Y) - (1 - p)) / (2p - 1)``; unbiased, hence not clipped to [0, 1].
    variance : float
        Exact variance of the estimate given the data: ``p (1 - p) / (n (2p - 1)^2)``.
    n : int
        Number of reports.
    """

    estimate: float
    variance: float
    n: int

    @property
    def std(self) -> float:
        """Standard deviation, ``sqrt(variance)``."""
        return math.sqrt(self.variance)


@dataclass(frozen=True, slots=True, eq=False)
class FrequencyEstimate:
    """Unbiased frequency estimates from k-ary randomized responses, with plug-in variances.

    Attributes
    ----------
    estimates : numpy.ndarray
        ``(c_v / n - q) / (p - q)`` for each value ``v`` (``q = (1 - p)/(k - 1)``).
    variances : numpy.ndarray
        ``(pi_v p (1 - p) + (1 - pi_v) q (1 - q)) / (n (p - q)^2)`` with ``pi_v`` the estimate
        clipped to [0, 1] (the exact variance has the true frequency there).
    n : int
        Number of reports.
    """

    estimates: NDArray[np.float64]
    variances: NDArray[np.float64]
    n: int


def _check_reports(reports: object, categories: int) -> NDArray[np.int64]:
    out, _ = _as_responses(reports, categories, "reports")
    flat: NDArray[np.int64] = np.asarray(out).reshape(-1)
    if flat.size == 0:
        raise InvalidParameterError("reports", "<empty array>", "must hold at least one report")
    return flat


def estimate_proportion(reports: Responses, p_truth: float) -> ProportionEstimate:
    r"""Unbiased estimate of the proportion of 1s from binary randomized-response reports.

    ``E[Y_i] = p x_i + (1 - p)(1 - x_i)``, so ``(mean(Y) - (1 - p)) / (2p - 1)`` is unbiased for
    ``mean(x)``. Each ``Y_i`` has variance ``p (1 - p)`` whatever ``x_i``, so the estimate has
    variance exactly ``p (1 - p) / (n (2p - 1)^2)``; with ``p = e^eps/(e^eps + 1)`` the standard
    deviation of the implied count is ``e^{eps/2} sqrt(n) / (e^eps - 1)`` (lecture 001,
    proposition on randomized response; research note D).

    Parameters
    ----------
    reports : array_like
        The 0/1 reports (or bools).
    p_truth : float
        The probability of a truthful report used by the mechanism, in (1/2, 1)
        (``release.event.p_truth``).

    Returns
    -------
    ProportionEstimate

    Examples
    --------
    >>> est = estimate_proportion([1, 1, 0, 1], 0.75)
    >>> est.estimate, round(est.variance, 6)
    (1.0, 0.1875)
    """
    p = check_probability(p_truth, "p_truth", open_right=True)
    if p <= 0.5:
        raise InvalidParameterError("p_truth", p_truth, "must be in (1/2, 1)")
    flat = _check_reports(reports, 2)
    n = int(flat.size)
    mean = float(flat.mean())
    estimate = (mean - (1.0 - p)) / (2.0 * p - 1.0)
    variance = p * (1.0 - p) / (n * (2.0 * p - 1.0) ** 2)
    return ProportionEstimate(estimate=estimate, variance=variance, n=n)


def estimate_frequencies(
    reports: Responses, p_truth: float, *, categories: int
) -> FrequencyEstimate:
    """Unbiased frequency estimates from k-ary randomized-response reports.

    With ``q = (1 - p)/(k - 1)``, ``E[c_v / n] = q + (p - q) pi_v``, so ``(c_v/n - q)/(p - q)`` is
    unbiased for the frequency ``pi_v``; its variance given the data is
    ``(pi_v p(1-p) + (1 - pi_v) q(1-q)) / (n (p - q)^2)`` (Wang, Blocki, Li and Jha 2017,
    generalized randomized response; research note D), estimated by plugging in ``pi_v``.

    Parameters
    ----------
    reports : array_like
        Reports in ``[0, categories)``.
    p_truth : float
        The mechanism's ``p_truth``, in ``(1/k, 1)``.
    categories : int
        ``k``.

    Returns
    -------
    FrequencyEstimate

    Examples
    --------
    >>> est = estimate_frequencies([0, 1, 2, 2], 0.5, categories=3)
    >>> [round(float(x), 3) for x in est.estimates]
    [0.0, 0.0, 1.0]
    """
    k = check_integer(categories, "categories", minimum=2)
    p = check_probability(p_truth, "p_truth", open_right=True)
    if p <= 1.0 / k:
        raise InvalidParameterError("p_truth", p_truth, f"must be in (1/{k}, 1)")
    flat = _check_reports(reports, k)
    n = int(flat.size)
    q = (1.0 - p) / (k - 1)
    freq = np.bincount(flat, minlength=k).astype(np.float64) / n
    estimates = (freq - q) / (p - q)
    pi = np.clip(estimates, 0.0, 1.0)
    variances = (pi * p * (1.0 - p) + (1.0 - pi) * q * (1.0 - q)) / (n * (p - q) ** 2)
    return FrequencyEstimate(estimates=estimates, variances=variances, n=n)


def posterior_probability(prior: float, p_yes_given_true: float, p_yes_given_false: float) -> float:
    r"""Bayes' rule: the probability of the trait after seeing a "yes".

    .. math::
        P[T \mid yes] = \frac{P[T] P[yes \mid T]}
                             {P[T] P[yes \mid T] + (1 - P[T]) P[yes \mid \neg T]}

    Lecture 003 (randomized response, the tax investigator): with prior 0.02 and the coin
    protocol (``3/4`` and ``1/4``) the posterior is about 0.058, so the answer shifts belief
    only by a factor of at most ``e^eps = 3``.

    Parameters
    ----------
    prior : float
        ``P[T]`` in [0, 1].
    p_yes_given_true, p_yes_given_false : float
        ``P[yes | T]`` and ``P[yes | not T]`` in [0, 1], not both zero where it matters.

    Returns
    -------
    float

    Examples
    --------
    >>> round(posterior_probability(0.02, 0.75, 0.25), 3)
    0.058
    """
    a = check_probability(prior, "prior")
    yes_true = check_probability(p_yes_given_true, "p_yes_given_true")
    yes_false = check_probability(p_yes_given_false, "p_yes_given_false")
    numerator = a * yes_true
    denominator = numerator + (1.0 - a) * yes_false
    if denominator == 0.0:
        raise InvalidParameterError(
            "p_yes_given_false", p_yes_given_false, "makes a 'yes' impossible under the prior"
        )
    return numerator / denominator
