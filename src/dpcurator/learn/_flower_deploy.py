r"""DP-FedAvg as a real Flower deployment: a SuperLink, SuperNodes and ``flwr run``.

:class:`FlowerDeployment` starts Flower's deployment engine on this machine, every part in its
own process and talking over the network (loopback, ``127.0.0.1``): one ``flower-superlink``
(the server side; it starts the ``ServerApp`` of each run in a process of its own) and one
``flower-supernode`` per client (each starts the ``ClientApp`` processes that train on that
client's data). :meth:`FlowerDeployment.run` submits a run with ``flwr run`` and waits for the
``ServerApp`` to write its result; the trust model is one parameter, ``mode``:

``"central"``
    Clients send their trained models; the server clips, sums on the grid and adds the noise
    (:class:`~dpcurator.learn._flower.DPFedAvgStrategy`; user-level DP of the released models,
    add/remove one client, amplified by Poisson sampling of the nodes).
``"local"``
    Each client clips its update and adds discrete Gaussian noise before it leaves the process
    (local DP of each message, replace-one; no amplification).
``"distributed"``
    Each client adds a share of the noise and masks its vector modulo ``2**b``; the server
    learns only the sum (:mod:`dpcurator.learn._distributed`: the distributed discrete Gaussian
    of Kairouz, Liu and Steinke 2021 with pairwise-masking secure aggregation; zero-out
    neighbours, no amplification). Clients that drop out after the key exchange are unmasked
    by the survivors and charged nothing; the round is accounted for the shares summed.

The model is multinomial logistic regression (softmax) trained by each client with local
minibatch SGD in NumPy (``local-epochs`` ``E`` and ``batch-size`` ``B``, the data shuffled with
:func:`dpcurator.noise.uniform_integers`), so that the client processes need neither PyTorch nor
a GPU. Every privacy-relevant random draw (node sampling, noise, shuffles) comes from
:mod:`dpcurator.noise`; masking keys from :func:`dpcurator.noise.secret_bytes`.

Guarantee
    Exactly that of :class:`~dpcurator.learn._flower.DPFedAvgStrategy` in the chosen mode: the
    result's ``history`` holds the epsilon after each round from dpcurator's accountants
    (``pld`` for central and local, the zCDP accountant for the distributed DDG events) and
    ``node_epsilons`` the per-client ledgers. The ``ServerApp`` (and with it the accuracy on the
    test file it reports) runs on the server; the test file is public data.

Why not Flower's SecAgg+
    Flower ships SecAgg+ (``flwr.server.workflow.SecAggPlusWorkflow`` with
    ``flwr.client.mod.secaggplus_mod``), but only for the legacy ``Strategy``/``DefaultWorkflow``
    API, not for the Message-API strategies that ``DPFedAvgStrategy`` is; and it quantises each
    client's float vector itself (clipping range, stochastic rounding from NumPy's global generator,
    weighting by ``num-examples``, modulus below ``2**32``), which would replace the exact integer
    vector whose noise dpcurator accounts for. The masking here is the semi-honest core of the
    same protocol (see :mod:`dpcurator.learn._distributed` for what it does not protect
    against).

Processes
    All processes are started in new sessions and stopped by :meth:`FlowerDeployment.close`
    (also on leaving the ``with`` block): each started process and every descendant it spawned
    (Flower detaches its SuperExec and app processes) is sent ``SIGTERM``, then ``SIGKILL``.
    Everything binds ``127.0.0.1``; every wait has a timeout.

Examples
--------
>>> FlowerDeployment.__name__  # starting one takes tens of seconds: see the tests
'FlowerDeployment'
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from dpcurator._validation import check_integer, check_positive
from dpcurator.errors import DPError, InvalidParameterError
from dpcurator.learn._distributed import TRUST_MODELS
from dpcurator.learn._flower_client import config_number, dp_client_reply, message_config
from dpcurator.noise import InsecureSeededSource, RandomSource, resolve_source, uniform_integers

__all__ = [
    "DeploymentError",
    "FlowerDeployment",
    "client_app",
    "server_app",
    "softmax_accuracy",
    "softmax_sgd",
]

_APP_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "dpcurator-fedavg"
version = "1.0.0"
description = "DP-FedAvg with dpcurator (central, local or distributed DP)"
license = "Apache-2.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "dpcurator"

[tool.flwr.app.components]
serverapp = "dpcurator_fedavg_server:server_app"
clientapp = "dpcurator_fedavg_client:client_app"

[tool.flwr.app.config]
dp-mode = "central"
num-rounds = 2
clip-norm = 1.0
noise-multiplier = 1.0
clients-per-round = 2.0
dropout-tolerance = 0.0
delta = 1e-5
local-epochs = 1
batch-size = 16
local-lr = 0.5
min-nodes = 2
seed = -1
round-timeout = 120.0
result-file = ""
test-file = ""
"""

