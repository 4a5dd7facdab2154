"""Accountants by name, for filters, ledgers and the command line."""

from __future__ import annotations

import importlib
from typing import Any

from dpcurator.accounting._accountant import Accountant
from dpcurator.accounting._composition import (
    AdvancedCompositionAccountant,
    BasicAccountant,
    OptimalHomogeneousAccountant,
)
from dpcurator.errors import InternalError, InvalidParameterError

__all__ = ["ACCOUNTANT_NAMES", "make_accountant"]

ACCOUNTANT_NAMES: tuple[str, ...] = ("basic", "advanced", "optimal", "rdp", "zcdp", "pld")
"""Names :func:`make_accountant` knows, each the ``name`` of its accountant class."""

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
        One of :data:`ACCOUNTANT_NAMES`.
    **kwargs
        Passed to the accountant's constructor (e.g. ``gaussian_delta`` for the classic ones).

    Returns
    -------
    Accountant
        A new accountant with nothing composed.

    Raises
    ------
    InvalidParameterError
        If ``name`` is not one of :data:`ACCOUNTANT_NAMES`.

    Examples
    --------
    >>> from dpcurator.accounting._registry import make_accountant
    >>> make_accountant("basic").name
    'basic'
    >>> make_accountant("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: name must be one of 'basic', ...; got 'nope'.
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
    valid = ", ".join(repr(n) for n in ACCOUNTANT_NAMES)
    raise InvalidParameterError("name", name, f"must be one of {valid}")
