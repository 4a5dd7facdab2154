"""The ``dpcurator`` command: a privacy calculator, private SQL, and the demo.

``dpcurator epsilon`` answers "what epsilon does this cost?", ``dpcurator noise`` the inverse
("how much noise for this epsilon?"), ``dpcurator compose`` composes a list of mechanisms under
every accountant that supports them, ``dpcurator query`` answers private SQL over a declared
table, charged to the budget and the ledger its declaration names (the steward's, not the
analyst's: a ledger that was edited, cut short, replaced or deleted is refused), and
``dpcurator ledger`` verifies and reads that ledger, ``dpcurator release`` publishes a hierarchical
census table from a declaration, ``dpcurator audit`` audits every mechanism empirically,
``dpcurator demo`` runs the curator demo and ``dpcurator tour`` the tour of the foundation.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

# Only light modules at the top (dpcurator --help must start fast, benchmarks/bench_startup.py):
# SciPy-backed accounting and the demo, tour, audit and local modules load when they run.
from dpcurator.accounting import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SelfComposedEvent,
)
from dpcurator.cli._lazy import LazyCommand, lazy_group
from dpcurator.cli._query import ledger as ledger_command
from dpcurator.cli._query import query as query_command
from dpcurator.cli._release import release as release_command
from dpcurator.cli._specs import parse_spec, parse_spec_file
from dpcurator.errors import DPError, InvalidParameterError, UnsupportedEventError

__all__ = ["app", "main"]

app = typer.Typer(
    name="dpcurator",
    help="Differential privacy: a privacy calculator, private SQL, local-DP simulations, the demo.",
    no_args_is_help=True,
    add_completion=False,
    cls=lazy_group(
        {
            "audit": LazyCommand(
                "dpcurator.cli._audit",
                "audit",
                "Audit every mechanism: claimed epsilon against the certified lower bound.",
            ),
            "local": LazyCommand(
                "dpcurator.cli._local",
                "app",
                "Local differential privacy: simulate devices that randomise their own values.",
            ),
            "serve": LazyCommand(
                "dpcurator.cli._serve",
                "serve",
                "Serve the declared tables to analysts over HTTP (the steward's command).",
            ),
            "admin": LazyCommand(
                "dpcurator.cli._admin",
                "app",
                "The steward's commands: analysts, keys, budgets (audited), the ledger.",
            ),
            "power": LazyCommand(
                "dpcurator.cli._networks",
                "power",
                "Release private power loads for the DC optimal power flow (CBDP vs plain noise).",
            ),
            "transit": LazyCommand(
                "dpcurator.cli._networks",
                "transit",
                "Release private origin-destination counts for transit planning (NYC flights).",
            ),
            "synth": LazyCommand(
                "dpcurator.cli._synth",
                "synth",
                "Release a differentially private synthetic table of a declared table (AIM, MST).",
            ),
            "demo-service": LazyCommand(
                "dpcurator.cli._serve",
                "demo_service",
                "Run the service end to end on the bundled CPS data.",
            ),
        }
    ),
)
app.command(name="query")(query_command)
app.command(name="ledger")(ledger_command)
app.command(name="release")(release_command)
console = Console()


def _print_version(value: bool) -> None:
    if value:
        from dpcurator import __version__  # noqa: PLC0415 (only when asked)

        typer.echo(f"dpcurator {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Options of the ``dpcurator`` command itself."""


# The names of ACCOUNTANT_NAMES, written out so that --help imports no SciPy (a test compares).
_ACCOUNTANT_HELP = "Accountant: one of basic, advanced, optimal, rdp, zcdp, pld, or 'all'."
_DEMO_OUT = Path("demo-output")  # dpcurator.cli._demo.DEFAULT_OUT (a test compares)


def _epsilons(
    event: PrivacyEvent, delta: float, accountant: str
) -> list[tuple[str, float | None, str]]:
    """Epsilon under each requested accountant: (name, epsilon or None, note)."""
    from dpcurator.accounting import ACCOUNTANT_NAMES, make_accountant  # noqa: PLC0415

    names = ACCOUNTANT_NAMES if accountant == "all" else (accountant,)
    rows: list[tuple[str, float | None, str]] = []
    for name in names:
        acc = make_accountant(name)
        try:
            acc.compose(event)
        except UnsupportedEventError as exc:
            if accountant != "all":
                raise
            rows.append((name, None, str(exc)))  # whole: --json prints it untruncated
            continue
        rows.append((name, acc.get_epsilon(delta), ""))
    return rows


def _print_rows(rows: list[tuple[str, float | None, str]], delta: float, as_json: bool) -> None:
    if as_json:
        payload = [{"accountant": n, "epsilon": e, "delta": delta, "note": t} for n, e, t in rows]
        typer.echo(json.dumps(payload if len(payload) > 1 else payload[0]))
        return
    if len(rows) == 1:
        name, eps, _ = rows[0]
        typer.echo(f"epsilon = {eps:.6g}  (accountant: {name}, delta = {delta:g})")
        return
    table = Table(title=f"epsilon at delta = {delta:g}")
    table.add_column("accountant")
    table.add_column("epsilon", justify="right")
    table.add_column("note")
    valid = [e for _, e, _ in rows if e is not None and math.isfinite(e)]
    best = min(valid) if valid else None
    for name, eps, note in rows:
        shown = "—" if eps is None else f"{eps:.6g}"
        if eps is not None and eps == best:
            shown = f"[bold green]{shown}[/]"
        reason = note.split(". ")[0]  # the table shows the first sentence, shortened
        table.add_row(name, shown, reason if len(reason) <= 100 else reason[:99] + "…")
    console.print(table)


