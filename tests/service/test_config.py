"""server.toml (src/dpcurator/service/_config.py): what is read, and what is refused with a
message that names the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcurator import InvalidParameterError
from dpcurator.accounting import Budget
from dpcurator.service import load_config

from .conftest import write_config, write_table


def test_a_config_names_tables_analysts_budgets_and_limits(tmp_path: Path) -> None:
    path = write_config(tmp_path, analysts={"ann": {"people": 0.5}}, max_query_chars=100)
    config = load_config(path)
    assert config.table("people").budget == Budget(100.0)
    assert config.analysts[0].budgets == (("people", Budget(0.5)),)
    assert config.limits.max_query_chars == 100 and config.accountant == "basic"
    assert config.ledger == str(tmp_path / "books.sqlite")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[server]\naccountant = 'pld'\n", "accountant"),
        ("[server]\nport = 1\n", "server"),
        ("[nonsense]\n", "unknown"),
        ("[tables.people]\ndeclaration = 'people.toml'\nbudget = { epsilon = inf }\n", "finite"),
        ("[tables.other]\ndeclaration = 'people.toml'\nbudget = { epsilon = 1 }\n", "declare"),
        (
            "[tables.people]\ndeclaration = 'people.toml'\nbudget = { epsilon = 1 }\n"
            "[analysts.ann]\nbudgets.nope = { epsilon = 1 }\n",
            "must name a table",
        ),
        (
            "[tables.people]\ndeclaration = 'people.toml'\nbudget = { epsilon = 1 }\n"
            "[analysts.'bad name']\n",
            "analyst",
        ),
        ("[tables.people\n", "TOML"),
        ("", "tables"),
    ],
)
def test_bad_configs_are_refused_naming_the_key(tmp_path: Path, text: str, words: str) -> None:
    write_table(tmp_path)
    path = tmp_path / "server.toml"
    path.write_text(text)
    with pytest.raises(InvalidParameterError, match=words):
        load_config(path)
