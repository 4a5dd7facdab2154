"""Samples per second of the exact samplers, side by side with OpenDP and numpy.

Run with the benchmark environment (it has the peer libraries; dpcurator is taken from src/):

    /tmp/benchvenv/bin/python benchmarks/bench_samplers.py [--n 1000000] [--repeats 5]

Measured, best of ``--repeats`` runs of ``--n`` samples each:

* dpcurator ``discrete_laplace(scale=10)`` and ``discrete_gaussian(sigma=10)`` with the default
  secure source (kernel CSPRNG), exact.
* OpenDP: the vectorised integer measurements ``make_laplace`` / ``make_gaussian`` over
  ``vector_domain(atom_domain(T=int))`` with scale 10, applied to a list of zeros (exact
  discrete samplers, OpenSSL randomness); the time includes OpenDP's list conversion, as in use.
* numpy ``Generator.laplace`` / ``Generator.normal`` (PCG64, floating point, insecure): the
  ceiling for anything that draws one float per sample.

Prints a table and writes JSON (``--out``, default ``benchmarks/results/samplers.json``) with
the figures and the ratios dpcurator / OpenDP and dpcurator / numpy.
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

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dpcurator.noise import (  # noqa: E402
    SecureRandomSource,
    discrete_gaussian,
    discrete_laplace,
)


def best_rate(fn: Callable[[], Any], n: int, repeats: int) -> float:
    """Samples per second: n divided by the best wall time of ``repeats`` runs."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        elapsed = time.perf_counter() - start
        if len(out) != n:
            raise RuntimeError(f"expected {n} samples, got {len(out)}")
        best = min(best, elapsed)
    return n / best


def opendp_samplers(n: int) -> dict[str, Callable[[], Any]] | str:
    try:
        import opendp.prelude as dp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        return f"opendp not importable: {exc}"
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=int))
    laplace = dp.m.make_laplace(domain, dp.l1_distance(T=int), scale=10.0)
    gaussian = dp.m.make_gaussian(domain, dp.l2_distance(T=int), scale=10.0)
    zeros = [0] * n
    return {"laplace": lambda: laplace(zeros), "gaussian": lambda: gaussian(zeros)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="samples per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs; the best is kept")
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / "samplers.json"
    )
    args = parser.parse_args(argv)
    n, repeats = args.n, args.repeats

    secure = SecureRandomSource()
    rng = np.random.default_rng()
    rates: dict[str, dict[str, float | None]] = {
        "laplace": {
            "dpcurator": best_rate(lambda: discrete_laplace(10, n, source=secure), n, repeats),
            "numpy": best_rate(lambda: rng.laplace(0.0, 10.0, n), n, repeats),
        },
        "gaussian": {
            "dpcurator": best_rate(lambda: discrete_gaussian(10, n, source=secure), n, repeats),
            "numpy": best_rate(lambda: rng.normal(0.0, 10.0, n), n, repeats),
        },
    }
    peers = opendp_samplers(n)
    note = None
    for kind in ("laplace", "gaussian"):
        if isinstance(peers, str):
            note = peers
            rates[kind]["opendp"] = None
        else:
            rates[kind]["opendp"] = best_rate(peers[kind], n, repeats)

    ratios: dict[str, dict[str, float | None]] = {}
    for kind, r in rates.items():
        ours = r["dpcurator"]
        assert ours is not None
        ratios[kind] = {
            "dpcurator/opendp": ours / r["opendp"] if r["opendp"] else None,
            "dpcurator/numpy": ours / r["numpy"] if r["numpy"] else None,
        }

    try:
        opendp_version: str | None = importlib.metadata.version("opendp")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        opendp_version = None
    result: dict[str, Any] = {
        "samples_per_run": n,
        "repeats": repeats,
        "scale": 10,
        "units": "samples per second (best of repeats)",
        "rates": rates,
        "ratios": ratios,
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "opendp": opendp_version,
        },
        "machine": {"platform": platform.platform(), "processor": platform.processor()},
        "note": note,
    }

    def fmt(v: float | None) -> str:
        return "n/a" if v is None else f"{v / 1e6:10.3f} M/s"

    print(f"Samples per second, best of {repeats} x {n:,} samples, scale = sigma = 10")
    print(
        f"{'sampler':<10} {'dpcurator (exact)':>18} {'OpenDP 0.16':>14} {'numpy (float)':>14}"
        f" {'ours/OpenDP':>12} {'ours/numpy':>11}"
    )
    for kind in ("laplace", "gaussian"):
        r = rates[kind]
        q = ratios[kind]
        to_opendp = "n/a" if q["dpcurator/opendp"] is None else f"{q['dpcurator/opendp']:.1f}x"
        to_numpy = "n/a" if q["dpcurator/numpy"] is None else f"{q['dpcurator/numpy']:.2f}x"
        print(
            f"{kind:<10} {fmt(r['dpcurator']):>18} {fmt(r['opendp']):>14} {fmt(r['numpy']):>14}"
            f" {to_opendp:>12} {to_numpy:>11}"
        )
    if note:
        print(note)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
