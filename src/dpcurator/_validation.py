"""Parameter checks shared by every layer: one place, one wording; and directed rounding.

Each check returns the value converted to the type the caller works with and raises
:class:`~dpcurator.errors.InvalidParameterError` naming the argument and the value otherwise.
No input makes a check raise anything else: integers too large for a float, Fractions, numpy
scalars, strings, ``None`` and objects that cannot even be printed all end in an
``InvalidParameterError`` (or a value). The message shows the value as the caller gave it, and
says what it became when the conversion to a float changed it.

:func:`ceil_float` and :func:`floor_float` round an exact rational to a float upwards or
downwards (never to the nearest); :func:`next_up` and :func:`next_down` move a float a few ulps.
Privacy accounting reports what was spent rounded up and what remains rounded down with them.
"""

from __future__ import annotations

import math
import numbers
import re
import sys
from decimal import Decimal
from fractions import Fraction

from dpcurator.errors import InvalidParameterError

__all__ = [
    "ceil_float",
    "check_delta",
    "check_epsilon",
    "check_finite",
    "check_integer",
    "check_positive",
    "check_probability",
    "check_rational",
    "exact_rational",
    "floor_float",
    "next_down",
    "next_up",
    "sqrt_down",
    "sqrt_up",
]

_MAX_FLOAT = sys.float_info.max
# Decimal exponents beyond this are refused by check_rational: 10**4300 is already far outside
# any parameter's range, and an unbounded exponent ("1e999999999") would take forever to expand.
_MAX_DECIMAL_EXPONENT = 4300
_EXPONENT = re.compile(r"[eE]\s*([+-]?[\d_]+)")


# -- directed rounding ------------------------------------------------------------------------


def _nearest(value: Fraction) -> float:
    """``value`` rounded to the nearest float (``±inf`` beyond the largest one)."""
    try:
        return float(value)  # int / int true division: correctly rounded
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def ceil_float(value: Fraction | int | float) -> float:
    """Return the smallest float that is >= ``value`` (an exact rational, or a float).

    ``math.inf`` when ``value`` exceeds the largest finite float. Use it for what was spent:
    the float it returns is never below the exact value.

    >>> ceil_float(Fraction(1, 3))
    0.33333333333333337
    >>> ceil_float(Fraction(1, 2))
    0.5
    >>> ceil_float(1 + Fraction(1, 10**17))
    1.0000000000000002
    """
    if isinstance(value, float):
        return value
    exact = Fraction(value)
    out = _nearest(exact)
    if out == -math.inf:
        return -_MAX_FLOAT
    while math.isfinite(out) and Fraction(out) < exact:
        out = math.nextafter(out, math.inf)
    return out


def floor_float(value: Fraction | int | float) -> float:
    """Return the largest float that is <= ``value`` (an exact rational, or a float).

    ``-math.inf`` below the most negative finite float. Use it for what remains: the float it
    returns is never above the exact value.

    >>> floor_float(Fraction(1, 3))
    0.3333333333333333
    >>> floor_float(Fraction(1, 10))
    0.09999999999999999
    >>> floor_float(1 - Fraction(1, 10**17))
    0.9999999999999999
    """
    if isinstance(value, float):
        return value
    exact = Fraction(value)
    out = _nearest(exact)
    if out == math.inf:
        return _MAX_FLOAT
    while math.isfinite(out) and Fraction(out) > exact:
        out = math.nextafter(out, -math.inf)
    return out


def sqrt_up(value: Fraction | int) -> float:
    """Return a float ``x`` with ``x * x >= value`` exactly (the square root, rounded up).

    >>> sqrt_up(2) ** 2 >= 2, sqrt_up(Fraction(9, 4))
    (True, 1.5)
    """
    exact = Fraction(value)
    out = math.sqrt(float(exact))
    while Fraction(out) ** 2 < exact:
        out = math.nextafter(out, math.inf)
    return out


def sqrt_down(value: Fraction | int) -> float:
    """Return the largest float ``x`` with ``x * x <= value`` exactly (the root, rounded down).

    >>> sqrt_down(2) ** 2 <= 2, sqrt_down(Fraction(9, 4))
    (True, 1.5)
    """
    exact = Fraction(value)
    out = math.sqrt(float(exact))
    while Fraction(out) ** 2 > exact:
        out = math.nextafter(out, 0.0)
    while Fraction(math.nextafter(out, math.inf)) ** 2 <= exact:
        out = math.nextafter(out, math.inf)
    return out


