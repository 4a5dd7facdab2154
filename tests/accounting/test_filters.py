"""Tests of budgets as filters, odometers, parallel composition and the accountant registry."""

from __future__ import annotations

import importlib.util
import math
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator.accounting import (
    ApproxDPEvent,
    Budget,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PrivacyEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpcurator.accounting._composition import (
    AdvancedCompositionAccountant,
    BasicAccountant,
    OptimalHomogeneousAccountant,
)
from dpcurator.accounting._filters import PrivacyFilter, PrivacyOdometer, parallel_composition
from dpcurator.accounting._registry import ACCOUNTANT_NAMES, make_accountant
from dpcurator.errors import BudgetExceededError, InvalidParameterError, UnsupportedEventError


def _available(module: str) -> bool:
    return importlib.util.find_spec(f"dpcurator.accounting.{module}") is not None


# -- the filter refuses, and refusing spends nothing ----------------------------------------------


def test_filter_refuses_and_spends_nothing() -> None:
    f = PrivacyFilter(Budget(1.0))
    assert f.spend(LaplaceEvent(scale=1 / 0.6)) == Budget(0.4, 0.0)
    events_before = f.accountant.events
    with pytest.raises(BudgetExceededError) as info:
        f.spend(LaplaceEvent(scale=2.0))  # 0.5 > 0.4 left
    err = info.value
    assert f.spent == Budget(0.6, 0.0)
    assert f.accountant.events == events_before
    assert err.remaining == Budget(0.4, 0.0)
    assert isinstance(err.requested, Budget)
    assert err.requested.epsilon == pytest.approx(1.1, rel=1e-12)
    message = str(err)
    assert "remaining: Budget(epsilon=0.4" in message
    assert "LaplaceEvent(scale=2.0" in message
    assert "Nothing was spent" in message
    # A release that fits still goes through afterwards.
    assert f.spend(PureDPEvent(0.4)) == Budget(0.0, 0.0)


def test_filter_fills_the_budget_exactly() -> None:
    f = PrivacyFilter(Budget(1.0))
    for _ in range(10):
        f.spend(PureDPEvent(0.1))
    assert f.spent == Budget(1.0, 0.0)
    assert f.remaining == Budget(0.0, 0.0)
    with pytest.raises(BudgetExceededError):
        f.spend(PureDPEvent(1e-9))


def test_filter_refuses_when_deltas_do_not_fit() -> None:
    f = PrivacyFilter(Budget(1.0, 1e-6))
    f.spend(ApproxDPEvent(0.1, 6e-7))
    with pytest.raises(BudgetExceededError, match=r"would need delta 1\.2e-06") as info:
        f.spend(ApproxDPEvent(0.1, 6e-7))
    remaining = info.value.remaining
    assert isinstance(remaining, Budget)
    assert remaining.epsilon == 0.9
    assert remaining.delta == pytest.approx(4e-7, rel=1e-9)
    assert f.spent == Budget(0.1, 6e-7)


def test_check_does_not_spend() -> None:
    f = PrivacyFilter(Budget(1.0, 1e-6))
    left = f.check(ApproxDPEvent(0.3, 1e-7))
    assert (left.epsilon, left.delta) == (0.7, pytest.approx(9e-7, rel=1e-12))
    assert f.spent == Budget(0.0, 0.0)
    with pytest.raises(BudgetExceededError):
        f.check(PureDPEvent(2.0))
    assert f.spent == Budget(0.0, 0.0)
    assert f.accountant.events == ()


def test_unsupported_and_bad_events_spend_nothing() -> None:
    f = PrivacyFilter(Budget(1.0, 1e-6))
    with pytest.raises(UnsupportedEventError, match="gaussian_delta"):
        f.spend(GaussianEvent(sigma=1.0))
    with pytest.raises(InvalidParameterError, match="event must be a PrivacyEvent"):
        f.spend(0.5)  # type: ignore[arg-type]
    assert f.spent == Budget(0.0, 0.0)


def test_unlimited_budget_never_refuses() -> None:
    f = PrivacyFilter(Budget.unlimited())
    f.spend(PureDPEvent(50.0))
    f.spend(ApproxDPEvent(1.0, 0.5))  # no finite epsilon at delta 0, still allowed
    assert math.isinf(f.spent.epsilon)
    assert math.isinf(f.remaining.epsilon)


def test_filter_with_a_tight_accountant_allows_more() -> None:
    # Basic composition fits 100 releases of 0.01 in (1, 1e-5); the optimal accountant more.
    f = PrivacyFilter(Budget(1.0, 1e-5), "optimal", adaptive_parameters=False)
    accepted = 0
    while True:
        try:
            f.spend(PureDPEvent(0.01))
        except BudgetExceededError:
            break
        accepted += 1
    assert accepted > 500
    acc = OptimalHomogeneousAccountant().compose(PureDPEvent(0.01), count=accepted)
    assert acc.get_epsilon(1e-5) <= 1.0
    assert acc.compose(PureDPEvent(0.01)).get_epsilon(1e-5) > 1.0
    assert f.spent.delta <= 1e-5


def test_given_accountant_counts_what_it_holds() -> None:
    acc = BasicAccountant().compose(PureDPEvent(0.25))
    f = PrivacyFilter(Budget(1.0), acc)
    assert f.spent == Budget(0.25, 0.0)
    f.spend(PureDPEvent(0.25))
    assert acc.get_epsilon(0.0) == 0.5  # the filter composed into the given instance
    with pytest.raises(InvalidParameterError, match="has already spent"):
        PrivacyFilter(Budget(0.1), BasicAccountant().compose(PureDPEvent(0.25)))


@pytest.mark.parametrize(
    ("accountant", "message"),
    [("advanced", "'advanced'"), ("optimal", "'optimal'"), (AdvancedCompositionAccountant(), "")],
)
def test_adaptive_parameters_guard(accountant: str | object, message: str) -> None:
    with pytest.raises(
        InvalidParameterError, match=f"adaptive_parameters must be False.*{message}"
    ):
        PrivacyFilter(Budget(1.0, 1e-6), accountant)  # type: ignore[arg-type]
    f = PrivacyFilter(Budget(1.0, 1e-6), accountant, adaptive_parameters=False)  # type: ignore[arg-type]
    assert not f.adaptive_parameters
    assert PrivacyFilter(Budget(1.0)).adaptive_parameters


@pytest.mark.skipif(not _available("_zcdp"), reason="_zcdp.py not written yet")
def test_zcdp_filter_is_fully_adaptive() -> None:
    f = PrivacyFilter(Budget(1.0, 1e-6), "zcdp")
    remaining = f.spend(GaussianEvent(sigma=10.0))
    assert 0.0 < f.spent.epsilon < 1.0
    assert remaining.epsilon == pytest.approx(1.0 - f.spent.epsilon)


def test_filter_validates_its_arguments() -> None:
    with pytest.raises(InvalidParameterError, match="budget must be a Budget"):
        PrivacyFilter((1.0, 1e-6))  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="accountant must be"):
        PrivacyFilter(Budget(1.0), 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="name must be one of"):
        PrivacyFilter(Budget(1.0), "fancy")
    with pytest.raises(InvalidParameterError, match="adaptive_parameters must be True or False"):
        PrivacyFilter(Budget(1.0), adaptive_parameters="no")  # type: ignore[arg-type]


