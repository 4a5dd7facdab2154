"""The PyTorch trainers show their settings and what they spent, never an object address."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

from dpcurator.learn import DPSGD, DPFedAvg, FedAvg  # noqa: E402
from dpcurator.noise import InsecureSeededSource  # noqa: E402

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 2))


def _dpsgd() -> DPSGD:
    model = _model()
    return DPSGD(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=torch.nn.functional.cross_entropy,
        max_grad_norm=1.0,
        batch_size=20,
        noise_multiplier=1.0,
        source=InsecureSeededSource(0),
        progress=False,
    )


def test_dpsgd_repr_before_and_after_training() -> None:
    trainer = _dpsgd()
    text = repr(trainer)
    assert not ADDRESS.search(text)
    assert text == (
        "DPSGD(model=Sequential, optimizer=SGD, max_grad_norm=1.0, batch_size=20, epochs=1, "
        "noise_multiplier=1.0, delta=1e-05, accountant='pld', noise='secure', steps=0)"
    )
    assert "not trained yet" in trainer._repr_html_()
    X = torch.randn(100, 4, generator=torch.Generator().manual_seed(1))
    trainer.fit(X, (X[:, 0] > 0).long())
    text = repr(trainer)
    assert f"steps={trainer.steps_}, epsilon={trainer.epsilon_:.6g})" in text
    page = trainer._repr_html_()
    assert f"<td>epsilon</td><td>{trainer.epsilon_:.6g}</td>" in page
    assert f"after {trainer.steps_:,} steps" in page and not ADDRESS.search(page)


def test_federated_reprs_name_their_settings() -> None:
    loss = torch.nn.functional.cross_entropy
    plain = FedAvg(_model(), loss_fn=loss, rounds=2, source=InsecureSeededSource(0))
    private = DPFedAvg(
        _model(),
        loss_fn=loss,
        rounds=2,
        clients_per_round=2,
        clip_norm=1.0,
        noise_multiplier=1.0,
        source=InsecureSeededSource(0),
        progress=False,
    )
    for trainer in (plain, private):
        assert not ADDRESS.search(repr(trainer))
        assert repr(trainer).startswith(f"{type(trainer).__name__}(model=Sequential, rounds=2")
        assert repr(trainer).endswith("rounds_done=0)")
    assert "not private" in plain._repr_html_()
    assert "clip_norm=1.0" in repr(private) and "not trained yet" in private._repr_html_()
    clients = [(torch.randn(4, 4), torch.zeros(4, dtype=torch.long)) for _ in range(4)]
    private.fit(clients)
    assert repr(private).endswith(f"rounds_done=2, epsilon={private.history_[-1].epsilon:.6g})")
    assert "after 2 rounds" in private._repr_html_()