_APP_SERVER_MODULE = '''"""Flower ServerApp entry point: dpcurator's DP-FedAvg server."""

from dpcurator.learn._flower_deploy import server_app

__all__ = ["server_app"]
'''

_APP_CLIENT_MODULE = '''"""Flower ClientApp entry point: dpcurator's DP-FedAvg client.

Flower starts a process per message. A client process needs NumPy, Flower and dpcurator's
noise and masking code, not scikit-learn, which the ``dpcurator.learn`` package imports on
import (about 2 s of CPU per message). So ``dpcurator.learn`` is registered as a bare package
here, and only the client's own modules are loaded.
"""

import sys
import types
from pathlib import Path

import dpcurator

if "dpcurator.learn" not in sys.modules:
    _package = types.ModuleType("dpcurator.learn")
    _package.__path__ = [str(Path(dpcurator.__file__).parent / "learn")]
    sys.modules["dpcurator.learn"] = _package

from dpcurator.learn._flower_deploy import client_app  # noqa: E402

__all__ = ["client_app"]
'''


class DeploymentError(DPError):
    """A Flower deployment did not start, or a run did not finish in time."""


# -- the model: softmax regression in NumPy -------------------------------------------------
def softmax_sgd(
    weight: np.ndarray[Any, Any],
    bias: np.ndarray[Any, Any],
    features: np.ndarray[Any, Any],
    labels: np.ndarray[Any, Any],
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    source: RandomSource | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Run ClientUpdate (lecture 004, Algorithm 1) for softmax regression; returns new ``W, b``.

    ``E`` epochs of minibatch SGD with batches of ``B`` in a uniformly random order per epoch
    (drawn from ``source``); ``batch_size = 0`` means the whole local dataset (``B = inf``).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 20); y = np.array([0, 1] * 20)
    >>> W, b = softmax_sgd(np.zeros((2, 2)), np.zeros(2), X, y, epochs=20, batch_size=8, lr=0.5)
    >>> softmax_accuracy(W, b, X, y)
    1.0
    """
    w = np.array(weight, dtype=np.float64)
    c = np.array(bias, dtype=np.float64)
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    n = int(x.shape[0])
    e = check_integer(epochs, "epochs", minimum=0)
    b = check_integer(batch_size, "batch_size", minimum=0) or n
    rate = check_positive(lr, "lr")
    src = resolve_source(source)
    onehot = np.zeros((n, w.shape[0]))
    onehot[np.arange(n), y] = 1.0
    for _ in range(e):
        order = np.argsort(uniform_integers(2**62, size=n, source=src))
        for start in range(0, n, b):
            index = order[start : start + b]
            logits = x[index] @ w.T + c
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            g = (p - onehot[index]) / len(index)
            w -= rate * (g.T @ x[index])
            c -= rate * g.sum(axis=0)
    return w, c


def softmax_accuracy(
    weight: np.ndarray[Any, Any],
    bias: np.ndarray[Any, Any],
    features: np.ndarray[Any, Any],
    labels: np.ndarray[Any, Any],
) -> float:
    """Accuracy of the softmax model ``argmax(X W^T + b)``.

    Examples
    --------
    >>> import numpy as np
    >>> softmax_accuracy(np.eye(2), np.zeros(2), np.eye(2), np.array([0, 1]))
    1.0
    """
    scores = np.asarray(features, dtype=np.float64) @ np.asarray(weight).T + np.asarray(bias)
    return float((scores.argmax(axis=1) == np.asarray(labels)).mean())


# -- the Flower apps ----------------------------------------------------------------------------
server_app = ServerApp()
"""The ``ServerApp``: :class:`~dpcurator.learn._flower.DPFedAvgStrategy` in the run's mode."""

