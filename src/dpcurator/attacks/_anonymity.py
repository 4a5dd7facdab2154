r"""Syntactic anonymity (k-anonymity, l-diversity, t-closeness), Mondrian, and their attacks.

Records that share their quasi-identifier (QI) values form an *equivalence class*.

- **k-anonymity** (Samarati and Sweeney 1998; Sweeney 2002; lecture 000): every class has at
  least ``k`` records. :func:`k_anonymity` returns the largest such ``k`` (the smallest class).
- **l-diversity** (Machanavajjhala, Kifer, Gehrke and Venkitasubramaniam, ICDE 2006 / TKDD 2007),
  per class, for a sensitive attribute: *distinct* (at least ``l`` distinct values),
  *entropy* (``-sum_s p_s ln p_s >= ln l``), *recursive (c, l)* (``r_1 < c (r_l + ... + r_m)``
  with ``r_1 >= r_2 >= ...`` the class's value counts).
- **t-closeness** (Li, Li and Venkatasubramanian, ICDE 2007): the Earth Mover's Distance between
  each class's sensitive distribution ``P`` and the table's ``Q`` is at most ``t``; equal ground
  distance for categories, ``EMD = (1/2) sum_i |p_i - q_i|``; ordered distance for ``m`` ordered
  values, ``EMD = (1/(m - 1)) sum_i |sum_{j <= i} (p_j - q_j)|``.
- **Mondrian** (LeFevre, DeWitt and Ramakrishnan, ICDE 2006): strict multidimensional
  partitioning; split the widest QI at its median while both halves keep ``k`` records (and, on
  request, ``l`` distinct sensitive values), then generalise each partition's QIs to its range
  (numbers: a closed :class:`pandas.Interval`; categories: the set of values present, a
  ``frozenset``).
- **Homogeneity attack** (lecture 004, the Kearns and Roth table; research note C.3): a target
  whose QIs fall only in classes sharing one sensitive value has that value disclosed, however
  large ``k``; with **background knowledge** (values the attacker can rule out) more fall.

None of these notions composes or resists arbitrary auxiliary information: the motivation for
differential privacy (lecture 004, "incomplete history of privacy protection").

Examples
--------
>>> import pandas as pd
>>> table = pd.DataFrame({"zip": ["191**"] * 4, "age": ["60-70", "60-70", "50-60", "50-60"],
...                       "disease": ["flu", "flu", "HIV", "cancer"]})
>>> k_anonymity(table, ["zip", "age"]), distinct_l_diversity(table, ["zip", "age"], "disease")
(2, 1)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer, check_positive
from dpcurator.attacks._linkage import check_columns
from dpcurator.errors import InvalidParameterError

__all__ = [
    "AnonymizedTable",
    "HomogeneityResult",
    "distinct_l_diversity",
    "entropy_l_diversity",
    "equivalence_classes",
    "homogeneity_attack",
    "is_k_anonymous",
    "is_l_diverse",
    "k_anonymity",
    "mondrian",
    "recursive_cl_diversity",
    "t_closeness",
]

_KINDS = ("distinct", "entropy", "recursive")
_MISSING = "\x00<missing>"


def _pandas() -> Any:
    import pandas as pd  # noqa: PLC0415 (pandas is a core dependency; imported where used)

    return pd


def _hashable(frame: Any, columns: list[str]) -> Any:
    """Return the QI columns with unhashable cells (sets) made hashable for grouping."""
    out = frame[columns].copy()
    for column in columns:
        if out[column].dtype == object:
            out[column] = out[column].map(lambda v: frozenset(v) if isinstance(v, set) else v)
    return out


def _groups(frame: Any, qis: list[str]) -> Any:
    return _hashable(frame, qis).groupby(qis, dropna=False, sort=False)


def equivalence_classes(frame: Any, quasi_identifiers: Sequence[str]) -> Any:
    """Return the size of every equivalence class (records sharing their QI values).

    Parameters
    ----------
    frame : pandas.DataFrame
    quasi_identifiers : sequence of str

    Returns
    -------
    pandas.Series
        Class sizes indexed by the QI values, largest first.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"zip": [1, 1, 2], "sex": ["F", "F", "M"]})
    >>> equivalence_classes(frame, ["zip", "sex"]).tolist()
    [2, 1]
    """
    qis = check_columns(frame, quasi_identifiers, "frame", "quasi_identifiers")
    return _groups(frame, qis).size().sort_values(ascending=False, kind="stable")


def k_anonymity(frame: Any, quasi_identifiers: Sequence[str]) -> int:
    """Return the largest ``k`` for which ``frame`` is k-anonymous: its smallest class size.

    An empty table is vacuously k-anonymous for every ``k``; this returns 0 for it.

    Examples
    --------
    >>> import pandas as pd
    >>> k_anonymity(pd.DataFrame({"zip": [1, 1, 2, 2, 2]}), ["zip"])
    2
    """
    sizes = equivalence_classes(frame, quasi_identifiers)
    return int(sizes.min()) if len(sizes) else 0


def _check_k(k: object) -> int:
    return check_integer(k, "k", minimum=1)


def is_k_anonymous(frame: Any, quasi_identifiers: Sequence[str], k: int) -> bool:
    """Whether every equivalence class has at least ``k`` records (``k >= 1``).

    Examples
    --------
    >>> import pandas as pd
    >>> is_k_anonymous(pd.DataFrame({"zip": [1, 1, 2, 2, 2]}), ["zip"], 3)
    False
    """
    kk = _check_k(k)
    return len(frame) == 0 or k_anonymity(frame, quasi_identifiers) >= kk


def _class_counts(frame: Any, quasi_identifiers: Sequence[str], sensitive: str) -> list[Any]:
    """Per class, the counts of its sensitive values (a Series each)."""
    qis = check_columns(frame, quasi_identifiers, "frame", "quasi_identifiers")
    check_columns(frame, [sensitive], "frame", "sensitive")
    if sensitive in qis:
        raise InvalidParameterError("sensitive", sensitive, "must not also be a quasi-identifier")
    data = _hashable(frame, qis).assign(_sensitive=frame[sensitive].to_numpy())
    grouped = data.groupby(qis, dropna=False, sort=False)["_sensitive"]
    return [group.value_counts(dropna=False) for _, group in grouped]


def distinct_l_diversity(frame: Any, quasi_identifiers: Sequence[str], sensitive: str) -> int:
    """Return the largest ``l`` for distinct l-diversity: the fewest distinct values in a class.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"zip": [1, 1, 1, 2, 2], "d": ["a", "b", "a", "c", "c"]})
    >>> distinct_l_diversity(frame, ["zip"], "d")
    1
    """
    counts = _class_counts(frame, quasi_identifiers, sensitive)
    return min((len(c) for c in counts), default=0)


def entropy_l_diversity(frame: Any, quasi_identifiers: Sequence[str], sensitive: str) -> float:
    r"""Return the largest ``l`` for entropy l-diversity: ``exp`` of the smallest class entropy.

    A table is entropy l-diverse when every class has ``-sum_s p_s ln p_s >= ln l``
    (Machanavajjhala et al. 2007, Definition 4.1), so the largest such ``l`` is
    ``exp(min_class H)``.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"zip": [1, 1, 2, 2, 2, 2], "d": list("abaabb")})
    >>> entropy_l_diversity(frame, ["zip"], "d")  # both classes split evenly: ln 2
    2.0
    """
    counts = _class_counts(frame, quasi_identifiers, sensitive)
    if not counts:
        return 0.0
    smallest = math.inf
    for c in counts:
        p = c.to_numpy(dtype=np.float64) / float(c.sum())
        smallest = min(smallest, float(-(p * np.log(p)).sum()))
    return float(np.round(math.exp(smallest), 12))


def _check_c(c: object) -> float:
    return check_positive(c, "c")


def recursive_cl_diversity(
    frame: Any, quasi_identifiers: Sequence[str], sensitive: str, *, c: float
) -> int:
    r"""Return the largest ``l`` for which the table is recursive (c, l)-diverse.

    A class with value counts ``r_1 >= r_2 >= ... >= r_m`` is (c, l)-diverse when
    ``r_1 < c (r_l + r_{l+1} + ... + r_m)`` (Machanavajjhala et al. 2007, Definition 4.3); the
    table is when every class is. Returns 0 when no ``l >= 1`` works.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"zip": [1] * 6, "d": list("aaabbc")})  # counts 3, 2, 1
    >>> recursive_cl_diversity(frame, ["zip"], "d", c=2)  # 3 < 2 (2 + 1); 3 >= 2 * 1
    2
    """
    cc = _check_c(c)
    counts = _class_counts(frame, quasi_identifiers, sensitive)
    if not counts:
        return 0
    best = math.inf
    for values in counts:
        r = np.sort(values.to_numpy(dtype=np.float64))[::-1]
        tails = np.cumsum(r[::-1])[::-1]  # tails[l-1] = r_l + ... + r_m
        ok = r[0] < cc * tails
        # ok is monotone: true up to some l, then false.
        best = min(best, int(ok.sum()))
    return int(best)


def is_l_diverse(
    frame: Any,
    quasi_identifiers: Sequence[str],
    sensitive: str,
    l: int,  # noqa: E741 (the paper's letter)
    *,
    kind: str = "distinct",
    c: float | None = None,
) -> bool:
    """Whether the table is l-diverse (``kind``: distinct, entropy or recursive with ``c``).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"zip": [1] * 6, "d": list("aaabbc")})
    >>> is_l_diverse(frame, ["zip"], "d", 3), is_l_diverse(frame, ["zip"], "d", 3,
    ...                                                        kind="recursive", c=2)
    (True, False)
    """
    ll = check_integer(l, "l", minimum=1)
    if kind not in _KINDS:
        raise InvalidParameterError("kind", kind, f"must be one of {_KINDS}")
    if kind == "distinct":
        return distinct_l_diversity(frame, quasi_identifiers, sensitive) >= ll
    if kind == "entropy":
        return entropy_l_diversity(frame, quasi_identifiers, sensitive) >= ll - 1e-12
    if c is None:
        raise InvalidParameterError("c", c, "must be given for recursive (c, l)-diversity")
    return recursive_cl_diversity(frame, quasi_identifiers, sensitive, c=c) >= ll


def t_closeness(
    frame: Any,
    quasi_identifiers: Sequence[str],
    sensitive: str,
    *,
    ordered: bool | None = None,
) -> float:
    r"""Return the smallest ``t`` for which the table is t-close: the largest class EMD.

    The Earth Mover's Distance between a class's sensitive distribution ``P`` and the whole
    table's ``Q`` over the ``m`` values of the table (Li, Li and Venkatasubramanian 2007,
    Section 4): with ``ordered=False`` (equal distance between categories)
    ``(1/2) sum_i |p_i - q_i|``; with ``ordered=True`` (values in their sorted order, each step
    ``1/(m - 1)``) ``(1/(m - 1)) sum_i |sum_{j <= i} (p_j - q_j)|``. By default numbers are
    ordered and categories are not.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"zip": [1, 1, 2, 2], "salary": [3, 4, 5, 6]})
    >>> t_closeness(frame, ["zip"], "salary")  # class 1: P = (1/2, 1/2, 0, 0), Q uniform
    0.3333333333333333
    >>> t_closeness(frame, ["zip"], "salary", ordered=False)
    0.5
    """
    qis = check_columns(frame, quasi_identifiers, "frame", "quasi_identifiers")
    check_columns(frame, [sensitive], "frame", "sensitive")
    if len(frame) == 0:
        return 0.0
    column = frame[sensitive]
    is_numeric = column.dtype.kind in "biuf"
    use_order = is_numeric if ordered is None else bool(ordered)
    values = column.to_numpy()
    domain, codes = np.unique(
        values.astype(object) if not is_numeric else values, return_inverse=True
    )
    m = int(domain.size)
    if m == 1:
        return 0.0
    total = np.bincount(codes, minlength=m) / codes.size
    keys = _hashable(frame, qis)
    worst = 0.0
    for indices in keys.groupby(qis, dropna=False, sort=False).indices.values():
        p = np.bincount(codes[indices], minlength=m) / len(indices)
        if use_order:
            distance = float(np.abs(np.cumsum(p - total)).sum() / (m - 1))
        else:
            distance = float(np.abs(p - total).sum() / 2.0)
        worst = max(worst, distance)
    return worst


# -- Mondrian ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class AnonymizedTable:
    """A generalised table and its partitions.

    Attributes
    ----------
    table : pandas.DataFrame
        Same rows and index as the input; each QI generalised to its partition's range (numbers:
        a closed :class:`pandas.Interval` ``[min, max]``, categories: the ``frozenset`` of values
        present); the other columns unchanged.
    partitions : list of numpy.ndarray
        Row positions of each partition.
    quasi_identifiers : list of str
    k : int
    """

    table: Any
    partitions: list[NDArray[np.int64]]
    quasi_identifiers: list[str]
    k: int


def _encode(frame: Any, qis: list[str]) -> tuple[NDArray[np.float64], list[Any], list[bool]]:
    """QI columns as numbers: numeric columns as they are, categories as sorted codes."""
    columns: list[NDArray[np.float64]] = []
    domains: list[Any] = []
    numeric: list[bool] = []
    for column in qis:
        series = frame[column]
        if series.dtype.kind in "biuf":
            if series.isna().any():
                raise InvalidParameterError(
                    "frame",
                    f"<missing values in numeric {column!r}>",
                    "must have no missing numeric quasi-identifiers",
                )
            columns.append(series.to_numpy(dtype=np.float64))
            domains.append(None)
            numeric.append(True)
        else:
            # A missing category is a value of its own (generalised sets hold it as None).
            labels = series.astype(object).where(series.notna(), _MISSING).astype(str)
            domain, codes = np.unique(labels.to_numpy(), return_inverse=True)
            columns.append(codes.astype(np.float64))
            domains.append(domain)
            numeric.append(False)
    return np.column_stack(columns), domains, numeric


def _split(
    rows: NDArray[np.int64],
    data: NDArray[np.float64],
    spans: NDArray[np.float64],
    *,
    k: int,
    sensitive: NDArray[np.int64] | None,
    l_min: int,
) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """Cut one partition: widest normalised dimension first, at the median (or None)."""
    block = data[rows]
    widths = (block.max(axis=0) - block.min(axis=0)) / spans
    for dim in np.argsort(-widths, kind="stable"):
        if widths[dim] <= 0:
            break
        values = block[:, dim]
        median = float(np.median(values))
        left = values <= median
        if left.all():  # the median is the maximum: cut below it instead
            left = values < median
        n_left = int(left.sum())
        if n_left < k or rows.size - n_left < k:
            continue
        lhs, rhs = rows[left], rows[~left]
        if sensitive is not None and (
            np.unique(sensitive[lhs]).size < l_min or np.unique(sensitive[rhs]).size < l_min
        ):
            continue
        return lhs, rhs
    return None


def mondrian(
    frame: Any,
    quasi_identifiers: Sequence[str],
    k: int,
    *,
    sensitive: str | None = None,
    l: int = 1,  # noqa: E741 (the paper's letter)
) -> AnonymizedTable:
    """Generalise ``frame`` into a k-anonymous table by Mondrian partitioning.

    Strict multidimensional Mondrian (LeFevre, DeWitt and Ramakrishnan 2006, Algorithm 1): start
    with one partition; split a partition on the QI with the widest range (normalised by the
    table's range; categories by their sorted codes) at its median when both halves keep at
    least ``k`` records (and, with ``sensitive``, at least ``l`` distinct sensitive values);
    otherwise try the next QI; a partition that no QI can split is final. Every partition then
    has at least ``k`` records, so the generalised table is k-anonymous (and distinct
    l-diverse with ``sensitive``).

    Parameters
    ----------
    frame : pandas.DataFrame
        Needs at least ``k`` rows; numeric QIs must not be missing (a missing category is a
        category of its own).
    quasi_identifiers : sequence of str
    k : int
        ``>= 1``.
    sensitive : str, optional
        Sensitive column for the l-diversity constraint.
    l : int, default 1

    Returns
    -------
    AnonymizedTable

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"age": [21, 22, 35, 36, 50, 52],
    ...                       "sex": ["F", "M", "F", "M", "F", "F"],
    ...                       "disease": ["flu", "HIV", "flu", "flu", "cancer", "flu"]})
    >>> out = mondrian(frame, ["age", "sex"], 2)
    >>> k_anonymity(out.table, ["age", "sex"]), len(out.partitions)
    (3, 2)
    >>> out.table["age"].iloc[0], sorted(out.table["sex"].iloc[0])
    (Interval(21.0, 35.0, closed='both'), ['F', 'M'])
    """
    pd = _pandas()
    qis = check_columns(frame, quasi_identifiers, "frame", "quasi_identifiers")
    kk = _check_k(k)
    ll = check_integer(l, "l", minimum=1)
    if len(frame) < kk:
        raise InvalidParameterError("k", k, f"must be <= the number of rows ({len(frame)})")
    codes: NDArray[np.int64] | None = None
    if sensitive is not None:
        check_columns(frame, [sensitive], "frame", "sensitive")
        if sensitive in qis:
            raise InvalidParameterError(
                "sensitive", sensitive, "must not also be a quasi-identifier"
            )
        _, codes = np.unique(frame[sensitive].to_numpy().astype(str), return_inverse=True)
        if np.unique(codes).size < ll:
            raise InvalidParameterError(
                "l", l, f"must be <= the distinct values of {sensitive!r} in the table"
            )
    data, domains, numeric = _encode(frame, qis)
    spans = data.max(axis=0) - data.min(axis=0)
    spans[spans == 0] = 1.0
    final: list[NDArray[np.int64]] = []
    stack = [np.arange(len(frame), dtype=np.int64)]
    while stack:
        rows = stack.pop()
        cut = _split(rows, data, spans, k=kk, sensitive=codes, l_min=ll)
        if cut is None:
            final.append(rows)
        else:
            stack.extend((cut[1], cut[0]))
    final.sort(key=lambda r: int(r.min()))
    generalised: dict[str, list[Any]] = {column: [None] * len(frame) for column in qis}
    for rows in final:
        block = data[rows]
        for j, column in enumerate(qis):
            lo, hi = float(block[:, j].min()), float(block[:, j].max())
            if numeric[j]:
                value: Any = pd.Interval(lo, hi, closed="both")
            else:
                present = domains[j][np.unique(block[:, j].astype(np.int64))].tolist()
                value = frozenset(None if v == _MISSING else v for v in present)
            cells = generalised[column]
            for r in rows.tolist():
                cells[r] = value
    table = frame.copy()
    for column in qis:
        table[column] = pd.Series(generalised[column], index=frame.index, dtype=object)
    return AnonymizedTable(table=table, partitions=final, quasi_identifiers=qis, k=kk)


# -- the homogeneity and background-knowledge attacks ----------------------------------------
@dataclass(frozen=True)
class HomogeneityResult:
    """Which targets' sensitive values a generalised release discloses.

    Attributes
    ----------
    inferred : pandas.Series
        Per target (the targets' index): the disclosed value, or ``None``.
    candidates : pandas.Series
        Per target: how many sensitive values remain possible (0: no class matches).
    disclosed : int
        Targets with exactly one possible value.
    targets : int
    correct : int or None
        Disclosures that were right (when the targets' true values were given).
    """

    inferred: Any
    candidates: Any
    disclosed: int
    targets: int
    correct: int | None

    @property
    def rate(self) -> float:
        """Fraction of the targets whose sensitive value was disclosed."""
        return self.disclosed / self.targets if self.targets else 0.0


def _is_missing(value: Any) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return type(value).__name__ == "NAType"  # pandas.NA


def _covers(generalised: Any, raw: Any) -> bool:
    if isinstance(generalised, frozenset | set):
        return (None in generalised) if _is_missing(raw) else raw in generalised
    if hasattr(generalised, "left") and hasattr(generalised, "closed"):  # pandas.Interval
        try:
            return bool(raw in generalised)
        except TypeError:
            return False
    return bool(generalised == raw)


def homogeneity_attack(
    release: Any,
    quasi_identifiers: Sequence[str],
    sensitive: str,
    targets: Any,
    *,
    ruled_out: Collection[Any] = (),
    truth: str | None = None,
) -> HomogeneityResult:
    """Infer targets' sensitive values from the classes their quasi-identifiers fall in.

    The attacker knows each target's raw QI values (and that the target is in the release). The
    possible sensitive values of a target are those of every released record whose generalised
    QIs cover the target's (an interval containing the age, a set containing the race, or an
    equal value); values in ``ruled_out`` are removed (the background-knowledge attack:
    "heart disease is rare among young Japanese women"). One remaining value is a disclosure,
    however large ``k`` is (lecture 004; research note C.3).

    Parameters
    ----------
    release : pandas.DataFrame
        A generalised release (e.g. :attr:`AnonymizedTable.table`) or a raw one.
    quasi_identifiers : sequence of str
    sensitive : str
    targets : pandas.DataFrame
        One row per target with the raw QI columns (and ``truth`` for scoring).
    ruled_out : collection, default ()
        Sensitive values the attacker knows the targets do not have.
    truth : str, optional
        A column of ``targets`` with their true sensitive values (evaluation only).

    Returns
    -------
    HomogeneityResult

    Examples
    --------
    The lecture's table: Rebecca is 55, female, a non-smoker from ZIP 191**.

    >>> import pandas as pd
    >>> release = pd.DataFrame({
    ...     "age": ["60-70", "60-70", "50-60", "50-60", "50-60"],
    ...     "sex": ["M", "F", "F", "M", "F"],
    ...     "diagnosis": ["Heart disease", "Arthritis", "HIV", "Lyme disease", "Colitis"]})
    >>> rebecca = pd.DataFrame({"age": ["50-60"], "sex": ["F"]})
    >>> homogeneity_attack(release, ["age", "sex"], "diagnosis", rebecca).candidates.tolist()
    [2]
    >>> homogeneity_attack(release, ["age", "sex"], "diagnosis", rebecca,
    ...                    ruled_out={"Colitis"}).inferred.tolist()
    ['HIV']
    """
    pd = _pandas()
    qis = check_columns(release, quasi_identifiers, "release", "quasi_identifiers")
    check_columns(release, [sensitive], "release", "sensitive")
    check_columns(targets, qis, "targets", "quasi_identifiers")
    if truth is not None:
        check_columns(targets, [truth], "targets", "truth")
    excluded = set(ruled_out)
    classes: list[tuple[tuple[Any, ...], set[Any]]] = []
    keys = _hashable(release, qis).assign(_sensitive=release[sensitive].to_numpy())
    for key, group in keys.groupby(qis, dropna=False, sort=False)["_sensitive"]:
        cells = key if isinstance(key, tuple) else (key,)
        classes.append((cells, set(group.tolist()) - excluded))
    inferred: list[Any] = []
    counts: list[int] = []
    for raw in targets[qis].itertuples(index=False, name=None):
        possible: set[Any] = set()
        for cells, values in classes:
            if all(_covers(g, r) for g, r in zip(cells, raw, strict=True)):
                possible |= values
        counts.append(len(possible))
        inferred.append(next(iter(possible)) if len(possible) == 1 else None)
    inferred_series = pd.Series(inferred, index=targets.index, dtype=object)
    disclosed = int(sum(v is not None for v in inferred))
    correct = None
    if truth is not None:
        correct = int(
            sum(
                v is not None and v == t
                for v, t in zip(inferred, targets[truth].tolist(), strict=True)
            )
        )
    return HomogeneityResult(
        inferred=inferred_series,
        candidates=pd.Series(counts, index=targets.index, dtype="int64"),
        disclosed=disclosed,
        targets=len(targets),
        correct=correct,
    )
