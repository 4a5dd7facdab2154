"""The step size's growth on large models: AIM with the shipped ``_GROW_LARGE`` against another.

For each seed, AIM runs twice in this one process, once with the shipped growth of the step size
on models with a clique of at least ``LEAST`` cells (``_GROW_LARGE``) and once with
``--against`` (1.5, the growth before session 20, by default), the order alternating from seed
to seed. Printed per seed: the synthetic table's 3-way and target-workload errors (as
``bench_synth.py`` scores them), the wall seconds and AIM's rounds; then the paired differences
(shipped - against, mean ± standard error) and the ratio of the summed seconds.

Usage::

    .venv/bin/python benchmarks/bench_synth_growth.py --dataset adult --epsilon 10 --seeds 1-8
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dpcurator.synth._model as model_module
from bench_synth import DATASETS, parse_seeds, scored_aim

SHIPPED = model_module._GROW_LARGE


def run(dataset: str, epsilon: float, seed: int, grow: float) -> tuple[float, float, float, int]:
    """One AIM release with ``_GROW_LARGE = grow``: its 3-way and target errors, seconds, rounds."""
    model_module._GROW_LARGE = grow  # type: ignore[misc]
    try:
        return scored_aim(dataset, epsilon, seed)
    finally:
        model_module._GROW_LARGE = SHIPPED  # type: ignore[misc]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=list(DATASETS), default="adult")
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--seeds", default="1-8", help="a range FIRST-LAST or a list")
    parser.add_argument("--against", type=float, default=1.5)
    args = parser.parse_args()
    shipped, against = [], []
    for i, seed in enumerate(parse_seeds(args.seeds)):
        arms = {"shipped": SHIPPED, "against": args.against}
        order = list(arms) if i % 2 == 0 else list(reversed(arms))
        got = {arm: run(args.dataset, args.epsilon, seed, arms[arm]) for arm in order}
        shipped.append(got["shipped"])
        against.append(got["against"])
        print(f"seed {seed}: shipped {got['shipped']}, against {got['against']}", flush=True)
    a, b = np.array(shipped), np.array(against)
    difference = a[:, :2] - b[:, :2]
    se = difference.std(axis=0, ddof=1) / np.sqrt(len(a)) if len(a) > 1 else np.zeros(2)
    print(
        f"{args.dataset} epsilon {args.epsilon:g}, {len(a)} seeds, growth {SHIPPED} against "
        f"{args.against}: 3-way {b[:, 0].mean():.5f} -> {a[:, 0].mean():.5f} "
        f"({difference[:, 0].mean():+.5f} ± {se[0]:.5f}), target {b[:, 1].mean():.5f} -> "
        f"{a[:, 1].mean():.5f} ({difference[:, 1].mean():+.5f} ± {se[1]:.5f}), seconds "
        f"{b[:, 2].sum():.1f} -> {a[:, 2].sum():.1f} ({a[:, 2].sum() / b[:, 2].sum():.3f}x), "
        f"rounds {b[:, 3].mean():.1f} -> {a[:, 3].mean():.1f}"
    )


if __name__ == "__main__":
    main()
