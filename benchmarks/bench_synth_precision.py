"""The fit's working precision: AIM's round fits on float32 or float64 marginals, same inputs.

Runs AIM once on a dataset and epsilon (one seed) and keeps the measurements of every fit
between rounds (accelerated steps only: the fits that work in ``_COMPACT``). Then refits those
on models of at least ``--cells`` cells, alternating the precision of the large cliques'
marginals (float64, then float32, ``--repeats`` times each, in this one process), and prints
the mean seconds and the steps. The steps show whether the path changed; the seconds, what
float32 saves.

Usage::

    .venv/bin/python benchmarks/bench_synth_precision.py --dataset adult --epsilon 10
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dpcurator.synth._model as model_module
import dpcurator.synth._synthesize as aim_module
from bench_synth import DATASETS, DELTA, open_session
from dpcurator.synth import synthesize
from dpcurator.synth._model import junction_tree_size

SHIPPED_ROUND_FIT = aim_module._round_fit

Inputs = list[tuple[Any, list[Any]]]
"""Each round fit's AIM context and measurements."""


def capture(dataset: str, epsilon: float, seed: int) -> Inputs:
    """Run AIM once; return the inputs of its fits between rounds."""
    rounds: Inputs = []

    def round_fit(context: Any, measurements: Any) -> Any:
        rounds.append((context, list(measurements)))
        return SHIPPED_ROUND_FIT(context, measurements)

    aim_module._round_fit = round_fit  # type: ignore[assignment]
    try:
        table, _ = DATASETS[dataset]()
        with open_session(table, seed) as session:
            synthesize(session, epsilon=epsilon, delta=DELTA, method="aim")
    finally:
        aim_module._round_fit = SHIPPED_ROUND_FIT  # type: ignore[assignment]
    return rounds


def round_fits(inputs: Inputs, cells: int) -> tuple[float, int]:
    """Refit AIM's round fits on models of ``cells`` or more; return seconds and steps in all."""
    start, steps = time.perf_counter(), 0
    for context, measurements in inputs:
        if junction_tree_size(context.sizes, [m.clique for m in measurements]) >= cells:
            steps += SHIPPED_ROUND_FIT(context, measurements).iterations
    return time.perf_counter() - start, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=list(DATASETS), default="adult")
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    rounds = capture(args.dataset, args.epsilon, args.seed)
    shipped = model_module._COMPACT
    results: dict[str, list[tuple[float, int]]] = {}
    try:
        for _ in range(args.repeats):
            for dtype in (np.float64, np.float32):
                model_module._COMPACT = dtype  # type: ignore[assignment]
                results.setdefault(np.dtype(dtype).name, []).append(round_fits(rounds, args.cells))
    finally:
        model_module._COMPACT = shipped
    for name, runs in results.items():
        print(
            f"{args.dataset} epsilon {args.epsilon:g} seed {args.seed}, {name}: round fits on "
            f"at least {args.cells:,} cells {np.mean([r[0] for r in runs]):.2f} s, "
            f"{runs[0][1]} steps"
        )


if __name__ == "__main__":
    main()
