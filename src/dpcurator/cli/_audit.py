"""The ``dpcurator audit`` command: claimed epsilon against certified lower bound, everywhere.

``dpcurator audit`` runs :func:`dpcurator.audit.run_audit_suite` over every mechanism of the
project (Laplace, geometric, Gaussian, discrete Gaussian, randomized response, exponential
mechanism, report-noisy-max, AboveThreshold and the local protocols' randomizers), prints each
mechanism's claimed epsilon next to the lower bound the audit certifies, with a progress bar, and
writes a plot. ``--quick`` uses a tenth of the runs (a few seconds); ``--json`` prints JSON;
``--seed`` makes the run reproducible (the mechanisms' noise then comes from
``InsecureSeededSource(seed)``; by default it is the secure source, as in production).
``--one-run`` adds the one-run canary audits (DP-SGD: one training run with gradient canaries,
Steinke, Nasr and Jagielski 2023; needs PyTorch, seconds); ``--only dpsgd`` runs it alone.

The confidence is family-wise: with probability at least ``--confidence`` no bound in the table
exceeds its mechanism's true epsilon. The command exits with status 1 when a bound exceeds a
claim (the claim is refuted), 2 on bad options, 0 otherwise.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# Until dpcurator.audit exports them (integration of issue 7): then import from dpcurator.audit.
from dpcurator.audit import (
    AUDIT_CASES,
    ONE_RUN_CASES,
    SuiteResult,
    run_audit_suite,
    suite_case_names,
)
from dpcurator.cli._suggest import with_suggestion
from dpcurator.errors import DPError, InvalidParameterError
from dpcurator.noise import InsecureSeededSource, RandomSource

__all__ = ["audit", "write_plot"]

console = Console()


def write_plot(path: Path, results: Sequence[SuiteResult]) -> bool:
    """Write claimed (bars) against certified (points) epsilon; False without matplotlib."""
    try:
        import matplotlib as mpl  # noqa: PLC0415

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    names = [r.name for r in results]
    y = list(range(len(results)))[::-1]
    fig, ax = plt.subplots(figsize=(7.5, 0.38 * len(results) + 1.9))
    ax.barh(y, [r.claimed_epsilon for r in results], color="#c8d6e5", label="claimed epsilon")
    for yi, r in zip(y, results, strict=True):
        ax.plot(
            r.epsilon_lower_bound,
            yi,
            "o",
            color="#27ae60" if r.consistent else "#c0392b",
            markersize=6,
        )
    ax.plot([], [], "o", color="#27ae60", label="certified lower bound (consistent)")
    if not all(r.consistent for r in results):
        ax.plot([], [], "o", color="#c0392b", label="certified lower bound (claim refuted)")
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlabel("epsilon")
    confidence = 1.0 - sum(1.0 - r.confidence for r in results)
    ax.set_title(
        f"Empirical privacy audit: {len(results)} mechanisms, "
        f"family-wise confidence {confidence:.2f}",
        fontsize=9,
    )
    top = max(max(r.claimed_epsilon, r.epsilon_lower_bound) for r in results)
    ax.set_xlim(0.0, 1.08 * top)
    ax.set_ylim(-0.8, len(results) - 0.2)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=3, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plain_progress(total: int) -> Callable[[SuiteResult], None]:
    """Report each finished audit on a line of stderr (progress where no bar can be drawn)."""
    start = time.monotonic()
    done = 0

    def advance(result: SuiteResult) -> None:
        nonlocal done
        done += 1
        elapsed = time.monotonic() - start
        typer.echo(f"audit: {done}/{total} audited ({result.name}), {elapsed:.0f} s", err=True)

    return advance


def _names(only: str | None) -> list[str] | None:
    if only is None:
        return None
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = [*AUDIT_CASES, *ONE_RUN_CASES]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise InvalidParameterError(
            "only", only, f"must list registered mechanisms: {', '.join(known)}"
        )
    return names


def _table(results: Sequence[SuiteResult], quick: bool) -> Table:
    table = Table(title=f"dpcurator audit{' (quick)' if quick else ''}: claimed vs certified")
    table.add_column("mechanism", no_wrap=True)
    table.add_column("claimed", justify="right")
    table.add_column("certified >=", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("runs", justify="right")
    table.add_column("verdict", no_wrap=True)
    for r in results:
        claim = f"{r.claimed_epsilon:.4g}"
        if r.claimed_delta:
            claim += f", d={r.claimed_delta:g}"
        table.add_row(
            r.name,
            claim,
            f"{r.epsilon_lower_bound:.4f}",
            f"{r.ratio:.2f}",
            f"{r.samples:,}",
            "[green]ok[/]" if r.consistent else "[bold red]REFUTED[/]",
        )
    return table


def audit(  # noqa: PLR0917 (typer commands take their options as parameters)
    quick: Annotated[bool, typer.Option("--quick", help="A tenth of the runs (seconds).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    plot: Annotated[
        Path | None, typer.Option(help="Write the claimed-vs-certified plot here (PNG).")
    ] = None,
    only: Annotated[
        str | None, typer.Option(help="Comma-separated mechanisms (default: all).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Reproducible run: seeded (insecure) noise.")
    ] = None,
    confidence: Annotated[float, typer.Option(help="Family-wise confidence of the bounds.")] = 0.95,
    one_run: Annotated[
        bool,
        typer.Option(
            "--one-run", help="Also the one-run canary audits (DP-SGD: one training, PyTorch)."
        ),
    ] = False,
) -> None:
    """Audit every mechanism: claimed epsilon against the certified lower bound."""
    try:
        names = _names(only)
        if seed is not None and seed < 0:
            raise InvalidParameterError("seed", seed, "must be >= 0")
        source: RandomSource | None = None if seed is None else InsecureSeededSource(seed)
        if names is None:
            names = suite_case_names(one_run=one_run)
        if as_json:
            results = run_audit_suite(
                quick=quick, names=names, confidence=confidence, source=source
            )
        elif not console.is_terminal:  # a log or a pipe: a plain line as each audit ends
            results = run_audit_suite(
                quick=quick,
                names=names,
                confidence=confidence,
                source=source,
                on_result=plain_progress(len(names)),
            )
        else:
            with Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            ) as progress:
                task = progress.add_task("auditing", total=len(names))

                def advance(result: SuiteResult) -> None:
                    progress.update(task, advance=1, description=f"audited {result.name}")

                results = run_audit_suite(
                    quick=quick,
                    names=names,
                    confidence=confidence,
                    source=source,
                    on_result=advance,
                )
    except DPError as exc:
        console.print(f"[red]error:[/] {with_suggestion(exc)}")
        raise typer.Exit(code=2) from None
    written = write_plot(plot, results) if plot is not None else False
    refuted = [r.name for r in results if not r.consistent]
    if as_json:
        payload = {
            "quick": quick,
            "confidence": confidence,
            "seeded": seed is not None,
            "results": [r.to_dict() for r in results],
            "refuted": refuted,
            "plot": str(plot) if written else None,
        }
        typer.echo(json.dumps(payload))
    else:
        console.print(_table(results, quick))
        console.print(
            f"epsilon (natural log) and delta as claimed by the library; certified at "
            f"family-wise confidence {confidence:g} (with that probability no bound exceeds its "
            "mechanism's true epsilon); runs = certification runs per neighbouring input "
            "(1 for a one-run canary audit)."
        )
        if plot is not None:
            if written:
                console.print(f"plot written to {plot}")
            else:
                console.print(
                    "[yellow]matplotlib is not installed: no plot written[/] "
                    "(pip install 'dpcurator\\[plot]')"
                )
        if refuted:
            console.print(f"[bold red]claims refuted:[/] {', '.join(refuted)}")
    if refuted:
        raise typer.Exit(code=1)
