"""AIM's fits between rounds: warm or fresh, how many steps; errors and rounds over seeds.

Each variant replaces the fit that AIM runs after each round's measurement (the one-way fit
before the rounds and the final fit are left as shipped) and runs AIM at one epsilon over the
seeds, with the errors of ``bench_synth.py`` (3-way and target workload, mean ± standard
error), the mean number of rounds and the mean wall seconds. The shipped fits between rounds
are ``level``.

- ``warm50``: 50 plain steps from the previous round's model (dpcurator before session 17);
- ``fresh50``, ``fresh100``: from uniform potentials, accelerated to the discrepancy level,
  then plain steps, 50 or 100 in all (session 17 shipped ``fresh100``);
- ``level``, ``level10``, ``level25``: from uniform potentials, accelerated to the discrepancy
  level (at most 100 steps), then 0 (as shipped), 10 or 25 plain steps;
- ``warm_accel50``: from the previous round's model, accelerated;
- ``factorisation100``: from the factorisation of the noisy marginals, accelerated;
- ``independent_level``: from the product of the noisy one-way marginals, accelerated to the
  discrepancy level;
- ``level_float64``: ``level`` with the large cliques' marginals in float64 (as before session
  19; the shipped round fits use float32, ``_COMPACT``).

Usage::

    .venv/bin/python benchmarks/bench_synth_round_fits.py --dataset adult --epsilon 3 \
        --seeds 1-6 --variants fresh100,level,level10,level25
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dpcurator.synth._model as model_module
import dpcurator.synth._synthesize as aim_module
from bench_synth import DATASETS, parse_seeds, scored_aim

SHIPPED_FIT = aim_module._fit
SHIPPED_ROUND_FIT = aim_module._round_fit
SHIPPED_PRECISION = model_module._COMPACT
VARIANTS: dict[str, dict[str, Any]] = {
    "warm50": {"steps": 50, "from": "previous", "discrepancy": None, "start": "factorisation"},
    "warm_accel50": {"steps": 50, "from": "previous", "discrepancy": 1.0, "start": "factorisation"},
    "fresh50": {"steps": 50, "from": None, "discrepancy": 1.0, "start": "uniform"},
    "fresh100": {"steps": 100, "from": None, "discrepancy": 1.0, "start": "uniform"},
    "factorisation100": {"steps": 100, "from": None, "discrepancy": 1.0, "start": "factorisation"},
    "level": {"steps": 100, "from": None, "discrepancy": 1.0, "start": "uniform", "plain": 0},
    "level10": {"steps": 100, "from": None, "discrepancy": 1.0, "start": "uniform", "plain": 10},
    "level25": {"steps": 100, "from": None, "discrepancy": 1.0, "start": "uniform", "plain": 25},
    "level_float64": {
        "steps": 100,
        "from": None,
        "discrepancy": 1.0,
        "start": "uniform",
        "plain": 0,
        "precision": np.float64,
    },
    "independent_level": {
        "steps": 100,
        "from": "oneways",
        "discrepancy": 1.0,
        "start": "uniform",
        "plain": 0,
    },
}
"""``from``: the model a round's fit is warm-started from (none, the previous round's, or the
product of the noisy one-way marginals); ``start`` applies without one; ``precision``: the
large cliques' marginals in the round fits (default: as shipped)."""


def patch(variant: dict[str, Any]) -> None:
    """Replace AIM's fits between rounds by ``variant`` (the last model kept for warm starts)."""
    last: list[Any] = [None]

    def fit(context: Any, measurements: Any, iterations: int, **options: Any) -> Any:
        last[0] = SHIPPED_FIT(context, measurements, iterations, **options)
        return last[0]

    def round_fit(context: Any, measurements: Any) -> Any:
        warm = None
        if variant["from"] == "previous":
            warm = last[0]
        elif variant["from"] == "oneways":  # their factorisation: the independent model
            oneways = [m for m in measurements if len(m.clique) == 1]
            warm = aim_module.fit_model(context.sizes, oneways, iterations=0)
        last[0] = aim_module.fit_model(
            context.sizes,
            measurements,
            iterations=variant["steps"],
            warm_start=warm,
            start=variant["start"],
            discrepancy=variant["discrepancy"],
            plain_steps=variant.get("plain"),
        )
        return last[0]

    aim_module._fit = fit  # type: ignore[assignment]
    aim_module._round_fit = round_fit  # type: ignore[assignment]
    model_module._COMPACT = variant.get("precision", SHIPPED_PRECISION)  # type: ignore[assignment]


def unpatch() -> None:
    """Restore AIM's shipped fits."""
    aim_module._fit = SHIPPED_FIT  # type: ignore[assignment]
    aim_module._round_fit = SHIPPED_ROUND_FIT  # type: ignore[assignment]
    model_module._COMPACT = SHIPPED_PRECISION


def run(dataset: str, epsilon: float, seeds: list[int], name: str) -> str:
    rows = []
    for seed in seeds:
        patch(VARIANTS[name])
        try:
            three, target, seconds, rounds = scored_aim(dataset, epsilon, seed)
        finally:
            unpatch()
        rows.append((three, target, rounds, seconds))
    a = np.array(rows)
    se = a.std(axis=0) / np.sqrt(len(a))
    return (
        f"{dataset} epsilon {epsilon:g} {name:16s} seeds {len(a)}: 3-way {a[:, 0].mean():.5f} "
        f"± {se[0]:.5f}, target {a[:, 1].mean():.5f} ± {se[1]:.5f}, "
        f"rounds {a[:, 2].mean():.1f}, {a[:, 3].mean():.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=list(DATASETS), default="cps-taxunits")
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--seeds", default="1-8", help="a range FIRST-LAST or a list")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    for name in args.variants.split(","):
        print(run(args.dataset, args.epsilon, parse_seeds(args.seeds), name), flush=True)


if __name__ == "__main__":
    main()
