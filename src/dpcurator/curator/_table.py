"""Declarations of private tables: where the data lives, its privacy unit, its public metadata.

A :class:`Table` says everything the curator may assume about the data without looking at it:
the privacy unit (the column whose value identifies a person, household ... or each row), how
much one unit may contribute (rows in total, groups, rows per group), the bounds of numeric
columns, the public domains of categorical ones and the bins of histograms. Contribution
bounding, clamping and the choice of noise all follow from the declaration, never from the data.

The same declaration can be written as a TOML file (see :meth:`Table.from_toml`).

Examples
--------
>>> import pandas as pd
>>> people = Table(
...     "people",
...     pd.DataFrame({"pid": [1, 1, 2], "state": ["CA", "CA", "NY"], "income": [10.0, 20.0, 5.0]}),
...     privacy_unit="pid",
...     max_rows_per_unit=2,
...     columns=[Column("state", domain=["CA", "NY"]), Column("income", lower=0, upper=100)],
... )
>>> people.column("income").bounds, people.unit_column
((0.0, 100.0), 'pid')
"""

from __future__ import annotations

import itertools
import math
import os
import re
import tomllib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from dpcurator._validation import check_finite, check_integer
from dpcurator.accounting import Budget
from dpcurator.curator._rowwise import row_expression
from dpcurator.datasets import DATASETS, dataset_path
from dpcurator.errors import InvalidParameterError, PrivacyWarning, QueryError
from dpcurator.noise import FixedPointRange

__all__ = ["Column", "Declaration", "Table", "read_declaration"]

_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DOMAIN_TYPES = (str, int, float, bool)
MAX_DOMAIN = 1_000_000
"""Largest public domain (or product of domains of the group keys) a query may release."""


class _DefaultBound(int):
    """The default of ``max_rows_per_unit`` (1), told apart from an explicit 1 to warn."""

    __slots__ = ()


_DEFAULT_ROWS: Final[int] = _DefaultBound(1)


def _warn_default_rows(table: Table) -> None:
    """Warn that a table with a privacy unit left ``max_rows_per_unit`` at its default of 1."""
    where = f" ({table.path})" if table.path else ""
    unit = table.privacy_unit
    warnings.warn(
        f"Table {table.name!r}{where}: max_rows_per_unit is left at its default of 1, so each "
        f"{unit} contributes at most one row to a query and its other rows are dropped. Declare "
        f"how many rows one {unit} may contribute (max_rows_per_unit, and max_groups_per_unit "
        "for GROUP BY) to silence this warning.",
        PrivacyWarning,
        stacklevel=4,
    )


def _finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(name, value, "must be a real number")
    return check_finite(value, name)  # also refuses ints too large for a float


