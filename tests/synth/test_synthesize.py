"""Synthetic data (src/dpcurator/synth): privacy of the measurements, schema, ledger, refusals.

Privacy: a marginal's exact counts are read by the curator's engine on two neighbouring tables
(one with a household of 20 rows in one cell, one without it; at most 3 rows per household
declared), then the measurement step (discrete Gaussian noise for the declared bound, the
function :func:`synthesize` runs) is repeated with a seeded source; the Clopper-Pearson audit of
``tests/privacy_check.py`` must not certify more than the (epsilon, delta) that the step's rho
implies, and a negative control (the household's rows not bounded, noise still for 3 rows) must
be caught.
"""

from __future__ import annotations

import importlib
import itertools
import json
import math
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dpcurator.accounting import (
    ApproxDPEvent,
    Budget,
    ZCDPEvent,
    zcdp_to_epsilon,
)
from dpcurator.cli import app
from dpcurator.curator import Column, Plan, Session, Table
from dpcurator.curator._steward import Projection
from dpcurator.errors import BudgetExceededError, InvalidParameterError, QueryError
from dpcurator.noise import InsecureSeededSource
from dpcurator.synth import METHODS, Marginal, fit_model, synthesize
from dpcurator.synth._measure import (
    MarginalQuery,
    attributes,
    groups_for,
    plan_marginals,
    sigma_for,
)

# The suite's Clopper-Pearson audit; imported by name so that mypy, run on this package, does not
# type-check that shared helper (its lambdas are untyped).
_check = importlib.import_module("tests.privacy_check")
audit: Callable[..., Any] = _check.audit
threshold_events: Callable[..., Any] = _check.threshold_events

AGE_BINS = (0.0, 18.0, 40.0, 65.0, 100.0)


def _people(households: int = 300, seed: int = 0) -> pd.DataFrame:
    """Households of 1 to 3 people; age, sex and a smoker flag related to age."""
    rng = np.random.default_rng(seed)  # the data, not noise
    sizes = rng.integers(1, 4, households)
    hh = np.repeat(np.arange(households), sizes)
    age = rng.integers(0, 100, hh.size)
    return pd.DataFrame(
        {
            "hh": hh,
            "age": age,
            "sex": rng.choice(["F", "M"], hh.size),
            "smoker": np.where(age > 40, rng.random(hh.size) < 0.4, rng.random(hh.size) < 0.1),
            "income": rng.uniform(0, 1000, hh.size),
        }
    )


def _table(frame: pd.DataFrame, rows: int = 3) -> Table:
    return Table(
        "people",
        frame,
        privacy_unit="hh",
        max_rows_per_unit=rows,
        max_groups_per_unit=rows,
        columns=(
            Column("age", lower=0, upper=99, bins=AGE_BINS),
            Column("sex", domain=("F", "M")),
            Column("smoker", domain=(True, False)),
            Column("income", lower=0, upper=1000),
        ),
    )


