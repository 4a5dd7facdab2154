"""The Flower strategy: server-side clipping, grid noise and accounting, run in process."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("flwr")

from flwr.app import (  # noqa: E402
    Array,
    ArrayRecord,
    ConfigRecord,
    Error,
    Message,
    MetricRecord,
    RecordDict,
)

from dpcurator.accounting import GaussianEvent, PLDAccountant, PoissonSampledEvent  # noqa: E402
from dpcurator.errors import BudgetExceededError, InvalidParameterError  # noqa: E402
from dpcurator.learn._flower import DPFedAvgStrategy, InProcessGrid, torch_client  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402

Handler = Callable[[Message], Message]


@pytest.fixture(autouse=True)
def quiet() -> object:
    """Flower's INFO logging off (the package's conftest runs torch on one thread)."""
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield
    logger.setLevel(level)


def shifting(delta: np.ndarray) -> Handler:
    """A client whose update is always ``delta`` (the received weights plus delta)."""

    def handle(message: Message) -> Message:
        received = message.content.array_records["arrays"]["w"].numpy()
        arrays = ArrayRecord({"w": Array((received + delta).astype(np.float32))})
        content = RecordDict({"arrays": arrays, "metrics": MetricRecord({"num-examples": 1})})
        return Message(content, reply_to=message)

    return handle


def failing(message: Message) -> Message:
    return Message(Error(code=0, reason="offline"), reply_to=message)


def one_round(
    strategy: DPFedAvgStrategy, handlers: dict[int, Handler], w: np.ndarray
) -> np.ndarray:
    grid = InProcessGrid(handlers)
    arrays = ArrayRecord({"w": Array(w.astype(np.float32))})
    messages = strategy.configure_train(1, arrays, ConfigRecord(), grid)
    replies = grid.send_and_receive(messages)
    new, metrics = strategy.aggregate_train(1, replies)
    assert new is not None and metrics is not None
    assert metrics["epsilon"] == strategy.epsilon()
    return new["w"].numpy().astype(np.float64)


def test_strategy_aggregates_clipped_updates_over_the_expected_count() -> None:
    # All nodes sampled (m = K), tiny noise: the new model is w + sum_k clip(delta_k) / m.
    d, clip = 6, 1.0
    deltas = [np.full(d, 10.0), np.full(d, 0.01), np.zeros(d), -np.full(d, 3.0)]
    handlers = {node: shifting(delta) for node, delta in enumerate(deltas, start=1)}
    strategy = DPFedAvgStrategy(
        clip_norm=clip, noise_multiplier=0.01, clients_per_round=4, source=InsecureSeededSource(0)
    )
    w = np.linspace(-1, 1, d)
    new = one_round(strategy, handlers, w)

    def clipped(v: np.ndarray) -> np.ndarray:
        norm = float(np.linalg.norm(v))
        return v * min(1.0, clip / norm) if norm > 0 else v

    expected = w + sum(clipped(v) for v in deltas) / 4
    noise_scale = 0.01 * clip / 4  # per coordinate
    assert np.abs(new - expected).max() < 6 * noise_scale + 1e-6
    unclipped = w + sum(deltas) / 4  # negative control: the raw average is far away
    assert np.abs(new - unclipped).max() > 1.0


@pytest.mark.statistical
def test_strategy_noise_matches_sigma_s_over_m() -> None:
    # Zero updates (and failed nodes, which count as zero): the change is noise of standard
    # deviation z S / m per coordinate.
    d, clip, z, m = 4000, 0.5, 1.1, 3
    handlers: dict[int, Handler] = {1: shifting(np.zeros(d)), 2: failing}
    handlers.update({node: shifting(np.zeros(d)) for node in range(3, 7)})
    strategy = DPFedAvgStrategy(
        clip_norm=clip, noise_multiplier=z, clients_per_round=m, source=InsecureSeededSource(2)
    )
    moved = one_round(strategy, handlers, np.zeros(d))
    sigma = strategy.sigma_ * 2.0 ** -(strategy.grid_bits_ or 0) / m
    assert sigma == pytest.approx(z * clip / m, rel=1e-4)

    def looks_like(s: float) -> bool:
        n = moved.size
        return bool(
            abs(moved.std() / s - 1) < 5 / math.sqrt(2 * n)
            and abs(moved.mean()) < 5 * s / math.sqrt(n)
        )

    assert looks_like(sigma)
    assert not looks_like(sigma * 1.1)  # negative controls
    assert not looks_like(sigma / 1.1)


def test_a_round_without_replies_still_releases_noise() -> None:
    strategy = DPFedAvgStrategy(
        clip_norm=1.0, noise_multiplier=1.0, clients_per_round=1, source=InsecureSeededSource(4)
    )
    handlers: dict[int, Handler] = {node: failing for node in range(1, 5)}
    moved = one_round(strategy, handlers, np.zeros(50))
    assert np.abs(moved).max() > 0.1  # the model moved by noise alone
    assert strategy.history_[-1].clients == 0


def test_in_process_run_reports_epsilon_per_round_like_the_accountant() -> None:
    generator = torch.Generator().manual_seed(0)
    handlers = {}
    for node in range(1, 11):
        X = torch.randn(20, 2, generator=generator)
        handlers[node] = torch_client(
            torch.nn.Linear(2, 2),
            X,
            (X[:, 0] > 0).long(),
            loss_fn=torch.nn.functional.cross_entropy,
            lr=0.5,
            source=InsecureSeededSource(node),
        )
    strategy = DPFedAvgStrategy(
        clip_norm=1.0, noise_multiplier=1.5, clients_per_round=5, source=InsecureSeededSource(9)
    )
    result = strategy.start(
        grid=InProcessGrid(handlers),
        initial_arrays=ArrayRecord(torch.nn.Linear(2, 2).state_dict()),
        num_rounds=3,
    )
    assert [record.round for record in strategy.history_] == [1, 2, 3]
    for t, record in enumerate(strategy.history_, start=1):
        expected = (
            PLDAccountant()
            .compose(PoissonSampledEvent(0.5, GaussianEvent(sigma=1.5)), t)
            .get_epsilon(1e-5)
        )
        assert record.epsilon == pytest.approx(expected, rel=1e-6)
        assert result.train_metrics_clientapp[t]["epsilon"] == record.epsilon
    assert set(result.arrays.keys()) == {"weight", "bias"}


def test_budget_refuses_a_round_before_sampling() -> None:
    strategy = DPFedAvgStrategy(
        clip_norm=1.0,
        noise_multiplier=1.0,
        clients_per_round=2,
        max_epsilon=1.0,
        source=InsecureSeededSource(0),
    )
    grid = InProcessGrid({node: shifting(np.zeros(3)) for node in range(1, 5)})
    arrays = ArrayRecord({"w": Array(np.zeros(3, dtype=np.float32))})
    with pytest.raises(BudgetExceededError, match="max_epsilon"):
        strategy.configure_train(1, arrays, ConfigRecord(), grid)
    assert strategy.history_ == [] and strategy.epsilon() == 0.0


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"clip_norm": 0.0}, "clip_norm"),
        ({"noise_multiplier": -1.0}, "noise_multiplier"),
        ({"clients_per_round": 0}, "clients_per_round"),
        ({"delta": 0.0}, "delta"),
        ({"max_epsilon": 0.0}, "max_epsilon"),
        ({"accountant": "basic"}, "accountant"),
        ({"noise": "numpy"}, "noise"),
    ],
)
def test_bad_parameters_raise(options: dict[str, object], name: str) -> None:
    settings: dict[str, object] = {
        "clip_norm": 1.0,
        "noise_multiplier": 1.0,
        "clients_per_round": 2,
    }
    settings.update(options)
    with pytest.raises(InvalidParameterError) as info:
        DPFedAvgStrategy(**settings)  # type: ignore[arg-type]
    assert info.value.name == name


def test_more_clients_per_round_than_nodes_is_refused() -> None:
    strategy = DPFedAvgStrategy(clip_norm=1.0, noise_multiplier=1.0, clients_per_round=5)
    grid = InProcessGrid({1: failing, 2: failing})
    arrays = ArrayRecord({"w": Array(np.zeros(3, dtype=np.float32))})
    with pytest.raises(InvalidParameterError, match="clients_per_round"):
        strategy.configure_train(1, arrays, ConfigRecord(), grid)