@dataclass(frozen=True)
class Column:
    """Public metadata of one column of a private table.

    Parameters
    ----------
    name : str
        The column's name in the source.
    lower, upper : float, optional
        Declared bounds of a numeric column (both or neither, ``lower < upper``). Values are
        clamped into ``[lower, upper]`` before any aggregate (documented behaviour, not an
        error: a value outside the bounds is treated as the nearest bound, ``+inf`` as
        ``upper`` and ``-inf`` as ``lower``). Needed by SUM, AVG, VARIANCE, STDDEV, quantiles
        and histograms.
    domain : sequence, optional
        The public set of values of a group key (strings, integers, floats or booleans). A
        GROUP BY on a column with a domain releases exactly these groups (empty ones too) and
        ignores rows with other values; without a domain the groups are discovered privately.
    bins : sequence of float, optional
        Public histogram edges (strictly increasing, at least two) for ``HISTOGRAM(column)``.
    nullable : bool, default True
        With True, NULL and NaN values are skipped by the aggregates of this column (SQL
        semantics; AVG and VARIANCE then need their own count of non-null values). With False,
        NULL and NaN are replaced by the midpoint of the bounds, so that the column's count is
        ``COUNT(*)`` and AVG costs one measurement less.
    expression : str, optional
        A derived column: a row-wise SQL expression (DuckDB's syntax, e.g.
        ``"YEAR(flight_date)"`` or ``"CASE WHEN age < 18 THEN 'child' ELSE 'adult' END"``) of
        the source's columns, computed by the engine for every row and used like a column of
        the source (in SELECT, WHERE and GROUP BY) under its declared ``domain``, bounds or
        bins. Where it cannot be computed on a row (a failing cast), it is NULL. Its name must
        not be a column of the source.

    Examples
    --------
    >>> Column("age", lower=0, upper=120, bins=[0, 18, 65, 120]).bins
    (0.0, 18.0, 65.0, 120.0)
    >>> Column("year", expression="YEAR(flight_date)", domain=range(2013, 2015)).domain
    (2013, 2014)
    >>> Column("age", lower=5, upper=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: upper must be greater than lower (5.0): swap ...
    """

    name: str
    lower: float | None = None
    upper: float | None = None
    domain: tuple[Any, ...] | None = None
    bins: tuple[float, ...] | None = None
    nullable: bool = True
    expression: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "\x00" in self.name:
            raise InvalidParameterError("name", self.name, "must be a non-empty string")
        if (self.lower is None) != (self.upper is None):
            raise InvalidParameterError(
                "lower" if self.lower is None else "upper",
                None,
                f"must be given together with the other bound of column {self.name!r}",
            )
        if self.lower is not None and self.upper is not None:
            lower = _finite(self.lower, "lower")
            upper = _finite(self.upper, "upper")
            # Exact checks: finite, lower < upper, within the fixed-point range (|bound| <= 2**64,
            # width >= 2**-64), so that every sum over the column has the sensitivity it claims.
            FixedPointRange.from_bounds(lower, upper)
            object.__setattr__(self, "lower", lower)
            object.__setattr__(self, "upper", upper)
        if self.domain is not None:
            object.__setattr__(self, "domain", self._check_domain(self.domain))
        if self.bins is not None:
            object.__setattr__(self, "bins", check_bins(self.bins, "bins"))
        if not isinstance(self.nullable, bool):
            raise InvalidParameterError("nullable", self.nullable, "must be True or False")
        if self.expression is not None:
            row_expression(self.expression, self.name)

    def _check_domain(self, domain: object) -> tuple[Any, ...]:
        if isinstance(domain, str | bytes) or not isinstance(domain, Sequence | set | frozenset):
            raise InvalidParameterError(
                "domain", domain, f"must be a list of the values of column {self.name!r}"
            )
        values = tuple(domain)
        if not values:
            raise InvalidParameterError("domain", domain, "must not be empty")
        if len(values) > MAX_DOMAIN:
            raise InvalidParameterError(
                "domain", f"<{len(values)} values>", f"must have at most {MAX_DOMAIN} values"
            )
        for value in values:
            if not isinstance(value, _DOMAIN_TYPES):
                raise InvalidParameterError(
                    "domain", value, "values must be strings, integers, floats or booleans"
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidParameterError("domain", value, "values must be finite")
        if len(set(values)) != len(values):
            raise InvalidParameterError("domain", domain, "must not repeat a value")
        return values

    @property
    def bounds(self) -> tuple[float, float] | None:
        """``(lower, upper)`` for a numeric column, else None."""
        if self.lower is None or self.upper is None:
            return None
        return (self.lower, self.upper)


def check_bins(bins: object, name: str) -> tuple[float, ...]:
    """Validate histogram edges: at least two finite, strictly increasing numbers."""
    if isinstance(bins, str | bytes) or not isinstance(bins, Sequence):
        raise InvalidParameterError(name, bins, "must be a list of histogram edges")
    edges = tuple(_finite(edge, name) for edge in bins)
    if len(edges) < 2:
        raise InvalidParameterError(name, bins, "must have at least two edges")
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise InvalidParameterError(name, bins, "must be strictly increasing")
    return edges


def _columns(columns: object, unit: str | None) -> tuple[Column, ...]:
    if isinstance(columns, Mapping):
        items: list[Column] = []
        for key, spec in columns.items():
            if isinstance(spec, Column):
                if spec.name != key:
                    raise InvalidParameterError("columns", key, f"names column {spec.name!r}")
                items.append(spec)
            elif isinstance(spec, Mapping):
                items.append(Column(key, **dict(spec)))
            else:
                raise InvalidParameterError("columns", spec, "values must be Column or dict")
    elif isinstance(columns, Sequence) and not isinstance(columns, str | bytes):
        items = []
        for spec in columns:
            if isinstance(spec, str):
                items.append(Column(spec))
            elif isinstance(spec, Column):
                items.append(spec)
            else:
                raise InvalidParameterError("columns", spec, "items must be Column or a name")
    else:
        raise InvalidParameterError("columns", columns, "must be a list of Column or a dict")
    names = [c.name for c in items]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidParameterError("columns", duplicates, "declare each column once")
    if unit is not None and unit not in names:
        items.insert(0, Column(unit))
    return tuple(items)


@dataclass(frozen=True, eq=False)
class Table:
    """A private table and its public declaration.

    Neighbouring tables differ by all the rows of one privacy unit (add/remove one unit). The
    curator bounds every unit's contribution to what is declared here, inside the query plan:
    at most ``max_rows_per_unit`` rows in total, rows in at most ``max_groups_per_unit`` groups
    of a GROUP BY, at most ``max_rows_per_group`` rows per group. A unit with more keeps the
    groups of least key hash; in each, its counts and sums are scaled to ``m`` rows' worth
    (``m = min(n, max_rows_per_group)``, at most ``max_rows_per_unit`` in all: each sum ``s``
    of its ``n`` rows becomes ``(s m) DIV n``), or, for quantiles and histograms, it is
    truncated to ``m`` rows chosen by a hash of its own rows. Either way what it contributes
    depends on its own rows only.

    Parameters
    ----------
    name : str
        The name analysts use in SQL (an identifier: letters, digits, underscores).
    source : pandas.DataFrame, pyarrow.Table, str, path or duckdb connection
        Where the rows live: an in-memory table, a ``.parquet`` / ``.csv`` (``.csv.gz``,
        ``.tsv``) file, a DuckDB database file (``.duckdb`` / ``.db``, with ``source_table``),
        or an open DuckDB connection (with ``source_table``); the session then runs its SQL
        in that connection.
    columns : sequence of Column (or names), or mapping name -> Column / dict
        The declared columns. Queries may use no other column.
    privacy_unit : str, optional
        The column identifying a privacy unit; None means each row is its own unit.
    max_rows_per_unit : int, default 1
        Rows one unit may contribute to a query (after WHERE). With a ``privacy_unit``, leaving
        it at its default warns (:class:`~dpcurator.PrivacyWarning`): a unit's other rows are
        dropped, which is rarely what was meant; pass it explicitly, even as 1.
    max_groups_per_unit : int, default 1
        Groups of a GROUP BY one unit may contribute to.
    max_rows_per_group : int, optional
        Rows one unit may contribute to one group (default: ``max_rows_per_unit``).
    source_table : str, optional
        Table name inside a DuckDB source.
    path : str, optional
        The declaration file this table was read from (set by :meth:`from_toml`).

    Examples
    --------
    >>> import pandas as pd
    >>> t = Table("t", pd.DataFrame({"x": [1.0]}), columns=[Column("x", lower=0, upper=1)])
    >>> t.unit_column is None, t.max_rows_per_unit
    (True, 1)
    """

    name: str
    source: Any
    columns: tuple[Column, ...]
    privacy_unit: str | None = None
    max_rows_per_unit: int = _DEFAULT_ROWS
    max_groups_per_unit: int = 1
    max_rows_per_group: int | None = None
    source_table: str | None = None
    path: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _TABLE_NAME.match(self.name):
            raise InvalidParameterError(
                "name", self.name, "must be an SQL identifier (letters, digits, underscores)"
            )
        if self.privacy_unit is not None and (
            not isinstance(self.privacy_unit, str) or not self.privacy_unit
        ):
            raise InvalidParameterError(
                "privacy_unit", self.privacy_unit, "must be a column name, or None for each row"
            )
        object.__setattr__(self, "columns", _columns(self.columns, self.privacy_unit))
        if self.max_rows_per_unit is _DEFAULT_ROWS and self.privacy_unit is not None:
            _warn_default_rows(self)
        rows = check_integer(self.max_rows_per_unit, "max_rows_per_unit", minimum=1)
        groups = check_integer(self.max_groups_per_unit, "max_groups_per_unit", minimum=1)
        per_group = rows
        if self.max_rows_per_group is not None:
            per_group = check_integer(self.max_rows_per_group, "max_rows_per_group", minimum=1)
            if per_group > rows:
                raise InvalidParameterError(
                    "max_rows_per_group", per_group, f"must be at most max_rows_per_unit ({rows})"
                )
        if self.privacy_unit is None and (rows, groups, per_group) != (1, 1, 1):
            raise InvalidParameterError(
                "max_rows_per_unit",
                rows,
                "must be 1 (with one group per unit) when each row is its own privacy unit",
            )
        object.__setattr__(self, "max_rows_per_unit", rows)
        object.__setattr__(self, "max_groups_per_unit", groups)
        object.__setattr__(self, "max_rows_per_group", per_group)
        if self.source_table is not None and (
            not isinstance(self.source_table, str) or not self.source_table
        ):
            raise InvalidParameterError("source_table", self.source_table, "must be a table name")
        unit = self.privacy_unit
        if unit is not None and self.column(unit).bounds is not None:
            raise InvalidParameterError(
                "columns", unit, "the privacy unit column is an identifier: declare no bounds"
            )

    @property
    def unit_column(self) -> str | None:
        """The privacy unit's column, or None when each row is a unit."""
        return self.privacy_unit

    @property
    def column_names(self) -> tuple[str, ...]:
        """The declared column names, in declaration order."""
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        """Return the declared column ``name`` (exact match, else a unique case-insensitive one).

        Raises
        ------
        QueryError
            If no declared column has this name.
        """
        for c in self.columns:
            if c.name == name:
                return c
        folded = [c for c in self.columns if c.name.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        raise QueryError(
            f"Column {name!r} is not declared in table {self.name!r}; declared columns: "
            f"{', '.join(self.column_names)}. Only declared columns can be queried: add it to "
            "the declaration with its bounds or domain."
        )

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Table:
        r"""Read a declaration from a TOML file (its ``[table]`` and ``[columns.*]`` sections).

        The format::

            [table]
            name = "people"
            source = "people.parquet"       # relative to this file (or .csv, or .duckdb)
            # or, instead of source, a table shipped with dpcurator (dpcurator.datasets):
            # dataset = "cps"
            source_table = "people"         # only for a DuckDB database file
            privacy_unit = "household_id"   # omit: each row is a unit
            max_rows_per_unit = 4
            max_groups_per_unit = 1
            max_rows_per_group = 4          # optional

            [budget]                        # optional: the session budget (finite)
            epsilon = 3.0
            delta = 1e-6

            [ledger]                        # optional, relative to this file; the defaults:
            path = "people.ledger.sqlite"   # every release, with what it spent
            key = "people.ledger.key"       # the steward's key: keep it from analysts

            [columns.state]
            domain = ["AL", "AK"]
            [columns.income]
            lower = 0
            upper = 200000
            nullable = true
            [columns.age]
            lower = 0
            upper = 120
            bins = [0, 18, 65, 120]
            [columns.age_group]             # a derived column: computed for every row
            expression = "CASE WHEN age < 18 THEN 'child' ELSE 'adult' END"
            domain = ["child", "adult"]

        Examples
        --------
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> path = os.path.join(folder, "t.toml")
        >>> with open(path, "w") as f:
        ...     _ = f.write('[table]\nname = "t"\nsource = "t.csv"\n[columns.x]\n'
        ...                 'lower = 0\nupper = 1\n')
        >>> Table.from_toml(path).column("x").bounds
        (0.0, 1.0)
        """
        return read_declaration(path).table


@dataclass(frozen=True)
class Declaration:
    """A TOML declaration: the table, the session budget and options it names, and its ledger.

    The ledger's place belongs to the declaration (the steward's file), not to whoever asks a
    query: a session opened on the declaration always records in :attr:`ledger_path`, chained
    with the key in :attr:`ledger_key` (see :class:`~dpcurator.curator.Ledger`).

    Attributes
    ----------
    table : Table
        The declared table.
    budget : Budget or None
        The ``[budget]`` section (always finite), if any.
    accountant : str or None
        ``[session] accountant``, if given.
    path : str
        The TOML file.
    ledger_file, key_file : str or None
        ``[ledger] path`` and ``[ledger] key`` as resolved against the TOML file's folder; None
        for the defaults (see :attr:`ledger_path` and :attr:`ledger_key`).
    noise : str
        ``[session] noise`` (``"auto"``, ``"laplace"`` or ``"gaussian"``; default ``"auto"``).
    """

    table: Table
    budget: Budget | None
    accountant: str | None
    path: str
    ledger_file: str | None = None
    key_file: str | None = None
    noise: str = "auto"

    @property
    def ledger_path(self) -> str:
        """The ledger: ``[ledger] path``, else ``<name>.ledger.sqlite`` next to the file."""
        if self.ledger_file is not None:
            return self.ledger_file
        p = Path(self.path)
        return str(p.with_name(p.stem + ".ledger.sqlite"))

    @property
    def ledger_key(self) -> str:
        """The steward's key file: ``[ledger] key``, else ``<name>.ledger.key`` next to the file.

        Created with the ledger if missing. It holds the secret that chains the ledger's entries
        and where the ledger ended: keep it where analysts can neither read nor write it.
        """
        if self.key_file is not None:
            return self.key_file
        p = Path(self.path)
        return str(p.with_name(p.stem + ".ledger.key"))


_TABLE_KEYS = {
    "name",
    "source",
    "dataset",
    "source_table",
    "privacy_unit",
    "max_rows_per_unit",
    "max_groups_per_unit",
    "max_rows_per_group",
}
_COLUMN_KEYS = {"lower", "upper", "domain", "bins", "nullable", "expression"}


def _section(data: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise InvalidParameterError(key, value, f"must be a [{key}] table in {path}")
    return value


def _unknown(keys: set[str], allowed: set[str], where: str) -> None:
    extra = sorted(keys - allowed)
    if extra:
        raise InvalidParameterError(
            where, extra, f"unknown keys; allowed: {', '.join(sorted(allowed))}"
        )


def read_declaration(path: str | os.PathLike[str]) -> Declaration:
    """Read a TOML declaration (see :meth:`Table.from_toml` for the format).

    Relative source paths are taken relative to the TOML file; ``dataset = "cps"`` instead of
    ``source`` names a table shipped with dpcurator (:data:`dpcurator.datasets.DATASETS`), so the
    declaration works wherever it is copied.

    Raises
    ------
    InvalidParameterError
        For a missing or unreadable file, malformed TOML, unknown keys, or invalid values; the
        message names the key and the file.
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidParameterError("path", path, "must be a path to a TOML file")
    file = Path(path)
    try:
        with file.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise InvalidParameterError("path", str(file), "does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise InvalidParameterError("path", str(file), f"is not valid TOML: {error}") from None
    _unknown(set(data), {"table", "budget", "session", "ledger", "columns"}, f"sections of {file}")
    table = _section(data, "table", str(file))
    _unknown(set(table), _TABLE_KEYS, "[table]")
    if "name" not in table:
        raise InvalidParameterError("table.name", None, f"is required in {file}")
    source_path = _source_path(table, file)
    columns: dict[str, dict[str, Any]] = {}
    for name, spec in _section(data, "columns", str(file)).items():
        if not isinstance(spec, Mapping):
            raise InvalidParameterError(f"columns.{name}", spec, "must be a table of settings")
        _unknown(set(spec), _COLUMN_KEYS, f"[columns.{name}]")
        columns[name] = dict(spec)
    declared = Table(
        name=table["name"],
        source=str(source_path),
        columns=columns,  # type: ignore[arg-type]
        privacy_unit=table.get("privacy_unit"),
        max_rows_per_unit=table.get("max_rows_per_unit", _DEFAULT_ROWS),
        max_groups_per_unit=table.get("max_groups_per_unit", 1),
        max_rows_per_group=table.get("max_rows_per_group"),
        source_table=table.get("source_table"),
        path=str(file),
    )
    budget = _budget(_section(data, "budget", str(file)), file)
    session = _section(data, "session", str(file))
    _unknown(set(session), {"accountant", "noise"}, "[session]")
    accountant = session.get("accountant")
    if accountant is not None and not isinstance(accountant, str):
        raise InvalidParameterError("session.accountant", accountant, "must be a name")
    noise = session.get("noise", "auto")
    if noise not in {"auto", "laplace", "gaussian"}:
        raise InvalidParameterError(
            "session.noise", noise, "must be one of 'auto', 'laplace', 'gaussian'"
        )
    ledger_file, key_file = _ledger(_section(data, "ledger", str(file)), file)
    return Declaration(
        declared, budget, accountant, str(file), ledger_file, key_file, noise=str(noise)
    )


def _source_path(table: Mapping[str, Any], file: Path) -> Path:
    """Where ``[table]`` says the rows live: ``source`` (relative to the file) or ``dataset``."""
    given = [key for key in ("source", "dataset") if key in table]
    if not given:
        raise InvalidParameterError(
            "table.source", None, f"is required in {file} (or dataset, a table dpcurator ships)"
        )
    if len(given) != 1:
        raise InvalidParameterError("[table]", given, f"must give one of source, dataset in {file}")
    if given[0] == "dataset":
        name = table["dataset"]
        if name not in DATASETS:
            raise InvalidParameterError(
                "table.dataset", name, f"must be one of {', '.join(DATASETS)} in {file}"
            )
        return dataset_path(name)
    source = table["source"]
    if not isinstance(source, str):
        raise InvalidParameterError("table.source", source, "must be a file path")
    source_path = Path(source)
    if not source_path.is_absolute():
        source_path = file.resolve().parent / source_path
    return source_path


def _budget(spec: Mapping[str, Any], file: Path) -> Budget | None:
    """Read ``[budget]``: a finite epsilon >= 0 and a delta in [0, 1)."""
    if not spec:
        return None
    _unknown(set(spec), {"epsilon", "delta"}, "[budget]")
    values: dict[str, float] = {}
    for name, default in (("epsilon", None), ("delta", 0.0)):
        value = spec.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidParameterError(f"budget.{name}", value, f"must be a number in {file}")
        if not math.isfinite(value) or value < 0:
            raise InvalidParameterError(
                f"budget.{name}",
                value,
                f"must be finite and >= 0 in {file}: give a finite budget (the ledger enforces "
                "it; an infinite one would never refuse a query)",
            )
        values[name] = float(value)
    return Budget(values["epsilon"], values["delta"])


def _ledger(spec: Mapping[str, Any], file: Path) -> tuple[str | None, str | None]:
    """Read ``[ledger]``: ``path`` and ``key``, relative to the TOML file's folder."""
    _unknown(set(spec), {"path", "key"}, "[ledger]")
    out: dict[str, str | None] = {}
    for name in ("path", "key"):
        value = spec.get(name)
        if value is None:
            out[name] = None
            continue
        if not isinstance(value, str) or not value.strip() or value == ":memory:":
            raise InvalidParameterError(
                f"ledger.{name}", value, f"must be a file path (relative to {file.parent})"
            )
        out[name] = str(file.parent / value)  # an absolute value stays as it is
    if out["path"] is not None and out["path"] == out["key"]:
        raise InvalidParameterError("ledger.key", spec.get("key"), "must differ from ledger.path")
    return out["path"], out["key"]
