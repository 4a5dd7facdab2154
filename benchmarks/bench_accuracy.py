"""Accuracy at equal budget: 13 typical queries on two real tables, dpcurator next to 3 peers.

Run (after ``bash benchmarks/peers/setup_peers.sh tumult smartnoise opendp``)::

    .venv/bin/python benchmarks/bench_accuracy.py [--repeats 10] [--peer-repeats 2 5 3]
        [--peers tumult smartnoise opendp] [--peer-timeout 1500]
        [--out benchmarks/results/accuracy.json] [--show FILE]
    .venv/bin/python benchmarks/bench_accuracy.py --quartiles 50 --out FILE  # dpcurator only

Tables (bundled, real, multi-row privacy units; ``dpcurator.datasets``):

- ``cps``: CPS tax units, privacy unit the household (1 to 12 tax units). Declared: at most 4 rows
  per household (so at most 4 groups, 4 rows per group), wages in [0, 250,000], age bands
  (``age_band``: lower edge of [0,18,25,35,45,55,65,75,86)), public domains for state (51),
  year (3), filing status (4).
- ``flights``: NYC departures 2013, privacy unit the aircraft (``tailnum``, 1 to 575 flights).
  Declared: at most 5 flights per aircraft and month, in at most 12 months (60 in all), distance
  in [0, 5,000] miles, public domains for month (12) and carrier (16).

The bounded data: the driver bounds each table once, deterministically, so that every system's
own contribution bounding (hash, random or reservoir) drops nothing and every system answers
from the same rows: CPS keeps the 4 first tax units of each household (by ``tax_unit_id``),
wages clipped into [0, 250,000];
flights drops the 2,512 flights without a tail number, keeps each aircraft's flights with its
main carrier (17 aircraft flew for two) and its first 5 flights of each month (by day, then
departure time). The systems still declare and apply their bounds. Errors are measured against
the exact answer on this bounded data (the headline: the noise of each system at equal budget)
and on the raw bundled table (noise plus the bias of the bounds, the same for every system).

Budget: (epsilon 1.0, delta 1e-6) in total per table, split evenly over its queries (7 on cps,
6 on flights); each system splits a query's share over its noisy statistics its own way, and
composes the queries of a table by basic composition unless said otherwise. dpcurator runs two
configurations: basic composition (Laplace/geometric, ``noise="auto"`` with delta/Q per query:
the discrete Gaussian where its std is smaller) and a zCDP session (``accountant="zcdp"``, each
query ``rho = zcdp_rho_for(1, 1e-6) / Q``, all discrete Gaussian), each reported twice: the raw
answers, and the consistent session's combined answers (``Session.combined`` on each answer
after the whole workload of its table: every count and sum measured by the table's queries,
including the counts and centred sums inside AVG, combined by generalised least squares; free
post-processing; medians are not combined and stay raw). The headline configuration of each
table is fixed in advance from the declaration (not from the results): basic composition for
cps (one unit's rows packed in one cell: L2 = L1, where Laplace wins), zCDP for flights (one
aircraft moves 12 monthly cells: L2 = L1 / sqrt(12)), combined values for both (every COUNT,
SUM and AVG of the workload is over the same table, without WHERE, of NOT NULL columns, grouped
by public-domain keys: session consistency applies).

The peers run their pure-DP configuration (their default: basic composition, Laplace or
geometric noise) on every query and a zCDP configuration (same rho as dpcurator's) on the three
queries where Gaussian noise applies (flights by month); the best peer of a query is the best of
all their configurations.

Averages and quantiles are clamped into their declared bounds for every system (free
post-processing). MAE per query: the mean over the query's cells (groups with a defined truth)
of |released - exact|, averaged over independent repetitions: ``--repeats`` for dpcurator
(seeded per repetition), ``--peer-repeats`` for Tumult, SmartNoise and OpenDP (their own
secure sources take no seed; Tumult on Spark takes tens of seconds a query, hence 2). The peers
run side by side, each in its own process and venv (``.venv-peers/<peer>``), after dpcurator;
runtimes are the whole workload's, on a shared machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HERE / "peers"))

import accuracy_common as common  # noqa: E402

from dpcurator.accounting import Budget, zcdp_rho_for  # noqa: E402
from dpcurator.curator import Column, Session, Table  # noqa: E402
from dpcurator.datasets import load_cps, load_flights  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402

PEERS = {
    "tumult": "accuracy_tumult.py",
    "smartnoise": "accuracy_smartnoise.py",
    "opendp": "accuracy_opendp.py",
}
PROCESSES = {"tumult": [["--modes", "pure"], ["--modes", "zcdp"]]}
"""Peers whose configurations run as separate processes side by side (Spark is slow)."""
DATA_DIR = HERE / "results" / "data"
PEERS_DIR = Path(os.environ.get("PEERS_DIR", REPO / ".venv-peers"))
EPSILON, DELTA = 1.0, 1e-6
SEED = 20261126
AGE_BINS = [0, 18, 25, 35, 45, 55, 65, 75, 86]
HEADLINE = {"cps": "dpcurator (basic, combined)", "flights": "dpcurator (zCDP, combined)"}
"""The headline per table, fixed from the declarations: the noise (basic composition where one
unit's rows share a cell, zCDP where one unit moves 12 cells) and the session's combined values
(every count, SUM and AVG of the workload is of the same table, no WHERE, NOT NULL columns and
public-domain keys: session consistency applies; medians are not combined and stay raw)."""
COMBINABLE = ("count", "sum", "mean")
"""The aggregates whose answers the consistent session combines (here all NOT NULL, no WHERE)."""

QUERIES: list[dict[str, Any]] = [
    {"id": "cps_count", "table": "cps", "agg": "count", "by": []},
    {"id": "cps_sum_wages", "table": "cps", "agg": "sum", "column": "wages", "by": []},
    {"id": "cps_mean_wages", "table": "cps", "agg": "mean", "column": "wages", "by": []},
    {"id": "cps_median_wages", "table": "cps", "agg": "median", "column": "wages", "by": []},
    {"id": "cps_count_by_state", "table": "cps", "agg": "count", "by": ["state"]},
    {"id": "cps_histogram_age", "table": "cps", "agg": "count", "by": ["age_band"]},
    {
        "id": "cps_mean_wages_by_year_status",
        "table": "cps",
        "agg": "mean",
        "column": "wages",
        "by": ["year", "filing_status"],
    },
    {"id": "fl_count", "table": "flights", "agg": "count", "by": []},
    {"id": "fl_mean_distance", "table": "flights", "agg": "mean", "column": "distance", "by": []},
    {
        "id": "fl_median_distance",
        "table": "flights",
        "agg": "median",
        "column": "distance",
        "by": [],
    },
    {"id": "fl_count_by_month", "table": "flights", "agg": "count", "by": ["month"]},
    {
        "id": "fl_count_by_carrier_month",
        "table": "flights",
        "agg": "count",
        "by": ["carrier", "month"],
    },
    {
        "id": "fl_sum_distance_by_month",
        "table": "flights",
        "agg": "sum",
        "column": "distance",
        "by": ["month"],
    },
]


# --------------------------------------------------------------------------------------------
# data, declarations and truth


def bounded_tables() -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """Each table: (raw, bounded), both with the derived columns the queries group by."""
    cps = load_cps()[
        ["tax_unit_id", "household_id", "state", "year", "filing_status", "age_head", "wages"]
    ].copy()
    cps["age_band"] = pd.cut(cps["age_head"], AGE_BINS, right=False, labels=AGE_BINS[:-1]).astype(
        "int64"
    )
    cps_b = cps.sort_values(["household_id", "tax_unit_id"])
    cps_b = cps_b[cps_b.groupby("household_id").cumcount() < 4].reset_index(drop=True)
    cps_b["wages"] = cps_b["wages"].clip(0, 250_000)  # values within their declared bounds

    fl = load_flights()[["tailnum", "month", "day", "dep_time", "flight", "carrier", "distance"]]
    fl = fl.copy()
    fl_b = fl[fl["tailnum"].notna()].copy()
    main = fl_b.groupby("tailnum")["carrier"].agg(lambda s: s.value_counts().sort_index().idxmax())
    fl_b = fl_b[fl_b["carrier"] == fl_b["tailnum"].map(main)]
    fl_b = fl_b.sort_values(["tailnum", "month", "day", "dep_time", "flight"], na_position="last")
    fl_b = fl_b[fl_b.groupby(["tailnum", "month"]).cumcount() < 5].reset_index(drop=True)
    fl_b["distance"] = fl_b["distance"].clip(0, 5000)
    keep_c = ["household_id", "state", "year", "filing_status", "age_head", "age_band", "wages"]
    keep_f = ["tailnum", "month", "carrier", "distance"]
    return {
        "cps": (cps[keep_c], cps_b[keep_c]),
        "flights": (fl[keep_f], fl_b[keep_f].astype({"tailnum": str})),
    }


def declarations(raw: dict[str, pd.DataFrame]) -> dict[str, dict[str, Any]]:
    return {
        "cps": {
            "unit": "household_id",
            "max_rows_per_unit": 4,
            "max_groups_per_unit": 4,
            "max_rows_per_group": 4,
            "bounds": {"wages": [0, 250_000], "age_head": [0, 85]},
            "domains": {
                "state": sorted(raw["cps"]["state"].unique().tolist()),
                "age_band": AGE_BINS[:-1],
                "year": [2012, 2013, 2014],
                "filing_status": [
                    "single",
                    "married_joint",
                    "married_separate",
                    "head_of_household",
                ],
            },
            "int_columns": ["year", "age_band", "age_head", "wages"],
        },
        "flights": {
            "unit": "tailnum",
            "max_rows_per_unit": 60,
            "max_groups_per_unit": 12,
            "max_rows_per_group": 5,
            "bounds": {"distance": [0, 5000]},
            "domains": {
                "month": list(range(1, 13)),
                "carrier": sorted(raw["flights"]["carrier"].unique().tolist()),
            },
            "int_columns": ["month", "distance"],
        },
    }


def exact(frame: pd.DataFrame, query: dict[str, Any], decl: dict[str, Any]) -> common.Answer:
    """The exact answer: every cell of the public domains (means only where the cell has rows)."""
    by = query["by"]
    agg = query["agg"]
    col = query.get("column")
    cells = [()]
    for key in by:
        cells = [(*c, v) for c in cells for v in decl["domains"][key]]

    def value(part: pd.DataFrame) -> float:
        if agg == "count":
            return float(len(part))
        if agg == "sum":
            return float(part[col].sum())
        if len(part) == 0:
            return math.nan
        if agg == "mean":
            return float(part[col].mean())
        return float(part[col].median())

    if not by:
        return {"": value(frame)}
    groups = {k if isinstance(k, tuple) else (k,): v for k, v in frame.groupby(by)}
    out = {}
    for cell in cells:
        part = groups.get(cell, frame.iloc[0:0])
        out[common.cell_key(cell)] = value(part)
    return out


def truths(
    tables: dict[str, tuple[pd.DataFrame, pd.DataFrame]], decls: dict[str, dict[str, Any]]
) -> dict[str, dict[str, common.Answer]]:
    out: dict[str, dict[str, common.Answer]] = {"bounded": {}, "raw": {}}
    for q in QUERIES:
        raw, bounded = tables[q["table"]]
        out["bounded"][q["id"]] = exact(bounded, q, decls[q["table"]])
        out["raw"][q["id"]] = exact(raw, q, decls[q["table"]])
    return out


# --------------------------------------------------------------------------------------------
# dpcurator, in process


def dp_sql(q: dict[str, Any]) -> str:
    col = q.get("column")
    agg = {
        "count": "COUNT(*)",
        "sum": f"SUM({col})",
        "mean": f"AVG({col})",
        "median": f"MEDIAN({col})",
    }[q["agg"]]
    keys = ", ".join(q["by"])
    select = f"{keys}, {agg} AS v" if keys else f"{agg} AS v"
    group = f" GROUP BY {keys}" if keys else ""
    return f"SELECT {select} FROM {q['table']}{group}"


def dp_table(name: str, frame: pd.DataFrame, decl: dict[str, Any]) -> Table:
    columns = [Column(decl["unit"])]
    for key, domain in decl["domains"].items():
        columns.append(Column(key, domain=domain, nullable=False))
    for col, (lo, hi) in decl["bounds"].items():
        columns.append(Column(col, lower=lo, upper=hi, nullable=False))
    return Table(
        name,
        frame,
        privacy_unit=decl["unit"],
        max_rows_per_unit=decl["max_rows_per_unit"],
        max_groups_per_unit=decl["max_groups_per_unit"],
        max_rows_per_group=decl["max_rows_per_group"],
        columns=columns,
    )


def _answer_of(q: dict[str, Any], frame: pd.DataFrame, column: str, bounds: Any) -> common.Answer:
    """One query's answer per cell from a released (or combined) table's ``column``."""
    answer: common.Answer = {}
    for _, row in frame.iterrows():
        key = common.cell_key([row[k] for k in q["by"]])
        v = row[column]
        if q["agg"] in ("mean", "median"):
            v = common.clamp(v, *bounds[q["column"]])
        answer[key] = float(v)
    return answer


def run_dpcurator(
    config: str,
    tables: dict[str, tuple[pd.DataFrame, pd.DataFrame]],
    decls: dict[str, dict[str, Any]],
    repeats: int,
    only: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Answer the workload ``repeats`` times, a fresh session (and budget) per table and rep.

    Two records: the raw answers, and each query's combined answer (``Session.combined``,
    asked after the whole workload of its table; a median, not combined, stays raw).
    ``only``: answer just these queries, each with its share of the whole workload's budget.
    """
    results: dict[str, list[common.Answer]] = {q["id"]: [] for q in QUERIES}
    combined: dict[str, list[common.Answer]] = {q["id"]: [] for q in QUERIES}
    split: dict[str, str] = {}
    stds: dict[str, str] = {}
    combine_seconds = 0.0
    t0 = time.perf_counter()
    declared = {name: dp_table(name, tables[name][1], decls[name]) for name in tables}
    for rep in range(repeats):
        for name, table in declared.items():
            queries = [q for q in QUERIES if q["table"] == name]
            n = len(queries)
            source = InsecureSeededSource(SEED + 1000 * rep + len(name))
            if config == "zcdp":
                session = Session(
                    table,
                    Budget(EPSILON, DELTA),
                    accountant="zcdp",
                    ledger=":memory:",
                    source=source,
                )
                rho = zcdp_rho_for(EPSILON, DELTA) / n
                kwargs: dict[str, Any] = {"rho": rho}
            else:
                session = Session(
                    table, Budget(EPSILON, DELTA), ledger=":memory:", source=source, noise="auto"
                )
                kwargs = {"epsilon": EPSILON / n, "delta": DELTA / n}
            lo_hi = decls[name]["bounds"]
            released = []
            for q in queries:
                if only is not None and q["id"] not in only:
                    continue
                release = session.sql(dp_sql(q), **kwargs)
                released.append((q, release))
                results[q["id"]].append(_answer_of(q, release.table, "v", lo_hi))
                if rep == 0:
                    split[q["id"]] = "; ".join(
                        f"{m.name}: {m.mechanism} eps={m.epsilon:.4g} scale={m.scale:.4g}"
                        + (f" ({m.why})" if getattr(m, "why", "") else "")
                        for m in release.split
                    )
            t1 = time.perf_counter()
            for q, release in released:  # after the whole workload of the table
                if q["agg"] not in COMBINABLE:
                    combined[q["id"]].append(results[q["id"]][-1])
                    continue
                frame = session.combined(release)
                combined[q["id"]].append(_answer_of(q, frame, "v_combined", lo_hi))
                if rep == 0:
                    ratio = (frame["v_combined_std"] / frame["v_std"]).mean()
                    stds[q["id"]] = (
                        f"std {frame['v_std'].mean():.4g} raw, "
                        f"{frame['v_combined_std'].mean():.4g} combined ({ratio:.3f}x); "
                        f"{frame.attrs['answers']} answers combined"
                    )
            combine_seconds += time.perf_counter() - t1
            session.close()
    seconds = time.perf_counter() - t0 - combine_seconds
    import importlib.metadata

    rho_total = zcdp_rho_for(EPSILON, DELTA)
    how = (
        f"zCDP session: Budget({EPSILON}, {DELTA}) accountant='zcdp', rho={rho_total:.5g} in "
        "total, rho/Q per query (discrete Gaussian; quantiles the exponential mechanism at "
        "sqrt(2 rho_i))"
        if config == "zcdp"
        else f"basic composition: epsilon {EPSILON}/Q and delta {DELTA}/Q per query, "
        "noise='auto' (the discrete Gaussian only where its std is the smaller)"
    )
    label = "zCDP" if config == "zcdp" else "basic"
    raw = {
        "library": f"dpcurator ({label})",
        "version": importlib.metadata.version("dpcurator"),
        "seconds": seconds,
        "setup_seconds": 0.0,
        "results": results,
        "unsupported": {},
        "notes": {"budget": how, "split": split},
    }
    both = {
        **raw,
        "library": f"dpcurator ({label}, combined)",
        "seconds": seconds + combine_seconds,
        "combine_seconds": combine_seconds,
        "results": combined,
        "notes": {
            "budget": how + "; then Session.combined on each answer (post-processing, free)",
            "split": split,
            "combined": stds,
        },
    }
    return [raw, both]


# --------------------------------------------------------------------------------------------
# several quantiles of one column: jointly, or each alone (dpcurator only)

QUARTILES = {"cps": "wages", "flights": "distance"}
"""The column whose quartiles ``--quartiles`` releases, per table (its median is in QUERIES)."""
LEVELS = (0.25, 0.5, 0.75)


def run_quartiles(
    tables: dict[str, tuple[pd.DataFrame, pd.DataFrame]],
    decls: dict[str, dict[str, Any]],
    repeats: int,
) -> dict[str, Any]:
    """Quartiles of one column per table, at the median query's budget share (epsilon / Q).

    Two ways, same total epsilon: one query ``QUANTILE(c, 0.25), MEDIAN(c), QUANTILE(c, 0.75)``
    (released jointly, JointExp: one exponential mechanism over sorted triples), and three
    one-quantile queries at a third of it each (three separate exponential mechanisms). MAE per
    level in the column's units against the bounded table's exact quantiles (pandas' linear
    interpolation), over ``repeats`` seeded repetitions, a fresh session each. The peers do not
    run it: their drivers answer one statistic per query (multi-quantile support is not in them).
    """
    out: dict[str, Any] = {}
    for name, column in QUARTILES.items():
        bounded = tables[name][1]
        table = dp_table(name, bounded, decls[name])
        share = EPSILON / sum(q["table"] == name for q in QUERIES)
        truth = [float(bounded[column].quantile(q)) for q in LEVELS]
        lo, hi = decls[name]["bounds"][column]
        joint_sql = (
            f"SELECT QUANTILE({column}, 0.25) AS a, MEDIAN({column}) AS b, "
            f"QUANTILE({column}, 0.75) AS c FROM {name}"
        )
        errors: dict[str, list[list[float]]] = {"joint": [], "split": []}
        for rep in range(repeats):
            source = InsecureSeededSource(SEED + 7000 + 1000 * rep + len(name))
            with Session(table, Budget(EPSILON), ledger=":memory:", source=source) as session:
                row = session.sql(joint_sql, epsilon=share).table.iloc[0]
                joint = [common.clamp(float(row[k]), lo, hi) for k in "abc"]
                split = []
                for q in LEVELS:
                    one = session.sql(
                        f"SELECT QUANTILE({column}, {q}) AS v FROM {name}", epsilon=share / 3
                    )
                    split.append(common.clamp(float(one.table["v"].iloc[0]), lo, hi))
            errors["joint"].append([abs(v - t) for v, t in zip(joint, truth, strict=True)])
            errors["split"].append([abs(v - t) for v, t in zip(split, truth, strict=True)])
        out[name] = {
            "column": column,
            "epsilon": share,
            "truth": truth,
            "mae": {
                how: [float(np.mean([e[i] for e in errs])) for i in range(len(LEVELS))]
                for how, errs in errors.items()
            },
            "repeats": repeats,
        }
        mae = out[name]["mae"]
        print(
            f"{name} quartiles of {column} at epsilon {share:.4g}: "
            + "; ".join(
                f"q={q}: joint {mae['joint'][i]:,.1f}, split {mae['split'][i]:,.1f}"
                for i, q in enumerate(LEVELS)
            ),
            flush=True,
        )
    return out


# --------------------------------------------------------------------------------------------
# peers, each in its own venv


def run_peers(peers: list[str], workload: Path, timeout: float, logs: Path) -> list[dict[str, Any]]:
    """Run the peers' scripts, each in its venv, side by side; one record per configuration.

    A peer prints one JSON line per configuration as it finishes it; on a timeout the peer (and
    its children: Spark's JVM) is killed and the configurations it finished are kept.
    """
    logs.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    running = []
    for peer in peers:
        base = {"library": peer, "peer": peer}
        if not (PEERS_DIR / peer / ".stamp").exists():
            failed = PEERS_DIR / f"{peer}.install-failed"
            reason = f"not installed in {PEERS_DIR / peer} (run benchmarks/peers/setup_peers.sh)"
            if failed.exists():
                reason = "install failed: " + failed.read_text().strip()[-800:]
            records.append({**base, "error": reason})
            continue
        python = PEERS_DIR / peer / "bin" / "python"
        for i, extra in enumerate(PROCESSES.get(peer, [[]])):
            cmd = [str(python), str(HERE / "peers" / PEERS[peer]), "--workload", str(workload)]
            log = logs / f"accuracy_{peer}{i or ''}.log"
            out = logs / f"accuracy_{peer}{i or ''}.out"
            with log.open("w") as err, out.open("w") as stdout:
                proc = subprocess.Popen(
                    cmd + extra, stdout=stdout, stderr=err, start_new_session=True
                )
            running.append((peer, proc, log, out, time.perf_counter()))
    deadline = time.perf_counter() + timeout
    ended: dict[int, float] = {}
    while len(ended) < len(running) and time.perf_counter() < deadline:
        for _, proc, _, _, _ in running:
            if proc.pid not in ended and proc.poll() is not None:
                ended[proc.pid] = time.perf_counter()
        time.sleep(0.5)
    for peer, proc, log, out, t0 in running:
        timed_out = proc.pid not in ended
        if timed_out:
            os.killpg(proc.pid, signal.SIGKILL)  # the peer and its children (Spark's JVM)
            proc.wait()
        wall = ended.get(proc.pid, time.perf_counter()) - t0
        lines = [ln for ln in out.read_text().splitlines() if ln.startswith("{")]
        for line in lines:
            record: dict[str, Any] = json.loads(line)
            record.update(peer=peer, wall_seconds=wall)
            records.append(record)
        if timed_out:
            records.append(
                {
                    "library": peer,
                    "peer": peer,
                    "error": f"timed out after {timeout:.0f} s (configurations finished before "
                    f"are kept); log {log.relative_to(REPO)}",
                }
            )
        elif not lines:
            tail = log.read_text()[-1500:]
            records.append({"library": peer, "error": f"exit {proc.returncode}, no result: {tail}"})
        print(f"  {peer}: done in {wall:.0f} s", flush=True)
    return records


# --------------------------------------------------------------------------------------------
# errors and report


def mae(answers: list[common.Answer], truth: common.Answer, agg: str) -> float | None:
    if not answers:
        return None
    per_rep = []
    for answer in answers:
        errs = []
        for key, t in truth.items():
            if math.isnan(t):
                continue
            est = answer.get(key)
            if est is None or (isinstance(est, float) and math.isnan(est)):
                est = 0.0  # a cell not released counts as 0
            errs.append(abs(est - t))
        per_rep.append(statistics.fmean(errs))
    return statistics.fmean(per_rep)


def score(records: list[dict[str, Any]], truth: dict[str, dict[str, common.Answer]]) -> None:
    for r in records:
        if "results" not in r:
            continue
        r["mae"] = {}
        r["mae_raw"] = {}
        for q in QUERIES:
            answers = r["results"].get(q["id"], [])
            r["mae"][q["id"]] = mae(answers, truth["bounded"][q["id"]], q["agg"])
            r["mae_raw"][q["id"]] = mae(answers, truth["raw"][q["id"]], q["agg"])


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def verdicts(records: list[dict[str, Any]], which: str = "mae") -> list[dict[str, Any]]:
    """Per query: headline dpcurator's MAE, the best peer's, their ratio and the target."""
    ok = [r for r in records if which in r]
    peers = [r for r in ok if not r["library"].startswith("dpcurator")]
    rows = []
    for q in QUERIES:
        ours = next(r for r in ok if r["library"] == HEADLINE[q["table"]])
        raw = next(r for r in ok if r["library"] == HEADLINE[q["table"]].replace(", combined", ""))
        best = None
        for r in peers:
            v = r[which].get(q["id"])
            if v is not None and (best is None or v < best[1]):
                best = (r["library"], v)
        mine = ours[which][q["id"]]
        row = {
            "query": q["id"],
            "dpcurator": mine,
            "dpcurator_raw": raw[which][q["id"]],
            "best_peer": best[0] if best else None,
            "best_peer_mae": best[1] if best else None,
        }
        if best and mine is not None and best[1] > 0:
            ratio = mine / best[1]
            row["ratio"] = ratio
            # Gaussian noise applies where one unit moves many cells (flights by month: L2 =
            # L1 / sqrt(12)); session consistency wherever counts and sums of the same
            # population are measured by several queries: every COUNT, SUM and AVG here (the
            # total, by state, by age band, the counts and centred sums inside AVG, SUM).
            gaussian = q["table"] == "flights" and bool(q["by"])
            consistency = q["agg"] in COMBINABLE
            if q["agg"] == "median":
                target, met = "<= 2x best peer", ratio <= 2.0
            elif gaussian or consistency:
                why = " and ".join(
                    w for w, on in (("Gaussian", gaussian), ("consistency", consistency)) if on
                )
                target, met = f"<= 0.75x best peer ({why} applies)", ratio <= 0.75
            else:
                target, met = "<= best peer", ratio <= 1.0
            row["target"], row["met"] = target, met
        rows.append(row)
    return rows


def print_report(result: dict[str, Any]) -> None:
    records = result["records"]
    ok = [r for r in records if "mae" in r]
    names = [r["library"] for r in ok]
    for which, title in (
        ("mae", "MAE against the exact answer on the bounded data (headline)"),
        ("mae_raw", "MAE against the exact answer on the raw bundled table"),
    ):
        peers = ", ".join(f"{k} {v}" for k, v in result["peer_repeats"].items())
        reps = f"repetitions: dpcurator {result['repeats']}, {peers}"
        print(f"\n{title}; {reps}")
        print("| query | mean abs truth | " + " | ".join(names) + " | ours / best peer |")
        print("| --- | ---: | " + " | ".join("---:" for _ in names) + " | ---: |")
        rows = {v["query"]: v for v in verdicts(records, which)}
        truth_key = "bounded" if which == "mae" else "raw"
        for q in QUERIES:
            t = [abs(v) for v in result["truth"][truth_key][q["id"]].values() if not math.isnan(v)]
            cells = []
            for r in ok:
                v = r[which][q["id"]]
                if v is None:
                    cells.append("n/s" if q["id"] in r.get("unsupported", {}) else "-")
                else:
                    cells.append(_fmt(v))
            v = rows[q["id"]]
            ratio = f"{v['ratio']:.2f}" if "ratio" in v else "-"
            print(
                f"| {q['id']} | {_fmt(statistics.fmean(t))} | "
                + " | ".join(cells)
                + f" | {ratio} |"
            )
    print(
        "\nTargets (headline dpcurator: basic composition on cps, zCDP on flights, the session's "
        "combined values; bounded truth):"
    )
    for v in verdicts(records, "mae"):
        if "ratio" in v:
            mark = "MET" if v["met"] else "NOT MET"
            print(
                f"  {v['query']}: dpcurator {_fmt(v['dpcurator'])} vs best peer "
                f"{v['best_peer']} {_fmt(v['best_peer_mae'])} -> {v['ratio']:.2f}x; "
                f"target {v['target']}: {mark}"
            )
    print("\nRuntime (whole workload x repetitions, data in memory; peers in their own process):")
    for r in records:
        if "seconds" in r:
            extra = f", process wall {r['wall_seconds']:.1f} s" if "wall_seconds" in r else ""
            print(f"  {r['library']} {r.get('version', '')}: {r['seconds']:.1f} s{extra}")
        else:
            print(f"  {r['library']}: NOT MEASURED: {str(r.get('error'))[:600]}")
    for r in ok:
        for qid, why in r.get("unsupported", {}).items():
            print(f"  {r['library']} does not answer {qid}: {why[:300]}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="dpcurator's repetitions")
    parser.add_argument(
        "--peer-repeats",
        nargs=3,
        type=int,
        default=[2, 5, 3],
        metavar=("TUMULT", "SMARTNOISE", "OPENDP"),
        help="each peer's repetitions (Tumult on Spark is slow)",
    )
    parser.add_argument("--peers", nargs="*", default=list(PEERS), choices=list(PEERS))
    parser.add_argument("--peer-timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "accuracy.json")
    parser.add_argument("--show", type=Path, default=None, help="print a saved JSON and stop")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        choices=[q["id"] for q in QUERIES],
        help="dpcurator only, on these queries (each at its share of the whole workload's "
        "budget); prints their errors and writes nothing",
    )
    parser.add_argument(
        "--quartiles",
        type=int,
        default=None,
        metavar="REPEATS",
        help="dpcurator only: quartiles of cps wages and flights distance, jointly (one "
        "mechanism) or each alone at a third of the budget; prints their MAE, writes --out",
    )
    args = parser.parse_args(argv)
    if args.quartiles is not None:
        tables = bounded_tables()
        quartiles = run_quartiles(
            tables, declarations({k: v[0] for k, v in tables.items()}), args.quartiles
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"quartiles": quartiles}, indent=1) + "\n")
        return quartiles
    if args.show is not None:
        saved: dict[str, Any] = json.loads(args.show.read_text())
        print_report(saved)
        return saved
    started = time.perf_counter()
    tables = bounded_tables()
    decls = declarations({k: v[0] for k, v in tables.items()})
    truth = truths(tables, decls)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    workload_tables = {}
    for name, (raw, bounded) in tables.items():
        path = DATA_DIR / f"accuracy_{name}.parquet"
        bounded.to_parquet(path, index=False)
        workload_tables[name] = {
            **decls[name],
            "path": str(path),
            "rows": len(bounded),
            "raw_rows": len(raw),
        }
        print(f"{name}: {len(raw):,} rows raw, {len(bounded):,} bounded", flush=True)
    workload = {
        "epsilon": EPSILON,
        "delta": DELTA,
        "rho": zcdp_rho_for(EPSILON, DELTA),
        "repeats": args.repeats,
        "peer_repeats": dict(zip(PEERS, args.peer_repeats, strict=True)),
        "gaussian": [q["id"] for q in QUERIES if q["table"] == "flights" and q["by"]],
        "tables": workload_tables,
        "queries": QUERIES,
    }
    workload_path = DATA_DIR / "accuracy_workload.json"
    workload_path.write_text(json.dumps(workload, indent=1))
    records = []
    only = None if args.only is None else set(args.only)
    for config in ("basic", "zcdp"):
        for rec in run_dpcurator(config, tables, decls, args.repeats, only):
            print(f"  {rec['library']}: {rec['seconds']:.1f} s", flush=True)
            records.append(rec)
    if only is not None:
        score(records, truth)
        for rec in records:
            for q in QUERIES:
                if q["id"] in only:
                    print(f"  {rec['library']} {q['id']}: MAE {_fmt(rec['mae'][q['id']])}")
        return {"records": records}
    print(f"  peers {', '.join(args.peers)}: side by side ...", flush=True)
    for rec in run_peers(args.peers, workload_path, args.peer_timeout, HERE / "results" / "logs"):
        shown = f"{rec['seconds']:.1f} s" if "seconds" in rec else rec.get("error", "")
        print(f"  {rec['library']}: {str(shown)[:300]}", flush=True)
        records.append(rec)
    score(records, truth)
    result = {
        "benchmark": "accuracy at equal budget: 13 queries on cps and flights",
        "command": "python benchmarks/bench_accuracy.py " + " ".join(argv or sys.argv[1:]),
        "epsilon_per_table": EPSILON,
        "delta_per_table": DELTA,
        "repeats": args.repeats,
        "peer_repeats": workload["peer_repeats"],
        "tables": {
            k: {kk: vv for kk, vv in v.items() if kk != "path"} for k, v in workload_tables.items()
        },
        "queries": QUERIES,
        "truth": truth,
        "records": records,
        "verdicts": verdicts(records, "mae"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "numpy": np.__version__,
            "date": datetime.date.today().isoformat(),
        },
    }
    result["total_seconds"] = time.perf_counter() - started
    print_report(result)
    print(f"\ntotal {result['total_seconds']:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
