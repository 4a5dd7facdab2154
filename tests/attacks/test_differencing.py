"""Tests of ``dpcurator.attacks._differencing``: differencing and averaging on UCI Adult.

The unprotected interface falls to both attacks; the same interface with a privacy filter
charges every answer and refuses once the budget is spent, which caps what the attacker learns
(lecture 004, composition; research note C.2). The curator-session version comes with the
session: the attacks take any ``ask`` callable.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget, PrivacyFilter
from dpcurator.attacks import (
    AggregateInterface,
    QueryRefusedError,
    averaging_attack,
    differencing_attack,
    repeats_to_pin,
)
from dpcurator.datasets import load_adult
from dpcurator.errors import BudgetExceededError, InvalidParameterError
from dpcurator.noise import InsecureSeededSource


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    frame = load_adult()
    frame["rich"] = (frame["income"] == ">50K").astype(int)
    return frame


def _pair(frame: pd.DataFrame, person: int) -> tuple[Any, Any]:
    """Rich people among the target's age-and-sex group, with and without the target."""
    row = frame.loc[frame["person_id"] == person].iloc[0]
    group = (frame["age"] == row["age"]) & (frame["sex"] == row["sex"]) & (frame["rich"] == 1)
    return group, group & (frame["person_id"] != person)


def test_differencing_defeats_the_query_size_restriction(adult: pd.DataFrame) -> None:
    interface = AggregateInterface(adult, min_query_size=10)
    for person in (1, 8, 9, 10):  # incomes <=50K, >50K, >50K, >50K in the data
        target = adult.loc[adult["person_id"] == person]
        with pytest.raises(QueryRefusedError, match="selects 1 rows"):
            interface.count(adult["person_id"] == person)  # asking directly is refused
        with_target, without = _pair(adult, person)
        result = differencing_attack(interface.count, with_target, without)
        assert result.estimate == float(target["rich"].item())
        assert not result.refused
    # The same trick on sums recovers a person's hours per week exactly.
    everyone = adult["age"] >= 0
    hours = differencing_attack(
        lambda where: interface.sum("hours_per_week", where),
        everyone & (adult["age"] < 90),
        (adult["age"] < 90) & (adult["person_id"] != 2),
    )
    assert hours.estimate == float(adult.loc[adult["person_id"] == 2, "hours_per_week"].item())


@pytest.mark.statistical
def test_averaging_pins_a_noisy_count_without_accounting(adult: pd.DataFrame) -> None:
    # Fresh Laplace(5) noise per answer, no budget: repeats_to_pin(5, 0.5) repeats put the mean
    # within 0.5 of the truth with probability about 0.95 (normal approximation).
    interface = AggregateInterface(adult, noise_scale=5.0, source=InsecureSeededSource(1))
    query = (adult["age"] == 37) & (adult["rich"] == 1)
    truth = float(query.sum())
    k = repeats_to_pin(5.0, 0.5)
    result = averaging_attack(interface.count, query, repeats=k)
    assert result.repeats == k and not result.refused
    assert abs(result.estimate - truth) < 0.5
    assert result.std_error == pytest.approx(math.sqrt(2) * 5.0 / math.sqrt(k), rel=0.15)


@pytest.mark.statistical
def test_budget_stops_the_averaging(adult: pd.DataFrame) -> None:
    budget = PrivacyFilter(Budget(1.0))
    interface = AggregateInterface(
        adult, noise_scale=10.0, budget=budget, source=InsecureSeededSource(2)
    )
    query = (adult["age"] == 37) & (adult["rich"] == 1)
    result = averaging_attack(interface.count, query, repeats=repeats_to_pin(10.0, 0.5))
    assert result.refused and result.repeats == 10  # each answer costs 0.1
    assert "Refused" in (result.refusal or "")
    assert budget.spent.epsilon == pytest.approx(1.0)
    assert result.std_error > 2.0  # far from pinned (sqrt(2) 10 / sqrt(10) = 4.5)
    with pytest.raises(BudgetExceededError):
        interface.count(query)
    # Without the default stop, the refusal propagates to the caller.
    with pytest.raises(BudgetExceededError):
        averaging_attack(interface.count, query, repeats=1, stop_on=())


