"""``dpcurator synth``: a differentially private synthetic table of a declared table.

``dpcurator synth --table people.toml --epsilon 1 --out synth.parquet`` opens a
:class:`~dpcurator.curator.Session` on the TOML declaration, synthesises the declared columns
that have a public domain or bins (:func:`dpcurator.synth.synthesize`, AIM by default), writes
the rows to ``--out`` (Parquet, or CSV by its suffix) and prints the error report per marginal,
what was charged and what is left. The release is charged to the declaration's budget in its
ledger, like a query; a refusal prints the reason, exits with status 2 and spends nothing.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dpcurator.errors import DPError, InvalidParameterError

__all__ = ["synth"]

console = Console(stderr=True)


def _fail(exc: Exception, as_json: bool) -> None:
    """Print the reason of a refusal (or JSON ``{"error", "type"}``) and exit with status 2."""
    from dpcurator.cli._suggest import with_suggestion  # noqa: PLC0415

    if as_json:
        typer.echo(json.dumps({"error": with_suggestion(exc), "type": type(exc).__name__}))
    else:
        console.print(f"[red]error:[/] {escape(with_suggestion(exc))}")
    raise typer.Exit(code=2)


def synth(  # noqa: PLR0917 (typer commands take their options as parameters)
    table: Annotated[
        Path,
        typer.Option("--table", help="TOML declaration of the table (its budget and ledger)."),
    ],
    epsilon: Annotated[float, typer.Option(help="The release's epsilon.")],
    out: Annotated[Path, typer.Option("--out", help="Where to write the rows (.parquet or .csv).")],
    delta: Annotated[
        float | None,
        typer.Option(help="The release's delta (default: the declaration's budget delta)."),
    ] = None,
    method: Annotated[str, typer.Option(help="aim, mst or independent.")] = "aim",
    columns: Annotated[
        str | None,
        typer.Option(help="Comma-separated columns (default: those with a domain or bins)."),
    ] = None,
    workload: Annotated[
        int, typer.Option(help="AIM optimises all k-way marginals of the columns.")
    ] = 3,
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", help="Seconds before the fit stops.")
    ] = None,
    rows: Annotated[int | None, typer.Option(help="Rows to draw (default: the noisy total).")] = (
        None
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Release a differentially private synthetic table of a declared table (AIM, MST).

    The release is charged to the budget of the declaration, in the ledger it names, before any
    row is read; a refusal spends nothing.
    """
    from dpcurator.curator import Session  # noqa: PLC0415
    from dpcurator.synth import synthesize  # noqa: PLC0415

    try:
        if out.suffix.lower() not in {".parquet", ".csv"}:
            raise InvalidParameterError("--out", str(out), "must end in .parquet or .csv")
        names = None if columns is None else [c.strip() for c in columns.split(",") if c.strip()]
        with Session.from_toml(table) as session:
            result = synthesize(
                session,
                columns=names,
                epsilon=epsilon,
                delta=delta,
                method=method,  # type: ignore[arg-type]
                workload=workload,
                rows=rows,
                time_limit=time_limit,
                progress=not as_json,
            )
            used = session.ledger.path
    except (DPError, OSError, sqlite3.Error) as exc:
        _fail(exc, as_json)
        return
    if out.suffix.lower() == ".csv":
        result.table.to_csv(out, index=False)
    else:
        result.table.to_parquet(out, index=False)
    if as_json:
        errors = result.errors[result.errors["measured"]]
        payload = {
            "out": str(out),
            "rows": len(result.table),
            "columns": list(result.columns),
            "method": result.method,
            "stopped_by_time_limit": bool(result.stopped_by_time_limit),
            "rho": result.rho,
            "epsilon": result.epsilon,
            "delta": result.delta,
            "charged": {"epsilon": result.charged.epsilon, "delta": result.charged.delta},
            "remaining": {"epsilon": result.remaining.epsilon, "delta": result.remaining.delta},
            "ledger": used,
            "entry_id": result.entry_id,
            "errors": [
                {
                    "marginal": str(row.marginal),
                    "cells": int(row.cells),
                    "noise_std": float(row.noise_std),
                    "expected_noise_l1": float(row.expected_noise_l1),
                    "synthetic_vs_noisy_l1": float(row.synthetic_vs_noisy_l1),
                }
                for row in errors.itertuples()
            ],
        }
        typer.echo(json.dumps(payload, allow_nan=False))
        return
    report = Table(title="error per marginal (noise: from the mechanism)", title_justify="left")
    for name in ("marginal", "cells", "noise std", "expected noise L1", "synthetic vs noisy L1"):
        report.add_column(name, justify="left" if name == "marginal" else "right")
    for row in result.errors[result.errors["measured"]].itertuples():
        report.add_row(
            escape(str(row.marginal)),
            str(row.cells),
            f"{row.noise_std:.3g}",
            f"{row.expected_noise_l1:.4g}",
            f"{row.synthetic_vs_noisy_l1:.4g}",
        )
    console.print(report)
    stopped = " (stopped by the time limit)" if result.stopped_by_time_limit else ""
    console.print(
        f"{len(result.table)} rows of {', '.join(result.columns)} by {result.method}{stopped}; "
        f"rho={result.rho:.4g} (ε={result.epsilon:.4g}, δ={result.delta:.3g}); charged "
        f"ε={result.charged.epsilon:.4g}, δ={result.charged.delta:.3g}; left "
        f"ε={result.remaining.epsilon:.4g}, δ={result.remaining.delta:.3g}"
    )
    console.print(
        f"[dim]wrote {escape(str(out))}; ledger: {escape(used)} (entry {result.entry_id})[/]"
    )
