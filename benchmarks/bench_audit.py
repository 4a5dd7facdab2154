"""Auditing and attacks: audit throughput, samples to certify Laplace, reconstruction time.

Run from the repository root (dpcurator is taken from src/):

    .venv/bin/python benchmarks/bench_audit.py [--quick] [--repeats 3] [--rows 500,1000,2000]
        [--out benchmarks/results/audit.json]

1. Audit throughput: runs of the mechanism audited per second by
   ``dpcurator.audit.audit_mechanism`` (4 N runs: selection and certification on both
   neighbours, event selection and Clopper-Pearson certification included), for the vectorised
   Laplace mechanism (``batched=True``) and for the public exponential mechanism called once per
   run (``batched=False``), best of ``--repeats``.
2. Samples to certify: the smallest N per side and split, on a doubling grid from 250, at which
   the audit of ``laplace_mechanism`` at epsilon = 1, 2, 4 (neighbours 0 and 1, sensitivity 1)
   certifies at least half and 90 % of epsilon, at 95 % confidence (median of ``--repeats``
   seeds). For reference, research note B: with a perfect distinguisher (no errors) certifying
   epsilon needs about 3.7 e^eps runs per side.
3. Reconstruction: wall time of ``lp_reconstruction`` (Dinur-Nissim LP, HiGHS interior point,
   L1 objective) on n rows with m = 4 n random subset queries answered with uniform error up to
   0.05 sqrt(n), and the fraction of secret bits recovered.

Prints tables and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dpcurator.attacks import lp_reconstruction, subset_sum_oracle  # noqa: E402
from dpcurator.audit import audit_mechanism  # noqa: E402
from dpcurator.mechanisms import exponential_mechanism, laplace_mechanism  # noqa: E402
from dpcurator.noise import InsecureSeededSource, bernoulli  # noqa: E402


def laplace_runs(epsilon: float, seed: int) -> Callable[[float, int], Any]:
    source = InsecureSeededSource(seed)

    def run(x: float, size: int) -> Any:
        return laplace_mechanism(
            np.full(size, x),
            epsilon=epsilon,
            sensitivity=1.0,
            changed_coordinates=1,
            source=source,
        ).value

    return run


def throughput(repeats: int, quick: bool) -> list[dict[str, Any]]:
    rows = []
    n = 100_000 if quick else 1_000_000
    best = math.inf
    for r in range(repeats):
        start = time.perf_counter()
        audit_mechanism(laplace_runs(1.0, r), 0.0, 1.0, samples=n, batched=True)
        best = min(best, time.perf_counter() - start)
    rows.append(
        {
            "mechanism": "laplace (batched)",
            "runs": 4 * n,
            "seconds": best,
            "runs_per_second": 4 * n / best,
        }
    )
    source = InsecureSeededSource(99)
    candidates = ["a", "b", "c", "d"]

    def em(utilities: list[float]) -> str:
        return exponential_mechanism(
            candidates, utilities, epsilon=1.0, sensitivity=1.0, source=source
        ).value

    m = 1_000 if quick else 5_000
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        audit_mechanism(em, [0.0] * 4, [1.0, -1.0, -1.0, -1.0], samples=m)
        best = min(best, time.perf_counter() - start)
    rows.append(
        {
            "mechanism": "exponential (one call per run)",
            "runs": 4 * m,
            "seconds": best,
            "runs_per_second": 4 * m / best,
        }
    )
    return rows


def samples_to_certify(repeats: int, quick: bool) -> list[dict[str, Any]]:
    rows = []
    limit = 2**17 * 250 if not quick else 2**12 * 250
    for epsilon in (1.0, 2.0, 4.0):
        found: dict[str, int | None] = {"0.5": None, "0.9": None}
        n = 250
        while n <= limit and found["0.9"] is None:
            bounds = [
                audit_mechanism(
                    laplace_runs(epsilon, 1000 * r + n % 997), 0.0, 1.0, samples=n, batched=True
                ).epsilon_lower_bound
                for r in range(repeats)
            ]
            median = statistics.median(bounds)
            for level in ("0.5", "0.9"):
                if found[level] is None and median >= float(level) * epsilon:
                    found[level] = n
            n *= 2
        rows.append(
            {
                "epsilon": epsilon,
                "n_half": found["0.5"],
                "n_90": found["0.9"],
                "perfect_distinguisher": math.ceil(3.7 * math.exp(epsilon)),
            }
        )
    return rows


def reconstruction(rows_list: list[int], repeats: int) -> list[dict[str, Any]]:
    out = []
    for n in rows_list:
        times, fractions = [], []
        for r in range(repeats):
            secret = bernoulli("1/2", n, source=InsecureSeededSource(10 * n + r)).astype(int)
            oracle = subset_sum_oracle(
                secret,
                noise="uniform",
                scale=0.05 * math.sqrt(n),
                source=InsecureSeededSource(r),
            )
            start = time.perf_counter()
            result = lp_reconstruction(oracle, n, source=InsecureSeededSource(100 + r))
            times.append(time.perf_counter() - start)
            fractions.append(result.fraction_recovered(secret))
        out.append(
            {
                "rows": n,
                "queries": 4 * n,
                "seconds": min(times),
                "seconds_median": statistics.median(times),
                "fraction_recovered": min(fractions),
            }
        )
        print(f"  n = {n}: {min(times):.2f} s, recovered {min(fractions):.4f}", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", default="500,1000,2000")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/audit.json")
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}")
    print("\n1. audit throughput (runs of the mechanism per second, best of repeats)")
    speed = throughput(args.repeats, args.quick)
    for row in speed:
        print(
            f"  {row['mechanism']:32s} {row['runs']:>10,} runs  {row['seconds']:7.2f} s  "
            f"{row['runs_per_second']:>12,.0f} runs/s"
        )
    print("\n2. runs per side and split to certify a share of epsilon (Laplace, 95 %)")
    certify = samples_to_certify(args.repeats, args.quick)
    for row in certify:
        print(
            f"  eps = {row['epsilon']:g}: >= eps/2 at N = {row['n_half']}, "
            f">= 0.9 eps at N = {row['n_90']} (perfect distinguisher: "
            f"{row['perfect_distinguisher']})"
        )
    print("\n3. reconstruction (m = 4n queries, error 0.05 sqrt(n))")
    recon = reconstruction([int(v) for v in args.rows.split(",") if v], max(1, args.repeats - 2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "python": platform.python_version(),
                "throughput": speed,
                "certify": certify,
                "reconstruction": recon,
            },
            indent=2,
        )
    )
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