@pytest.mark.statistical
def test_budget_caps_the_differencing_attack(adult: pd.DataFrame) -> None:
    # 100 targets with income >50K and 100 without (a balanced prior). Each attack gets its own
    # budget of epsilon = 1: one pair of counts at epsilon 0.5 each. Guessing "rich" when the
    # difference exceeds 1/2 cannot beat e^1 / (1 + e^1) = 0.731 on average (research note C.2);
    # the mean of 200 guesses has sd <= 0.035. Negative control: the unprotected interface
    # (the averaging of unaccounted noise is tested above).
    rich = adult.loc[adult["rich"] == 1, "person_id"].to_numpy()[:100]
    poor = adult.loc[adult["rich"] == 0, "person_id"].to_numpy()[:100]
    source = InsecureSeededSource(3)
    right_dp, right_open = 0, 0
    for person, bit in [(p, 1) for p in rich] + [(p, 0) for p in poor]:
        with_target, without = _pair(adult, int(person))
        guarded = AggregateInterface(
            adult, noise_scale=2.0, budget=PrivacyFilter(Budget(1.0)), source=source
        )
        dp = differencing_attack(guarded.count, with_target, without, repeats=50)
        assert dp.repeats == 1 and dp.refused
        right_dp += (dp.estimate > 0.5) == bit
        leak = differencing_attack(AggregateInterface(adult).count, with_target, without)
        right_open += (leak.estimate > 0.5) == bit
    bound = math.e / (1 + math.e)
    assert right_dp / 200 <= bound + 3 * 0.035
    assert right_open / 200 > bound + 3 * 0.035


def test_repeats_to_pin() -> None:
    assert repeats_to_pin(10.0, 1.0) == 769  # 2 b^2 z^2 / w^2 with z = 1.95996
    assert repeats_to_pin(10.0, 1.0, confidence=0.99) > 769
    assert repeats_to_pin(0.01, 10.0) == 1


def test_interface_predicates() -> None:
    frame = pd.DataFrame({"age": [30, 41, 52, 63], "smoker": [1, 0, 1, 1]})
    interface = AggregateInterface(frame)
    assert interface.count("age > 40 and smoker == 1") == 2.0
    assert interface.count(lambda f: f["smoker"] == 1) == 3.0
    assert interface.sum("age", frame["smoker"] == 1, bounds=(0, 50)) == 30 + 50 + 50
    assert interface.queries_answered == 3


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda f: AggregateInterface(f, noise_scale=-1.0), "noise_scale"),
        (lambda f: AggregateInterface(f, budget=PrivacyFilter(Budget(1.0))), "noise_scale"),
        (lambda f: AggregateInterface(f, budget="1.0"), "budget"),
        (lambda f: AggregateInterface([1, 2]), "frame"),
        (lambda f: AggregateInterface(f).count([True]), "where"),
        (lambda f: AggregateInterface(f).sum("income", f["age"] > 0), "column"),
        (lambda f: AggregateInterface(f, noise_scale=1.0).sum("age", f["age"] > 0), "bounds"),
        (lambda f: AggregateInterface(f).sum("age", f["age"] > 0, bounds=(5, 1)), "bounds"),
        (lambda f: differencing_attack("ask", 1, 2), "ask"),
        (lambda f: averaging_attack(len, 1, repeats=0), "repeats"),
        (lambda f: averaging_attack(len, 1, repeats=1, stop_on=["x"]), "stop_on"),
        (lambda f: repeats_to_pin(0.0, 1.0), "noise_scale"),
    ],
)
def test_bad_input_names_the_argument(call: Any, name: str) -> None:
    frame = pd.DataFrame({"age": [30, 41, 52, 63]})
    with pytest.raises(InvalidParameterError, match=name):
        call(frame)


def test_results_without_answers() -> None:
    def refuse(query: Any) -> float:
        raise BudgetExceededError("Refused: nothing left.")

    result = averaging_attack(refuse, "q", repeats=3)
    assert result.repeats == 0 and math.isnan(result.estimate) and math.isnan(result.std_error)
    pair = differencing_attack(refuse, "a", "b")
    assert pair.refused and math.isnan(pair.estimate) and pair.refusal == "Refused: nothing left."
    assert np.isnan(pair.std_error)
