"""Tests of budgets as filters, odometers, parallel composition and the accountant registry."""

from __future__ import annotations

import importlib.util
import math
import threading
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator._validation import floor_float, next_up
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
from dpcurator.accounting._zcdp import ZCDPAccountant, zcdp_to_epsilon
from dpcurator.errors import (
    BudgetExceededError,
    InvalidParameterError,
    UnsupportedError,
    UnsupportedEventError,
)


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
    # A release that fits still goes through afterwards; 1/1.6666666666666667 + 0.4 (floats)
    # is 1 - 4.4e-18 exactly, so a remainder of that size is left (rounded down).
    left = f.spend(PureDPEvent(0.4))
    assert left.delta == 0.0 and 0.0 < left.epsilon < 1e-17
    exact_left = 1 - f.spent_exact[0]
    assert left.epsilon == floor_float(exact_left)  # the exact remainder, rounded down
    assert Fraction(left.epsilon) <= exact_left < Fraction(next_up(left.epsilon))


def test_filter_fills_the_budget_exactly() -> None:
    f = PrivacyFilter(Budget(1.0))
    for _ in range(10):
        f.spend(LaplaceEvent(scale=10.0))  # epsilon exactly 1/10
    assert f.spent == Budget(1.0, 0.0)
    assert f.spent_exact == (Fraction(1), Fraction(0))
    assert f.remaining == Budget(0.0, 0.0)
    with pytest.raises(BudgetExceededError):
        f.spend(PureDPEvent(1e-9))
    # The float 0.1 is 1/10 + 5.6e-18: ten of them exceed 1.0, so the tenth is refused.
    g = PrivacyFilter(Budget(1.0))
    for _ in range(9):
        g.spend(PureDPEvent(0.1))
    with pytest.raises(BudgetExceededError, match=r"1\.0000000000000002"):
        g.spend(PureDPEvent(0.1))


# -- exact decisions: nothing over the budget, not even by an ulp ---------------------------------


def test_basic_filter_refuses_a_sub_ulp_overdraft() -> None:
    # Regression: after spending all of Budget(1.0), eleven releases of 1e-17 were accepted,
    # because 1 + 1e-17 rounded to the nearest float is 1.0.
    f = PrivacyFilter(Budget(1.0))
    f.spend(PureDPEvent(1.0))
    assert f.remaining == Budget(0.0, 0.0)
    with pytest.raises(BudgetExceededError, match=r"epsilon 1\.0000000000000002") as info:
        f.spend(PureDPEvent(1e-17))
    assert info.value.remaining == Budget(0.0, 0.0)
    requested = info.value.requested
    assert isinstance(requested, Budget) and requested.epsilon > 1.0
    assert f.spent_exact == (Fraction(1), Fraction(0))
    assert len(f.accountant.events) == 1
    with pytest.raises(BudgetExceededError):
        f.check(PureDPEvent(1e-300))


def test_basic_filter_refuses_a_sub_ulp_delta_overdraft() -> None:
    f = PrivacyFilter(Budget(1.0, 1e-6))
    f.spend(ApproxDPEvent(0.5, 1e-6))
    with pytest.raises(BudgetExceededError, match="would need delta"):
        f.spend(ApproxDPEvent(0.0, 1e-30))
    assert f.spent == Budget(0.5, 1e-6)
    assert f.remaining == Budget(0.5, 0.0)


def test_basic_filter_a_thousand_exact_thousandths() -> None:
    # Laplace noise of scale 1000 is exactly 1/1000-DP: a thousand fill Budget(1.0) exactly.
    f = PrivacyFilter(Budget(1.0))
    for _ in range(1000):
        f.spend(LaplaceEvent(scale=1000.0))
    assert f.spent_exact == (Fraction(1), Fraction(0))
    assert f.spent == Budget(1.0) and f.remaining == Budget(0.0)
    with pytest.raises(BudgetExceededError):
        f.spend(PureDPEvent(1e-17))
    # The float 0.001 exceeds 1/1000 (by 2.1e-20): the thousandth PureDPEvent(0.001) would
    # exceed the budget by 2.1e-17, so it is refused.
    g = PrivacyFilter(Budget(1.0))
    for _ in range(999):
        g.spend(PureDPEvent(0.001))
    with pytest.raises(BudgetExceededError):
        g.spend(PureDPEvent(0.001))
    assert g.spent_exact[0] == 999 * Fraction(0.001)


