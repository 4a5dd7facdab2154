"""Linkage attacks: re-identify a "de-identified" table by joining it with a public one.

Removing names is not anonymisation: the combination of a few *quasi-identifiers* (ZIP code,
birth date, sex; age, race, native country) singles most people out, and anyone holding a public
table with names and the same attributes (a voter list) can join the two (Sweeney 2000: 87 % of
the US population is unique on ZIP, birth date and sex; she found Governor Weld's hospital
record this way; lecture 000, "Real example 2: Governor Weld"; lecture 004; research note C.3).

- :func:`linkage_attack`: for every person of the public table, the released records that share
  their quasi-identifiers; a single match re-identifies the person (and discloses the record's
  sensitive attributes).
- :func:`uniqueness`: the fraction of records unique on the quasi-identifiers (an upper bound on
  what a complete public table re-identifies).
- :func:`weld_example`: the two tables of the lecture.

Examples
--------
>>> medical, voters = weld_example()
>>> result = linkage_attack(medical, voters, ["zipcode", "age", "gender"], identity="name",
...                         sensitive="diagnosis")
>>> result.links.loc[result.links["name"] == "William Weld", "diagnosis"].item()
'Diabetes'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpcurator.errors import InvalidParameterError

__all__ = ["LinkageResult", "check_columns", "linkage_attack", "uniqueness", "weld_example"]


def _pandas() -> Any:
    import pandas as pd  # noqa: PLC0415 (pandas is a core dependency; imported where used)

    return pd


def check_columns(frame: Any, columns: Sequence[str], name: str, argument: str) -> list[str]:
    """Return ``columns`` as a list after checking that ``frame`` has every one of them.

    Raises :class:`~dpcurator.errors.InvalidParameterError` naming the missing columns and the
    argument, with the columns the table has.

    >>> import pandas as pd
    >>> check_columns(pd.DataFrame({"age": [1]}), ["age", "zip"], "released",
    ...               "quasi_identifiers")
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: quasi_identifiers must be columns of released \
(missing: ['zip']; it has ['age']); got ['age', 'zip'].
    """
    if not hasattr(frame, "columns"):
        raise InvalidParameterError(name, type(frame).__name__, "must be a pandas DataFrame")
    if isinstance(columns, str):
        columns = [columns]
    cols = list(columns)
    if not cols:
        raise InvalidParameterError(argument, cols, "must name at least one column")
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise InvalidParameterError(
            argument,
            cols,
            f"must be columns of {name} (missing: {missing}; it has {list(frame.columns)})",
        )
    return cols


@dataclass(frozen=True)
class LinkageResult:
    """Who was re-identified, and how reliably.

    Attributes
    ----------
    links : pandas.DataFrame
        One row per person of the public table: the identity, ``candidates`` (released records
        with the same quasi-identifiers), ``record`` (the index of the single matching record,
        or ``<NA>``), and the sensitive column of that record when one was named.
    reidentified : int
        People with exactly one candidate.
    people : int
        People in the public table.
    correct : int or None
        Re-identifications that were right (when the release's true identities were given for
        evaluation).
    """

    links: Any
    reidentified: int
    people: int
    correct: int | None

    @property
    def rate(self) -> float:
        """Fraction of the public table's people singled out in the release."""
        return self.reidentified / self.people if self.people else 0.0

    @property
    def precision(self) -> float | None:
        """Fraction of the re-identifications that were right (None without ground truth)."""
        if self.correct is None:
            return None
        return self.correct / self.reidentified if self.reidentified else 0.0


