"""``dpcurator query`` and ``dpcurator ledger`` (src/dpcurator/cli/_query.py), through CliRunner.

The table is small and declared in TOML in ``tmp_path``. Tests that look at released numbers
replace the secure default source by a seeded one (fixture ``seeded_noise``) so that they are
reproducible; the others run with secure noise and look only at what does not depend on it.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import dpcurator.noise._source as source_module
from dpcurator.cli import app
from dpcurator.curator import Ledger, read_declaration
from dpcurator.datasets import dataset_path
from dpcurator.noise import InsecureSeededSource

runner = CliRunner()

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cps.toml"

TOML = """\
[table]
name = "people"
source = "people.csv"
privacy_unit = "person_id"
max_rows_per_unit = 2
max_groups_per_unit = 2

[budget]
epsilon = 1.0
delta = 1e-5

[columns.state]
domain = ["CA", "NY", "TX"]

[columns.income]
lower = 0
upper = 100000

[columns.visits]
lower = 0
upper = 10
"""

QUERY = "SELECT state, COUNT(*) AS n FROM people GROUP BY state"


@pytest.fixture
def people(tmp_path: Path) -> Path:
    """A 600-row table of 400 people (1 or 2 rows each) declared in people.toml."""
    rng = np.random.default_rng(7)  # fixture data, not privacy noise
    person = np.concatenate([np.arange(400), np.arange(200)])
    frame = pd.DataFrame(
        {
            "person_id": person,
            "state": rng.choice(
                ["CA", "NY", "TX", "WA"], size=person.size, p=[0.5, 0.3, 0.15, 0.05]
            ),
            "income": rng.integers(0, 150_000, size=person.size),
            "visits": rng.integers(0, 12, size=person.size),
        }
    )
    frame.to_csv(tmp_path / "people.csv", index=False)
    path = tmp_path / "people.toml"
    path.write_text(TOML)
    return path


@pytest.fixture
def seeded_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the sessions' default source a seeded one, for reproducible numbers."""
    monkeypatch.setattr(source_module, "_DEFAULT_SOURCE", InsecureSeededSource(2024))


def _invoke(args: list[str], code: int = 0) -> Any:
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def _json(args: list[str], code: int = 0) -> Any:
    return json.loads(_invoke([*args, "--json"], code).output)


def _entries(path: Path) -> list[str]:
    with Ledger.open(path) as books:
        return [entry.query for entry in books.entries()]


def test_query_json_reports_the_release_the_charge_and_the_budget(
    people: Path, seeded_noise: None
) -> None:
    out = _json(["query", "--table", str(people), "--epsilon", "0.5", QUERY])
    truth = pd.read_csv(people.parent / "people.csv")
    # Each person has at most 2 rows: the declared bound truncates nothing here.
    expected = truth[truth["state"].isin(["CA", "NY", "TX"])].groupby("state").size()
    assert [row["state"] for row in out["table"]] == ["CA", "NY", "TX"]  # the public domain
    (measurement,) = out["split"]
    assert measurement["epsilon"] == pytest.approx(0.5)
    assert measurement["sensitivity"] == 2.0  # max_rows_per_unit
    scale = measurement["scale"]
    assert scale == pytest.approx(2.0 / 0.5)
    a = math.exp(-1.0 / scale)  # two-sided geometric: std = sqrt(2a) / (1 - a)
    for row in out["table"]:
        assert row["n_std"] == pytest.approx(math.sqrt(2 * a) / (1 - a), rel=1e-9)
        assert row["n_ci_low"] <= row["n"] <= row["n_ci_high"]
        # Tail of the geometric noise: P(|Z| >= 15 scale) < 1e-6.
        assert abs(row["n"] - expected[row["state"]]) < 15 * scale
    assert out["charged"] == {"epsilon": pytest.approx(0.5), "delta": 0.0}
    assert out["remaining"]["epsilon"] == pytest.approx(0.5)
    assert out["budget"] == {"epsilon": 1.0, "delta": 1e-5}
    assert out["entry_id"] == 1
    assert out["ledger"] == str(people.parent / "people.ledger.sqlite")
    assert _entries(people.parent / "people.ledger.sqlite") == [QUERY]


