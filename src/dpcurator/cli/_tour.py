"""``dpcurator tour``: a tour of the foundation (secure noise, mechanisms, accounting, budgets).

Every privacy-protecting draw here comes from the secure default source. The only seeded
randomness is the synthetic survey population of the randomized-response section (simulated
respondents, not privacy noise), drawn through :class:`~dpcurator.noise.InsecureSeededSource` so
the tour shows the same population every time.

``run_tour(console, as_json=True)`` prints, instead of the panels and tables, one JSON object
with every number they show, whole (:func:`run_tour` returns the same dictionary).
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from dpcurator.accounting import (
    Budget,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PrivacyFilter,
    dpsgd_noise_multiplier,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    make_accountant,
)
from dpcurator.errors import BudgetExceededError, UnsupportedEventError
from dpcurator.mechanisms import (
    die_randomized_response,
    estimate_proportion,
    laplace_mechanism,
    posterior_probability,
)
from dpcurator.noise import InsecureSeededSource, uniform_integers

__all__ = ["run_tour"]


def _randomized_response(console: Console) -> dict[str, Any]:
    n, true_rate = 10_000, 0.30
    # Simulated respondents (not privacy noise): a fixed synthetic population.
    population = uniform_integers(100, n, source=InsecureSeededSource(2013)) < 100 * true_rate
    release = die_randomized_response(population.astype(np.int64))
    estimate = estimate_proportion(release.value, p_truth=2 / 3)
    lo, hi = estimate.estimate - 1.96 * estimate.std, estimate.estimate + 1.96 * estimate.std
    console.print(
        Panel.fit(
            f"{n:,} respondents answer 'do you waste time at work?' with the die protocol "
            "(lecture 001):\n"
            f"each report is [bold]ln 2 = {release.event.epsilon:.4f}[/]-DP "  # type: ignore[attr-defined]
            f"(truth with probability 2/3).\n"
            f"true rate {population.mean():.3f}; private estimate "
            f"[bold]{estimate.estimate:.3f}[/] (95% interval {lo:.3f} .. {hi:.3f}).\n"
            "Tax-dodging example (lecture 003): prior 0.02, coin protocol, answer 'yes' -> "
            f"posterior {posterior_probability(0.02, 0.75, 0.25):.3f}.",
            title="1. Randomized response",
        )
    )
    return {
        "respondents": n,
        "epsilon_per_report": release.event.epsilon,  # type: ignore[attr-defined]
        "true_rate": float(population.mean()),
        "estimate": estimate.estimate,
        "std": estimate.std,
        "interval_95": [lo, hi],
        "posterior_after_yes": posterior_probability(0.02, 0.75, 0.25),
    }


def _laplace(console: Console) -> list[dict[str, Any]]:
    table = Table(title="2. A count of 4,213 people, released with Laplace noise (lecture 003)")
    for column in ("epsilon", "noise scale", "released", "std", "95% interval"):
        table.add_column(column, justify="right")
    rows = []
    for epsilon in (0.1, 0.5, 1.0):
        release = laplace_mechanism(4213.0, epsilon=epsilon, sensitivity=1.0)
        assert release.error is not None
        lo, hi = release.confidence_interval(0.95)
        rows.append(
            {
                "epsilon": epsilon,
                "scale": 1.0 / epsilon,
                "released": float(release.value),
                "std": release.error.std,
                "interval_95": [lo, hi],
            }
        )
        table.add_row(
            f"{epsilon:g}",
            f"{1.0 / epsilon:g}",
            f"{release.value:,.2f}",
            f"{release.error.std:.2f}",
            f"{lo:,.1f} .. {hi:,.1f}",
        )
    console.print(table)
    console.print(
        "   Noise is exact discrete Laplace on a public grid of width 2^-k, drawn from the OS's "
        "CSPRNG:\n   no floating-point noise, so Mironov's attack on textbook Laplace finds "
        "nothing to exploit.\n"
    )
    return rows


def _accounting(console: Console) -> dict[str, Any]:
    delta = 1e-6
    names = ("basic", "advanced", "optimal", "zcdp", "rdp", "pld")
    table = Table(
        title=f"3. k Laplace queries at epsilon 0.1 each: total epsilon at delta {delta:g}"
    )
    table.add_column("k", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    composed: list[dict[str, Any]] = []
    for k in (10, 100, 1000):
        row = [f"{k:,}"]
        values = []
        for name in names:
            eps = (
                make_accountant(name).compose(LaplaceEvent(scale=10.0), count=k).get_epsilon(delta)
            )
            values.append(eps)
        composed.append({"k": k, "epsilon": dict(zip(names, values, strict=True))})
        best = min(values)
        row += [f"[bold green]{v:.3f}[/]" if v == best else f"{v:.3f}" for v in values]
        table.add_row(*row)
    console.print(table)

    step = PoissonSampledEvent(sampling_rate=0.01, event=GaussianEvent(sigma=1.0))
    sgd = Table(title="   DP-SGD: Poisson rate 0.01, noise multiplier 1.0, delta 1e-5")
    sgd.add_column("steps", justify="right")
    for name in ("zcdp", "rdp", "pld"):
        sgd.add_column(name, justify="right")
    sgd_rows: list[dict[str, Any]] = []
    for steps in (1_000, 10_000):
        cells = []
        epsilons: dict[str, float | None] = {}
        for name in ("zcdp", "rdp", "pld"):
            try:
                eps = make_accountant(name).compose(step, count=steps).get_epsilon(1e-5)
                cells.append(f"{eps:.3f}")
                epsilons[name] = eps
            except UnsupportedEventError:
                cells.append("—")
                epsilons[name] = None  # the accountant cannot account this event
        sgd.add_row(f"{steps:,}", *cells)
        sgd_rows.append({"steps": steps, "epsilon": epsilons})
    console.print(sgd)
    return {
        "laplace_queries": {"epsilon_each": 0.1, "delta": delta, "rows": composed},
        "dpsgd": {"sampling_rate": 0.01, "noise_multiplier": 1.0, "delta": 1e-5, "rows": sgd_rows},
    }


def _budgets(console: Console) -> dict[str, Any]:
    budget = PrivacyFilter(Budget(epsilon=1.0), accountant="basic")
    lines = []
    queries: list[dict[str, Any]] = []
    for i in range(1, 6):
        release_event = LaplaceEvent(scale=1 / 0.3)
        try:
            left = budget.spend(release_event)
        except BudgetExceededError as exc:
            lines.append(f"query {i} (epsilon 0.3): [red]refused[/] - {exc}")
            queries.append({"query": i, "epsilon": 0.3, "answered": False, "refusal": str(exc)})
            break
        lines.append(f"query {i} (epsilon 0.3): answered, {left.epsilon:.1f} left")
        queries.append({"query": i, "epsilon": 0.3, "answered": True, "left": left.epsilon})
    lines.append(f"spent: epsilon {budget.spent.epsilon:.1f}; the refused query spent nothing.")
    console.print(Panel.fit("\n".join(lines), title="4. Budgets are filters"))
    return {"budget": 1.0, "queries": queries, "spent": budget.spent.epsilon}


def _calibration(console: Console) -> dict[str, Any]:
    eps, delta = 0.5, 1e-5
    classic = gaussian_sigma_classic(eps, delta)
    analytic = gaussian_sigma_analytic(eps, delta)
    z = dpsgd_noise_multiplier(2.0, 1e-5, sampling_rate=0.01, steps=1000)
    console.print(
        Panel.fit(
            f"Gaussian noise for epsilon {eps}, delta {delta:g}, sensitivity 1:\n"
            f"  lecture 002's sigma = sqrt(2 ln(1.25/delta))/epsilon = {classic:.3f}\n"
            f"  analytic (Balle and Wang 2018)                    = {analytic:.3f} "
            f"({100 * (1 - analytic / classic):.0f}% less noise, same guarantee)\n"
            f"DP-SGD, rate 0.01, 1,000 steps, target epsilon 2 at delta 1e-5: "
            f"noise multiplier {z:.4f}",
            title="5. Calibration: how much noise for a target epsilon",
        )
    )
    return {
        "epsilon": eps,
        "delta": delta,
        "sigma_classic": classic,
        "sigma_analytic": analytic,
        "dpsgd_noise_multiplier": z,
    }


def run_tour(console: Console, *, as_json: bool = False) -> dict[str, Any]:
    """Print the tour to ``console`` (``as_json``: one JSON object on stdout instead).

    Returns
    -------
    dict
        Every number the tour shows, by section: ``randomized_response``, ``laplace``,
        ``accounting``, ``budgets``, ``calibration``; JSON-ready (an accountant that cannot
        account an event is ``None``).
    """
    out = Console(file=io.StringIO()) if as_json else console
    out.rule("[bold]dpcurator: a tour of the foundation")
    summary = {
        "randomized_response": _randomized_response(out),
        "laplace": _laplace(out),
        "accounting": _accounting(out),
        "budgets": _budgets(out),
        "calibration": _calibration(out),
    }
    if as_json:
        typer.echo(json.dumps(summary, allow_nan=False))
        return summary
    console.print(
        "Try the calculator: dpcurator epsilon --noise-multiplier 1.0 --sampling-rate 0.01 "
        "--steps 1000 --delta 1e-5"
    )
    return summary