client_app = ClientApp()
"""The ``ClientApp``: softmax regression on the node's ``data-file``, :func:`dp_client_reply`."""


@server_app.main()
def _server_main(grid: Grid, context: Context) -> None:
    # PyTorch is needed by the strategy's grid arithmetic only: imported in the server process.
    from dpcurator.learn._flower import DPFedAvgStrategy  # noqa: PLC0415

    cfg = ConfigRecord(dict(context.run_config))
    result = Path(str(cfg["result-file"]))
    test = np.load(str(cfg["test-file"]))
    features, labels = test["X"], test["y"]
    classes = int(test["classes"])
    timeout = config_number(cfg, "round-timeout", float)
    deadline = time.monotonic() + timeout
    while len(list(grid.get_node_ids())) < config_number(cfg, "min-nodes"):
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    seed = config_number(cfg, "seed")
    strategy = DPFedAvgStrategy(
        clip_norm=config_number(cfg, "clip-norm", float),
        noise_multiplier=config_number(cfg, "noise-multiplier", float),
        clients_per_round=config_number(cfg, "clients-per-round", float),
        delta=config_number(cfg, "delta", float),
        mode=str(cfg["dp-mode"]),
        dropout_tolerance=config_number(cfg, "dropout-tolerance", float),
        phase_timeout=timeout,
        source=InsecureSeededSource(seed) if seed >= 0 else None,
    )
    initial = ArrayRecord(
        {
            "bias": Array(np.zeros(classes, dtype=np.float32)),
            "weight": Array(np.zeros((classes, features.shape[1]), dtype=np.float32)),
        }
    )
    outcome = strategy.start(
        grid=grid,
        initial_arrays=initial,
        num_rounds=config_number(cfg, "num-rounds"),
        timeout=timeout,
        train_config=ConfigRecord(
            {
                "local-epochs": config_number(cfg, "local-epochs"),
                "batch-size": config_number(cfg, "batch-size"),
                "local-lr": config_number(cfg, "local-lr", float),
            }
        ),
    )
    arrays = outcome.arrays
    report = {
        "mode": strategy.mode,
        "nodes": len(list(grid.get_node_ids())),
        "history": [
            {"round": r.round, "clients": r.clients, "epsilon": r.epsilon}
            for r in strategy.history_
        ],
        "epsilon": strategy.epsilon(),
        "delta": strategy.delta,
        "sigma": strategy.sigma_,
        "sensitivity": strategy.sensitivity_,
        "grid_bits": strategy.grid_bits_,
        "dimension": int(features.shape[1] + 1) * classes,
        "node_epsilons": {str(k): v for k, v in strategy.node_epsilons().items()},
        "accuracy": softmax_accuracy(
            arrays["weight"].numpy(), arrays["bias"].numpy(), features, labels
        ),
    }
    partial = result.with_suffix(".partial")
    partial.write_text(json.dumps(report))
    partial.replace(result)


def _keys(context: Context) -> Any:
    records = context.state.config_records
    if "secagg" not in records:
        records["secagg"] = ConfigRecord()
    return records["secagg"]


@client_app.query()
def _client_query(message: Message, context: Context) -> Message:
    return dp_client_reply(message, keys=_keys(context))


