"""The ``dpcurator local`` commands: simulate a population of devices under local DP.

``dpcurator local simulate --protocol olh --epsilon 1 --data surnames`` draws a population of
devices from real frequencies (the 1990 Census surnames, or Seattle's pet names), lets every
device randomise its value with the chosen protocol (secure randomness), aggregates the reports
as a server would, and prints the estimated against the true counts of the most frequent
values, with 95 % intervals and whether each covers the truth. It also writes a plot (estimates
with error bars; error against epsilon) when matplotlib is installed (the ``plot`` extra).

The population is a simulation input, not privacy noise: it is drawn from
``InsecureSeededSource(--seed-population)`` so that runs share it; the protocols' noise always
comes from the secure default source.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Protocol

import numpy as np
import typer
from numpy.typing import NDArray
from rich.console import Console
from rich.table import Table

from dpcurator.accounting import PrivacyEvent
from dpcurator.cli._progress import Steps
from dpcurator.cli._suggest import with_suggestion
from dpcurator.errors import DPError, InvalidParameterError
from dpcurator.local import (
    CountMeanSketch,
    FrequencyEstimate,
    GeneralizedRandomizedResponse,
    HadamardCountMeanSketch,
    HadamardResponse,
    OptimizedLocalHashing,
    OptimizedUnaryEncoding,
    Rappor,
    SymmetricUnaryEncoding,
    choose_protocol,
)
from dpcurator.noise import InsecureSeededSource, RandomSource, uniform_integers

__all__ = ["app", "simulate"]

app = typer.Typer(
    name="local",
    help="Local differential privacy: simulate devices that randomise their own values.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()

PROTOCOLS = ("grr", "sue", "oue", "olh", "hr", "cms", "hcms", "rappor", "auto")
DATA = ("surnames", "pets")
_DEFAULT_SWEEP = "0.5,1,2,4"
_Z95 = 1.959963984540054


@app.callback()
def _local() -> None:
    """Local differential privacy: simulate devices that randomise their own values."""


# --------------------------------------------------------------------------------------------
# the population


@dataclass(frozen=True)
class Population:
    """Devices drawn from a real frequency table.

    Attributes
    ----------
    labels : list of str
        The domain: value ``i`` is ``labels[i]`` (most frequent first in the source table).
    values : numpy.ndarray of int64
        One domain index per device.
    counts : numpy.ndarray of int64
        True number of devices holding each value.
    source : str
        Where the frequencies come from (for the printout).
    """

    labels: list[str]
    values: NDArray[np.int64]
    counts: NDArray[np.int64]
    source: str


def _frequencies(data: str, domain_size: int) -> tuple[list[str], NDArray[np.float64], str]:
    """Labels and weights of the ``domain_size`` most frequent values of a shipped table."""
    if data == "surnames":
        from dpcurator.datasets import load_surnames  # noqa: PLC0415 (pandas is slow to import)

        table = load_surnames()
        positive = table[table["percent"] > 0]
        if domain_size > len(positive):
            raise InvalidParameterError(
                "domain_size", domain_size, f"must be <= {len(positive)} for surnames"
            )
        top = positive.head(domain_size)
        labels = [str(x) for x in top["name"]]
        weights = top["percent"].to_numpy(dtype=np.float64)
        return labels, weights, "1990 US Census surnames (percent of the population)"
    if data == "pets":
        from dpcurator.datasets import load_pet_names  # noqa: PLC0415

        names = load_pet_names()["animal_name"].dropna().value_counts()
        if domain_size > len(names):
            raise InvalidParameterError(
                "domain_size", domain_size, f"must be <= {len(names)} for pets"
            )
        top = names.head(domain_size)
        labels = [str(x) for x in top.index]
        weights = top.to_numpy(dtype=np.float64)
        return labels, weights, "Seattle pet licences 2003-2018 (animal names)"
    raise InvalidParameterError("data", data, f"must be one of {', '.join(DATA)}")


def draw_population(
    weights: NDArray[np.float64], devices: int, source: RandomSource
) -> NDArray[np.int64]:
    """Draw ``devices`` i.i.d. values with probabilities proportional to ``weights``.

    Inverse-CDF sampling with 53-bit uniforms from ``source`` (a simulation input, not privacy
    noise: any source will do, a seeded one makes the population reproducible).

    Parameters
    ----------
    weights : numpy.ndarray
        Non-negative weights, not all zero.
    devices : int
        Number of devices.
    source : RandomSource
        Where the uniforms come from.

    Returns
    -------
    numpy.ndarray of int64
        One index into ``weights`` per device.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> x = draw_population(np.array([3.0, 1.0]), 40000, InsecureSeededSource(0))
    >>> bool(abs(x.mean() - 0.25) < 0.01)
    True
    """
    cdf = np.cumsum(weights, dtype=np.float64)
    cdf /= cdf[-1]
    u = uniform_integers(1 << 53, devices, source=source).astype(np.float64) * 2.0**-53
    out: NDArray[np.int64] = np.minimum(
        np.searchsorted(cdf, u, side="right"), weights.size - 1
    ).astype(np.int64)
    return out


def make_population(data: str, domain_size: int, devices: int, seed: int) -> Population:
    """Draw the simulated devices of ``data`` over its ``domain_size`` most frequent values."""
    labels, weights, source = _frequencies(data, domain_size)
    values = draw_population(weights, devices, InsecureSeededSource(seed))
    counts = np.bincount(values, minlength=domain_size).astype(np.int64)
    return Population(labels, values, counts, source)


# --------------------------------------------------------------------------------------------
# the protocols


@dataclass(frozen=True)
class Run:
    """One protocol run: what was run, the privacy of one report, and the estimate."""

    protocol: str
    epsilon: float
    estimate: FrequencyEstimate


def _rappor_run(epsilon: float, domain_size: int, values: NDArray[np.int64]) -> Run:
    """One-time RAPPOR (``p = 0, q = 1``: the IRR is the PRR) with ``f`` set by epsilon.

    With ``h = 2`` hashes a report is ``4 ln((1 - f/2)/(f/2))``-LDP (EPK14, Theorem 1, one
    report), so ``f = 2 / (1 + e^{eps/4})``, rounded up (more noise) until the protocol's own
    ``report_epsilon`` is at most ``epsilon``. Decoding: regression over all domain values.
    """
    f = Fraction(2.0 / (1.0 + math.exp(epsilon / 4.0)))
    while True:
        rappor = Rappor(num_bits=128, num_hashes=2, num_cohorts=64, f=f, p=0, q=1)
        if rappor.report_epsilon <= epsilon:
            break
        f = Fraction(math.nextafter(float(f), 1.0))
    chunk = 250_000
    summary = None
    for start in range(0, values.size, chunk):
        part = rappor.summarize(rappor.privatize(values[start : start + chunk]))
        summary = part if summary is None else summary.merge(part)
    assert summary is not None
    decoding = rappor.decode(summary, list(range(domain_size)))
    return Run(repr(rappor), rappor.report_epsilon, decoding.estimate)


class _Oracle(Protocol):
    """What the command needs of a protocol: simulate devices, and one report's event."""

    @property
    def event(self) -> PrivacyEvent: ...

    def estimate(
        self, values: object, *, source: RandomSource | None = None
    ) -> FrequencyEstimate: ...


