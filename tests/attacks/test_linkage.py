"""Tests of ``dpcurator.attacks._linkage``: the Weld example and re-identification in Adult."""

from __future__ import annotations

import pandas as pd
import pytest

from dpcurator.attacks import linkage_attack, uniqueness, weld_example
from dpcurator.datasets import load_adult
from dpcurator.errors import InvalidParameterError

QIS = ["age", "sex", "race", "native_country"]
MORE = [*QIS, "education", "marital_status"]


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    return load_adult()


def test_weld_is_reidentified() -> None:
    medical, voters = weld_example()
    result = linkage_attack(
        medical, voters, ["zipcode", "age", "gender"], identity="name", sensitive="diagnosis"
    )
    links = result.links.set_index("name")
    assert links.loc["William Weld", "candidates"] == 1
    assert links.loc["William Weld", "diagnosis"] == "Diabetes"
    assert links.loc["William Weld", "record"] == 0
    assert links.loc["Valerie Pham", "candidates"] == 0  # not in the medical table
    assert pd.isna(links.loc["Charles Haas", "record"])
    assert (result.reidentified, result.people, result.rate) == (1, 3, 1 / 3)
    assert result.precision is None


def test_rate_is_the_uniqueness_of_the_public_people(adult: pd.DataFrame) -> None:
    # The release is Adult without names (person_id is kept only to score the links); the
    # "voter list" is 1,000 of its people with their quasi-identifiers.
    public = adult.sample(n=1000, random_state=0)[["person_id", *MORE]]
    for qis in (QIS, MORE):
        result = linkage_attack(adult, public, qis, identity="person_id", truth="person_id")
        sizes = adult.groupby(qis, dropna=False)["person_id"].transform("size")
        unique_ids = set(adult.loc[sizes == 1, "person_id"])
        expected = public["person_id"].isin(unique_ids).sum()
        assert result.reidentified == expected
        assert result.correct == expected and result.precision == 1.0  # everyone is in it
    # More quasi-identifiers single out more people (4 % of Adult with four, 17 % with six).
    few = linkage_attack(adult, public, QIS, identity="person_id").rate
    many = linkage_attack(adult, public, MORE, identity="person_id").rate
    assert 0.01 < few < 0.1 < many < 0.3
    assert uniqueness(adult, QIS) == pytest.approx(0.0408, abs=0.001)
    assert uniqueness(adult, MORE) == pytest.approx(0.1718, abs=0.001)


def test_people_outside_the_release_give_false_links(adult: pd.DataFrame) -> None:
    # Half of Adult is released; the voter list holds people from both halves. A unique match
    # for someone who is not in the release is a false re-identification.
    released = adult.iloc[: len(adult) // 2]
    public = adult.sample(n=2000, random_state=1)[["person_id", *MORE]]
    result = linkage_attack(
        released, public, MORE, identity="person_id", truth="person_id", sensitive="income"
    )
    assert result.correct is not None and 0 < result.correct < result.reidentified
    precision = result.precision
    assert precision is not None and 0.3 < precision < 1.0
    linked = result.links.dropna(subset=["record"])
    assert linked["income"].isin(["<=50K", ">50K"]).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"quasi_identifiers": ["age", "zip"]}, r"quasi_identifiers must be columns of released"),
        ({"quasi_identifiers": []}, "quasi_identifiers must name at least one column"),
        ({"identity": "ssn"}, "identity must be columns of public"),
        ({"sensitive": "salary"}, "sensitive must be columns of released"),
        ({"truth": "id"}, "truth must be columns of released"),
    ],
)
def test_missing_columns_are_clear_errors(kwargs: dict[str, object], match: str) -> None:
    medical, voters = weld_example()
    arguments: dict[str, object] = {"quasi_identifiers": ["age", "gender"], "identity": "name"}
    arguments.update(kwargs)
    with pytest.raises(InvalidParameterError, match=match):
        linkage_attack(medical, voters, **arguments)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="missing: \\['zip'\\]"):
        uniqueness(medical, ["zip"])


def test_public_side_missing_column() -> None:
    medical, voters = weld_example()
    with pytest.raises(InvalidParameterError, match="columns of public"):
        linkage_attack(medical, voters.drop(columns="age"), ["age"], identity="name")
    with pytest.raises(InvalidParameterError, match="DataFrame"):
        linkage_attack([1, 2], voters, ["age"], identity="name")