def test_basic_filter_a_thousand_exact_delta_parts() -> None:
    delta = 2.0**-20  # a dyadic delta: a thousand of them sum exactly
    f = PrivacyFilter(Budget(1.0, 1000 * delta))
    for _ in range(1000):
        f.spend(ApproxDPEvent(0.0, delta))
    assert f.spent_exact == (Fraction(0), 1000 * Fraction(delta))
    assert f.remaining == Budget(1.0, 0.0)
    with pytest.raises(BudgetExceededError):
        f.spend(ApproxDPEvent(0.0, 1e-300))
    # Decimal parts: 1000 x the float 1e-9 exceed the float 1e-6; the last one is refused.
    g = PrivacyFilter(Budget(1.0, 1e-6))
    assert 1000 * Fraction(1e-9) > Fraction(1e-6)
    for _ in range(999):
        g.spend(ApproxDPEvent(0.0, 1e-9))
    with pytest.raises(BudgetExceededError):
        g.spend(ApproxDPEvent(0.0, 1e-9))


def test_remaining_is_rounded_down_and_spent_up() -> None:
    f = PrivacyFilter(Budget(1.0, 1e-6))
    left = f.spend(ApproxDPEvent(1 / 3, 1e-7))
    exact_eps, exact_delta = f.spent_exact
    assert exact_eps == Fraction(1 / 3) and exact_delta == Fraction(1e-7)
    assert Fraction(left.epsilon) <= 1 - exact_eps < Fraction(math.nextafter(left.epsilon, 1.0))
    assert Fraction(left.delta) <= Fraction(1e-6) - exact_delta
    assert f.remaining == left
    f.spend(LaplaceEvent(scale=3.0))  # exactly 1/3, which the float 1/3 is below
    assert f.spent_exact[0] == Fraction(1 / 3) + Fraction(1, 3)
    assert Fraction(f.spent.epsilon) >= f.spent_exact[0]  # rounded up
    assert Fraction(f.remaining.epsilon) <= 1 - f.spent_exact[0]  # rounded down


@settings(max_examples=80, deadline=None)
@given(
    epsilons=st.lists(
        st.one_of(
            st.floats(1e-18, 0.3),
            st.sampled_from([0.1, 0.001, 1e-17, 0.25, 1 / 3, 0.2, 0.3]),
        ),
        min_size=1,
        max_size=40,
    ),
    budget=st.sampled_from([1.0, 0.5, 0.3, 1 / 3, 0.9999999999999999]),
)
def test_basic_filter_accepts_iff_the_exact_sum_fits(epsilons: list[float], budget: float) -> None:
    f = PrivacyFilter(Budget(budget))
    total = Fraction(0)
    for eps in epsilons:
        fits = total + Fraction(eps) <= Fraction(budget)
        try:
            f.spend(PureDPEvent(eps))
        except BudgetExceededError:
            assert not fits
            continue
        assert fits
        total += Fraction(eps)
        assert f.spent_exact == (total, Fraction(0))
        assert f.spent.epsilon <= budget
        assert Fraction(f.spent.epsilon) >= total
        assert f.remaining.epsilon >= 0.0
        assert Fraction(f.remaining.epsilon) <= Fraction(budget) - total


