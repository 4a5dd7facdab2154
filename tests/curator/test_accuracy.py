"""Accuracy first: predicted errors, and the epsilon that a target accuracy needs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcurator.curator import Column, Table
from dpcurator.errors import InvalidParameterError, QueryError
from tests.curator.conftest import exact_aggregates, open_session

GROUPS = 200


def _table(seed: int = 0) -> Table:
    rng = np.random.default_rng(seed)
    n = 3000
    frame = pd.DataFrame(
        {
            "pid": np.arange(n) // 2,
            "g": rng.integers(0, GROUPS, n),
            "income": rng.uniform(0, 1000, n),
        }
    )
    return Table(
        "people",
        frame,
        privacy_unit="pid",
        max_rows_per_unit=2,
        max_groups_per_unit=2,
        columns=[Column("g", domain=list(range(GROUPS))), Column("income", lower=0, upper=1000)],
    )


QUERY = "SELECT g, COUNT(*) AS n, SUM(income) AS s FROM people GROUP BY g"


def test_predicted_errors_are_the_released_intervals() -> None:
    with open_session(_table()) as session:
        predicted = {p.alias: p for p in session.predicted_errors(QUERY, epsilon=0.7)}
        release = session.sql(QUERY, epsilon=0.7)
    table = release.table
    for alias in ("n", "s"):
        half = (table[f"{alias}_ci_high"] - table[alias]).to_numpy()
        assert np.allclose(half, predicted[alias].half_width)
        assert np.allclose(table[f"{alias}_std"], predicted[alias].std)
    assert predicted["s"].half_width > predicted["n"].half_width  # a sum's noise is wider


@pytest.mark.parametrize(("kind", "target"), [("ci", 25.0), ("std", 4.0), ("ci", 3000.0)])
def test_the_epsilon_found_is_the_smallest_that_meets_the_target(kind: str, target: float) -> None:
    with open_session(_table()) as session:
        options = {f"target_{kind}": target}
        epsilon = session.epsilon_for(QUERY, **options)

        def worst(eps: float) -> float:
            errors = session.predicted_errors(QUERY, epsilon=eps)
            return max(p.half_width if kind == "ci" else p.std for p in errors)

        assert worst(epsilon) <= target
        assert worst(epsilon * 0.98) > target  # rounded up to 3 digits, never further
        assert session.spent.epsilon == 0.0


def test_a_query_with_a_target_is_charged_the_epsilon_it_needs() -> None:
    with open_session(_table(), budget=100.0) as session:
        needed = session.epsilon_for(QUERY, target_ci=800)
        release = session.sql(QUERY, target_ci=800)
        assert session.spent.epsilon == pytest.approx(needed)
    half = release.table["s_ci_high"] - release.table["s"]
    assert (half <= 800 + 1e-9).all()
    assert ((release.table["n_ci_high"] - release.table["n"]) <= 800).all()


@pytest.mark.slow
def test_intervals_at_the_target_cover_at_their_rate() -> None:
    # Counts of 200 groups per query, 20 queries: 4,000 independent noises. At the epsilon for
    # a 95% half-width of 6, |noisy - exact| <= 6 in at least 95% of draws; with 4,000 draws
    # the binomial standard deviation is 0.0034, so the tolerance is 4 of them (0.936).
    # Negative control: at half that epsilon the interval needed doubles and coverage of 6
    # falls to about 80%.
    query = "SELECT g, COUNT(*) AS n FROM people GROUP BY g"
    covered = {1.0: [], 0.5: []}
    with open_session(_table(), budget=1e6, seed=11) as session:
        epsilon = session.epsilon_for(query, target_ci=6)
        plan, exact = exact_aggregates(session, query, epsilon=epsilon)
        keys = [k[0] for k in exact.keys]
        truth = dict(zip(keys, exact.columns[plan.measurements[0].result], strict=True))
        for factor, hits in covered.items():
            for _ in range(20):
                table = session.sql(query, epsilon=epsilon * factor).table
                errors = table["n"].to_numpy() - np.array([truth.get(g, 0) for g in table["g"]])
                hits.extend(np.abs(errors) <= 6)
    assert np.mean(covered[1.0]) >= 0.95 - 4 * 0.0034
    assert np.mean(covered[0.5]) < 0.9  # the negative control must fail the target


def test_targets_are_refused_where_they_cannot_be_promised() -> None:
    with open_session(_table()) as session:
        with pytest.raises(QueryError, match="cannot be promised for AVG"):
            session.epsilon_for("SELECT AVG(income) FROM people", target_ci=10)
        with pytest.raises(QueryError, match="No epsilon"):
            session.epsilon_for(QUERY, target_ci=1e-6)  # the sum's noise at epsilon 2**20
        with pytest.raises(InvalidParameterError, match="exactly one"):
            session.epsilon_for(QUERY, target_ci=10, target_std=3)
        with pytest.raises(InvalidParameterError, match="exactly one"):
            session.epsilon_for(QUERY)
        with pytest.raises(InvalidParameterError, match="positive finite"):
            session.epsilon_for(QUERY, target_ci=-1)
        with pytest.raises(InvalidParameterError, match="target decides"):
            session.sql(QUERY, epsilon=1.0, target_ci=10)
        with pytest.raises(InvalidParameterError, match="required"):
            session.sql(QUERY)
        assert session.spent.epsilon == 0.0
