r"""Steward-side measurements: planned counts noised or compared inside the session, metered.

A mechanism that the session does not run itself (a synthesizer measuring marginals, for
example) still needs the curator's contribution bounding and engine. It plans its ``COUNT(*)
... GROUP BY`` queries with :meth:`~dpcurator.curator.Session.plan` (nothing read), charges its
whole zCDP budget ``rho`` with :meth:`~dpcurator.curator.Session.charged_measurements` (the
ledger entry is committed before anything is read), and then spends ``rho`` step by step
through the returned :class:`ChargedMeasurements`:

- :meth:`ChargedMeasurements.gaussian`: a plan's counts over public cells plus discrete
  Gaussian noise, ``Delta_2^2 / (2 sigma^2)``-zCDP (Canonne, Kamath and Steinke 2020,
  Theorem 14);
- :meth:`ChargedMeasurements.select`: the exponential mechanism choosing among plans by the
  weighted L1 distance of their counts to public estimates, ``epsilon^2 / 8``-zCDP (it is
  ``epsilon``-bounded-range: Cesar and Rogers 2021, Section 3).

A step may measure a :class:`Projection` of a plan instead of the plan: its counts summed over
some of its group keys (a marginal of a ``GROUP BY a, b, c`` over ``a, b``, say). The plan is
read once, however many of its projections are measured, and the projections are summed
steward-side. A projection's sensitivities are those of any linear map that merges cells: the
unit's change keeps its L1 norm ``Delta_1`` and may land in one cell, so ``Delta_2^2 =
Delta_1^2`` (see :func:`count_sensitivities`).

Each step's ``rho`` is taken, in exact rationals, from what the entry charged; a step beyond it
is refused before reading. The sensitivities come from the plan's bounds alone (see
:func:`count_sensitivities`), never from the caller, and no exact value ever leaves the session:
the caller gets noisy counts and chosen indices only. zCDP composes adaptively by adding ``rho``
(Bun and Steinke 2016, Lemma 1.7), so everything released is within the charge.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator.accounting import ApproxDPEvent, PrivacyEvent, ZCDPEvent, zcdp_to_epsilon
from dpcurator.curator._aggregates import Count
from dpcurator.curator._ledger import LedgerEntry
from dpcurator.curator._measure import Exact
from dpcurator.curator._measures import RowCount
from dpcurator.curator._plan import Plan, _l2_squared, _Sizing
from dpcurator.errors import BudgetExceededError, InvalidParameterError, QueryFailedError
from dpcurator.mechanisms import discrete_gaussian_mechanism, exponential_mechanism
from dpcurator.noise import RandomSource

__all__ = ["ChargedMeasurements", "Projection", "check_covers", "count_sensitivities"]


@dataclass(frozen=True)
class Projection:
    """A marginal of a ``COUNT(*)`` plan's counts: summed over every group key but ``keys``.

    Attributes
    ----------
    plan : Plan
        A ``COUNT(*)`` plan of the session with group keys (read once for all its projections).
    keys : tuple of int
        The positions of the plan's group keys kept, distinct; a cell of the projection is a
        tuple of their values in this order.
    """

    plan: Plan
    keys: tuple[int, ...]

    def __post_init__(self) -> None:
        width = len(self.plan.keys)
        if len(set(self.keys)) != len(self.keys) or not all(
            isinstance(k, int) and 0 <= k < width for k in self.keys
        ):
            raise InvalidParameterError(
                "keys", self.keys, f"must be distinct positions of the plan's {width} group keys"
            )


def count_sensitivities(plan: Plan | Projection) -> tuple[int, int]:
    r"""``(Delta_1, Delta_2 ** 2)`` of a ``COUNT(*)`` plan's vector of counts (exact integers).

    For add/remove of one privacy unit under the plan's bounds (at most ``k`` rows, in at most
    ``g`` groups, at most ``c`` rows per group): ``Delta_1 = min(k, g' c)`` with ``g' = min(g,
    k, cells)``, and ``Delta_2^2 = q c^2 + r^2`` for ``Delta_1 = q c + r``: the rows packed
    ``c`` to a group. The planner's own rule for ``COUNT(*)`` (the same function), so a
    steward-side measurement is noised exactly as :meth:`Session.sql` would noise the count.

    A :class:`Projection` that sums some keys away merges cells: the unit's change keeps its L1
    norm and may fall in one cell, so ``(Delta_1, Delta_1^2)`` (the plan's own when ``c >=
    Delta_1``, as when no ``max_rows_per_group`` below ``max_rows_per_unit`` is declared).

    >>> from dpcurator.curator._specs import Contribution
    >>> from types import SimpleNamespace
    >>> count_sensitivities(SimpleNamespace(contribution=Contribution(rows=4, groups=4,
    ...                                                              per_group=4, cells=4)))
    (4, 16)
    >>> count_sensitivities(SimpleNamespace(contribution=Contribution(rows=5, groups=3,
    ...                                                              per_group=2, cells=5)))
    (5, 9)
    """
    if isinstance(plan, Projection):
        l1, l2sq = count_sensitivities(plan.plan)
        return (l1, l2sq) if len(plan.keys) == len(plan.plan.keys) else (l1, l1 * l1)
    contribution = plan.contribution
    l1 = contribution.rows_l1
    return l1, _l2_squared(RowCount(), _Sizing(l1), contribution)


class ChargedMeasurements:
    """Measurements of a session's ``COUNT(*)`` plans within a zCDP budget already charged.

    Made only by :meth:`Session.charged_measurements
    <dpcurator.curator.Session.charged_measurements>`, once the ledger entry that pays for
    them is durable. See :mod:`dpcurator.curator._steward` for the guarantee.

    Attributes
    ----------
    entry : LedgerEntry
        The ledger entry that charged the measurements.
    source : RandomSource
        The session's randomness (the noise of every step comes from it).
    """

    def __init__(
        self,
        entry: LedgerEntry,
        rho: float,
        read: Callable[[Plan], Exact | None],
        source: RandomSource,
    ) -> None:
        self.entry = entry
        self.source = source
        self._left = Fraction(rho)
        self._read = read
        self._rows: dict[int, tuple[Plan, _Rows]] = {}
        self._counts: dict[
            tuple[int, tuple[int, ...]],
            tuple[Plan, Sequence[tuple[Any, ...]], NDArray[np.int64]],
        ] = {}

    @property
    def rho_left(self) -> Fraction:
        """What the charge still allows (zCDP, exact)."""
        return self._left

    def gaussian(
        self, plan: Plan | Projection, cells: Sequence[tuple[Any, ...]], sigma: float
    ) -> NDArray[np.float64]:
        """Return the plan's counts in ``cells`` plus discrete Gaussian noise of parameter sigma.

        Spends ``Delta_2^2 / (2 sigma^2)`` (:func:`count_sensitivities`).

        Parameters
        ----------
        plan : Plan or Projection
            A ``COUNT(*)`` plan of this session (:meth:`Session.plan`), or a projection of one;
            its own epsilon and noise are ignored.
        cells : sequence of tuple
            The public group keys to release, distinct (a group of the rows outside them is
            not released; a cell without rows counts 0).
        sigma : float
            The noise's parameter.

        Raises
        ------
        BudgetExceededError
            If the step needs more than :attr:`rho_left` (nothing read).
        QueryFailedError
            If the read failed (a fixed message; the charge stands).
        """
        if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
            raise InvalidParameterError("sigma", sigma, "must be a finite number > 0")
        _, l2sq = count_sensitivities(_counted(plan))
        self._spend(Fraction(l2sq) / (2 * Fraction(sigma) ** 2))
        counts = self._exact(plan, cells)
        released = discrete_gaussian_mechanism(
            counts, sigma=sigma, sensitivity=math.sqrt(l2sq), source=self.source
        )
        return np.asarray(released.value, dtype=np.float64)

    def select(
        self,
        plans: Sequence[Plan | Projection],
        cells: Sequence[Sequence[tuple[Any, ...]]],
        estimates: Sequence[NDArray[np.float64]],
        *,
        weights: Sequence[float],
        penalties: Sequence[float],
        epsilon: float,
    ) -> int:
        r"""Choose ``i`` by the exponential mechanism on ``w_i (|x_i - e_i|_1 - p_i)``.

        ``x_i`` are plan (or projection) ``i``'s counts in ``cells[i]``, ``e_i`` its public
        estimate, ``w_i`` and ``p_i`` public weights and penalties; the utility's sensitivity is
        ``max_i |w_i| Delta_1(i)``. Spends ``epsilon^2 / 8``.

        Raises
        ------
        BudgetExceededError
            If the step needs more than :attr:`rho_left` (nothing read).
        QueryFailedError
            If a read failed (a fixed message; the charge stands).
        """
        count = len(plans)
        if not count or not (
            len(cells) == len(estimates) == len(weights) == len(penalties) == count
        ):
            raise InvalidParameterError(
                "plans", count, "must be non-empty, with one cells, estimate, weight, penalty each"
            )
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise InvalidParameterError("epsilon", epsilon, "must be a finite number > 0")
        weights = [float(w) for w in weights]
        shifts = [float(p) for p in penalties]
        points = [np.asarray(e, dtype=np.float64) for e in estimates]
        for i, (keys, point) in enumerate(zip(cells, points, strict=True)):
            if point.shape != (len(keys),) or not np.isfinite(point).all():
                raise InvalidParameterError(
                    "estimates", i, "must each be finite, one value per cell of its plan"
                )
        if not all(math.isfinite(v) for v in [*weights, *shifts]):
            raise InvalidParameterError("weights", weights, "and penalties must be finite")
        sensitivity = max(
            abs(w) * count_sensitivities(_counted(p))[0]
            for w, p in zip(weights, plans, strict=True)
        )
        self._spend(Fraction(epsilon) ** 2 / 8)
        utilities = []
        for plan, keys, point, weight, shift in zip(
            plans, cells, points, weights, shifts, strict=True
        ):
            distance = float(np.abs(self._exact(plan, keys) - point).sum())
            utilities.append(weight * (distance - shift))
        chosen = exponential_mechanism(
            list(range(count)),
            utilities,
            epsilon=epsilon,
            sensitivity=sensitivity if sensitivity > 0 else 1.0,  # all weights 0: uniform
            source=self.source,
        )
        return int(chosen.value)

    def _spend(self, rho: Fraction) -> None:
        if rho > self._left:
            raise BudgetExceededError(
                f"This step needs rho = {float(rho):.6g} but the measurements charged by ledger "
                f"entry {self.entry.id} have {float(self._left):.6g} left; nothing was read."
            )
        self._left -= rho

    def _exact(
        self, measured: Plan | Projection, cells: Sequence[tuple[Any, ...]]
    ) -> NDArray[np.int64]:
        """Return the exact counts in ``cells`` (the plan read once; never released)."""
        plan = measured.plan if isinstance(measured, Projection) else measured
        keys = measured.keys if isinstance(measured, Projection) else tuple(range(len(plan.keys)))
        kept = self._counts.get((id(plan), keys))
        if kept is not None and kept[0] is plan and kept[1] is cells:
            return kept[2]
        wanted = [tuple(_plain(v) for v in cell) for cell in cells]
        index = {key: i for i, key in enumerate(wanted)}
        if len(index) != len(wanted):
            raise InvalidParameterError("cells", len(wanted), "must be distinct group keys")
        rows = self._read_rows(plan)
        out = np.zeros(len(wanted), dtype=np.int64)
        for key, n in rows.summed(keys):
            at = index.get(key)
            if at is not None:  # a group outside the public cells is never released
                out[at] += n
        self._counts[(id(plan), keys)] = (plan, cells, out)
        return out

    def _read_rows(self, plan: Plan) -> _Rows:
        """Return the plan's exact groups, read once (a failed read raises, unexplained)."""
        kept = self._rows.get(id(plan))
        if kept is not None and kept[0] is plan:
            return kept[1]
        result = self._read(plan)
        if result is None:  # raised here, outside any handler: no exception chain
            raise QueryFailedError(
                f"A read charged by ledger entry {self.entry.id} failed while running; the "
                "reason is not shown because it could depend on the data."
            )
        rows = _Rows(result.keys, result.columns[plan.measurements[0].result], len(plan.keys))
        self._rows[id(plan)] = (plan, rows)
        return rows

    def __repr__(self) -> str:
        return f"ChargedMeasurements(entry_id={self.entry.id}, rho_left={float(self._left):.6g})"


def check_covers(events: Sequence[PrivacyEvent], rho: float) -> None:
    """Refuse ``events`` unless they are one event that ``rho``-zCDP implies, or stronger.

    >>> check_covers([ZCDPEvent(rho=0.5)], 0.5)
    >>> check_covers([ZCDPEvent(rho=0.1)], 0.5)
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: ...
    """
    if not (isinstance(rho, (int, float)) and math.isfinite(rho) and rho > 0):
        raise InvalidParameterError("rho", rho, "must be a finite number > 0")
    covered = False
    if len(events) == 1:
        event = events[0]
        if isinstance(event, ZCDPEvent):
            covered = event.rho >= rho
        elif isinstance(event, ApproxDPEvent) and event.delta > 0:
            covered = event.epsilon >= zcdp_to_epsilon(rho, event.delta)
    if not covered:
        raise InvalidParameterError(
            "events",
            list(events),
            f"must be one ZCDPEvent with rho >= {rho}, or one ApproxDPEvent that {rho}-zCDP "
            "implies",
        )


def _counted(measured: Plan | Projection) -> Plan | Projection:
    """Return ``measured`` if its plan is one ``COUNT(*)`` (the only aggregate measured here)."""
    plan = measured.plan if isinstance(measured, Projection) else measured
    aggregates = plan.query.aggregates
    if len(aggregates) != 1 or not isinstance(aggregates[0], Count):
        raise InvalidParameterError(
            "plan", plan.query.text, "must have one aggregate, COUNT(*), and group keys"
        )
    return measured


class _Rows:
    """A plan's exact groups, each key column coded as integers (steward-side; never released).

    Summing over some keys (:meth:`summed`) groups the codes with numpy, then names each
    group's values: a pass over the groups of the projection, not over the plan's rows.
    """

    def __init__(self, keys: Sequence[tuple[Any, ...]], counts: Any, width: int) -> None:
        size = len(keys)
        self.counts = np.fromiter((int(n) for n in counts), dtype=np.int64, count=size)
        self.values: list[list[Any]] = []
        codes = []
        for position in range(width):
            seen: dict[Any, int] = {}
            codes.append(
                np.fromiter(
                    (seen.setdefault(_plain(key[position]), len(seen)) for key in keys),
                    dtype=np.int64,
                    count=size,
                )
            )
            self.values.append(list(seen))
        self.codes = np.stack(codes) if codes else np.zeros((0, size), dtype=np.int64)

    def summed(self, keys: tuple[int, ...]) -> list[tuple[tuple[Any, ...], int]]:
        """Return ``(values of keys, summed count)`` for each distinct group of ``keys``."""
        if not self.counts.size:
            return []
        if not keys:
            return [((), int(self.counts.sum()))]
        dims = [max(1, len(self.values[k])) for k in keys]
        if math.prod(dims) < 2**62:
            flat = np.ravel_multi_index(tuple(self.codes[k] for k in keys), dims)
            groups, inverse = np.unique(flat, return_inverse=True)
            coded = np.stack(np.unravel_index(groups, dims), axis=1)
        else:
            coded, inverse = np.unique(self.codes[list(keys)].T, axis=0, return_inverse=True)
        sums = np.zeros(len(coded), dtype=np.int64)
        np.add.at(sums, inverse.reshape(-1), self.counts)
        names = [self.values[k] for k in keys]
        return [
            (tuple(names[j][c] for j, c in enumerate(row)), int(n))
            for row, n in zip(coded.tolist(), sums.tolist(), strict=True)
        ]


def _plain(value: Any) -> Any:
    """Return an engine's value as a plain Python one (numpy scalars as Python scalars)."""
    if isinstance(value, np.generic):
        return value.item()
    return value
