"""Where AIM's final fit stops: the error of the fitted model against mbi's, over many seeds.

AIM's final fit (:func:`dpcurator.synth.synthesize`) starts from uniform, takes accelerated
steps to the discrepancy level and then plain mirror-descent steps until 50 of them lower the
loss by less than 1 % (``tolerance=0.01``). This benchmark measures what that rule buys against
fitting further. For each seed it runs dpcurator's AIM once, then fits the very marginals AIM
measured again with each stopping rule below and with mbi 2.0 (``MirrorDescent``, 1,000 steps, its
own environment: ``bash benchmarks/peers/setup_peers.sh synth-mbi``), and scores each fitted
model's marginals (no sampling, so no sampling noise) against the truth: the average L1 error over
all 3-way marginals and over the target workload, as in ``bench_synth.py``. It reports the paired
difference of each rule to mbi (mean over seeds, with its standard error). The rows "... table"
score a synthetic table of the data's size drawn from AIM's model (``Model.sample``) and from
mbi's (``synthetic_data``): their excess over the model's row is what sampling adds.

Usage::

    .venv/bin/python benchmarks/bench_synth_stopping.py --dataset cps --epsilon 0.3 --seeds 1-40
    .venv/bin/python benchmarks/bench_synth_stopping.py --show FILE.jsonl   # the table again
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench_synth import (
    DATASETS,
    DELTA,
    PEERS,
    ROOT,
    attributes_of,
    encode,
    open_session,
    parse_seeds,
)
from dpcurator.noise import InsecureSeededSource
from dpcurator.synth import Marginal, Model, fit_model, synthesize

RULES: dict[str, dict[str, Any]] = {
    "tolerance 1 % (AIM's)": {"tolerance": 0.01},
    "tolerance 0.5 %": {"tolerance": 0.005},
    "tolerance 0.2 %": {"tolerance": 0.002},
    "1,000 steps": {"tolerance": 0.0},
}
"""The stopping rules compared; each fit starts from uniform with ``discrepancy=1``, as AIM's."""
AIMS = "tolerance 1 % (AIM's)"

Scored = tuple[float, float]


def _scorer(
    true: np.ndarray, sizes: list[int], target: int
) -> tuple[list[tuple[int, ...]], Callable[[Callable[[tuple[int, ...]], np.ndarray]], Scored]]:
    d = len(sizes)
    three = list(itertools.combinations(range(d), 3))
    pairs = [tuple(sorted((target, b))) for b in range(d) if b != target]

    def truth(clique: tuple[int, ...]) -> np.ndarray:
        shape = tuple(sizes[a] for a in clique)
        flat = np.ravel_multi_index(tuple(true[:, a] for a in clique), shape)
        return np.bincount(flat, minlength=math.prod(shape)) / true.shape[0]

    exact = {c: truth(c) for c in three + pairs}

    def score(marginal: Callable[[tuple[int, ...]], np.ndarray]) -> Scored:
        return (
            float(np.mean([np.abs(exact[c] - marginal(c)).sum() for c in three])),
            float(np.mean([np.abs(exact[c] - marginal(c)).sum() for c in pairs])),
        )

    return three + pairs, score


def _normalised(model: Model) -> Callable[[tuple[int, ...]], np.ndarray]:
    def marginal(clique: tuple[int, ...]) -> np.ndarray:
        counts = model.marginal(clique)
        return counts / counts.sum()

    return marginal


def _stored(kept: Any, kind: str) -> Callable[[tuple[int, ...]], np.ndarray]:
    def marginal(clique: tuple[int, ...]) -> np.ndarray:
        return np.asarray(kept[f"{kind}:" + "_".join(map(str, clique))])

    return marginal


def _of_table(rows: np.ndarray, sizes: list[int]) -> Callable[[tuple[int, ...]], np.ndarray]:
    def marginal(clique: tuple[int, ...]) -> np.ndarray:
        shape = tuple(sizes[a] for a in clique)
        flat = np.ravel_multi_index(tuple(rows[:, a] for a in clique), shape)
        return np.bincount(flat, minlength=math.prod(shape)) / rows.shape[0]

    return marginal


