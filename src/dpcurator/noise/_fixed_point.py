r"""Declared numeric ranges, exactly, and the fixed-point rule by which their values are summed.

A sum of bounded real values has the sensitivity its bounds promise only if each row's
contribution is bounded *as computed*. A floating-point sum is not (its rounding depends on the
order of the rows: Casacuberta et al., "Widespread underestimation of sensitivity in
differentially private libraries", CCS 2022), and neither is a value centred on a floating-point
midpoint: for the range ``[2**53, 2**53 + 2]`` the midpoint ``2**53 + 1`` is not a float, and
``(L + U) / 2`` in float64 is ``2**53 = L``; a row at ``U`` then lies two half-widths from that
"midpoint", so it moves a centred sum by twice, and a centred square by four times, what a plan
charges (the same happens for ``[1e15, 1e15 + 0.125]``). This module keeps the declared bounds
as exact rationals (:class:`FixedPointRange`) and states the rule that makes every row's integer
contribution bounded whatever the floating-point error (:class:`FixedPointEncoding`). It knows
nothing of privacy: it only bounds integers.

The fixed-point rule
--------------------
For a declared range ``[L, U]`` (half-width ``h = (U - L) / 2``, midpoint ``mid = (L + U) / 2``,
magnitude ``M = max(|L|, |U|)``, all exact) and a bit count ``0 <= b <= 62``, each row's value
``x`` is

1. **clamped** into ``[L, U]`` (by whoever reads the data; in floating point, into
   ``[lower_float, upper_float]``);
2. **mapped to an integer index** by one of three encodings (:meth:`FixedPointRange.encoding`),
   each ``index = clamp_int(round(e), min_index, max_index)`` for a float expression ``e`` built
   from public pieces: with ``t = (x - offset) * multiplier - shift``,

   - ``centred``: ``e = t``, ``offset = lower_float``, ``multiplier`` the float nearest to
     ``2**b / h``, ``shift = 2**b`` (so ``t = (x - L) 2**b / h - 2**b = (x - mid) 2**b / h``
     exactly); index in ``[-2**b, 2**b]``, unit ``h / 2**b``;
   - ``squares``: the same ``t``, ``e = t * t * 2**-b`` (``((x - mid) / h)**2 2**b``); index in
     ``[0, 2**b]``, unit ``h**2 / 2**b``;
   - ``raw``: ``offset = shift = 0``, ``multiplier`` the float nearest to ``2**b / M``,
     ``e = t = x 2**b / M``; index in ``[-2**b, 2**b]``, unit ``M / 2**b``.

   The centred value is measured from ``L``, not from a midpoint: ``x - L`` is computed exactly
   or nearly so (Sterbenz), while the midpoint may not be a float at all;
3. **clamped again, in integers**, to ``[min_index, max_index]`` (equivalently: clamped in
   floating point to those bounds, which are exact floats, before rounding; this also keeps a
   cast to a 64-bit integer from overflowing). Whatever the floating-point error in computing
   ``e`` (a rounded bound, a rounded multiplier, the engine's arithmetic), the index lies in
   its range: **floating-point error can cost accuracy, never sensitivity**;
4. **summed exactly in integers** (the caller keeps ``rows * 2**b`` below ``2**63``).

Adding or removing one row then moves the integer sum by at most ``2**b`` units in every
encoding (:attr:`FixedPointEncoding.row_units`); replacing one moves it by at most
``max_index - min_index``. In value terms ``unit * 2**b`` is ``h`` (centred), ``h**2`` (squares)
or ``M`` (raw), and ``unit * sum(index)`` estimates ``sum(x - mid)``, ``sum((x - mid)**2)`` or
``sum(x)`` respectively. :meth:`FixedPointEncoding.indices` is the reference implementation of
steps 1-3 in float64; a SQL engine must compute the same expression, and the final clamp makes
any difference in rounding harmless.

Bounds accepted
---------------
:meth:`FixedPointRange.from_bounds` refuses NaN, infinities, ``lower >= upper``, bounds above
:data:`MAX_MAGNITUDE` ``= 2**64`` in magnitude (which also refuses ranges such as
``[-1.7e308, 1.7e308]``, whose width is infinite in float64) and widths below
:data:`MIN_WIDTH` ``= 2**-64``.

Examples
--------
>>> from dpcurator.noise import FixedPointRange
>>> r = FixedPointRange.from_bounds(2.0**53, 2.0**53 + 2)
>>> r.mid == 2**53 + 1, (r.lower_float + r.upper_float) / 2 == 2**53 + 1
(True, False)
>>> enc = r.encoding(4)
>>> enc.unit, enc.indices([2.0**53, 2.0**53 + 2]).tolist()  # one row moves the sum <= 16
(Fraction(1, 16), [-16, 16])
>>> float_mid = (r.lower_float + r.upper_float) / 2  # rounds to 2**53: the old rule gave 32
>>> (r.upper_float - float_mid) / r.half_float * 2**4
32.0
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator._validation import check_integer, check_rational
from dpcurator.errors import InvalidParameterError
from dpcurator.noise._grid import pow2

__all__ = [
    "ENCODING_KINDS",
    "MAX_ENCODING_BITS",
    "MAX_MAGNITUDE",
    "MIN_WIDTH",
    "EncodingKind",
    "FixedPointEncoding",
    "FixedPointRange",
]

MAX_MAGNITUDE: Final = 2**64
"""Largest ``|lower|``, ``|upper|`` of a declared range (``2**64``, about ``1.8e19``).