def next_up(value: float, steps: int = 1) -> float:
    """Return ``value`` moved ``steps`` floats towards ``+inf`` (a rigorous rounding margin).

    A result computed in floating point with an error of at most ``k`` ulps is an upper bound
    of the exact value after ``next_up(result, k)``.

    >>> next_up(1.0)
    1.0000000000000002
    >>> next_up(0.0) == 5e-324
    True
    """
    for _ in range(steps):
        value = math.nextafter(value, math.inf)
    return value


def next_down(value: float, steps: int = 1) -> float:
    """Return ``value`` moved ``steps`` floats towards ``-inf``.

    >>> next_down(1.0)
    0.9999999999999999
    """
    for _ in range(steps):
        value = math.nextafter(value, -math.inf)
    return value


# -- errors that name the value as given ------------------------------------------------------


_MAX_SHOWN = 100
"""Longest ``repr`` of a value an error message shows whole."""


class _Shown:
    """Stands in for a value whose ``repr`` fails, so that the message can still be written."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __repr__(self) -> str:
        return self._text


def _invalid(
    name: str, value: object, requirement: str, converted: float | None = None
) -> InvalidParameterError:
    """Build the error for ``value``; says what a float conversion turned it into, if lossy."""
    if converted is not None and _lossy(value, converted):
        requirement += f" (as a float it is {converted!r})"
    try:
        text = repr(value)
        shown: object = value
        if len(text) > _MAX_SHOWN:  # 10**400 would fill the screen
            shown = _Shown(f"{text[:40]}...{text[-20:]} ({len(text)} characters)")
    except Exception as exc:  # any failing repr: the message must still be built
        shown = _Shown(f"<{type(value).__name__} that cannot be shown: {type(exc).__name__}>")
    error = InvalidParameterError(name, shown, requirement)
    error.value = value
    return error


def exact_rational(value: object) -> Fraction | None:
    """Return ``value`` as an exact rational when it is a finite real number with one; else None."""
    try:
        if isinstance(value, Fraction):
            return value
        if isinstance(value, numbers.Integral):
            return Fraction(int(value))
        if isinstance(value, numbers.Rational):
            return Fraction(int(value.numerator), int(value.denominator))
        ratio = getattr(value, "as_integer_ratio", None)
        if ratio is not None:
            num, den = ratio()
            return Fraction(int(num), int(den))
    except Exception:  # inf, nan, broken conversions: no exact value
        return None
    return None


def _lossy(value: object, converted: float) -> bool:
    """Whether ``converted`` (a float) differs from the exact ``value`` the caller gave."""
    if isinstance(value, float) or not math.isfinite(converted):
        return False
    exact = exact_rational(value)
    return exact is not None and exact != Fraction(converted)


def _zero(value: object, out: float) -> float:
    """Return 0.0 (never -0.0) for a zero ``out``; NaN if ``value`` is negative exactly.

    A negative value too small for a float (a Fraction, a long double) rounds to -0.0; it must
    not pass a check for >= 0. The float -0.0 itself is zero.
    """
    exact = None if isinstance(value, float) else exact_rational(value)
    return math.nan if exact is not None and exact < 0 else 0.0


def _is_infinite(value: object) -> bool:
    """Whether ``value`` itself is infinite (rather than too large for a float)."""
    try:
        return bool(abs(value) == math.inf)  # type: ignore[arg-type]
    except Exception:  # odd objects: not an infinity we know of
        return False


# -- checks -------------------------------------------------------------------------------------


def _real(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _invalid(name, value, "must be a real number")
    try:
        out = float(value)
    except OverflowError:
        raise _invalid(name, value, "must be a finite real number") from None
    except Exception:  # a broken __float__: whatever it raises, refuse the value
        raise _invalid(name, value, "must be a real number") from None
    if not isinstance(out, float):  # pragma: no cover - float() always returns a float
        raise _invalid(name, value, "must be a real number")
    if math.isnan(out):
        raise _invalid(name, value, "must be a number, not NaN")
    if math.isinf(out) and not _is_infinite(value):  # e.g. a long double beyond 1.8e308
        raise _invalid(name, value, "must be a finite real number")
    return out


def check_finite(value: object, name: str) -> float:
    """Return ``value`` as a float; it must be a finite real number.

    >>> check_finite(2, "bound")
    2.0
    """
    out = _real(value, name)
    if not math.isfinite(out):
        raise _invalid(name, value, "must be finite")
    return out


def check_positive(value: object, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float; it must be finite and > 0 (>= 0 with ``allow_zero``).

    The float returned is checked, so a positive value too small for a float (it would round
    to 0) is refused unless ``allow_zero``.

    >>> check_positive(0.5, "sensitivity")
    0.5
    """
    out = check_finite(value, name)
    if out == 0:
        out = _zero(value, out)
    if not out > 0 and not (out == 0 and allow_zero):
        requirement = "must be >= 0" if allow_zero else "must be > 0"
        raise _invalid(name, value, requirement, check_finite(value, name))
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
    checked = _zero(value, out) if out == 0 else out
    if not 0.0 <= checked < 1.0:
        raise _invalid(name, value, "must be in [0, 1)", out)
    return checked