def _objects(items: list[Any]) -> np.ndarray:
    holder = np.empty(len(items), dtype=object)
    holder[:] = items
    return holder


def run(dataset: str, epsilon: float, seeds: list[int], out: Path) -> None:
    """Append one JSON line per seed to ``out``."""
    table, target_name = DATASETS[dataset]()
    names, sizes = attributes_of(table)
    true = encode(table.source, table, names)
    evaluated, score = _scorer(true, sizes, names.index(target_name))
    work = Path(tempfile.mkdtemp(prefix="bench_synth_stopping_"))
    index = {n: i for i, n in enumerate(names)}
    for seed in seeds:
        with open_session(table, seed) as session:
            released = synthesize(session, epsilon=epsilon, delta=DELTA, method="aim")
        cliques = [tuple(index[c] for c in m.columns) for m in released.measurements]
        marginals = [
            Marginal(c, m.noisy, m.sigma)
            for c, m in zip(cliques, released.measurements, strict=True)
        ]
        row: dict[str, Any] = {"dataset": dataset, "epsilon": epsilon, "seed": seed}
        for name, rule in RULES.items():
            start = time.process_time()
            model = fit_model(sizes, marginals, start="uniform", discrepancy=1.0, **rule)
            row[name] = [*score(_normalised(model)), time.process_time() - start]
            if name == AIMS:
                start = time.process_time()
                drawn = model.sample(len(true), InsecureSeededSource(seed))
                seconds = time.process_time() - start
                row[f"{AIMS} table"] = [*score(_of_table(drawn, sizes)), seconds]
        stored, fitted = work / f"{seed}.npz", work / f"mbi-{seed}.npz"
        np.savez(
            stored,
            sizes=np.array(sizes),
            cliques=_objects(cliques),
            values=_objects([m.noisy for m in released.measurements]),
            sigmas=np.array([m.sigma for m in released.measurements]),
            eval=_objects(evaluated),
            rows=len(true),
        )
        script = ROOT / "benchmarks/peers/synth_mbi_marginals.py"
        python = PEERS / "synth-mbi" / "bin" / "python"
        done = subprocess.run(
            [str(python), str(script), str(stored), str(fitted), "1000"],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
        kept = np.load(fitted)
        row["mbi 2.0"] = [*score(_stored(kept, "model")), seconds]
        row["mbi 2.0 table"] = [*score(_stored(kept, "table")), math.nan]
        with out.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def show(path: Path) -> None:
    """Print each rule's paired difference to mbi (mean ± standard error over the seeds)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    print(f"{path}: {len(rows)} seeds")
    print("| rule | 3-way error | − mbi's | target error | − mbi's | fit s (CPU; mbi: wall) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for rule in [*RULES, f"{AIMS} table", "mbi 2.0", "mbi 2.0 table"]:
        cells = []
        for k in (0, 1):
            values = np.array([r[rule][k] for r in rows])
            diff = values - np.array([r["mbi 2.0"][k] for r in rows])
            se = diff.std(ddof=1) / math.sqrt(len(diff))
            below = int((diff < 0).sum())
            cells += [f"{values.mean():.5f}", f"{diff.mean():+.6f} ± {se:.6f} ({below} below)"]
        seconds = np.mean([r[rule][2] for r in rows])
        print(f"| {rule} | {' | '.join(cells)} | {seconds:.2f} |")
    added = [
        np.mean([r[f"{name} table"][k] - r[name][k] for r in rows])
        for name in (AIMS, "mbi 2.0")
        for k in (0, 1)
    ]
    print(
        f"sampling adds (3-way, target): dpcurator {added[0]:+.5f}, {added[1]:+.5f}; "
        f"mbi {added[2]:+.5f}, {added[3]:+.5f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=list(DATASETS), default="cps")
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--seeds", default="1-40", help="a range FIRST-LAST or a list")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--show", type=Path, default=None, help="only print a results file")
    args = parser.parse_args()
    if args.show is not None:
        show(args.show)
        return
    out = args.out or ROOT / f"benchmarks/results/synth_stopping_{args.dataset}.jsonl"
    run(args.dataset, args.epsilon, parse_seeds(args.seeds), out)
    show(out)


if __name__ == "__main__":
    sys.exit(main())