def test_filter_is_thread_safe() -> None:
    f = PrivacyFilter(Budget(1.0))
    accepted: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(25):
            try:
                f.spend(PureDPEvent(0.01))
            except BudgetExceededError:
                continue
            with lock:
                accepted.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(accepted) == 100  # exact sums: exactly 100 releases of 0.01 fit in 1.0
    assert len(f.accountant.events) == 100
    assert f.spent == Budget(1.0, 0.0)


_FILTER_EVENTS = st.one_of(
    st.builds(PureDPEvent, st.floats(0.001, 0.8)),
    st.builds(LaplaceEvent, st.floats(0.5, 20.0)),
    st.builds(ApproxDPEvent, st.floats(0.0, 0.5), st.sampled_from([0.0, 1e-8, 3e-7])),
    st.builds(RandomizedResponseEvent, st.floats(0.55, 0.9)),
)


@settings(max_examples=60, deadline=None)
@given(
    events=st.lists(_FILTER_EVENTS, min_size=1, max_size=25),
    eps=st.floats(0.1, 3.0),
    delta=st.sampled_from([0.0, 1e-6]),
)
def test_basic_filter_never_overspends(
    events: list[PrivacyEvent], eps: float, delta: float
) -> None:
    budget = Budget(eps, delta)
    f = PrivacyFilter(budget)
    kept: list[PrivacyEvent] = []
    for event in events:
        before = f.spent
        try:
            f.spend(event)
        except BudgetExceededError:
            assert f.spent == before
            continue
        kept.append(event)
        assert f.spent.epsilon <= budget.epsilon
        assert f.spent.delta <= budget.delta
    # An independent recount of what was accepted stays within the budget.
    recount = BasicAccountant()
    for event in kept:
        recount.compose(event)
    assert recount.get_epsilon(budget.delta) <= budget.epsilon


