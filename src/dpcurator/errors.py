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
    "MissingDependencyError",
    "PrivacyWarning",
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


class MissingDependencyError(UnsupportedError, ImportError):
    """A part of dpcurator needs an optional dependency that is not installed.

    Also an :class:`ImportError`, so ``except ImportError`` around an optional import still
    works. The message says what to install.

    Parameters
    ----------
    feature : str
        What needs it, as the user wrote it (``"dpcurator.learn"``).
    package : str
        The missing distribution's name on PyPI (``"scikit-learn"``).
    extra : str
        dpcurator's extra that installs it (``"learn"``).

    Examples
    --------
    >>> error = MissingDependencyError("dpcurator.learn", "scikit-learn", "learn")
    >>> print(error)
    dpcurator.learn needs scikit-learn, which is not installed: pip install 'dpcurator[learn]' \
(or pip install scikit-learn).
    >>> isinstance(error, ImportError), error.name
    (True, 'scikit-learn')
    """

    def __init__(self, feature: str, package: str, extra: str) -> None:
        self.feature = feature
        self.package = package
        self.extra = extra
        super().__init__(
            f"{feature} needs {package}, which is not installed: pip install "
            f"'dpcurator[{extra}]' (or pip install {package})."
        )
        self.name = package


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


class PrivacyWarning(UserWarning):
    """A default or a use that may protect less, or answer less, than the user expects.

    Warned, not raised: the release is still differentially private as declared, but the
    declaration rests on a default the user may not have chosen (contribution bounds left at
    one row per unit silently drop the rest of each unit's rows). Say the value explicitly to
    silence it, or filter it deliberately: ``warnings.simplefilter("ignore", PrivacyWarning)``.

    Examples
    --------
    >>> import warnings
    >>> from dpcurator import PrivacyWarning
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("a default was used", PrivacyWarning, stacklevel=1)
    >>> caught[0].category.__name__
    'PrivacyWarning'
    """
