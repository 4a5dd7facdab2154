#!/usr/bin/env python3
"""Reproduce the lectures' results table on real hierarchies: error per level, four variants.

The table of Fioretto, Van Hentenryck and Zhu ("Differential Privacy of Hierarchical Census
Data: An Optimization Approach", CP 2019 / AIJ 2021; lecture 003, "Experimental Evaluation:
Accuracy"; ``hierarchy.md`` (e)) compares, for epsilon 0.1 / 0.5 / 1.0 and every level of a
hierarchy, four count-of-counts releases:

==========  ===================================================================================
variant     pipeline
==========  ===================================================================================
``M_H^r``   noisy histograms ``H`` (Delta 2, ``lambda = 2L/eps``) -> continuous QP with the
            bounds (OSQP) -> rounding to the nearest integers, violations counted (``#CV``)
``M_H^dp``  noisy ``H`` -> the exact integer optimum (consistent, ``>= 0``, total ``G``)
``M_c^r``   noisy cumulative ``Hc`` (Delta 1, ``lambda = L/eps``) -> PAV per region -> clip to
            ``[0, G]`` -> differences -> continuous QP -> rounding, ``#CV``
``M_c^dp``  noisy ``Hc`` -> PAV -> clip -> differences -> exact integer optimum
==========  ===================================================================================

The ``r`` and ``dp`` variants of one encoding post-process the same noisy draw. Errors: the mean
over the regions of a level of Kuo et al.'s earth mover's distance between the true and released
histograms, and the mean L1 distance; ``#CV`` counts the violated constraints of the whole
release (consistency of every (region, size) cell and of the public total, domains,
integrality). Means over ``--seeds`` seeded simulations (``InsecureSeededSource``: simulations,
not releases).

Data (real, bundled with dpcurator):

* ``flights`` (the lectures' "Taxi" stand-in, trips per vehicle): NYC departures 2013,
  ``dpcurator.datasets.load_flights``, hierarchy all > month > origin > destination (L = 4
  levels, 2,361 regions); a group is an aircraft (``tailnum``) within a
  (month, origin, destination) cell and its size its number of flights there (186,688 groups,
  sizes 1..44; the 2,512 flights without a tail number are dropped). Public maximal size
  ``S = 64`` (no group is capped), so the scalar tree has 151,105 nodes. An individual is a
  flight: a simulation of the paper's setting, not a privacy claim about aircraft.
* ``counties`` (the "Census" stand-in, plain counts): 2019 county population estimates,
  ``dpcurator.datasets.load_county_population``, nation > region > division > state > county
  (L = 5, 3,207 nodes, 328,239,523 people), geometric noise of scale ``L/eps`` per level
  (Delta 1, add/remove one person), the national total public (an invariant). Plain counts have
  no size axis, so the variants are the post-processing methods: relaxed QP + rounding (``r``),
  the exact integer optimum (``dp``), and, for context, two-pass least squares (continuous,
  may be negative) and TopDown-lite; error = mean absolute error per level.

Usage::

    .venv/bin/python scripts/reproduce_census_table.py [--seeds 3] [--quick]
        [--out benchmarks/results/census_table.json]

``--quick``: a smoke run (one seed, epsilon 1.0, January flights only, S = 48).
Prints Markdown ready for ``BENCHMARKS.md`` and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dpcurator.datasets import load_county_population, load_flights  # noqa: E402
from dpcurator.hierarchy._count_of_counts import (  # noqa: E402
    CountOfCounts,
    add_count_of_counts_noise,
    level_distances,
    postprocess_count_of_counts,
)
from dpcurator.hierarchy._metrics import level_errors  # noqa: E402
from dpcurator.hierarchy._noise import add_level_noise  # noqa: E402
from dpcurator.hierarchy._postprocess import postprocess  # noqa: E402
from dpcurator.hierarchy._tree import Tree  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402

EPSILONS = (0.1, 0.5, 1.0)
VARIANTS = {
    "M_H^r": ("histogram", "relaxed"),
    "M_H^dp": ("histogram", "exact"),
    "M_c^r": ("cumulative", "relaxed"),
    "M_c^dp": ("cumulative", "exact"),
}
COUNT_METHODS = {"r": "relaxed", "dp": "exact", "LS": "least_squares", "TopDown": "topdown"}
FLIGHT_LEVELS = ("all", "month", "month > origin", "month > origin > dest")
COUNTY_LEVELS = ("nation", "region", "division", "state", "county")
COUNTY_COLUMNS = ["region", "division", "state", "county"]
MAX_SIZE = 64

# The lectures' table (lecture 003, "Experimental Evaluation: Accuracy"), for comparison: EMD per
# level on Kuo et al.'s Taxi and Census data (the paper's own data, not ours), and #CV.
PAPER = {
    "taxi": {
        0.1: {"M_H^r": [25.4, 158.7, 904.4, 18206], "M_H^dp": [26.6, 121.9, 915.7, 0],
              "M_c^r": [47.9, 153.2, 551.6, 19460], "M_c^dp": [19.9, 65.6, 644.3, 0]},
        0.5: {"M_H^r": [8.6, 81.2, 364.2, 18591], "M_H^dp": [5.5, 31.0, 408.9, 0],
              "M_c^r": [46.7, 153.5, 450.7, 19531], "M_c^dp": [4.0, 16.4, 352.9, 0]},
        1.0: {"M_H^r": [7.7, 77.2, 279.0, 18085], "M_H^dp": [3.1, 19.8, 328.5, 0],
              "M_c^r": [47.1, 154.2, 447.1, 19706], "M_c^dp": [2.0, 8.7, 307.8, 0]},
    },
    "census": {
        0.1: {"M_H^r": [40.3, 54.3, 802.1, 1966], "M_H^dp": [10.3, 38.4, 825.4, 0],
              "M_c^r": [23.1, 64.5, 632.2, 1715], "M_c^dp": [0.9, 23.2, 550.6, 0]},
        0.5: {"M_H^r": [39.4, 37.9, 216.3, 1990], "M_H^dp": [2.4, 9.4, 230.8, 0],
              "M_c^r": [23.1, 61.0, 494.2, 1718], "M_c^dp": [0.2, 5.8, 159.1, 0]},
        1.0: {"M_H^r": [40.7, 39.2, 130.0, 1989], "M_H^dp": [1.2, 5.1, 128.8, 0],
              "M_c^r": [24.1, 63.0, 494.5, 1728], "M_c^dp": [0.1, 3.2, 91.0, 0]},
    },
}  # fmt: skip


@dataclass(frozen=True)
class Record:
    """One post-processed release: its errors per level and the constraints it breaks."""

    dataset: str
    epsilon: float
    variant: str
    seed: int
    errors: dict[str, list[float]]  # metric name -> one value per level
    violations: int
    seconds: float


# -- data ----------------------------------------------------------------------------------------


def flights_counts(*, months: Sequence[int] | None, max_size: int) -> CountOfCounts:
    """Flights per aircraft within each month > origin > destination cell."""
    flights = load_flights()
    flights = flights[flights["tailnum"].notna()]
    if months is not None:
        flights = flights[flights["month"].isin(list(months))]
    return CountOfCounts.from_groups(
        flights, ["month", "origin", "dest"], "tailnum", max_size=max_size
    )


def county_counts() -> tuple[Tree, NDArray[np.int64]]:
    """Return the county tree and its true population at every node."""
    counties = load_county_population()
    tree = Tree.from_frame(counties, COUNTY_COLUMNS)
    population = counties.set_index(COUNTY_COLUMNS)["population_2019"]
    leaves = [tree.labels[v] for v in np.flatnonzero(tree.is_leaf)]
    return tree, np.asarray(tree.aggregate(population.loc[leaves].to_numpy()), dtype=np.int64)


# -- simulations ---------------------------------------------------------------------------------


def count_of_counts_records(
    counts: CountOfCounts, epsilons: Sequence[float], seeds: int
) -> list[Record]:
    """Simulate the four variants of the lectures' table on one count-of-counts hierarchy."""
    records = []
    for epsilon in epsilons:
        for seed in range(seeds):
            for e, encoding in enumerate(("histogram", "cumulative")):
                source = InsecureSeededSource(1000 * seed + e)
                noisy = add_count_of_counts_noise(
                    counts, epsilon=epsilon, encoding=encoding, source=source
                )
                for variant, (variant_encoding, method) in VARIANTS.items():
                    if variant_encoding != encoding:
                        continue
                    start = time.perf_counter()
                    estimate = postprocess_count_of_counts(noisy, method=method)
                    seconds = time.perf_counter() - start
                    distances = level_distances(counts.tree, counts.histograms, estimate.histograms)
                    records.append(
                        Record(
                            "flights",
                            epsilon,
                            variant,
                            seed,
                            {"EMD": [d.emd for d in distances], "L1": [d.l1 for d in distances]},
                            estimate.solution.violations.total,
                            seconds,
                        )
                    )
    return records


