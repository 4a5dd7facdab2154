"""Budgets as filters, privacy odometers, and parallel composition.

A :class:`PrivacyFilter` holds a total :class:`~dpcurator.accounting.Budget` and an accountant,
and refuses a release that would exceed the budget *before* any noise is drawn: mechanisms call
:meth:`PrivacyFilter.spend` first and release only if it returns. A refused release spends
nothing. A :class:`PrivacyOdometer` has no budget and only tracks what was spent.
:func:`parallel_composition` turns releases on disjoint partitions of the data into one event.

Examples
--------
>>> from dpcurator.accounting import Budget, LaplaceEvent
>>> from dpcurator.accounting._filters import PrivacyFilter
>>> f = PrivacyFilter(Budget(1.0))
>>> f.spend(LaplaceEvent(scale=2.0))
Budget(epsilon=0.5, delta=0.0)
>>> f.spend(LaplaceEvent(scale=1.0))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dpcurator.errors.BudgetExceededError: Refused: ... Nothing was spent.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from fractions import Fraction
from typing import NamedTuple

from dpcurator._validation import ceil_float, check_delta, floor_float
from dpcurator.accounting._accountant import Accountant
from dpcurator.accounting._budget import Budget
from dpcurator.accounting._composition import BasicAccountant, approx_dp_guarantee
from dpcurator.accounting._events import (
    ApproxDPEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PrivacyEvent,
    PureDPEvent,
    ZCDPEvent,
)
from dpcurator.accounting._registry import make_accountant
from dpcurator.errors import (
    BudgetExceededError,
    InvalidParameterError,
    UnsupportedError,
    UnsupportedEventError,
)

__all__ = ["PrivacyFilter", "PrivacyOdometer", "parallel_composition"]


def _resolve(accountant: str | Accountant) -> Accountant:
    if isinstance(accountant, Accountant):
        return accountant
    if isinstance(accountant, str):
        return make_accountant(accountant)
    raise InvalidParameterError(
        "accountant", accountant, "must be an accountant name (str) or an Accountant"
    )


def _check_flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidParameterError(name, value, "must be True or False")
    return value


def _spent(accountant: Accountant, delta: float) -> Budget:
    """Read what ``accountant`` has spent at ``delta``.

    epsilon is ``accountant.get_epsilon(delta)``; delta is the least delta at which the
    accountant certifies that epsilon (``get_delta(epsilon)``, at most ``delta``; for basic
    composition it is the sum of the deltas). epsilon is ``math.inf`` when no finite epsilon
    is certified at ``delta``; delta is then ``delta``.
    """
    epsilon = accountant.get_epsilon(delta)
    if not math.isfinite(epsilon):
        return Budget(math.inf, delta)
    return Budget(epsilon, min(accountant.get_delta(epsilon), delta))


class _Reading(NamedTuple):
    """What an accountant has spent, read against a budget."""

    spent: Budget  # as reported: rounded up
    epsilon: Fraction | None  # the exact total (None: no finite epsilon is certified)
    delta: Fraction
    fits: bool  # whether it fits in the budget, decided exactly


def _read(accountant: Accountant, budget: Budget) -> _Reading:
    """Read ``accountant`` against ``budget``; basic composition is compared exactly.

    For :class:`BasicAccountant` the exact sums are compared with the budget's exact values
    (as Fractions), so a total that exceeds the budget by less than an ulp is refused. Other
    accountants report floats that are upper bounds of the exact values; those are compared.
    """
    if isinstance(accountant, BasicAccountant):
        eps, delta = accountant.exact_sums
        if delta <= Fraction(budget.delta):
            spent = Budget(ceil_float(eps), ceil_float(delta))
        else:
            spent = Budget(math.inf, budget.delta)
        fits = not budget.is_finite or (
            eps <= Fraction(budget.epsilon) and delta <= Fraction(budget.delta)
        )
        return _Reading(spent, eps, delta, fits)
    spent = _spent(accountant, budget.delta)
    exact_eps = Fraction(spent.epsilon) if spent.is_finite else None
    return _Reading(spent, exact_eps, Fraction(spent.delta), spent.epsilon <= budget.epsilon)


class PrivacyFilter:
    r"""A privacy budget that refuses any release that would exceed it.

    The filter holds an accountant and a total budget (epsilon, delta). :meth:`spend` composes an
    event only if, after it, the accountant certifies

    .. math:: \text{accountant.get\_epsilon}(\delta_{budget}) \le \epsilon_{budget},

    (which also requires the deltas to fit), and otherwise raises
    :class:`~dpcurator.errors.BudgetExceededError` with what was requested and what is left,
    having spent nothing. Mechanisms call :meth:`spend` before drawing any noise.

    The decision is exact. With basic composition a release is accepted iff the exact
    (rational) sums of epsilons and deltas stay within the budget's exact values: a total that
    exceeds the budget by 1e-17 is refused. Other accountants report floats that are upper
    bounds of what they certify (rounded up, with margins for floating-point error), and those
    are compared. :attr:`spent` is rounded up, :attr:`remaining` rounded down (never negative),
    and :attr:`spent_exact` gives the exact totals.

    The whole interaction is (epsilon, delta)-DP only if the accountant's composition theorem
    covers the way releases were chosen. With ``adaptive_parameters=True`` (the default) the
    analyst may choose each release's privacy parameters after seeing earlier answers; that is
    covered by privacy filters for basic composition (Rogers, Roth, Ullman and Vadhan 2016) and
    zCDP (Feldman and Zrnic 2021; Whitehouse, Ramdas, Rogers and Wu 2023), the accountants with
    ``fully_adaptive = True``. Other accountants' theorems need every release's parameters fixed
    before the first release; the filter then refuses to be built unless the caller declares that
    with ``adaptive_parameters=False``, so that no one gets an invalid guarantee by accident.

    The filter owns its accountant: compose events through :meth:`spend` only. It is
    thread-safe (one lock around check and compose).

    Parameters
    ----------
    budget : Budget
        The total budget.
    accountant : str or Accountant, default "basic"
        An accountant name for :func:`~dpcurator.accounting._registry.make_accountant` (a fresh
        one is made), or an accountant instance (what it already holds counts as spent).
    adaptive_parameters : bool, default True
        Whether privacy parameters may be chosen adaptively (see above).

    Raises
    ------
    InvalidParameterError
        For a bad budget or accountant, for ``adaptive_parameters=True`` with an accountant
        that is not fully adaptive, or for an accountant that has already spent more than
        ``budget``.

    Examples
    --------
    >>> from dpcurator.accounting import ApproxDPEvent, Budget
    >>> from dpcurator.accounting._filters import PrivacyFilter
    >>> f = PrivacyFilter(Budget(1.0, 1e-6))
    >>> f.check(ApproxDPEvent(0.25, 1e-7))  # what it would leave; nothing is spent
    Budget(epsilon=0.75, delta=9e-07)
    >>> f.spend(ApproxDPEvent(0.25, 1e-7))
    Budget(epsilon=0.75, delta=9e-07)
    >>> f.spent
    Budget(epsilon=0.25, delta=1e-07)
    >>> PrivacyFilter(Budget(1.0, 1e-6), "advanced")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: adaptive_parameters must be False ...
    >>> PrivacyFilter(Budget(1.0, 1e-6), "advanced", adaptive_parameters=False).accountant.name
    'advanced'
    """

    def __init__(
        self,
        budget: Budget,
        accountant: str | Accountant = "basic",
        *,
        adaptive_parameters: bool = True,
    ) -> None:
        if not isinstance(budget, Budget):
            raise InvalidParameterError("budget", budget, "must be a Budget")
        adaptive = _check_flag(adaptive_parameters, "adaptive_parameters")
        acc = _resolve(accountant)
        if adaptive and not acc.fully_adaptive:
            raise InvalidParameterError(
                "adaptive_parameters",
                adaptive_parameters,
                f"must be False to use the {acc.name!r} accountant in a filter: its composition "
                "theorem holds only when every release's privacy parameters are fixed before "
                "the first release. Pass adaptive_parameters=False to declare that they are, or "
                "use a fully adaptive accountant ('basic' or 'zcdp')",
            )
        self._budget = budget
        self._accountant = acc
        self._adaptive = adaptive
        self._lock = threading.Lock()
        self._reading = _read(acc, budget)
        if not self._reading.fits:
            raise InvalidParameterError(
                "accountant",
                acc,
                f"has already spent {self._reading.spent}, more than the budget {budget}",
            )

    @property
    def budget(self) -> Budget:
        """The total budget."""
        return self._budget

    @property
    def accountant(self) -> Accountant:
        """The accountant the filter composes into (do not compose into it directly)."""
        return self._accountant

    @property
    def adaptive_parameters(self) -> bool:
        """Whether the filter was declared valid for adaptively chosen privacy parameters."""
        return self._adaptive

    @property
    def spent(self) -> Budget:
        """What was spent: the accountant's epsilon at the budget's delta, and the delta it uses.

        For basic composition this is (sum of epsilons, sum of deltas), each rounded up to a
        float (never to the nearest: a sum of 1 + 1e-17 reads 1.0000000000000002). For tighter
        accountants the delta is the budget's delta, at which epsilon is read off.
        """
        with self._lock:
            return self._reading.spent

    @property
    def spent_exact(self) -> tuple[Fraction, Fraction]:
        """What was spent as exact rationals ``(epsilon, delta)``.

        For basic composition, the exact sums of the events' epsilons and deltas (the
        decisions compare these with the budget). For other accountants, :attr:`spent`'s
        floats (upper bounds of what they certify) as Fractions.

        Raises
        ------
        UnsupportedError
            If no finite epsilon is certified at the budget's delta (possible only with an
            unlimited budget, which never refuses).
        """
        with self._lock:
            reading = self._reading
        if reading.epsilon is None:
            raise UnsupportedError(
                f"No finite epsilon is certified at the budget's delta {self._budget.delta!r}: "
                f"spent is {reading.spent}, which has no exact value."
            )
        return reading.epsilon, reading.delta

    @property
    def remaining(self) -> Budget:
        """``budget - spent``, computed exactly and rounded down (``inf`` stays ``inf``).

        It is never negative, and never above the exact difference. With a tight accountant
        (PLD, RDP ...) the remaining delta is 0 once anything with a delta was spent, because
        the budget's delta is where epsilon is read off; a further release may still fit:
        :meth:`check` and :meth:`spend` decide with the accountant.
        """
        with self._lock:
            return self._remaining(self._reading)

    def _remaining(self, reading: _Reading) -> Budget:
        budget = self._budget
        zero = Fraction(0)
        if not budget.is_finite:
            eps = math.inf
        elif reading.epsilon is None:  # pragma: no cover - refused for a finite budget
            eps = 0.0
        else:
            eps = floor_float(max(Fraction(budget.epsilon) - reading.epsilon, zero))
        return Budget(eps, floor_float(max(Fraction(budget.delta) - reading.delta, zero)))

    def _try(self, event: PrivacyEvent) -> tuple[Accountant, _Reading]:
        """Compose ``event`` into a copy; raise BudgetExceededError if it would not fit."""
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError("event", event, "must be a PrivacyEvent")
        trial = self._accountant.copy().compose(event)
        reading = _read(trial, self._budget)
        if not reading.fits:
            after = reading.spent
            budget = self._budget
            detail = f"epsilon {after.epsilon!r} at the budget's delta {budget.delta!r}"
            if not math.isfinite(after.epsilon) and math.isfinite(budget.epsilon):
                needed = trial.get_delta(budget.epsilon)
                detail += f" (at epsilon {budget.epsilon!r} it would need delta {needed!r})"
            remaining = self._remaining(self._reading)
            raise BudgetExceededError(
                f"Refused: {event!r} would bring the total spent to {detail} with the "
                f"{trial.name!r} accountant, over the budget {budget}; remaining: {remaining}. "
                "Nothing was spent.",
                remaining=remaining,
                requested=after,
            )
        return trial, reading

    def check(self, event: PrivacyEvent) -> Budget:
        """Return what would remain after spending ``event``, without spending it.

        Raises
        ------
        BudgetExceededError
            If ``event`` would not fit (as :meth:`spend` would).
        UnsupportedEventError
            If the accountant cannot account for ``event``.
        """
        with self._lock:
            _, after = self._try(event)
            return self._remaining(after)

    def spend(self, event: PrivacyEvent) -> Budget:
        """Compose ``event`` if it fits in the budget; returns what remains.

        Raises
        ------
        BudgetExceededError
            If the release would exceed the budget; nothing is spent then, and the error's
            ``remaining`` and ``requested`` say what is left and what the total would have been.
        UnsupportedEventError
            If the accountant cannot account for ``event`` (nothing is spent).
        """
        with self._lock:
            _, after = self._try(event)
            self._accountant.compose(event)
            self._reading = after
            return self._remaining(after)

    def __repr__(self) -> str:
        return (
            f"PrivacyFilter(budget={self._budget}, accountant={self._accountant.name!r}, "
            f"spent={self._reading.spent})"
        )


class PrivacyOdometer:
    """Tracks the privacy spent so far at a fixed delta, with no budget (Rogers et al. 2016).

    :attr:`spent` is ``(accountant.get_epsilon(delta), delta used)`` after every release. With
    adaptively chosen privacy parameters (``adaptive_parameters=True``, the default) the running
    total is a valid odometer for basic composition (Rogers, Roth, Ullman and Vadhan 2016), which
    is the only accountant allowed then: odometers for tighter accountants cost more than their
    filters (Rogers et al. 2016 prove the separation; Whitehouse et al. 2023). With
    ``adaptive_parameters=False`` (the parameters of the whole sequence were fixed in advance)
    any accountant may be used.

    Parameters
    ----------
    accountant : str or Accountant, default "basic"
        An accountant name or instance (what it already holds counts as spent).
    delta : float
        The delta at which epsilon is read, in [0, 1).
    adaptive_parameters : bool, default True
        Whether privacy parameters may be chosen adaptively.

    Examples
    --------
    >>> from dpcurator.accounting import ApproxDPEvent, PureDPEvent
    >>> from dpcurator.accounting._filters import PrivacyOdometer
    >>> odo = PrivacyOdometer(delta=1e-6)
    >>> odo.spend(PureDPEvent(0.5))
    Budget(epsilon=0.5, delta=0.0)
    >>> odo.spend(ApproxDPEvent(0.25, 1e-7))
    Budget(epsilon=0.75, delta=1e-07)
    """

    def __init__(
        self,
        accountant: str | Accountant = "basic",
        *,
        delta: float,
        adaptive_parameters: bool = True,
    ) -> None:
        self._delta = check_delta(delta)
        adaptive = _check_flag(adaptive_parameters, "adaptive_parameters")
        acc = _resolve(accountant)
        if adaptive and not isinstance(acc, BasicAccountant):
            raise InvalidParameterError(
                "adaptive_parameters",
                adaptive_parameters,
                f"must be False to use the {acc.name!r} accountant in an odometer: only basic "
                "composition gives a valid odometer when privacy parameters are chosen "
                "adaptively. Pass adaptive_parameters=False to declare that they are fixed in "
                "advance, or use 'basic'",
            )
        self._accountant = acc
        self._lock = threading.Lock()
        self._spent = _spent(acc, self._delta)

    @property
    def delta(self) -> float:
        """The delta at which epsilon is read."""
        return self._delta

    @property
    def accountant(self) -> Accountant:
        """The accountant the odometer composes into."""
        return self._accountant

    @property
    def spent(self) -> Budget:
        """(epsilon at :attr:`delta`, delta used); epsilon is ``math.inf`` if none is certified."""
        with self._lock:
            return self._spent

    def spend(self, event: PrivacyEvent) -> Budget:
        """Compose ``event`` and return the new total spent (never refuses).

        Raises
        ------
        UnsupportedEventError
            If the accountant cannot account for ``event`` (nothing is composed).
        """
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError("event", event, "must be a PrivacyEvent")
        with self._lock:
            self._accountant.compose(event)
            self._spent = _spent(self._accountant, self._delta)
            return self._spent

    def __repr__(self) -> str:
        return f"PrivacyOdometer(accountant={self._accountant.name!r}, spent={self._spent})"


def parallel_composition(events: Iterable[PrivacyEvent]) -> PrivacyEvent:
    r"""One event for releases made on disjoint partitions of the data.

    If each mechanism :math:`M_i` runs only on partition :math:`D_i` of a partition of the data
    fixed independently of it (by a public key, say), and adding or removing one privacy unit
    changes exactly one partition, then the releases together are as private as the least
    private of them: :math:`\max_i \epsilon_i` (lecture 003, "Parallel Composition"; McSherry
    2009, Theorem 4). For (epsilon_i, delta_i) guarantees this gives
    :math:`(\max_i\epsilon_i, \max_i\delta_i)`.

    Neighbour relation: add/remove one unit, which touches one partition. Under replace-one, a
    unit whose partition key can change touches two partitions (a removal from one, an addition
    to another); with add/remove guarantees per partition, account for that as the sequential
    composition of the two largest events instead.

    What is returned:

    - the one event, if all (non no-op) events are equal or there is only one;
    - within one family whose guarantee is ordered by one number, the dominating event: the
      largest :class:`PureDPEvent`, :class:`LaplaceEvent` (its profile increases in
      sensitivity/scale), :class:`ZCDPEvent` (rho), or the :class:`GaussianEvent` with the
      smallest noise multiplier (larger ones are post-processings of it);
    - otherwise every event is reduced to (epsilon, delta) as the classic accountants do and the
      result is ``PureDPEvent(max eps)`` if all deltas are 0, else ``ApproxDPEvent(max eps,
      max delta)`` (the worst pair of that guarantee, which dominates every input).

    Parameters
    ----------
    events : iterable of PrivacyEvent
        One event per partition (at least one).

    Returns
    -------
    PrivacyEvent
        An event that dominates every input.

    Raises
    ------
    UnsupportedEventError
        If the events mix families and some have no (epsilon, delta) guarantee of their own
        (Gaussian, zCDP); compose them sequentially (a valid, looser bound) or convert each to an
        :class:`ApproxDPEvent` first.

    Examples
    --------
    >>> from dpcurator.accounting import ApproxDPEvent, LaplaceEvent, PureDPEvent
    >>> from dpcurator.accounting._filters import parallel_composition
    >>> parallel_composition([LaplaceEvent(scale=10.0), LaplaceEvent(scale=5.0)])
    LaplaceEvent(scale=5.0, sensitivity=1.0)
    >>> parallel_composition([PureDPEvent(0.5), ApproxDPEvent(0.25, 1e-6)])
    ApproxDPEvent(epsilon=0.5, delta=1e-06)
    """
    items = list(events) if not isinstance(events, PrivacyEvent) else None
    if items is None:
        raise InvalidParameterError("events", events, "must be an iterable of PrivacyEvent")
    if not items:
        raise InvalidParameterError("events", items, "must hold at least one event")
    for i, event in enumerate(items):
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError(f"events[{i}]", event, "must be a PrivacyEvent")
    real = [e for e in items if not isinstance(e, NoOpEvent)]
    if not real:
        return NoOpEvent()
    if all(e == real[0] for e in real):
        return real[0]
    pure = [e for e in real if isinstance(e, PureDPEvent)]
    if len(pure) == len(real):
        return max(pure, key=lambda e: e.epsilon)
    laplace = [e for e in real if isinstance(e, LaplaceEvent)]
    if len(laplace) == len(real):
        return max(laplace, key=lambda e: e.epsilon)
    zcdp = [e for e in real if isinstance(e, ZCDPEvent)]
    if len(zcdp) == len(real):
        return max(zcdp, key=lambda e: e.rho)
    gaussian = [e for e in real if isinstance(e, GaussianEvent)]
    if len(gaussian) == len(real):
        return min(gaussian, key=lambda e: e.noise_multiplier)
    try:
        pairs = [approx_dp_guarantee(e) for e in real]
    except UnsupportedEventError as exc:
        raise UnsupportedEventError(
            "parallel_composition cannot express these events as one: they mix families and "
            f"some have no (epsilon, delta) guarantee of their own ({exc}). Compose them "
            "sequentially (a valid, looser bound) or convert each to an ApproxDPEvent first."
        ) from exc
    eps = max(p[0] for p in pairs)
    delta = max(p[1] for p in pairs)
    if delta > 0.0:
        return ApproxDPEvent(eps, delta)
    return PureDPEvent(eps) if eps > 0.0 else NoOpEvent()