def _oracle(protocol: str, epsilon: float, domain_size: int) -> _Oracle:
    """Return the frequency oracle named ``protocol`` (RAPPOR is handled apart)."""
    if protocol == "grr":
        return GeneralizedRandomizedResponse(epsilon, domain_size)
    if protocol in ("sue", "oue"):
        unary = SymmetricUnaryEncoding if protocol == "sue" else OptimizedUnaryEncoding
        return unary(epsilon, domain_size)
    if protocol == "olh":
        return OptimizedLocalHashing(epsilon, domain_size)
    if protocol == "hr":
        return HadamardResponse(epsilon, domain_size)
    if protocol == "auto":
        return choose_protocol(epsilon, domain_size)
    if protocol in ("cms", "hcms"):
        return _ChunkedSketch(protocol, epsilon, domain_size)
    raise InvalidParameterError("protocol", protocol, f"must be one of {', '.join(PROTOCOLS)}")


class _ChunkedSketch:
    """Apple's count-mean sketch (or its Hadamard version), simulated in bounded memory.

    The sketch is ``k = 64`` rows wide by ``m`` columns, ``m`` the power of two at least
    ``max(1024, 2 d)`` (well above the number of heavy values, so that hash collisions stay
    small); devices are privatised and sketched a chunk at a time and the sketches merged.
    """

    _CHUNK = 100_000

    def __init__(self, protocol: str, epsilon: float, domain_size: int) -> None:
        width = 1 << max(10, (2 * domain_size - 1).bit_length())
        cls = CountMeanSketch if protocol == "cms" else HadamardCountMeanSketch
        self._sketch = cls(epsilon=epsilon, domain_size=domain_size, num_hashes=64, width=width)

    @property
    def event(self) -> PrivacyEvent:
        return self._sketch.event

    def estimate(self, values: object, *, source: RandomSource | None = None) -> FrequencyEstimate:
        flat = np.asarray(values).reshape(-1)
        total = None
        for start in range(0, flat.size, self._CHUNK):
            part = self._sketch.sketch(
                self._sketch.privatize(flat[start : start + self._CHUNK], source=source)
            )
            total = part if total is None else total.merge(part)
        return self._sketch.aggregate(total)

    def __repr__(self) -> str:
        return repr(self._sketch)