@pytest.mark.skipif(not _available("_zcdp"), reason="_zcdp.py not written yet")
def test_zcdp_filter_refuses_a_sub_ulp_overdraft() -> None:
    # Fill the filter to the largest rho (a float) it accepts, then add a rho of 1e-300: the
    # exact sum of rho is then above it, and nothing rounds the extra away.
    budget = Budget(1.0, 1e-6)
    fresh = PrivacyFilter(budget, "zcdp")
    lo, hi = 0.0, 1.0  # check(ZCDPEvent(lo)) fits (lo = 0: a no-op), hi does not
    with pytest.raises(BudgetExceededError):
        fresh.check(ZCDPEvent(hi))
    while math.nextafter(lo, hi) < hi:
        mid = (lo + hi) / 2
        if not lo < mid < hi:  # pragma: no cover - adjacent floats
            break
        try:
            fresh.check(ZCDPEvent(mid))
        except BudgetExceededError:
            hi = mid
        else:
            lo = mid
    assert lo > 0.0 and math.nextafter(lo, 2.0) == hi
    f = PrivacyFilter(budget, "zcdp")
    f.spend(ZCDPEvent(lo))
    assert f.spent.epsilon <= 1.0
    with pytest.raises(BudgetExceededError):
        f.spend(ZCDPEvent(1e-300))
    acc = f.accountant
    assert isinstance(acc, ZCDPAccountant)
    assert acc.rho_exact == Fraction(lo)
    assert f.spent_exact[0] == Fraction(f.spent.epsilon)


@pytest.mark.skipif(not _available("_zcdp"), reason="_zcdp.py not written yet")
def test_zcdp_filter_spent_is_an_upper_bound() -> None:
    f = PrivacyFilter(Budget(2.0, 1e-6), "zcdp")
    f.spend(GaussianEvent(sigma=3.0))
    f.spend(LaplaceEvent(scale=10.0))
    acc = f.accountant
    assert isinstance(acc, ZCDPAccountant)
    assert acc.rho_exact == Fraction(1, 18) + Fraction(1, 200)
    assert Fraction(acc.rho) >= acc.rho_exact
    assert f.spent.epsilon >= zcdp_to_epsilon(float(acc.rho_exact), 1e-6)
    eps, delta = f.spent_exact
    assert (eps, delta) == (Fraction(f.spent.epsilon), Fraction(f.spent.delta))
    assert Fraction(f.remaining.epsilon) <= 2 - eps


def test_spent_exact_of_an_unlimited_budget_without_a_finite_epsilon() -> None:
    f = PrivacyFilter(Budget.unlimited())
    f.spend(ApproxDPEvent(1.0, 0.5))
    assert f.spent_exact == (Fraction(1), Fraction(1, 2))  # basic: the exact sums
    g = PrivacyFilter(Budget.unlimited(), "zcdp")
    g.spend(ZCDPEvent(0.5))
    with pytest.raises(UnsupportedError, match="No finite epsilon"):
        _ = g.spent_exact


def test_filter_refuses_when_deltas_do_not_fit() -> None:
    f = PrivacyFilter(Budget(1.0, 1e-6))
    f.spend(ApproxDPEvent(0.1, 6e-7))
    with pytest.raises(BudgetExceededError, match=r"would need delta 1\.2e-06") as info:
        f.spend(ApproxDPEvent(0.1, 6e-7))
    remaining = info.value.remaining
    assert isinstance(remaining, Budget)
    assert remaining.epsilon == 0.8999999999999999  # 1 - 0.1000...0055, rounded down
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
    with pytest.raises(InvalidParameterError, match="accountant must be one of"):
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
                f.spend(LaplaceEvent(scale=100.0))  # epsilon exactly 1/100
            except BudgetExceededError:
                continue
            with lock:
                accepted.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(accepted) == 100  # exact sums: exactly 100 releases of 1/100 fit in 1.0
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
    assert isinstance(mixed, PureDPEvent)  # ln 3, rounded up to a rigorous upper bound
    assert math.log(3.0) < mixed.epsilon <= math.log(3.0) * (1 + 1e-15)
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