def test_seeded_answers_are_reproducible(
    people: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source_module, "_DEFAULT_SOURCE", InsecureSeededSource(5))
    first = _json(["query", "--table", str(people), "--epsilon", "0.5", QUERY])
    # A second declaration (the steward's: its own ledger and budget) and the same seed.
    other = tmp_path / "other.toml"
    other.write_text(TOML)
    monkeypatch.setattr(source_module, "_DEFAULT_SOURCE", InsecureSeededSource(5))
    again = _json(["query", "--table", str(other), "--epsilon", "0.5", QUERY])
    assert again["ledger"] == str(tmp_path / "other.ledger.sqlite")
    assert [r["n"] for r in first["table"]] == [r["n"] for r in again["table"]]


def test_query_prints_a_readable_table(people: Path) -> None:
    sql = "SELECT state, COUNT(*) AS n, AVG(income) AS mean_income FROM people GROUP BY state"
    output = _invoke(["query", "--table", str(people), "--epsilon", "0.4", sql]).output
    for needle in ("±", "95% interval", "budget split", "geometric", "left", "mean_income"):
        assert needle in output, needle
    assert "delta method" in output  # the mean's interval is marked approximate
    assert "CA" in output and "TX" in output and "WA" not in output  # only the public domain


def test_ledger_is_written_and_read_back(people: Path) -> None:
    _invoke(["query", "--table", str(people), "--epsilon", "0.5", QUERY])
    sql = "SELECT AVG(visits) FROM people"
    _invoke(["query", "--table", str(people), "--epsilon", "0.25", sql])
    out = _json(["ledger", str(people)])  # the TOML: its ledger is next to it
    assert [e["query"] for e in out["entries"]] == [QUERY, sql]
    assert [e["charged"]["epsilon"] for e in out["entries"]] == [
        pytest.approx(0.5),
        pytest.approx(0.25),
    ]
    assert out["spent"]["epsilon"] == pytest.approx(0.75)
    assert out["remaining"]["epsilon"] == pytest.approx(0.25)
    assert out["budget"] == {"epsilon": 1.0, "delta": 1e-5}
    assert out["accountant"] == "basic"
    direct = _json(["ledger", str(people.parent / "people.ledger.sqlite")])
    assert direct["entries"] == out["entries"]
    text = _invoke(["ledger", str(people)]).output
    assert "AVG(visits)" in text and "remaining" in text and "basic" in text


def test_query_has_no_ledger_option(people: Path, tmp_path: Path) -> None:
    """Where answers are charged is the declaration's business, not the analyst's."""
    for books in (tmp_path / "fresh.sqlite", ":memory:"):
        args = ["query", "--table", str(people), "--epsilon", "0.5", "--ledger", str(books), QUERY]
        result = runner.invoke(app, args)
        assert result.exit_code == 2  # a usage error: the option does not exist
        assert "No such option" in result.output and "--ledger" in result.output
    assert not (tmp_path / "fresh.sqlite").exists()
    assert not (tmp_path / "people.ledger.sqlite").exists()  # nothing was answered either
    helptext = " ".join(_invoke(["query", "--help"], code=0).output.split())
    assert "--ledger" not in helptext
    assert "ledger" in helptext and "key file" in helptext  # it says where answers are charged


def test_the_declaration_names_the_ledger_and_its_key(people: Path, tmp_path: Path) -> None:
    declared = (
        people.read_text() + '\n[ledger]\npath = "books/people.sqlite"\nkey = "k/people.key"\n'
    )
    people.write_text(declared)
    for folder in ("books", "k"):
        (tmp_path / folder).mkdir()
    out = _json(["query", "--table", str(people), "--epsilon", "0.5", QUERY])
    assert out["ledger"] == str(tmp_path / "books" / "people.sqlite")
    assert not (tmp_path / "people.ledger.sqlite").exists()
    key = tmp_path / "k" / "people.key"
    assert key.stat().st_mode & 0o777 == 0o600  # created with the ledger, the steward's only
    with Ledger.open(tmp_path / "books" / "people.sqlite", key=key) as books:
        assert books.key == str(key) and [e.query for e in books.entries()] == [QUERY]
    assert _json(["ledger", str(people)])["spent"]["epsilon"] == pytest.approx(0.5)
    direct = ["ledger", str(tmp_path / "books" / "people.sqlite"), "--key", str(key)]
    assert len(_json(direct)["entries"]) == 1
    refused = _invoke(["ledger", str(tmp_path / "books" / "people.sqlite")], code=2).output
    assert "key file" in refused  # a keyed ledger is not read without its key


