"""What a query returns: the released table with its error columns, the charge, the budget left."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
from rich.console import Console, Group
from rich.table import Table as RichTable
from rich.text import Text

from dpcurator._display import MAX_ROWS, html_table, shorten
from dpcurator.accounting import Budget, PrivacyEvent
from dpcurator.curator._measures import JOINT
from dpcurator.curator._plan import Measurement

__all__ = ["QueryRelease"]


@dataclass(frozen=True)
class QueryRelease:
    """A differentially private answer to one query.

    Attributes
    ----------
    query : str
        The query as asked.
    table : pandas.DataFrame
        Group keys, then for each released value column ``c``: ``c``, ``c_std`` (standard
        deviation of the noise), ``c_ci_low`` and ``c_ci_high`` (the ``confidence`` interval
        for the value of the bounded query: after clamping and contribution bounding).
    value_columns : tuple of str
        The released aggregates' names, in SELECT order.
    intervals : dict
        For each value column, how its interval is obtained: ``"exact"``, ``"conservative"``,
        ``"approximate"`` or ``"none"``.
    split : tuple of Measurement
        How the query's budget was split over its noisy measurements.
    events : tuple of PrivacyEvent
        What the query did, as privacy events (what the ledger recorded).
    charged, spent, remaining : Budget
        This query's charge under the session's accountant, the total spent, what is left.
    entry_id : int
        The ledger entry.
    confidence : float
        The level of the intervals.
    bounded_sql : str
        The bounded aggregate SQL that the engine ran.
    rank_errors : dict
        For each quantile column, its error statement: with probability at least
        ``confidence``, the released point's rank among the bounded values is within this of
        the rank of the best of the candidate points (the exponential mechanism's utility
        bound, :func:`~dpcurator.curator._estimates.quantile_rank_error`); for quantiles of one
        column released jointly (mechanism ``joint exponential``), within it of the sum of the
        best candidates' rank errors of that column's levels, all levels at once.
    threshold : int or None
        The partition-selection threshold on noisy distinct-unit counts, when used.
    measured : tuple
        The noisy count and sum vectors the values were computed from (released values,
        post-processing input of :meth:`Session.combined`): the groups' key tuples in domain
        order (every group measured, also those a LIMIT leaves out of ``table``), and each
        measure's noisy vector; empty when unknown.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.accounting import Budget
    >>> from dpcurator.curator import Column, Session, Table
    >>> from dpcurator.noise import InsecureSeededSource
    >>> df = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    >>> t = Table("t", df, columns=[Column("x", lower=0, upper=4)])
    >>> with Session(t, Budget(1.0), ledger=":memory:", source=InsecureSeededSource(0)) as s:
    ...     r = s.sql("SELECT COUNT(*) AS n FROM t", epsilon=0.5)
    >>> list(r.table.columns), r.charged
    (['n', 'n_std', 'n_ci_low', 'n_ci_high'], Budget(epsilon=0.5, delta=0.0))
    """

    query: str
    table: pd.DataFrame
    value_columns: tuple[str, ...]
    intervals: dict[str, str]
    split: tuple[Measurement, ...]
    events: tuple[PrivacyEvent, ...]
    charged: Budget
    spent: Budget
    remaining: Budget
    entry_id: int
    confidence: float
    bounded_sql: str
    threshold: int | None = None
    rank_errors: dict[str, float] = field(default_factory=dict)
    measured: tuple[Any, ...] = field(default=(), repr=False, compare=False)

    def to_pandas(self) -> pd.DataFrame:
        """Return the released table (a copy)."""
        return self.table.copy()

    def to_arrow(self) -> pa.Table:
        """Return the released table as a pyarrow Table."""
        return pa.Table.from_pandas(self.table, preserve_index=False)

    @property
    def values(self) -> pd.DataFrame:
        """The released table without the error columns."""
        errors = {f"{c}{s}" for c in self.value_columns for s in ("_std", "_ci_low", "_ci_high")}
        return self.table[[c for c in self.table.columns if c not in errors]].copy()

    @property
    def interval_note(self) -> str:
        """What the error columns describe: the noise around the bounded query, not raw data."""
        pct = f"{100 * self.confidence:g}%"
        ranks = "".join(
            f" {column}: rank within {error:.3g} of the best candidate's ({pct})."
            for column, error in self.rank_errors.items()
        )
        if any(m.mechanism == JOINT for m in self.split):
            ranks += (
                " Quantiles of one column are released jointly: each within its bound of the sum "
                "of the best candidates' rank errors of that column's levels."
            )
        return (
            f"± std and [{pct} interval]: of the noise, for the bounded query (values clamped to "
            "their declared bounds, each unit's contribution bounded), not for the raw data."
            + ranks
        )

    def _key_columns(self) -> list[str]:
        errors = {f"{v}{s}" for v in self.value_columns for s in ("_std", "_ci_low", "_ci_high")}
        return [c for c in self.table.columns if c not in self.value_columns and c not in errors]

    def _has_error_bars(self, column: str) -> bool:
        """Tell whether a column has a standard deviation (a median by the exponential has not)."""
        std = self.table[f"{column}_std"]
        return self.intervals.get(column) != "none" and not bool(std.isna().all())

    def _header(self, column: str) -> str:
        if not self._has_error_bars(column):
            return f"{column}\n(no std)"
        return f"{column}\n± std, [{100 * self.confidence:g}% interval]"

    def _cell(self, row: pd.Series, column: str, *, markup: bool = True) -> str:
        value = _fmt(row[column])
        std = _fmt(row[f"{column}_std"])
        if std == "-":  # no standard deviation: the value alone, never "± -"
            return value
        low, high = _fmt(row[f"{column}_ci_low"]), _fmt(row[f"{column}_ci_high"])
        if "-" in (low, high):
            return f"{value} ± {std}"
        if not markup:
            return f"{value} ± {std} [{low}, {high}]"
        return f"{value} ± {std}\n[dim][{low}, {high}][/dim]"

    def _charge_line(self) -> str:
        return (
            f"charged ε={self.charged.epsilon:.6g} δ={self.charged.delta:.3g} · "
            f"left ε={self.remaining.epsilon:.6g} δ={self.remaining.delta:.3g} · "
            f"ledger entry {self.entry_id}"
        )

    def __repr__(self) -> str:
        return (
            f"QueryRelease(query={shorten(self.query)!r}, rows={len(self.table)}, "
            f"values={self.value_columns!r}, charged={self.charged!r}, "
            f"remaining={self.remaining!r}, entry_id={self.entry_id})"
        )

    def _repr_html_(self) -> str:
        """Render the release as an HTML table for notebooks (values ± std [interval])."""
        key_columns = self._key_columns()
        header = key_columns + [" ".join(self._header(c).split("\n")) for c in self.value_columns]
        shown = self.table.head(MAX_ROWS)
        rows = [
            [str(row[c]) for c in key_columns]
            + [self._cell(row, c, markup=False) for c in self.value_columns]
            for _, row in shown.iterrows()
        ]
        notes = []
        if any(self._has_error_bars(c) for c in self.value_columns):
            notes.append(self.interval_note)
        kinds = [
            f"{c}: {_INTERVAL_KINDS.get(kind, kind)}"
            for c, kind in self.intervals.items()
            if kind != "exact"
        ]
        if kinds:
            notes.append("; ".join(kinds))
        notes.append(self._charge_line())
        return html_table(header, rows, title=self.query, notes=notes, total_rows=len(self.table))

    def __rich__(self) -> Group:
        """Render values with +- std and intervals, the charge and the budget left."""
        table = RichTable(title=self.query, title_justify="left", show_lines=False)
        key_columns = self._key_columns()
        for c in key_columns:
            table.add_column(c, style="bold")
        for c in self.value_columns:
            table.add_column(self._header(c), justify="right")
        for _, row in self.table.iterrows():
            cells = [str(row[c]) for c in key_columns]
            cells.extend(self._cell(row, c) for c in self.value_columns)
            table.add_row(*cells)
        footer = Text(self._charge_line(), style="cyan")
        if any(self._has_error_bars(c) for c in self.value_columns):
            return Group(table, Text(self.interval_note, style="dim"), footer)
        return Group(table, footer)

    def __str__(self) -> str:
        buffer = io.StringIO()
        Console(file=buffer, width=120, color_system=None).print(self)
        return buffer.getvalue()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready summary: records, charge, budget, split, intervals."""
        return {
            "query": self.query,
            "table": _records(self.table),
            "value_columns": list(self.value_columns),
            "intervals": dict(self.intervals),
            "confidence": self.confidence,
            "charged": {"epsilon": self.charged.epsilon, "delta": self.charged.delta},
            "spent": {"epsilon": self.spent.epsilon, "delta": self.spent.delta},
            "remaining": {"epsilon": self.remaining.epsilon, "delta": self.remaining.delta},
            "split": [m.summary() for m in self.split],
            "threshold": self.threshold,
            "rank_errors": dict(self.rank_errors),
            "entry_id": self.entry_id,
            "bounded_sql": self.bounded_sql,
        }


_INTERVAL_KINDS = {
    "conservative": "conservative interval (union bound over two noises)",
    "approximate": "approximate interval (delta method)",
    "none": "no standard deviation or interval (chosen by the exponential mechanism)",
}


def _fmt(value: Any) -> str:
    """Format a released number: integers whole, others to about four significant digits."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return "-"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    if number.is_integer() and abs(number) < 1e15:
        return f"{int(number):,}"
    magnitude = abs(number)
    if magnitude >= 1e15 or magnitude < 1e-3:
        return f"{number:.3e}"
    if magnitude >= 1000:
        return f"{number:,.0f}"
    return f"{number:.4g}"


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for record in frame.to_dict(orient="records"):
        clean: dict[str, Any] = {}
        for key, raw in record.items():
            value = raw.item() if hasattr(raw, "item") else raw
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            clean[str(key)] = value
        out.append(clean)
    return out