def _session(frame: pd.DataFrame | None = None, budget: Budget | None = None, **kw: Any) -> Session:
    table = _table(_people() if frame is None else frame)
    return Session(
        table,
        budget or Budget(5.0, 1e-6),
        ledger=":memory:",
        source=InsecureSeededSource(7),
        **kw,
    )


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement a DuckDB engine runs (to check that refusals read nothing)."""
    from dpcurator.curator import DuckDBEngine

    seen: list[str] = []
    original = DuckDBEngine.run

    def run(self: DuckDBEngine, statement: Any, table: str) -> Any:
        seen.append(table)
        return original(self, statement, table)

    monkeypatch.setattr(DuckDBEngine, "run", run)
    yield seen


# -- privacy of the measurement step -------------------------------------------------------------
N = 4000
RHO = 0.125
DELTA = 1e-3


def _query(session: Session, table: Table, projected: bool) -> MarginalQuery:
    """The one-way marginal of ``sex``: its own plan, or summed from ``GROUP BY sex, smoker``."""
    attrs = attributes(table, ["sex", "smoker"])
    if not projected:
        return MarginalQuery.build(session, table, attrs, (0,))
    query = plan_marginals(session, table, attrs, [(0,), (0, 1)])[(0,)]
    assert isinstance(query.measured, Projection)  # one read of the pair, summed over smoker
    return query


def _measurements(
    frame: pd.DataFrame, declared_rows: int, sigma: float, seed: int, projected: bool
) -> np.ndarray:
    """``N`` noisy counts of the cell ``sex = 'F'`` of the one-way marginal of ``sex``."""
    table = _table(frame, rows=declared_rows)
    source = InsecureSeededSource(seed)
    with Session(
        table, Budget.unlimited(), accountant="zcdp", ledger=":memory:", source=source
    ) as session:
        query = _query(session, table, projected)
        # The synthesis's measurement step, inside the session: N of them, all charged.
        rho = N * query.l2sq / (2 * sigma**2) * (1 + 1e-9)
        steps = session.charged_measurements("audit", [ZCDPEvent(rho=rho)], rho)
        noisy = np.stack([query.noisy(steps, sigma) for _ in range(N)])
    return noisy[:, 0]


@pytest.mark.statistical
@pytest.mark.slow
@pytest.mark.parametrize("projected", [False, True], ids=["own-plan", "projected"])
def test_measurement_is_private_for_a_household_of_several_rows(projected: bool) -> None:
    people = _people()
    heavy = pd.DataFrame(
        {"hh": -1, "age": 30, "sex": "F", "smoker": False, "income": 1.0}, index=range(20)
    )
    with_unit = pd.concat([people, heavy], ignore_index=True)
    table = _table(with_unit)
    with Session(table, Budget.unlimited(), ledger=":memory:") as session:
        query = _query(session, table, projected)
    assert (query.l1, query.l2sq) == (3, 9)  # three rows per household, all in one cell
    sigma = sigma_for(query.l2sq, Fraction(RHO))
    epsilon = zcdp_to_epsilon(RHO, DELTA)
    samples = (
        _measurements(with_unit, 3, sigma, 1, projected),
        _measurements(people, 3, sigma, 2, projected),
    )
    truth = float(np.median(samples[1]))
    events = threshold_events(truth + d for d in np.arange(-10.0, 25.0, 2.0))
    result = audit(*samples, events, alpha=1e-3, delta=DELTA)
    assert result.epsilon_lower_bound <= epsilon, result
    assert result.epsilon_lower_bound > 0.2, result  # the audit has power
    # Negative control: the household's 20 rows counted (no bounding), noise still for 3 rows.
    loose = _measurements(with_unit, 20, sigma, 3, projected)
    broken = audit(loose, samples[1], events, alpha=1e-3, delta=DELTA)
    assert broken.epsilon_lower_bound > epsilon, broken


def _exact_by_tiny_noise(query: MarginalQuery, session: Session) -> np.ndarray:
    """The counts measured with negligible noise (sigma 1e-6: the exact counts, in a test)."""
    rho = query.l2sq / (2 * 1e-12) * (1 + 1e-9)
    steps = session.charged_measurements("test", [ZCDPEvent(rho=rho)], rho)
    return query.noisy(steps, 1e-6)


def test_projected_marginals_have_their_own_plans_sensitivities_and_counts() -> None:
    table = _table(_people())
    attrs = attributes(table, ["age", "sex", "smoker"])
    cliques = [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
    with Session(table, Budget.unlimited(), accountant="zcdp", ledger=":memory:") as session:
        planned = plan_marginals(session, table, attrs, cliques)
        assert {q.sql for q in planned.values()} == {planned[(0, 1, 2)].sql}  # one read
        for clique in cliques:
            own = MarginalQuery.build(session, table, attrs, clique)
            query = planned[clique]
            assert isinstance(own.measured, Plan)
            assert (
                (query.l1, query.l2sq, query.keys)
                == (own.l1, own.l2sq, own.keys)
                == (
                    query.l1,
                    9,
                    own.keys,
                )
            )
            # No household exceeds its 3 rows: both reads count the same rows.
            np.testing.assert_array_equal(
                _exact_by_tiny_noise(query, session), _exact_by_tiny_noise(own, session)
            )


def test_rows_per_group_below_rows_per_unit_keep_one_plan_per_marginal() -> None:
    frame = _people()
    table = Table(
        "people",
        frame,
        privacy_unit="hh",
        max_rows_per_unit=3,
        max_groups_per_unit=3,
        max_rows_per_group=1,
        columns=(Column("sex", domain=("F", "M")), Column("smoker", domain=(True, False))),
    )
    attrs = attributes(table, None)
    with Session(table, Budget.unlimited(), accountant="zcdp", ledger=":memory:") as session:
        planned = plan_marginals(session, table, attrs, [(0,), (1,), (0, 1)])
    # Summed from the pair, a household's 2 rows in one cell of sex could both count (Delta_2^2
    # 4); its own plan counts one row per cell, at most 2 cells: Delta_2^2 = 2.
    assert all(isinstance(q.measured, Plan) for q in planned.values())
    assert (planned[(0,)].l1, planned[(0,)].l2sq) == (2, 2)


def test_a_group_the_planner_refuses_falls_back_to_one_plan_per_marginal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frame = pd.DataFrame(
        {"id": range(30), **{c: [f"{c}{i % 3}" for i in range(30)] for c in "abc"}}
    )
    values = {c: [f"{c}{i}" for i in range(3)] + [f"{c}x{i}" for i in range(98)] for c in "abc"}
    table = Table(
        "t",
        frame,
        privacy_unit="id",
        max_rows_per_unit=1,
        columns=[Column(c, domain=values[c]) for c in "abc"],  # 101^3 > 1,000,000 cells
    )
    monkeypatch.setattr("dpcurator.synth._measure.groups_for", lambda sizes, cliques: [(0, 1, 2)])
    attrs = attributes(table, None)
    with Session(table, Budget.unlimited(), accountant="zcdp", ledger=":memory:") as session:
        planned = plan_marginals(session, table, attrs, [(0, 1), (1, 2), (0,)])
    assert all(isinstance(q.measured, Plan) for q in planned.values())


def test_marginal_groups_cover_every_clique_within_the_limit() -> None:
    sizes = (6, 9, 16, 7, 15, 5, 2, 2)  # Adult's: 1,814,400 cells in all
    cliques = [c for k in (1, 2, 3) for c in itertools.combinations(range(8), k)]
    groups = groups_for(sizes, cliques, limit=1_000_000)
    assert len(groups) == 4  # instead of one read per marginal (92)
    assert math.prod(sizes) > 1_000_000  # one group over every column would be refused
    assert groups_for(sizes, cliques, limit=math.prod(sizes)) == [tuple(range(8))]
    assert all(math.prod(sizes[a] for a in g) <= 1_000_000 for g in groups)
    assert all(any(set(c) <= set(g) for g in groups) for c in cliques)


# -- the synthetic table -------------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_synthetic_table_honours_the_declared_schema(method: str) -> None:
    with _session() as session:
        synth = synthesize(session, epsilon=2.0, method=method, iterations=200)  # type: ignore[arg-type]
    table = synth.table
    assert list(table.columns) == ["age", "sex", "smoker"]  # declared order; income has no bins
    assert set(table["sex"]) <= {"F", "M"}
    assert set(table["smoker"]) <= {True, False}
    assert table["age"].dtype.kind == "i"  # integer edges: integer values
    assert table["age"].between(0, 99).all()
    assert 500 < len(table) < 800  # the noisy count of about 600 people
    assert synth.columns == ("age", "sex", "smoker")
    # The error report: one row per measured marginal, noise from the mechanism.
    measured = synth.errors[synth.errors["measured"]]
    assert len(measured) == len(synth.measurements)
    first = synth.measurements[0]
    assert measured["noise_std"].iloc[0] == first.sigma
    assert np.isclose(
        measured["expected_noise_l1"].iloc[0], first.noisy.size * first.sigma * np.sqrt(2 / np.pi)
    )
    assert sum(m.rho for m in synth.measurements) <= synth.rho * (1 + 1e-12)


def test_float_bins_give_floats_within_the_bins() -> None:
    with _session() as session:
        synth = synthesize(
            session,
            columns=["income", "sex"],
            epsilon=1.0,
            method="independent",
            bins={"income": [0, 250.5, 1000]},
        )
    income = synth.table["income"]
    assert income.dtype.kind == "f" and income.between(0, 1000).all()
    assert synth.errors["marginal"].tolist()[:2] == ["income", "sex"]


def test_aim_follows_a_workload_and_reports_it() -> None:
    with _session() as session:
        synth = synthesize(
            session, epsilon=3.0, method="aim", workload=[["age", "smoker"]], iterations=200
        )
    assert "age x smoker" in synth.errors["marginal"].tolist()
    assert synth.rounds >= 1
    assert all(len(m.columns) <= 2 for m in synth.measurements)


@pytest.mark.parametrize("time_limit", [None, 600.0])
def test_aims_round_fits_start_afresh_and_stop_at_the_discrepancy_level(
    monkeypatch: pytest.MonkeyPatch, time_limit: float | None
) -> None:
    import dpcurator.synth._synthesize as module

    calls: list[tuple[dict[str, Any], Any]] = []
    original = module.fit_model

    def recording(*args: Any, **kwargs: Any) -> Any:
        model = original(*args, **kwargs)
        calls.append((kwargs, model))
        return model

    monkeypatch.setattr(module, "fit_model", recording)
    with _session() as session:
        synth = synthesize(
            session, epsilon=3.0, method="aim", iterations=200, time_limit=time_limit
        )
    (_, oneways), *rounds, (final, _) = calls
    assert rounds
    # A fit after each round but the last; that one only with a time limit, to continue from.
    assert len(rounds) == synth.rounds - (time_limit is None)
    # The rounds: each from uniform (a warm start fits new measurements too little), with
    # accelerated steps only, up to the discrepancy level or a tenth of the iterations.
    for options, model in rounds:
        assert options.get("warm_start") is None
        assert (options["start"], options["discrepancy"]) == ("uniform", 1.0)
        assert model.iterations == model.accelerated <= 20
    assert any(model.iterations < 20 for _, model in rounds)  # the level was reached
    assert final["tolerance"] > 0
    if time_limit is None:  # afresh, accelerated to 0.8 of the discrepancy level, then plain
        assert final["warm_start"] is None
        assert (final["start"], final["discrepancy"]) == ("uniform", 0.8)
    else:  # continued from the last round's model (fewer steps)
        assert final["warm_start"] is rounds[-1][1] and final["discrepancy"] is None
    assert oneways.accelerated == 0  # the one-way marginals: from their factorisation


def test_the_model_recovers_consistent_marginals_of_a_tree() -> None:
    rng = np.random.default_rng(3)  # the data
    x = rng.integers(0, 3, (2000, 3))
    x[:, 1] = (x[:, 0] + (rng.random(2000) < 0.2)) % 3

    def counts(clique: tuple[int, ...]) -> np.ndarray:
        flat = np.ravel_multi_index(tuple(x[:, a] for a in clique), (3,) * len(clique))
        return np.bincount(flat, minlength=3 ** len(clique)).astype(float)

    cliques = [(0,), (1,), (2,), (0, 1), (1, 2)]
    model = fit_model((3, 3, 3), [Marginal(c, counts(c), 1.0) for c in cliques], iterations=50)
    for c in [(0, 1), (1, 2), (0,)]:
        assert np.abs(model.marginal(c) - counts(c)).max() < 1.0  # zeros are approached
    rows = model.sample(2000, InsecureSeededSource(0))
    flat = np.ravel_multi_index((rows[:, 0], rows[:, 1]), (3, 3))
    assert np.abs(np.bincount(flat, minlength=9) - counts((0, 1))).max() <= 2  # systematic


def _random_problem(seed: int) -> tuple[tuple[int, ...], list[Marginal]]:
    """Noisy marginals of random data over 5 attributes: a model with interleaved axes."""
    rng = np.random.default_rng(seed)  # the data and a stand-in for noise, not privacy
    sizes = (3, 2, 4, 2, 3)
    x = rng.integers(0, 2, (3000, 5)) * np.array([1, 1, 2, 1, 1]) + rng.integers(0, 2, (3000, 5))
    x = np.minimum(x, np.array(sizes) - 1)
    out = []
    for clique in [(0,), (1,), (2,), (3,), (4,), (0, 2, 4), (1, 3), (0, 1, 2), (2, 3, 4), (0, 4)]:
        shape = tuple(sizes[a] for a in clique)
        flat = np.ravel_multi_index(tuple(x[:, a] for a in clique), shape)
        counts = np.bincount(flat, minlength=int(np.prod(shape))).astype(float)
        out.append(Marginal(clique, counts + rng.normal(0, 3, counts.size), 3.0))
    return sizes, out


def test_belief_propagation_and_the_loss_match_the_joint_table() -> None:
    from dpcurator.synth._model import (
        JunctionTree,
        _merged,
        _Objective,
        _total,
    )

    sizes, measurements = _random_problem(0)
    tree = JunctionTree(sizes, [m.clique for m in measurements])
    rng = np.random.default_rng(1)  # random potentials, not privacy
    theta = [rng.normal(0, 2, tuple(sizes[a] for a in c)) for c in tree.cliques]
    joint = np.zeros(sizes)
    for c, t in zip(tree.cliques, theta, strict=True):
        joint = joint + t.reshape(tuple(sizes[a] if a in c else 1 for a in range(len(sizes))))
    joint = np.exp(joint - joint.max())
    joint /= joint.sum()
    mu = tree.calibrate(theta)
    for c, table in zip(tree.cliques, mu, strict=True):
        other = tuple(a for a in range(len(sizes)) if a not in c)
        np.testing.assert_allclose(table, joint.sum(axis=other), rtol=1e-10, atol=1e-15)
    merged = _merged(measurements)
    homes = [tree.containing(m.clique) for m in merged]
    total = _total(merged)
    evaluation = _Objective(tree, merged, [h for h in homes if h is not None], total)(mu)
    loss = 0.0
    for m in merged:
        other = tuple(a for a in range(len(sizes)) if a not in m.clique)
        diff = (joint.sum(axis=other).reshape(-1) * total - m.values) / m.sigma
        loss += 0.5 * float(diff @ diff)
    assert evaluation.loss == pytest.approx(loss, rel=1e-10)


@pytest.mark.parametrize(
    "cliques",
    [[(0, 1), (1, 2), (2, 3), (3, 4)], [(0, 1, 2), (0, 2, 3), (0, 3, 4)], [(0, 2, 4), (1, 3)]],
)
def test_marginals_across_cliques_match_the_joint_table(cliques: list[tuple[int, ...]]) -> None:
    from dpcurator.synth._model import JunctionTree, Model

    sizes = (3, 2, 4, 2, 3)
    tree = JunctionTree(sizes, cliques)
    rng = np.random.default_rng(4)  # random potentials, not privacy
    theta = [rng.normal(0, 2, tuple(sizes[a] for a in c)) for c in tree.cliques]
    theta[0][(0,) * theta[0].ndim] = -np.inf  # a zero of the distribution
    joint = np.zeros(sizes)
    for c, t in zip(tree.cliques, theta, strict=True):
        joint = joint + t.reshape(tuple(sizes[a] if a in c else 1 for a in range(len(sizes))))
    joint = np.exp(joint - joint.max())
    joint /= joint.sum()
    model = Model(tree, tree.calibrate(theta), 100.0, potentials=theta)
    across = 0
    for k in (2, 3, 4):
        for clique in itertools.combinations(range(len(sizes)), k):
            across += tree.containing(clique) is None
            other = tuple(a for a in range(len(sizes)) if a not in clique)
            expected = 100.0 * joint.sum(axis=other).reshape(-1)
            np.testing.assert_allclose(model.marginal(clique), expected, rtol=1e-9, atol=1e-12)
    assert across > 0


def test_warm_start_and_tolerance_end_the_fit_early_at_the_same_accuracy() -> None:
    sizes, measurements = _random_problem(2)
    full = fit_model(sizes, measurements, iterations=400)
    early = fit_model(sizes, measurements, iterations=400, tolerance=0.01)
    assert early.iterations < full.iterations
    assert early.loss <= 1.05 * full.loss
    # A warm start from the fitted model begins where it ended.
    warm = fit_model(sizes, measurements, iterations=1, warm_start=full)
    assert warm.loss <= full.loss * (1 + 1e-9)
    # Negative control: one step from the default start is far from the fitted loss.
    cold = fit_model(sizes, measurements, iterations=1)
    assert cold.loss > 1.5 * full.loss
    # Marginals read from the model's kept marginals equal fresh ones.
    fresh = fit_model(sizes, measurements, iterations=400)
    for clique in [(0, 2, 4), (0, 2), (4,), (1, 2, 3), (1, 3), (0, 1, 3, 4)]:
        np.testing.assert_allclose(full.marginal(clique), fresh.marginal(clique), rtol=1e-12)
    for clique in [(0,), (2, 4), (1, 2, 3)]:  # summed from kept supersets this time
        np.testing.assert_allclose(
            full.marginal(clique),
            fit_model(sizes, measurements, iterations=400).marginal(clique),
            rtol=1e-12,
        )
    with pytest.raises(InvalidParameterError, match="tolerance"):
        fit_model(sizes, measurements, tolerance=1.5)


def test_the_accelerated_phase_stops_at_the_discrepancy_level() -> None:
    sizes, measurements = _random_problem(3)
    level = 0.5 * sum(m.values.size for m in measurements)  # E L at the truth, one per clique
    losses: list[float] = []
    for tau in (1.0, 0.8):
        losses.clear()
        model = fit_model(
            sizes,
            measurements,
            iterations=400,
            start="uniform",
            discrepancy=tau,
            callback=lambda _, loss: losses.append(loss),
        )
        k = model.accelerated
        assert 0 < k < model.iterations  # accelerated, then plain steps
        assert losses[k - 1] <= tau * level < losses[k - 2]  # the first step at the level
    # Faster than plain mirror descent from the same start (negative control: plain steps).
    losses.clear()
    fit_model(
        sizes,
        measurements,
        iterations=400,
        start="uniform",
        callback=lambda _, loss: losses.append(loss),
    )
    plain = next(i for i, loss in enumerate(losses, 1) if loss <= 0.8 * level)
    assert model.accelerated < plain


def test_plain_steps_bound_the_steps_after_the_discrepancy_level() -> None:
    sizes, measurements = _random_problem(3)

    def fit(plain_steps: int | None) -> Any:
        return fit_model(
            sizes,
            measurements,
            iterations=400,
            start="uniform",
            discrepancy=1.0,
            plain_steps=plain_steps,
        )

    at_level, ten_more, unbounded = fit(0), fit(10), fit(None)
    assert 0 < at_level.accelerated == at_level.iterations
    assert ten_more.iterations == at_level.accelerated + 10
    assert unbounded.iterations > ten_more.iterations  # the negative control
    assert unbounded.loss < ten_more.loss < at_level.loss
    with pytest.raises(InvalidParameterError, match="plain_steps"):
        fit_model(sizes, measurements, plain_steps=-1)


def test_a_fresh_fit_is_deterministic_and_reaches_the_plain_fits_loss() -> None:
    sizes, measurements = _random_problem(4)

    def fit() -> Any:
        return fit_model(
            sizes,
            measurements,
            iterations=600,
            start="uniform",
            discrepancy=1.0,
            tolerance=0.01,
        )

    first, second = fit(), fit()
    assert first.loss == second.loss and first.iterations == second.iterations
    for a, b in zip(first.marginals, second.marginals, strict=True):
        np.testing.assert_array_equal(a, b)
    plain = fit_model(sizes, measurements, iterations=600, start="uniform", tolerance=0.01)
    assert first.loss <= 1.05 * plain.loss
    # Uniform start: one plain step from zero potentials is far from the fitted loss.
    assert fit_model(sizes, measurements, iterations=1, start="uniform").loss > 2 * first.loss
    with pytest.raises(InvalidParameterError, match="start"):
        fit_model(sizes, measurements, start="joint")  # type: ignore[arg-type]
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(InvalidParameterError, match="discrepancy"):
            fit_model(sizes, measurements, discrepancy=bad)


# -- budget and ledger ---------------------------------------------------------------------------
def test_charged_once_to_a_zcdp_ledger() -> None:
    with _session(accountant="zcdp") as session:
        synth = synthesize(session, epsilon=1.0, delta=1e-6, method="mst", iterations=100)
        entries = session.ledger.entries()
        assert len(entries) == 1
        assert entries[0].events == (ZCDPEvent(rho=synth.rho),)
        assert entries[0].query.startswith("SYNTHESIZE mst FROM people (age, sex, smoker)")
        assert synth.entry_id == entries[0].id
        assert session.remaining.epsilon < 5.0
        # A query afterwards is charged to the same ledger.
        session.sql("SELECT sex, COUNT(*) FROM people GROUP BY sex", epsilon=0.5)
        assert len(session.ledger.entries()) == 2


@pytest.mark.parametrize("d", [3, 6])
def test_shares_of_a_step_never_exceed_what_it_charged(d: int) -> None:
    """Units of 4 rows (Delta_2^2 = 16): the one-way shares add up to the step exactly.

    Each one-way marginal used to be noised for ``sigma sqrt(d)`` rounded in floats, and the
    ``d`` shares could exceed the step's ``rho`` by an ulp: the synthesis then failed after its
    charge (3 and 6 columns at epsilon 1 here).
    """
    rng = np.random.default_rng(0)  # the data
    frame = pd.DataFrame({"hh": rng.integers(0, 150, 400)})
    for i in range(d):
        frame[f"c{i}"] = rng.integers(0, 3, 400)
    table = Table(
        "t",
        frame,
        privacy_unit="hh",
        max_rows_per_unit=4,
        max_groups_per_unit=4,
        columns=[Column(f"c{i}", domain=[0, 1, 2]) for i in range(d)],
    )
    for epsilon in (0.5, 1.0, 2.0):
        with Session(table, Budget.unlimited(), accountant="zcdp", ledger=":memory:") as session:
            synth = synthesize(
                session, epsilon=epsilon, delta=1e-9, method="independent", iterations=5
            )
        assert sum(Fraction(m.rho) for m in synth.measurements) <= Fraction(synth.rho) * (
            1 + Fraction(1, 10**12)
        )


def test_charged_as_epsilon_delta_to_a_basic_ledger() -> None:
    with _session() as session:
        synth = synthesize(session, epsilon=1.0, delta=1e-7, method="independent")
        assert session.ledger.entries()[0].events == (ApproxDPEvent(epsilon=1.0, delta=1e-7),)
        assert session.remaining == Budget(4.0, 1e-6 - 1e-7)
        assert synth.charged == Budget(1.0, 1e-7)


# -- refusals: before any read, nothing spent -----------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"columns": ["nope"]}, QueryError, "not declared"),
        ({"columns": ["income"]}, QueryError, "neither a public domain nor bins"),
        ({"columns": ["hh", "sex"]}, QueryError, "privacy unit"),
        ({"epsilon": 6.0}, BudgetExceededError, "budget"),
        ({"delta": 0.0}, InvalidParameterError, "delta"),
        ({"method": "gan"}, InvalidParameterError, "method"),
        ({"workload": [["sex", "zzz"]]}, QueryError, "zzz"),
    ],
)
def test_refusals_read_nothing_and_spend_nothing(
    reads: list[str], kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    with _session() as session:
        arguments: dict[str, Any] = {"epsilon": 1.0, "method": "aim", **kwargs}
        with pytest.raises(error, match=words):
            synthesize(session, **arguments)
        assert session.ledger.entries() == []
        assert session.spent == Budget(0.0, 0.0)
    assert reads == []


def test_a_bad_thread_count_is_refused_before_the_charge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DPCURATOR_THREADS", "0")
    with _session() as session:
        with pytest.raises(InvalidParameterError, match="DPCURATOR_THREADS"):
            synthesize(session, epsilon=1.0, method="aim")
        assert session.ledger.entries() == []
        assert session.spent == Budget(0.0, 0.0)
    monkeypatch.setenv("DPCURATOR_THREADS", "1")  # control: a valid count releases
    with _session() as session:
        assert synthesize(session, epsilon=1.0, method="independent").entry_id == 1


def test_a_time_limit_stops_aim_early() -> None:
    with _session() as session:
        synth = synthesize(session, epsilon=1.0, method="aim", time_limit=1e-9)
    assert synth.stopped_by_time_limit and synth.rounds == 0


def test_progress_is_a_plain_line_when_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with _session() as session:
        synthesize(session, epsilon=1.0, method="independent", progress=True)
    err = capsys.readouterr().err
    assert "synth: " in err and "100% of the budget spent; done" in err


# -- the command line ----------------------------------------------------------------------------
TOML = """\
[table]
name = "people"
source = "people.csv"
privacy_unit = "hh"
max_rows_per_unit = 3
max_groups_per_unit = 3

