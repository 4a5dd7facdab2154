"""Epsilon and wall time of the PLD accountant, side by side with dp_accounting and PRV.

Run with the benchmark environment (it has the peer libraries; dpcurator is taken from src/):

    /tmp/benchvenv/bin/python benchmarks/bench_accountants.py [--repeats 5]

DP-SGD's accounting problem: the Poisson-subsampled Gaussian with sampling rate q = 0.01 and
noise multiplier sigma = 1.0, composed 1,000 and 10,000 times, epsilon at delta = 1e-5.

* dpcurator ``PLDAccountant`` (grid step 1e-4, connect-the-dots, an upper bound). "cold" clears
  the per-event caches first (the discretisation is computed), "warm" reuses them.
* dp_accounting 0.6 ``PLDAccountant`` (pessimistic estimate, grid step 1e-4) and
  ``RdpAccountant`` (default orders).
* prv_accountant 0.2 ``PRVAccountant`` with ``eps_error = 0.01`` and ``delta_error = 1e-8``
  (Opacus' settings): its upper bound and its estimate.

Times are the best of ``--repeats`` runs of the whole computation (construct, compose, query).
Prints a table and writes JSON (``--out``, default ``benchmarks/results/accountants.json``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dpcurator.accounting import (  # noqa: E402
    GaussianEvent,
    PoissonSampledEvent,
    _pld,
    _profiles,
)
from dpcurator.accounting._pld import PLDAccountant  # noqa: E402

Q, SIGMA, DELTA = 0.01, 1.0, 1e-5
STEPS = (1000, 10000)


def best_time(
    fn: Callable[[], float], repeats: int, before: Callable[[], None] | None = None
) -> tuple[float, float]:
    """Return (value, best wall time in seconds) over ``repeats`` runs."""
    best, value = float("inf"), float("nan")
    for _ in range(repeats):
        if before is not None:
            before()
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return value, best


def clear_caches() -> None:
    _pld._discretised.cache_clear()
    _profiles._pair_for.cache_clear()


def dpcurator_runs(steps: int, repeats: int) -> list[dict[str, Any]]:
    event = PoissonSampledEvent(Q, GaussianEvent(sigma=SIGMA))

    def run() -> float:
        return PLDAccountant().compose(event, steps).get_epsilon(DELTA)

    eps, cold = best_time(run, repeats, before=clear_caches)
    _eps, warm = best_time(run, repeats)
    return [
        {"library": "dpcurator", "method": "PLD (cold)", "epsilon": eps, "seconds": cold},
        {"library": "dpcurator", "method": "PLD (warm)", "epsilon": eps, "seconds": warm},
    ]


def dp_accounting_runs(steps: int, repeats: int) -> list[dict[str, Any]] | str:
    try:
        import dp_accounting
        from dp_accounting.pld import pld_privacy_accountant
        from dp_accounting.rdp import rdp_privacy_accountant
    except ImportError as exc:  # pragma: no cover - depends on the environment
        return f"dp_accounting unavailable: {exc}"
    event = dp_accounting.PoissonSampledDpEvent(Q, dp_accounting.GaussianDpEvent(SIGMA))

    def pld() -> float:
        acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
        return float(acc.compose(event, steps).get_epsilon(DELTA))

    def rdp() -> float:
        acc = rdp_privacy_accountant.RdpAccountant()
        return float(acc.compose(event, steps).get_epsilon(DELTA))

    out = []
    for method, fn in (("PLD", pld), ("RDP", rdp)):
        eps, seconds = best_time(fn, repeats)
        out.append(
            {"library": "dp_accounting", "method": method, "epsilon": eps, "seconds": seconds}
        )
    return out


def prv_runs(steps: int, repeats: int) -> list[dict[str, Any]] | str:
    try:
        from prv_accountant import PRVAccountant
        from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism
    except ImportError as exc:  # pragma: no cover - depends on the environment
        return f"prv_accountant unavailable: {exc}"
    bounds: dict[str, float] = {}

    def run() -> float:
        prv = PoissonSubsampledGaussianMechanism(noise_multiplier=SIGMA, sampling_probability=Q)
        acc = PRVAccountant(prvs=prv, eps_error=0.01, delta_error=1e-8, max_self_compositions=steps)
        low, estimate, upper = acc.compute_epsilon(delta=DELTA, num_self_compositions=steps)
        bounds.update(lower=float(low), estimate=float(estimate), upper=float(upper))
        return float(upper)

    upper, seconds = best_time(run, repeats)
    return [
        {
            "library": "prv_accountant",
            "method": "PRV upper bound",
            "epsilon": upper,
            "seconds": seconds,
        },
        {
            "library": "prv_accountant",
            "method": "PRV estimate",
            "epsilon": bounds["estimate"],
            "seconds": seconds,
        },
    ]


def version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / "accountants.json"
    )
    args = parser.parse_args(argv)

    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for steps in STEPS:
        for runs in (dpcurator_runs, dp_accounting_runs, prv_runs):
            got = runs(steps, args.repeats)
            if isinstance(got, str):
                notes.append(got)
                continue
            for row in got:
                rows.append({"steps": steps, **row})

    print(f"Poisson-subsampled Gaussian, q = {Q}, sigma = {SIGMA}, delta = {DELTA}")
    print(f"{'steps':>6}  {'library':<15} {'method':<16} {'epsilon':>10} {'seconds':>9}")
    for row in rows:
        print(
            f"{row['steps']:>6}  {row['library']:<15} {row['method']:<16} "
            f"{row['epsilon']:>10.6f} {row['seconds']:>9.4f}"
        )
    for note in sorted(set(notes)):
        print(note)

    result = {
        "setting": {"sampling_rate": Q, "noise_multiplier": SIGMA, "delta": DELTA, "steps": STEPS},
        "rows": rows,
        "notes": sorted(set(notes)),
        "machine": {"python": platform.python_version(), "machine": platform.machine()},
        "versions": {
            name: version(name) for name in ("numpy", "scipy", "dp-accounting", "prv-accountant")
        },
        "repeats": args.repeats,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
