"""``dpcurator demo``: a trusted curator answers private SQL over real data, under a budget.

The demo plays both sides. As the data holder it loads the bundled CPS tax units (280,005 tax
units of 200,576 households, :func:`~dpcurator.datasets.load_cps`) into a DuckDB database file,
declares the table (privacy unit: the household, at most 4 tax units each; public bounds and
domains) in Python and as TOML, and opens a :class:`~dpcurator.curator.Session` with a budget.
As the analyst it asks typical questions (tax units by state, mean wages, a median, a histogram
of ages, a question with WHERE, the same through the query builder) and prints each answer with
its error bars and the budget left; then it repeats a question until the budget runs out and
shows the refusal, which spends nothing.

Then, as a simulation (a separate session with an unlimited budget and a ledger that is not
kept), it measures the error of counts and mean wages by state against epsilon over repeated
releases, and plots the observed mean absolute error with the error the releases predict from
their standard deviations (``DIR/error_vs_epsilon.png``).

Every privacy-protecting draw comes from the secure default source; nothing here is seeded.

``run_demo(..., as_json=True)`` prints nothing but one JSON object at the end
(:func:`demo_summary`: the files, every answered release in full as ``dpcurator query --json``
prints it, the refusals' whole messages, the budget spent and left, the simulation's errors).
"""

from __future__ import annotations

import io
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table as RichTable

from dpcurator.accounting import Budget
from dpcurator.cli._query import (
    _budget_dict,
    _strict,
    budget_text,
    print_ledger,
    print_release,
    release_dict,
)
from dpcurator.errors import BudgetExceededError, QueryError

if TYPE_CHECKING:
    import pandas as pd

    from dpcurator.curator import QueryRelease, Session, Table

__all__ = [
    "AGE_BINS",
    "BUDGET",
    "DEFAULT_OUT",
    "FILING_STATUSES",
    "ROWS_PER_HOUSEHOLD",
    "STATES",
    "DemoResult",
    "ErrorPoint",
    "cps_declaration",
    "declaration_toml",
    "demo_summary",
    "run_demo",
    "simulate_errors",
    "write_plot",
]

DEFAULT_OUT = Path("demo-output")
"""Where ``dpcurator demo`` writes its database, declaration, ledger and plot by default."""

STATES = (
    "AK", "AL", "AR", "AZ", "CA", "CO", "CT", "DC", "DE", "FL", "GA", "HI", "IA", "ID", "IL",
    "IN", "KS", "KY", "LA", "MA", "MD", "ME", "MI", "MN", "MO", "MS", "MT", "NC", "ND", "NE",
    "NH", "NJ", "NM", "NV", "NY", "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT",
    "VA", "VT", "WA", "WI", "WV", "WY",
)  # fmt: skip
"""The public domain of ``state``: the 50 states and DC (public knowledge, not read from data)."""

FILING_STATUSES = ("single", "married_joint", "married_separate", "head_of_household")
"""The public domain of ``filing_status`` (the IRS filing statuses in the CPS tax units)."""

AGE_BINS = (0, 18, 25, 35, 45, 55, 65, 75, 86)
"""Public histogram edges of ``age_head`` (ages 0 to 85; the last bin holds 75 to 85)."""

ROWS_PER_HOUSEHOLD = 4
"""Contribution bound: tax units one household may contribute to a query."""

BUDGET = Budget(2.0, 1e-6)
"""The demo session's total budget."""

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_LAPLACE_MAE = 1.0 / math.sqrt(2.0)  # E|X| / std of a Laplace variable
_NORMAL_MAE = math.sqrt(2.0 / math.pi)  # E|X| / std of a normal variable
_SIMULATION_SQL = (
    "SELECT state, COUNT(*) AS tax_units, AVG(wages) AS mean_wages FROM cps GROUP BY state"
)
_REFERENCE_EPSILON = 1e5


# --------------------------------------------------------------------------------------------
# the declaration


