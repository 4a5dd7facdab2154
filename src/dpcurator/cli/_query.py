"""``dpcurator query`` and ``dpcurator ledger``: private SQL over a declared table, and its books.

``dpcurator query --table people.toml --epsilon 0.5 "SELECT state, COUNT(*) FROM people GROUP BY
state"`` opens a :class:`~dpcurator.curator.Session` on the TOML declaration and answers the
query with differential privacy. It prints the released table (each value with its standard
deviation and 95 % interval), how the query's budget was split over its noisy measurements, what
it was charged and what is left; ``--json`` prints the same as JSON (budgets to 12 significant
digits, :func:`budget_number`: ``1.786``, not ``1.7859999999999998``). ``--explain`` shows the plan
(the measurements, their noise, the bounded SQL the engine would run) and whether the ledger would
answer it, reading no data and spending nothing.

The budget and the ledger belong to the declaration, not to the query: the budget is its
``[budget]`` section (finite), and every answer is recorded in the ledger its ``[ledger]`` section
names (default ``<name>.ledger.sqlite`` next to the TOML), chained with the steward's key file
(default ``<name>.ledger.key``, created with the ledger). There is no option to record elsewhere,
and a ledger that was edited, cut short, replaced or deleted is refused, so whoever asks cannot
start the budget afresh.

A refusal (a query that is not a supported aggregate, an unknown column, a query over budget, a
bad parameter, a malformed declaration, an altered ledger) prints the reason and exits with
status 2; nothing is spent.

``dpcurator ledger people.toml`` (or the ledger file itself, with ``--key`` if its key file is
not named like it) verifies the ledger and prints the budget, the accountant, what was spent and
what remains, then one row per recorded release.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dpcurator.accounting import Budget, event_to_dict
from dpcurator.cli._suggest import with_suggestion
from dpcurator.errors import DPError, InvalidParameterError

if TYPE_CHECKING:  # the curator (DuckDB, pandas, sqlglot) is imported when a command runs
    from dpcurator.curator import Ledger, LedgerEntry, Measurement, QueryRelease

__all__ = [
    "BUDGET_DIGITS",
    "budget_number",
    "budget_text",
    "ledger",
    "ledger_path_for",
    "ledger_summary",
    "print_ledger",
    "print_release",
    "query",
    "release_dict",
    "split_table",
]

console = Console()

_INTERVAL_NOTES = {
    "exact": "exact interval of the noise",
    "conservative": "union bound over two noises (coverage at least the level)",
    "approximate": "delta method, normal interval (approximate)",
    "none": "no closed form: chosen by the exponential mechanism, no standard deviation",
}


# --------------------------------------------------------------------------------------------
# rendering (shared with the demo)


def budget_text(budget: Budget) -> str:
    """Format a budget as people read it: ``ε=0.5, δ=1e-06``.

    Examples
    --------
    >>> from dpcurator.accounting import Budget
    >>> budget_text(Budget(0.5, 1e-6))
    'ε=0.5, δ=1e-06'
    >>> budget_text(Budget.unlimited())
    'ε=inf, δ=0'
    """
    return f"ε={budget.epsilon:.4g}, δ={budget.delta:.3g}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "-"
    if value != 0 and (abs(value) >= 1e7 or abs(value) < 1e-3):
        return f"{value:.4g}"
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def split_table(split: tuple[Measurement, ...], title: str = "budget split") -> Table:
    """Return the measurements of a query as a rich table (mechanism, ε, δ, sensitivity, scale).

    Examples
    --------
    >>> from dpcurator.curator import Measurement
    >>> from dpcurator.curator._measures import RowCount
    >>> m = Measurement("COUNT(*)", "count", None, "geometric", 0.5, 0.0, 4.0, 8.0, RowCount())
    >>> split_table((m,)).row_count
    1
    """
    table = Table(title=title, title_justify="left")
    for name in ("measurement", "mechanism", "ε", "δ", "sensitivity", "noise scale"):
        table.add_column(name, justify="left" if name in {"measurement", "mechanism"} else "right")
    for m in split:
        table.add_row(
            escape(m.name),
            m.mechanism,
            f"{m.epsilon:.4g}",
            f"{m.delta:.3g}",
            _number(m.sensitivity),
            _number(m.scale),
        )
    return table


def print_release(out: Console, release: QueryRelease, *, budget: Budget | None = None) -> None:
    """Print a release: the table with error bars, notes on its intervals, the split, the budget.

    Parameters
    ----------
    out : rich.console.Console
        Where to print.
    release : QueryRelease
        What :meth:`Session.sql` returned.
    budget : Budget, optional
        The session's total budget, to say what was spent of what.
    """
    out.print(release)
    notes = [
        f"{name}: {_INTERVAL_NOTES.get(kind, kind)}"
        for name, kind in release.intervals.items()
        if kind != "exact"
    ]
    if notes:
        out.print("[dim]intervals: " + escape("; ".join(notes)) + "[/]")
    out.print(split_table(release.split))
    of = f" of the budget {budget_text(budget)}" if budget is not None else ""
    out.print(
        f"this query: {budget_text(release.charged)}; spent so far {budget_text(release.spent)}"
        f"{of}; [bold]left {budget_text(release.remaining)}[/]"
    )


BUDGET_DIGITS = 12
"""Significant digits of the budgets that ``--json`` prints (see :func:`budget_number`)."""


def budget_number(value: float) -> float | None:
    """Round a budget amount to :data:`BUDGET_DIGITS` significant digits, for ``--json``.

    Budgets are decimals people type (``--epsilon 0.214``) but are added and subtracted as
    binary floats, and the ledger rounds what is left down to a float: ``2 - 0.214`` leaves
    ``1.7859999999999998``, three sums of ``0.1`` make ``0.30000000000000004``. Those last
    digits are float error, not budget, so ``--json`` prints every epsilon and delta of a
    budget (charged, spent, remaining, the declared budget, the split) rounded to 12
    significant digits and written shortest (``1.786``, ``0.3``): off by less than one part in
    10**12 from the ledger's floats. Decisions are not taken on these: whether a release fits
    is decided on the ledger's exact amounts, so a request for exactly the printed remaining
    may be refused by that difference. Noisy answers and events are printed unrounded.
    Infinite budgets are ``None``.

    Examples
    --------
    >>> budget_number(2.0 - 0.214), budget_number(0.1 + 0.1 + 0.1), budget_number(1e-6)
    (1.786, 0.3, 1e-06)
    >>> budget_number(0.16666666666666666), budget_number(float("inf")) is None
    (0.166666666667, True)
    """
    if not math.isfinite(value):
        return None
    return float(f"{value:.{BUDGET_DIGITS}g}")


def _budget_dict(budget: Budget) -> dict[str, float | None]:
    """``{"epsilon", "delta"}`` rounded as :func:`budget_number` says (inf: None)."""
    return {"epsilon": budget_number(budget.epsilon), "delta": budget_number(budget.delta)}


def release_dict(release: QueryRelease) -> dict[str, Any]:
    """``release.to_dict()`` with its budgets and its split's epsilons as :func:`budget_number`.

    Examples
    --------
    >>> from dpcurator.accounting import Budget
    >>> _budget_dict(Budget(2.0 - 0.214, 0.0))  # what it does to each budget
    {'epsilon': 1.786, 'delta': 0.0}
    """
    payload = release.to_dict()
    for key, budget in (
        ("charged", release.charged),
        ("spent", release.spent),
        ("remaining", release.remaining),
    ):
        payload[key] = _budget_dict(budget)
    payload["split"] = [
        {
            **row,
            **{
                name: budget_number(float(row[name]))
                for name in ("epsilon", "delta")
                if isinstance(row.get(name), float | int)
            },
        }
        for row in payload["split"]
    ]
    return payload


def _strict(value: Any) -> Any:
    """Non-finite floats become None, for strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    return value


