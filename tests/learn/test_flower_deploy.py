"""A real Flower deployment on 127.0.0.1: SuperLink, SuperNodes, ``flwr run``, three trust models.

One deployment (one SuperLink and three SuperNodes, each a process of its own) serves every
test here; the three runs (one per trust model) are submitted with ``flwr run`` at once and
served in turn, each for a bounded number of rounds, and each ``ServerApp`` writes its result
and exits by itself. SuperNode 2 drops out
of round 1 of every run (it answers the key exchange, then fails in training). Slow: Flower
starts a process per message.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("flwr")
pytest.importorskip("cryptography")
datasets = pytest.importorskip("sklearn.datasets")

from dpcurator.accounting import (  # noqa: E402
    GaussianEvent,
    PLDAccountant,
    PoissonSampledEvent,
    ZCDPAccountant,
)
from dpcurator.learn._distributed import ddg_event, share_sigma  # noqa: E402
from dpcurator.learn._flower_deploy import FlowerDeployment, _children  # noqa: E402

pytestmark = [pytest.mark.slow]

Z = 0.3
DROPS = {2: 1}  # SuperNode 2 fails in the training step of round 1


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlowerDeployment]:
    X, y = datasets.load_digits(return_X_y=True)
    X = X / 16.0
    clients = [(X[i:1500:3], y[i:1500:3]) for i in range(3)]  # three nodes
    workdir = tmp_path_factory.mktemp("flower")
    with FlowerDeployment(
        clients, (X[1500:], y[1500:]), drop_round=DROPS, workdir=workdir
    ) as running:
        pids = [p.pid for p in running._processes]
        yield running
        pids += [c for pid in pids for c in _children(pid)]
    for pid in pids:  # every process the deployment started is gone
        assert not _alive(pid), f"process {pid} survived close()"


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        return False
    return "zombie" not in status.read_text().lower() and os.path.exists(f"/proc/{pid}")


ROUNDS = {"central": 2, "local": 1, "distributed": 1}


@pytest.fixture(scope="module")
def submitted(deployment: FlowerDeployment) -> dict[str, Path]:
    return {mode: submit(deployment, mode, rounds) for mode, rounds in ROUNDS.items()}


def submit(deployment: FlowerDeployment, mode: str, rounds: int) -> Path:
    return deployment.submit(
        mode=mode,
        rounds=rounds,
        clients_per_round=3,
        noise_multiplier=Z,
        dropout_tolerance=0.4,
        local_epochs=1,
        batch_size=10,
        local_lr=0.5,
        seed=7,
        round_timeout=150.0,
    )


def result_of(deployment: FlowerDeployment, submitted: dict[str, Path], mode: str) -> Any:
    return deployment.wait(submitted[mode], timeout=400.0)


def test_central_dp_across_processes(
    deployment: FlowerDeployment, submitted: dict[str, Path]
) -> None:
    result = result_of(deployment, submitted, "central")
    assert result["nodes"] == 3 and [h["round"] for h in result["history"]] == [1, 2]
    # Round 1: node 2 failed (a zero update); the guarantee does not depend on who answered.
    assert [h["clients"] for h in result["history"]] == [2, 3]
    step = PoissonSampledEvent(
        1.0, GaussianEvent(sigma=result["sigma"], sensitivity=result["sensitivity"])
    )
    for t, record in enumerate(result["history"], start=1):
        assert record["epsilon"] == PLDAccountant().compose(step, t).get_epsilon(1e-5)
    assert result["accuracy"] > 0.2  # ten classes: chance is 0.1


def test_local_dp_across_processes(
    deployment: FlowerDeployment, submitted: dict[str, Path]
) -> None:
    result = result_of(deployment, submitted, "local")
    assert [h["clients"] for h in result["history"]] == [2]
    event = GaussianEvent(sigma=result["sigma"], sensitivity=result["sensitivity"])
    expected = PLDAccountant().compose(event).get_epsilon(1e-5)
    # Only the two nodes whose messages left them are charged; the dropout is not.
    assert sorted(result["node_epsilons"].values()) == [expected, expected]
    assert result["history"][0]["epsilon"] == expected


def test_distributed_dp_with_secure_aggregation_and_a_dropout(
    deployment: FlowerDeployment, submitted: dict[str, Path]
) -> None:
    result = result_of(deployment, submitted, "distributed")
    history = result["history"]
    # 3 nodes exchanged keys, node 2 dropped after that, the survivors removed the masks they
    # shared with it and the sum of their 2 shares was released.
    assert [h["clients"] for h in history] == [2]
    d, delta = result["dimension"], result["sensitivity"]
    share = share_sigma(result["sigma"], math.ceil(0.6 * 3))
    event = ddg_event(sigma=share, sensitivity=delta, shares=2, dimension=d)
    expected = ZCDPAccountant().compose(event).get_epsilon(1e-5)
    assert history[0]["epsilon"] == expected == result["epsilon"]
    # Negative control: the noise of 3 shares (as if the dropout's share were in the sum)
    # would give a smaller epsilon than the one reported.
    optimistic = ddg_event(sigma=share, sensitivity=delta, shares=3, dimension=d)
    assert ZCDPAccountant().compose(optimistic).get_epsilon(1e-5) < expected
    # The dropped node is charged nothing; the two survivors the round.
    assert sorted(result["node_epsilons"].values()) == [expected, expected]
    assert 0.0 <= result["accuracy"] <= 1.0