def run_protocol(protocol: str, epsilon: float, domain_size: int, values: NDArray[np.int64]) -> Run:
    """Privatise every device's value (secure randomness) and aggregate the reports."""
    if protocol not in PROTOCOLS:
        raise InvalidParameterError("protocol", protocol, f"must be one of {', '.join(PROTOCOLS)}")
    if protocol == "rappor":
        return _rappor_run(epsilon, domain_size, values)
    oracle = _oracle(protocol, epsilon, domain_size)
    estimate = oracle.estimate(values)  # source=None: the secure default
    event_epsilon = float(getattr(oracle.event, "epsilon", epsilon))
    return Run(repr(oracle), event_epsilon, estimate)


# --------------------------------------------------------------------------------------------
# summaries


def _interval(estimate: FrequencyEstimate) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    std = np.sqrt(estimate.variances)  # nan where a decoder did not estimate a value
    return estimate.counts - _Z95 * std, estimate.counts + _Z95 * std


def summarize(population: Population, run: Run, top: int) -> dict[str, Any]:
    """Rows of the ``top`` true values, and errors over the whole domain, as plain data."""
    truth = population.counts.astype(np.float64)
    est = run.estimate.counts
    lo, hi = _interval(run.estimate)
    covered = (lo <= truth) & (truth <= hi)
    order = np.argsort(-population.counts, kind="stable")[:top]
    rows = [
        {
            "rank": int(r + 1),
            "value": population.labels[i],
            "true": int(population.counts[i]),
            "estimate": float(est[i]),
            "std": float(math.sqrt(run.estimate.variances[i])),
            "low": float(lo[i]),
            "high": float(hi[i]),
            "covered": bool(covered[i]),
        }
        for r, i in enumerate(order)
    ]
    finite = np.isfinite(run.estimate.variances)
    est_top = set(np.argsort(-est, kind="stable")[:top].tolist())
    return {
        "protocol": run.protocol,
        "epsilon": run.epsilon,
        "devices": int(population.values.size),
        "domain_size": len(population.labels),
        "data": population.source,
        "rows": rows,
        "rmse": float(np.sqrt(np.mean((est - truth) ** 2))),
        "predicted_rmse": float(np.sqrt(np.mean(run.estimate.variances[finite])))
        if finite.any()
        else math.nan,
        "coverage": float(covered[finite].mean()) if finite.any() else math.nan,
        "top_recall": len(est_top & set(order.tolist())) / max(1, len(order)),
    }


