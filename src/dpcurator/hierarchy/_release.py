"""The release of a declared hierarchy: true counts, the noise step, post-processing, tables.

:func:`release_hierarchy` runs a :class:`~dpcurator.hierarchy._spec.HierarchySpec` end to end:

1. **True counts**, in the curator's engine (DuckDB), in one ``GROUP BY ROLLUP`` statement over
   the attribute and the level columns: every node of every level at once.
2. **Noise**: each measured level's histogram gets geometric or discrete Gaussian noise with
   its share of the budget (:func:`~dpcurator.hierarchy._noise.add_level_noise`); invariant
   levels are released exactly (public by declaration, not protected by DP).
3. **Post-processing** (no privacy cost): every declared method makes the noisy counts
   consistent, and for the integer methods non-negative and integral, with weights ``1 /
   variance`` of each level's noise (:func:`~dpcurator.hierarchy._postprocess.postprocess`).

With an attribute the counts are reduced to one scalar tree (hierarchy.md (a)): below a root
holding the grand total hang the attribute cells, and below each cell its own copy of the
geography, so the released counts are consistent within every cell and the root is the sum of
the cells.

Examples
--------
>>> from dpcurator.hierarchy._spec import HierarchySpec
>>> from dpcurator.noise import InsecureSeededSource
>>> spec = HierarchySpec(data="midwest", levels=("state",), count="poptotal", root="Midwest",
...                      epsilon=1.0, invariants=("total",), methods=("exact",))
>>> release = release_hierarchy(spec, source=InsecureSeededSource(0))
>>> table = release.table()
>>> table.columns.tolist()
['level', 'state', 'noisy', 'std', 'exact']
>>> int(table["exact"].iloc[0]) == int(table["exact"].iloc[1:].sum()) == 42008942
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray
from sqlglot import exp

from dpcurator._display import MAX_ROWS, html_table
from dpcurator.accounting import PrivacyEvent
from dpcurator.curator import DuckDBEngine
from dpcurator.errors import InternalError, InvalidParameterError
from dpcurator.hierarchy._domains import MAX_COUNT
from dpcurator.hierarchy._noise import LevelNoise, NoisyLevels, add_level_noise
from dpcurator.hierarchy._postprocess import Solution, postprocess
from dpcurator.hierarchy._report import render_report
from dpcurator.hierarchy._spec import TOTAL, HierarchySpec, read_spec
from dpcurator.hierarchy._tree import Tree
from dpcurator.noise import RandomSource

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["HierarchicalRelease", "TrueCounts", "count_hierarchy", "release_hierarchy"]

_INTEGER_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"}
)
"""DuckDB types a count column may have (its sum is computed as BIGINT)."""

FORMATS = ("csv", "parquet")
"""File formats of :meth:`HierarchicalRelease.write`."""


def _quote(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


@dataclass(frozen=True, eq=False)
class TrueCounts:
    """The confidential counts of every node of a declared hierarchy.

    Attributes
    ----------
    tree : Tree
        The (reduced, with an attribute) tree: its node set is public by declaration.
    values : numpy.ndarray of int64
        The true count of every node (confidential).
    cells : tuple
        The attribute cells, in tree order (empty without an attribute).
    """

    tree: Tree
    values: NDArray[np.int64] = field(repr=False)
    cells: tuple[Any, ...] = ()


def _cells_sql(spec: HierarchySpec, relation: str) -> tuple[str, list[str]]:
    """Return a query with one row per (cell, levels, n), and the ROLLUP keys."""
    levels = [_quote(c) for c in spec.levels]
    if spec.attribute_counts:
        counts = ", ".join(_quote(c) for c in spec.attribute_counts)
        inner = f"SELECT {', '.join(levels)}, {counts} FROM {relation}"
        cells = f'(UNPIVOT ({inner}) ON {counts} INTO NAME "__cell" VALUE "__n")'
        return f'SELECT "__cell", {", ".join(levels)}, "__n" FROM {cells}', ['"__cell"', *levels]
    n = "1" if spec.count is None else _quote(spec.count)
    keys = levels if spec.attribute is None else [_quote(spec.attribute), *levels]
    return f'SELECT {", ".join(keys)}, {n} AS "__n" FROM {relation}', keys


def _rollup_sql(spec: HierarchySpec, relation: str) -> tuple[str, int]:
    cells, keys = _cells_sql(spec, relation)
    labels = ", ".join(f'{k} AS "__k{i}"' for i, k in enumerate(keys))
    grouping = ", ".join(f'GROUPING({k}) AS "__g{i}"' for i, k in enumerate(keys))
    sql = (
        f'SELECT {labels}, {grouping}, CAST(SUM("__n") AS BIGINT) AS "__n", '
        'MIN("__n") AS "__smallest", COUNT("__n") AS "__counted", COUNT(*) AS "__rows", '
        'ANY_VALUE(typeof("__n")) AS "__type" '
        f"FROM ({cells}) GROUP BY ROLLUP ({', '.join(keys)})"
    )
    return sql, len(keys)


def _plain(values: Any) -> NDArray[Any]:
    """Return a fetched column as a plain array; NULLs (masked by DuckDB) become None."""
    if not isinstance(values, np.ma.MaskedArray):
        return np.asarray(values)
    plain = np.asarray(values.data, dtype=object)
    plain[np.ma.getmaskarray(values)] = None
    return plain


def _run_rollup(spec: HierarchySpec) -> tuple[dict[str, NDArray[Any]], int]:
    # The curator's engine reads the declared source (Parquet, CSV, DuckDB, in-memory) and
    # runs the count as the steward's trusted, noiseless statement.
    table = spec.table
    with DuckDBEngine(table) as engine:
        sql, keys = _rollup_sql(spec, "{rows}")
        result = engine.exact(table.name, sql)
    return {name: _plain(values) for name, values in result.items()}, keys


def _check_counts(
    spec: HierarchySpec, rows: Mapping[str, NDArray[Any]], depth: NDArray[Any]
) -> None:
    root = int(np.flatnonzero(depth == 0)[0])
    name = spec.count or list(spec.attribute_counts)
    if int(rows["__counted"][root]) != int(rows["__rows"][root]):
        raise InvalidParameterError("count", name, "must have no missing values")
    if str(rows["__type"][root]) not in _INTEGER_TYPES:
        raise InvalidParameterError("count", name, "must be an integer column")
    if int(rows["__smallest"][root]) < 0:
        raise InvalidParameterError("count", name, "must be >= 0 in every row")


def count_hierarchy(spec: HierarchySpec) -> TrueCounts:
    """Count every node of a declared hierarchy in one SQL statement (``GROUP BY ROLLUP``).

    The statement runs in the curator's engine (DuckDB) on the declared source; with several
    count columns as attribute cells it unpivots them first. The node set is every path of
    level values found in the data, crossed with every attribute cell (a curator column's
    declared domain, if any), and is public by declaration.

    Parameters
    ----------
    spec : HierarchySpec
        The declaration.

    Returns
    -------
    TrueCounts
        The tree and the confidential count of each node.

    Raises
    ------
    InvalidParameterError
        If a level or attribute column has missing values, or the count column is not a
        non-negative integer column without missing values.

    Examples
    --------
    >>> from dpcurator.hierarchy._spec import HierarchySpec
    >>> spec = HierarchySpec(data="midwest", levels=("state",), count="poptotal", epsilon=1.0)
    >>> counts = count_hierarchy(spec)
    >>> counts.tree.labels[:3], counts.values[:3].tolist()
    (((), ('IL',), ('IN',)), [42008942, 11430602, 5544159])
    """
    rows, keys = _run_rollup(spec)
    grouped = np.stack([rows[f"__g{i}"] for i in range(keys)], axis=1).astype(bool)
    depth = keys - grouped.sum(axis=1)
    _check_counts(spec, rows, depth)
    labels = np.stack([rows[f"__k{i}"] for i in range(keys)], axis=1)
    leaves = labels[depth == keys]
    if any(v is None for v in leaves.ravel().tolist()):
        raise InvalidParameterError("levels", list(spec.levels), "must have no missing values")
    cells: tuple[Any, ...] = ()
    if spec.has_attribute:
        cells = _attribute_cells(spec, leaves[:, 0].tolist())
        geography = {tuple(row) for row in leaves[:, 1:].tolist()}
        paths = [(cell, *place) for cell in cells for place in sorted(geography)]
    else:
        paths = [tuple(row) for row in leaves.tolist()]
    tree = Tree.from_paths(paths)
    values = np.zeros(tree.n_nodes, dtype=np.int64)
    nodes = [
        tree.index(tuple(row[:d])) for row, d in zip(labels.tolist(), depth.tolist(), strict=True)
    ]
    values[nodes] = rows["__n"].astype(np.int64)
    if not np.array_equal(tree.aggregate(values[tree.is_leaf]), values):
        raise InternalError("the engine's ROLLUP totals are not the sums of its leaves")
    if spec.has_attribute:
        cells = tuple(label[0] for label in tree.labels[tree.level_slices[1]])
    return TrueCounts(tree, values, cells)


def _attribute_cells(spec: HierarchySpec, found: Sequence[Any]) -> tuple[Any, ...]:
    if spec.attribute_counts:
        return spec.attribute_counts
    assert spec.attribute is not None
    domain = spec.table.column(spec.attribute).domain
    if domain is None:
        return tuple(dict.fromkeys(found))
    outside = sorted({str(v) for v in found} - {str(v) for v in domain})
    if outside:
        raise InvalidParameterError(
            "attribute", outside[:5], f"are values of {spec.attribute!r} outside its domain"
        )
    return tuple(domain)


# -- the noise step, on the tree --------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _Measured:
    noisy: NDArray[np.int64]
    variance: NDArray[np.float64]  # 0 for public nodes, inf for unmeasured ones
    noise: NoisyLevels


def _tree_level_names(spec: HierarchySpec) -> tuple[str, ...]:
    """Return the name of each level of the (reduced) tree."""
    return (TOTAL, *spec.level_names) if spec.has_attribute else spec.level_names


def _measure(spec: HierarchySpec, counts: TrueCounts, source: RandomSource | None) -> _Measured:
    tree, truth = counts.tree, counts.values
    names = _tree_level_names(spec)
    # Tree levels that get noise: with an attribute, every level but the grand total.
    first = 1 if spec.has_attribute else 0
    measured = [t for t in range(first, tree.n_levels) if names[t] in spec.measured_levels]
    noise = add_level_noise(
        [truth[tree.level_slices[t]] for t in measured],
        mechanism=spec.mechanism,
        budget=spec.budget,
        weights=spec.weights,
        source=source,
    )
    noisy = truth.copy()
    variance = np.zeros(tree.n_nodes, dtype=np.float64)
    for t, values, level in zip(measured, noise.values, noise.levels, strict=True):
        noisy[tree.level_slices[t]] = values
        variance[tree.level_slices[t]] = level.variance
    if spec.has_attribute and TOTAL not in spec.invariants:
        # The grand total is not measured: it carries no information (weight 0).
        noisy[0] = int(noisy[tree.level_slices[1]].sum())
        variance[0] = np.inf
    return _Measured(noisy, variance, noise)


def _postprocess_all(
    spec: HierarchySpec, tree: Tree, measured: _Measured, truth: NDArray[np.int64]
) -> dict[str, Solution]:
    public = measured.variance == 0.0
    unmeasured = np.isinf(measured.variance)
    # 1 / variance of each level's noise; 0 where unmeasured; fixed nodes' weight is moot.
    weights = np.ones(tree.n_nodes)
    noisy = ~public
    weights[noisy] = 1.0 / measured.variance[noisy]
    fixed = {int(v): int(truth[v]) for v in np.flatnonzero(public) if v != 0}
    window = None
    if spec.window is not None:  # an unmeasured node has no noisy value to stay near
        window = np.where(unmeasured, float(MAX_COUNT), spec.window)
    return {
        method: postprocess(
            tree,
            measured.noisy.astype(np.float64),
            weights=weights,
            lower=0 if spec.nonnegative else None,
            total=int(truth[0]) if public[0] else None,
            fixed=fixed or None,
            window=window,
            method=method,
        )
        for method in spec.methods
    }


# -- the release --------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class HierarchicalRelease:
    """A released hierarchy: noisy counts, post-processed counts by method, privacy, error.

    Everything but :attr:`truth` is safe to publish: the noisy counts are DP, the post-processed
    ones are functions of them (and of the public invariants), the noise model is public.
    :attr:`truth` is the data steward's, for the confidential part of the report only.

    Attributes
    ----------
    spec : HierarchySpec
        The declaration.
    tree : Tree
        The released tree (with an attribute: grand total > cells > each cell's geography).
    noisy : numpy.ndarray of int64
        The noisy count of every node (invariant nodes exact; with an attribute and no public
        total, the unmeasured grand total is the sum of the cells' noisy totals).
    variance : numpy.ndarray of float64
        The noise variance of every node: 0 for invariants, ``inf`` for an unmeasured node.
    noise : NoisyLevels
        The noise step: per level the budget share, scale, variance and privacy event.
    solutions : mapping of str to Solution
        The post-processed counts, by method.
    truth : numpy.ndarray of int64
        CONFIDENTIAL: the true counts, for the data steward's error measurements.
    cells : tuple
        The attribute cells (empty without an attribute).

    Examples
    --------
    >>> from dpcurator.hierarchy._spec import HierarchySpec
    >>> from dpcurator.noise import InsecureSeededSource
    >>> spec = HierarchySpec(data="midwest", levels=("state",), count="poptotal", epsilon=1.0)
    >>> release = release_hierarchy(spec, source=InsecureSeededSource(0))
    >>> release.epsilon, [round(level.epsilon, 3) for level in release.noise.levels]
    (1.0, [0.5, 0.5])
    >>> release.solutions["exact"].violations.total
    0
    """

    spec: HierarchySpec
    tree: Tree
    noisy: NDArray[np.int64]
    variance: NDArray[np.float64]
    noise: NoisyLevels
    solutions: Mapping[str, Solution]
    truth: NDArray[np.int64] = field(repr=False)
    cells: tuple[Any, ...] = ()

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        """The privacy events of the release, one per measured level."""
        return self.noise.events

    @property
    def epsilon(self) -> float | None:
        """Total epsilon (basic composition over levels) of a geometric release, else None."""
        return self.noise.epsilon

    @property
    def rho(self) -> float | None:
        """Total rho of a discrete Gaussian release, else None."""
        return self.noise.rho

    @property
    def level_names(self) -> tuple[str, ...]:
        """The name of each level of :attr:`tree`, root first.

        With an attribute the root is the grand total (``"total"``) and the levels below are
        the declared ones by cell (``"total × race"``, ``"state × race"`` ...).
        """
        if not self.spec.has_attribute:
            return self.spec.level_names
        return (TOTAL, *(f"{name} × {self.attribute_column}" for name in self.spec.level_names))

    @property
    def level_noise(self) -> tuple[LevelNoise | None, ...]:
        """The noise of each level of :attr:`tree` (None: released exactly, or not measured)."""
        noise = iter(self.noise.levels)
        return tuple(
            next(noise) if self.variance[part.start] not in (0.0, np.inf) else None
            for part in self.tree.level_slices
        )

    @property
    def attribute_column(self) -> str | None:
        """The attribute's column in :meth:`table` (None without an attribute)."""
        if not self.spec.has_attribute:
            return None
        return self.spec.attribute or "attribute"

    def table(self, *, confidential: bool = False) -> pd.DataFrame:
        """Return the release as a table: one row per node, top down.

        Parameters
        ----------
        confidential : bool, default False
            Add the true counts (column ``truth``): for the data steward only, never publish.

        Returns
        -------
        pandas.DataFrame
            Columns ``level`` (its name), the attribute (if any), the level columns (missing
            above a node's level), ``noisy``, ``std`` (the noise's standard deviation: 0 for
            an invariant) and one column per post-processing method.
        """
        import pandas as pd  # noqa: PLC0415 (numpy-only users never need pandas)

        attribute = self.attribute_column
        keys = ([] if attribute is None else [attribute]) + list(self.spec.levels)
        labels = self.tree.labels
        columns: dict[str, Any] = {"level": np.asarray(self.level_names)[self.tree.level]}
        for j, key in enumerate(keys):
            columns[key] = [label[j] if len(label) > j else None for label in labels]
        columns["noisy"] = self.noisy
        columns["std"] = np.sqrt(self.variance)
        for method, solution in self.solutions.items():
            columns[method] = solution.values
        if confidential:
            columns["truth"] = self.truth
        return pd.DataFrame(columns)

    def to_arrow(self, *, confidential: bool = False) -> pa.Table:
        """Return the release as a pyarrow Table (see :meth:`table`)."""
        import pyarrow as pa  # noqa: PLC0415

        return pa.Table.from_pandas(self.table(confidential=confidential), preserve_index=False)

    def _privacy_text(self) -> str:
        if self.epsilon is not None:
            return f"ε={self.epsilon:g} (geometric noise per level, pure DP)"
        if self.rho is not None:
            return f"ρ={self.rho:g} (discrete Gaussian noise per level, zCDP)"
        return "no noise"

    def __repr__(self) -> str:
        privacy = f"epsilon={self.epsilon!r}" if self.epsilon is not None else f"rho={self.rho!r}"
        return (
            f"HierarchicalRelease(name={self.spec.name!r}, levels={self.level_names!r}, "
            f"nodes={len(self.noisy)}, {privacy}, methods={tuple(self.solutions)!r})"
        )

    def _repr_html_(self) -> str:
        """Render the public table (never the true counts) as HTML for notebooks, top down."""
        table = self.table()
        rows = [
            [_html_cell(v) for v in row] for row in table.head(MAX_ROWS).itertuples(index=False)
        ]
        notes = [
            f"{self.spec.name}: {self._privacy_text()}.",
            "noisy: the differentially private counts; std: their noise's standard deviation "
            "(0 for invariants released exactly); "
            + ", ".join(self.solutions)
            + ": the noisy counts post-processed to be consistent (no further privacy cost).",
        ]
        return html_table(
            [str(c) for c in table.columns],
            rows,
            title=f"{self.spec.name}: {' > '.join(self.level_names)}",
            notes=notes,
            total_rows=len(table),
        )

    def report(self, *, confidential: bool = False) -> str:
        """Return the Markdown report (:func:`~dpcurator.hierarchy._report.render_report`)."""
        return render_report(self, confidential=confidential)

    def write(
        self, directory: str | os.PathLike[str], *, format: Literal["csv", "parquet"] = "csv"
    ) -> tuple[Path, ...]:
        """Write the released table and the reports into ``directory`` (created if missing).

        Files: ``<name>.csv`` (or ``.parquet``): the public table; ``<name>_report.md``: the
        public report; ``<name>_steward_report.md``: the CONFIDENTIAL report with the errors
        measured against the true counts (for the data steward only, never publish).

        Parameters
        ----------
        directory : str or path
        format : {"csv", "parquet"}, default "csv"

        Returns
        -------
        tuple of pathlib.Path
            The files written.
        """
        if format not in FORMATS:
            raise InvalidParameterError("format", format, f"must be one of {', '.join(FORMATS)}")
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        name = self.spec.name
        table_path = folder / f"{name}.{format}"
        if format == "csv":
            self.table().to_csv(table_path, index=False)
        else:
            import pyarrow.parquet as pq  # noqa: PLC0415

            pq.write_table(self.to_arrow(), table_path)
        public = folder / f"{name}_report.md"
        public.write_text(self.report(), encoding="utf-8")
        steward = folder / f"{name}_steward_report.md"
        steward.write_text(self.report(confidential=True), encoding="utf-8")
        return (table_path, public, steward)


def _html_cell(value: Any) -> str:
    """Format one cell of the notebook table: no label is blank, numbers readable."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, np.integer | int) and not isinstance(value, bool):
        return f"{int(value):,}"
    if isinstance(value, np.floating | float):
        return f"{float(value):,.4g}" if abs(float(value)) < 1e6 else f"{float(value):,.0f}"
    return str(value)


def release_hierarchy(
    declaration: HierarchySpec | str | os.PathLike[str],
    *,
    source: RandomSource | None = None,
) -> HierarchicalRelease:
    """Release a declared hierarchy: true counts, noise per level, post-processing.

    Privacy: the noisy counts are epsilon-DP (geometric noise, basic composition over the
    measured levels) or rho-zCDP (discrete Gaussian) under add/remove-one-person neighbours;
    see :func:`~dpcurator.hierarchy._noise.add_level_noise`. Post-processing costs nothing
    (Dwork and Roth 2014, Proposition 2.1). Invariant levels are released exactly: they are
    public by declaration and not protected by DP.

    Parameters
    ----------
    declaration : HierarchySpec, or path of a TOML declaration
    source : RandomSource, optional
        Randomness; secure by default. ``InsecureSeededSource(seed)`` only for simulations.

    Returns
    -------
    HierarchicalRelease

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> release = release_hierarchy(
    ...     HierarchySpec(data="midwest", levels=("state", "county"), count="poptotal",
    ...                   epsilon=0.5, invariants=("total",), methods=("exact", "least_squares")),
    ...     source=InsecureSeededSource(7))
    >>> int(release.solutions["exact"].values[0]), release.tree.n_nodes
    (42008942, 443)
    """
    spec = declaration if isinstance(declaration, HierarchySpec) else read_spec(declaration)
    counts = count_hierarchy(spec)
    measured = _measure(spec, counts, source)
    solutions = _postprocess_all(spec, counts.tree, measured, counts.values)
    return HierarchicalRelease(
        spec=spec,
        tree=counts.tree,
        noisy=measured.noisy,
        variance=measured.variance,
        noise=measured.noise,
        solutions=solutions,
        truth=counts.values,
        cells=counts.cells,
    )
