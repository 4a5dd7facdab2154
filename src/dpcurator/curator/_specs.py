"""The parts of a plan: keys, clamped values, contribution bounds and noisy measurements."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from dpcurator.curator._measures import Measure
from dpcurator.noise import FixedPointRange

__all__ = ["Contribution", "GaussianNoise", "KeySpec", "Measurement", "ValueSpec"]


@dataclass(frozen=True)
class KeySpec:
    """A group key of the plan: its column, SQL alias and public domain (None: selected).

    A histogram's bins are a key too (``labels`` name them; ``edges`` bound them), and so is a
    computed key (``expression``, over the source's columns; ``column`` is then its name).
    ``whole``: the source column has an integer type, so every value is a whole number.
    """

    column: str
    alias: str
    domain: tuple[Any, ...] | None
    labels: tuple[str, ...] | None = None
    edges: tuple[float, ...] | None = None
    expression: exp.Expr | None = None
    whole: bool = False

    @property
    def is_bin(self) -> bool:
        """True for a histogram's bins."""
        return self.edges is not None


@dataclass(frozen=True)
class ValueSpec:
    """A numeric column the plan aggregates, clamped into its declared range (held exactly).

    Sensitivities and fixed-point grids come from :attr:`range`; the float views (``lower``,
    ``mid`` ...) serve the SQL's clamps and the post-processing only.
    """

    column: str
    alias: str
    range: FixedPointRange
    nullable: bool

    @property
    def lower(self) -> float:
        """The lower bound (a float, as declared)."""
        return self.range.lower_float

    @property
    def upper(self) -> float:
        """The upper bound (a float, as declared)."""
        return self.range.upper_float

    @property
    def mid(self) -> float:
        """The float nearest the midpoint: for post-processing only, never for sensitivity."""
        return self.range.mid_float

    @property
    def half(self) -> float:
        """The float nearest the half-width (post-processing only)."""
        return self.range.half_float

    @property
    def magnitude(self) -> float:
        """``max(|L|, |U|)`` as the nearest float (post-processing only)."""
        return self.range.magnitude_float


@dataclass(frozen=True)
class Contribution:
    """How much one privacy unit may contribute after bounding.

    Attributes
    ----------
    rows : int
        ``k``: rows per unit in total.
    groups : int
        ``g'``: groups of the declared keys a unit touches.
    per_group : int
        ``c``: rows per unit and group.
    cells : int
        Group-and-bin cells a unit touches.
    """

    rows: int
    groups: int
    per_group: int
    cells: int

    @property
    def rows_l1(self) -> int:
        """Largest L1 change of the vector of per-group row counts."""
        return min(self.rows, self.groups * self.per_group)


@dataclass(frozen=True)
class GaussianNoise:
    """Discrete Gaussian noise on a measurement's integers (all in grid units).

    Attributes
    ----------
    sigma : float
        The noise parameter.
    l2 : float
        The L2 sensitivity of the measured vector, a float at least ``sqrt(l2_squared)``.
    l2_squared : int
        Its exact square: the most one unit can move the vector, in squared L2 norm.
    """

    sigma: float
    l2: float
    l2_squared: int

    @property
    def rho(self) -> float:
        """The zCDP parameter ``l2^2 / (2 sigma^2)`` (Canonne, Kamath and Steinke 2020)."""
        return self.l2 * self.l2 / (2.0 * self.sigma * self.sigma)


@dataclass(frozen=True)
class Measurement:
    """One noisy measurement of a query: what it measures and its share of the budget.

    Attributes
    ----------
    name : str
        What is measured, e.g. ``"COUNT(*)"`` or ``"SUM(income - 100000)"``.
    kind : str
        ``count``, ``count_distinct``, ``count_column``, ``sum``, ``centered_sum``,
        ``centered_squares``, ``quantile`` or ``selection``.
    column : str or None
        The column measured.
    mechanism : str
        ``geometric`` (two-sided geometric on exact integers), ``discrete gaussian``,
        ``exponential`` or ``geometric threshold`` (partition selection).
    epsilon, delta : float
        Its share of the query's budget.
    sensitivity : float
        L1 sensitivity of the measured vector in the column's units (L2 for the discrete
        Gaussian; utility sensitivity per group for the exponential mechanism; L1 of the
        distinct-unit counts for selection).
    scale : float
        Noise scale in the column's units (NaN for the exponential mechanism).
    measure : Measure
        The measure, typed (see :mod:`dpcurator.curator._measures`).
    units : int
        The L1 sensitivity in grid units of the measured integers.
    unit_value : float
        The value of one grid unit in the column's units.
    result : str
        The name of the measured column in the engine's result.
    gaussian : GaussianNoise or None
        The discrete Gaussian's parameters when it is the mechanism.
    why : str
        Why this noise: what the two mechanisms' noise would be, when both were possible.
    """

    name: str
    kind: str
    column: str | None
    mechanism: str
    epsilon: float
    delta: float
    sensitivity: float
    scale: float
    measure: Measure = field(repr=False, compare=False)
    units: int = field(default=1, repr=False)
    unit_value: float = field(default=1.0, repr=False)
    quantile: float | None = field(default=None, repr=False)
    bits: int = field(default=0, repr=False)
    result: str = field(default="", repr=False)
    gaussian: GaussianNoise | None = field(default=None, repr=False)
    why: str = field(default="", repr=False, compare=False)

    def summary(self) -> dict[str, Any]:
        """Return what the budget split reports of this measurement, JSON-ready (NaN: None)."""
        return {
            "measurement": self.name,
            "kind": self.kind,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "sensitivity": self.sensitivity,
            "scale": None if math.isnan(self.scale) else self.scale,
            "why": self.why,
        }
