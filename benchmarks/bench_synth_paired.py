"""One of the fit's settings, paired by seed: AIM with the shipped value against another.

The settings: ``_COMPACT_POTENTIALS`` (the large potentials in float32 in AIM's fits between
rounds, session 22; before it, float64: ``--against 0``), ``_GROW_LARGE`` (the step size's growth
on models with a clique of at least ``LEAST`` cells, session 20; before it, 1.5) and
``_FINAL_DISCREPANCY`` (the multiple of the discrepancy level where AIM's final fit turns from
accelerated to plain steps, session 21; before it, 1.0). For each seed, AIM runs twice in this one
process, once with the shipped value and once with ``--against``, the order alternating from seed
to seed. Printed per seed: the synthetic table's 3-way and target-workload errors (as
``bench_synth.py`` scores them), the wall seconds and AIM's rounds; then the paired differences
(shipped - against, mean ± standard error) and the ratio of the summed seconds.

Usage::

    .venv/bin/python benchmarks/bench_synth_paired.py --setting _GROW_LARGE --against 1.5 \
        --dataset adult --epsilon 10 --seeds 1-8
    .venv/bin/python benchmarks/bench_synth_paired.py --setting _FINAL_DISCREPANCY --against 1.0 \
        --dataset cps --epsilon 0.3 --seeds 1-32
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dpcurator.synth._model as model_module
import dpcurator.synth._synthesize as aim_module
from bench_synth import DATASETS, parse_seeds, scored_aim

SETTINGS: dict[str, ModuleType] = {
    "_GROW_LARGE": model_module,
    "_FINAL_DISCREPANCY": aim_module,
    "_COMPACT_POTENTIALS": model_module,
}
"""Each setting and the module that holds it."""


def run(
    setting: str, value: float, dataset: str, epsilon: float, seed: int
) -> tuple[float, float, float, int]:
    """One AIM release with ``setting = value``: its 3-way and target errors, seconds, rounds."""
    module = SETTINGS[setting]
    shipped = getattr(module, setting)
    setattr(module, setting, value)
    try:
        return scored_aim(dataset, epsilon, seed)
    finally:
        setattr(module, setting, shipped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=list(SETTINGS), required=True)
    parser.add_argument("--against", type=float, required=True)
    parser.add_argument("--dataset", choices=list(DATASETS), default="adult")
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--seeds", default="1-8", help="a range FIRST-LAST or a list")
    args = parser.parse_args()
    value = getattr(SETTINGS[args.setting], args.setting)
    shipped, against = [], []
    for i, seed in enumerate(parse_seeds(args.seeds)):
        arms = {"shipped": value, "against": args.against}
        order = list(arms) if i % 2 == 0 else list(reversed(arms))
        got = {arm: run(args.setting, arms[arm], args.dataset, args.epsilon, seed) for arm in order}
        shipped.append(got["shipped"])
        against.append(got["against"])
        print(f"seed {seed}: shipped {got['shipped']}, against {got['against']}", flush=True)
    a, b = np.array(shipped), np.array(against)
    difference = a[:, :2] - b[:, :2]
    se = difference.std(axis=0, ddof=1) / np.sqrt(len(a)) if len(a) > 1 else np.zeros(2)
    print(
        f"{args.dataset} epsilon {args.epsilon:g}, {len(a)} seeds, {args.setting} {value} against "
        f"{args.against}: 3-way {b[:, 0].mean():.5f} -> {a[:, 0].mean():.5f} "
        f"({difference[:, 0].mean():+.5f} ± {se[0]:.5f}), target {b[:, 1].mean():.5f} -> "
        f"{a[:, 1].mean():.5f} ({difference[:, 1].mean():+.5f} ± {se[1]:.5f}), seconds "
        f"{b[:, 2].sum():.1f} -> {a[:, 2].sum():.1f} ({a[:, 2].sum() / b[:, 2].sum():.3f}x), "
        f"rounds {b[:, 3].mean():.1f} -> {a[:, 3].mean():.1f}"
    )


if __name__ == "__main__":
    main()
