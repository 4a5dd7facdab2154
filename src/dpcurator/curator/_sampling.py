"""Whether most of a table's rows lie in units beyond their bounds, guessed from a prefix.

A scaled statement can bound the rows in two ways that give the same aggregates
(:mod:`dpcurator.curator._statements`): find the units beyond their bounds first (a
``GROUP BY unit`` of the whole table, which a session keeps), then aggregate the rows, with no
bounding at all when there are none; or one aggregation per unit of the query's rows
(:func:`~dpcurator.curator._statements._single_pass`). The first costs little more than the
floor ``GROUP BY unit`` when units are within their bounds and about three times it when most
are not; the second about 1.6 times it either way. A session picks one per table before its
first query, from the first rows of the table (:func:`prefix_statement`, a few tens of
thousands of rows) where the engine knows the table's size cheaply
(:meth:`~dpcurator.curator.Engine.row_count`: a Parquet file, an Arrow table), and the choice
changes only how fast a query runs.

The guess is the *size-biased mean* unit size ``mu = sum(n_u**2) / N``: the number of rows of
the unit of a row drawn at random. One pass is chosen when ``mu`` exceeds the per-group bound
``c`` (:func:`one_pass_pays`). From the first ``R`` rows, with ``p`` pairs of rows that share a
unit (``sum m_u (m_u - 1)`` over the units' rows ``m_u`` there):

- rows in random order (a shuffled file): each pair of the table's rows is in the prefix with
  probability about ``(R / N)**2``, so ``mu = 1 + p N / R**2``;
- rows grouped by unit (a file sorted by unit): the prefix holds whole units, so
  ``mu = 1 + p / R``.

The pairs in the first quarter of the prefix tell the two apart: about ``p / 16`` of them in
the first case, ``p / 4`` in the second.

What an analyst can observe is a query's running time, which depended on the data before
(a service pads it: :mod:`dpcurator.service._limits`); no result depends on the choice.

Examples
--------
>>> one_pass_pays(total=10_000_000, rows=50_597, pairs=2_300, quarter_pairs=140, bound=5)
True
>>> one_pass_pays(total=10_000_000, rows=50_597, pairs=680, quarter_pairs=40, bound=5)
False
"""

from __future__ import annotations

import math

from sqlglot import exp

from dpcurator.curator._engine import SOURCE

__all__ = ["PREFIX_FACTOR", "one_pass_pays", "prefix_rows", "prefix_statement"]

PREFIX_FACTOR = 16
"""The prefix holds ``16 sqrt(N)`` rows: ``R**2 / N = 256``, so that a shuffled table's prefix
has about ``256 (mu - 1)`` pairs of rows of one unit whatever its size."""


def prefix_rows(total: int) -> int:
    """Return how many first rows of a table of ``total`` rows the guess reads.

    >>> prefix_rows(10_000_000), prefix_rows(100)
    (50597, 100)
    """
    return min(total, math.ceil(PREFIX_FACTOR * math.sqrt(max(total, 0))))


def prefix_statement(unit: str, rows: int) -> exp.Select:
    """Count the pairs of rows of one unit in the first ``rows`` rows and in their first quarter.

    Columns ``__pairs`` and ``__quarter``: ``sum m (m - 1)`` over the units' ``m`` rows in each
    prefix (rows without a unit skipped; NULL for no rows). One read of the prefix, whose rows
    are numbered in the order they come.
    """
    column = exp.column(unit, quoted=True)
    first = exp.select(exp.alias_(column, "__u")).from_(SOURCE)
    first = first.where(exp.not_(column.copy().is_(exp.null()))).limit(max(rows, 0))
    numbered = exp.select("__u", "ROW_NUMBER() OVER () AS __r").from_(first.subquery("__first"))
    quarter = f"COUNT(*) FILTER (WHERE __r <= {rows // 4}) AS __q"
    per_unit = exp.select("COUNT(*) AS __m", quarter).from_(numbered.subquery("__numbered"))
    per_unit = per_unit.group_by("__u")
    pairs = ["SUM(__m * (__m - 1)) AS __pairs", "SUM(__q * (__q - 1)) AS __quarter"]
    return exp.select(*pairs).from_(per_unit.subquery("__per"))


def one_pass_pays(*, total: int, rows: int, pairs: int, quarter_pairs: int, bound: int) -> bool:
    """Whether a row's unit has more than ``bound`` rows, as its first ``rows`` rows suggest.

    ``total``: the table's rows; ``pairs`` and ``quarter_pairs``: the pairs of rows of one unit
    in the first ``rows`` rows and in the first quarter of them (:func:`prefix_statement`).
    """
    if rows < 2 or pairs <= 0:
        return False
    shuffled = pairs >= 8 * quarter_pairs  # 16x the quarter's pairs if shuffled, 4x if grouped
    size = 1 + pairs * (total / rows**2 if shuffled else 1 / rows)
    return size > bound