def _fail(exc: DPError) -> None:
    from dpcurator.cli._suggest import with_suggestion  # noqa: PLC0415

    console.print(f"[red]error:[/] {with_suggestion(exc)}")
    raise typer.Exit(code=2)


@app.command()
def epsilon(
    noise_multiplier: Annotated[
        float, typer.Option(help="Gaussian noise standard deviation / L2 sensitivity.")
    ],
    delta: Annotated[float, typer.Option(help="Target delta.")] = 1e-5,
    sampling_rate: Annotated[float, typer.Option(help="Poisson sampling rate q.")] = 1.0,
    steps: Annotated[int, typer.Option(help="Number of compositions (training steps).")] = 1,
    accountant: Annotated[str, typer.Option(help=_ACCOUNTANT_HELP)] = "pld",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Epsilon of a (Poisson-subsampled) Gaussian mechanism run STEPS times (e.g. DP-SGD)."""
    try:
        event: PrivacyEvent = GaussianEvent(sigma=noise_multiplier)
        if sampling_rate != 1.0:
            event = PoissonSampledEvent(sampling_rate=sampling_rate, event=event)
        rows = _epsilons(SelfComposedEvent(event, steps), delta, accountant)
    except DPError as exc:
        _fail(exc)
        return
    _print_rows(rows, delta, as_json)


@app.command()
def noise(
    epsilon: Annotated[float, typer.Option(help="Target epsilon.")],
    delta: Annotated[float, typer.Option(help="Target delta (0 for pure DP).")] = 1e-5,
    mechanism: Annotated[
        str, typer.Option(help="dpsgd, gaussian, discrete-gaussian or laplace.")
    ] = "dpsgd",
    sensitivity: Annotated[float, typer.Option(help="Sensitivity (L1 or L2).")] = 1.0,
    sampling_rate: Annotated[float, typer.Option(help="dpsgd: Poisson sampling rate.")] = 0.01,
    steps: Annotated[int, typer.Option(help="dpsgd: number of steps.")] = 1000,
    accountant: Annotated[str, typer.Option(help="dpsgd: pld or rdp.")] = "pld",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Answer the inverse question: how much noise achieves a target epsilon."""
    from dpcurator.accounting import (  # noqa: PLC0415 (SciPy: only when asked)
        discrete_gaussian_sigma,
        dpsgd_noise_multiplier,
        gaussian_sigma_analytic,
        gaussian_sigma_classic,
        laplace_scale,
    )

    results: dict[str, float] = {}
    try:
        if mechanism == "dpsgd":
            results["noise_multiplier"] = dpsgd_noise_multiplier(
                epsilon, delta, sampling_rate=sampling_rate, steps=steps, accountant=accountant
            )
        elif mechanism == "gaussian":
            results["sigma_analytic"] = gaussian_sigma_analytic(epsilon, delta, sensitivity)
            if epsilon < 1:
                results["sigma_classic"] = gaussian_sigma_classic(epsilon, delta, sensitivity)
        elif mechanism == "discrete-gaussian":
            if sensitivity != int(sensitivity):
                raise InvalidParameterError(
                    "sensitivity", sensitivity, "must be an integer for the discrete Gaussian"
                )
            results["sigma"] = discrete_gaussian_sigma(epsilon, delta, int(sensitivity))
        elif mechanism == "laplace":
            results["scale"] = laplace_scale(epsilon, sensitivity)
        else:
            raise InvalidParameterError(
                "mechanism", mechanism, "must be dpsgd, gaussian, discrete-gaussian or laplace"
            )
    except DPError as exc:
        _fail(exc)
        return
    if as_json:
        typer.echo(json.dumps({"epsilon": epsilon, "delta": delta, **results}))
        return
    for key, value in results.items():
        typer.echo(f"{key} = {value:.6g}")


@app.command()
def compose(
    specs: Annotated[
        list[str] | None,
        typer.Argument(help="Mechanisms, e.g. laplace:epsilon=0.1,count=5 gaussian:sigma=3."),
    ] = None,
    file: Annotated[Path | None, typer.Option(help="TOML file with [[mechanism]] tables.")] = None,
    delta: Annotated[float | None, typer.Option(help="Target delta (default 1e-5).")] = None,
    accountant: Annotated[str, typer.Option(help=_ACCOUNTANT_HELP)] = "all",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Compose a list of mechanisms and print epsilon under each accountant."""
    try:
        events = [parse_spec(spec) for spec in specs or []]
        if file is not None:
            file_events, file_delta = parse_spec_file(file)
            events.extend(file_events)
            delta = delta if delta is not None else file_delta
        if not events:
            raise InvalidParameterError("specs", [], "must name at least one mechanism or a --file")
        target = 1e-5 if delta is None else delta
        rows = _epsilons(ComposedEvent(tuple(events)), target, accountant)
    except DPError as exc:
        _fail(exc)
        return
    _print_rows(rows, target, as_json)


@app.command()
def demo(
    out: Annotated[
        Path, typer.Option(help="Folder for the database, declaration, ledger and plot.")
    ] = _DEMO_OUT,
    quick: Annotated[bool, typer.Option("--quick", help="Fewer simulation repeats.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run the curator demo: private SQL over real CPS tax units, a budget, the ledger, a plot."""
    from dpcurator.cli._demo import run_demo  # noqa: PLC0415

    run_demo(console, out, quick=quick, as_json=as_json)


@app.command()
def tour(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Run the tour: secure noise, randomized response, Laplace, accounting, budgets."""
    from dpcurator.cli._tour import run_tour  # noqa: PLC0415

    run_tour(console, as_json=as_json)


def main() -> None:
    """Entry point of the ``dpcurator`` console script."""
    app()
