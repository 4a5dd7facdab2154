"""Declarations of hierarchical releases, in Python and as TOML.

A :class:`HierarchySpec` says everything a census-style release needs and nothing that depends on
the private data: where the rows live (a bundled dataset, a Parquet/CSV/DuckDB file or a curator
:class:`~dpcurator.curator.Table`), the level columns from the top down (nation > state >
county), what a row stands for (one person, or ``count`` people), an optional attribute (a
column, or several count columns as attribute cells), the noise and the budget with its split
over levels, the public invariants, and the post-processing.

The TOML form (``examples/census.toml``)::

    name = "census"

    [data]
    dataset = "county_population"   # or: source = "people.parquet" (relative to this file)
                                    # or: table = "people.toml" (a curator declaration)
    count = "population_2019"       # omit: each row is one person

    [hierarchy]
    root = "United States"
    levels = ["region", "division", "state", "county"]
    # attribute = "race"                          # a column whose values are the cells
    # attribute_counts = ["popwhite", "popblack"] # or: count columns as the cells

    [privacy]
    mechanism = "geometric"          # or "discrete_gaussian" (then rho = ...)
    epsilon = 1.0
    level_weights = [1, 1, 1, 1]     # one per measured level; default equal
    invariants = ["total"]           # public, exact: "total" or level columns

    [postprocess]
    methods = ["exact", "least_squares"]
    nonnegative = true
    # window = 50                    # faithfulness: |released - noisy| <= window

Examples
--------
>>> spec = HierarchySpec(data="midwest", levels=("state", "county"), root="Midwest",
...                      attribute_counts=("popwhite", "popblack", "popamerindian",
...                                        "popasian", "popother"), epsilon=1.0)
>>> spec.level_names, spec.measured_levels
(('total', 'state', 'county'), ('total', 'state', 'county'))
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcurator._validation import check_epsilon, check_positive
from dpcurator.curator import Column, Table, read_declaration
from dpcurator.datasets import DATASETS, dataset_path
from dpcurator.errors import InvalidParameterError, UnsupportedError
from dpcurator.hierarchy._noise import Mechanism, check_mechanism
from dpcurator.hierarchy._postprocess import METHODS

__all__ = ["TOTAL", "HierarchySpec", "read_spec"]

TOTAL = "total"
"""The name of the root level (in ``invariants`` and the released tables)."""

_TABLE_NAME = "hierarchy"


def _names(value: object, name: str, *, allow_empty: bool = True) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidParameterError(name, value, "must be a list of column names")
    names = tuple(value)
    if not all(isinstance(v, str) and v for v in names):
        raise InvalidParameterError(name, value, "must be a list of non-empty strings")
    if not allow_empty and not names:
        raise InvalidParameterError(name, value, "must name at least one column")
    if len(set(names)) != len(names):
        raise InvalidParameterError(name, value, "must not repeat a name")
    return names


def _optional_name(value: object, name: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidParameterError(name, value, "must be a column name")
    return value


@dataclass(frozen=True, eq=False)
class HierarchySpec:
    """A hierarchical release, declared: data, levels, noise, budget, invariants, post-processing.

    Neighbour relation: add or remove one person, i.e. one unit of count in one leaf cell (one
    row of microdata, or one unit of a row's ``count``). The set of nodes (every path of level
    values found in the data, crossed with every attribute cell) is treated as public, as the
    Census geography is; declare only hierarchies whose node set is public.

    Parameters
    ----------
    data : str, path, pandas.DataFrame, pyarrow.Table or curator Table
        A bundled dataset name (:data:`dpcurator.datasets.DATASETS`), a ``.parquet`` /
        ``.csv`` / ``.duckdb`` file (with ``source_table`` for DuckDB), an in-memory table, or
        a curator :class:`~dpcurator.curator.Table` declaration whose declared columns include
        those named here (and with no privacy unit: each row is one person, or ``count``).
    levels : sequence of str
        The level columns, top down (e.g. ``("state", "county")``); the root (the total) sits
        above them.
    root : str, default "total"
        Display name of the root node (e.g. ``"United States"``).
    count : str, optional
        A count column: each row stands for that many people (aggregated data). Omit for
        microdata (each row is one person).
    attribute : str, optional
        A column whose values are the attribute cells (race, household size ...).
    attribute_counts : sequence of str, optional
        Several count columns, each an attribute cell (midwest's race columns); exclusive with
        ``count`` and ``attribute``.
    mechanism : {"geometric", "discrete_gaussian"}, default "geometric"
        Pure epsilon-DP or rho-zCDP noise.
    epsilon : float, optional
        The total budget of a ``"geometric"`` release, > 0.
    rho : float, optional
        The total budget of a ``"discrete_gaussian"`` release, > 0.
    level_weights : sequence of float, optional
        The split of the budget over the measured levels (top down), positive; default equal.
    invariants : sequence of str, optional
        Levels released exactly, public by declaration and not protected by DP: ``"total"``
        (the root) and, without an attribute, the level columns below it in order (the Census
        keeps the nation and state totals exact). They are not measured and take no budget.
    methods : sequence of str, default ("exact",)
        Post-processing methods (:data:`dpcurator.hierarchy._postprocess.METHODS`).
    nonnegative : bool, default True
        Released counts are >= 0.
    window : float, optional
        Faithfulness window ``a >= 0``: released counts within ``a`` of the noisy ones.
    source_table : str, optional
        The table inside a DuckDB ``data`` file.
    name : str, default "hierarchy"
        A name for the release (file names, report title).

    Raises
    ------
    InvalidParameterError
        For a value that is not valid, with the argument's name.
    UnsupportedError
        For combinations the release cannot protect (level invariants with an attribute, a
        curator table whose units contribute several rows).

    Examples
    --------
    >>> spec = HierarchySpec(data="county_population", levels=("region", "state"),
    ...                      count="population_2019", epsilon=0.5, invariants=("total",))
    >>> spec.measured_levels, spec.budget
    (('region', 'state'), 0.5)
    >>> HierarchySpec(data="county_population", levels=("state",), epsilon=-1.0)
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: epsilon must be > 0; got -1.0.
    """

    data: Any
    levels: tuple[str, ...]
    root: str = TOTAL
    count: str | None = None
    attribute: str | None = None
    attribute_counts: tuple[str, ...] = ()
    mechanism: Mechanism = "geometric"
    epsilon: float | None = None
    rho: float | None = None
    level_weights: tuple[float, ...] | None = None
    invariants: tuple[str, ...] = ()
    methods: tuple[str, ...] = ("exact",)
    nonnegative: bool = True
    window: float | None = None
    source_table: str | None = None
    name: str = "hierarchy"

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "levels", _names(self.levels, "levels", allow_empty=False))
        if not isinstance(self.root, str) or not self.root:
            raise InvalidParameterError("root", self.root, "must be a non-empty name")
        if not isinstance(self.name, str) or not self.name:
            raise InvalidParameterError("name", self.name, "must be a non-empty name")
        set_(self, "count", _optional_name(self.count, "count"))
        set_(self, "attribute", _optional_name(self.attribute, "attribute"))
        set_(self, "attribute_counts", _names(self.attribute_counts, "attribute_counts"))
        self._check_columns()
        set_(self, "mechanism", check_mechanism(self.mechanism))
        self._check_budget()
        set_(self, "invariants", _names(self.invariants, "invariants"))
        self._check_invariants()
        self._check_weights()
        set_(self, "methods", _names(self.methods, "methods", allow_empty=False))
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise InvalidParameterError("methods", unknown, f"must be among {', '.join(METHODS)}")
        if not isinstance(self.nonnegative, bool):
            raise InvalidParameterError("nonnegative", self.nonnegative, "must be True or False")
        if self.window is not None:
            set_(self, "window", check_positive(self.window, "window", allow_zero=True))
        set_(self, "data", _as_table(self.data, self.columns, self.source_table))

    # -- validation ----------------------------------------------------------------------------
    def _check_columns(self) -> None:
        if self.attribute_counts and (self.count is not None or self.attribute is not None):
            raise InvalidParameterError(
                "attribute_counts",
                list(self.attribute_counts),
                "excludes count and attribute: the count columns are the attribute cells",
            )
        names = [*self.levels, *(c for c in (self.count, self.attribute) if c)]
        names += self.attribute_counts
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise InvalidParameterError("levels", repeated, "name each column in one role only")
        if TOTAL in self.levels:
            raise InvalidParameterError("levels", TOTAL, "is the root level's name: rename it")

    def _check_budget(self) -> None:
        wanted, other = ("epsilon", "rho") if self.mechanism == "geometric" else ("rho", "epsilon")
        if getattr(self, other) is not None:
            raise InvalidParameterError(
                other,
                getattr(self, other),
                f"does not apply to {self.mechanism} noise: give {wanted}",
            )
        value = getattr(self, wanted)
        if value is None:
            raise InvalidParameterError(wanted, None, f"is required for {self.mechanism} noise")
        check = check_epsilon if wanted == "epsilon" else check_positive
        object.__setattr__(self, wanted, check(value, wanted))

    def _check_invariants(self) -> None:
        unknown = [v for v in self.invariants if v not in self.level_names]
        if unknown:
            raise InvalidParameterError(
                "invariants", unknown, f"must be among {', '.join(self.level_names)}"
            )
        public = [n for n in self.level_names if n in self.invariants]
        if public != list(self.level_names[: len(public)]):
            raise InvalidParameterError(
                "invariants",
                list(self.invariants),
                "must be the top levels (total, then the levels below it in order): a public "
                "level makes every level above it public too",
            )
        if self.has_attribute and set(self.invariants) - {TOTAL}:
            raise UnsupportedError(
                "With an attribute only the total can be an invariant: a level's totals are "
                "sums over attribute cells, not nodes of the released tree."
            )
        if not self.measured_levels:
            raise InvalidParameterError(
                "invariants", list(self.invariants), "must leave at least one level to measure"
            )

    def _check_weights(self) -> None:
        if self.level_weights is None:
            return
        weights = tuple(self.level_weights)
        if len(weights) != len(self.measured_levels):
            raise InvalidParameterError(
                "level_weights",
                list(weights),
                f"must give one weight per measured level ({', '.join(self.measured_levels)})",
            )
        checked = tuple(check_positive(w, "level_weights") for w in weights)
        object.__setattr__(self, "level_weights", checked)

    # -- derived -------------------------------------------------------------------------------
    @property
    def table(self) -> Table:
        """The data, as the curator :class:`~dpcurator.curator.Table` the engine reads."""
        assert isinstance(self.data, Table)  # converted in __post_init__
        return self.data

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column of the data the release reads."""
        extra = (c for c in (self.attribute, self.count) if c is not None)
        return (*self.levels, *extra, *self.attribute_counts)

    @property
    def has_attribute(self) -> bool:
        """Whether counts are broken down by attribute cell."""
        return self.attribute is not None or bool(self.attribute_counts)

    @property
    def level_names(self) -> tuple[str, ...]:
        """``"total"`` followed by the level columns, top down."""
        return (TOTAL, *self.levels)

    @property
    def measured_levels(self) -> tuple[str, ...]:
        """The levels that get noise, top down.

        Without an attribute: every level that is not an invariant. With one, every level's
        histogram by attribute cell (the invariant ``"total"`` is then the grand total over all
        cells, the root of the reduced tree, which is not measured).
        """
        if self.has_attribute:
            return self.level_names
        return tuple(n for n in self.level_names if n not in self.invariants)

    @property
    def budget(self) -> float:
        """Epsilon (geometric noise) or rho (discrete Gaussian)."""
        value = self.epsilon if self.mechanism == "geometric" else self.rho
        assert value is not None  # checked in __post_init__
        return value

    @property
    def weights(self) -> tuple[float, ...]:
        """The budget split over :attr:`measured_levels` (declared, or equal)."""
        if self.level_weights is None:
            return (1.0,) * len(self.measured_levels)
        return self.level_weights

    def with_budget(self, budget: float) -> HierarchySpec:
        """Return a copy with another total budget (epsilon or rho, as the mechanism says).

        Examples
        --------
        >>> spec = HierarchySpec(data="midwest", levels=("state",), count="poptotal", epsilon=1)
        >>> spec.with_budget(0.1).epsilon
        0.1
        """
        if self.mechanism == "geometric":
            return dataclasses.replace(self, epsilon=budget)
        return dataclasses.replace(self, rho=budget)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> HierarchySpec:
        """Read a declaration from a TOML file (format in the module docstring).

        Equivalent to :func:`read_spec`.
        """
        return read_spec(path)


# -- the data ----------------------------------------------------------------------------------
def _as_table(data: object, columns: Sequence[str], source_table: str | None) -> Table:
    """Return the data as a curator Table declaring ``columns`` (read by the curator's engine)."""
    if isinstance(data, Table):
        declared = set(data.column_names)
        missing = [c for c in columns if c not in declared]
        if missing:
            raise InvalidParameterError(
                "data", missing, f"are not declared columns of table {data.name!r}"
            )
        if data.privacy_unit is not None:
            raise UnsupportedError(
                f"Table {data.name!r} declares the privacy unit {data.privacy_unit!r}; a "
                "hierarchical release counts each row as one person (or `count` people) and "
                "does not bound contributions per unit: declare no privacy_unit."
            )
        return data
    declared_columns = tuple(Column(c) for c in columns)
    if isinstance(data, str) and data in DATASETS:
        return Table(_TABLE_NAME, str(dataset_path(data)), declared_columns)
    if isinstance(data, str | os.PathLike):
        return Table(_TABLE_NAME, os.fspath(data), declared_columns, source_table=source_table)
    return Table(_TABLE_NAME, data, declared_columns)


# -- TOML --------------------------------------------------------------------------------------
_SECTIONS: Mapping[str, frozenset[str]] = {
    "data": frozenset({"dataset", "source", "table", "source_table", "count"}),
    "hierarchy": frozenset({"root", "levels", "attribute", "attribute_counts"}),
    "privacy": frozenset({"mechanism", "epsilon", "rho", "level_weights", "invariants"}),
    "postprocess": frozenset({"methods", "nonnegative", "window"}),
}


def _load_toml(file: Path) -> dict[str, Any]:
    try:
        with file.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise InvalidParameterError("path", str(file), "does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise InvalidParameterError("path", str(file), f"is not valid TOML: {error}") from None


def _sections(data: Mapping[str, Any], file: Path) -> dict[str, Mapping[str, Any]]:
    unknown = sorted(set(data) - {"name", *_SECTIONS})
    if unknown:
        raise InvalidParameterError(
            f"sections of {file}", unknown, f"unknown; allowed: name, {', '.join(_SECTIONS)}"
        )
    sections: dict[str, Mapping[str, Any]] = {}
    for key, allowed in _SECTIONS.items():
        section = data.get(key, {})
        if not isinstance(section, Mapping):
            raise InvalidParameterError(key, section, f"must be a [{key}] table in {file}")
        extra = sorted(set(section) - allowed)
        if extra:
            raise InvalidParameterError(
                f"[{key}]", extra, f"unknown keys; allowed: {', '.join(sorted(allowed))}"
            )
        sections[key] = section
    return sections


def _toml_data(section: Mapping[str, Any], file: Path) -> object:
    given = [k for k in ("dataset", "source", "table") if k in section]
    if len(given) != 1:
        raise InvalidParameterError(
            "[data]", given, f"must give exactly one of dataset, source, table in {file}"
        )
    value = section[given[0]]
    if not isinstance(value, str) or not value:
        raise InvalidParameterError(f"data.{given[0]}", value, "must be a name or a path")
    if given[0] == "dataset":
        if value not in DATASETS:
            raise InvalidParameterError(
                "data.dataset", value, f"must be one of {', '.join(DATASETS)}"
            )
        return value
    path = Path(value)
    if not path.is_absolute():
        path = file.resolve().parent / path
    if given[0] == "table":
        return read_declaration(path).table
    return path


def read_spec(path: str | os.PathLike[str]) -> HierarchySpec:
    r"""Read a hierarchical release declared in TOML (format in the module docstring).

    Relative paths (``source``, ``table``) are taken relative to the TOML file.

    Parameters
    ----------
    path : str or path
        The TOML file.

    Returns
    -------
    HierarchySpec

    Raises
    ------
    InvalidParameterError
        For a missing or malformed file, unknown sections or keys, or invalid values; the
        message names the key.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "midwest.toml")
    >>> with open(path, "w") as f:
    ...     _ = f.write('[data]\ndataset = "midwest"\ncount = "poptotal"\n'
    ...                 '[hierarchy]\nlevels = ["state", "county"]\n'
    ...                 '[privacy]\nepsilon = 1.0\ninvariants = ["total"]\n')
    >>> read_spec(path).measured_levels
    ('state', 'county')
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidParameterError("path", path, "must be a path to a TOML file")
    file = Path(path)
    raw = _load_toml(file)
    sections = _sections(raw, file)
    data, hierarchy = sections["data"], sections["hierarchy"]
    privacy, post = sections["privacy"], sections["postprocess"]
    options: dict[str, Any] = {
        "data": _toml_data(data, file),
        "source_table": data.get("source_table"),
        "count": data.get("count"),
        "levels": hierarchy.get("levels", ()),
        "attribute": hierarchy.get("attribute"),
        "attribute_counts": hierarchy.get("attribute_counts", ()),
        "mechanism": privacy.get("mechanism", "geometric"),
        "epsilon": privacy.get("epsilon"),
        "rho": privacy.get("rho"),
        "invariants": privacy.get("invariants", ()),
        "methods": post.get("methods", ("exact",)),
        "nonnegative": post.get("nonnegative", True),
        "window": post.get("window"),
        "name": raw.get("name", file.stem),
        "root": hierarchy.get("root", TOTAL),
    }
    weights = privacy.get("level_weights")
    if weights is not None:
        if isinstance(weights, str) or not isinstance(weights, Sequence):
            raise InvalidParameterError("privacy.level_weights", weights, "must be a list")
        options["level_weights"] = tuple(weights)
    return HierarchySpec(**options)
