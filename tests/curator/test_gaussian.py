"""Gaussian noise in sessions (issue 14): the choice, its accounting, its privacy and its error.

A unit that touches ``m`` cells moves a vector of counts by ``m`` in L1 but ``sqrt(m)`` in L2,
so with ``delta > 0`` the discrete Gaussian (calibrated to the same ``(epsilon_i, delta_i)``
through zCDP) has the smaller noise when ``m`` is large; ``noise="auto"`` picks it then and
says why. A zCDP query (``rho=``) is Gaussian throughout and needs the zCDP accountant.

The statistical checks reuse the approach of ``test_privacy.py``: exact bounded aggregates on
two neighbouring tables, then the noise stage (``compute``) repeated with a seeded source.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpcurator import DPError
from dpcurator.accounting import (
    ApproxDPEvent,
    Budget,
    DiscreteGaussianEvent,
    zcdp_rho_for,
    zcdp_to_epsilon,
)
from dpcurator.curator import Column, Session, Table, measurement_noise
from dpcurator.curator._measure import Exact, compute, fetch
from dpcurator.curator._plan import Plan
from dpcurator.errors import InvalidParameterError, QueryError
from dpcurator.noise import InsecureSeededSource
from tests.privacy_check import audit, threshold_events

CELLS = 40
QUERY = "SELECT g, COUNT(*) AS n FROM t GROUP BY g"


def _frame(units: int = 100, heavy: int = 0) -> pd.DataFrame:
    """``units`` units with one row in each of ``CELLS`` groups; plus one of ``heavy`` rows per
    group when ``heavy`` (the unit of the neighbouring table)."""
    pid = np.repeat(np.arange(units), CELLS)
    g = np.tile(np.arange(CELLS), units)
    if heavy:
        pid = np.concatenate([pid, np.full(CELLS * heavy, -1)])
        g = np.concatenate([g, np.repeat(np.arange(CELLS), heavy)])
    return pd.DataFrame({"pid": pid, "g": g, "x": (g % 7).astype(float)})


def _table(frame: pd.DataFrame, **bounds: int) -> Table:
    settings = {"max_rows_per_unit": CELLS, "max_groups_per_unit": CELLS, "max_rows_per_group": 1}
    settings.update(bounds)
    return Table(
        "t",
        frame,
        privacy_unit="pid",
        columns=[Column("g", domain=list(range(CELLS))), Column("x", lower=0, upper=10)],
        **settings,
    )


def _session(frame: pd.DataFrame | None = None, seed: int = 0, **options: object) -> Session:
    return Session(
        _table(_frame() if frame is None else frame),
        Budget(100.0, 1e-3),
        ledger=":memory:",
        source=InsecureSeededSource(seed),
        **options,  # type: ignore[arg-type]
    )


# -- the choice -----------------------------------------------------------------------------------
def test_auto_chooses_the_gaussian_where_its_noise_is_smaller_and_says_why() -> None:
    with _session() as session:
        (count,) = session.plan(QUERY, epsilon=1.0, delta=1e-6).measurements
        with _session(noise="laplace") as laplace_session:
            (laplace,) = laplace_session.plan(QUERY, epsilon=1.0, delta=1e-6).measurements
        gaussian_std = measurement_noise(count)
        laplace_std = measurement_noise(laplace)
        assert gaussian_std is not None and laplace_std is not None
        assert count.mechanism == "discrete gaussian" and laplace.mechanism == "geometric"
        # 40 cells: L1 40, L2 sqrt(40); the Gaussian's std is at least 25% below the Laplace's.
        assert gaussian_std.std < 0.75 * laplace_std.std
        assert count.why.startswith("discrete Gaussian: noise std")
        assert "40 in L1, 6.325 in L2" in count.why
        # One cell per unit: the Laplace is better, and auto keeps it.
        (one,) = session.plan(
            "SELECT COUNT(*) AS n FROM t WHERE g = 3", epsilon=1.0, delta=1e-6
        ).measurements
        assert one.mechanism == "geometric" and one.why.startswith("Laplace: noise std")
        # Pure DP: no delta, no Gaussian.
        (pure,) = session.plan(QUERY, epsilon=1.0).measurements
        assert pure.mechanism == "geometric" and "delta is 0" in pure.why


def test_forced_gaussian_needs_delta_and_laplace_never_changes() -> None:
    with _session(noise="gaussian") as session:
        with pytest.raises(InvalidParameterError, match="delta"):
            session.plan(QUERY, epsilon=1.0)
        (m,) = session.plan(
            "SELECT COUNT(*) AS n FROM t WHERE g = 3", epsilon=1.0, delta=1e-6
        ).measurements
        assert m.mechanism == "discrete gaussian"
    with pytest.raises(InvalidParameterError, match="noise"):
        _session(noise="normal")


def test_a_gaussian_measurement_is_charged_what_it_was_calibrated_to() -> None:
    """Basic composition records the (epsilon_i, delta_i) the Gaussian was calibrated to; the
    zCDP accountant records the discrete Gaussian itself, whose rho is at most the share's."""
    query = "SELECT g, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY g"
    with _session() as session:
        plan = session.plan(query, epsilon=1.0, delta=1e-6)
        assert all(isinstance(e, ApproxDPEvent) for e in plan.events)
        assert sum(Fraction(e.epsilon) for e in plan.events) <= 1  # type: ignore[attr-defined]
        assert sum(Fraction(e.delta) for e in plan.events) <= Fraction(1e-6)  # type: ignore[attr-defined]
    with _session(accountant="zcdp") as session:
        plan = session.plan(query, epsilon=1.0, delta=1e-6)
        for m, event in zip(plan.measurements, plan.events, strict=True):
            assert isinstance(event, DiscreteGaussianEvent) and m.gaussian is not None
            rho = Fraction(event.sensitivity) ** 2 / (2 * Fraction(event.sigma) ** 2)
            assert rho <= Fraction(zcdp_rho_for(m.epsilon, m.delta))
            assert Fraction(event.sensitivity) ** 2 >= m.gaussian.l2_squared


