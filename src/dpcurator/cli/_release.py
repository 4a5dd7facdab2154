"""``dpcurator release``: a census-style hierarchical release from a TOML declaration.

``dpcurator release examples/census.toml --out release/`` reads the declaration (data, levels,
noise, budget and its split over levels, invariants, post-processing; see
:mod:`dpcurator.hierarchy._spec`), counts every node in DuckDB, adds noise level by level,
post-processes the noisy counts with every declared method, prints the error by level, and
writes the released table (CSV or Parquet), the public report and the data steward's
confidential report (errors measured against the true counts) into ``--out``.

``--epsilon`` (``--rho`` for discrete Gaussian noise) and ``--method`` override the
declaration. ``--json`` prints one JSON object instead of the tables (:func:`release_summary`:
the budget, the methods, the error by level with the measured errors marked confidential, the
files written) and no progress; a refusal is ``{"error": ..., "type": ...}``.

``--seed`` makes the noise reproducible with an insecure seeded source: for
simulations and demonstrations only, never for a real release. ``--plot`` adds the simulated
error by level against the budget (epsilon 0.1, 0.5, 1, 2; needs matplotlib, the ``plot``
extra).

A refusal (a malformed declaration, an unknown column, infeasible constraints) prints the reason
and exits with status 2.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dpcurator.cli._progress import Steps
from dpcurator.cli._suggest import with_suggestion
from dpcurator.errors import DPError, InvalidParameterError

if TYPE_CHECKING:
    from dpcurator.hierarchy._release import HierarchicalRelease
    from dpcurator.hierarchy._spec import HierarchySpec

__all__ = ["print_errors", "release", "release_summary"]

console = Console()

PLOT_EPSILONS = (0.1, 0.5, 1.0, 2.0)
"""The budgets of ``--plot`` (for discrete Gaussian noise, rho = epsilon^2 / 2 each)."""


def print_errors(out: Console, release: HierarchicalRelease) -> None:
    """Print a release's error by level: the public noise model, then the measured errors.

    The measured columns (RMSE of the noisy counts and of each method against the truth) are
    the data steward's: the title says so.
    """
    from dpcurator.hierarchy._report import expected_abs_error, measured_errors  # noqa: PLC0415

    measured = measured_errors(release)
    table = Table(title=f"{release.spec.name}: error by level (RMSE measured: CONFIDENTIAL)")
    table.add_column("level")
    table.add_column("nodes", justify="right")
    table.add_column("noise std", justify="right")
    table.add_column("E|noise|", justify="right")
    for name in measured:
        table.add_column(f"RMSE {name}", justify="right")
    levels = zip(release.level_names, release.tree.level_slices, release.level_noise, strict=True)
    for t, (name, part, level) in enumerate(levels):
        std = "exact" if level is None else f"{level.std:,.3g}"
        mean_abs = "0" if level is None else f"{expected_abs_error(level):,.3g}"
        rmses = [f"{errors[t].rmse:,.3g}" for errors in measured.values()]
        table.add_row(name, f"{part.stop - part.start:,}", std, mean_abs, *rmses)
    out.print(table)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def release_summary(
    release: HierarchicalRelease, written: list[Path], *, seed: int | None
) -> dict[str, Any]:
    """Return what ``release --json`` prints: a JSON-ready summary of a hierarchical release.

    Keys: ``name``, ``mechanism``, ``epsilon`` and ``rho`` (one is ``None``), ``methods``,
    ``seed`` and ``simulation`` (``True`` with ``--seed``: insecure noise, not a private
    release), ``levels`` (per level: ``level``, ``nodes``, the public ``noise_std`` and
    ``expected_abs_error``, ``None`` for an exact level), ``measured`` (per method, per level:
    ``mean_abs``, ``rmse``, ``max_abs`` against the true counts; CONFIDENTIAL, the data
    steward's, as ``confidential`` says) and ``written`` (the files, in order).
    """
    from dpcurator.hierarchy._report import expected_abs_error, measured_errors  # noqa: PLC0415

    levels = zip(release.level_names, release.tree.level_slices, release.level_noise, strict=True)
    rows = [
        {
            "level": name,
            "nodes": part.stop - part.start,
            "noise_std": None if noise is None else _finite(noise.std),
            "expected_abs_error": None if noise is None else _finite(expected_abs_error(noise)),
        }
        for name, part, noise in levels
    ]
    measured = {
        method: [
            {
                "level": name,
                "mean_abs": _finite(e.mean_abs),
                "rmse": _finite(e.rmse),
                "max_abs": _finite(e.max_abs),
            }
            for name, e in zip(release.level_names, errors, strict=True)
        ]
        for method, errors in measured_errors(release).items()
    }
    return {
        "name": release.spec.name,
        "mechanism": release.spec.mechanism,
        "epsilon": release.epsilon,
        "rho": release.rho,
        "methods": list(release.spec.methods),
        "seed": seed,
        "simulation": seed is not None,
        "levels": rows,
        "measured": measured,
        "confidential": ["measured"],
        "written": [str(path) for path in written],
    }


def _budget_line(release: HierarchicalRelease) -> str:
    if release.epsilon is not None:
        return f"ε = {release.epsilon:.6g} (pure DP)"
    return f"ρ = {release.rho:.6g} (zCDP)"


def release(  # noqa: PLR0917 (typer commands take their options as parameters)
    declaration: Annotated[
        Path, typer.Argument(help="TOML declaration of the release.", show_default=False)
    ],
    out: Annotated[Path, typer.Option("--out", help="Folder for the tables and reports.")] = Path(
        "release"
    ),
    format: Annotated[str, typer.Option("--format", help="Table format: csv or parquet.")] = "csv",
    epsilon: Annotated[
        float | None, typer.Option(help="Total epsilon (geometric noise), overrides the file.")
    ] = None,
    rho: Annotated[
        float | None, typer.Option(help="Total rho (discrete Gaussian), overrides the file.")
    ] = None,
    method: Annotated[
        list[str] | None,
        typer.Option("--method", help="Post-processing method (repeatable), overrides the file."),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(help="SIMULATION ONLY: insecure seeded noise, reproducible, not private."),
    ] = None,
    plot: Annotated[
        bool, typer.Option("--plot", help="Also plot the simulated error against epsilon.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (no tables, no progress).")
    ] = False,
) -> None:
    """Release a census-style hierarchy from a TOML declaration and write tables and reports."""
    from dpcurator.hierarchy._release import release_hierarchy  # noqa: PLC0415
    from dpcurator.hierarchy._spec import read_spec  # noqa: PLC0415
    from dpcurator.noise import InsecureSeededSource  # noqa: PLC0415

    try:
        if format not in {"csv", "parquet"}:
            raise InvalidParameterError("--format", format, "must be csv or parquet")
        spec = read_spec(declaration)
        if epsilon is not None or rho is not None:
            spec = dataclasses.replace(spec, epsilon=epsilon, rho=rho)
        if method:
            spec = dataclasses.replace(spec, methods=tuple(method))
        source = None if seed is None else InsecureSeededSource(seed)
        with Steps("release", 2, console=console, show=not as_json) as steps:
            result = release_hierarchy(spec, source=source)
            steps.done(f"counted, noised and post-processed ({', '.join(spec.methods)})")
            fmt: Literal["csv", "parquet"] = "parquet" if format == "parquet" else "csv"
            written = list(result.write(out, format=fmt))
            steps.done(f"written to {out}")
    except (DPError, OSError) as exc:
        if as_json:
            typer.echo(json.dumps({"error": with_suggestion(exc), "type": type(exc).__name__}))
        else:
            console.print(f"[red]error:[/] {escape(with_suggestion(exc))}")
        raise typer.Exit(code=2) from None
    if as_json:
        if plot:
            written += _plot(spec, out, seed, quiet=True)
        summary = release_summary(result, written, seed=seed)
        typer.echo(json.dumps(summary, allow_nan=False))
        return
    if seed is not None:
        console.print(
            f"[yellow]--seed {seed}: insecure seeded noise (a simulation, not a private release)[/]"
        )
    console.print(f"{escape(spec.name)}: {_budget_line(result)}, methods {', '.join(spec.methods)}")
    print_errors(console, result)
    if plot:
        written += _plot(spec, out, seed)
    for path in written:
        console.print(f"[dim]wrote {escape(str(path))}[/]")


def _plot(spec: HierarchySpec, out: Path, seed: int | None, *, quiet: bool = False) -> list[Path]:
    """Simulate the error at several budgets (seeded: a simulation) and plot it."""
    from dpcurator.hierarchy._report import error_by_epsilon, plot_error_by_epsilon  # noqa: PLC0415

    budgets: tuple[float, ...] = PLOT_EPSILONS
    if spec.mechanism == "discrete_gaussian":  # rho with the same per-level noise as epsilon
        budgets = tuple(b * b / 2 for b in budgets)
    frame = error_by_epsilon(spec, budgets, seed=0 if seed is None else seed)
    try:
        image = plot_error_by_epsilon(
            frame,
            out / f"{spec.name}_error_by_epsilon.png",
            budget_name="epsilon" if spec.mechanism == "geometric" else "rho",
        )
    except DPError as exc:
        if not quiet:
            console.print(f"[yellow]no plot: {escape(str(exc))}[/]")
        return []
    return [image]