def county_records(
    tree: Tree, truth: NDArray[np.int64], epsilons: Sequence[float], seeds: int
) -> list[Record]:
    """Simulate plain counts: geometric noise per level, then each post-processing method."""
    records = []
    levels = [truth[part] for part in tree.level_slices]
    for epsilon in epsilons:
        for seed in range(seeds):
            noise = add_level_noise(
                levels, mechanism="geometric", budget=epsilon, source=InsecureSeededSource(seed)
            )
            noisy = np.concatenate(noise.values)
            inverse = np.array([1.0 / level.variance for level in noise.levels])
            weights = inverse[np.asarray(tree.level)]
            for variant, method in COUNT_METHODS.items():
                start = time.perf_counter()
                solution = postprocess(
                    tree, noisy, weights=weights, total=int(truth[0]), method=method
                )
                seconds = time.perf_counter() - start
                errors = level_errors(tree, solution.values, truth)
                records.append(
                    Record(
                        "counties",
                        epsilon,
                        variant,
                        seed,
                        {"MAE": [e.mean_abs for e in errors]},
                        solution.violations.total,
                        seconds,
                    )
                )
    return records


# -- summary and output --------------------------------------------------------------------------


def summarise(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Average the records over seeds, per (dataset, epsilon, variant)."""
    groups: dict[tuple[str, float, str], list[Record]] = {}
    for record in records:
        groups.setdefault((record.dataset, record.epsilon, record.variant), []).append(record)
    rows = []
    for (dataset, epsilon, variant), group in groups.items():
        metrics = group[0].errors.keys()
        rows.append(
            {
                "dataset": dataset,
                "epsilon": epsilon,
                "variant": variant,
                "seeds": len(group),
                "errors": {
                    m: [
                        statistics.fmean(values)
                        for values in zip(*(r.errors[m] for r in group), strict=True)
                    ]
                    for m in metrics
                },
                "violations": statistics.fmean(r.violations for r in group),
                "seconds": statistics.fmean(r.seconds for r in group),
            }
        )
    return rows


def markdown_table(
    rows: Sequence[dict[str, Any]], dataset: str, metric: str, level_names: Sequence[str]
) -> str:
    """Format one dataset's metric: rows = levels (+ #CV, seconds), columns = eps x variant."""
    chosen = [row for row in rows if row["dataset"] == dataset]
    header = [f"{row['variant']} ε={row['epsilon']:g}" for row in chosen]
    lines = [
        f"| {dataset}: {metric} | " + " | ".join(header) + " |",
        "|---|" + "---:|" * len(chosen),
    ]
    for level, name in enumerate(level_names):
        cells = [_number(row["errors"][metric][level]) for row in chosen]
        lines.append(f"| {level} {name} | " + " | ".join(cells) + " |")
    lines.append("| #CV | " + " | ".join(_number(row["violations"]) for row in chosen) + " |")
    lines.append("| seconds | " + " | ".join(f"{row['seconds']:.2f}" for row in chosen) + " |")
    return "\n".join(lines)


def _number(value: float) -> str:
    return f"{value:,.1f}" if abs(value) < 1e5 else f"{value:,.0f}"


def paper_table() -> str:
    """Return the lectures' numbers (their data: EMD per level 1-3, #CV) as Markdown."""
    lines = [
        "| paper (lecture 003) | data | level 1 | level 2 | level 3 | #CV |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for data, by_epsilon in PAPER.items():
        for epsilon, variants in by_epsilon.items():
            for variant, (l1, l2, l3, cv) in variants.items():
                lines.append(f"| {variant} ε={epsilon:g} | {data} | {l1} | {l2} | {l3} | {cv} |")
    return "\n".join(lines)


def run(*, seeds: int, quick: bool) -> dict[str, Any]:
    """Simulate every table cell; return the JSON-ready result (with the Markdown)."""
    epsilons = (1.0,) if quick else EPSILONS
    max_size = 48 if quick else MAX_SIZE
    start = time.perf_counter()
    counts = flights_counts(months=(1,) if quick else None, max_size=max_size)
    tree, truth = county_counts()
    records = count_of_counts_records(counts, epsilons, seeds)
    records += county_records(tree, truth, epsilons, seeds)
    rows = summarise(records)
    flight_levels = FLIGHT_LEVELS[: counts.tree.n_levels]
    markdown = "\n\n".join(
        [
            markdown_table(rows, "flights", "EMD", flight_levels),
            markdown_table(rows, "flights", "L1", flight_levels),
            markdown_table(rows, "counties", "MAE", COUNTY_LEVELS),
        ]
    )
    return {
        "setting": {
            "epsilons": list(epsilons),
            "seeds": seeds,
            "quick": quick,
            "flights": {
                "regions": counts.tree.n_nodes,
                "levels": counts.tree.n_levels,
                "groups": counts.groups,
                "max_size": counts.max_size,
                "scalar_tree_nodes": 1 + counts.tree.n_nodes * counts.max_size,
            },
            "counties": {"nodes": tree.n_nodes, "levels": tree.n_levels, "total": int(truth[0])},
        },
        "rows": rows,
        "paper": {data: {str(e): v for e, v in table.items()} for data, table in PAPER.items()},
        "markdown": markdown,
        "seconds": time.perf_counter() - start,
        "machine": {"python": platform.python_version(), "machine": platform.machine()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the simulations, print the tables and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one seed, epsilon 1, January")
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / "census_table.json"
    )
    args = parser.parse_args(argv)
    result = run(seeds=1 if args.quick else args.seeds, quick=args.quick)
    print(result["markdown"])
    print()
    print(paper_table())
    print(f"\n{result['seconds']:.1f} s in all")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
