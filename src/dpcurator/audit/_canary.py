r"""Privacy auditing with one run (Steinke, Nasr and Jagielski, NeurIPS 2023).

``m`` canaries are each included independently with probability 1/2 (``S_i`` uniform in
``{-1, +1}``); the mechanism runs **once**; the auditor scores every canary, guesses "in" for the
``k+`` highest scores and "out" for the ``k-`` lowest, and abstains on the rest. If the mechanism
is epsilon-DP with respect to each canary (add/remove one canary), the number ``W`` of correct
guesses among the ``r = k+ + k-`` made is stochastically dominated by
``Binomial(r, e^eps / (1 + e^eps))`` (Theorem 3.1 of the paper). For (epsilon, delta)-DP the
tail gains a term (their Theorem 3.3, Algorithm 2 computes it):

.. math:: P[W \ge v] \le P[B \ge v] + 2 m \delta \max_{1 \le i \le v}
          \frac{P[v - i \le B < v]}{i}, \qquad B \sim \mathrm{Binomial}\left(r,
          \frac{e^\epsilon}{1 + e^\epsilon}\right).

The certified bound is the largest epsilon whose p-value for the observed ``v`` is below
``1 - confidence``: with probability at least ``confidence`` the mechanism is not
(epsilon, delta)-DP for any smaller epsilon. One run (one training of DP-SGD, with canaries in
the training set or as gradient canaries) gives a bound, loose compared with thousands of runs
but nearly free (research note B.7).

Examples
--------
>>> round(one_run_epsilon_lower_bound(1000, 1000, canaries=10_000), 2)
5.81
>>> round(one_run_epsilon_lower_bound(1000, 900, canaries=10_000), 2)
2.02
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special, stats

from dpcurator._validation import check_delta, check_integer, check_probability
from dpcurator.errors import InvalidParameterError
from dpcurator.noise import RandomSource, bernoulli, resolve_source

__all__ = [
    "CanaryAudit",
    "canary_audit",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
    "score_canaries",
]

_EPSILON_CAP = 60.0
"""Bounds are searched in [0, 60]: beyond, ``e^-eps`` underflows the binomial's tail."""


def _check_counts(guesses: int, correct: int, canaries: int) -> tuple[int, int, int]:
    m = check_integer(canaries, "canaries", minimum=1)
    r = check_integer(guesses, "guesses", minimum=0)
    v = check_integer(correct, "correct", minimum=0)
    if r > m:
        raise InvalidParameterError("guesses", guesses, f"must be <= canaries ({m})")
    if v > r:
        raise InvalidParameterError("correct", correct, f"must be <= guesses ({r})")
    return r, v, m


def one_run_p_value(
    guesses: int, correct: int, *, canaries: int, epsilon: float, delta: float = 0.0
) -> float:
    r"""P-value of ``correct`` right guesses out of ``guesses`` under (epsilon, delta)-DP.

    ``P[Binomial(r, q) >= v] + 2 m delta max_i P[v - i <= Binomial(r, q) < v] / i`` with
    ``q = e^eps / (1 + e^eps)`` (Steinke, Nasr and Jagielski 2023, Theorem 3.3), capped at 1.

    Parameters
    ----------
    guesses : int
        ``r``, guesses made (abstentions excluded).
    correct : int
        ``v``, correct guesses.
    canaries : int
        ``m``, canaries (each included with probability 1/2).
    epsilon : float
        The epsilon of the null hypothesis, >= 0.
    delta : float, default 0.0

    Returns
    -------
    float

    Examples
    --------
    Three quarters right would be very unlikely for a mechanism that leaks nothing:

    >>> f"{one_run_p_value(100, 75, canaries=1000, epsilon=0.0):.2e}"
    '2.82e-07'
    """
    r, v, m = _check_counts(guesses, correct, canaries)
    eps = float(epsilon)
    if not eps >= 0 or math.isnan(eps):
        raise InvalidParameterError("epsilon", epsilon, "must be >= 0")
    dlt = check_delta(delta)
    if v == 0:
        return 1.0
    q = float(special.expit(eps))
    tail = float(stats.binom.sf(v - 1, r, q))
    if dlt == 0.0:
        return min(tail, 1.0)
    i = np.arange(1, v + 1)
    between = stats.binom.sf(v - i - 1, r, q) - tail  # P[v - i <= B < v]
    worst = float(np.max(between / i))
    return min(tail + 2.0 * m * dlt * worst, 1.0)


