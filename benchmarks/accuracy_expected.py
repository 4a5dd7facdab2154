"""Measured MAEs with their standard errors, and each peer's expected MAE from its stated noise.

Reads results of ``bench_accuracy.py`` (same workload, same bounded truth): one with many
dpcurator repetitions (``--ours``) and one or more with the peers' repetitions (``--peers``; a
peer's repetitions of a query in several files are pooled; a file may also be the JSON lines a
peer's runner printed, e.g. ``benchmarks/peers/accuracy_tumult.py`` on a few queries), and
prints per query the following. ``--compact OUT`` writes ``--ours`` as each repetition's MAE
per query (a few hundred kB, where 400 repetitions of every released cell take 13 MB); such a
file is read back as ``--ours``.

- dpcurator's headline MAE (basic composition, combined, on cps; zCDP, combined, on flights)
  with its standard error over repetitions (each repetition's MAE over the query's cells is one
  sample);
- each peer configuration's measured MAE and standard error;
- each peer's *expected* MAE where its noise is stated in closed form: counts and sums, whose
  noise does not depend on the data. Tumult adds two-sided geometric noise of scale
  ``b = Delta_1 / epsilon_q`` in pure DP (``E|X| = 2 a / (1 - a^2)``, ``a = exp(-1 / b)``) and
  the discrete Gaussian of ``sigma^2 = Delta_2^2 / (2 rho_q)`` in zCDP
  (``E|X| ~ sigma sqrt(2 / pi)``). Its scales were read from Tumult's own noise statement
  (``benchmarks/peers/tumult_noise_check.py``); the sensitivities are the declarations'.

Run::

    .venv/bin/python benchmarks/bench_accuracy.py --repeats 400 --peers --out /tmp/ours.json
    .venv/bin/python benchmarks/accuracy_expected.py --ours /tmp/ours.json \\
        --compact benchmarks/results/accuracy_s24_dpcurator400_mid_rank.json
    .venv/bin/python benchmarks/accuracy_expected.py \\
        --ours benchmarks/results/accuracy_s24_dpcurator400_mid_rank.json \\
        --peers benchmarks/results/accuracy_tumult10.json \\
                benchmarks/results/accuracy_s24_tumult40_medians.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

HEADLINE = {"cps": "dpcurator (basic, combined)", "flights": "dpcurator (zCDP, combined)"}
QUERIES = {"cps": 7, "flights": 6}
RHO = 0.024359  # zcdp_rho_for(1, 1e-6), the zCDP configurations' total rho per table


def geometric_mae(scale: float) -> float:
    a = math.exp(-1.0 / scale)
    return 2.0 * a / (1.0 - a * a)


def gaussian_mae(l2: float, queries: int) -> float:
    sigma = l2 / math.sqrt(2.0 * RHO / queries)
    return sigma * math.sqrt(2.0 / math.pi)


# Tumult's noise per query: (configuration, expected MAE) where it does not depend on the data.
# cps: 4 rows per household, wages in [0, 250,000], epsilon 1/7 per query; flights: 60 flights
# per aircraft (5 per month in 12 months), distance in [0, 5,000], epsilon 1/6 per query.
EXPECTED: dict[str, list[tuple[str, float]]] = {
    "cps_count": [("Tumult (pure DP)", geometric_mae(4 * 7))],
    "cps_sum_wages": [("Tumult (pure DP)", geometric_mae(4 * 250_000 * 7))],
    "cps_count_by_state": [("Tumult (pure DP)", geometric_mae(4 * 7))],
    "cps_histogram_age": [("Tumult (pure DP)", geometric_mae(4 * 7))],
    "fl_count": [("Tumult (pure DP)", geometric_mae(60 * 6))],
    "fl_count_by_month": [
        ("Tumult (pure DP)", geometric_mae(60 * 6)),
        ("Tumult (zCDP)", gaussian_mae(math.sqrt(12) * 5, 6)),
    ],
    "fl_count_by_carrier_month": [
        ("Tumult (pure DP)", geometric_mae(60 * 6)),
        ("Tumult (zCDP)", gaussian_mae(math.sqrt(12) * 5, 6)),
    ],
    "fl_sum_distance_by_month": [
        ("Tumult (pure DP)", geometric_mae(60 * 5_000 * 6)),
        ("Tumult (zCDP)", gaussian_mae(math.sqrt(12) * 5 * 5_000, 6)),
    ],
}


def per_repetition(record: dict[str, Any], query: str, truth: dict[str, float]) -> list[float]:
    """Each repetition's MAE over the query's cells (cells the system left out: skipped)."""
    out = []
    for answer in record["results"].get(query) or []:
        errors = [abs(float(answer[c]) - truth[c]) for c in truth if c in answer]
        if errors:
            out.append(statistics.fmean(errors))
    return out


def records_in(path: Path) -> list[dict[str, Any]]:
    """A result file's records: a benchmark's JSON, or a runner's JSON lines."""
    text = path.read_text()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return list(json.loads(text)["records"])