def _tight_filter_never_overspends(name: str, events: list[PrivacyEvent]) -> None:
    budget = Budget(1.0, 1e-6)
    f = PrivacyFilter(budget, name, adaptive_parameters=make_accountant(name).fully_adaptive)
    kept: list[PrivacyEvent] = []
    for event in events:
        try:
            f.spend(event)
        except BudgetExceededError:
            continue
        kept.append(event)
    recount = make_accountant(name)
    for event in kept:
        recount.compose(event)
    assert recount.get_epsilon(budget.delta) <= budget.epsilon
    assert f.spent.epsilon <= budget.epsilon


_TIGHT_EVENTS = st.one_of(
    st.builds(PureDPEvent, st.floats(0.01, 0.5)),
    st.builds(LaplaceEvent, st.floats(2.0, 50.0)),
    st.builds(GaussianEvent, st.floats(2.0, 30.0)),
)


@pytest.mark.skipif(not _available("_zcdp"), reason="_zcdp.py not written yet")
@settings(max_examples=25, deadline=None)
@given(events=st.lists(_TIGHT_EVENTS, min_size=1, max_size=15))
def test_zcdp_filter_never_overspends(events: list[PrivacyEvent]) -> None:
    _tight_filter_never_overspends("zcdp", events)


@pytest.mark.skipif(not _available("_pld"), reason="_pld.py not written yet")
@settings(max_examples=10, deadline=None)
@given(events=st.lists(_TIGHT_EVENTS, min_size=1, max_size=8))
def test_pld_filter_never_overspends(events: list[PrivacyEvent]) -> None:
    _tight_filter_never_overspends("pld", events)


# -- odometer ------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(events=st.lists(_FILTER_EVENTS, min_size=1, max_size=20))
def test_odometer_is_monotone(events: list[PrivacyEvent]) -> None:
    odo = PrivacyOdometer(delta=1e-6)
    last = odo.spent
    for event in events:
        now = odo.spend(event)
        assert now == odo.spent
        assert now.epsilon >= last.epsilon
        last = now


def test_odometer_tracks_and_never_refuses() -> None:
    odo = PrivacyOdometer(delta=1e-6)
    assert odo.spent == Budget(0.0, 0.0)
    odo.spend(PureDPEvent(5.0))
    assert odo.spend(ApproxDPEvent(0.5, 4e-7)) == Budget(5.5, 4e-7)
    odo.spend(ApproxDPEvent(0.5, 7e-7))  # deltas now exceed 1e-6: no finite epsilon
    assert odo.spent == Budget(math.inf, 1e-6)
    with pytest.raises(UnsupportedEventError):
        odo.spend(ZCDPEvent(0.1))
    with pytest.raises(InvalidParameterError, match="event must be a PrivacyEvent"):
        odo.spend("x")  # type: ignore[arg-type]


def test_odometer_adaptivity_and_validation() -> None:
    with pytest.raises(InvalidParameterError, match="adaptive_parameters must be False"):
        PrivacyOdometer("advanced", delta=1e-6)
    odo = PrivacyOdometer("advanced", delta=1e-6, adaptive_parameters=False)
    odo.spend(SelfComposedEvent(PureDPEvent(0.01), count=100))
    assert odo.spent.epsilon == pytest.approx(
        AdvancedCompositionAccountant().compose(PureDPEvent(0.01), 100).get_epsilon(1e-6)
    )
    with pytest.raises(InvalidParameterError, match=r"delta must be in \[0, 1\); got 1\.5"):
        PrivacyOdometer(delta=1.5)
    with pytest.raises(InvalidParameterError, match="delta must be a number, not NaN"):
        PrivacyOdometer(delta=math.nan)


# -- parallel composition ------------------------------------------------------------------------


