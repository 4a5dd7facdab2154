"""DP federated averaging simulation: user-level clipping and noise, epsilon per round."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dpcurator.accounting import (  # noqa: E402
    GaussianEvent,
    PLDAccountant,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpcurator.errors import InvalidParameterError  # noqa: E402
from dpcurator.learn._federated import DPFedAvg, FedAvg, local_sgd  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402
from tests.learn.conftest import zero_loss  # noqa: E402

F = torch.nn.functional


def blobs(count: int, size: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        X = torch.randn(size, 3, generator=generator)
        out.append((X, (X[:, 0] + 0.5 * X[:, 1] > 0).long()))
    return out


def server(model: torch.nn.Module, **kwargs: object) -> DPFedAvg:
    options: dict[str, object] = {
        "loss_fn": F.cross_entropy,
        "rounds": 3,
        "clients_per_round": 10,
        "clip_norm": 1.0,
        "noise_multiplier": 1.0,
        "source": InsecureSeededSource(0),
        "progress": False,
    }
    options.update(kwargs)
    return DPFedAvg(model, **options)  # type: ignore[arg-type]


def flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).double() for p in model.parameters()])


def std_ok(samples: np.ndarray, sigma: float) -> bool:
    """Sample std within 5 standard errors (sigma / sqrt(2n)) of sigma, mean within 5 too."""
    n = samples.size
    return bool(
        abs(samples.std() / sigma - 1.0) < 5.0 / math.sqrt(2.0 * n)
        and abs(samples.mean()) < 5.0 * sigma / math.sqrt(n)
    )


@pytest.mark.statistical
def test_server_noise_matches_user_level_sensitivity() -> None:
    # Zero updates: the global model moves by the noise alone, sigma_units 2**-k / (q W) per
    # coordinate, with sigma_units = z Delta and Delta ~ S 2**k (user-level sensitivity S).
    torch.manual_seed(0)
    model = torch.nn.Linear(100, 40)  # 4,040 parameters
    clip, z, m, count = 2.0, 0.8, 5, 20
    fed = server(
        model,
        loss_fn=zero_loss,
        rounds=2,
        clients_per_round=m,
        clip_norm=clip,
        noise_multiplier=z,
        source=InsecureSeededSource(3),
    )
    clients = [(torch.randn(4, 100), torch.zeros(4, dtype=torch.long)) for _ in range(count)]
    before = flat(model)
    fed.fit(clients)
    moved = (flat(model) - before).numpy() / math.sqrt(2.0)  # two rounds
    per_round = fed.sigma_ * 2.0**-fed.grid_bits_ / (fed.sampling_rate_ * fed.total_weight_)
    assert fed.total_weight_ == count and fed.sampling_rate_ == m / count
    assert per_round == pytest.approx(z * clip / m, rel=1e-4)
    assert std_ok(moved, per_round)
    assert not std_ok(moved, per_round * 1.1)  # negative controls
    assert not std_ok(moved, per_round / 1.1)


def test_each_client_update_is_clipped_to_the_user_level_bound() -> None:
    # One client, always sampled, a tiny noise: the global change is its clipped update.
    def run(clip: float) -> float:
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        fed = server(
            model,
            rounds=1,
            clients_per_round=1,
            clip_norm=clip,
            noise_multiplier=0.01,  # noise of norm about 0.01 S sqrt(8) on 8 parameters
            local_lr=50.0,  # a huge local step: the raw update is far above the clip
            local_epochs=3,
        )
        before = flat(model)
        fed.fit(blobs(1, 30))
        return float(torch.linalg.vector_norm(flat(model) - before))

    assert run(0.5) == pytest.approx(0.5, rel=0.15)
    assert run(1e6) > 10.0  # negative control: without an active clip the update is large


def test_epsilon_is_reported_every_round_and_equals_the_accountant() -> None:
    fed = server(torch.nn.Linear(3, 2), rounds=4, clients_per_round=8, noise_multiplier=1.2)
    fed.fit(blobs(40, 10))
    epsilons = [record.epsilon for record in fed.history_]
    assert [record.round for record in fed.history_] == [1, 2, 3, 4]
    assert all(a < b for a, b in itertools.pairwise(epsilons))
    for t, record in enumerate(fed.history_, start=1):
        expected = (
            PLDAccountant()
            .compose(PoissonSampledEvent(0.2, GaussianEvent(sigma=1.2)), t)
            .get_epsilon(1e-5)
        )
        assert record.epsilon == pytest.approx(expected, rel=1e-6)
    assert fed.epsilon_ == epsilons[-1]
    event = fed.privacy_event_
    assert isinstance(event, SelfComposedEvent) and event.count == 4


def test_target_epsilon_is_met_in_central_and_local_modes() -> None:
    central = server(torch.nn.Linear(3, 2), rounds=5, noise_multiplier=None, target_epsilon=2.0)
    central.fit(blobs(30, 10))
    assert 1.9 < central.epsilon_ <= 2.0
    local = server(
        torch.nn.Linear(3, 2), rounds=5, noise_multiplier=None, target_epsilon=2.0, mode="local"
    )
    local.fit(blobs(30, 10))
    # Local DP: the client that took part most often spends at most the target.
    most = int(local._participations.max())
    assert 1 <= most <= 5
    assert local.epsilon_ <= 2.0
    assert local.sensitivity_ == pytest.approx(2 * central.sensitivity_)
    if most == 5:
        assert local.epsilon_ > 1.99


@pytest.mark.statistical
def test_local_mode_noises_each_client_update() -> None:
    # Zero updates, all 9 clients sampled: the average of 9 local noises has std sigma / 3.
    torch.manual_seed(0)
    model = torch.nn.Linear(100, 30)  # 3,030 parameters
    fed = server(
        model,
        loss_fn=zero_loss,
        rounds=1,
        clients_per_round=9,
        noise_multiplier=0.5,
        mode="local",
        source=InsecureSeededSource(5),
    )
    clients = [(torch.randn(2, 100), torch.zeros(2, dtype=torch.long)) for _ in range(9)]
    before = flat(model)
    fed.fit(clients)
    moved = (flat(model) - before).numpy()
    sigma = fed.sigma_ * 2.0**-fed.grid_bits_ / 3.0
    assert sigma == pytest.approx(0.5 * 2 * 1.0 / 3.0, rel=1e-4)  # z * 2S / sqrt(9)
    assert std_ok(moved, sigma)
    assert not std_ok(moved, sigma * 1.1)


def test_fedavg_and_dp_fedavg_learn() -> None:
    clients = blobs(60, 20, seed=1)
    X_test, y_test = blobs(1, 500, seed=2)[0]
    torch.manual_seed(0)
    baseline = torch.nn.Linear(3, 2)
    FedAvg(baseline, loss_fn=F.cross_entropy, rounds=10, fraction=0.2, local_lr=0.5).fit(clients)
    private = torch.nn.Linear(3, 2)
    server(private, rounds=15, clients_per_round=30, noise_multiplier=0.7, local_lr=0.5).fit(
        clients
    )
    for model in (baseline, private):
        accuracy = float((model(X_test).argmax(1) == y_test).float().mean())
        assert accuracy > 0.85


def test_local_sgd_trains_in_place() -> None:
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    X = torch.ones(8, 1)
    local_sgd(model, X, 3 * X, loss_fn=F.mse_loss, epochs=40, batch_size=3, lr=0.1)
    assert float(model.weight.detach()) == pytest.approx(3.0, abs=1e-3)


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"clip_norm": 0.0}, "clip_norm"),
        ({"clients_per_round": 0}, "clients_per_round"),
        ({"rounds": 0}, "rounds"),
        ({"noise_multiplier": None}, "noise_multiplier"),
        ({"noise_multiplier": None, "target_epsilon": -1.0}, "target_epsilon"),
        ({"mode": "shuffled"}, "mode"),
        ({"accountant": "zcdp"}, "accountant"),
        ({"noise": "fast"}, "noise"),
        ({"weight_cap": -1.0}, "weight_cap"),
        ({"server_momentum": 1.0}, "server_momentum"),
        ({"local_lr": 0.0}, "local_lr"),
    ],
)
def test_bad_parameters_raise(options: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        server(torch.nn.Linear(2, 2), **options)
    assert info.value.name == name


def test_bad_clients_raise() -> None:
    fed = server(torch.nn.Linear(3, 2), clients_per_round=5)
    with pytest.raises(InvalidParameterError, match="clients"):
        fed.fit([])
    with pytest.raises(InvalidParameterError, match="clients_per_round"):
        fed.fit(blobs(3, 5))
    X = torch.randn(4, 3)
    with pytest.raises(InvalidParameterError, match="target"):
        fed.fit([(X, torch.zeros(3, dtype=torch.long))] * 6)
    with pytest.raises(InvalidParameterError, match="fit"):
        _ = server(torch.nn.Linear(3, 2)).privacy_event_
