"""Parameter checks shared by every layer: one place, one wording.

Each check returns the value converted to the type the caller works with and raises
:class:`~dpcurator.errors.InvalidParameterError` naming the argument and the value otherwise.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

from dpcurator.errors import InvalidParameterError

__all__ = [
    "check_delta",
    "check_epsilon",
    "check_finite",
    "check_integer",
    "check_positive",
    "check_probability",
    "check_rational",
]


def _real(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(name, value, "must be a real number")
    out = float(value)
    if math.isnan(out):
        raise InvalidParameterError(name, value, "must be a number, not NaN")
    return out


def check_finite(value: object, name: str) -> float:
    """Return ``value`` as a float; it must be a finite real number.

    >>> check_finite(2, "bound")
    2.0
    """
    out = _real(value, name)
    if not math.isfinite(out):
        raise InvalidParameterError(name, value, "must be finite")
    return out


def check_positive(value: object, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float; it must be finite and > 0 (>= 0 with ``allow_zero``).

    >>> check_positive(0.5, "sensitivity")
    0.5
    """
    out = check_finite(value, name)
    if out < 0 or (out == 0 and not allow_zero):
        raise InvalidParameterError(name, value, "must be >= 0" if allow_zero else "must be > 0")
    return out


def check_epsilon(value: object, name: str = "epsilon", *, allow_zero: bool = False) -> float:
    """Return a privacy parameter epsilon (natural-log units): finite and > 0.

    >>> check_epsilon(1)
    1.0
    """
    return check_positive(value, name, allow_zero=allow_zero)


def check_delta(value: object, name: str = "delta") -> float:
    """Return a privacy parameter delta: a probability in [0, 1).

    >>> check_delta(1e-5)
    1e-05
    """
    out = _real(value, name)
    if not 0.0 <= out < 1.0:
        raise InvalidParameterError(name, value, "must be in [0, 1)")
    return out


def check_probability(
    value: object, name: str, *, open_left: bool = False, open_right: bool = False
) -> float:
    """Return a probability in [0, 1] (ends excluded on request).

    >>> check_probability(0.25, "p")
    0.25
    """
    out = _real(value, name)
    lo_ok = out > 0 if open_left else out >= 0
    hi_ok = out < 1 if open_right else out <= 1
    if not (lo_ok and hi_ok):
        interval = f"{'(' if open_left else '['}0, 1{')' if open_right else ']'}"
        raise InvalidParameterError(name, value, f"must be in {interval}")
    return out


def check_integer(value: object, name: str, *, minimum: int | None = None) -> int:
    """Return ``value`` as an int; it must be integral and at least ``minimum``.

    >>> check_integer(3, "count", minimum=1)
    3
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidParameterError(name, value, "must be an integer")
    out = int(value)
    if minimum is not None and out < minimum:
        raise InvalidParameterError(name, value, f"must be >= {minimum}")
    return out


def check_rational(value: object, name: str, *, positive: bool = True) -> Fraction:
    """Return ``value`` as an exact :class:`~fractions.Fraction`.

    Floats convert exactly (a float is a dyadic rational). Strings such as ``"1/3"`` are
    accepted, so that parameters like 1/3 can be given exactly.

    >>> check_rational("1/3", "scale")
    Fraction(1, 3)
    >>> check_rational(0.5, "scale")
    Fraction(1, 2)
    """
    if isinstance(value, bool):
        raise InvalidParameterError(name, value, "must be a rational number")
    try:
        if isinstance(value, str):
            out = Fraction(value)
        elif isinstance(value, Fraction):
            out = value
        elif isinstance(value, numbers.Integral):
            out = Fraction(int(value))
        elif isinstance(value, numbers.Real):
            as_float = float(value)
            if not math.isfinite(as_float):
                raise InvalidParameterError(name, value, "must be finite")
            out = Fraction(as_float)
        else:
            raise InvalidParameterError(name, value, "must be a rational number")
    except (ValueError, ZeroDivisionError) as exc:
        if isinstance(exc, InvalidParameterError):
            raise
        raise InvalidParameterError(name, value, "must be a rational number") from None
    if positive and out <= 0:
        raise InvalidParameterError(name, value, "must be > 0")
    return out
