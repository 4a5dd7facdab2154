"""The ledger store's records: who a key is, a charge, the rows the steward and analysts read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dpcurator.accounting import Budget, ComposedEvent, PrivacyEvent
from dpcurator.service._backends import Row

__all__ = [
    "STEWARD",
    "AuditRecord",
    "Charge",
    "ChargeRecord",
    "Identity",
    "Refusal",
    "charge_record",
    "combined",
]

STEWARD = "*steward"
"""The owner of steward keys (not an analyst's name: names cannot start with ``*``)."""


def combined(events: Sequence[PrivacyEvent]) -> PrivacyEvent:
    """Return the one event a charge composes (as :class:`~dpcurator.curator.Ledger` does)."""
    return events[0] if len(events) == 1 else ComposedEvent(tuple(events))


@dataclass(frozen=True)
class Identity:
    """Who a verified key belongs to: an analyst's name, or :data:`STEWARD`.

    ``grants``: the tables the analyst had a budget on when the key was checked (read with
    the key, in the same statement); None when not read.
    """

    owner: str
    key_id: str
    grants: tuple[str, ...] | None = None

    @property
    def is_steward(self) -> bool:
        """Whether the key is a steward's."""
        return self.owner == STEWARD


@dataclass(frozen=True)
class Charge:
    """A charge as :meth:`LedgerStore.charge` made (or found, for a repeated request id).

    Attributes
    ----------
    id : int
        The charge's ledger entry (increasing, never reused).
    charged, spent, remaining : Budget
        The query's charge to the analyst's budget on the table, what the analyst has spent
        there after it, and what is left.
    table_remaining : Budget
        What is left of the table's global budget after it.
    answer : str or None
        The stored answer of a repeated request (None: not answered yet).
    repeated : bool
        True when the request id had been charged before (nothing new was charged).
    """

    id: int
    charged: Budget
    spent: Budget
    remaining: Budget
    table_remaining: Budget
    answer: str | None = None
    repeated: bool = False


@dataclass(frozen=True)
class ChargeRecord:
    """One row of the charges, as the steward and (their own) the analyst read it."""

    id: int
    time: str
    analyst: str
    table: str
    query: str
    epsilon: float
    delta: float
    charged: Budget
    answered: bool


@dataclass(frozen=True)
class Refusal:
    """A refused query (nothing was read or spent)."""

    id: int
    time: str
    analyst: str
    table: str
    query: str
    reason: str


@dataclass(frozen=True)
class AuditRecord:
    """One steward action."""

    id: int
    time: str
    actor: str
    action: str
    detail: str


def charge_record(row: Row) -> ChargeRecord:
    return ChargeRecord(
        id=int(row[0]),
        time=str(row[1]),
        analyst=str(row[2]),
        table=str(row[3]),
        query=str(row[4]),
        epsilon=float(row[5]),
        delta=float(row[6]),
        charged=Budget(float(row[7]), float(row[8])),
        answered=bool(row[9]),
    )