def _altered(people: Path, code: int = 2) -> str:
    """Run a query and read the ledger; both must refuse, saying the ledger was altered."""
    query = _invoke(["query", "--table", str(people), "--epsilon", "0.1", QUERY], code=code)
    books = _invoke(["ledger", str(people)], code=code)
    explain = _invoke(["query", "--table", str(people), "--explain", QUERY], code=code)
    for result in (query, books, explain):
        assert "was altered" in " ".join(result.output.split()), result.output
    return " ".join(query.output.split())


def test_an_edited_ledger_is_refused(people: Path) -> None:
    _invoke(["query", "--table", str(people), "--epsilon", "0.75", QUERY])
    ledger = people.parent / "people.ledger.sqlite"
    conn = sqlite3.connect(ledger)
    conn.execute("UPDATE entries SET epsilon_spent = 0.0, epsilon_remaining = 1.0")
    conn.commit()
    conn.close()
    message = _altered(people)
    assert "entry 1 does not match its MAC" in message
    assert "people.ledger.key" in message.replace(" ", "")  # long paths wrap mid-word


def test_a_ledger_cut_short_is_refused(people: Path) -> None:
    _invoke(["query", "--table", str(people), "--epsilon", "0.5", QUERY])
    _invoke(["query", "--table", str(people), "--epsilon", "0.25", QUERY])
    conn = sqlite3.connect(people.parent / "people.ledger.sqlite")
    conn.execute("DELETE FROM entries WHERE id = 2")
    conn.commit()
    conn.close()
    assert "removed from its end" in _altered(people)


def test_a_deleted_ledger_is_refused_not_restarted(people: Path) -> None:
    _invoke(["query", "--table", str(people), "--epsilon", "0.9", QUERY])
    ledger = people.parent / "people.ledger.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{ledger}{suffix}").unlink(missing_ok=True)
    assert "the file is missing" in _altered(people)
    assert not ledger.exists()  # no fresh budget was started in its place


def test_a_replaced_ledger_is_refused(people: Path, tmp_path: Path) -> None:
    _invoke(["query", "--table", str(people), "--epsilon", "0.9", QUERY])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "people.toml").write_text(
        TOML.replace('source = "people.csv"', f'source = "{tmp_path / "people.csv"}"')
    )
    _invoke(["query", "--table", str(elsewhere / "people.toml"), "--epsilon", "0.1", QUERY])
    ledger = people.parent / "people.ledger.sqlite"
    for suffix in ("", "-wal", "-shm"):  # a valid ledger with almost all its budget left
        Path(f"{ledger}{suffix}").unlink(missing_ok=True)
        if Path(f"{elsewhere / 'people.ledger.sqlite'}{suffix}").exists():
            shutil.copy(f"{elsewhere / 'people.ledger.sqlite'}{suffix}", f"{ledger}{suffix}")
    assert "written with another key" in _altered(people)


@pytest.mark.parametrize("value", ["inf", "nan", "-1.0"])
def test_an_infinite_budget_is_refused(people: Path, value: str) -> None:
    people.write_text(TOML.replace("epsilon = 1.0", f"epsilon = {value}"))
    result = _invoke(["query", "--table", str(people), "--epsilon", "0.5", QUERY], code=2)
    assert "give a finite budget" in " ".join(result.output.split())
    assert not (people.parent / "people.ledger.sqlite").exists()


def test_over_budget_is_refused_and_spends_nothing(people: Path) -> None:
    _invoke(["query", "--table", str(people), "--epsilon", "0.8", QUERY])
    result = _invoke(["query", "--table", str(people), "--epsilon", "0.5", QUERY], code=2)
    assert "error" in result.output and "Nothing was spent" in result.output
    out = _json(["ledger", str(people)])
    assert len(out["entries"]) == 1
    assert out["spent"]["epsilon"] == pytest.approx(0.8)
    refusal = _json(["query", "--table", str(people), "--epsilon", "0.5", QUERY], code=2)
    assert refusal["type"] == "BudgetExceededError"
    assert "remaining" in refusal["error"]


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("SELECT * FROM people", "aggregates only"),
        ("SELECT AVG(salary) FROM people", "'salary' is not declared"),
        ("SELECT COUNT(*) FROM elsewhere", "elsewhere"),
        ("DELETE FROM people", "SELECT"),
    ],
)
def test_unsupported_queries_are_refused_before_reading(
    people: Path, sql: str, needle: str
) -> None:
    result = _invoke(["query", "--table", str(people), "--epsilon", "0.5", sql], code=2)
    assert needle in result.output
    assert _entries(people.parent / "people.ledger.sqlite") == []  # nothing recorded or spent