def test_parallel_composition_is_the_max() -> None:
    # Lecture 003: disjoint partitions, max eps.
    got = parallel_composition([PureDPEvent(0.1), PureDPEvent(0.5), PureDPEvent(0.3)])
    assert got == PureDPEvent(0.5)
    # A histogram with Laplace noise on every bin costs one bin.
    bins = [LaplaceEvent(scale=10.0)] * 50
    assert parallel_composition(bins) == LaplaceEvent(scale=10.0)
    assert parallel_composition([LaplaceEvent(scale=10.0), LaplaceEvent(scale=4.0)]) == (
        LaplaceEvent(scale=4.0)
    )
    assert parallel_composition([ZCDPEvent(0.1), ZCDPEvent(0.3)]) == ZCDPEvent(0.3)
    g = parallel_composition([GaussianEvent(sigma=4.0, sensitivity=2.0), GaussianEvent(sigma=3.0)])
    assert g == GaussianEvent(sigma=4.0, sensitivity=2.0)  # noise multiplier 2 < 3


def test_parallel_composition_of_mixed_guarantees() -> None:
    mixed = parallel_composition([LaplaceEvent(scale=2.0), RandomizedResponseEvent(0.75)])
    assert mixed == PureDPEvent(math.log(3.0))
    approx = parallel_composition([ApproxDPEvent(1.0, 1e-9), ApproxDPEvent(0.5, 1e-6)])
    assert approx == ApproxDPEvent(1.0, 1e-6)
    composed = parallel_composition(
        [ComposedEvent((PureDPEvent(0.2), PureDPEvent(0.3))), PureDPEvent(0.4)]
    )
    assert composed == PureDPEvent(0.5)
    assert parallel_composition([NoOpEvent(), PureDPEvent(0.2)]) == PureDPEvent(0.2)
    assert parallel_composition([NoOpEvent(), NoOpEvent()]) == NoOpEvent()
    assert parallel_composition([ApproxDPEvent(0.0, 0.0), NoOpEvent()]) == ApproxDPEvent(0.0, 0.0)
    # Never more than sequential composition of the same events.
    events = [PureDPEvent(0.2), ApproxDPEvent(0.3, 1e-7), LaplaceEvent(scale=5.0)]
    par = BasicAccountant().compose(parallel_composition(events)).get_epsilon(1e-6)
    seq = BasicAccountant().compose(ComposedEvent(tuple(events))).get_epsilon(1e-6)
    assert par == pytest.approx(0.3) and par < seq


def test_parallel_composition_errors() -> None:
    with pytest.raises(UnsupportedEventError, match="convert each to an ApproxDPEvent"):
        parallel_composition([GaussianEvent(sigma=1.0), LaplaceEvent(scale=1.0)])
    with pytest.raises(InvalidParameterError, match="events must hold at least one event"):
        parallel_composition([])
    with pytest.raises(InvalidParameterError, match=r"events\[1\] must be a PrivacyEvent"):
        parallel_composition([PureDPEvent(0.1), 0.2])  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError, match="events must be an iterable"):
        parallel_composition(PureDPEvent(0.1))  # type: ignore[arg-type]


# -- registry ------------------------------------------------------------------------------------


def test_registry_names() -> None:
    assert ACCOUNTANT_NAMES == ("basic", "advanced", "optimal", "rdp", "zcdp", "pld")
    for name, cls in [
        ("basic", BasicAccountant),
        ("advanced", AdvancedCompositionAccountant),
        ("optimal", OptimalHomogeneousAccountant),
    ]:
        acc = make_accountant(name)
        assert type(acc) is cls
        assert acc.name == name
        assert acc.events == ()
    assert make_accountant("basic") is not make_accountant("basic")
    with_delta = make_accountant("advanced", gaussian_delta=1e-7)
    assert isinstance(with_delta, AdvancedCompositionAccountant)
    assert with_delta.gaussian_delta == 1e-7


@pytest.mark.parametrize(("name", "module"), [("rdp", "_rdp"), ("zcdp", "_zcdp"), ("pld", "_pld")])
def test_registry_lazy_accountants(name: str, module: str) -> None:
    if not _available(module):
        pytest.skip(f"{module}.py not written yet")
    acc = make_accountant(name)
    assert acc.name == name
    assert acc.events == ()


@pytest.mark.parametrize("bad", ["Basic", "", "moments", 3, None])
def test_registry_unknown_name(bad: object) -> None:
    with pytest.raises(InvalidParameterError) as info:
        make_accountant(bad)  # type: ignore[arg-type]
    message = str(info.value)
    assert all(repr(n) in message for n in ACCOUNTANT_NAMES)
    assert repr(bad) in message
