"""Tests of ``dpcurator.audit._dpsgd``: the one-run canary audit of DP-SGD, and its suite case.

The audited runs train a small MLP on 300 UCI Adult rows (three numeric columns, public
scalings) with full batches, so the canary scores are exactly Gaussian: in units of
``lr C / L``, ``N(T, T z^2)`` for an included canary and ``N(0, T z^2)`` for an excluded one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from dpcurator.audit._suite import (
    AUDIT_CASES,
    ONE_RUN_CASES,
    OneRunCase,
    audit_case,
    register_audit_case,
    run_audit_suite,
    suite_case_names,
)
from dpcurator.datasets import load_adult
from dpcurator.errors import InvalidParameterError
from dpcurator.noise import InsecureSeededSource

torch = pytest.importorskip("torch")
from dpcurator.audit._dpsgd import DPSGDAudit, audit_dpsgd  # noqa: E402  (needs torch)

STEPS = 10
LR = 0.1


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Small models: one thread is fastest, and fair to the other tests on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def adult() -> tuple[Any, Any]:
    frame = load_adult().iloc[:300]
    scaled = np.column_stack(
        [frame["age"] / 90.0, frame["education_num"] / 16.0, frame["hours_per_week"] / 99.0]
    )
    labels = (frame["income"] == ">50K").to_numpy().astype(np.int64)
    return torch.tensor(scaled, dtype=torch.float32), torch.tensor(labels)


def mlp() -> Any:
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def run(adult: tuple[Any, Any], seed: int, **options: Any) -> DPSGDAudit:
    settings: dict[str, Any] = {
        "loss_fn": torch.nn.functional.cross_entropy,
        "max_grad_norm": 1.0,
        "epochs": STEPS,
        "canaries": 1000,
        "optimizer": lambda params: torch.optim.SGD(params, lr=LR),
        "source": InsecureSeededSource(seed),
    }
    settings.update(options)
    return audit_dpsgd(mlp, *adult, **settings)


@pytest.fixture(scope="module")
def honest(adult: tuple[Any, Any]) -> DPSGDAudit:
    return run(adult, seed=41, target_epsilon=2.0)


@pytest.fixture(scope="module")
def faulty(adult: tuple[Any, Any], honest: DPSGDAudit) -> DPSGDAudit:
    # The planted fault: the noise multiplier divided by 4, the run still claims honest's epsilon.
    return run(
        adult,
        seed=42,
        noise_multiplier=honest.noise_multiplier / 4,
        epsilon_claimed=honest.epsilon_claimed,
    )


def noise_sd(audit: DPSGDAudit) -> float:
    """Theory: the sd of a canary score, ``lr C / L sqrt(T) z`` (``L`` every example)."""
    return (
        LR
        * 1.0
        / (300 + int(audit.canary.included.sum()))
        * math.sqrt(STEPS)
        * (audit.noise_multiplier)
    )


@pytest.mark.statistical
def test_honest_run_is_consistent_and_the_audit_has_power(honest: DPSGDAudit) -> None:
    assert honest.steps == STEPS and honest.sampling_rate == 1.0
    assert honest.epsilon_claimed <= 2.0 and honest.epsilon_claimed == pytest.approx(2.0, rel=0.01)
    # Valid with probability >= 0.95 (Steinke et al., Theorem 3.3) if DPSGD is what it claims.
    assert honest.consistent
    # Power: at mu = sqrt(T) / z ~ 0.5, 1,000 canaries and 50 guesses at each end certify about
    # a quarter to a half of epsilon = 2 (simulated Gaussian scores: median 0.6, 5 % quantile
    # 0.2): well above zero.
    assert honest.epsilon_lower_bound > 0.2
    assert honest.canary.guesses == 100 and honest.canary.canaries == 1000


@pytest.mark.statistical
def test_canary_scores_are_the_gaussian_of_the_theory(
    honest: DPSGDAudit, faulty: DPSGDAudit
) -> None:
    # Included: lr C / L (T + N(0, T z^2)); excluded: lr C / L N(0, T z^2). Opacus's "zero the
    # signal, measure the noise" check, on the coordinates that only canaries touch.
    scores, included = honest.canary.scores, honest.canary.included
    sd = noise_sd(honest)
    unit = sd / (math.sqrt(STEPS) * honest.noise_multiplier)
    out, inn = scores[~included], scores[included]
    # Sample sd of ~500 normals: relative sd 1 / sqrt(2 * 500) = 3.2 %; 4 of them: 13 %.
    assert out.std() == pytest.approx(sd, rel=0.13)
    assert inn.std() == pytest.approx(sd, rel=0.13)
    # Means: 0 and T units, each within 4 standard errors sd / sqrt(500).
    assert abs(out.mean()) < 4 * sd / math.sqrt(out.size)
    assert inn.mean() == pytest.approx(STEPS * unit, abs=4 * sd / math.sqrt(inn.size))
    # Negative control: the faulty run's spread is a quarter of the claim's, and the check
    # that passes above fails on it.
    faulty_out = faulty.canary.scores[~faulty.canary.included]
    assert faulty_out.std() == pytest.approx(noise_sd(faulty), rel=0.13)
    assert faulty_out.std() != pytest.approx(noise_sd(honest), rel=0.13)


@pytest.mark.statistical
def test_planted_fault_is_caught(honest: DPSGDAudit, faulty: DPSGDAudit) -> None:
    assert faulty.noise_multiplier == pytest.approx(honest.noise_multiplier / 4)
    assert faulty.epsilon_claimed == honest.epsilon_claimed
    assert not faulty.consistent and faulty.epsilon_lower_bound > honest.epsilon_claimed
    assert faulty.ratio > 1.0


@pytest.mark.statistical
def test_subsampled_run_is_consistent(adult: tuple[Any, Any]) -> None:
    # Poisson sampling (q < 1) with DP-Adam: still a valid audit, of a smaller truth.
    audit = run(
        adult,
        seed=43,
        batch_size=200,
        target_epsilon=2.0,
        optimizer=lambda params: torch.optim.Adam(params, lr=0.01),
    )
    assert 0.0 < audit.sampling_rate < 1.0
    assert audit.consistent and audit.epsilon_claimed <= 2.0


@pytest.mark.statistical
def test_suite_runs_dpsgd_only_when_asked() -> None:
    assert "dpsgd" in ONE_RUN_CASES and "dpsgd" not in AUDIT_CASES
    assert "dpsgd" not in suite_case_names()
    assert suite_case_names(one_run=True)[-1] == "dpsgd"
    [result] = run_audit_suite(names=["dpsgd"], quick=True, source=InsecureSeededSource(44))
    assert result.name == "dpsgd" and result.samples == 1
    assert result.consistent and result.claimed_epsilon <= 1.0
    assert "1000 canaries" in result.event


@pytest.fixture
def broken_one_run() -> Iterator[OneRunCase]:
    def planted(quick: bool, confidence: float, source: Any) -> DPSGDAudit:
        frame = load_adult().iloc[:100]
        features = torch.tensor(frame[["age"]].to_numpy() / 90.0, dtype=torch.float32)
        labels = torch.tensor((frame["income"] == ">50K").to_numpy().astype(np.int64))
        return audit_dpsgd(
            lambda: torch.nn.Linear(1, 2),
            features,
            labels,
            loss_fn=torch.nn.functional.cross_entropy,
            max_grad_norm=1.0,
            epochs=STEPS,
            noise_multiplier=1.5,  # the epsilon of z = 6 claimed below
            epsilon_claimed=2.11,
            confidence=confidence,
            source=source,
        )

    case = OneRunCase("broken_dpsgd_test", "DP-SGD at z = 1.5 claimed at z = 6", planted)
    register_audit_case(case)
    yield case
    ONE_RUN_CASES.pop(case.name)


@pytest.mark.statistical
def test_suite_flags_a_broken_one_run_case(broken_one_run: OneRunCase) -> None:
    result = audit_case(broken_one_run, source=InsecureSeededSource(45))
    assert not result.consistent and result.epsilon_lower_bound > 2.11
    with pytest.raises(InvalidParameterError, match="already registered"):
        register_audit_case(broken_one_run)


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"canaries": 1}, "canaries"),
        ({"canaries": 10, "guesses": 6}, "guesses"),
        ({"epsilon_claimed": -1.0}, "epsilon_claimed"),
        ({"noise_multiplier": None}, "noise_multiplier"),
    ],
)
def test_bad_parameters_name_the_argument(
    adult: tuple[Any, Any], options: dict[str, Any], name: str
) -> None:
    settings = {"noise_multiplier": 1.0, **options}
    with pytest.raises(InvalidParameterError, match=name):
        run(adult, seed=0, **settings)


def test_bad_model_and_data_are_refused(adult: tuple[Any, Any]) -> None:
    features, labels = adult
    common: dict[str, Any] = {
        "loss_fn": torch.nn.functional.cross_entropy,
        "max_grad_norm": 1.0,
        "noise_multiplier": 1.0,
    }
    with pytest.raises(InvalidParameterError, match="model_factory"):
        audit_dpsgd("mlp", features, labels, **common)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="y"):
        audit_dpsgd(mlp, features, labels[:10], **common)
    with pytest.raises(InvalidParameterError, match="run"):
        OneRunCase("x", "d", "not callable")  # type: ignore[arg-type]
