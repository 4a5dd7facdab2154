"""Where AIM's fits between rounds spend their time: captured once, refitted and split by pass.

Runs dpcurator's AIM once at a cell and keeps the input of every fit between rounds (the sizes,
the noisy marginals, the step cap), then refits them in this process, as AIM does, timing each
of the fit's passes: the trial step (``_stepped``), the calibration (``JunctionTree.calibrate``,
also inside the extrapolation on models of several cliques), the momentum's extrapolation, the
loss (``_Objective.__call__``) and the gradient. Printed: AIM's wall seconds and the fits'
share of them, then per pass its seconds, calls, milliseconds a call and a step, over all fits
and over the fits whose model is one clique of at least ``--cells`` cells (Adult at epsilon 10:
the whole 1.8 M-cell domain). ``--save`` keeps the captured inputs (a pickle) for other
experiments; ``--load`` refits saved ones without running AIM.

Usage::

    .venv/bin/python benchmarks/bench_synth_fit_profile.py --dataset adult --epsilon 10 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import math
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dpcurator.synth._model as model_module
import dpcurator.synth._synthesize as aim_module
from bench_synth import DATASETS, scored_aim

Fit = tuple[tuple[int, ...], list[Any], int]
"""A fit's input: the attributes' sizes, the noisy marginals and the step cap."""

PASSES = {
    "step": (model_module, "_stepped"),
    "calibrate": (model_module.JunctionTree, "calibrate"),
    "extrapolation": (model_module, "_calibrated_extrapolation"),
    "loss": (model_module._Objective, "__call__"),
    "gradient": (model_module._Objective, "gradient"),
}
"""Each timed pass: where it is looked up, and its name there."""


def captured(dataset: str, epsilon: float, seed: int) -> tuple[list[Fit], float]:
    """Run AIM once; return its fits' inputs and its wall seconds."""
    fits: list[Fit] = []
    shipped = aim_module._round_fit

    def capture(context: Any, measurements: Any) -> Any:
        fits.append((tuple(context.sizes), list(measurements), context.round_iterations))
        return shipped(context, measurements)

    aim_module._round_fit = capture
    try:
        seconds = scored_aim(dataset, epsilon, seed)[2]
    finally:
        aim_module._round_fit = shipped
    return fits, seconds


def timed(seconds: dict[str, float], calls: collections.Counter[str]) -> Callable[[], None]:
    """Wrap each pass to add its time and calls; return the function that unwraps them."""
    originals = {name: getattr(owner, attr) for name, (owner, attr) in PASSES.items()}

    def wrapped(name: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - start
                calls[name] += 1

        return run

    for name, (owner, attr) in PASSES.items():
        setattr(owner, attr, wrapped(name, originals[name]))

    def restore() -> None:
        for name, (owner, attr) in PASSES.items():
            setattr(owner, attr, originals[name])

    return restore


def profile(fits: list[Fit], label: str) -> str:
    """Refit ``fits`` as AIM does, timing each pass; return the report's lines."""
    seconds: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    restore = timed(seconds, calls)
    steps = 0
    start = time.perf_counter()
    try:
        for sizes, measurements, iterations in fits:
            model = model_module.fit_model(
                sizes,
                measurements,
                iterations=iterations,
                start="uniform",
                discrepancy=aim_module._DISCREPANCY,
                plain_steps=0,
            )
            steps += model.iterations
    finally:
        restore()
    wall = time.perf_counter() - start
    per_step = wall / steps * 1e3
    lines = [f"{label}: {len(fits)} fits, {steps} steps, {wall:.2f} s, {per_step:.2f} ms a step"]
    for name in PASSES:
        if calls[name]:
            lines.append(
                f"  {name:<14}{seconds[name]:7.2f} s {calls[name]:7d} calls "
                f"{seconds[name] / calls[name] * 1e3:6.2f} ms a call "
                f"{seconds[name] / steps * 1e3:6.2f} ms a step"
            )
    return "\n".join(lines)


def one_clique(fit: Fit, cells: int) -> bool:
    """Whether the fit's model is one clique of at least ``cells`` cells."""
    tree = model_module.JunctionTree(fit[0], [m.clique for m in fit[1]])
    return len(tree.cliques) == 1 and math.prod(fit[0]) >= cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=list(DATASETS), default="adult")
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cells", type=int, default=1 << 20)
    parser.add_argument("--save", type=Path, help="keep the captured fits in this pickle")
    parser.add_argument("--load", type=Path, help="refit the fits of this pickle (no AIM run)")
    args = parser.parse_args()
    if args.load:
        fits = pickle.loads(args.load.read_bytes())
    else:
        fits, seconds = captured(args.dataset, args.epsilon, args.seed)
        print(f"AIM at {args.dataset} epsilon {args.epsilon:g}, seed {args.seed}: {seconds:.2f} s")
    if args.save:
        args.save.write_bytes(pickle.dumps(fits))
    print(profile(fits, "all fits between rounds"), flush=True)
    large = [fit for fit in fits if one_clique(fit, args.cells)]
    if large:
        print(profile(large, f"one clique of at least {args.cells:,} cells"), flush=True)


if __name__ == "__main__":
    main()