[budget]
epsilon = 2.0
delta = 1e-6

[columns.sex]
domain = ["F", "M"]

[columns.age]
lower = 0
upper = 99
bins = [0, 18, 40, 65, 100]
"""


def test_cli_writes_the_table_and_charges_the_ledger(tmp_path: Path) -> None:
    _people().to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "people.toml").write_text(TOML)
    out = tmp_path / "synth.parquet"
    runner = CliRunner()
    args = [
        "synth",
        "--table",
        str(tmp_path / "people.toml"),
        "--epsilon",
        "1",
        "--out",
        str(out),
        "--method",
        "mst",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["sex", "age"] and set(frame["sex"]) <= {"F", "M"}
    assert "error per marginal" in result.output
    again = runner.invoke(app, [*args[:4], "5", *args[5:]])  # over the budget left
    assert again.exit_code == 2 and "budget" in again.output.lower()


def test_cli_json_reports_the_release_and_refusals(tmp_path: Path) -> None:
    _people().to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "people.toml").write_text(TOML)
    out = tmp_path / "synth.csv"
    base = ["synth", "--table", str(tmp_path / "people.toml"), "--out", str(out), "--json"]
    result = CliRunner().invoke(app, [*base, "--epsilon", "1", "--method", "independent"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["rows"] == len(pd.read_csv(out)) and payload["method"] == "independent"
    assert payload["errors"] and payload["charged"]["epsilon"] > 0
    refused = CliRunner().invoke(app, [*base, "--epsilon", "5"])  # over the budget left
    assert refused.exit_code == 2 and "budget" in json.loads(refused.output)["error"].lower()
