"""The accountant interface: every accountant consumes the same events.

An accountant is a small stateful object (in the manner of dp_accounting): ``compose`` events
into it, then ask ``get_epsilon(delta)`` or ``get_delta(epsilon)``. ``supports`` answers whether
an event can be accounted without raising.

Examples
--------
>>> from dpcurator.accounting import BasicAccountant, LaplaceEvent
>>> acc = BasicAccountant().compose(LaplaceEvent(scale=10.0), count=3)
>>> round(acc.get_epsilon(0.0), 12)
0.3
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import ClassVar, Self

from dpcurator._validation import check_delta, check_epsilon, check_integer
from dpcurator.accounting._events import PrivacyEvent
from dpcurator.errors import InvalidParameterError, UnsupportedEventError

__all__ = ["Accountant"]


class Accountant(ABC):
    """Base class of accountants.

    Attributes
    ----------
    name : str
        Short name used by the command line and in ledgers (``"basic"``, ``"pld"`` ...).
    fully_adaptive : bool
        True when a budget filter built on this accountant stays valid even if the analyst
        chooses each release's privacy parameters after seeing earlier answers (fully adaptive
        composition, Rogers, Roth, Ullman and Vadhan 2016; Feldman and Zrnic 2021). Accountants
        whose theorem needs the parameters fixed in advance set it to False.
    """

    name: ClassVar[str] = "accountant"
    fully_adaptive: ClassVar[bool] = False

    def __init__(self) -> None:
        self._events: list[tuple[PrivacyEvent, int]] = []

    @property
    def events(self) -> tuple[tuple[PrivacyEvent, int], ...]:
        """The events composed so far, each with its count."""
        return tuple(self._events)

    def supports(self, event: PrivacyEvent) -> bool:
        """Whether ``event`` can be composed into this accountant."""
        try:
            self._check_supported(event)
        except UnsupportedEventError:
            return False
        return True

    def compose(self, event: PrivacyEvent, count: int = 1) -> Self:
        """Compose ``event`` ``count`` times; returns ``self`` so calls can chain.

        Raises
        ------
        UnsupportedEventError
            If this accountant cannot account for ``event`` (nothing is composed then).
        """
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError("event", event, "must be a PrivacyEvent")
        count = check_integer(count, "count", minimum=0)
        self._check_supported(event)
        if count:
            self._events.append((event, count))
            self._on_compose(event, count)
        return self

    def copy(self) -> Self:
        """Return an independent copy (used by filters to try a release before spending).

        Events are frozen, so the copy shares them (they are not deep-copied); everything else,
        including running state, is copied deeply.
        """
        memo: dict[int, object] = {id(event): event for event, _ in self._events}
        return copy.deepcopy(self, memo)

    def get_epsilon(self, delta: float) -> float:
        """Smallest epsilon this accountant certifies at ``delta`` for everything composed."""
        return self._epsilon(check_delta(delta))

    def get_delta(self, epsilon: float) -> float:
        """Smallest delta this accountant certifies at ``epsilon`` for everything composed."""
        return self._delta(check_epsilon(epsilon, allow_zero=True))

    # -- to implement ---------------------------------------------------------------------
    @abstractmethod
    def _check_supported(self, event: PrivacyEvent) -> None:
        """Raise :class:`UnsupportedEventError` (naming the event) if unsupported."""

    def _on_compose(self, event: PrivacyEvent, count: int) -> None:  # noqa: B027
        """Update running state after ``event`` was appended (optional hook)."""

    @abstractmethod
    def _epsilon(self, delta: float) -> float: ...

    @abstractmethod
    def _delta(self, epsilon: float) -> float: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}(events={len(self._events)})"