def one_run_epsilon_lower_bound(
    guesses: int,
    correct: int,
    *,
    canaries: int,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> float:
    """Largest epsilon refuted by ``correct`` right guesses out of ``guesses`` (one-run audit).

    The bound is the supremum of the epsilons whose :func:`one_run_p_value` is below
    ``1 - confidence`` (0 when even epsilon = 0 is not refuted), found by bisection: the p-value
    increases with epsilon.

    Parameters
    ----------
    guesses, correct, canaries : int
        ``r``, ``v`` and ``m``.
    delta : float, default 0.0
    confidence : float, default 0.95

    Returns
    -------
    float

    Examples
    --------
    >>> round(one_run_epsilon_lower_bound(100, 100, canaries=1000), 2)
    3.49
    """
    r, v, m = _check_counts(guesses, correct, canaries)
    dlt = check_delta(delta)
    level = check_probability(confidence, "confidence", open_left=True, open_right=True)
    beta = 1.0 - level

    def excess(eps: float) -> float:
        return one_run_p_value(r, v, canaries=m, epsilon=eps, delta=dlt) - beta

    if r == 0 or excess(0.0) >= 0:
        return 0.0
    if excess(_EPSILON_CAP) < 0:
        return _EPSILON_CAP
    return float(optimize.brentq(excess, 0.0, _EPSILON_CAP, xtol=1e-9))


@dataclass(frozen=True)
class CanaryAudit:
    """The outcome of a one-run canary audit.

    Attributes
    ----------
    epsilon_lower_bound : float
        Certified at ``confidence`` for the stated ``delta``.
    guesses : int
        ``r = k+ + k-``.
    correct : int
        ``v``.
    canaries : int
        ``m``.
    delta : float
    confidence : float
    included : numpy.ndarray of bool
        Which canaries were included (the secret ``S_i = +1``).
    scores : numpy.ndarray of float
        The auditor's score of each canary (higher: more likely included).
    """

    epsilon_lower_bound: float
    guesses: int
    correct: int
    canaries: int
    delta: float
    confidence: float
    included: NDArray[np.bool_]
    scores: NDArray[np.float64]

    @property
    def accuracy(self) -> float:
        """Fraction of the guesses made that were right (``nan`` with no guess)."""
        return self.correct / self.guesses if self.guesses else math.nan


def score_canaries(
    scores: object,
    included: object,
    *,
    guesses_in: int,
    guesses_out: int,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> CanaryAudit:
    """Guess from given canary scores and certify (the run was done by the caller).

    The ``guesses_in`` highest scores are guessed "in", the ``guesses_out`` lowest "out"
    (ties broken by position, which is independent of the secret); both numbers must be fixed
    before the scores are seen for the bound to hold.

    Parameters
    ----------
    scores : array_like of float
        One score per canary; higher means "more likely included".
    included : array_like of bool
        The secret inclusion of each canary.
    guesses_in, guesses_out : int
        ``k+`` and ``k-``, with ``k+ + k- <= m``.
    delta, confidence : float

    Returns
    -------
    CanaryAudit

    Examples
    --------
    >>> import numpy as np
    >>> included = np.arange(1000) % 2 == 0
    >>> audit = score_canaries(included * 1.0, included, guesses_in=100, guesses_out=100)
    >>> audit.correct, round(audit.epsilon_lower_bound, 2)
    (200, 4.19)
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    inc = np.asarray(included).reshape(-1)
    if inc.dtype != np.bool_:
        raise InvalidParameterError("included", f"<array of {inc.dtype}>", "must be booleans")
    if s.size != inc.size or s.size == 0:
        raise InvalidParameterError(
            "scores", f"<{s.size} scores>", f"must give one score per canary ({inc.size})"
        )
    if not np.isfinite(s).all():
        raise InvalidParameterError("scores", "<non-finite scores>", "must be finite")
    m = int(s.size)
    k_in = check_integer(guesses_in, "guesses_in", minimum=0)
    k_out = check_integer(guesses_out, "guesses_out", minimum=0)
    if k_in + k_out > m:
        raise InvalidParameterError(
            "guesses_in", guesses_in, f"plus guesses_out ({k_out}) must be <= canaries ({m})"
        )
    order = np.argsort(-s, kind="stable")
    top, bottom = order[:k_in], order[m - k_out :] if k_out else order[:0]
    correct = int(inc[top].sum()) + int((~inc[bottom]).sum())
    bound = one_run_epsilon_lower_bound(
        k_in + k_out, correct, canaries=m, delta=delta, confidence=confidence
    )
    return CanaryAudit(
        epsilon_lower_bound=bound,
        guesses=k_in + k_out,
        correct=correct,
        canaries=m,
        delta=check_delta(delta),
        confidence=float(confidence),
        included=inc.astype(bool),
        scores=s,
    )


def canary_audit(
    run: Callable[[NDArray[np.bool_]], object],
    canaries: int,
    *,
    guesses_in: int,
    guesses_out: int,
    delta: float = 0.0,
    confidence: float = 0.95,
    source: RandomSource | None = None,
) -> CanaryAudit:
    """Run the one-run audit: draw the secret inclusions, run once, guess, certify.

    Parameters
    ----------
    run : callable
        ``run(included)`` runs the mechanism once with canary ``i`` present exactly when
        ``included[i]`` (a boolean array of length ``canaries``) and returns one score per
        canary (higher: more likely present), e.g. DP-SGD trained with the included canaries,
        scored by the negative loss of each canary on the final model.
    canaries : int
        ``m >= 1``.
    guesses_in, guesses_out : int
        ``k+`` and ``k-``, fixed in advance.
    delta : float, default 0.0
        The delta of the claim under test.
    confidence : float, default 0.95
    source : RandomSource, optional
        Draws the inclusions (Bernoulli(1/2) each); secure by default.

    Returns
    -------
    CanaryAudit

    Examples
    --------
    A release of one noisy bit per canary (ln 3-randomized response on each inclusion):

    >>> from dpcurator.mechanisms import randomized_response
    >>> from dpcurator.noise import InsecureSeededSource
    >>> src = InsecureSeededSource(5)
    >>> def run(included):
    ...     return randomized_response(included.astype(int), p_truth="3/4", source=src).value
    >>> audit = canary_audit(run, 4000, guesses_in=1000, guesses_out=1000, source=src)
    >>> 0.3 < audit.epsilon_lower_bound < 1.0986
    True
    """
    if not callable(run):
        raise InvalidParameterError("run", run, "must be callable")
    m = check_integer(canaries, "canaries", minimum=1)
    included = np.asarray(bernoulli("1/2", m, source=resolve_source(source)), dtype=np.bool_)
    scores = run(included.copy())
    return score_canaries(
        scores,
        included,
        guesses_in=guesses_in,
        guesses_out=guesses_out,
        delta=delta,
        confidence=confidence,
    )