@client_app.train()
def _client_train(message: Message, context: Context) -> Message:
    config = message_config(message)
    node = ConfigRecord(dict(context.node_config))
    if "drop-round" in node and config_number(node, "drop-round") == config_number(
        config, "server-round"
    ):
        # A simulated failure after the key exchange: the node answers with an error.
        raise RuntimeError("this node drops out of the round (drop-round)")
    data = np.load(str(node["data-file"]))
    received = message.content.array_records["arrays"]
    weight, bias = softmax_sgd(
        received["weight"].numpy(),
        received["bias"].numpy(),
        data["X"],
        data["y"],
        epochs=config_number(config, "local-epochs"),
        batch_size=config_number(config, "batch-size"),
        lr=config_number(config, "local-lr", float),
    )
    trained = ArrayRecord(
        {"bias": Array(bias.astype(np.float32)), "weight": Array(weight.astype(np.float32))}
    )
    n = int(data["X"].shape[0])
    if config.get("dp-mode") in ("local", "distributed"):
        return dp_client_reply(message, trained, keys=_keys(context), num_examples=n)
    content = RecordDict({"arrays": trained, "metrics": MetricRecord({"num-examples": n})})
    return Message(content, reply_to=message)


# -- the deployment -----------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (Linux ``/proc``), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    frontier = [pid]
    while frontier:
        nxt = [c for p in frontier for c in parents.get(p, [])]
        out.extend(nxt)
        frontier = nxt
    return out


def _living(pids: Sequence[int]) -> list[int]:
    """Return the ``pids`` that still run (not gone, not zombies)."""
    out = []
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat[stat.rindex(")") + 2] not in "ZX":
                out.append(pid)
    return out