def summary(values: list[float]) -> tuple[float, float] | None:
    if len(values) < 2:
        return None
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def repetition_maes(
    records: list[dict[str, Any]], truth: dict[str, dict[str, float]]
) -> dict[str, dict[str, list[float]]]:
    """Per library and query, each repetition's MAE (a library's records pooled)."""
    out: dict[str, dict[str, list[float]]] = {}
    for record in records:
        if "results" not in record:
            continue
        per_query = out.setdefault(record["library"], {})
        for query, cells in truth.items():
            per_query.setdefault(query, []).extend(per_repetition(record, query, cells))
    return out


def load_ours(path: Path) -> dict[str, Any]:
    """A dpcurator run: ``bench_accuracy.py``'s JSON, or its compact form (``--compact``)."""
    result: dict[str, Any] = json.loads(path.read_text())
    if "per_repetition_mae" not in result:
        truth = result["truth"]["bounded"]
        result = {
            "command": result["command"],
            "repeats": result["repeats"],
            "queries": result["queries"],
            "truth": {"bounded": truth},
            "per_repetition_mae": repetition_maes(result["records"], truth),
        }
    return result


def compact(result: dict[str, Any], path: Path) -> None:
    """Write the per-repetition MAEs (6 significant digits), not every released cell."""
    maes = {
        library: {q: [float(f"{x:.6g}") for x in xs] for q, xs in per_query.items()}
        for library, per_query in result["per_repetition_mae"].items()
    }
    path.write_text(json.dumps({**result, "per_repetition_mae": maes}, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours", type=Path, required=True)
    parser.add_argument("--peers", type=Path, nargs="*", default=[])
    parser.add_argument(
        "--compact", type=Path, default=None, help="write --ours's per-repetition MAEs here"
    )
    args = parser.parse_args()
    ours = load_ours(args.ours)
    if args.compact is not None:
        compact(ours, args.compact)
    truth = ours["truth"]["bounded"]
    mine = ours["per_repetition_mae"]
    theirs = repetition_maes(
        [r for p in args.peers for r in records_in(p) if not r["library"].startswith("dpc")],
        truth,
    )
    print(
        "| query | dpcurator (n) | peer configuration (n): measured | its expected MAE "
        "| ours / peer's expected |"
    )
    print("| --- | ---: | --- | ---: | ---: |")
    for query in ours["queries"]:
        qid = query["id"]
        ours_reps = mine[HEADLINE[query["table"]]][qid]
        ours_stat = summary(ours_reps)
        assert ours_stat is not None
        measured = []
        for name, per_query in theirs.items():
            stat = summary(per_query.get(qid, []))
            if stat is not None:
                measured.append(f"{name} ({len(per_query[qid])}): {stat[0]:,.4g} ± {stat[1]:,.2g}")
        expected = EXPECTED.get(qid, [])
        best = min((mae for _, mae in expected), default=None)
        print(
            f"| {qid} | {ours_stat[0]:,.4g} ± {ours_stat[1]:,.2g} ({len(ours_reps)}) "
            f"| {'; '.join(measured) or '-'} "
            f"| {'; '.join(f'{n}: {m:,.4g}' for n, m in expected) or '-'} "
            f"| {'-' if best is None else f'{ours_stat[0] / best:.3f}'} |"
        )


if __name__ == "__main__":
    main()
