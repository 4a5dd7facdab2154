"""Tests of ``dpcurator.attacks._anonymity`` on hand-made tables with known answers, and Adult.

The hand-made table is the lecture's (Kearns and Roth, *The Ethical Algorithm*, in lecture 004);
the t-closeness numbers are those of Li, Li and Venkatasubramanian (ICDE 2007, Table 4: salary
classes {3K, 4K, 5K} and {6K, 8K, 11K} at EMD 0.375 and 0.167).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcurator.attacks import (
    distinct_l_diversity,
    entropy_l_diversity,
    equivalence_classes,
    homogeneity_attack,
    is_k_anonymous,
    is_l_diverse,
    k_anonymity,
    mondrian,
    recursive_cl_diversity,
    t_closeness,
)
from dpcurator.datasets import load_adult
from dpcurator.errors import InvalidParameterError

QIS = ["age", "gender", "zip", "smoker"]


@pytest.fixture
def hospital() -> pd.DataFrame:
    rows = [
        ("60-70", "M", "191**", "Y", "Heart disease"),
        ("60-70", "F", "191**", "N", "Arthritis"),
        ("60-70", "M", "191**", "Y", "Lung cancer"),
        ("60-70", "F", "191**", "N", "Crohn's disease"),
        ("60-70", "M", "191**", "Y", "Lung cancer"),
        ("50-60", "F", "191**", "N", "HIV"),
        ("50-60", "M", "191**", "Y", "Lyme disease"),
        ("50-60", "M", "191**", "Y", "Seasonal allergies"),
        ("50-60", "F", "191**", "N", "Ulcerative colitis"),
    ]
    return pd.DataFrame(rows, columns=[*QIS, "diagnosis"])


def test_k_anonymity_of_the_lecture_table(hospital: pd.DataFrame) -> None:
    assert equivalence_classes(hospital, QIS).tolist() == [3, 2, 2, 2]
    assert k_anonymity(hospital, QIS) == 2
    assert is_k_anonymous(hospital, QIS, 2) and not is_k_anonymous(hospital, QIS, 3)
    assert k_anonymity(hospital, ["zip"]) == 9
    assert k_anonymity(hospital.iloc[:0], QIS) == 0 and is_k_anonymous(hospital.iloc[:0], QIS, 5)


def test_l_diversity_of_the_lecture_table(hospital: pd.DataFrame) -> None:
    # Classes: {Heart, Lung, Lung}, {Arthritis, Crohn's}, {HIV, Colitis}, {Lyme, Allergies}.
    assert distinct_l_diversity(hospital, QIS, "diagnosis") == 2
    smallest_entropy = -(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3))
    assert entropy_l_diversity(hospital, QIS, "diagnosis") == pytest.approx(
        math.exp(smallest_entropy)
    )  # 1.89: entropy 2-diverse fails because of the lung-cancer class
    assert not is_l_diverse(hospital, QIS, "diagnosis", 2, kind="entropy")
    assert is_l_diverse(hospital, QIS, "diagnosis", 2)
    # Recursive (c, 2): the class with counts (2, 1) needs 2 < c * 1.
    assert recursive_cl_diversity(hospital, QIS, "diagnosis", c=3) == 2
    assert recursive_cl_diversity(hospital, QIS, "diagnosis", c=2) == 1
    assert is_l_diverse(hospital, QIS, "diagnosis", 2, kind="recursive", c=2.5)
    assert not is_l_diverse(hospital, QIS, "diagnosis", 2, kind="recursive", c=2.0)


def test_t_closeness_categorical(hospital: pd.DataFrame) -> None:
    # Q: Lung cancer 2/9, seven others 1/9 each. Class {Arthritis, Crohn's}: EMD
    # = (1/2)(2 (1/2 - 1/9) + 2/9 + 5/9) = 7/9; class {Heart, Lung, Lung}: 2/3.
    assert t_closeness(hospital, QIS, "diagnosis") == pytest.approx(7 / 9)
    # Men only: Q = (Heart 1/5, Lung 2/5, Lyme 1/5, Allergies 1/5); class {Lyme, Allergies}:
    # (1/2)(1/5 + 2/5 + 2 (1/2 - 1/5)) = 3/5, class {Heart, Lung, Lung}: 2/5.
    men = hospital[hospital["gender"] == "M"]
    assert t_closeness(men, QIS, "diagnosis") == pytest.approx(3 / 5)


def test_t_closeness_ordered_matches_li_et_al() -> None:
    # Salaries 3K..11K, uniform over the table; classes {3, 4, 5}, {6, 8, 11}, {7, 9, 10}:
    # EMD 3/8 = 0.375, 1/6 = 0.167 and 17/72 = 0.236 (ordered distance, m = 9 values).
    salary = pd.DataFrame(
        {
            "zip": ["476**"] * 3 + ["4790*"] * 3 + ["4760*"] * 3,
            "salary": [3, 4, 5, 6, 8, 11, 7, 9, 10],
        }
    )
    assert t_closeness(salary, ["zip"], "salary") == pytest.approx(0.375)
    # {6, 8, 11} against the rest ({3, 4, 5, 7, 9, 10}: EMD 1/12): the worst is 1/6.
    two = salary.assign(zip=np.where(salary["zip"] == "4790*", "a", "b"))
    assert t_closeness(two, ["zip"], "salary") == pytest.approx(1 / 6)
    # {7, 9, 10} against the rest ({3, 4, 5, 6, 8, 11}: 17/144): the worst is 17/72.
    three = salary.assign(zip=np.where(salary["zip"] == "4760*", "a", "b"))
    assert t_closeness(three, ["zip"], "salary") == pytest.approx(17 / 72)
    assert t_closeness(salary.assign(zip="all"), ["zip"], "salary") == 0.0  # one class
    # Unordered, {3, 4, 5} is (1/2)(3 (1/3 - 1/9) + 6/9) = 2/3 away.
    assert t_closeness(salary, ["zip"], "salary", ordered=False) == pytest.approx(2 / 3)


def test_mondrian_on_a_line() -> None:
    frame = pd.DataFrame({"age": [20, 21, 30, 31, 40, 41, 50, 51], "x": range(8)})
    out = mondrian(frame, ["age"], 2)
    assert [sorted(p.tolist()) for p in out.partitions] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert out.table["age"].iloc[2] == pd.Interval(30.0, 31.0, closed="both")
    assert out.table["x"].tolist() == list(range(8))  # other columns untouched
    assert k_anonymity(out.table, ["age"]) == 2
    assert len(mondrian(frame, ["age"], 3).partitions) == 2  # 8 rows: halves of 4


@pytest.fixture(scope="module")
def adult_sample() -> pd.DataFrame:
    return load_adult().sample(n=4000, random_state=0).reset_index(drop=True)


ADULT_QIS = ["age", "sex", "race", "native_country"]


@pytest.mark.parametrize("k", [1, 5, 25])
def test_mondrian_is_k_anonymous_on_adult(adult_sample: pd.DataFrame, k: int) -> None:
    out = mondrian(adult_sample, ADULT_QIS, k)
    assert k_anonymity(out.table, ADULT_QIS) >= k
    sizes = sorted(len(p) for p in out.partitions)
    assert sizes[0] >= k
    covered = np.sort(np.concatenate(out.partitions))
    assert covered.tolist() == list(range(len(adult_sample)))  # a partition of the rows
    # Every generalised cell covers the raw value (missing countries are a category: None).
    for row in (0, 17, 1234):
        assert adult_sample["age"].iloc[row] in out.table["age"].iloc[row]
        country = adult_sample["native_country"].iloc[row]
        cell = out.table["native_country"].iloc[row]
        assert (None in cell) if pd.isna(country) else (country in cell)
    if k == 1:  # nothing to protect: partitions shrink to one combination each
        assert k_anonymity(out.table, ADULT_QIS) >= 1


def test_homogeneity_attack_on_mondrian_output(adult_sample: pd.DataFrame) -> None:
    targets = adult_sample.sample(n=150, random_state=1)
    plain = mondrian(adult_sample, ADULT_QIS, 5)
    attacked = homogeneity_attack(plain.table, ADULT_QIS, "income", targets, truth="income")
    # k = 5 does not stop it: classes where everyone earns <=50K give the income away.
    assert attacked.disclosed > 0 and attacked.rate > 0.05
    assert attacked.correct == attacked.disclosed  # targets are in the release: always right
    assert set(attacked.inferred.dropna()) <= {"<=50K", ">50K"}
    # l-diverse Mondrian (both incomes in every class) leaves nothing to infer.
    diverse = mondrian(adult_sample, ADULT_QIS, 5, sensitive="income", l=2)
    assert distinct_l_diversity(diverse.table, ADULT_QIS, "income") >= 2
    safe = homogeneity_attack(diverse.table, ADULT_QIS, "income", targets, truth="income")
    assert safe.disclosed == 0 and (safe.candidates == 2).all()


def test_background_knowledge_attack_on_the_lecture_table(hospital: pd.DataFrame) -> None:
    rebecca = pd.DataFrame({"age": ["50-60"], "gender": ["F"], "zip": ["191**"], "smoker": ["N"]})
    first = homogeneity_attack(hospital, QIS, "diagnosis", rebecca)
    assert first.candidates.tolist() == [2] and first.disclosed == 0
    known = homogeneity_attack(
        hospital, QIS, "diagnosis", rebecca, ruled_out={"Ulcerative colitis"}
    )
    assert known.inferred.tolist() == ["HIV"] and known.rate == 1.0
    stranger = rebecca.assign(age="30-40")
    assert homogeneity_attack(hospital, QIS, "diagnosis", stranger).candidates.tolist() == [0]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda f: k_anonymity(f, ["age", "zipcode"]), r"missing: \['zipcode'\]"),
        (lambda f: is_k_anonymous(f, QIS, 0), "k must be >= 1"),
        (lambda f: mondrian(f, QIS, 0), "k must be >= 1"),
        (lambda f: mondrian(f, QIS, 10), "k must be <= the number of rows"),
        (lambda f: mondrian(f, ["age", "height"], 2), r"missing: \['height'\]"),
        (lambda f: mondrian(f, QIS, 2, sensitive="diagnosis", l=0), "l must be >= 1"),
        (lambda f: mondrian(f, QIS, 2, sensitive="age"), "must not also be a quasi-identifier"),
        (lambda f: mondrian(f, QIS, 2, sensitive="diagnosis", l=50), "distinct values"),
        (lambda f: is_l_diverse(f, QIS, "diagnosis", 2, kind="recursive"), "c must be given"),
        (lambda f: is_l_diverse(f, QIS, "diagnosis", 2, kind="fancy"), "kind"),
        (lambda f: recursive_cl_diversity(f, QIS, "diagnosis", c=0), "c must be > 0"),
        (lambda f: distinct_l_diversity(f, QIS, "disease"), "sensitive must be columns"),
        (lambda f: t_closeness(f, [], "diagnosis"), "at least one column"),
        (lambda f: homogeneity_attack(f, QIS, "diagnosis", f[["age"]]), "columns of targets"),
    ],
)
def test_bad_input_is_a_clear_error(hospital: pd.DataFrame, call: Any, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        call(hospital)


def test_numeric_quasi_identifiers_must_not_be_missing() -> None:
    frame = pd.DataFrame({"age": [20.0, np.nan, 30.0, 31.0], "sex": ["F", "M", None, "F"]})
    with pytest.raises(InvalidParameterError, match="missing numeric"):
        mondrian(frame, ["age", "sex"], 2)
    out = mondrian(frame.fillna({"age": 25.0}), ["age", "sex"], 2)  # a missing category is fine
    assert k_anonymity(out.table, ["age", "sex"]) == 2