def test_undeclared_group_keys_need_delta(people: Path) -> None:
    sql = "SELECT visits, COUNT(DISTINCT person_id) AS people FROM people GROUP BY visits"
    result = _invoke(["query", "--table", str(people), "--epsilon", "1", sql], code=2)
    assert "delta" in result.output and "partition selection" in result.output
    out = _json(["query", "--table", str(people), "--epsilon", "1", "--delta", "1e-6", sql])
    threshold = out["threshold"]
    assert threshold is not None and threshold > 1
    assert all(row["people"] >= threshold for row in out["table"])
    # About 50 people per value of visits (0 to 11), well above the threshold: most are kept.
    assert len(out["table"]) >= 6
    assert out["charged"]["delta"] == pytest.approx(1e-6)


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("[table\nname = 'people'", "not valid TOML"),
        ('[table]\nname = "people"\n', "table.source"),
        ('[table]\nname = "people"\nsource = "people.csv"\nbogus = 1\n', "bogus"),
        ('[table]\nname = "people"\nsource = "people.csv"\n', "budget"),
        (
            '[table]\nname = "people"\nsource = "people.csv"\n[budget]\nepsilon = 1\n'
            "[columns.salary]\nlower = 0\nupper = 1\n",
            "salary",
        ),
        (
            '[table]\nname = "people"\nsource = "missing.csv"\n[budget]\nepsilon = 1\n',
            "does not exist",
        ),
    ],
)
def test_bad_declarations_get_a_clean_message(people: Path, toml: str, needle: str) -> None:
    bad = people.parent / "bad.toml"
    bad.write_text(toml)
    result = _invoke(["query", "--table", str(bad), "--epsilon", "0.5", QUERY], code=2)
    assert result.output.startswith("error:")
    assert needle in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--epsilon", "-1"], "epsilon"),
        (["--epsilon", "0.5", "--delta", "2"], "delta"),
        ([], "--epsilon is required"),
    ],
)
def test_bad_parameters_exit_2(people: Path, args: list[str], needle: str) -> None:
    result = _invoke(["query", "--table", str(people), *args, QUERY], code=2)
    assert needle in result.output


def test_missing_files_get_a_clean_message(tmp_path: Path) -> None:
    result = _invoke(["query", "--table", str(tmp_path / "no.toml"), "--epsilon", "1", QUERY], 2)
    assert "does not exist" in result.output
    result = _invoke(["ledger", str(tmp_path / "no.sqlite")], code=2)
    assert "not an existing ledger" in result.output
    assert not (tmp_path / "no.sqlite").exists()  # reading a ledger never creates one
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database")
    assert "not a dpcurator ledger" in _invoke(["ledger", str(junk)], code=2).output


def test_explain_plans_without_spending(people: Path) -> None:
    sql = "SELECT state, AVG(income) FROM people GROUP BY state"
    out = _json(["query", "--table", str(people), "--explain", "--epsilon", "0.4", sql])
    assert [m["kind"] for m in out["split"]] == ["count_column", "centered_sum"]
    assert sum(m["epsilon"] for m in out["split"]) == pytest.approx(0.4)
    assert "__bounded" in out["bounded_sql"]
    assert out["ledger"] == {"ledger": str(people.parent / "people.ledger.sqlite"), "exists": False}
    assert not (people.parent / "people.ledger.sqlite").exists()  # explain creates nothing
    _invoke(["query", "--table", str(people), "--epsilon", "0.7", QUERY])
    fits = _json(["query", "--table", str(people), "--explain", "--epsilon", "0.3", sql])
    assert fits["ledger"]["answered"] is True
    assert fits["ledger"]["charged"]["epsilon"] == pytest.approx(0.3)
    over = _json(["query", "--table", str(people), "--explain", "--epsilon", "0.4", sql])
    assert over["ledger"]["answered"] is False and "Nothing was spent" in over["ledger"]["reason"]
    assert _entries(people.parent / "people.ledger.sqlite") == [QUERY]
    text = _invoke(["query", "--table", str(people), "--explain", "--epsilon", "0.4", sql]).output
    assert "would be refused" in text and "bounded SQL" in text