def check_probability(
    value: object, name: str, *, open_left: bool = False, open_right: bool = False
) -> float:
    """Return a probability in [0, 1] (ends excluded on request).

    >>> check_probability(0.25, "p")
    0.25
    """
    out = _real(value, name)
    checked = _zero(value, out) if out == 0 else out
    lo_ok = checked > 0 if open_left else checked >= 0
    hi_ok = checked < 1 if open_right else checked <= 1
    if not (lo_ok and hi_ok):
        interval = f"{'(' if open_left else '['}0, 1{')' if open_right else ']'}"
        raise _invalid(name, value, f"must be in {interval}", out)
    return checked


def check_integer(value: object, name: str, *, minimum: int | None = None) -> int:
    """Return ``value`` as an int; it must be integral and at least ``minimum``.

    >>> check_integer(3, "count", minimum=1)
    3
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _invalid(name, value, "must be an integer")
    try:
        out = int(value)
    except Exception:  # a broken __int__: whatever it raises, refuse the value
        raise _invalid(name, value, "must be an integer") from None
    if minimum is not None and out < minimum:
        raise _invalid(name, value, f"must be >= {minimum}")
    return out


def _parse_decimal_text(value: str | Decimal, name: str) -> None:
    """Refuse decimal exponents so large that expanding them would hang (``"1e999999999"``)."""
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent
        too_large = isinstance(exponent, int) and abs(exponent) > _MAX_DECIMAL_EXPONENT
    else:
        match = _EXPONENT.search(value)
        too_large = match is not None and abs(int(match.group(1))) > _MAX_DECIMAL_EXPONENT
    if too_large:
        raise _invalid(name, value, f"must have a decimal exponent within ±{_MAX_DECIMAL_EXPONENT}")


def check_rational(value: object, name: str, *, positive: bool = True) -> Fraction:
    """Return ``value`` as an exact :class:`~fractions.Fraction`.

    Floats convert exactly (a float is a dyadic rational). Strings such as ``"1/3"`` and
    ``"0.1"`` and :class:`~decimal.Decimal` values are accepted, so that parameters like 1/3 can
    be given exactly.

    >>> check_rational("1/3", "scale")
    Fraction(1, 3)
    >>> check_rational(0.5, "scale")
    Fraction(1, 2)
    """
    if isinstance(value, bool):
        raise _invalid(name, value, "must be a rational number")
    try:
        if isinstance(value, str | Decimal):
            _parse_decimal_text(value, name)
            if isinstance(value, Decimal) and not value.is_finite():
                raise _invalid(name, value, "must be finite")
            out = Fraction(value)
        elif isinstance(value, Fraction):
            out = value
        elif isinstance(value, numbers.Integral):
            out = Fraction(int(value))
        elif isinstance(value, numbers.Real):
            as_float = float(value)
            if not math.isfinite(as_float):
                raise _invalid(name, value, "must be finite")
            exact = exact_rational(value)
            out = exact if exact is not None else Fraction(as_float)
        else:
            raise _invalid(name, value, "must be a rational number")
    except InvalidParameterError:
        raise
    except OverflowError:
        raise _invalid(name, value, "must be a finite real number") from None
    except Exception:  # too many digits, a broken conversion: refuse the value
        raise _invalid(name, value, "must be a rational number") from None
    if positive and out <= 0:
        raise _invalid(name, value, "must be > 0")
    return out
