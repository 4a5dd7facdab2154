"""Synthetic data: dpcurator's AIM, MST and independent baseline against SmartNoise and mbi.

On bundled Adult (each person a unit) and CPS tax units (each household a unit of up to 4 rows),
for each epsilon: the average L1 distance between the true and synthetic normalised 3-way
marginals over all 3-way marginals of the columns (in [0, 2]; AIM's "workload error"), the same
over a target workload (the 2-way marginals with the target column), and the wall time of the
fit (measurement, inference, sampling). All runs happen side by side in one process tree.

Peers, each in its own environment (``bash benchmarks/peers/setup_peers.sh synth-smartnoise
synth-mbi``):

- SmartNoise Synthesizers (smartnoise-synth 1.0.8): its ``aim`` (3-way workload, as ours) and
  ``mst``, fitted on the same discretised table (integer codes, all categorical: no
  preprocessing budget). Their unit is a row: on CPS their guarantee is per tax unit, ours per
  household (up to 4 tax units), so at equal epsilon ours protects more.
- mbi 2.0 run directly: its MirrorDescent estimator and ``synthetic_data`` on the very noisy
  marginals that dpcurator's AIM and MST measured (the inference alone), against dpcurator's
  inference (:func:`dpcurator.synth.fit_model` and :meth:`Model.sample`) on the same input.

- ``--dataset cps-taxunits``: CPS with each tax unit (a row) its own privacy unit, the guarantee
  SmartNoise gives on CPS, for a comparison at the same guarantee.
- ``--equal-guarantee``: on CPS by household, SmartNoise gets the table with each household
  bounded to 4 rows at random, as ours is, at the per-row zCDP ``rho / 16``: by group privacy
  (Bun and Steinke 2016, Proposition 27) its guarantee per household is then ours.

- ``--baseline REV``: dpcurator's own synthesis as of a git revision (its ``dpcurator.synth``
  package, read with ``git show``, on this checkout's curator), same seed, in a subprocess run
  just before the current one: the speed-up of a change, measured side by side.

Usage::

    .venv/bin/python benchmarks/bench_synth.py                 # Adult, all methods
    .venv/bin/python benchmarks/bench_synth.py --dataset cps --epsilons 1 --peers smartnoise
    .venv/bin/python benchmarks/bench_synth.py --epsilons 3 --methods aim --baseline HEAD
    .venv/bin/python benchmarks/bench_synth.py --epsilons 3 --methods aim --seeds 3000,1,2

``--seeds``: the sessions' seeds, one run of everything per seed (default: ``1000 epsilon``).
Each row records the wall ``seconds`` and the ``cpu_seconds`` (user + system) of the run: this
process's for dpcurator, the whole subprocess's (start-up included) for a peer or a baseline.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcurator.accounting import Budget, zcdp_rho_for, zcdp_to_epsilon
from dpcurator.curator import Column, Session, Table
from dpcurator.datasets import load_adult, load_cps
from dpcurator.noise import InsecureSeededSource
from dpcurator.synth import Marginal, fit_model, synthesize

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / ".venv-peers"
DELTA = 1e-9


def adult() -> tuple[Table, str]:
    frame = load_adult()
    cats = ["workclass", "education", "marital_status", "occupation", "race", "sex", "income"]
    for c in cats:
        frame[c] = frame[c].fillna("?").astype(object)
    columns = [Column("age", lower=17, upper=90, bins=[17, 25, 35, 45, 55, 65, 91])]
    columns += [Column(c, domain=sorted(frame[c].unique())) for c in cats]
    table = Table("adult", frame, privacy_unit="person_id", max_rows_per_unit=1, columns=columns)
    return table, "income"


def cps(unit: str = "household_id") -> tuple[Table, str]:
    """CPS tax units; ``unit="tax_unit_id"``: each row its own unit (the peers' guarantee)."""
    frame = load_cps()
    columns = [
        Column("year", domain=[2012, 2013, 2014]),
        Column("filing_status", domain=sorted(frame["filing_status"].unique())),
        Column("age_head", lower=0, upper=85, bins=[0, 25, 35, 45, 55, 65, 75, 86]),
        Column("n_persons", lower=1, upper=12, bins=[1, 2, 3, 4, 5, 13]),
        Column("wages", lower=0, upper=250000, bins=[0, 1, 20000, 50000, 100000, 250001]),
        Column("social_security", lower=0, upper=100000, bins=[0, 1, 10000, 20000, 100001]),
    ]
    table = Table(
        "cps",
        frame,
        privacy_unit=unit,
        max_rows_per_unit=4 if unit == "household_id" else 1,
        max_groups_per_unit=4 if unit == "household_id" else 1,
        columns=columns,
    )
    return table, "filing_status"


DATASETS = {"adult": adult, "cps": cps, "cps-taxunits": lambda: cps("tax_unit_id")}
"""The tables: Adult (a person per row), CPS by household (up to 4 rows) or by tax unit (1)."""


def attributes_of(table: Table) -> tuple[list[str], list[int]]:
    """The synthesised columns (all but the unit's) and their numbers of values (bins)."""
    names = [c.name for c in table.columns if c.name != table.unit_column]
    declared = [table.column(n) for n in names]
    return names, [len(c.bins) - 1 if c.bins else len(c.domain or ()) for c in declared]


def parse_seeds(text: str) -> list[int]:
    """Seeds from ``FIRST-LAST`` (a range, both included) or a comma-separated list."""
    if "-" in text:
        first, last = (int(x) for x in text.split("-"))
        return list(range(first, last + 1))
    return [int(s) for s in text.split(",") if s]


def open_session(table: Table, seed: int) -> Session:
    """A session with room for every run: a zCDP ledger in memory, noise seeded by ``seed``."""
    return Session(
        table,
        Budget(1e6, 1e-3),
        accountant="zcdp",
        ledger=":memory:",
        source=InsecureSeededSource(seed),
    )


def encode(frame: pd.DataFrame, table: Table, names: list[str]) -> np.ndarray:
    """Integer codes of the declared values (bins: their index; clamped like the curator)."""
    out = []
    for name in names:
        column = table.column(name)
        values = frame[name]
        if column.bins is not None:
            inner = np.array(column.bins[1:-1], dtype=np.float64)
            out.append(np.searchsorted(inner, values.to_numpy(dtype=np.float64), side="right"))
        else:
            assert column.domain is not None
            lookup = {v: i for i, v in enumerate(column.domain)}
            out.append(np.array([lookup[v] for v in values], dtype=np.int64))
    return np.stack(out, axis=1).astype(np.int64)


def errors(true: np.ndarray, synth: np.ndarray, sizes: list[int], target: int) -> dict[str, float]:
    def marginal(x: np.ndarray, clique: tuple[int, ...]) -> np.ndarray:
        shape = tuple(sizes[a] for a in clique)
        flat = np.ravel_multi_index(tuple(x[:, a] for a in clique), shape)
        return np.bincount(flat, minlength=math.prod(shape)) / max(1, x.shape[0])

    d = len(sizes)
    three = [
        float(np.abs(marginal(true, c) - marginal(synth, c)).sum())
        for c in itertools.combinations(range(d), 3)
    ]
    pairs = [tuple(sorted((target, b))) for b in range(d) if b != target]
    two = [float(np.abs(marginal(true, c) - marginal(synth, c)).sum()) for c in pairs]
    return {"l1_3way": float(np.mean(three)), "l1_target": float(np.mean(two))}


def scored_aim(dataset: str, epsilon: float, seed: int) -> tuple[float, float, float, int]:
    """One AIM release on ``dataset``: its 3-way and target errors, its wall seconds and rounds."""
    table, target = DATASETS[dataset]()
    names, sizes = attributes_of(table)
    with open_session(table, seed) as session:
        start = time.perf_counter()
        released = synthesize(session, epsilon=epsilon, delta=DELTA, method="aim")
        seconds = time.perf_counter() - start
    true = encode(table.source, table, names)
    got = errors(true, encode(released.table, table, names), sizes, names.index(target))
    return got["l1_3way"], got["l1_target"], seconds, released.rounds


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


LAST_CPU: list[float] = [math.nan]
"""CPU seconds of the last peer or baseline subprocess (its whole run, start-up included)."""


def peer(venv: str, args: list[str], timeout: float) -> tuple[float | None, str]:
    python = PEERS / venv / "bin" / "python"
    LAST_CPU[0] = math.nan
    if not python.exists():
        return None, f"not installed ({python})"
    before = _children_cpu()
    try:
        done = subprocess.run(
            [str(python), *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return None, f"timeout after {timeout:.0f} s"
    LAST_CPU[0] = _children_cpu() - before
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return None, "failed: " + lines[-1][:200]
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"]), ""


_BASELINE_RUNNER = """
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
from bench_synth import DATASETS, DELTA, attributes_of, encode, open_session
from baseline_synth._synthesize import synthesize
dataset, method, eps, out = sys.argv[3], sys.argv[4], float(sys.argv[5]), sys.argv[6]
seed = int(sys.argv[7])
table, _ = DATASETS[dataset]()
names, _ = attributes_of(table)
with open_session(table, seed) as session:
    start = time.perf_counter()
    released = synthesize(session, epsilon=eps, delta=DELTA, method=method)
    seconds = time.perf_counter() - start
np.save(out, encode(released.table, table, names))
print(json.dumps({"seconds": seconds, "rounds": released.rounds}))
"""


def baseline(
    revision: str, work: Path, dataset: str, method: str, *, eps: float, seed: int, timeout: float
) -> tuple[np.ndarray | None, float | None, str]:
    """Run ``method`` with the ``dpcurator.synth`` package of a git revision (same seed)."""
    package = work / "baseline" / "baseline_synth"
    if not package.exists():
        package.mkdir(parents=True)
        listing = subprocess.run(
            ["git", "ls-tree", "--name-only", revision, "src/dpcurator/synth/"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for path in listing:
            if path.endswith(".py"):
                text = subprocess.run(
                    ["git", "show", f"{revision}:{path}"],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                text = text.replace("dpcurator.synth.", "baseline_synth.")
                (package / Path(path).name).write_text(text)
        (work / "baseline" / "runner.py").write_text(_BASELINE_RUNNER)
    out = work / f"baseline-{method}-{eps}-{seed}.npy"
    LAST_CPU[0] = math.nan
    before = _children_cpu()
    try:
        done = subprocess.run(
            [sys.executable, str(work / "baseline" / "runner.py"), str(work / "baseline"),
             str(ROOT / "benchmarks"), dataset, method, str(eps), str(out), str(seed)],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, None, f"timeout after {timeout:.0f} s"
    LAST_CPU[0] = _children_cpu() - before
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return None, None, "failed: " + lines[-1][:200]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return np.load(out), float(report["seconds"]), f"{report['rounds']} rounds"


def per_row_epsilon(epsilon: float, rows_per_unit: int) -> float:
    """The per-row epsilon whose group guarantee for ``rows_per_unit`` rows is ours per unit.

    Under zCDP, rho per row gives ``k**2 rho`` for a group of k rows (Bun and Steinke 2016,
    Proposition 27): a peer that protects a row must run at ``rho / k**2``, converted back to
    (epsilon, DELTA) as ours is (Canonne, Kamath and Steinke 2020).
    """
    rho = zcdp_rho_for(epsilon, DELTA) / rows_per_unit**2
    return zcdp_to_epsilon(rho, DELTA)


def bounded_rows(units: pd.Series, rows_per_unit: int, seed: int) -> np.ndarray:
    """Indices of at most ``rows_per_unit`` rows of each unit, chosen at random (sorted).

    A peer that protects a row gets the same guarantee per unit as ours only on a table whose
    units have at most ``rows_per_unit`` rows (group privacy), so it is given the table bounded
    like ours: a careful user of it would do this by hand.
    """
    order = np.random.default_rng(seed).permutation(len(units))
    rank = pd.Series(units.to_numpy()[order]).groupby(units.to_numpy()[order]).cumcount()
    return np.sort(order[rank.to_numpy() < rows_per_unit])


def run(
    dataset: str,
    *,
    epsilons: list[float],
    methods: list[str],
    peers: set[str],
    timeout: float,
    skip: frozenset[str] = frozenset(),
    time_limit: float | None = None,
    revision: str | None = None,
    seeds: list[int] | None = None,
    equal_guarantee: bool = False,
) -> list[dict[str, Any]]:
    table, target_name = DATASETS[dataset]()
    names, sizes = attributes_of(table)
    frame = table.source
    true = encode(frame, table, names)
    target = names.index(target_name)
    results: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="bench_synth_"))
    codes_path = work / "codes.csv"
    pd.DataFrame(true, columns=names).to_csv(codes_path, index=False)

    seed = 0

    def record(
        method: str,
        eps: float,
        synth: np.ndarray | None,
        seconds: float | None,
        note: str = "",
        *,
        cpu: float | None = None,
    ) -> None:
        row: dict[str, Any] = {
            "dataset": dataset,
            "epsilon": eps,
            "seed": seed,
            "method": method,
            "seconds": seconds,
            "cpu_seconds": cpu,
            "note": note,
        }
        if synth is not None:
            row.update(errors(true, synth, sizes, target))
        results.append(row)
        print(json.dumps(row), flush=True)

    for eps, seed in [(e, s) for e in epsilons for s in seeds or [int(e * 1000)]]:
        for method in methods:
            if revision is not None:
                old, seconds_old, note = baseline(
                    revision, work, dataset, method, eps=eps, seed=seed, timeout=timeout
                )
                record(
                    f"dpcurator {method} ({revision})", eps, old, seconds_old, note, cpu=LAST_CPU[0]
                )
            with open_session(table, seed) as session:
                start, start_cpu = time.perf_counter(), time.process_time()
                released = synthesize(
                    session,
                    epsilon=eps,
                    delta=DELTA,
                    method=method,  # type: ignore[arg-type]
                    time_limit=time_limit,
                )
                seconds = time.perf_counter() - start
                cpu = time.process_time() - start_cpu
            synth = encode(released.table, table, names)
            stopped = ", stopped by the time limit" if released.stopped_by_time_limit else ""
            note = f"{released.rounds} rounds{stopped}"
            record(f"dpcurator {method}", eps, synth, seconds, note, cpu=cpu)
            if method == "independent" or "mbi" not in peers:
                continue
            # The inference alone on the same noisy marginals: dpcurator's, then mbi's.
            index = {n: i for i, n in enumerate(names)}
            cliques = [tuple(index[c] for c in m.columns) for m in released.measurements]
            marginals = [
                Marginal(c, m.noisy, m.sigma)
                for c, m in zip(cliques, released.measurements, strict=True)
            ]
            start, start_cpu = time.perf_counter(), time.process_time()
            model = fit_model(sizes, marginals, iterations=1000)
            ours = model.sample(len(released.table), InsecureSeededSource(5))
            record(
                f"dpcurator inference ({method} input)",
                eps,
                ours,
                time.perf_counter() - start,
                cpu=time.process_time() - start_cpu,
            )
            stored = work / f"{method}-{eps}-{seed}.npz"
            holder = np.empty(len(cliques), dtype=object)
            holder[:] = cliques
            values = np.empty(len(cliques), dtype=object)
            values[:] = [m.noisy for m in released.measurements]
            np.savez(
                stored,
                sizes=np.array(sizes),
                cliques=holder,
                values=values,
                sigmas=np.array([m.sigma for m in released.measurements]),
                rows=len(released.table),
            )
            out = work / f"mbi-{method}-{eps}-{seed}.npy"
            seconds_mbi, note = peer(
                "synth-mbi",
                [str(ROOT / "benchmarks/peers/synth_mbi.py"), str(stored), str(out), "1000"],
                timeout,
            )
            record(
                f"mbi 2.0 inference ({method} input)",
                eps,
                np.load(out) if seconds_mbi is not None else None,
                seconds_mbi,
                note,
                cpu=LAST_CPU[0],
            )
        if "smartnoise" in peers:
            peer_eps, peer_codes, label = eps, codes_path, ""
            if equal_guarantee and table.max_rows_per_unit > 1:
                peer_eps = per_row_epsilon(eps, table.max_rows_per_unit)
                peer_codes = work / f"bounded-{seed}.csv"
                kept = true[bounded_rows(frame[table.unit_column], table.max_rows_per_unit, seed)]
                pd.DataFrame(kept, columns=names).to_csv(peer_codes, index=False)
                label = f" (households bounded, per-row epsilon {peer_eps:.4g})"
            for method in [m for m in methods if m != "independent" and m not in skip]:
                out = work / f"sn-{method}-{eps}-{seed}.npy"
                seconds, note = peer(
                    "synth-smartnoise",
                    [
                        str(ROOT / "benchmarks/peers/synth_smartnoise.py"),
                        str(peer_codes),
                        str(out),
                        method,
                        repr(peer_eps),
                        str(DELTA),
                        str(seed),
                    ],
                    timeout,
                )
                record(
                    f"smartnoise {method}{label}",
                    eps,
                    np.load(out) if seconds is not None else None,
                    seconds,
                    note,
                    cpu=LAST_CPU[0],
                )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=list(DATASETS), default="adult")
    parser.add_argument("--epsilons", default="0.3,1,3,10")
    parser.add_argument("--methods", default="aim,mst,independent")
    parser.add_argument("--peers", default="smartnoise,mbi")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--time-limit", type=float, default=None, help="dpcurator's fits")
    parser.add_argument("--skip-peer-methods", default="", help="e.g. aim: SmartNoise MST only")
    parser.add_argument("--baseline", default=None, help="a git revision of dpcurator.synth")
    parser.add_argument("--seeds", default="", help="FIRST-LAST or a list (default: 1000 epsilon)")
    parser.add_argument(
        "--equal-guarantee",
        action="store_true",
        help="SmartNoise (per row) on the table bounded to our rows per unit, at the per-row "
        "epsilon whose group guarantee protects our unit",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/synth.json")
    args = parser.parse_args()
    epsilons = [float(e) for e in args.epsilons.split(",")]
    peers = {p for p in args.peers.split(",") if p}
    methods = [m for m in args.methods.split(",") if m]
    skip = frozenset(m for m in args.skip_peer_methods.split(",") if m)
    results = run(
        args.dataset,
        epsilons=epsilons,
        methods=methods,
        peers=peers,
        timeout=args.timeout,
        skip=skip,
        time_limit=args.time_limit,
        revision=args.baseline,
        seeds=parse_seeds(args.seeds) or None,
        equal_guarantee=args.equal_guarantee,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