def linkage_attack(
    released: Any,
    public: Any,
    quasi_identifiers: Sequence[str],
    *,
    identity: str,
    sensitive: str | None = None,
    truth: str | None = None,
) -> LinkageResult:
    """Join a de-identified release with a public table on quasi-identifiers.

    For each person of ``public`` the candidates are the released records with exactly the same
    quasi-identifier values; one candidate re-identifies the person. The attack never looks at
    ``truth`` (the release's hidden identities): it only scores the links.

    Parameters
    ----------
    released : pandas.DataFrame
        The "anonymised" table (names removed, quasi-identifiers and sensitive data kept).
    public : pandas.DataFrame
        Identified records (e.g. a voter list) with the quasi-identifiers.
    quasi_identifiers : sequence of str
        Columns of both tables.
    identity : str
        The identifying column of ``public``.
    sensitive : str, optional
        A column of ``released`` to disclose for each re-identified person.
    truth : str, optional
        A column of ``released`` holding each record's true identity (evaluation only).

    Returns
    -------
    LinkageResult

    Examples
    --------
    >>> import pandas as pd
    >>> released = pd.DataFrame({"zip": [1, 1, 2], "sex": ["F", "M", "F"], "hiv": [1, 0, 0]})
    >>> public = pd.DataFrame({"name": ["Ann", "Bo", "Cy"], "zip": [1, 1, 3],
    ...                        "sex": ["F", "M", "F"]})
    >>> result = linkage_attack(released, public, ["zip", "sex"], identity="name",
    ...                         sensitive="hiv")
    >>> result.reidentified, result.links["hiv"].tolist()
    (2, [1, 0, <NA>])
    """
    pd = _pandas()
    qis = check_columns(released, quasi_identifiers, "released", "quasi_identifiers")
    check_columns(public, qis, "public", "quasi_identifiers")
    check_columns(public, [identity], "public", "identity")
    if sensitive is not None:
        check_columns(released, [sensitive], "released", "sensitive")
    if truth is not None:
        check_columns(released, [truth], "released", "truth")
    groups = released.reset_index(drop=True).assign(_record=lambda f: f.index)
    summary = groups.groupby(qis, dropna=False, sort=False).agg(
        candidates=("_record", "size"), record=("_record", "first")
    )
    links = public[[identity, *qis]].merge(summary.reset_index(), on=qis, how="left", sort=False)
    links["candidates"] = links["candidates"].fillna(0).astype("int64")
    unique = links["candidates"] == 1
    links["record"] = links["record"].where(unique).astype("Int64")
    base = released.reset_index(drop=True)
    if sensitive is not None:
        values = base[sensitive].astype(object)
        links[sensitive] = [
            values.iloc[int(r)] if not pd.isna(r) else pd.NA for r in links["record"]
        ]
    correct = None
    if truth is not None:
        truths = base[truth].to_numpy()
        correct = int(
            sum(
                truths[int(r)] == who
                for r, who in zip(links["record"], links[identity], strict=True)
                if not pd.isna(r)
            )
        )
    return LinkageResult(
        links=links[[identity, "candidates", "record", *([sensitive] if sensitive else [])]],
        reidentified=int(unique.sum()),
        people=len(links),
        correct=correct,
    )


def uniqueness(frame: Any, quasi_identifiers: Sequence[str]) -> float:
    """Return the fraction of records whose quasi-identifier combination is unique.

    Examples
    --------
    >>> medical, _ = weld_example()
    >>> uniqueness(medical, ["zipcode", "age", "gender"])
    1.0
    """
    qis = check_columns(frame, quasi_identifiers, "frame", "quasi_identifiers")
    if len(frame) == 0:
        return 0.0
    sizes = frame.groupby(qis, dropna=False, sort=False)[qis[0]].transform("size")
    return float((sizes == 1).mean())


def weld_example() -> tuple[Any, Any]:
    """Return the two tables of lecture 000: a "de-identified" medical table and a voter list.

    Returns
    -------
    tuple of pandas.DataFrame
        ``(medical, voters)``: ``medical`` has ``zipcode``, ``age``, ``gender``,
        ``diagnosis``; ``voters`` has ``name``, ``zipcode``, ``age``, ``gender``.

    Examples
    --------
    >>> medical, voters = weld_example()
    >>> len(medical), list(voters.columns)
    (3, ['name', 'zipcode', 'age', 'gender'])
    """
    pd = _pandas()
    medical = pd.DataFrame(
        {
            "zipcode": ["02116", "01104", "01606"],
            "age": [59, 34, 78],
            "gender": ["M", "F", "M"],
            "diagnosis": ["Diabetes", "Healthy", "Cholestrol"],
        }
    )
    voters = pd.DataFrame(
        {
            "name": ["Valerie Pham", "William Weld", "Charles Haas"],
            "zipcode": ["02339", "02116", "01540"],
            "age": [19, 59, 22],
            "gender": ["F", "M", "F"],
        }
    )
    return medical, voters