# --------------------------------------------------------------------------------------------
# errors


def _fail(exc: Exception, as_json: bool) -> None:
    """Print the reason of a refusal (or JSON ``{"error": ...}``) and exit with status 2."""
    if as_json:
        typer.echo(json.dumps({"error": with_suggestion(exc), "type": type(exc).__name__}))
    else:
        console.print(f"[red]error:[/] {escape(with_suggestion(exc))}")
    raise typer.Exit(code=2)


# --------------------------------------------------------------------------------------------
# dpcurator query


def _explain(table: Path, sql: str, *, epsilon: float, delta: float, as_json: bool) -> None:
    """Plan ``sql`` without reading data or spending; say whether the ledger would answer it."""
    from dpcurator.curator import Ledger, Session, read_declaration  # noqa: PLC0415

    declaration = read_declaration(table)
    with Session(declaration.table, Budget.unlimited(), ledger=":memory:") as planner:
        plan = planner.plan(sql, epsilon=epsilon, delta=delta)
        predicted = planner.predicted_errors(sql, epsilon=epsilon, delta=delta)
    ledger_file = declaration.ledger_path
    verdict: dict[str, Any] = {"ledger": ledger_file, "exists": Path(ledger_file).is_file()}
    if not verdict["exists"] and Path(declaration.ledger_key).is_file():
        try:  # refuses a deleted ledger (its key file records one), else says there is none
            Ledger.open(ledger_file, key=declaration.ledger_key).close()
        except InvalidParameterError as exc:
            if exc.name != "path":
                raise
    if verdict["exists"]:
        with Ledger.open(ledger_file, key=declaration.ledger_key) as books:
            before = books.spent
            verdict["remaining"] = _budget_dict(books.remaining)
            try:
                after = books.check(plan.events)
            except DPError as exc:  # over budget, or an event the accountant cannot account
                verdict.update(answered=False, reason=str(exc))
            else:
                charged = Budget(
                    max(after.epsilon - before.epsilon, 0.0), max(after.delta - before.delta, 0.0)
                )
                verdict.update(answered=True, charged=_budget_dict(charged))
    if as_json:
        payload = {
            "query": sql,
            "epsilon": plan.epsilon,
            "delta": plan.delta,
            "split": [m.summary() for m in plan.measurements],
            "threshold": plan.threshold,
            "predicted": [
                {"aggregate": p.alias, "std": p.std, "half_width_95": p.half_width}
                for p in predicted
            ],
            "bounded_sql": plan.sql,
            "quantile_sql": plan.quantile_sql,
            "ledger": verdict,
        }
        typer.echo(json.dumps(_strict(payload), allow_nan=False))
        return
    console.print(f"[bold]plan[/] of {escape(sql)} at {budget_text(Budget(epsilon, delta))}")
    console.print(
        split_table(plan.measurements, title="measurements (nothing read, nothing spent)")
    )
    if plan.threshold is not None:
        console.print(
            f"partition selection keeps groups with a noisy unit count ≥ {plan.threshold}"
        )
    for p in predicted:
        console.print(
            f"predicted error of {escape(p.alias)}: ± {p.half_width:,.4g} (95% interval), "
            f"std {p.std:,.4g}, in every group"
        )
    console.print(
        "[bold]bounded SQL[/] (the engine runs this, with the source in place of __source):"
    )
    console.print(escape(plan.sql), highlight=False)
    if plan.quantile_sql is not None:
        console.print(escape(plan.quantile_sql), highlight=False)
    if not verdict["exists"]:
        console.print(f"ledger {escape(ledger_file)}: none yet (the first query creates it)")
    elif verdict["answered"]:
        console.print(
            f"ledger {escape(ledger_file)}: would be answered, charging "
            f"{budget_text(Budget(**verdict['charged']))}"
        )
    else:
        console.print(
            f"ledger {escape(ledger_file)}: [red]would be refused[/]: {escape(verdict['reason'])}"
        )