def _strict(value: Any) -> Any:
    """Replace non-finite floats (values a decoder did not estimate) by None, for strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_strict(item) for item in value]
    return value


def _print_table(summary: dict[str, Any], top: int) -> None:
    console.print(
        f"[bold]{summary['protocol']}[/]: epsilon = {summary['epsilon']:.6g} per report, "
        f"{summary['devices']:,} devices, domain of {summary['domain_size']:,} values; "
        f"data: {summary['data']}"
    )
    table = Table(title=f"Top {top} values: estimated against true counts (95 % intervals)")
    for name, justify in (
        ("rank", "right"),
        ("value", "left"),
        ("true", "right"),
        ("estimate", "right"),
        ("95% interval", "right"),
        ("covers", "center"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in summary["rows"]:
        interval = (
            f"[{row['low']:,.0f}, {row['high']:,.0f}]"
            if math.isfinite(row["low"])
            else "not estimated"
        )
        table.add_row(
            str(row["rank"]),
            row["value"],
            f"{row['true']:,}",
            f"{row['estimate']:,.0f}",
            interval,
            "[green]yes[/]" if row["covered"] else "[red]no[/]",
        )
    console.print(table)
    console.print(
        f"all {summary['domain_size']:,} values: RMSE {summary['rmse']:,.1f} "
        f"(predicted {summary['predicted_rmse']:,.1f}), "
        f"95 % intervals cover {100 * summary['coverage']:.1f} %, "
        f"{100 * summary['top_recall']:.0f} % of the true top {top} are in the estimated top {top}"
    )


# --------------------------------------------------------------------------------------------
# the plot


def _parse_sweep(sweep: str) -> list[float]:
    out: list[float] = []
    for part in sweep.split(","):
        if part.strip():
            try:
                value = float(part)
            except ValueError:
                raise InvalidParameterError(
                    "sweep", sweep, "must be comma-separated numbers"
                ) from None
            if not value > 0 or not math.isfinite(value):
                raise InvalidParameterError("sweep", sweep, "must hold epsilons > 0")
            out.append(value)
    return sorted(set(out))


def write_plot(
    path: Path,
    summary: dict[str, Any],
    sweep: Sequence[tuple[float, float, float]],
) -> bool:
    """Write the figure; return False (and write nothing) when matplotlib is missing.

    Left: the top values, true counts and estimates with 95 % error bars. Right (when
    ``sweep`` has points): RMSE over the domain against epsilon, measured and predicted.
    """
    try:
        import matplotlib as mpl  # noqa: PLC0415

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    panels = 2 if sweep else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.8), squeeze=False)
    ax = axes[0][0]
    rows = summary["rows"]
    x = np.arange(len(rows))
    ax.bar(x, [r["true"] for r in rows], color="#c8d6e5", label="true count")
    err = [_Z95 * r["std"] if math.isfinite(r["std"]) else 0.0 for r in rows]
    ax.errorbar(
        x,
        [r["estimate"] for r in rows],
        yerr=err,
        fmt="o",
        color="#c0392b",
        capsize=3,
        label="estimate, 95 % interval",
    )
    ax.set_xticks(x, [r["value"] for r in rows], rotation=45, ha="right")
    ax.set_ylabel("devices")
    ax.set_title(
        f"{summary['protocol']}\ntop {len(rows)} of {summary['domain_size']:,} values, "
        f"epsilon {summary['epsilon']:.3g} per report",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    if sweep:
        ax2 = axes[0][1]
        eps = [s[0] for s in sweep]
        ax2.plot(eps, [s[1] for s in sweep], "o-", color="#c0392b", label="measured RMSE")
        ax2.plot(eps, [s[2] for s in sweep], "--", color="#34495e", label="predicted (closed form)")
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        ax2.set_xticks(eps, [f"{e:g}" for e in eps])
        ax2.minorticks_off()
        ax2.set_xlabel("epsilon per report")
        ax2.set_ylabel(f"RMSE of the counts over {summary['domain_size']:,} values")
        ax2.set_title(f"error against epsilon, {summary['devices']:,} devices", fontsize=9)
        ax2.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------------------------
# the command


def _fail(exc: DPError) -> None:
    console.print(f"[red]error:[/] {with_suggestion(exc)}")
    raise typer.Exit(code=2)


@app.command()
def simulate(  # noqa: PLR0917 (typer commands take their options as parameters)
    protocol: Annotated[
        str, typer.Option(help=f"Protocol: one of {', '.join(PROTOCOLS)} (auto: lowest variance).")
    ] = "olh",
    epsilon: Annotated[float, typer.Option(help="Privacy of one report, > 0.")] = 1.0,
    data: Annotated[str, typer.Option(help=f"Real frequencies: one of {', '.join(DATA)}.")] = (
        "surnames"
    ),
    devices: Annotated[int, typer.Option(help="Number of simulated devices.")] = 1_000_000,
    domain_size: Annotated[
        int, typer.Option(help="Domain: the most frequent values of the data (others dropped).")
    ] = 1000,
    top: Annotated[int, typer.Option(help="Rows of the table: the most frequent values.")] = 10,
    plot: Annotated[Path, typer.Option(help="Where to write the plot (PNG).")] = Path(
        "local_simulate.png"
    ),
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Do not write a plot.")] = False,
    sweep: Annotated[
        str, typer.Option(help="Epsilons of the error-against-epsilon panel ('' for none).")
    ] = _DEFAULT_SWEEP,
    seed_population: Annotated[
        int, typer.Option(help="Seed of the population draw (not of the privacy noise).")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Simulate devices holding real values; estimate the frequencies under local DP."""
    try:
        if protocol not in PROTOCOLS:
            raise InvalidParameterError(
                "protocol", protocol, f"must be one of {', '.join(PROTOCOLS)}"
            )
        if data not in DATA:
            raise InvalidParameterError("data", data, f"must be one of {', '.join(DATA)}")
        if devices < 1:
            raise InvalidParameterError("devices", devices, "must be >= 1")
        if domain_size < 2:
            raise InvalidParameterError("domain_size", domain_size, "must be >= 2")
        if not 1 <= top <= domain_size:
            raise InvalidParameterError("top", top, f"must be in [1, domain_size = {domain_size}]")
        if seed_population < 0:
            raise InvalidParameterError("seed_population", seed_population, "must be >= 0")
        epsilons = _parse_sweep(sweep) if not no_plot else []
        runs = 1 + sum(eps != epsilon for eps in epsilons)
        with Steps("local simulate", runs, console=console, show=not as_json) as steps:
            population = make_population(data, domain_size, devices, seed_population)
            run = run_protocol(protocol, epsilon, domain_size, population.values)
            steps.done(f"{devices:,} devices at epsilon {epsilon:g}")
            summary = summarize(population, run, top)
            points: list[tuple[float, float, float]] = []
            for eps in epsilons:
                other = (
                    run
                    if eps == epsilon
                    else run_protocol(protocol, eps, domain_size, population.values)
                )
                if other is not run:
                    steps.done(f"{devices:,} devices at epsilon {eps:g}")
                part = summary if other is run else summarize(population, other, top)
                points.append((eps, part["rmse"], part["predicted_rmse"]))
    except DPError as exc:
        _fail(exc)
        return
    written = False if no_plot else write_plot(plot, summary, points)
    summary["plot"] = str(plot) if written else None
    summary["sweep"] = [{"epsilon": e, "rmse": r, "predicted_rmse": p} for e, r, p in points]
    if as_json:
        typer.echo(json.dumps(_strict(summary), allow_nan=False))
        return
    _print_table(summary, top)
    if written:
        console.print(f"plot written to {plot}")
    elif not no_plot:
        console.print(
            "[yellow]matplotlib is not installed: no plot written[/] "
            "(pip install 'dpcurator\\[plot]')"
        )
