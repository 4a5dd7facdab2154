"""The curator as a service: private queries per second and latency, against a local Session.

The CPS tax units (280,005 rows, the bundled Parquet file) are served by ``dpcurator serve``
(one uvicorn worker, a child process on 127.0.0.1) with a SQLite ledger and with a PostgreSQL
ledger (a throwaway cluster: initdb + pg_ctl on a temporary folder, as the tests make it). At 1,
8 and 32 concurrent clients (threads, each an analyst with its own key and budget) every client
sends ``--queries`` queries through :class:`dpcurator.client.Client`; the same queries run
through a local :class:`~dpcurator.curator.Session` (one thread, then the same client counts on
one shared session) for the service's overhead. Timing padding is off (``min_response_ms = 0``)
so that the figures are the service's own work; with padding each answer takes at least the
configured minimum. Before timing, each query runs once (the warm-up): a statement's first run
reads the data and computes the units beyond their bounds; later runs of the same statement on
the same file reuse its exact aggregates (fresh noise, a full charge), so the figures are the
steady state of a workload that repeats its statements. The first runs: about 0.1-0.3 s each.
Each client also sends a free request first: a key's first request in a server process pays
one scrypt check (about 30 ms of CPU, by design), later ones a SHA-256. Without that warm-up,
the first requests of 8 new keys queue behind each other's scrypt (up to about 300 ms).

    .venv/bin/python benchmarks/bench_service.py [--queries 25] [--levels 1 8 32] [--workers 1]
        [--ledgers sqlite postgresql] [--no-local] [--repeat 1] [--out F]

Prints queries/s, p50 and p99 latency (ms) per setting and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

QUERIES = (
    "SELECT state, COUNT(*) AS n FROM cps GROUP BY state",
    "SELECT filing_status, AVG(wages) AS w FROM cps GROUP BY filing_status",
    "SELECT COUNT(*) AS n FROM cps WHERE age_head >= 65",
    "SELECT HISTOGRAM(age_head) FROM cps",
)
EPSILON = 0.001


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _files(folder: Path, ledger: str, analysts: int) -> Path:
    from dpcurator.cli._demo import cps_declaration, declaration_toml
    from dpcurator.datasets import dataset_path

    source = dataset_path("cps")
    table = cps_declaration(source, source_table=None)
    (folder / "cps.toml").write_text(declaration_toml(table, source=str(source)))
    lines = [
        "[server]",
        f'ledger = "{ledger}"',
        "min_response_ms = 0",
        "response_quantum_ms = 1",
        "rate_per_minute = 1000000",
        "[tables.cps]",
        'declaration = "cps.toml"',
        "budget = { epsilon = 1000000.0 }",
    ]
    for i in range(analysts):
        lines += [f"[analysts.a{i}]", "budgets.cps = { epsilon = 10000.0 }"]
    config = folder / "server.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


class _Postgres:
    def __init__(self) -> None:
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
        self.bin = bins[-1] if bins else Path(shutil.which("initdb") or "initdb").parent
        self.root = Path(tempfile.mkdtemp(prefix="bench-pg-"))
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres")
        self._run("initdb", "-D", str(self.root / "data"), "-A", "trust", "-U", "postgres")
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}"
        self._run(
            "pg_ctl",
            "-D",
            str(self.root / "data"),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "start",
        )

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True)

    def postmaster(self) -> int:
        """The cluster's main process id (its backends are its children)."""
        return int((self.root / "data" / "postmaster.pid").read_text().split()[0])

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def close(self) -> None:
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def _serve(config: Path, workers: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dpcurator",
            "serve",
            str(config),
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--workers",
            str(workers),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("the server did not start")


def _tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of process ``root`` and its children so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if root in (pid, ppid):
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _cpu(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of each named process tree, and of this process (the clients)."""
    out = {name: _tree_cpu(pid) for name, pid in roots.items()}
    times = os.times()
    out["clients"] = times.user + times.system
    return out


def _summary(latencies: list[float], wall: float) -> dict[str, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {
        "queries": len(ordered),
        "qps": len(ordered) / wall,
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * p99,
    }


def _concurrently(clients: int, queries: int, ask: Any) -> dict[str, float]:
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        mine = []
        for i in range(queries):
            start = time.perf_counter()
            ask(index, QUERIES[(index + i) % len(QUERIES)])
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _summary(latencies, time.perf_counter() - start)


def _service(ledger_kind: str, levels: list[int], queries: int, workers: int = 1) -> dict[str, Any]:
    from dpcurator.client import Client
    from dpcurator.service import LedgerStore, load_config

    folder = Path(tempfile.mkdtemp(prefix="bench-service-"))
    cluster = _Postgres() if ledger_kind == "postgresql" else None
    ledger = cluster.url if cluster is not None else "books.sqlite"
    config = _files(folder, ledger, max(levels))
    loaded = load_config(config)
    process, url = _serve(config, workers)
    out: dict[str, Any] = {}
    try:
        with LedgerStore(loaded.ledger) as store:
            keys = [store.issue_key(f"a{i}", actor="bench").text for i in range(max(levels))]
        clients = [Client(url, key) for key in keys]
        for query in QUERIES:  # warm up: each statement's first run reads the data
            clients[0].sql(query, epsilon=EPSILON)
        for client in clients:  # each key's first request: one scrypt check (see above)
            client.tables()
        roots = {"server": process.pid}
        if cluster is not None:
            roots["postgresql"] = cluster.postmaster()
        for level in levels:
            before = _cpu(roots)
            row = _concurrently(level, queries, lambda i, q: clients[i].sql(q, epsilon=EPSILON))
            after = _cpu(roots)
            for name in after:  # CPU milliseconds per query, whatever else runs on the machine
                row[f"{name}_cpu_ms"] = 1000 * (after[name] - before[name]) / row["queries"]
            out[str(level)] = row
            cpu = ", ".join(f"{n} {row[f'{n}_cpu_ms']:.1f}" for n in after)
            print(
                f"service, {ledger_kind} ledger, {level:>2} clients: {_line(row)}; "
                f"CPU ms per query: {cpu}",
                flush=True,
            )
        for client in clients:
            client.close()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        if cluster is not None:
            cluster.close()
        shutil.rmtree(folder, ignore_errors=True)
    return out


def _local(levels: list[int], queries: int) -> dict[str, Any]:
    from dpcurator.accounting import Budget
    from dpcurator.cli._demo import cps_declaration
    from dpcurator.curator import Session
    from dpcurator.datasets import dataset_path

    table = cps_declaration(dataset_path("cps"), source_table=None)
    out: dict[str, Any] = {}
    with Session(table, Budget(1e6), ledger=":memory:") as session:
        for query in QUERIES:  # warm up, as for the service
            session.sql(query, epsilon=EPSILON)
        for level in levels:
            out[str(level)] = _concurrently(
                level, queries, lambda i, q: session.sql(q, epsilon=EPSILON)
            )
            print(
                f"local Session,         {level:>2} threads: {_line(out[str(level)])}", flush=True
            )
    return out


def _line(row: dict[str, float]) -> str:
    return f"{row['qps']:6.1f} queries/s, p50 {row['p50_ms']:6.1f} ms, p99 {row['p99_ms']:6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=25, help="queries per client")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--ledgers", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--no-local", action="store_true", help="skip the local Session rows")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each store, a fresh server each (in turn)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results: dict[str, Any] = {} if args.no_local else {"local": _local(args.levels, args.queries)}
    for run in range(args.repeat):
        for kind in args.ledgers:
            name = kind if args.repeat == 1 else f"{kind} run {run + 1}"
            results[name] = _service(kind, args.levels, args.queries, args.workers)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
