"""DPFedAvgStrategy's trust models in process: local and distributed DP, dropouts, accounting."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flwr")
pytest.importorskip("cryptography")

from flwr.app import (  # noqa: E402
    Array,
    ArrayRecord,
    ConfigRecord,
    Error,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)

from dpcurator.accounting import (  # noqa: E402
    GaussianEvent,
    PLDAccountant,
    PoissonSampledEvent,
    ZCDPAccountant,
    make_accountant,
)
from dpcurator.errors import BudgetExceededError, InvalidParameterError  # noqa: E402
from dpcurator.learn._distributed import ddg_event, share_sigma  # noqa: E402
from dpcurator.learn._flower import DPFedAvgStrategy, InProcessGrid  # noqa: E402
from dpcurator.learn._flower_client import dp_client_reply, flat_update  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402

Handler = Callable[[Message], Message]


@pytest.fixture(autouse=True)
def quiet() -> object:
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield
    logger.setLevel(level)


def private_client(delta: np.ndarray, seed: int, *, fail_train: bool = False) -> Handler:
    """A client whose update is ``delta``; answers every private-mode message (or fails)."""
    keys: dict[str, object] = {}
    source = InsecureSeededSource(seed)

    def handle(message: Message) -> Message:
        if message.metadata.message_type == MessageType.QUERY:
            return dp_client_reply(message, keys=keys, source=source)
        if fail_train:  # drops out after the key exchange
            return Message(Error(code=0, reason="offline"), reply_to=message)
        received = message.content.array_records["arrays"]
        trained = ArrayRecord({"w": Array(received["w"].numpy() + delta.astype(np.float32))})
        return dp_client_reply(message, trained, keys=keys, source=source)

    return handle


def run_round(
    strategy: DPFedAvgStrategy, handlers: dict[int, Handler], w: np.ndarray, server_round: int = 1
) -> tuple[np.ndarray | None, InProcessGrid]:
    grid = InProcessGrid(handlers)
    arrays = ArrayRecord({"w": Array(w.astype(np.float32))})
    messages = strategy.configure_train(server_round, arrays, ConfigRecord(), grid)
    new, metrics = strategy.aggregate_train(server_round, grid.send_and_receive(messages))
    assert metrics is not None and metrics["epsilon"] == strategy.epsilon()
    return (None if new is None else new["w"].numpy().astype(np.float64)), grid


def test_distributed_round_releases_the_clipped_mean_with_a_dropout_unmasked() -> None:
    d = 8
    deltas = {node: np.full(d, 0.1 * node) for node in range(1, 6)}
    handlers = {node: private_client(v, node) for node, v in deltas.items()}
    handlers[6] = private_client(np.full(d, 50.0), 6, fail_train=True)  # keys, then gone
    strategy = DPFedAvgStrategy(
        clip_norm=1.0,
        noise_multiplier=0.05,
        clients_per_round=6,
        mode="distributed",
        dropout_tolerance=0.25,
        source=InsecureSeededSource(0),
    )
    w = np.zeros(d)
    new, _ = run_round(strategy, handlers, w)
    assert new is not None

    def clipped(v: np.ndarray) -> np.ndarray:
        return v * min(1.0, 1.0 / float(np.linalg.norm(v)))

    expected = sum(clipped(v) for v in deltas.values()) / 5  # the survivors' mean
    noise = 0.05 * 1.0 / 5 * np.sqrt(6 / 5)  # sigma_total sqrt(need / survivors) / count
    assert np.abs(new - expected).max() < 6 * noise + 1e-4
    # The dropped client is charged nothing; each survivor one DDG event for 5 shares.
    assert sorted(strategy.node_epsilons()) == [1, 2, 3, 4, 5]
    share = share_sigma(strategy.sigma_, 5)  # need = ceil(0.75 * 6) = 5
    event = ddg_event(sigma=share, sensitivity=strategy.sensitivity_, shares=5, dimension=d)
    expected_eps = ZCDPAccountant().compose(event).get_epsilon(1e-5)
    assert strategy.history_[-1].clients == 5
    assert strategy.history_[-1].epsilon == expected_eps
    assert set(strategy.node_epsilons().values()) == {expected_eps}
    # Negative control: had the accountant charged the noise of all 6 sampled shares, it
    # would report a smaller epsilon than the round's true one.
    optimistic = ddg_event(sigma=share, sensitivity=strategy.sensitivity_, shares=6, dimension=d)
    assert ZCDPAccountant().compose(optimistic).get_epsilon(1e-5) < expected_eps


def test_too_many_dropouts_abandon_the_round_without_spending() -> None:
    d = 4
    handlers = {node: private_client(np.ones(d), node) for node in range(1, 4)}
    handlers[4] = private_client(np.ones(d), 4, fail_train=True)
    strategy = DPFedAvgStrategy(
        clip_norm=1.0,
        noise_multiplier=1.0,
        clients_per_round=4,
        mode="distributed",
        source=InsecureSeededSource(1),
    )
    new, _ = run_round(strategy, handlers, np.zeros(d))
    assert new is None  # the global model stays
    assert strategy.epsilon() == 0.0 and strategy.node_epsilons() == {}
    assert strategy.history_[-1].clients == 0


def test_the_server_only_ever_holds_masked_vectors_in_distributed_mode() -> None:
    d = 16
    seen: list[Message] = []
    handlers: dict[int, Handler] = {}
    for node in range(1, 4):
        inner = private_client(np.full(d, 0.01), node)

        def spy(message: Message, inner: Handler = inner) -> Message:
            reply = inner(message)
            seen.append(reply)
            return reply

        handlers[node] = spy
    strategy = DPFedAvgStrategy(
        clip_norm=1.0,
        noise_multiplier=1.0,
        clients_per_round=3,
        mode="distributed",
        source=InsecureSeededSource(2),
    )
    run_round(strategy, handlers, np.zeros(d))
    payloads = [
        record[name].numpy()
        for reply in seen
        for record in reply.content.array_records.values()
        for name in record
    ]
    assert payloads and all(p.dtype == np.uint64 for p in payloads)  # masked residues only
    assert all(int(np.abs(p.astype(np.float64)).max()) > 2**20 for p in payloads)


def test_local_mode_charges_each_message_and_reports_the_worst_node() -> None:
    d = 5
    handlers = {node: private_client(np.full(d, 0.2), node) for node in range(1, 5)}
    strategy = DPFedAvgStrategy(
        clip_norm=1.0,
        noise_multiplier=2.0,
        clients_per_round=2,
        mode="local",
        source=InsecureSeededSource(3),
    )
    w = np.zeros(d)
    for server_round in (1, 2, 3):
        new, _ = run_round(strategy, handlers, w, server_round)
        assert new is not None
        w = new
    event = GaussianEvent(sigma=strategy.sigma_, sensitivity=strategy.sensitivity_)
    assert strategy.sigma_ == pytest.approx(2.0 * strategy.sensitivity_)  # Delta_local = 2 Delta
    for node, epsilon in strategy.node_epsilons().items():
        rounds = sum(1 for e in strategy._ledgers[node].values() for _ in range(e))
        assert epsilon == PLDAccountant().compose(event, rounds).get_epsilon(1e-5)
    assert strategy.epsilon() == max(strategy.node_epsilons().values())
    assert [r.epsilon for r in strategy.history_] == sorted(r.epsilon for r in strategy.history_)


def test_accountant_epsilon_equals_the_accounting_layer_in_every_mode() -> None:
    # The epsilon the strategy reports after each round is what dpcurator's accountant gives
    # for the event it says it accounted (privacy_event_), and, in central mode, for the
    # events computed independently from the public parameters.
    for mode in ("central", "local", "distributed"):
        handlers = {node: private_client(np.full(3, 0.3), node) for node in range(1, 5)}
        strategy = DPFedAvgStrategy(
            clip_norm=1.0,
            noise_multiplier=1.5,
            clients_per_round=4,
            mode=mode,
            source=InsecureSeededSource(4),
        )
        if mode == "central":  # central clients send their models
            handlers = {node: central_client(np.full(3, 0.3)) for node in range(1, 5)}
        w = np.zeros(3)
        for server_round in (1, 2):
            new, _ = run_round(strategy, handlers, w, server_round)
            assert new is not None
            w = new
            name = {"central": "pld", "local": "pld", "distributed": "zcdp"}[mode]
            layer = make_accountant(name).compose(strategy.privacy_event_).get_epsilon(1e-5)
            assert strategy.history_[-1].epsilon == pytest.approx(layer, rel=1e-12)
        if mode == "central":
            step = PoissonSampledEvent(
                1.0, GaussianEvent(sigma=strategy.sigma_, sensitivity=strategy.sensitivity_)
            )
            assert strategy.epsilon() == PLDAccountant().compose(step, 2).get_epsilon(1e-5)


def central_client(delta: np.ndarray) -> Handler:
    def handle(message: Message) -> Message:
        received = message.content.array_records["arrays"]["w"].numpy()
        arrays = ArrayRecord({"w": Array((received + delta).astype(np.float32))})
        content = RecordDict({"arrays": arrays, "metrics": MetricRecord({"num-examples": 1})})
        return Message(content, reply_to=message)

    return handle


def test_budget_and_parameters_in_private_modes() -> None:
    handlers = {node: private_client(np.zeros(3), node) for node in range(1, 4)}
    strategy = DPFedAvgStrategy(
        clip_norm=1.0,
        noise_multiplier=0.5,
        clients_per_round=3,
        mode="distributed",
        max_epsilon=1.0,
        source=InsecureSeededSource(5),
    )
    grid = InProcessGrid(handlers)
    arrays = ArrayRecord({"w": Array(np.zeros(3, dtype=np.float32))})
    with pytest.raises(BudgetExceededError, match="max_epsilon"):
        strategy.configure_train(1, arrays, ConfigRecord(), grid)
    assert strategy.epsilon() == 0.0
    with pytest.raises(InvalidParameterError, match="mode"):
        DPFedAvgStrategy(clip_norm=1.0, noise_multiplier=1.0, clients_per_round=1, mode="x")


def test_flat_update_refuses_mismatched_arrays() -> None:
    a = ArrayRecord({"w": Array(np.zeros(2))})
    b = ArrayRecord({"v": Array(np.zeros(2))})
    with pytest.raises(InvalidParameterError, match="match"):
        flat_update(a, b)
