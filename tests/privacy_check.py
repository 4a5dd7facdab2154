"""Empirical privacy auditing with Clopper-Pearson bounds (research note B).

Given ``N`` outputs of ``M(D)`` and ``N'`` of ``M(D')`` on neighbouring inputs and a family of
events ``S`` fixed before looking at the samples, every event gives a lower bound on epsilon that
holds with the stated confidence if ``M`` really is (epsilon, delta)-DP:

- pure DP: ``P[M(D) in S] <= e^eps P[M(D') in S]``, so ``eps >= ln(LCB(p) / UCB(p'))``;
- approximate DP, hypothesis-testing form (Kairouz, Oh and Viswanath 2015): a test that says
  "D" on ``S`` has ``TPR = p`` and ``FPR = p'`` with ``TPR <= e^eps FPR + delta``, so
  ``eps >= ln((LCB(p) - delta) / UCB(p'))``,

both directions (D over D' and D' over D). All one-sided Clopper-Pearson bounds share the
failure probability ``alpha`` through a union bound (``alpha / (4 |events|)`` each), so the
maximum over events and directions, ``eps_LB``, exceeds the true epsilon with probability at
most ``alpha``. A test asserts ``eps_LB <= claimed epsilon``; a negative control (a broken
variant) must give ``eps_LB > claimed epsilon``.

This module is a small helper for the test suite; a later issue turns it into
``dpcurator.audit``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

Indicator = Callable[[NDArray[np.float64]], NDArray[np.bool_]]


@dataclass(frozen=True)
class Event:
    """A set of outputs, given by its indicator function on an array of samples."""

    name: str
    contains: Indicator


def value_events(values: Iterable[float]) -> list[Event]:
    """Events ``{Y = v}``: one per output value (for discrete outputs)."""
    return [Event(f"Y == {v!r}", lambda y, v=v: y == v) for v in values]


def threshold_events(thresholds: Iterable[float]) -> list[Event]:
    """Events ``{Y >= t}`` and ``{Y < t}`` for each threshold (for numeric outputs)."""
    out: list[Event] = []
    for t in thresholds:
        out.append(Event(f"Y >= {t!r}", lambda y, t=t: y >= t))
        out.append(Event(f"Y < {t!r}", lambda y, t=t: y < t))
    return out


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds ``(LCB, UCB)``, each holding with prob. ``1 - alpha``."""
    if not 0 <= successes <= trials or trials == 0:
        raise ValueError(f"need 0 <= successes <= trials, trials > 0; got {successes}, {trials}")
    lower = (
        0.0 if successes == 0 else float(stats.beta.ppf(alpha, successes, trials - successes + 1))
    )
    upper = (
        1.0
        if successes == trials
        else float(stats.beta.ppf(1 - alpha, successes + 1, trials - successes))
    )
    return lower, upper


@dataclass(frozen=True)
class AuditResult:
    """The best lower bound found, with the event and counts that gave it."""

    epsilon_lower_bound: float
    event: str
    direction: str
    count: int
    count_other: int
    estimate: float
    """Point estimate ``ln(p / p')`` (or its delta-adjusted form) at the best event."""


def _bound(
    k: int, n: int, k_other: int, n_other: int, *, alpha: float, delta: float
) -> tuple[float, float]:
    lcb, _ = clopper_pearson(k, n, alpha)
    _, ucb = clopper_pearson(k_other, n_other, alpha)
    bound = math.log((lcb - delta) / ucb) if lcb > delta else -math.inf
    p, q = k / n, k_other / n_other
    estimate = (
        math.log((p - delta) / q) if p > delta and q > 0 else math.inf if p > delta else -math.inf
    )
    return bound, estimate


def audit(
    samples: Sequence[float] | NDArray[np.float64],
    samples_other: Sequence[float] | NDArray[np.float64],
    events: Sequence[Event],
    *,
    alpha: float = 0.05,
    delta: float = 0.0,
) -> AuditResult:
    """Largest confidence-correct epsilon lower bound over ``events`` and both directions.

    Parameters
    ----------
    samples, samples_other
        Outputs of ``M(D)`` and ``M(D')`` (independent runs).
    events
        Fixed in advance (never chosen from these samples).
    alpha
        Total failure probability of the bound (union bound over ``4 |events|`` CP bounds).
    delta
        The mechanism's claimed delta (0 for pure DP).
    """
    y = np.asarray(samples)
    y_other = np.asarray(samples_other)
    n, n_other = int(y.shape[0]), int(y_other.shape[0])
    per_bound = alpha / (4 * len(events))
    best = AuditResult(-math.inf, "", "", 0, 0, -math.inf)
    for event in events:
        k = int(np.count_nonzero(event.contains(y)))
        k_other = int(np.count_nonzero(event.contains(y_other)))
        for direction, (a, na, b, nb) in (
            ("D over D'", (k, n, k_other, n_other)),
            ("D' over D", (k_other, n_other, k, n)),
        ):
            bound, estimate = _bound(a, na, b, nb, alpha=per_bound, delta=delta)
            if bound > best.epsilon_lower_bound:
                best = AuditResult(bound, event.name, direction, a, b, estimate)
    return best