Beyond every int64 and uint64 column, and small enough that the float64 post-processing of sums
over the range never overflows, with a wide margin: a width is at most ``2**65``, a square of a
centred value at most ``2**128``, and a sum of ``2**40`` rows of such squares at most ``2**168``
(float64 overflows at ``2**1024``), as are the products ``(x - L) * 2**b / h`` of the encodings.
It also refuses ranges whose width overflows float64 (``[-1.7e308, 1.7e308]``)."""

MIN_WIDTH: Final = Fraction(1, 2**64)
"""Smallest ``upper - lower`` of a declared range (``2**-64``).

Keeps every multiplier of an encoding (at most ``2**b / h**2 <= 2**(62 + 130)``) and every unit
(at least ``h**2 / 2**62 >= 2**-192``) a normal float64, with a wide margin."""

MAX_ENCODING_BITS: Final = 62
"""Largest bit count ``b`` of an encoding: indices in ``[-2**62, 2**62]`` fit int64 and are exact
floats."""

EncodingKind = Literal["centred", "squares", "raw"]
"""The encodings of :meth:`FixedPointRange.encoding` (see the module docstring)."""

ENCODING_KINDS: Final = ("centred", "squares", "raw")
"""The values of :data:`EncodingKind`."""


def _bound(value: object, name: str) -> Fraction:
    """Return a declared bound as an exact rational; the messages say what to change."""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Rational):
        as_float = float(value)
        if math.isnan(as_float):
            raise InvalidParameterError(name, value, "must be a number, not NaN")
        if math.isinf(as_float):
            raise InvalidParameterError(
                name, value, "must be finite: declare the extreme value the column can take"
            )
    return check_rational(value, name, positive=False)


def _checked(
    lower: object, upper: object, lower_name: str, upper_name: str
) -> tuple[Fraction, Fraction]:
    lo, hi = _bound(lower, lower_name), _bound(upper, upper_name)
    for exact, raw, name in ((lo, lower, lower_name), (hi, upper, upper_name)):
        if abs(exact) > MAX_MAGNITUDE:
            raise InvalidParameterError(
                name,
                raw,
                "must be at most 2**64 (about 1.8e19) in magnitude: declare tighter bounds, or "
                "rescale the column (e.g. to thousands)",
            )
    if not hi > lo:
        raise InvalidParameterError(
            upper_name,
            upper,
            f"must be greater than {lower_name} ({lower!r}): swap the bounds, or widen them",
        )
    if hi - lo < MIN_WIDTH:
        raise InvalidParameterError(
            upper_name,
            upper,
            f"must exceed {lower_name} ({lower!r}) by at least 2**-64: widen the bounds, or "
            "rescale the column",
        )
    return lo, hi


@dataclass(frozen=True)
class FixedPointRange:
    """A declared numeric range ``[lower, upper]``, held exactly.

    Build it with :meth:`from_bounds` (ints, floats, fractions; floats are taken at their exact
    value). The exact views (:attr:`lower`, :attr:`upper`, :attr:`width`, :attr:`half`,
    :attr:`mid`, :attr:`magnitude`) are what sensitivities are computed from; the float views
    (``*_float``, each the float nearest to the exact value) serve the computation of indices
    and post-processing only. :meth:`encoding` gives the pieces of the fixed-point rule of the
    module docstring.

    Attributes
    ----------
    lower, upper : Fraction
        The bounds, ``-2**64 <= lower < upper <= 2**64`` and ``upper - lower >= 2**-64``.

    Examples
    --------
    >>> r = FixedPointRange.from_bounds(0, 10)
    >>> r.half, r.mid, r.magnitude
    (Fraction(5, 1), Fraction(5, 1), Fraction(10, 1))
    >>> FixedPointRange.from_bounds(1.0, 1.0)
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: upper must be greater than lower (1.0): swap the \
bounds, or widen them; got 1.0.
    """

    lower: Fraction
    upper: Fraction

    def __post_init__(self) -> None:
        lo, hi = _checked(self.lower, self.upper, "lower", "upper")
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    @classmethod
    def from_bounds(
        cls, lower: Fraction | int | float, upper: Fraction | int | float, *, name: str = ""
    ) -> FixedPointRange:
        """Check declared bounds and return them as a range.

        Parameters
        ----------
        lower, upper : int, float or Fraction
            The declared bounds.
        name : str, optional
            Prefix of the argument names in error messages (``"income"`` gives
            ``"income.lower must be finite ..."``).

        Returns
        -------
        FixedPointRange

        Raises
        ------
        InvalidParameterError
            For NaN, an infinite bound, ``lower >= upper``, a bound above :data:`MAX_MAGNITUDE`
            in magnitude, or a width below :data:`MIN_WIDTH`; the message says what to change.
        """
        prefix = f"{name}." if name else ""
        lo, hi = _checked(lower, upper, f"{prefix}lower", f"{prefix}upper")
        return cls(lo, hi)

    @property
    def width(self) -> Fraction:
        """``upper - lower``, exactly."""
        return self.upper - self.lower

    @property
    def half(self) -> Fraction:
        """``(upper - lower) / 2``, exactly: the largest distance of a value from :attr:`mid`."""
        return self.width / 2

    @property
    def mid(self) -> Fraction:
        """``(lower + upper) / 2``, exactly (not always a float: see :attr:`mid_float`)."""
        return (self.lower + self.upper) / 2

    @property
    def magnitude(self) -> Fraction:
        """``max(|lower|, |upper|)``, exactly: the largest absolute value in the range."""
        return max(abs(self.lower), abs(self.upper))

    @property
    def lower_float(self) -> float:
        """The float nearest to :attr:`lower` (equal to it when declared as a float)."""
        return float(self.lower)

    @property
    def upper_float(self) -> float:
        """The float nearest to :attr:`upper` (equal to it when declared as a float)."""
        return float(self.upper)

    @property
    def width_float(self) -> float:
        """The float nearest to :attr:`width` (for post-processing, never for sensitivity)."""
        return float(self.width)

    @property
    def half_float(self) -> float:
        """The float nearest to :attr:`half` (for post-processing, never for sensitivity)."""
        return float(self.half)

    @property
    def mid_float(self) -> float:
        """The float nearest to :attr:`mid`, ties to even.

        For post-processing and accuracy only (e.g. to report a centred statistic), never for a
        sensitivity: it can differ from the midpoint by up to a whole half-width when the range
        is a few floats wide (``[2**53, 2**53 + 2]`` gives ``2**53 = lower``).
        """
        return float(self.mid)

    @property
    def magnitude_float(self) -> float:
        """The float nearest to :attr:`magnitude` (post-processing only)."""
        return float(self.magnitude)

    def encoding(self, bits: int, kind: EncodingKind = "centred") -> FixedPointEncoding:
        """Return the fixed-point encoding of this range on ``bits`` bits (module docstring).

        Parameters
        ----------
        bits : int
            ``b`` in ``[0, 62]``: indices lie in ``[-2**b, 2**b]`` (``[0, 2**b]`` for squares).
        kind : {"centred", "squares", "raw"}, default "centred"
            ``x - mid`` in units of ``half / 2**b``; ``(x - mid)**2`` in units of
            ``half**2 / 2**b``; ``x`` in units of ``magnitude / 2**b``.

        Returns
        -------
        FixedPointEncoding

        Examples
        --------
        >>> enc = FixedPointRange.from_bounds(0, 10).encoding(8)
        >>> enc.unit, enc.multiplier, enc.row_units
        (Fraction(5, 256), 51.2, 256)
        """
        return FixedPointEncoding(self, bits, kind)


@dataclass(frozen=True)
class FixedPointEncoding:
    """The public pieces of one fixed-point encoding of a range (see the module docstring).

    Built by :meth:`FixedPointRange.encoding`. With ``t = (x - offset) * multiplier - shift``,
    the index of a clamped value ``x`` is ``clamp_int(round(t))`` (centred),
    ``clamp_int(round(t * t * 2**-bits))`` (squares) or ``clamp_int(round(t))`` (raw, where
    ``offset = shift = 0``), clamped to ``[min_index, max_index]``.

    Attributes
    ----------
    bounds : FixedPointRange
        The declared range.
    bits : int
        ``b`` in ``[0, 62]``.
    kind : {"centred", "squares", "raw"}
        The encoding.
    unit : Fraction
        The value of one index unit, exactly: ``half / 2**b``, ``half**2 / 2**b`` or
        ``magnitude / 2**b``; ``unit * sum(index)`` estimates ``sum(x - mid)``,
        ``sum((x - mid)**2)`` or ``sum(x)``.
    offset : float
        Subtracted from ``x`` first: ``bounds.lower_float`` (centred, squares) or ``0.0``.
    multiplier : float
        The float nearest to ``2**b / half`` (centred, squares) or ``2**b / magnitude`` (raw).
    shift : float
        Subtracted after scaling: ``2**b`` (centred, squares) or ``0.0`` (raw); exact.
    min_index, max_index : int
        The integer clamp: ``[-2**b, 2**b]``, or ``[0, 2**b]`` for squares.
    """

    bounds: FixedPointRange
    bits: int
    kind: EncodingKind = "centred"
    unit: Fraction = field(init=False)
    offset: float = field(init=False)
    multiplier: float = field(init=False)
    shift: float = field(init=False)
    min_index: int = field(init=False)
    max_index: int = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.bounds, FixedPointRange):
            raise InvalidParameterError("bounds", self.bounds, "must be a FixedPointRange")
        b = check_integer(self.bits, "bits", minimum=0)
        if b > MAX_ENCODING_BITS:
            raise InvalidParameterError("bits", self.bits, "must be <= 62 (int64 indices)")
        if self.kind not in ENCODING_KINDS:
            raise InvalidParameterError("kind", self.kind, f"must be one of {ENCODING_KINDS}")
        r, scale = self.bounds, pow2(b)
        if self.kind == "raw":
            unit, offset, multiplier, shift = r.magnitude / scale, 0.0, scale / r.magnitude, 0
        else:
            unit = (r.half**2 if self.kind == "squares" else r.half) / scale
            offset, multiplier, shift = r.lower_float, scale / r.half, 2**b
        values = {
            "bits": b,
            "unit": unit,
            "offset": offset,
            "multiplier": float(multiplier),
            "shift": float(shift),
            "min_index": 0 if self.kind == "squares" else -(2**b),
            "max_index": 2**b,
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)

    @property
    def row_units(self) -> int:
        """Most units one added or removed row moves the integer sum by: ``2**bits``."""
        return max(-self.min_index, self.max_index)

    def indices(self, values: ArrayLike) -> NDArray[np.int64]:
        """Encode values by the rule, in float64: the reference implementation of steps 1-3.

        Each value is clamped into ``[lower_float, upper_float]``, mapped by the encoding's
        expression, clamped to ``[min_index, max_index]`` and rounded to the nearest integer
        (ties to even). Every index lies in ``[min_index, max_index]`` whatever the values.

        Parameters
        ----------
        values : array_like of float
            Real values (infinities clamp to the bounds); NaN is refused, without echoing
            the values (they may be private).

        Returns
        -------
        numpy.ndarray of int64
            Same shape as ``values``.

        Examples
        --------
        >>> from dpcurator.noise import FixedPointRange
        >>> r = FixedPointRange.from_bounds(-1, 3)  # mid 1, half 2
        >>> r.encoding(2).indices([-5.0, 0.0, 1.0, 2.0, 9.0]).tolist()
        [-4, -2, 0, 2, 4]
        >>> r.encoding(2, "squares").indices([-1.0, 0.0, 1.0]).tolist()  # ((x - 1) / 2)**2 * 4
        [4, 1, 0]
        """
        arr: NDArray[Any] = np.asarray(values)
        if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
            raise InvalidParameterError(
                "values", f"<array of dtype {arr.dtype}>", "must be an array of real numbers"
            )
        x = np.array(arr, dtype=np.float64)
        if np.isnan(x).any():
            raise InvalidParameterError(
                "values",
                f"<array of shape {x.shape}>",
                "must not contain NaN: map missing values before encoding",
            )
        np.clip(x, self.bounds.lower_float, self.bounds.upper_float, out=x)
        with np.errstate(over="ignore", under="ignore"):
            t = (x - self.offset) * self.multiplier - self.shift
            if self.kind == "squares":
                t = t * t * math.ldexp(1.0, -self.bits)
        np.clip(t, float(self.min_index), float(self.max_index), out=t)  # exact float bounds
        np.rint(t, out=t)
        return t.astype(np.int64)
