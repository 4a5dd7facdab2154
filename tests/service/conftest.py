"""Fixtures of the service tests: a small declared table, server configs, live servers on
127.0.0.1 (in a thread, or as a `dpcurator serve` process that can be killed), and a throwaway
PostgreSQL cluster (initdb + pg_ctl on a temporary folder, run as the `postgres` user when the
tests run as root, as CI does)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from dpcurator.service import LedgerStore, ServiceCurator, create_app, load_config, wrap

REGIONS = ("north", "south", "east", "west")
ROWS = 400


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_table(folder: Path, name: str = "people") -> Path:
    """A 400-row CSV (households of up to 2 rows) and its TOML declaration."""
    lines = ["hh,region,income,age"]
    for i in range(ROWS):
        lines.append(f"{i // 2},{REGIONS[i % 4]},{(i * 7919) % 100000}.5,{18 + (i * 31) % 70}")
    (folder / f"{name}.csv").write_text("\n".join(lines) + "\n")
    declaration = folder / f"{name}.toml"
    declaration.write_text(
        f'[table]\nname = "{name}"\nsource = "{name}.csv"\nprivacy_unit = "hh"\n'
        "max_rows_per_unit = 2\nmax_groups_per_unit = 2\n\n"
        f"[columns.region]\ndomain = {list(REGIONS)!r}\n".replace("'", '"')
        + "[columns.income]\nlower = 0\nupper = 100000\n"
        "[columns.age]\nlower = 0\nupper = 100\nbins = [0, 30, 60, 100]\n"
    )
    return declaration


def write_config(
    folder: Path,
    *,
    analysts: dict[str, dict[str, float]],
    tables: dict[str, float] | None = None,
    ledger: str = "books.sqlite",
    **server: Any,
) -> Path:
    """A server.toml: ``tables`` maps name -> global epsilon, ``analysts`` name -> {table: eps}."""
    tables = tables or {"people": 100.0}
    settings = {"min_response_ms": 0, "response_quantum_ms": 1, "rate_per_minute": 100_000}
    settings.update(server)
    lines = ["[server]", f'ledger = "{ledger}"']
    lines += [
        f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"' for k, v in settings.items()
    ]
    for name, eps in tables.items():
        if not (folder / f"{name}.toml").exists():
            write_table(folder, name)
        lines += [
            f"[tables.{name}]",
            f'declaration = "{name}.toml"',
            f"budget = {{ epsilon = {eps} }}",
        ]
    for analyst, grants in analysts.items():
        lines.append(f"[analysts.{analyst}]")
        lines += [f"budgets.{t} = {{ epsilon = {e} }}" for t, e in grants.items()]
    path = folder / "server.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class LiveServer:
    """A uvicorn server in a thread on 127.0.0.1, serving a ServiceCurator."""

    curator: ServiceCurator
    port: int = field(default_factory=free_port)
    tls: tuple[Path, Path] | None = None  # (certificate, key): serve HTTPS
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def store(self) -> LedgerStore:
        return self.curator.store

    def key(self, owner: str) -> str:
        return self.store.issue_key(owner, actor="test").text

    def start(self) -> LiveServer:
        app = wrap(create_app(self.curator), self.curator.config)
        tls = (
            {}
            if self.tls is None
            else {"ssl_certfile": str(self.tls[0]), "ssl_keyfile": str(self.tls[1])}
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", ws="none", **tls
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=30)
        self.curator.close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    """Start live servers from a config's arguments (see write_config); stopped after the test."""
    started: list[LiveServer] = []

    def start(**kwargs: Any) -> LiveServer:
        config = load_config(write_config(tmp_path, **kwargs))
        server = LiveServer(ServiceCurator(config)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


class ServerProcess:
    """``dpcurator serve`` as a child process on 127.0.0.1 (to be killed and restarted)."""

    def __init__(self, config: Path, workers: int = 1) -> None:
        self.config = config
        self.workers = workers
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        command = [sys.executable, "-m", "dpcurator", "serve", str(self.config)]
        command += ["--port", str(self.port), "--workers", str(self.workers)]
        command += ["--log-level", "warning"]
        self.log = self.config.with_name(f"serve-{self.port}.log")
        with self.log.open("ab") as log:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dpcurator serve exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("dpcurator serve did not start")

    def kill(self) -> None:
        """SIGKILL the server (and its workers: the whole process group it leads)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


# -- PostgreSQL ---------------------------------------------------------------------------------


def _pg_bin() -> Path:
    for version in ("17", "16", "15", "14", "13"):
        folder = Path(f"/usr/lib/postgresql/{version}/bin")
        if (folder / "initdb").exists():
            return folder
    found = shutil.which("initdb")
    if found is None:
        raise RuntimeError("PostgreSQL's initdb was not found (apt-get install postgresql)")
    return Path(found).parent


class Postgres:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (trust authentication, a temporary folder)."""

    def __init__(self) -> None:
        self.bin = _pg_bin()
        self.root = Path(tempfile.mkdtemp(prefix="dpcurator-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres")
            os.chmod(self.root, 0o700)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=on"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    cluster = Postgres()
    try:
        yield cluster
    finally:
        cluster.close()
