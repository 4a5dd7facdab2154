"""Where a TOML declaration says the rows live: a ``source`` path or a shipped ``dataset``."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcurator.curator import read_declaration
from dpcurator.datasets import dataset_path
from dpcurator.errors import InvalidParameterError

COLUMNS = "[columns.household_id]\n[columns.wages]\nlower = 0\nupper = 1000\n"
UNIT = 'privacy_unit = "household_id"\nmax_rows_per_unit = 2\n'


def _write(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(f'[table]\nname = "t"\n{table}{UNIT}{COLUMNS}')
    return path


def test_a_shipped_dataset_resolves_inside_the_package(tmp_path: Path) -> None:
    declaration = read_declaration(_write(tmp_path, 'dataset = "cps"\n'))
    assert declaration.table.source == str(dataset_path("cps"))
    assert Path(declaration.table.source).is_file()


def test_a_source_path_is_relative_to_the_file(tmp_path: Path) -> None:
    declaration = read_declaration(_write(tmp_path, 'source = "rows.parquet"\n'))
    assert declaration.table.source == str(tmp_path.resolve() / "rows.parquet")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('dataset = "cps"\nsource = "x.csv"\n', "must give one of source, dataset"),
        ("", r"table.source is required .* \(or dataset"),
        ('dataset = "cpss"\n', "must be one of adult, cps"),
        ("dataset = 3\n", "must be one of adult, cps"),
        ("source = 3\n", "must be a file path"),
    ],
)
def test_the_source_is_one_path_or_one_dataset(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        read_declaration(_write(tmp_path, table))