@pytest.mark.parametrize(("rows", "per_group", "square"), [(40, 1, 40), (10, 4, 36), (9, 4, 33)])
def test_l2_sensitivity_of_row_counts(rows: int, per_group: int, square: int) -> None:
    """``min(k, g' c) = q c + s`` rows, ``c`` to a group: squared L2 ``q c^2 + s^2``."""
    frame = _frame()
    table = _table(frame, max_rows_per_unit=rows, max_rows_per_group=per_group)
    with Session(table, Budget(10.0, 1e-3), ledger=":memory:", noise="gaussian") as session:
        (m,) = session.plan(QUERY, epsilon=1.0, delta=1e-6).measurements
    assert m.gaussian is not None and m.gaussian.l2_squared == square


def _exact(session: Session, query: str, **budget: float) -> tuple[Plan, Exact]:
    plan = session.plan(query, **budget)
    return plan, fetch(plan, session._read(plan))


def test_the_unit_moves_the_exact_vector_by_at_most_the_planned_l2() -> None:
    """On neighbouring tables, the bounded counts differ by exactly the planned L2 (tight)."""
    big = _frame(heavy=5)
    with _session(big) as with_unit, _session() as without:
        plan, exact = _exact(with_unit, QUERY, epsilon=1.0, delta=1e-6)
        _, exact_other = _exact(without, QUERY, epsilon=1.0, delta=1e-6)
    (m,) = plan.measurements
    change = exact.columns[m.result] - exact_other.columns[m.result]
    assert m.gaussian is not None
    assert int(np.sum(change.astype(np.int64) ** 2)) == m.gaussian.l2_squared


# -- zCDP queries ---------------------------------------------------------------------------------
def test_rho_queries_are_gaussian_and_charged_in_zcdp() -> None:
    with _session(accountant="zcdp") as session:
        release = session.sql(QUERY, rho=0.02)
        (m,) = release.split
        assert m.mechanism == "discrete gaussian" and "zCDP" in m.why
        assert m.gaussian is not None and m.gaussian.rho <= 0.02
        second = session.sql("SELECT MEDIAN(x) AS m FROM t", rho=0.02)
        assert second.split[0].mechanism == "exponential"
        spent = zcdp_to_epsilon(0.04, 1e-3)
        assert session.spent.epsilon == pytest.approx(spent, rel=1e-6)


def test_rho_queries_are_refused_before_reading_without_a_zcdp_accountant() -> None:
    with _session() as session:
        with pytest.raises(InvalidParameterError, match="accountant='zcdp'"):
            session.sql(QUERY, rho=0.02)
        assert session.spent == Budget(0.0, 0.0)
    frame = _frame().assign(name="a")
    table = Table(
        "t",
        frame,
        privacy_unit="pid",
        max_rows_per_unit=CELLS,
        columns=[Column("g", domain=list(range(CELLS))), Column("name")],
    )
    with Session(table, Budget(10.0, 1e-3), ledger=":memory:", accountant="zcdp") as session:
        with pytest.raises(InvalidParameterError, match="not both"):
            session.sql("SELECT COUNT(*) FROM t", epsilon=1.0, rho=0.02)
        with pytest.raises(QueryError, match="partition selection"):
            session.sql("SELECT name, COUNT(*) FROM t GROUP BY name", rho=0.01)
        assert session.spent == Budget(0.0, 0.0)
        assert isinstance(QueryError("x"), DPError)