def test_a_target_accuracy_decides_the_epsilon(people: Path) -> None:
    count = "SELECT state, COUNT(*) AS n FROM people GROUP BY state"
    args = ["query", "--table", str(people)]
    planned = _json([*args, "--explain", "--target-ci", "30", count])
    assert planned["predicted"][0]["aggregate"] == "n"
    assert planned["predicted"][0]["half_width_95"] <= 30
    epsilon = planned["epsilon"]
    looser = _json([*args, "--explain", "--epsilon", str(epsilon * 0.9), count])
    assert looser["predicted"][0]["half_width_95"] > 30  # the smallest epsilon that meets it
    assert not (people.parent / "people.ledger.sqlite").exists()  # planning spent nothing
    answered = _json([*args, "--target-ci", "30", count])
    assert answered["charged"]["epsilon"] == pytest.approx(epsilon)
    assert all(row["n_ci_high"] - row["n"] <= 30 for row in answered["table"])
    text = _invoke([*args, "--explain", "--target-std", "5", count]).output
    assert "predicted error of n" in text and "target std 5" in text
    refused = _json([*args, "--target-ci", "30", "SELECT AVG(income) FROM people"], code=2)
    assert "cannot be promised" in refused["error"]
    both = _json([*args, "--epsilon", "1", "--target-ci", "30", count], code=2)
    assert "must not be given" in both["error"]
    assert _entries(people.parent / "people.ledger.sqlite") == [count]


def test_a_zcdp_declaration_answers_rho_queries_with_gaussian_noise(people: Path) -> None:
    count = "SELECT state, COUNT(*) AS n FROM people GROUP BY state"
    args = ["query", "--table", str(people)]
    refused = _json([*args, "--rho", "0.01", count], code=2)  # the basic accountant
    assert "accountant='zcdp'" in refused["error"]
    assert _entries(people.parent / "people.ledger.sqlite") == []  # refused: nothing spent
    zcdp = '[session]\naccountant = "zcdp"\n[ledger]\npath = "zcdp.sqlite"\nkey = "zcdp.key"\n'
    people.write_text(TOML + "\n" + zcdp)
    answered = _json([*args, "--rho", "0.01", count])
    (split,) = answered["split"]
    assert split["mechanism"] == "discrete gaussian" and "zCDP" in split["why"]
    assert _entries(people.parent / "zcdp.sqlite") == [count]
    unexplained = _json([*args, "--explain", "--rho", "0.01", count], code=2)
    assert "--epsilon" in unexplained["error"]
    people.write_text(TOML + '\n[session]\nnoise = "normal"\n')
    assert "session.noise" in _json([*args, "--epsilon", "0.1", count], code=2)["error"]


def test_the_example_declaration_answers_queries(tmp_path: Path, seeded_noise: None) -> None:
    declaration = read_declaration(EXAMPLE)
    assert declaration.table.name == "cps" and declaration.budget is not None
    assert declaration.ledger_path == str(EXAMPLE.parent / "cps.ledger.sqlite")
    assert declaration.ledger_key == str(EXAMPLE.parent / "cps.ledger.key")
    # A copy of the example, so that its ledger and key are written here, not in examples/: it
    # names the shipped table (dataset = "cps"), so it works wherever it is copied.
    source = str(declaration.table.source)
    copy = tmp_path / "cps.toml"
    copy.write_text(EXAMPLE.read_text())
    assert str(read_declaration(copy).table.source) == source == str(dataset_path("cps"))
    args = ["query", "--table", str(copy), "--epsilon", "0.1"]
    out = _json([*args, "SELECT COUNT(*) AS tax_units FROM cps"])
    # 280,005 tax units, 1,232 of them beyond the bound of 4 per household.
    scale = out["split"][0]["scale"]
    assert abs(out["table"][0]["tax_units"] - (280_005 - 1_232)) < 15 * scale
    assert out["ledger"] == str(tmp_path / "cps.ledger.sqlite")
    assert (tmp_path / "cps.ledger.key").exists()
