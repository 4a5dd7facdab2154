"""Honest defaults: a contribution bound left at its default warns (PrivacyWarning)."""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path

import pandas as pd
import pytest

import dpcurator
from dpcurator.curator import Column, Table, read_declaration
from dpcurator.errors import PrivacyWarning

FRAME = pd.DataFrame({"pid": [1, 1, 2], "x": [1.0, 2.0, 3.0]})
COLUMNS = [Column("x", lower=0, upper=4)]


def test_a_privacy_unit_with_the_default_bound_warns() -> None:
    with pytest.warns(PrivacyWarning, match="max_rows_per_unit is left at its default of 1") as w:
        table = Table("people", FRAME, privacy_unit="pid", columns=COLUMNS)
    assert table.max_rows_per_unit == 1 and type(table.max_rows_per_unit) is int
    (record,) = w.list
    assert "each pid contributes at most one row" in str(record.message)
    assert record.filename == __file__  # attributed to the caller, not to dpcurator
    assert dpcurator.PrivacyWarning is PrivacyWarning and issubclass(PrivacyWarning, UserWarning)


@pytest.mark.parametrize(
    "options",
    [
        {"privacy_unit": "pid", "max_rows_per_unit": 1},
        {"privacy_unit": "pid", "max_rows_per_unit": 3},
        {},  # each row is its own unit: one row per unit is exact, not a default
    ],
)
def test_declared_bounds_do_not_warn(options: dict[str, object]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = Table("people", FRAME, columns=COLUMNS, **options)
        dataclasses.replace(table, name="again")  # a copy carries the value, not the default


def test_a_toml_declaration_without_the_bound_warns_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "people.toml"
    head = '[table]\nname = "people"\nsource = "people.csv"\nprivacy_unit = "pid"\n'
    columns = "[columns.x]\nlower = 0\nupper = 4\n"
    path.write_text(head + columns)
    with pytest.warns(PrivacyWarning, match=re.escape(str(path))):
        read_declaration(path)
    path.write_text(head + "max_rows_per_unit = 1\n" + columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_declaration(path).table.max_rows_per_unit == 1
