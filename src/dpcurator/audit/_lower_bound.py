r"""Empirical lower bounds on a mechanism's epsilon, with a stated confidence.

Run the mechanism on neighbouring inputs ``D`` and ``D'``; for an event ``S`` with
``p = P[M(D) in S]`` and ``p' = P[M(D') in S]``, (epsilon, delta)-DP requires

.. math:: p \le e^{\epsilon} p' + \delta, \qquad\text{so}\qquad
          \epsilon \ge \ln\frac{p - \delta}{p'}

(the hypothesis-testing form of DP, Kairouz, Oh and Viswanath 2015, Theorem 2.1: a test that
says "D" on ``S`` has true-positive rate ``p`` and false-positive rate ``p'``). With one-sided
Clopper-Pearson bounds ``LCB(p)`` and ``UCB(p')``, each failing with probability
``alpha/2`` (``alpha = 1 - confidence``),

.. math:: \epsilon_{LB} = \ln\frac{LCB(p) - \delta}{UCB(p')}

is below the true epsilon with probability at least ``confidence``, provided ``S`` was fixed
before the certification samples were drawn (research note B). The auditor chooses ``S``
automatically on a separate *selection* split (thresholds over the output as in DP-Sniper,
Bichsel, Steffen, Bogunovic and Vechev 2021; histogram bins and values sorted by their estimated
likelihood ratio; floating-point granularity, after Mironov 2012 and Haney et al. 2022; a
logistic-regression score for vector outputs), then certifies it on fresh samples, as in
Delta-Siege (Lokna et al. 2023). A lower bound above the claimed epsilon refutes the claim.

Examples
--------
>>> import numpy as np
>>> from dpcurator.mechanisms import laplace_mechanism
>>> from dpcurator.noise import InsecureSeededSource
>>> source = InsecureSeededSource(7)
>>> def mechanism(count, size):  # ``size`` runs at once; each coordinate is one release
...     return laplace_mechanism(np.full(size, float(count)), epsilon=1.0, sensitivity=1.0,
...                              changed_coordinates=1, source=source).value
>>> result = audit_mechanism(mechanism, 10, 11, samples=50_000, batched=True)
>>> 0.8 < result.epsilon_lower_bound <= 1.0
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator._stats import clopper_pearson_bounds
from dpcurator._validation import check_delta, check_epsilon, check_integer, check_probability
from dpcurator.audit._selection import (
    Candidates,
    Event,
    categorical_codes,
    categorical_family,
    custom_family,
    granularity_feature,
    histogram_family,
    logistic_score,
    selection_bounds,
    threshold_family,
)
from dpcurator.errors import InvalidParameterError

__all__ = [
    "EVENT_FAMILIES",
    "AuditResult",
    "audit_mechanism",
    "audit_samples",
    "clopper_pearson",
    "delta_lower_bound",
    "epsilon_lower_bound",
]

EVENT_FAMILIES = ("auto", "thresholds", "histogram", "values", "granularity")
"""Names accepted by ``events``: ``auto`` tries every family that fits the outputs."""

_FORWARD = "D over D'"
_BACKWARD = "D' over D"


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    r"""One-sided Clopper-Pearson bounds ``(LCB, UCB)`` on a binomial proportion.

    ``LCB = Beta^{-1}(alpha; k, n - k + 1)`` (0 when ``k = 0``) and
    ``UCB = Beta^{-1}(1 - alpha; k + 1, n - k)`` (1 when ``k = n``): each holds with probability
    at least ``1 - alpha`` (Clopper and Pearson 1934; exact, never below the nominal level).
    The scalar form of :func:`dpcurator._stats.clopper_pearson_bounds`, which computes it.

    Parameters
    ----------
    successes : int
        ``k``, in ``[0, trials]``.
    trials : int
        ``n >= 1``.
    alpha : float
        Failure probability of each one-sided bound, in (0, 1).

    Returns
    -------
    tuple of float

    Examples
    --------
    >>> lower, upper = clopper_pearson(0, 1000, 0.025)
    >>> lower, round(upper, 5)
    (0.0, 0.00368)
    """
    n = check_integer(trials, "trials", minimum=1)
    k = check_integer(successes, "successes", minimum=0)
    lower, upper = clopper_pearson_bounds(k, n, alpha)
    return float(lower), float(upper)


def _check_confidence(confidence: object) -> float:
    return check_probability(confidence, "confidence", open_left=True, open_right=True)


def epsilon_lower_bound(
    hits: int,
    trials: int,
    hits_other: int,
    trials_other: int,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> float:
    r"""Certified lower bound on epsilon from the counts of one fixed event.

    .. math:: \epsilon_{LB} = \max\left(0, \ln\frac{LCB(p) - \delta}{UCB(p')}\right),

    with ``p = hits / trials`` (runs of ``M(D)`` in the event), ``p' = hits_other /
    trials_other`` (runs of ``M(D')``) and Clopper-Pearson bounds each at level
    ``(1 - confidence)/2``. If ``M`` is (epsilon, delta)-DP and the event was chosen
    independently of these runs, ``P[epsilon_LB > epsilon] <= 1 - confidence`` (research note
    B; Kairouz, Oh and Viswanath 2015).

    Parameters
    ----------
    hits, trials : int
        Runs of ``M(D)`` in the event, and runs.
    hits_other, trials_other : int
        The same for ``M(D')``.
    delta : float, default 0.0
        The delta of the claim being tested.
    confidence : float, default 0.95

    Returns
    -------
    float
        The bound (0 when the counts show nothing).

    Examples
    --------
    Randomized response with ``P[truth] = 3/4`` is ln 3-DP (ln 3 = 1.0986):

    >>> round(epsilon_lower_bound(75_000, 100_000, 25_000, 100_000), 3)
    1.084
    """
    level = _check_confidence(confidence)
    dlt = check_delta(delta)
    alpha = (1.0 - level) / 2.0
    lcb, _ = clopper_pearson(hits, trials, alpha)
    _, ucb = clopper_pearson(hits_other, trials_other, alpha)
    if lcb <= dlt:
        return 0.0
    return max(0.0, math.log((lcb - dlt) / ucb))


def delta_lower_bound(
    hits: int,
    trials: int,
    hits_other: int,
    trials_other: int,
    *,
    epsilon: float,
    confidence: float = 0.95,
) -> float:
    r"""Certified lower bound on delta at a given epsilon, from the counts of one fixed event.

    .. math:: \delta_{LB}(\epsilon) = \max\left(0, LCB(p) - e^{\epsilon}\, UCB(p')\right)

    (the hockey-stick divergence of ``M(D)`` from ``M(D')`` is at least ``p - e^eps p'``;
    Clopper-Pearson bounds at level ``(1 - confidence)/2`` each).

    Examples
    --------
    >>> round(delta_lower_bound(75_000, 100_000, 25_000, 100_000, epsilon=1.0), 3)
    0.06
    """
    eps = check_epsilon(epsilon, allow_zero=True)
    alpha = (1.0 - _check_confidence(confidence)) / 2.0
    lcb, _ = clopper_pearson(hits, trials, alpha)
    _, ucb = clopper_pearson(hits_other, trials_other, alpha)
    return max(0.0, lcb - math.exp(eps) * ucb)


@dataclass(frozen=True)
class AuditResult:
    """What an audit certified, and how.

    Attributes
    ----------
    epsilon_lower_bound : float
        With probability at least ``confidence``, the mechanism is not (epsilon, delta)-DP for
        any epsilon below this (0 when nothing was found).
    delta : float
        The delta the bound was computed at.
    confidence : float
    event : str
        The distinguishing event, chosen on the selection split.
    direction : str
        ``"D over D'"`` (the event is likelier under ``D``) or ``"D' over D"``.
    hits, hits_other : int
        Certification runs in the event, on the favoured and on the other side.
    samples : int
        Certification runs per side.
    selection_samples : int
        Selection runs per side (used to choose the event, not in the bound).
    estimate : float
        Point estimate ``ln((p - delta)/p')`` at the event (``inf`` when ``p' = 0``).
    """

    epsilon_lower_bound: float
    delta: float
    confidence: float
    event: str
    direction: str
    hits: int
    hits_other: int
    samples: int
    selection_samples: int
    estimate: float

    def refutes(self, epsilon: float) -> bool:
        """Whether the audit refutes an epsilon claim (the lower bound exceeds it).

        >>> AuditResult(2.0, 0.0, 0.95, "Y > 1", "D over D'", 10, 1, 100, 100, 2.3).refutes(1.0)
        True
        """
        return self.epsilon_lower_bound > check_epsilon(epsilon, allow_zero=True)

    def delta_lower_bound(self, epsilon: float) -> float:
        """Certified lower bound on delta at ``epsilon`` for the same event and counts.

        >>> result = AuditResult(1.0, 0.0, 0.95, "S", "D over D'", 75_000, 25_000, 100_000,
        ...                      100_000, 1.1)
        >>> round(result.delta_lower_bound(1.0), 3)
        0.06
        """
        return delta_lower_bound(
            self.hits,
            self.samples,
            self.hits_other,
            self.samples,
            epsilon=epsilon,
            confidence=self.confidence,
        )


# -- outputs ---------------------------------------------------------------------------------
def _as_batch(raw: Any, size: int, name: str) -> NDArray[Any]:
    array = np.asarray(raw)
    if array.ndim == 0 or array.shape[0] != size:
        raise InvalidParameterError(
            name,
            f"<output of shape {array.shape}>",
            f"must give one output (or row) per run, {size} in all",
        )
    if array.ndim > 2:
        array = array.reshape(size, -1)
    return array


def _kind(batch: NDArray[Any]) -> str:
    if batch.dtype.kind in "OUSV":
        return "categorical"
    if batch.ndim == 2:
        return "rows"
    if batch.dtype.kind == "f":
        return "float"
    return "integer"


def _families(
    batches: list[NDArray[Any]], events: str, max_categories: int, bins: int
) -> list[Candidates]:
    x, y = batches[0], batches[1]
    kind = _kind(x)
    want = {events} if events != "auto" else set(EVENT_FAMILIES)
    out: list[Candidates | None] = []

    def identity(v: Any) -> NDArray[np.float64]:
        return np.asarray(v, dtype=np.float64)

    if kind in ("categorical", "rows"):
        codes = categorical_codes(x, batches)
        if want & {"values", "histogram"}:
            out.append(
                categorical_family(codes(x), codes(y), codes, "Y", max_categories=max_categories)
            )
        if kind == "rows" and x.dtype.kind in "biuf" and want & {"thresholds", "histogram"}:
            score = logistic_score(x.astype(np.float64), y.astype(np.float64))
            if "thresholds" in want:
                out.append(threshold_family(score(x), score(y), score, "score(Y)"))
            if "histogram" in want:
                out.append(histogram_family(x, y, score, "score(Y)", bins))
        return [c for c in out if c is not None]
    if "thresholds" in want:
        out.append(threshold_family(identity(x), identity(y), identity, "Y"))
    if "histogram" in want:
        out.append(histogram_family(x, y, identity, "Y", bins))
    if "values" in want:
        out.append(categorical_family(x, y, np.asarray, "Y", max_categories=max_categories))
    if kind == "float" and "granularity" in want:
        out.append(
            categorical_family(
                granularity_feature(x),
                granularity_feature(y),
                granularity_feature,
                "lowest_bit_exponent(Y)",
                max_categories=4096,
            )
        )
    return [c for c in out if c is not None]


def _check_events(events: object) -> str | list[Event]:
    if isinstance(events, str):
        if events not in EVENT_FAMILIES:
            raise InvalidParameterError("events", events, f"must be one of {EVENT_FAMILIES}")
        return events
    if isinstance(events, Sequence) and events and all(isinstance(e, Event) for e in events):
        return list(events)
    raise InvalidParameterError(
        "events", events, f"must be one of {EVENT_FAMILIES} or a non-empty list of Event"
    )


def audit_samples(
    selection: Any,
    selection_other: Any,
    certification: Any,
    certification_other: Any,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
    events: str | Sequence[Event] = "auto",
    max_categories: int = 256,
    bins: int = 64,
) -> AuditResult:
    r"""Choose a distinguishing event on one split of outputs and certify it on another.

    The four batches hold independent runs: ``selection`` and ``certification`` of ``M(D)``,
    ``selection_other`` and ``certification_other`` of ``M(D')`` (one output, or row, per run).
    Every candidate event (see :data:`EVENT_FAMILIES`) is scored in both directions on the
    selection split by the bound its frequencies would certify with as many certification runs;
    the best one is counted on the certification split and bounded with
    :func:`epsilon_lower_bound`. The selection split only chooses: the guarantee
    ``P[epsilon_LB > epsilon] <= 1 - confidence`` holds however many candidates were tried.

    Parameters
    ----------
    selection, selection_other, certification, certification_other : array_like
        Outputs: numbers (scalar outputs), rows (vector outputs), or labels (strings,
        categories). The two certification batches must have the same length.
    delta : float, default 0.0
        The delta of the claim under test (0: pure DP).
    confidence : float, default 0.95
    events : str or sequence of Event, default "auto"
        A family name from :data:`EVENT_FAMILIES`, or the caller's own events (chosen among on
        the selection split as well).
    max_categories : int, default 256
        Outputs with more distinct values (or rows) are not treated as categories.
    bins : int, default 64
        Quantile bins of the histogram family.

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> from dpcurator.mechanisms import randomized_response
    >>> from dpcurator.noise import InsecureSeededSource
    >>> src = InsecureSeededSource(3)
    >>> def rr(bit, n):
    ...     return randomized_response([bit] * n, epsilon=1.0, source=src).value
    >>> result = audit_samples(rr(0, 20_000), rr(1, 20_000), rr(0, 20_000), rr(1, 20_000))
    >>> 0.85 < result.epsilon_lower_bound <= 1.0, result.event
    (True, 'Y <= 0')
    """
    dlt = check_delta(delta)
    level = _check_confidence(confidence)
    chosen = _check_events(events)
    max_cat = check_integer(max_categories, "max_categories", minimum=2)
    bin_count = check_integer(bins, "bins", minimum=2)
    sel0 = _as_batch(selection, len(selection), "selection")
    sel1 = _as_batch(selection_other, len(selection_other), "selection_other")
    cert0 = _as_batch(certification, len(certification), "certification")
    cert1 = _as_batch(certification_other, len(certification_other), "certification_other")
    if cert0.shape[0] != cert1.shape[0] or cert0.shape[0] == 0:
        raise InvalidParameterError(
            "certification_other",
            f"<{cert1.shape[0]} runs>",
            f"must have as many runs as certification ({cert0.shape[0]}), at least one",
        )
    if sel0.shape[0] == 0 or sel1.shape[0] == 0:
        raise InvalidParameterError("selection", "<empty>", "must hold at least one run per side")
    if isinstance(chosen, list):
        families = [custom_family(chosen, sel0, sel1)]
    else:
        families = _families([sel0, sel1, cert0, cert1], chosen, max_cat, bin_count)
    if not families:
        raise InvalidParameterError(
            "events", events, f"gives no candidate event for outputs of dtype {sel0.dtype}"
        )
    trials = int(cert0.shape[0])
    # Score every candidate by the bound its selection counts certify simultaneously for all
    # candidates (Bonferroni over both directions): a conservative estimate of what the event
    # can certify, which does not chase the noise of rare events (winner's curse).
    total = 2 * sum(int(family.hits.size) for family in families)
    alpha_each = (1.0 - level) / (2.0 * max(total, 1))
    n0, n1 = int(sel0.shape[0]), int(sel1.shape[0])
    best: tuple[float, int, int, bool] = (-math.inf, 0, 0, True)
    for f_index, family in enumerate(families):
        for forward in (True, False):
            a, na, b, nb = (
                (family.hits, n0, family.hits_other, n1)
                if forward
                else (family.hits_other, n1, family.hits, n0)
            )
            bounds = selection_bounds(a, na, b, nb, alpha=alpha_each, delta=dlt)
            if bounds.size and float(bounds.max()) > best[0]:
                best = (float(bounds.max()), f_index, int(np.argmax(bounds)), forward)
    _, f_index, c_index, forward = best
    event = families[f_index].build(c_index)
    hits0 = int(np.count_nonzero(event.contains(cert0)))
    hits1 = int(np.count_nonzero(event.contains(cert1)))
    k, k_other = (hits0, hits1) if forward else (hits1, hits0)
    bound = epsilon_lower_bound(k, trials, k_other, trials, delta=dlt, confidence=level)
    p_hat, q_hat = k / trials, k_other / trials
    if p_hat <= dlt:
        estimate = -math.inf
    elif q_hat == 0:
        estimate = math.inf
    else:
        estimate = math.log((p_hat - dlt) / q_hat)
    return AuditResult(
        epsilon_lower_bound=bound,
        delta=dlt,
        confidence=level,
        event=event.name,
        direction=_FORWARD if forward else _BACKWARD,
        hits=k,
        hits_other=k_other,
        samples=trials,
        selection_samples=int(sel0.shape[0]),
        estimate=estimate,
    )


def _draw(
    mechanism: Callable[..., Any],
    dataset: Any,
    size: int,
    *,
    batched: bool,
    statistic: Callable[[Any], Any] | None,
) -> NDArray[Any]:
    raw = mechanism(dataset, size) if batched else [mechanism(dataset) for _ in range(size)]
    if statistic is not None:
        raw = statistic(raw if batched else np.asarray(raw))
    return _as_batch(raw, size, "mechanism" if statistic is None else "statistic")


def audit_mechanism(
    mechanism: Callable[..., Any],
    dataset: Any,
    neighbour: Any,
    *,
    samples: int = 100_000,
    selection_samples: int | None = None,
    delta: float = 0.0,
    confidence: float = 0.95,
    events: str | Sequence[Event] = "auto",
    statistic: Callable[[Any], Any] | None = None,
    batched: bool = False,
    max_categories: int = 256,
    bins: int = 64,
) -> AuditResult:
    r"""Lower-bound a mechanism's epsilon on two neighbouring inputs, with a confidence.

    Runs ``M(D)`` and ``M(D')`` ``selection_samples`` times each to choose the distinguishing
    event, and ``samples`` times each, afresh, to certify it (:func:`audit_samples`). The
    result's ``epsilon_lower_bound`` exceeds the mechanism's true epsilon (at ``delta``, for
    this pair of inputs) with probability at most ``1 - confidence``: a bound above the claimed
    epsilon refutes the claim. The bound is only as strong as the pair: pick neighbours that
    realise the worst case (a count moved by the full sensitivity, a utility vector that moves
    every score).

    Parameters
    ----------
    mechanism : callable
        ``mechanism(dataset)`` returns one output (a number, a vector, a label). With
        ``batched=True``, ``mechanism(dataset, size)`` returns ``size`` independent outputs at
        once (an array with one entry or row per run, or anything ``statistic`` accepts):
        vectorised mechanisms audit millions of runs in seconds. The mechanism draws its own
        noise (pass it a seeded source for a reproducible audit).
    dataset, neighbour : object
        ``D`` and ``D'``: whatever the mechanism takes.
    samples : int, default 100000
        Certification runs per side.
    selection_samples : int, optional
        Selection runs per side (default: ``samples``).
    delta : float, default 0.0
        The claim's delta: the bound is on epsilon at this delta.
    confidence : float, default 0.95
    events : str or sequence of Event, default "auto"
        See :func:`audit_samples`.
    statistic : callable, optional
        Maps a batch of outputs to one value (or row) per run before the events look at them,
        e.g. a feature that makes a structured output comparable.
    batched : bool, default False
    max_categories, bins : int
        See :func:`audit_samples`.

    Returns
    -------
    AuditResult

    Examples
    --------
    Counting with the project's geometric mechanism: neighbours differ by one.

    >>> from dpcurator.mechanisms import geometric_mechanism
    >>> from dpcurator.noise import InsecureSeededSource
    >>> src = InsecureSeededSource(11)
    >>> def count(n, size):
    ...     return geometric_mechanism([n] * size, epsilon=0.5, source=src).value
    >>> result = audit_mechanism(count, 100, 101, samples=40_000, batched=True)
    >>> 0.4 < result.epsilon_lower_bound <= 0.5
    True
    """
    if not callable(mechanism):
        raise InvalidParameterError("mechanism", mechanism, "must be callable")
    n_cert = check_integer(samples, "samples", minimum=1)
    n_sel = n_cert if selection_samples is None else selection_samples
    n_sel = check_integer(n_sel, "selection_samples", minimum=1)
    dlt = check_delta(delta)
    level = _check_confidence(confidence)
    chosen = _check_events(events)

    def draw(data: Any, size: int) -> NDArray[Any]:
        return _draw(mechanism, data, size, batched=bool(batched), statistic=statistic)

    sel0, sel1 = draw(dataset, n_sel), draw(neighbour, n_sel)
    cert0, cert1 = draw(dataset, n_cert), draw(neighbour, n_cert)
    return audit_samples(
        sel0,
        sel1,
        cert0,
        cert1,
        delta=dlt,
        confidence=level,
        events=chosen,
        max_categories=max_categories,
        bins=bins,
    )