def cps_declaration(source: str | Path, *, source_table: str | None = "cps") -> Table:
    """Declare the CPS tax units: privacy unit the household, its public bounds and domains.

    A household (``household_id``: 1 to 12 tax units) is the privacy unit, bounded to
    :data:`ROWS_PER_HOUSEHOLD` tax units per query (possibly in as many groups); the curator
    drops the others, chosen by a hash of the household's own rows. Dollar amounts are clamped
    into declared bounds; ``state`` and ``filing_status`` have public domains; ``age_head`` has
    public histogram bins. The CPS file has no missing values (documented in ``DATASETS.md``),
    so the numeric columns are declared not nullable (an AVG then needs no extra count).

    Parameters
    ----------
    source : str or Path
        The DuckDB database file (or a Parquet file, with ``source_table=None``).
    source_table : str or None, default "cps"
        The table inside a DuckDB file.

    Returns
    -------
    dpcurator.curator.Table

    Examples
    --------
    >>> from dpcurator.datasets import dataset_path
    >>> cps = cps_declaration(dataset_path("cps"), source_table=None)
    >>> cps.privacy_unit, cps.max_rows_per_unit, cps.column("wages").bounds
    ('household_id', 4, (0.0, 250000.0))
    """
    from dpcurator.curator import Column, Table  # noqa: PLC0415 (the curator is slow to import)

    return Table(
        name="cps",
        source=str(source),
        source_table=source_table,
        privacy_unit="household_id",
        max_rows_per_unit=ROWS_PER_HOUSEHOLD,
        max_groups_per_unit=ROWS_PER_HOUSEHOLD,
        columns=(
            Column("household_id"),
            Column("state", domain=STATES),
            Column("filing_status", domain=FILING_STATUSES),
            Column("age_head", lower=0, upper=85, bins=AGE_BINS, nullable=False),
            Column("wages", lower=0, upper=250_000, nullable=False),
            Column("social_security", lower=0, upper=100_000, nullable=False),
            Column("snap_benefits", lower=0, upper=30_000, nullable=False),
        ),
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_key(name: str) -> str:
    return name if _BARE_KEY.match(name) else json.dumps(name, ensure_ascii=False)


def declaration_toml(
    table: Table, *, source: str, budget: Budget | None = None, comment: str = ""
) -> str:
    """Write a table's declaration as TOML (the format of :meth:`Table.from_toml`).

    Parameters
    ----------
    table : dpcurator.curator.Table
        The declaration.
    source : str
        The ``source`` to write (a path relative to the TOML file, usually).
    budget : Budget, optional
        Written as the ``[budget]`` section.
    comment : str, optional
        A comment written at the top (one ``#`` line per line).

    Returns
    -------
    str
        TOML text that :func:`~dpcurator.curator.read_declaration` reads back into the same
        declaration.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.curator import Column, Table
    >>> t = Table("t", pd.DataFrame({"x": [1.0]}), columns=[Column("x", lower=0, upper=1.5)])
    >>> print(declaration_toml(t, source="t.csv"))
    [table]
    name = "t"
    source = "t.csv"
    max_rows_per_unit = 1
    max_groups_per_unit = 1
    max_rows_per_group = 1
    <BLANKLINE>
    [columns.x]
    lower = 0
    upper = 1.5
    <BLANKLINE>
    """
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    lines += ["[table]", f"name = {_toml_value(table.name)}", f"source = {_toml_value(source)}"]
    if table.source_table is not None:
        lines.append(f"source_table = {_toml_value(table.source_table)}")
    if table.privacy_unit is not None:
        lines.append(f"privacy_unit = {_toml_value(table.privacy_unit)}")
    lines += [
        f"max_rows_per_unit = {table.max_rows_per_unit}",
        f"max_groups_per_unit = {table.max_groups_per_unit}",
        f"max_rows_per_group = {table.max_rows_per_group}",
    ]
    if budget is not None:
        lines += ["", "[budget]", f"epsilon = {budget.epsilon!r}", f"delta = {budget.delta!r}"]
    for column in table.columns:
        lines += ["", f"[columns.{_toml_key(column.name)}]"]
        if column.lower is not None and column.upper is not None:
            lines += [
                f"lower = {_toml_value(column.lower)}",
                f"upper = {_toml_value(column.upper)}",
            ]
        if column.domain is not None:
            lines.append(f"domain = {_toml_value(column.domain)}")
        if column.bins is not None:
            lines.append(f"bins = {_toml_value(column.bins)}")
        if not column.nullable:
            lines.append("nullable = false")
        if column.expression is not None:
            lines.append(f"expression = {_toml_value(column.expression)}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# the simulation and the plot


@dataclass(frozen=True)
class ErrorPoint:
    """Errors at one epsilon, over the 51 states and every repeat.

    Attributes
    ----------
    epsilon : float
        The query's epsilon.
    repeats : int
        Releases simulated.
    count_mae, mean_mae : float
        Observed mean absolute error of the tax-unit counts and of the mean wages, against the
        bounded answer (the same query with negligible noise).
    count_predicted, mean_predicted : float
        Mean absolute error predicted from the releases' standard deviations.
    """

    epsilon: float
    repeats: int
    count_mae: float
    count_predicted: float
    mean_mae: float
    mean_predicted: float


def _mae_factor(kind: str) -> float:
    """``E|error| / std``: Laplace for one geometric noise, normal for the delta method."""
    return _LAPLACE_MAE if kind == "exact" else _NORMAL_MAE


def _by_state(release: QueryRelease, column: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    frame = release.table.set_index("state").loc[list(STATES)]
    values: np.ndarray[Any, np.dtype[np.float64]] = frame[column].to_numpy(dtype=np.float64)
    return values


def simulate_errors(
    session: Session,
    epsilons: Sequence[float],
    repeats: int,
    reference: QueryRelease,
    progress: Progress | None = None,
) -> list[ErrorPoint]:
    """Release counts and mean wages by state ``repeats`` times per epsilon; measure the errors.

    Parameters
    ----------
    session : Session
        A simulation session (large budget, ledger not kept).
    epsilons : sequence of float
        The query epsilons.
    repeats : int
        Releases per epsilon.
    reference : QueryRelease
        The bounded answer: the same query at a huge epsilon.
    progress : rich.progress.Progress, optional
        Advanced once per release.

    Returns
    -------
    list of ErrorPoint
    """
    truth = {c: _by_state(reference, c) for c in ("tax_units", "mean_wages")}
    task = (
        None if progress is None else progress.add_task("simulating", total=len(epsilons) * repeats)
    )
    points = []
    for epsilon in epsilons:
        errors: dict[str, list[float]] = {"tax_units": [], "mean_wages": []}
        predicted: dict[str, list[float]] = {"tax_units": [], "mean_wages": []}
        for _ in range(repeats):
            release = session.sql(_SIMULATION_SQL, epsilon=epsilon)
            for column, observed in errors.items():
                diff = np.abs(_by_state(release, column) - truth[column])
                observed.append(float(diff.mean()))
                factor = _mae_factor(release.intervals[column])
                predicted[column].append(factor * float(_by_state(release, f"{column}_std").mean()))
            if progress is not None and task is not None:
                progress.advance(task)
        points.append(
            ErrorPoint(
                epsilon=epsilon,
                repeats=repeats,
                count_mae=float(np.mean(errors["tax_units"])),
                count_predicted=float(np.mean(predicted["tax_units"])),
                mean_mae=float(np.mean(errors["mean_wages"])),
                mean_predicted=float(np.mean(predicted["mean_wages"])),
            )
        )
    return points


def write_plot(
    path: Path, points: Sequence[ErrorPoint], *, count_bias: float, mean_bias: float
) -> bool:
    """Plot observed and predicted error against epsilon; return False without matplotlib.

    Two panels, log-log: the mean absolute error of the tax-unit counts by state and of the
    mean wages by state, observed over the simulated releases (dots) and predicted from the
    releases' standard deviations (line), with the bias of the bounds (dotted: the bounded
    answer against the unbounded one) for scale.
    """
    try:
        import matplotlib as mpl  # noqa: PLC0415

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    eps = [p.epsilon for p in points]
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.6))
    panels = (
        (
            axes[0],
            [p.count_mae for p in points],
            [p.count_predicted for p in points],
            count_bias,
            "tax units by state (COUNT)",
            "mean absolute error (tax units)",
        ),
        (
            axes[1],
            [p.mean_mae for p in points],
            [p.mean_predicted for p in points],
            mean_bias,
            "mean wages by state (AVG, wages clamped to [0, 250k])",
            "mean absolute error (dollars)",
        ),
    )
    for ax, observed, predicted, bias, title, ylabel in panels:
        ax.plot(eps, predicted, "-", color="#34495e", label="predicted from the releases' std")
        ax.plot(eps, observed, "o", color="#c0392b", label="observed (simulation)")
        if bias > 0:
            ax.axhline(
                bias,
                linestyle=":",
                color="#7f8c8d",
                label="bias of the bounds (vs. unbounded data)",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(eps, [f"{e:g}" for e in eps])
        ax.minorticks_off()
        ax.set_xlabel("epsilon of the query")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    repeats = points[0].repeats if points else 0
    fig.suptitle(
        f"Simulation: CPS tax units, 51 states, {repeats} releases per epsilon "
        f"(household bound {ROWS_PER_HOUSEHOLD} tax units)",
        fontsize=11,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------------------------
# the demo


@dataclass
class DemoResult:
    """What a demo run wrote and did.

    Attributes
    ----------
    out : Path
        The output folder.
    database, declaration, ledger : Path
        The DuckDB file, its TOML declaration and the session's ledger.
    plot : Path or None
        The error-against-epsilon figure (None without matplotlib).
    answered : int
        Queries answered by the budgeted session.
    refusals : list of str
        The refusal messages shown.
    spent, remaining : Budget
        The session's budget at the end.
    points : list of ErrorPoint
        The simulation's errors.
    seconds : float
        Wall-clock time.
    releases : list of dict
        Every answered question: ``{"question": ..., "release": ...}``, the release as
        ``dpcurator query --json`` prints it.
    """

    out: Path
    database: Path
    declaration: Path
    ledger: Path
    plot: Path | None = None
    answered: int = 0
    refusals: list[str] = field(default_factory=list)
    spent: Budget = field(default_factory=lambda: Budget(0.0))
    remaining: Budget = field(default_factory=lambda: Budget(0.0))
    points: list[ErrorPoint] = field(default_factory=list)
    seconds: float = 0.0
    releases: list[dict[str, Any]] = field(default_factory=list)


def demo_summary(result: DemoResult) -> dict[str, Any]:
    """Return what ``demo --json`` prints: a JSON-ready summary of a demo run (NaN: None).

    Examples
    --------
    >>> summary = demo_summary(DemoResult(Path("d"), Path("d/a"), Path("d/b"), Path("d/c")))
    >>> summary["answered"], summary["budget"], summary["plot"]
    (0, {'epsilon': 2.0, 'delta': 1e-06}, None)
    """
    summary: dict[str, Any] = _strict(
        {
            "out": str(result.out),
            "database": str(result.database),
            "declaration": str(result.declaration),
            "ledger": str(result.ledger),
            "plot": None if result.plot is None else str(result.plot),
            "budget": _budget_dict(BUDGET),
            "answered": result.answered,
            "releases": result.releases,
            "refusals": list(result.refusals),
            "spent": _budget_dict(result.spent),
            "remaining": _budget_dict(result.remaining),
            "simulation": [asdict(point) for point in result.points],
            "seconds": result.seconds,
        }
    )
    return summary


def _load(console: Console, database: Path) -> pd.DataFrame:
    import duckdb  # noqa: PLC0415

    from dpcurator.datasets import load_cps  # noqa: PLC0415

    with console.status("loading the CPS tax units into DuckDB"):
        frame = load_cps()
        for suffix in ("", ".wal"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        connection = duckdb.connect(str(database))
        try:
            connection.register("cps_frame", frame)
            connection.execute("CREATE TABLE cps AS SELECT * FROM cps_frame")
        finally:
            connection.close()
    return frame


def _describe_data(console: Console, frame: pd.DataFrame, database: Path) -> None:
    per_household = frame.groupby("household_id").size()
    over = per_household[per_household > ROWS_PER_HOUSEHOLD]
    dropped = int((over - ROWS_PER_HOUSEHOLD).sum())
    clamped = int((frame["wages"] > 250_000).sum())
    console.print(
        Panel.fit(
            f"{len(frame):,} tax units of {per_household.size:,} households (CPS ASEC 2012-2014, "
            f"via Tax-Calculator; CC0), written to {escape(str(database))} (table cps).\n"
            f"Privacy unit: the [bold]household[/] (1 to {int(per_household.max())} tax units). "
            f"Bound: {ROWS_PER_HOUSEHOLD} tax units per household and query, so one household "
            f"moves a count by at most {ROWS_PER_HOUSEHOLD}.\n"
            f"What the bound truncates: {over.size:,} households have more; "
            f"{dropped:,} tax units ({100 * dropped / len(frame):.2f} %) are left out of every "
            f"query.\nWages are clamped to [0, 250,000]: {clamped:,} tax units "
            f"({100 * clamped / len(frame):.1f} %) earn more.\n"
            "[dim](These figures are the data holder's own look at the data, not releases.)[/]",
            title="1. The data, and the privacy unit",
        )
    )


def _declare(console: Console, table: Table, toml_path: Path) -> None:
    from dpcurator.curator import read_declaration  # noqa: PLC0415

    text = declaration_toml(
        table,
        source=Path(str(table.source)).name,
        budget=BUDGET,
        comment="The CPS tax units, as declared by `dpcurator demo`.\n"
        'Ask: dpcurator query --table cps.toml --epsilon 0.1 "SELECT ..."',
    )
    toml_path.write_text(text, encoding="utf-8")
    again = read_declaration(toml_path)
    same = (
        again.table.columns == table.columns
        and Path(str(again.table.source)).resolve() == Path(str(table.source)).resolve()
        and again.table.privacy_unit == table.privacy_unit
        and again.table.max_rows_per_unit == table.max_rows_per_unit
        and again.budget == BUDGET
    )
    rows = RichTable(title="2. The declaration (public metadata: nothing here is read from data)")
    for name in ("column", "bounds", "public domain / bins", "nullable"):
        rows.add_column(name)
    for column in table.columns:
        bounds = (
            "" if column.bounds is None else f"[{column.bounds[0]:,.0f}, {column.bounds[1]:,.0f}]"
        )
        if column.name == table.privacy_unit:
            described = "privacy unit"
        elif column.domain is not None:
            shown = ", ".join(map(str, column.domain[:6]))
            more = f" … ({len(column.domain)} values)" if len(column.domain) > 6 else ""
            described = shown + more
        elif column.bins is not None:
            described = "bins " + ", ".join(f"{b:g}" for b in column.bins)
        else:
            described = ""
        rows.add_row(column.name, escape(bounds), escape(described), str(column.nullable).lower())
    console.print(rows)
    console.print(
        f"The same declaration as TOML: {escape(str(toml_path))} "
        + ("([green]read back: identical[/])" if same else "([red]read back: differs[/])")
    )
    head = "\n".join(text.splitlines()[:16]) + "\n…"
    console.print(Syntax(head, "toml", theme="ansi_dark", background_color="default"))


def _questions(console: Console, session: Session, result: DemoResult) -> None:
    asked: list[tuple[str, str, str | None, float]] = [
        (
            "Tax units by state",
            "All 51 states are measured (public domain); sorting and LIMIT act on the noisy "
            "counts (post-processing, free).",
            "SELECT state, COUNT(*) AS tax_units FROM cps GROUP BY state "
            "ORDER BY tax_units DESC LIMIT 10",
            0.3,
        ),
        (
            "Mean wages, with bounds",
            "AVG = a noisy centred sum over a noisy count; wages are clamped to [0, 250,000].",
            "SELECT AVG(wages) AS mean_wages FROM cps",
            0.2,
        ),
        (
            "A median (exponential mechanism), with WHERE",
            "The median is chosen among the 1,000,001 points of [0, 250,000] in steps of 0.25 "
            "by the exponential mechanism; it has a rank-error bound, no standard deviation.",
            "SELECT COUNT(*) AS earners, MEDIAN(wages) AS median_wages FROM cps WHERE wages > 0",
            0.2,
        ),
        (
            "A histogram over the declared bins",
            "Every bin is released, empty or not; a household's tax units may fall in several.",
            "SELECT HISTOGRAM(age_head) FROM cps",
            0.2,
        ),
        (
            "Retirees: WHERE, a count and a mean",
            "WHERE runs before the bounds: each household still contributes at most 4 rows.",
            "SELECT COUNT(*) AS retirees, AVG(social_security) AS mean_social_security "
            "FROM cps WHERE age_head >= 65",
            0.3,
        ),
        (
            "The query builder: the same kind of question in Python",
            'session.query("cps").where("age_head < 30").group_by("filing_status")'
            '.count("tax_units").mean("wages").run(epsilon=0.3)',
            None,
            0.3,
        ),
    ]
    for number, (title, note, sql, epsilon) in enumerate(asked, start=1):
        console.rule(f"[bold]3.{number} {title}[/] (epsilon {epsilon:g})")
        console.print(f"[dim]{escape(note)}[/]")
        if sql is None:
            builder = (
                session.query("cps")
                .where("age_head < 30")
                .group_by("filing_status")
                .count("tax_units")
                .mean("wages")
            )
            console.print(f"[dim]builder SQL: {escape(builder.to_sql())}[/]")
            release = builder.run(epsilon=epsilon)
        else:
            release = session.sql(sql, epsilon=epsilon)
        result.answered += 1
        result.releases.append({"question": title, "release": release_dict(release)})
        print_release(console, release, budget=session.budget)


def _refusals(console: Console, session: Session, result: DemoResult) -> None:
    console.rule("[bold]4. Refusals: they read nothing and spend nothing[/]")
    try:
        session.sql("SELECT household_id, wages FROM cps", epsilon=0.1)
    except QueryError as exc:
        result.refusals.append(str(exc))
        console.print(f"[red]refused[/] (not an aggregate): {escape(str(exc))}")
    sql = "SELECT COUNT(*) AS snap_units FROM cps WHERE snap_benefits > 0"
    console.print(
        f"An analyst repeats [bold]{escape(sql)}[/] at epsilon 0.2, hoping to average the "
        "noise away; every repeat is charged:"
    )
    while True:
        entries = len(session.ledger.entries())
        before = session.spent
        try:
            release = session.sql(sql, epsilon=0.2)
        except BudgetExceededError as exc:
            result.refusals.append(str(exc))
            after = session.spent
            unchanged = after == before and len(session.ledger.entries()) == entries
            console.print(f"  [red]refused[/]: {escape(str(exc))}")
            console.print(
                f"  spent before {budget_text(before)}, after {budget_text(after)}; ledger "
                f"entries {entries} -> {len(session.ledger.entries())}: "
                + ("[green]nothing was spent[/]" if unchanged else "[red]something changed[/]")
            )
            break
        result.answered += 1
        result.releases.append(
            {"question": "A repeated question", "release": release_dict(release)}
        )
        row = release.table.iloc[0]
        console.print(
            f"  answer {row['snap_units']:,.0f} ± {row['snap_units_std']:.1f}; "
            f"left {budget_text(release.remaining)}"
        )


def _simulate(
    console: Console, table: Table, frame: pd.DataFrame, *, quick: bool, result: DemoResult
) -> None:
    from dpcurator.curator import Session  # noqa: PLC0415

    epsilons = (0.1, 1.0) if quick else (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
    repeats = 2 if quick else 10
    console.rule("[bold]5. Simulation: error against epsilon[/]")
    console.print(
        "[yellow]A simulation[/], not a release: a separate session with an unlimited budget "
        "and a ledger that is not kept, as only the data holder could run. It asks "
        f"[bold]{escape(_SIMULATION_SQL)}[/] {repeats} times at each of "
        f"{len(epsilons)} epsilons and compares with the bounded answer (the same query at "
        f"epsilon {_REFERENCE_EPSILON:g}: negligible noise)."
    )
    with Session(table, Budget.unlimited(), ledger=":memory:") as simulation:
        reference = simulation.sql(_SIMULATION_SQL, epsilon=_REFERENCE_EPSILON)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console) as progress:
            result.points = simulate_errors(simulation, epsilons, repeats, reference, progress)
    raw_counts = frame.groupby("state").size().reindex(list(STATES)).to_numpy(np.float64)
    raw_means = frame.groupby("state")["wages"].mean().reindex(list(STATES)).to_numpy(np.float64)
    count_bias = float(np.mean(np.abs(_by_state(reference, "tax_units") - raw_counts)))
    mean_bias = float(np.mean(np.abs(_by_state(reference, "mean_wages") - raw_means)))
    table_out = RichTable(title="mean absolute error over 51 states (observed / predicted)")
    for name in (
        "epsilon",
        "tax units: observed",
        "predicted",
        "mean wages: observed",
        "predicted",
    ):
        table_out.add_column(name, justify="right")
    for p in result.points:
        table_out.add_row(
            f"{p.epsilon:g}",
            f"{p.count_mae:,.1f}",
            f"{p.count_predicted:,.1f}",
            f"{p.mean_mae:,.0f}",
            f"{p.mean_predicted:,.0f}",
        )
    console.print(table_out)
    console.print(
        "Predicted: the releases' std times E|X|/std: 1/√2 for a count's Laplace-shaped noise, "
        "√(2/π) for a mean (the normal approximation of its interval; its noise is partly "
        "Laplace-shaped, so the observed error runs a little lower).\nBias of the bounds (the "
        f"bounded answer against the unbounded one, by state): {count_bias:,.1f} tax units, "
        f"{mean_bias:,.0f} dollars of mean wages: noise falls as 1/epsilon, the bias does not."
    )
    path = result.out / "error_vs_epsilon.png"
    if write_plot(path, result.points, count_bias=count_bias, mean_bias=mean_bias):
        result.plot = path
        console.print(f"plot written to [bold]{escape(str(path))}[/]")
    else:
        console.print(
            "[yellow]matplotlib is not installed: no plot written[/] "
            "(pip install 'dpcurator\\[plot]')"
        )


def run_demo(
    console: Console, out: Path = DEFAULT_OUT, *, quick: bool = False, as_json: bool = False
) -> DemoResult:
    """Run the curator demo, printing to ``console`` and writing into ``out``.

    Writes ``out/cps.duckdb`` (the data), ``out/cps.toml`` (its declaration, with the budget),
    ``out/cps.ledger.sqlite`` and ``out/cps.ledger.key`` (the session's ledger and the steward's
    key that makes it tamper-evident, both fresh for each run) and
    ``out/error_vs_epsilon.png`` (the simulation's plot, when matplotlib is installed).

    Parameters
    ----------
    console : rich.console.Console
        Where to print.
    out : Path, default ``demo-output``
        The output folder (created if missing).
    quick : bool, default False
        Fewer epsilons and repeats in the simulation (for tests).
    as_json : bool, default False
        Print nothing to ``console``; print :func:`demo_summary` as one JSON object on stdout
        at the end.

    Returns
    -------
    DemoResult
    """
    from dpcurator.curator import Ledger, Session, read_declaration  # noqa: PLC0415

    if as_json:
        console = Console(file=io.StringIO())
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    result = DemoResult(
        out=out,
        database=out / "cps.duckdb",
        declaration=out / "cps.toml",
        ledger=out / "cps.ledger.sqlite",
    )
    console.rule("[bold]dpcurator demo: a trusted curator answers private SQL over real data")
    frame = _load(console, result.database)
    _describe_data(console, frame, result.database)
    table = cps_declaration(result.database.resolve())
    _declare(console, table, result.declaration)
    # A fresh ledger, key and budget for this run's database: the demo is its own steward.
    for stale in ("", "-wal", "-shm"):
        Path(f"{result.ledger}{stale}").unlink(missing_ok=True)
    Path(read_declaration(result.declaration).ledger_key).unlink(missing_ok=True)
    # Opened on the declaration, as `dpcurator query` does: its ledger, chained with its key.
    with Session.from_toml(result.declaration) as session:
        console.print(
            f"Session: budget [bold]{budget_text(session.budget)}[/], accountant "
            f"{session.ledger.accountant}, ledger {escape(str(result.ledger))}"
        )
        _questions(console, session, result)
        _refusals(console, session, result)
        result.spent, result.remaining = session.spent, session.remaining
    _simulate(console, table, frame, quick=quick, result=result)
    console.rule("[bold]6. The ledger[/]")
    with Ledger.open(result.ledger) as books:
        print_ledger(console, books)
    result.seconds = time.perf_counter() - start
    console.print(
        f"Every release above is recorded in {escape(str(result.ledger))}. Read it again with\n"
        f"  [bold]dpcurator ledger {escape(str(result.ledger))}[/]\n"
        f"Ask with the CLI; {budget_text(result.remaining)} is left, so this one is refused "
        "(--explain first says so, without spending):\n"
        f"  [bold]dpcurator query --table {escape(str(result.declaration))} --epsilon 0.5 "
        f'"SELECT COUNT(*) FROM cps"[/]\n'
        "Declare your own table like examples/cps.toml. "
        f"Demo done in {result.seconds:.0f} s."
    )
    if as_json:
        typer.echo(json.dumps(demo_summary(result), allow_nan=False))
    return result
