"""Tests of ``dpcurator.audit._suite``: every mechanism of the project, claimed vs certified."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from dpcurator.audit import (
    AUDIT_CASES,
    AuditCase,
    SuiteResult,
    audit_case,
    register_audit_case,
    run_audit_suite,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import randomized_response
from dpcurator.noise import InsecureSeededSource, RandomSource

EXPECTED = {
    "laplace",
    "geometric",
    "gaussian",
    "discrete_gaussian",
    "randomized_response",
    "randomized_response_4",
    "exponential",
    "report_noisy_max",
    "above_threshold",
    "local_grr",
    "local_binary_rr",
    "local_sue",
    "local_oue",
    "local_olh",
    "local_hadamard",
    "local_duchi_mean",
    "local_piecewise_mean",
}


def test_registry_covers_the_project_mechanisms() -> None:
    assert set(AUDIT_CASES) >= EXPECTED
    for case in AUDIT_CASES.values():
        assert 0 < case.claimed_epsilon <= 1.0  # each is configured at epsilon = 1
        assert case.quick_samples <= case.samples


@pytest.mark.statistical
def test_quick_suite_is_consistent_and_informative() -> None:
    seen: list[str] = []
    results = run_audit_suite(
        quick=True, source=InsecureSeededSource(31), on_result=lambda r: seen.append(r.name)
    )
    assert seen == list(AUDIT_CASES)
    for result in results:
        # With probability >= 0.95 no bound exceeds its true epsilon (Bonferroni over the
        # cases); the mechanisms are calibrated at or below their claims, so a bound above one
        # would be a bug.
        assert result.consistent, result
        assert result.confidence == pytest.approx(1 - 0.05 / len(results))
        # The quick audit still has power: well above zero everywhere (the Gaussians, whose
        # best events are rare tails at delta = 1e-5, are the weakest).
        assert result.ratio > 0.4, result
        assert result.samples == AUDIT_CASES[result.name].quick_samples


@pytest.mark.statistical
@pytest.mark.parametrize("name", ["laplace", "randomized_response", "exponential", "local_oue"])
def test_full_audits_are_tight(name: str) -> None:
    result = audit_case(AUDIT_CASES[name], source=InsecureSeededSource(32))
    assert 0.7 <= result.ratio <= 1.0, result


def _broken_rr(bit: int, size: int, source: RandomSource) -> Any:
    # Claims epsilon = 1 but tells the truth w.p. 0.9 (ln 9 = 2.2).
    return randomized_response(np.full(size, bit), p_truth="9/10", source=source).value


@pytest.fixture
def broken_case() -> Iterator[AuditCase]:
    case = AuditCase("broken_rr_test", "RR telling the truth 90 %", 1.0, 0.0, _broken_rr, 0, 1)
    register_audit_case(case)
    yield case
    AUDIT_CASES.pop(case.name)


@pytest.mark.statistical
def test_suite_flags_a_registered_broken_mechanism(broken_case: AuditCase) -> None:
    [result] = run_audit_suite(
        names=[broken_case.name], quick=True, source=InsecureSeededSource(33)
    )
    assert not result.consistent
    assert result.epsilon_lower_bound > 1.5
    record = result.to_dict()
    assert record["consistent"] is False and record["name"] == "broken_rr_test"
    with pytest.raises(InvalidParameterError, match="already registered"):
        register_audit_case(broken_case)
    register_audit_case(broken_case, replace=True)  # allowed when asked


def test_result_arithmetic() -> None:
    result = SuiteResult("x", "d", 2.0, 0.0, 1.5, 0.95, 10, "S", 0.1)
    assert result.ratio == 0.75 and result.consistent
    assert SuiteResult("x", "d", 1.0, 0.0, 1.5, 0.95, 10, "S", 0.1).consistent is False


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"claimed_epsilon": 0.0}, "claimed_epsilon"),
        ({"claimed_delta": 1.0}, "claimed_delta"),
        ({"samples": 0}, "samples"),
        ({"sample": None}, "sample"),
        ({"name": ""}, "name"),
    ],
)
def test_case_validation(kwargs: dict[str, Any], name: str) -> None:
    fields: dict[str, Any] = {
        "name": "x",
        "description": "d",
        "claimed_epsilon": 1.0,
        "claimed_delta": 0.0,
        "sample": _broken_rr,
        "dataset": 0,
        "neighbour": 1,
    }
    fields.update(kwargs)
    with pytest.raises(InvalidParameterError, match=name):
        AuditCase(**fields)


def test_unknown_names_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="names"):
        run_audit_suite(names=["no_such_mechanism"])
    with pytest.raises(InvalidParameterError, match="case"):
        register_audit_case("laplace")  # type: ignore[arg-type]
