"""``dpcurator admin``: the steward's commands on the service's ledger store.

Each command opens the store that ``server.toml`` names (SQLite or PostgreSQL; the server may be
running) and records what it changes in the audit trail with ``--actor`` (default: ``$USER``):

- ``add-analyst CONFIG NAME [--budget TABLE=EPSILON[:DELTA]] ...``, ``remove-analyst`` (their
  keys are revoked; their spending stays on the books);
- ``issue-key CONFIG NAME`` (or ``--steward``): prints a new key once; only its scrypt hash is
  kept. ``revoke-key CONFIG KEY_ID``: takes effect at once in every server process;
- ``raise-budget CONFIG TABLE --epsilon E [--delta D] [--analyst NAME] --reason TEXT``: budgets
  are only ever raised (what was spent is never taken back);
- ``ledger CONFIG [--analyst NAME]``, ``audit CONFIG``, ``keys CONFIG``, ``analysts CONFIG``:
  read the books (``--json`` for JSON).

Every command takes ``--json``: the commands that change the books then print one object saying
what changed (``{"action": "add-analyst", "analyst": ..., "budgets": [...], "actor": ...}``;
``issue-key`` adds the key, shown once), and a refusal prints ``{"error": ..., "type": ...}``
(exit status 2). Budgets in JSON are numbers (``{"epsilon": ..., "delta": ...}``), not text.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dpcurator.accounting import Budget
from dpcurator.cli._suggest import with_suggestion
from dpcurator.errors import DPError, InvalidParameterError

if TYPE_CHECKING:
    from dpcurator.service import LedgerStore

__all__ = ["app"]

app = typer.Typer(
    name="admin",
    help="The steward's commands: analysts, keys, budgets (audited), the ledger.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()

ConfigArg = Annotated[Path, typer.Argument(help="The server's configuration (server.toml).")]
ActorOpt = Annotated[str | None, typer.Option(help="Who acts (the audit trail); default $USER.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _actor(actor: str | None) -> str:
    if actor:
        return actor
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "steward"


@contextmanager
def _store(config: Path, as_json: bool = False) -> Iterator[LedgerStore]:
    """Open the store of ``config`` (its tables' global budgets applied); exit 2 on an error."""
    from dpcurator.service import LedgerStore, load_config  # noqa: PLC0415

    try:
        loaded = load_config(config)
        store = LedgerStore(loaded.ledger, accountant=loaded.accountant)
    except DPError as exc:
        _fail(exc, as_json)
    try:
        for table in loaded.tables:
            store.add_table(table.name, table.budget, actor="config")
        yield store
    except DPError as exc:
        _fail(exc, as_json)
    finally:
        store.close()


def _fail(exc: Exception, as_json: bool = False) -> Any:
    if as_json:
        typer.echo(json.dumps({"error": with_suggestion(exc), "type": type(exc).__name__}))
    else:
        console.print(f"[red]error:[/] {escape(str(exc))}")
    raise typer.Exit(code=2)


def _budget_json(budget: Budget | None) -> dict[str, float | None] | None:
    """Return a budget as JSON numbers (infinite epsilon: None), as ``query --json`` does."""
    if budget is None:
        return None
    from dpcurator.cli._query import budget_number  # noqa: PLC0415

    return {"epsilon": budget_number(budget.epsilon), "delta": budget_number(budget.delta)}


def _done(as_json: bool, text: str, change: dict[str, Any]) -> None:
    """Report a change: ``text`` for people, or ``change`` as one JSON object."""
    if as_json:
        typer.echo(json.dumps(change))
    else:
        console.print(text)


def parse_grant(text: str) -> tuple[str, Budget]:
    """Parse ``TABLE=EPSILON[:DELTA]``.

    >>> parse_grant("cps=1.5:1e-6")
    ('cps', Budget(epsilon=1.5, delta=1e-06))
    """
    table, sep, amount = text.partition("=")
    eps, _, delta = amount.partition(":")
    try:
        if not sep:
            raise ValueError(text)
        return table.strip(), Budget(float(eps), float(delta) if delta else 0.0)
    except ValueError:
        raise InvalidParameterError(
            "--budget", text, "must look like TABLE=EPSILON[:DELTA]"
        ) from None


@app.command("add-analyst")
def add_analyst(
    config: ConfigArg,
    name: Annotated[str, typer.Argument(help="The analyst's name.")],
    budget: Annotated[
        list[str] | None, typer.Option(help="TABLE=EPSILON[:DELTA], once per table.")
    ] = None,
    actor: ActorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add an analyst (or reactivate a removed one), with budgets per table."""
    from dpcurator.service._config import check_name  # noqa: PLC0415

    who = _actor(actor)
    with _store(config, as_json) as store:
        try:
            grants = [parse_grant(item) for item in budget or []]
            store.add_analyst(check_name(name, "analyst"), actor=who)
            for table, amount in grants:
                store.set_budget(name, table, amount, actor=who, reason="add-analyst")
        except DPError as exc:
            _fail(exc, as_json)
    change = {
        "action": "add-analyst",
        "analyst": name,
        "budgets": [{"table": table, **(_budget_json(amount) or {})} for table, amount in grants],
        "actor": who,
    }
    _done(as_json, f"analyst {escape(name)} added", change)


@app.command("remove-analyst")
def remove_analyst(
    config: ConfigArg,
    name: Annotated[str, typer.Argument(help="The analyst's name.")],
    actor: ActorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove an analyst: their keys are revoked at once; their spending stays recorded."""
    who = _actor(actor)
    with _store(config, as_json) as store:
        revoked = store.remove_analyst(name, actor=who)
    change = {"action": "remove-analyst", "analyst": name, "keys_revoked": revoked, "actor": who}
    _done(as_json, f"analyst {escape(name)} removed ({revoked} keys revoked)", change)


@app.command("issue-key")
def issue_key(
    config: ConfigArg,
    name: Annotated[str | None, typer.Argument(help="The analyst's name.")] = None,
    steward: Annotated[bool, typer.Option("--steward", help="A steward's key.")] = False,
    actor: ActorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Issue an API key and print it once (only its scrypt hash is kept)."""
    from dpcurator.service import STEWARD  # noqa: PLC0415

    if (name is None) == (not steward):
        _fail(
            InvalidParameterError("name", name, "must be given, or --steward (not both)"), as_json
        )
    who = _actor(actor)
    owner = STEWARD if steward else str(name)
    with _store(config, as_json) as store:
        key = store.issue_key(owner, actor=who)
    if as_json:  # the key is shown once, here: only its hash is kept
        change = {"action": "issue-key", "owner": owner, "id": key.id, "key": key.text}
        typer.echo(json.dumps({**change, "actor": who}))
        return
    typer.echo(key.text)


@app.command("revoke-key")
def revoke_key(
    config: ConfigArg,
    key_id: Annotated[str, typer.Argument(help="The key's id (the 12 hex digits after dpk_).")],
    actor: ActorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a key (every server process refuses it from its next request)."""
    who = _actor(actor)
    with _store(config, as_json) as store:
        store.revoke_key(key_id, actor=who)
    change = {"action": "revoke-key", "id": key_id, "actor": who}
    _done(as_json, f"key {escape(key_id)} revoked", change)


@app.command("raise-budget")
def raise_budget(  # noqa: PLR0917 (typer commands take their options as parameters)
    config: ConfigArg,
    table: Annotated[str, typer.Argument(help="The table.")],
    epsilon: Annotated[float, typer.Option(help="The new budget's epsilon.")],
    reason: Annotated[str, typer.Option(help="Why (recorded in the audit trail).")],
    delta: Annotated[float | None, typer.Option(help="The new delta (default: unchanged).")] = None,
    analyst: Annotated[
        str | None, typer.Option(help="Whose budget (default: the table's global one).")
    ] = None,
    actor: ActorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Raise (or set) a budget; budgets are never lowered."""
    who = _actor(actor)
    with _store(config, as_json) as store:
        current = store.budget(analyst, table)
        new_delta = delta if delta is not None else (0.0 if current is None else current.delta)
        try:
            amount = Budget(epsilon, new_delta)
        except DPError as exc:
            _fail(exc, as_json)
        store.set_budget(analyst, table, amount, actor=who, reason=reason)
    change = {
        "action": "raise-budget",
        "table": table,
        "analyst": analyst,
        "previous": _budget_json(current),
        "budget": _budget_json(amount),
        "reason": reason,
        "actor": who,
    }
    text = f"budget of {escape(analyst or 'the table')} on {escape(table)}: {amount}"
    _done(as_json, text, change)


def _print(rows: list[dict[str, Any]], title: str, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(rows, default=str))
        return
    table = Table(title=title, title_justify="left")
    for column in rows[0] if rows else ["(none)"]:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(str(v)) for v in row.values()))
    console.print(table)


@app.command("ledger")
def ledger(
    config: ConfigArg,
    analyst: Annotated[str | None, typer.Option(help="Only this analyst's charges.")] = None,
    limit: Annotated[int, typer.Option(help="The most recent N charges.")] = 1000,
    as_json: JsonOpt = False,
) -> None:
    """Read the charges (newest first), and each table's and analyst's standing."""
    with _store(config) as store:
        rows = [asdict(r) for r in store.history(analyst, limit=limit)]
    for row in rows:  # JSON keeps the numbers whole; the table shows them short
        if not as_json:
            row["charged"] = f"{row['charged']['epsilon']:.6g}, {row['charged']['delta']:.3g}"
    _print(rows, "charges", as_json)


@app.command("audit")
def audit(config: ConfigArg, as_json: JsonOpt = False) -> None:
    """Read the audit trail of the steward's actions (newest first)."""
    with _store(config) as store:
        rows = [asdict(r) for r in store.audit()]
    _print(rows, "audit trail", as_json)


@app.command("keys")
def keys(config: ConfigArg, as_json: JsonOpt = False) -> None:
    """List the keys (ids, owners, when issued and revoked; never the keys)."""
    with _store(config) as store:
        rows = [
            {"id": i, "owner": o, "created": c, "revoked": r or ""}
            for i, o, c, r in store.list_keys()
        ]
    _print(rows, "keys", as_json)


@app.command("analysts")
def analysts(config: ConfigArg, as_json: JsonOpt = False) -> None:
    """List the analysts with their budget, spent and remaining per table."""
    with _store(config) as store:
        rows = []
        for name, active in store.analysts():
            for table in store.grants(name):
                budget, spent, remaining = store.standing(name, table)
                rows.append(
                    {
                        "analyst": name,
                        "active": active,
                        "table": table,
                        "budget": _budget_json(budget) if as_json else str(budget),
                        "spent": _budget_json(spent) if as_json else str(spent),
                        "remaining": _budget_json(remaining) if as_json else str(remaining),
                    }
                )
    _print(rows, "analysts", as_json)
