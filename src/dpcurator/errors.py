"""The one error hierarchy of dpcurator.

Every error the library raises on purpose is a :class:`DPError`. Messages are full sentences
that name the argument and the value, and say what would work instead.

Examples
--------
>>> from dpcurator import DPError, InvalidParameterError
>>> issubclass(InvalidParameterError, DPError) and issubclass(InvalidParameterError, ValueError)
True
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "DPError",
    "InfeasibleConstraintsError",
    "InternalError",
    "InvalidParameterError",
    "QueryError",
    "QueryFailedError",
    "UnsupportedError",
    "UnsupportedEventError",
]


class DPError(Exception):
    """Base class of every error raised by dpcurator on purpose."""


class InvalidParameterError(DPError, ValueError, TypeError):
    """A parameter has a value that is out of its domain (``epsilon <= 0``, a NaN bound ...).

    Parameters
    ----------
    name : str
        The argument's name as the caller wrote it.
    value : object
        The offending value.
    requirement : str
        What the value must satisfy, as a phrase ("must be > 0").
    """

    def __init__(self, name: str, value: object, requirement: str) -> None:
        self.name = name
        self.value = value
        self.requirement = requirement
        super().__init__(f"{name} {requirement}; got {value!r}.")


class UnsupportedError(DPError):
    """An operation that dpcurator does not support, with what would work instead."""


class UnsupportedEventError(UnsupportedError):
    """An accountant was given a privacy event it cannot account for."""


class QueryError(DPError, ValueError):
    """A query the curator refuses: not a supported aggregate, or it names what was not declared.

    Raised before any private data is read and before anything is spent. The message says why
    and what would work instead.
    """


class QueryFailedError(QueryError):
    """A query was charged, read the data and then failed.

    The message is one fixed text whatever the reason (which could depend on the data), the
    exception carries no cause or context, and the charge is never refunded: "failed or not"
    and why are otherwise bits about the data that no noise protects.
    """


class InfeasibleConstraintsError(DPError, ValueError):
    """No integer point satisfies the domains, the invariants and consistency together.

    Raised by the hierarchical post-processing before it solves anything. The message names the
    node where the constraints clash and the two intervals that do not meet.
    """


class BudgetExceededError(DPError):
    """A release was refused because it would exceed the privacy budget.

    Nothing was spent and no noise was drawn. ``remaining`` holds what is left (an object with
    ``epsilon`` and ``delta``), ``requested`` what the refused release would have cost in total.
    """

    def __init__(self, message: str, *, remaining: object = None, requested: object = None):
        self.remaining = remaining
        self.requested = requested
        super().__init__(message)


class InternalError(DPError, AssertionError):
    """An internal invariant failed: this is a bug in dpcurator, please report it."""
