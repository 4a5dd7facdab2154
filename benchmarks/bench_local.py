"""Local-DP frequency protocols: throughput and error, next to pure-LDP and multi-freq-ldpy.

Run with the benchmark environment (it has the peer libraries; dpcurator is taken from src/):

    /tmp/benchvenv/bin/python benchmarks/bench_local.py [--devices 10000000] [--peer-seconds 20]
        [--mse-devices 100000] [--olh-mse-devices 10000] [--repeats 3] [--out PATH]

Data: a population of devices drawn from the 1990 US Census surname frequencies, domain = the
top 1,000 surnames (``dpcurator.datasets.load_surnames``), probabilities proportional to the
published percents.

Protocols, where a peer has the same one: GRR (pure-LDP ``DE``, multi-freq-ldpy ``GRR``), SUE
and OUE (``UE``), OLH (``LH`` with the optimal ``g``), HR (pure-LDP only; its Hadamard response
is Acharya et al.'s, as ours). Apple's CMS/HCMS are left out: pure-LDP 1.2.0's ``CMSServer`` fails
under numpy 2 (``np.zeros(None)``) and multi-freq-ldpy has none.

Throughput: devices privatised and aggregated per second, estimates of the whole domain
included (client + server). dpcurator runs ``estimate`` (vectorised, exact samplers, the secure
OS CSPRNG) on ``--devices`` devices, one timed run after a small warm-up; each peer runs its own
client per device and its server, on as many devices as fit in ``--peer-seconds`` (calibrated on
a small run, at most ``--devices``), after a warm-up (numba JIT). The peers draw from Python's or
numpy's Mersenne Twister (floating point, not secure).

Error: the mean over the 1,000 values of the squared error of the estimated frequencies
(count / n), averaged over ``--repeats`` populations of ``--mse-devices`` devices (OLH:
``--olh-mse-devices``, because both peers decode OLH in O(n d) Python loops), at epsilon 0.5, 1,
2 and 4, every library on the same population. dpcurator is shown raw (unbiased) and projected
onto the simplex (non-negative, summing to 1: ``project_counts``); pure-LDP's estimates are raw,
multi-freq-ldpy's ``*_Aggregator_MI`` clips at 0 and renormalises, so dpcurator is also shown
with that same post-processing (``clip+norm``: ``project_counts(method="clip")`` divided by its
sum). Compare raw with raw and clip+norm with clip+norm: the rest is the post-processing, not
the protocol. ``predicted`` is dpcurator's closed-form variance of the raw estimates.

Prints two tables and writes JSON (``--out``, default ``benchmarks/results/local.json``) with
the ratios dpcurator / peer (throughput) and dpcurator / peer (MSE).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import random
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from dpcurator.datasets import load_surnames  # noqa: E402
from dpcurator.local import (  # noqa: E402
    FrequencyEstimate,
    GeneralizedRandomizedResponse,
    HadamardResponse,
    OptimizedLocalHashing,
    OptimizedUnaryEncoding,
    SymmetricUnaryEncoding,
    project_counts,
)
from dpcurator.noise import InsecureSeededSource  # noqa: E402

DOMAIN = 1000
EPSILONS = (0.5, 1.0, 2.0, 4.0)
THROUGHPUT_EPSILON = 1.0

OURS: dict[str, Callable[[float, int], Any]] = {
    "grr": GeneralizedRandomizedResponse,
    "sue": SymmetricUnaryEncoding,
    "oue": OptimizedUnaryEncoding,
    "olh": OptimizedLocalHashing,
    "hr": HadamardResponse,
}

PeerRun = Callable[[np.ndarray, float], np.ndarray]
"""(values, epsilon) -> estimated frequencies of the DOMAIN values."""


# --------------------------------------------------------------------------------------------
# data


def surname_weights() -> np.ndarray:
    table = load_surnames()
    return table["percent"].to_numpy(dtype=np.float64)[:DOMAIN]


def draw(weights: np.ndarray, n: int, seed: int) -> np.ndarray:
    """n devices, i.i.d. with probabilities proportional to weights (inverse CDF)."""
    cdf = np.cumsum(weights) / weights.sum()
    u = (InsecureSeededSource(seed).words(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return np.minimum(np.searchsorted(cdf, u, side="right"), weights.size - 1).astype(np.int64)


# --------------------------------------------------------------------------------------------
# peers


def _identity(x: int) -> int:
    return x


def pure_ldp_runs() -> dict[str, PeerRun] | str:
    try:
        from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
        from pure_ldp.frequency_oracles.hadamard_response import (
            HadamardResponseClient,
            HadamardResponseServer,
        )
        from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer
        from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        return f"pure-LDP not importable: {exc}"

    def loop(client: Any, server: Any, values: np.ndarray) -> np.ndarray:
        privatise, aggregate = client.privatise, server.aggregate
        for x in values.tolist():
            aggregate(privatise(x))
        counts = np.asarray(server.estimate_all(range(DOMAIN), suppress_warnings=True))
        return counts / values.size

    def grr(values: np.ndarray, eps: float) -> np.ndarray:
        kw = {"index_mapper": _identity}
        return loop(DEClient(eps, DOMAIN, **kw), DEServer(eps, DOMAIN, **kw), values)

    def unary(oue: bool) -> PeerRun:
        def run(values: np.ndarray, eps: float) -> np.ndarray:
            kw = {"use_oue": oue, "index_mapper": _identity}
            return loop(UEClient(eps, DOMAIN, **kw), UEServer(eps, DOMAIN, **kw), values)

        return run

    def olh(values: np.ndarray, eps: float) -> np.ndarray:
        kw = {"use_olh": True, "index_mapper": _identity}
        return loop(LHClient(eps, DOMAIN, **kw), LHServer(eps, DOMAIN, **kw), values)

    def hr(values: np.ndarray, eps: float) -> np.ndarray:
        server = HadamardResponseServer(eps, DOMAIN, index_mapper=_identity)
        client = HadamardResponseClient(
            eps, DOMAIN, server.get_hash_funcs(), index_mapper=_identity
        )
        return loop(client, server, values)

    return {"grr": grr, "sue": unary(False), "oue": unary(True), "olh": olh, "hr": hr}


def multi_freq_runs() -> dict[str, PeerRun] | str:
    try:
        from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI, GRR_Client
        from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI, LH_Client
        from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI, UE_Client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        return f"multi-freq-ldpy not importable: {exc}"

    def grr(values: np.ndarray, eps: float) -> np.ndarray:
        reports = [GRR_Client(x, DOMAIN, eps) for x in values.tolist()]
        return np.asarray(GRR_Aggregator_MI(reports, DOMAIN, eps))

    def unary(oue: bool) -> PeerRun:
        def run(values: np.ndarray, eps: float) -> np.ndarray:
            reports = [UE_Client(x, DOMAIN, eps, oue) for x in values.tolist()]
            return np.asarray(UE_Aggregator_MI(reports, eps, oue))

        return run

    def olh(values: np.ndarray, eps: float) -> np.ndarray:
        reports = [LH_Client(x, DOMAIN, eps, True) for x in values.tolist()]
        return np.asarray(LH_Aggregator_MI(reports, DOMAIN, eps, True))

    return {"grr": grr, "sue": unary(False), "oue": unary(True), "olh": olh}


# --------------------------------------------------------------------------------------------
# measurements


def ours_estimate(protocol: str, eps: float, values: np.ndarray) -> FrequencyEstimate:
    oracle = OURS[protocol](eps, DOMAIN)
    estimate: FrequencyEstimate = oracle.estimate(values)  # secure default source
    return estimate


def ours_rate(protocol: str, values: np.ndarray, repeats: int = 3) -> float:
    """Steady-state devices per second: best of ``repeats`` full runs (the first run at this size
    also pays for page faults on the large arrays; the peers' ~20 s runs are steady state)."""
    ours_estimate(protocol, THROUGHPUT_EPSILON, values[:10_000])  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        estimate = ours_estimate(protocol, THROUGHPUT_EPSILON, values)
        best = min(best, time.perf_counter() - start)
        assert estimate.counts.shape == (DOMAIN,) and estimate.n == values.size
    return values.size / best


def peer_rate(run: PeerRun, values: np.ndarray, seconds: float) -> tuple[float, int]:
    """Devices per second at about ``seconds`` of work (calibrated), and the devices used."""
    run(values[:20], THROUGHPUT_EPSILON)  # warm-up (numba JIT, imports)
    probe = 2_000
    start = time.perf_counter()
    run(values[:probe], THROUGHPUT_EPSILON)
    per_device = (time.perf_counter() - start) / probe
    n = int(min(values.size, max(probe, seconds / per_device)))
    start = time.perf_counter()
    out = run(values[:n], THROUGHPUT_EPSILON)
    elapsed = time.perf_counter() - start
    assert out.shape == (DOMAIN,)
    return n / elapsed, n


def mse(estimate: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean((estimate - truth) ** 2))


def seed_peers(seed: int) -> None:
    """The peers draw from the global generators; seed them so that runs repeat."""
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 (the peers' own global generator)
    try:
        from numba import njit

        @njit(cache=False)
        def _seed_numba(s: int) -> None:
            np.random.seed(s)  # noqa: NPY002

        _seed_numba(seed)
    except ImportError:  # pragma: no cover
        pass


# --------------------------------------------------------------------------------------------
# main


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        return None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=10_000_000, help="dpcurator's devices")
    parser.add_argument("--peer-seconds", type=float, default=20.0, help="peers' time budget")
    parser.add_argument("--mse-devices", type=int, default=100_000)
    parser.add_argument("--olh-mse-devices", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3, help="populations per MSE figure")
    parser.add_argument("--protocols", default="grr,sue,oue,olh,hr")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "local.json")
    args = parser.parse_args(argv)
    protocols = [p for p in args.protocols.split(",") if p]
    warnings.filterwarnings("ignore")  # the peers warn about numba and small counts

    peers: dict[str, dict[str, PeerRun]] = {}
    notes: list[str] = []
    for name, found in (("pure-LDP", pure_ldp_runs()), ("multi-freq-ldpy", multi_freq_runs())):
        if isinstance(found, str):
            notes.append(found)
        else:
            peers[name] = found
    weights = surname_weights()

    # ---- throughput
    population = draw(weights, args.devices, seed=1)
    throughput: list[dict[str, Any]] = []
    for protocol in protocols:
        rate = ours_rate(protocol, population)
        row: dict[str, Any] = {"protocol": protocol, "dpcurator": rate, "devices": args.devices}
        print(f"{protocol}: dpcurator {rate:,.0f} devices/s at {args.devices:,}", flush=True)
        for name, runs in peers.items():
            if protocol in runs:
                seed_peers(2)
                peer, n = peer_rate(runs[protocol], population, args.peer_seconds)
                row[name] = {"rate": peer, "devices": n, "ratio": rate / peer}
                print(f"{protocol}: {name} {peer:,.0f} devices/s at {n:,}", flush=True)
        throughput.append(row)

    # ---- error
    errors: list[dict[str, Any]] = []
    for protocol in protocols:
        n = args.olh_mse_devices if protocol == "olh" else args.mse_devices
        for eps in EPSILONS:
            sums: dict[str, float] = {}
            predicted = 0.0
            for rep in range(args.repeats):
                values = draw(weights, n, seed=100 + rep)
                truth = np.bincount(values, minlength=DOMAIN) / n
                estimate = ours_estimate(protocol, eps, values)
                oracle = OURS[protocol](eps, DOMAIN)
                predicted += float(np.mean(oracle.variance(n, truth * n))) / n**2
                clipped = project_counts(estimate, method="clip").counts
                figures = {
                    "dpcurator": mse(estimate.counts / n, truth),
                    "dpcurator projected": mse(project_counts(estimate).counts / n, truth),
                    "dpcurator clip+norm": mse(clipped / max(clipped.sum(), 1e-300), truth),
                }
                for name, runs in peers.items():
                    if protocol in runs:
                        seed_peers(1000 * rep + int(eps * 10))
                        figures[name] = mse(runs[protocol](values, eps), truth)
                for key, value in figures.items():
                    sums[key] = sums.get(key, 0.0) + value
            row = {"protocol": protocol, "epsilon": eps, "devices": n, "repeats": args.repeats}
            row.update({key: value / args.repeats for key, value in sums.items()})
            row["predicted"] = predicted / args.repeats
            errors.append(row)
            shown = ", ".join(f"{k} {v:.3g}" for k, v in row.items() if isinstance(v, float))
            print(f"mse {protocol} eps={eps:g} n={n:,}: {shown}", flush=True)

    # ---- ratios
    ratios: dict[str, Any] = {"throughput": {}, "mse": {}}
    for row in throughput:
        ratios["throughput"][row["protocol"]] = {
            name: row[name]["ratio"] for name in peers if name in row
        }
    for row in errors:
        key = f"{row['protocol']}@{row['epsilon']:g}"
        entry: dict[str, float] = {}
        if "pure-LDP" in row:
            entry["dpcurator/pure-LDP (raw/raw)"] = row["dpcurator"] / row["pure-LDP"]
        if "multi-freq-ldpy" in row:
            entry["dpcurator clip+norm/multi-freq-ldpy (same post-processing)"] = (
                row["dpcurator clip+norm"] / row["multi-freq-ldpy"]
            )
        ratios["mse"][key] = entry

    result: dict[str, Any] = {
        "data": f"1990 US Census surnames, top {DOMAIN} (dpcurator.datasets.load_surnames)",
        "units": {
            "throughput": "devices privatised and aggregated per second (one run)",
            "mse": "mean over the domain of the squared error of the frequencies",
        },
        "throughput_epsilon": THROUGHPUT_EPSILON,
        "throughput": throughput,
        "mse": errors,
        "ratios": ratios,
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "pure-ldp": _version("pure-ldp"),
            "multi-freq-ldpy": _version("multi-freq-ldpy"),
            "xxhash": _version("xxhash"),
            "numba": _version("numba"),
        },
        "machine": {"platform": platform.platform(), "processor": platform.processor()},
        "notes": notes,
    }

    print()
    print(f"Throughput: devices privatised + aggregated per second (d = {DOMAIN}, eps = 1)")
    print(
        f"{'protocol':<9} {'dpcurator':>14} {'pure-LDP':>12} {'ratio':>8}"
        f" {'multi-freq':>12} {'ratio':>8}"
    )
    for row in throughput:
        cells = [f"{row['protocol']:<9}", f"{row['dpcurator'] / 1e6:>10.2f} M/s"]
        for name in ("pure-LDP", "multi-freq-ldpy"):
            if name in row:
                cells.append(f"{row[name]['rate'] / 1e3:>8.1f} k/s")
                cells.append(f"{row[name]['ratio']:>7.0f}x")
            else:
                cells.append(f"{'-':>12}")
                cells.append(f"{'-':>8}")
        print(" ".join(cells))
    print()
    print("MSE of the frequencies (mean over the domain; lower is better)")
    print(
        f"{'protocol':<9} {'eps':>4} {'n':>8} {'predicted':>10} {'dpc raw':>10} {'pure-LDP':>10}"
        f" {'dpc clip+n':>10} {'multi-freq':>10} {'dpc simplex':>11}"
    )
    for row in errors:

        def cell(key: str, row: dict[str, Any] = row) -> str:
            return f"{row[key]:>10.3e}" if key in row else f"{'-':>10}"

        print(
            f"{row['protocol']:<9} {row['epsilon']:>4g} {row['devices']:>8,} {cell('predicted')}"
            f" {cell('dpcurator')} {cell('pure-LDP')} {cell('dpcurator clip+norm')}"
            f" {cell('multi-freq-ldpy')} {cell('dpcurator projected'):>11}"
        )
    for note in notes:
        print(note)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