def query(  # noqa: PLR0917 (typer commands take their options as parameters)
    sql: Annotated[str, typer.Argument(help="The aggregate SQL query.", show_default=False)],
    table: Annotated[
        Path | None,
        typer.Option(
            "--table",
            help="TOML declaration of the table: its budget, and the ledger and key file that "
            "record every answer (its \\[ledger] section; default <name>.ledger.sqlite and "
            "<name>.ledger.key next to it).",
        ),
    ] = None,
    epsilon: Annotated[
        float | None, typer.Option(help="The query's epsilon (required unless --explain).")
    ] = None,
    delta: Annotated[
        float, typer.Option(help="The query's delta (> 0 only for undeclared group keys).")
    ] = 0.0,
    rho: Annotated[
        float | None,
        typer.Option(
            help="Instead of --epsilon: a zCDP budget for the query (discrete Gaussian noise); "
            "the declaration's accountant must be zcdp.",
        ),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show the plan; read no data, spend nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    target_ci: Annotated[
        float | None,
        typer.Option(
            "--target-ci",
            help="Instead of --epsilon: the 95% interval's half-width wanted for every count "
            "and sum; the smallest epsilon that gives it is charged (shown by --explain).",
        ),
    ] = None,
    target_std: Annotated[
        float | None,
        typer.Option("--target-std", help="Instead of --epsilon: the standard deviation wanted."),
    ] = None,
    server: Annotated[
        str | None, typer.Option(help="A dpcurator server's URL (instead of --table).")
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(envvar="DPCURATOR_KEY", help="Your API key for --server ($DPCURATOR_KEY)."),
    ] = None,
) -> None:
    """Answer an aggregate SQL query over a declared table with differential privacy.

    The answer is charged to the budget of the declaration, in the ledger it names: the ledger
    is the declaration's, not the query's, and one that was edited, cut short, replaced or
    deleted is refused.
    """
    from dpcurator.curator import Session  # noqa: PLC0415

    if server is not None:  # the analyst's way: through the service (dpcurator.cli._serve)
        from dpcurator.cli._serve import remote_query  # noqa: PLC0415

        remote_query(
            server, key, sql, epsilon=epsilon, delta=delta, explain=explain, as_json=as_json
        )
        return
    try:
        if table is None:
            raise InvalidParameterError("--table", None, "is required (or --server with --key)")
        targeted = target_ci is not None or target_std is not None
        if targeted and epsilon is not None:
            raise InvalidParameterError(
                "--epsilon", epsilon, "must not be given with --target-ci or --target-std"
            )
        if targeted:
            epsilon = _epsilon_for_target(
                table,
                sql,
                target_ci=target_ci,
                target_std=target_std,
                delta=delta,
                as_json=as_json,
            )
        if explain and rho is not None:
            raise InvalidParameterError(
                "--rho", rho, "cannot be explained yet: explain the query with --epsilon"
            )
        if explain:
            if epsilon is None and not as_json:
                console.print("[dim]no --epsilon given: planned at a nominal epsilon of 1[/]")
            nominal = 1.0 if epsilon is None else epsilon
            _explain(table, sql, epsilon=nominal, delta=delta, as_json=as_json)
            return
        if epsilon is None and rho is None:
            raise InvalidParameterError(
                "--epsilon", None, "is required (or --rho, --target-ci, --target-std or --explain)"
            )
        with Session.from_toml(table) as session:
            release = session.sql(sql, epsilon=epsilon, delta=delta, rho=rho)
            budget = session.budget
            used = session.ledger.path
    except (DPError, OSError, sqlite3.Error) as exc:
        _fail(exc, as_json)
        return
    if as_json:
        payload = release_dict(release)
        payload["budget"] = _budget_dict(budget)
        payload["ledger"] = used
        typer.echo(json.dumps(_strict(payload), allow_nan=False))
        return
    print_release(console, release, budget=budget)
    console.print(f"[dim]ledger: {escape(used)} (entry {release.entry_id})[/]")


def _epsilon_for_target(
    table: Path,
    sql: str,
    *,
    target_ci: float | None,
    target_std: float | None,
    delta: float,
    as_json: bool,
) -> float:
    """Return the smallest epsilon meeting the target (planned: nothing read, nothing spent)."""
    from dpcurator.curator import Session, read_declaration  # noqa: PLC0415

    declaration = read_declaration(table)
    with Session(declaration.table, Budget.unlimited(), ledger=":memory:") as planner:
        epsilon = planner.epsilon_for(sql, target_ci=target_ci, target_std=target_std, delta=delta)
    if not as_json:
        wanted = f"± {target_ci:g} (95%)" if target_ci is not None else f"std {target_std:g}"
        console.print(f"[dim]target {wanted} for every count and sum: epsilon {epsilon:g}[/]")
    return epsilon


# --------------------------------------------------------------------------------------------
# dpcurator ledger


def ledger_path_for(path: Path) -> str:
    r"""Return the ledger file of ``path``: itself, or for a TOML declaration the one it names.

    Examples
    --------
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "people.toml").write_text('[table]\nname = "people"\nsource = "p.csv"\n')
    >>> Path(ledger_path_for(folder / "people.toml")).name
    'people.ledger.sqlite'
    >>> ledger_path_for(folder / "books.sqlite") == str(folder / "books.sqlite")
    True
    """
    return _ledger_and_key(path, None)[0]


def _ledger_and_key(path: Path, key: Path | None) -> tuple[str, str | None]:
    """Return the ledger and key file of a TOML declaration, or of a ledger file (``--key``)."""
    from dpcurator.curator import read_declaration  # noqa: PLC0415

    if path.suffix.lower() == ".toml":
        declaration = read_declaration(path)
        return declaration.ledger_path, str(key) if key is not None else declaration.ledger_key
    return str(path), None if key is None else str(key)


def _entry_dict(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "time": entry.time.isoformat(),
        "query": entry.query,
        "events": [event_to_dict(event) for event in entry.events],  # structured, exact
        "charged": _budget_dict(entry.charged),
        "spent": _budget_dict(entry.spent),
        "remaining": _budget_dict(entry.remaining),
    }


def ledger_summary(books: Ledger) -> dict[str, Any]:
    """Summarise a ledger as JSON-ready data: budget, accountant, spent, remaining, entries.

    Examples
    --------
    >>> import os, tempfile
    >>> from dpcurator.accounting import Budget, PureDPEvent
    >>> from dpcurator.curator import Ledger
    >>> path = os.path.join(tempfile.mkdtemp(), "l.sqlite")
    >>> with Ledger(path, budget=Budget(1.0)) as books:
    ...     _ = books.record("SELECT COUNT(*) FROM t", [PureDPEvent(0.25)])
    ...     summary = ledger_summary(books)
    >>> summary["remaining"], [e["query"] for e in summary["entries"]]
    ({'epsilon': 0.75, 'delta': 0.0}, ['SELECT COUNT(*) FROM t'])
    """
    return {
        "path": books.path,
        "budget": _budget_dict(books.budget),
        "accountant": books.accountant,
        "spent": _budget_dict(books.spent),
        "remaining": _budget_dict(books.remaining),
        "entries": [_entry_dict(entry) for entry in books.entries()],
    }


def print_ledger(out: Console, books: Ledger, *, last: int | None = None) -> None:
    """Print a ledger: its budget and accountant, spent and remaining, then its entries.

    Parameters
    ----------
    out : rich.console.Console
        Where to print.
    books : Ledger
        An open ledger.
    last : int, optional
        Show only the ``last`` most recent entries.
    """
    entries = books.entries()
    out.print(
        f"[bold]ledger[/] {escape(books.path)}: budget {budget_text(books.budget)}, "
        f"accountant {books.accountant}; spent {budget_text(books.spent)}, "
        f"[bold]remaining {budget_text(books.remaining)}[/]; {len(entries)} entries"
    )
    shown = entries if last is None else entries[-last:]
    if not shown:
        return
    with_delta = any(entry.charged.delta > 0 for entry in entries)

    def cell(budget: Budget) -> str:
        return budget_text(budget) if with_delta else f"{budget.epsilon:.4g}"

    table = Table(title_justify="left")
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("query", overflow="fold")
    table.add_column("charged" if with_delta else "charged ε", justify="right", no_wrap=True)
    table.add_column("left" if with_delta else "left ε", justify="right", no_wrap=True)
    for entry in shown:
        table.add_row(
            str(entry.id),
            entry.time.strftime("%Y-%m-%d %H:%M:%S"),
            escape(entry.query),
            cell(entry.charged),
            cell(entry.remaining),
        )
    out.print(table)
    if not with_delta:
        out.print(f"[dim]no entry charged any δ; δ left: {books.remaining.delta:.3g}[/]")


def ledger(
    path: Annotated[
        Path,
        typer.Argument(
            help="A TOML declaration (the ledger and key file it names), or a ledger .sqlite file."
        ),
    ],
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            help="The ledger's key file (default: the declaration's, or the ledger's name with "
            "'.key' for its suffix).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Verify and read a ledger: budget, accountant, spent, remaining, every recorded release.

    A ledger that was edited, cut short, replaced or deleted since it was written is refused.
    """
    from dpcurator.curator import Ledger  # noqa: PLC0415

    try:
        ledger_file, key_file = _ledger_and_key(path, key)
        with Ledger.open(ledger_file, key=key_file) as books:
            if as_json:
                summary = ledger_summary(books)
            else:
                print_ledger(console, books)
                return
    except (DPError, OSError, sqlite3.Error) as exc:
        _fail(exc, as_json)
        return
    typer.echo(json.dumps(_strict(summary), allow_nan=False))