def test_a_long_zcdp_session_answers_more_accurately_at_the_same_total_budget() -> None:
    """50 counts over 40 cells at a total (1, 1e-6): zCDP with Gaussians against Laplace with
    basic composition, the noise std per answer from the plans (nothing read)."""
    queries, total = 50, Budget(1.0, 1e-6)
    with Session(_table(_frame()), total, ledger=":memory:", noise="laplace") as basic:
        (laplace,) = basic.plan(QUERY, epsilon=1.0 / queries).measurements
    rho = zcdp_rho_for(1.0, 1e-6) / queries
    with Session(_table(_frame()), total, ledger=":memory:", accountant="zcdp") as zcdp:
        (gaussian,) = zcdp.plan(QUERY, rho=rho).measurements
        for _ in range(queries):
            zcdp.plan(QUERY, rho=rho)  # fits: 50 rho shares convert back to at most (1, 1e-6)
    laplace_std, gaussian_std = measurement_noise(laplace), measurement_noise(gaussian)
    assert laplace_std is not None and gaussian_std is not None
    assert gaussian_std.std < 0.25 * laplace_std.std  # sqrt(40) and sqrt(50) at work
    assert zcdp_to_epsilon(rho * queries, 1e-6) <= 1.0


# -- statistical ----------------------------------------------------------------------------------
N = 1500
ALPHA = 1e-3


def _sums(plan: Plan, exact: Exact, seed: int, n: int = N) -> np.ndarray:
    """The released counts summed over the groups: the direction in which the unit moves them
    (a shift of ``sqrt(m) Delta_2`` against noise of std ``sqrt(m) sigma``)."""
    source = InsecureSeededSource(seed)
    out = np.empty(n)
    for i in range(n):
        table, _, _ = compute(plan, exact, source=source, confidence=0.95)
        out[i] = float(table["n"].sum())
    return out


@pytest.mark.statistical
@pytest.mark.slow
def test_gaussian_query_privacy_on_neighbouring_tables() -> None:
    epsilon, delta = 1.0, 1e-6
    with _session(_frame(heavy=25)) as with_unit, _session() as without:
        plan, exact = _exact(with_unit, QUERY, epsilon=epsilon, delta=delta)
        _, exact_other = _exact(without, QUERY, epsilon=epsilon, delta=delta)
    assert plan.measurements[0].mechanism == "discrete gaussian"
    samples = _sums(plan, exact, 1), _sums(plan, exact_other, 2)
    centre = float(np.median(samples[1]))
    sigma = plan.measurements[0].scale * math.sqrt(CELLS)  # std of the sum
    events = threshold_events(centre + sigma * k for k in np.arange(-1.0, 3.01, 0.25))
    result = audit(*samples, events, alpha=ALPHA, delta=delta)
    assert result.epsilon_lower_bound <= epsilon, result
    # Negative control: the unit's 25 rows per group not truncated (25x the planned shift).
    loose = _table(_frame(heavy=25), max_rows_per_group=25, max_rows_per_unit=1000)
    with Session(loose, Budget(100.0, 1e-3), ledger=":memory:") as untruncated:
        _, broken = _exact(untruncated, QUERY, epsilon=epsilon, delta=delta)
    caught = audit(
        _sums(plan, broken, 3, n=300), samples[1][:300], events, alpha=ALPHA, delta=delta
    )
    assert caught.epsilon_lower_bound > epsilon, caught


@pytest.mark.statistical
def test_gaussian_intervals_cover_at_their_rate() -> None:
    with _session() as session:
        plan, exact = _exact(session, QUERY, epsilon=1.0, delta=1e-6)
    truth = 100.0  # every group has one row of each of the 100 units
    repeats = 100
    trials = repeats * CELLS
    slack = 4 * math.sqrt(0.95 * 0.05 / trials)

    def rate(shrink: float, seed: int) -> float:
        source, covered = InsecureSeededSource(seed), 0
        for _ in range(repeats):
            table, intervals, _ = compute(plan, exact, source=source, confidence=0.95)
            assert intervals["n"] == "exact"
            centre = table["n"].to_numpy(dtype=float)
            low = centre - shrink * (centre - table["n_ci_low"].to_numpy())
            high = centre + shrink * (table["n_ci_high"].to_numpy() - centre)
            covered += int(np.count_nonzero((low <= truth) & (truth <= high)))
        return covered / trials

    assert rate(1.0, 5) >= 0.95 - slack
    assert rate(0.4, 6) < 0.95 - slack  # negative control: intervals 40% as wide