class FlowerDeployment:
    """A local Flower deployment (SuperLink, one SuperNode per client) for DP-FedAvg runs.

    Parameters
    ----------
    clients : sequence of (X, y)
        Each client's features (2-D float array) and integer labels; client ``i`` is
        SuperNode ``i`` and reads only its own file.
    test : (X, y)
        Public test data on which the ``ServerApp`` reports the final model's accuracy.
    classes : int, optional
        Number of labels (default: the largest label + 1).
    drop_round : mapping of int to int, optional
        ``{client: round}``: that client fails (answers with an error) in the training step of
        that round, after the key exchange (a dropout mid-round), in every run.
    workdir : str or Path, optional
        Where the app, data, Flower home and logs go (a new temporary directory by default,
        removed by :meth:`close`).
    startup_timeout : float, default 90.0
        Seconds to wait for the SuperLink to accept connections.

    Examples
    --------
    A sketch (see ``tests/learn/test_flower_deploy.py``)::

        with FlowerDeployment(clients, test) as deployment:
            result = deployment.run(mode="distributed", rounds=2, clients_per_round=4)
            result["history"][-1]["epsilon"], result["accuracy"]
    """

    def __init__(
        self,
        clients: Sequence[tuple[Any, Any]],
        test: tuple[Any, Any],
        *,
        classes: int | None = None,
        drop_round: Mapping[int, int] | None = None,
        workdir: str | Path | None = None,
        startup_timeout: float = 90.0,
    ) -> None:
        if not clients:
            raise InvalidParameterError("clients", "<empty>", "must hold at least one client")
        self._clients = [(np.asarray(x, np.float64), np.asarray(y, np.int64)) for x, y in clients]
        self._test = (np.asarray(test[0], np.float64), np.asarray(test[1], np.int64))
        labels = max(int(y.max()) for _, y in [*self._clients, self._test])
        self.classes = check_integer(classes, "classes", minimum=2) if classes else labels + 1
        self.drop_round = dict(drop_round or {})
        self._own_dir = workdir is None
        self.workdir = (
            Path(tempfile.mkdtemp(prefix="dpc-flower-")) if workdir is None else (Path(workdir))
        )
        self.startup_timeout = check_positive(startup_timeout, "startup_timeout")
        self._processes: list[subprocess.Popen[bytes]] = []
        self._submissions: dict[Path, tuple[subprocess.Popen[bytes], Path]] = {}
        self._runs = 0
        self.port = 0

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> FlowerDeployment:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["FLWR_HOME"] = str(self.workdir / "flwr-home")
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        env.setdefault("FLWR_TELEMETRY_ENABLED", "0")
        env.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.2")  # default 1 s per message
        env["PYTHONPATH"] = os.pathsep.join(
            [str(self.workdir / "app"), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
        )
        return env

    def _spawn(self, name: str, command: list[str]) -> None:
        log = (self.workdir / "logs" / f"{name}.log").open("wb")
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self._env(),
            cwd=self.workdir,
            start_new_session=True,
        )
        log.close()
        self._processes.append(process)

    def _binary(self, name: str) -> str:
        path = Path(sys.executable).parent / name
        if not path.exists():
            found = shutil.which(name)
            if found is None:
                raise DeploymentError(f"{name} not found: pip install 'dpcurator[federated]'.")
            return found
        return str(path)

    def start(self) -> None:
        """Write the app and the clients' data, start the SuperLink and the SuperNodes."""
        for sub in ("app", "data", "logs", "flwr-home", "results"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        app = self.workdir / "app"
        (app / "pyproject.toml").write_text(_APP_PYPROJECT)
        (app / "dpcurator_fedavg_server.py").write_text(_APP_SERVER_MODULE)
        (app / "dpcurator_fedavg_client.py").write_text(_APP_CLIENT_MODULE)
        for i, (x, y) in enumerate(self._clients):
            np.savez(self.workdir / "data" / f"client{i}.npz", X=x, y=y)
        np.savez(
            self.workdir / "data" / "test.npz",
            X=self._test[0],
            y=self._test[1],
            classes=self.classes,
        )
        self.port = _free_port()
        (self.workdir / "flwr-home" / "config.toml").write_text(
            '[superlink]\ndefault = "deployment"\n\n[superlink.deployment]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n'
        )
        self._spawn(
            "superlink",
            [
                self._binary("flower-superlink"),
                "--insecure",
                "--disable-runtime-dependency-installation",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
        )
        self._wait_for_port(self.port)
        for i in range(len(self._clients)):
            node_config = f'data-file="{self.workdir / "data" / f"client{i}.npz"}"'
            if i in self.drop_round:
                node_config += f" drop-round={int(self.drop_round[i])}"
            self._spawn(
                f"supernode{i}",
                [
                    self._binary("flower-supernode"),
                    "--insecure",
                    "--superlink",
                    f"127.0.0.1:{self.port}",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(_free_port()),
                    "--node-config",
                    node_config,
                    "--max-wait-time",
                    str(self.startup_timeout),
                ],
            )

    def _wait_for_port(self, port: int) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._processes and self._processes[0].poll() is not None:
                raise DeploymentError(f"flower-superlink exited: see {self.workdir / 'logs'}.")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return
            time.sleep(0.2)
        raise DeploymentError(f"flower-superlink did not listen on 127.0.0.1:{port} in time.")

    def close(self) -> None:
        """Stop every process this deployment started (and their descendants); clean up."""
        for client, _ in self._submissions.values():
            self._processes.append(client)  # stopped (if still running) with the rest
        self._submissions = {}
        started = [p.pid for p in self._processes]
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            victims = _living([*started, *(c for pid in started for c in _children(pid))])
            for process in self._processes:
                if process.poll() is None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(process.pid, sig)
            for pid in victims:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                for process in self._processes:
                    process.poll()  # reap our own children
                if not _living(victims):
                    break
                time.sleep(0.1)
            if not _living(victims):
                break
        for process in self._processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5.0)
        self._processes = []
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- runs -----------------------------------------------------------------------------------
    def submit(
        self,
        *,
        mode: str,
        rounds: int,
        clients_per_round: float,
        clip_norm: float = 1.0,
        noise_multiplier: float = 1.0,
        dropout_tolerance: float = 0.0,
        delta: float = 1e-5,
        local_epochs: int = 1,
        batch_size: int = 16,
        local_lr: float = 0.5,
        seed: int = -1,
        round_timeout: float = 60.0,
    ) -> Path:
        """Submit one run with ``flwr run`` and return the path its result will be written to.

        Returns at once (the ``flwr run`` client runs in the background). Several runs may be
        in flight (the SuperNodes serve them in turn); wait for each with :meth:`wait`.
        ``seed >= 0`` makes the server's sampling and noise reproducible
        (``InsecureSeededSource``; for tests only).
        """
        if mode not in TRUST_MODELS:
            raise InvalidParameterError("mode", mode, f"must be one of {TRUST_MODELS}")
        check_integer(rounds, "rounds", minimum=1)
        if not self._processes:
            raise DeploymentError("the deployment is not started: call start() first.")
        self._runs += 1
        result = self.workdir / "results" / f"run{self._runs}-{mode}.json"
        settings = {
            "dp-mode": json.dumps(mode),
            "num-rounds": str(int(rounds)),
            "clip-norm": repr(float(clip_norm)),
            "noise-multiplier": repr(float(noise_multiplier)),
            "clients-per-round": repr(float(clients_per_round)),
            "dropout-tolerance": repr(float(dropout_tolerance)),
            "delta": repr(float(delta)),
            "local-epochs": str(int(local_epochs)),
            "batch-size": str(int(batch_size)),
            "local-lr": repr(float(local_lr)),
            "min-nodes": str(len(self._clients)),
            "seed": str(int(seed)),
            "round-timeout": repr(float(round_timeout)),
            "result-file": json.dumps(str(result)),
            "test-file": json.dumps(str(self.workdir / "data" / "test.npz")),
        }
        command = [
            self._binary("flwr"),
            "run",
            str(self.workdir / "app"),
            "deployment",
            "--run-config",
            " ".join(f"{k}={v}" for k, v in settings.items()),
        ]
        log = self.workdir / "logs" / f"flwr-run{self._runs}.log"
        with log.open("wb") as out:
            client = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=self.workdir,
                start_new_session=True,
            )
        self._submissions[result] = (client, log)
        return result

    def wait(self, result: Path, *, timeout: float = 300.0) -> dict[str, Any]:
        """Wait (at most ``timeout`` seconds) for a submitted run's result; return it."""
        deadline = time.monotonic() + check_positive(timeout, "timeout")
        if result in self._submissions:  # the `flwr run` client submitting it must succeed
            client, log = self._submissions.pop(result)
            try:
                code = client.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(client.pid, signal.SIGKILL)
                client.wait(timeout=5.0)
                raise DeploymentError(f"flwr run did not return in time: see {log}.") from None
            if code != 0:
                raise DeploymentError(f"flwr run failed ({code}): see {log}.")
        while time.monotonic() < deadline:
            if result.exists():
                loaded: dict[str, Any] = json.loads(result.read_text())
                return loaded
            if self._processes and self._processes[0].poll() is not None:
                raise DeploymentError(f"flower-superlink exited: see {self.workdir / 'logs'}.")
            time.sleep(0.5)
        raise DeploymentError(
            f"the run did not finish in {timeout:g} s: see the logs in {self.workdir / 'logs'}."
        )

    def run(self, *, timeout: float = 300.0, **settings: Any) -> dict[str, Any]:
        """Submit one run (:meth:`submit`'s parameters) and wait for its result.

        Returns
        -------
        dict
            ``mode``, ``nodes``, ``history`` (per round: ``round``, ``clients``,
            ``epsilon``), ``epsilon``, ``delta``, ``sigma``, ``sensitivity``, ``grid_bits``,
            ``node_epsilons`` and the final model's test ``accuracy``.
        """
        return self.wait(self.submit(**settings), timeout=timeout)
