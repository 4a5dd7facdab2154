"""``dpcurator power`` and ``dpcurator transit``: constraint-based DP on the bundled data.

``dpcurator power --case ieee14 --epsilon 1 --alpha 1`` releases the case's loads under
alpha-indistinguishability with plain Laplace noise (all of epsilon) and with CBDP (noise, a
private optimal cost, then the projection that keeps the DC-OPF feasible and its cost faithful:
program #2, whose OPF cost is at most f~* + beta, and the bilevel program, whose OPF cost is
within beta of f~* on both sides), and prints the load error and the OPF cost and feasibility of
each against the true loads.
``dpcurator transit --epsilon 1 --months 1`` releases the NYC flights' origin-destination
counts by month (consistent, non-negative, integral) faithful to a fleet-repositioning plan.
Both print the steward's confidential comparison (measured against the true data); ``--json``
prints it as JSON. ``--seed`` makes the noise reproducible with an insecure seeded source (for
demonstrations only). A refusal prints the reason and exits with status 2.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from dpcurator.cli._progress import Steps
from dpcurator.errors import DPError

__all__ = ["power", "transit"]

console = Console()


def _source(seed: int | None) -> Any:
    from dpcurator.noise import InsecureSeededSource  # noqa: PLC0415

    return None if seed is None else InsecureSeededSource(seed)


def _fmt(value: float | None, spec: str = ",.4g") -> str:
    return (
        "—"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


def _refuse(exc: DPError) -> typer.Exit:
    console.print(f"[red]refused:[/red] {exc}")
    return typer.Exit(2)


def power(  # noqa: PLR0917 (typer commands take their options as parameters)
    case: Annotated[
        str, typer.Option("--case", help="ieee14, ieee30, ieee39, ieee57 or ieee118.")
    ] = "ieee14",
    epsilon: Annotated[float, typer.Option("--epsilon", help="Privacy budget, > 0.")] = 1.0,
    alpha: Annotated[
        float, typer.Option("--alpha", help="Indistinguishability radius (MW) of a load.")
    ] = 1.0,
    cost_share: Annotated[
        float, typer.Option("--cost-share", help="Share of epsilon for the optimal cost.")
    ] = 0.2,
    beta: Annotated[
        float | None, typer.Option("--beta", help="Faithfulness window ($/h); default 95%.")
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Insecure seeded noise (demonstrations only).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Release private power loads for the DC optimal power flow (CBDP vs plain noise)."""
    from dpcurator.networks import compare_power, load_case  # noqa: PLC0415

    try:
        with Steps("power", 2, console=console, show=not as_json) as steps:
            data = load_case(case)
            steps.done(f"{case} loaded")
            row = compare_power(
                data,
                epsilon=epsilon,
                alpha=alpha,
                cost_share=cost_share,
                beta=beta,
                source=_source(seed),
            )
            steps.done("loads released, OPF solved on each release")
    except DPError as exc:
        raise _refuse(exc) from None
    if as_json:
        typer.echo(json.dumps(row.as_dict(), indent=2))
        return
    title = (
        f"{row.case}: {data.network.n_loads} private loads, ε = {row.epsilon:g}, "
        f"α = {row.alpha:g} MW (measured against the true loads: CONFIDENTIAL)"
    )
    table = Table(title=title)
    for name in (
        "release",
        "load error L2 (MW)",
        "L1 (MW)",
        "negative loads",
        "OPF feasible",
        "OPF cost gap",
        "|OPF − f~*| ≤ β",
    ):
        table.add_column(name, justify="left" if name == "release" else "right")
    table.add_row(
        "plain Laplace",
        _fmt(row.plain_l2),
        _fmt(row.plain_l1),
        str(row.plain_negative),
        "yes" if row.plain_feasible else "no",
        _fmt(row.plain_opf_gap, ".2%"),
        "—",
    )
    table.add_row(
        "CBDP program #2",
        _fmt(row.cbdp_l2),
        _fmt(row.cbdp_l1),
        str(row.cbdp_negative),
        "yes" if row.cbdp_feasible else "no",
        _fmt(row.cbdp_opf_gap, ".2%"),
        "yes" if row.cbdp_in_window else "no",
    )
    table.add_row(
        "CBDP bilevel",
        _fmt(row.bilevel_l2),
        _fmt(row.bilevel_l1),
        str(row.bilevel_negative),
        "yes" if row.bilevel_feasible else "no",
        _fmt(row.bilevel_opf_gap, ".2%"),
        "yes" if row.bilevel_in_window else "no",
    )
    console.print(table)
    console.print(
        f"true OPF cost {row.true_cost:,.1f} $/h; released optimum f~* = "
        f"{_fmt(row.released_cost, ',.1f')} $/h, beta = {_fmt(row.beta, ',.1f')} $/h "
        f"(bilevel {_fmt(row.bilevel_beta, ',.1f')}); CBDP's own noisy loads (before "
        f"projection): L2 {row.noisy_l2:,.4g} MW; bilevel ||D^ - D|| / ||D~ - D|| = "
        f"{_fmt(row.bilevel_factor, '.3f')} (true OPF cost inside the window: "
        f"{'yes' if row.truth_in_window else 'no'})."
    )


def transit(  # noqa: PLR0917 (typer commands take their options as parameters)
    epsilon: Annotated[float, typer.Option("--epsilon", help="Privacy budget, > 0.")] = 1.0,
    months: Annotated[
        int, typer.Option("--months", help="Time slots: the first N months of 2013 (1-12).")
    ] = 1,
    cost_share: Annotated[
        float, typer.Option("--cost-share", help="Share of epsilon for the plan's optimum.")
    ] = 0.1,
    beta: Annotated[
        float | None, typer.Option("--beta", help="Faithfulness window (miles); default 95%.")
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Insecure seeded noise (demonstrations only).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Release private origin-destination counts for transit planning (NYC flights)."""
    from dpcurator.networks import compare_transit, load_flights_od  # noqa: PLC0415

    try:
        with Steps("transit", 2, console=console, show=not as_json) as steps:
            data = load_flights_od(months)
            steps.done(f"{months} month(s) of counts loaded")
            row = compare_transit(
                data, epsilon=epsilon, cost_share=cost_share, beta=beta, source=_source(seed)
            )
            steps.done("counts released, plan solved")
    except DPError as exc:
        raise _refuse(exc) from None
    if as_json:
        typer.echo(json.dumps(row.as_dict(), indent=2))
        return
    title = (
        f"NYC flights 2013, {months} month(s) > origin > destination: {row.leaves:,} OD cells, "
        f"ε = {row.epsilon:g} (measured against the true counts: CONFIDENTIAL)"
    )
    table = Table(title=title)
    for name in ("release", "L1 err (trips)", "< 0", "inconsistent", "plan cost gap"):
        table.add_column(name, justify="left" if name == "release" else "right")
    table.add_row(
        "noisy counts",
        _fmt(row.noisy_l1, ",.0f"),
        str(row.noisy_negative),
        str(row.noisy_inconsistent),
        _fmt(row.noisy_plan_gap, ".3%"),
    )
    table.add_row(
        "CBDP",
        _fmt(row.cbdp_l1, ",.0f"),
        str(row.cbdp_negative),
        str(row.cbdp_inconsistent),
        _fmt(row.cbdp_plan_gap, ".3%"),
    )
    console.print(table)
    console.print(
        f"true repositioning plan {row.true_plan:,.0f} miles; released optimum "
        f"f~* = {row.released_plan_cost:,.0f}, beta = {row.beta:,.0f} miles."
    )
