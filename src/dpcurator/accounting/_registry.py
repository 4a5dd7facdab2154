"""Accountants by name, for filters, ledgers and the command line; open to new ones.

The built-in accountants are known by their short names; :func:`register_accountant` adds one
of your own (a factory that makes a fresh :class:`~dpcurator.accounting.Accountant`), which
every budget filter, ledger and session can then name. A new accountant should pass the
contract every built-in one passes (``tests/accounting/test_contract.py``: subclass
``AccountantContract`` with your factory).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from dpcurator.accounting._accountant import Accountant
from dpcurator.accounting._composition import (
    AdvancedCompositionAccountant,
    BasicAccountant,
    OptimalHomogeneousAccountant,
)
from dpcurator.errors import InternalError, InvalidParameterError

__all__ = ["ACCOUNTANT_NAMES", "accountant_names", "make_accountant", "register_accountant"]

ACCOUNTANT_NAMES: tuple[str, ...] = ("basic", "advanced", "optimal", "rdp", "zcdp", "pld")
"""The built-in accountants' names, each the ``name`` of its accountant class."""

_REGISTERED: dict[str, Callable[..., Accountant]] = {}


def register_accountant(name: str, factory: Callable[..., Accountant]) -> None:
    """Make ``make_accountant(name)`` (and filters, ledgers, sessions naming it) use ``factory``.

    ``factory(**kwargs)`` returns a fresh accountant whose ``name`` is ``name``. Built-in names
    cannot be replaced; registering a name again replaces the earlier factory.

    Raises
    ------
    InvalidParameterError
        For a built-in name, a name that is not a short identifier, or a factory that is not
        callable.

    Examples
    --------
    >>> from dpcurator.accounting import BasicAccountant
    >>> class Careful(BasicAccountant):
    ...     name = "careful"
    >>> register_accountant("careful", Careful)
    >>> make_accountant("careful").name, "careful" in accountant_names()
    ('careful', True)
    """
    if not isinstance(name, str) or not name.isidentifier() or len(name) > 40:
        raise InvalidParameterError("name", name, "must be a short identifier, e.g. 'mine'")
    if name in ACCOUNTANT_NAMES:
        raise InvalidParameterError("name", name, "is a built-in accountant: choose another")
    if not callable(factory):
        raise InvalidParameterError("factory", factory, "must be callable (e.g. the class)")
    _REGISTERED[name] = factory


def accountant_names() -> tuple[str, ...]:
    """Return every name :func:`make_accountant` knows: the built-in ones, then registered ones."""
    return ACCOUNTANT_NAMES + tuple(sorted(_REGISTERED))


_LAZY: dict[str, tuple[str, str]] = {
    "rdp": ("dpcurator.accounting._rdp", "RDPAccountant"),
    "zcdp": ("dpcurator.accounting._zcdp", "ZCDPAccountant"),
    "pld": ("dpcurator.accounting._pld", "PLDAccountant"),
}


def make_accountant(name: str, **kwargs: Any) -> Accountant:
    """Make a fresh, empty accountant from its short name.

    ======== ======================================================================
    name     accountant
    ======== ======================================================================
    basic    :class:`BasicAccountant` (sum of epsilons and deltas)
    advanced :class:`AdvancedCompositionAccountant` (Dwork, Rothblum, Vadhan 2010)
    optimal  :class:`OptimalHomogeneousAccountant` (Kairouz, Oh, Viswanath 2015)
    rdp      ``RDPAccountant`` (Renyi DP, Mironov 2017)
    zcdp     ``ZCDPAccountant`` (zero-concentrated DP, Bun and Steinke 2016)
    pld      ``PLDAccountant`` (privacy loss distributions)
    ======== ======================================================================

    Parameters
    ----------
    name : str
        One of :func:`accountant_names` (the built-in :data:`ACCOUNTANT_NAMES`, then any
        registered with :func:`register_accountant`).
    **kwargs
        Passed to the accountant's constructor (e.g. ``gaussian_delta`` for the classic ones).

    Returns
    -------
    Accountant
        A new accountant with nothing composed.

    Raises
    ------
    InvalidParameterError
        If ``name`` is not one of :func:`accountant_names`.

    Examples
    --------
    >>> from dpcurator.accounting._registry import make_accountant
    >>> make_accountant("basic").name
    'basic'
    >>> make_accountant("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: accountant must be one of 'basic', ...; got 'nope'.
    """
    if name == "basic":
        return BasicAccountant(**kwargs)
    if name == "advanced":
        return AdvancedCompositionAccountant(**kwargs)
    if name == "optimal":
        return OptimalHomogeneousAccountant(**kwargs)
    if isinstance(name, str) and name in _LAZY:
        # The other accountants live in heavier modules: imported only when asked for.
        module_name, class_name = _LAZY[name]
        accountant = getattr(importlib.import_module(module_name), class_name)(**kwargs)
        if not isinstance(accountant, Accountant):  # pragma: no cover - a broken module
            raise InternalError(f"{module_name}.{class_name} is not an Accountant.")
        return accountant
    factory = _REGISTERED.get(name) if isinstance(name, str) else None
    if factory is not None:
        made = factory(**kwargs)
        if not isinstance(made, Accountant) or made.name != name:
            raise InvalidParameterError(
                "accountant",
                name,
                f"was registered with a factory that does not make an Accountant named {name!r}",
            )
        return made
    valid = ", ".join(repr(n) for n in accountant_names())
    raise InvalidParameterError("accountant", name, f"must be one of {valid}")
