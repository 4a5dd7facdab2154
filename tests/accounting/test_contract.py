"""The contract every accountant passes (as dp_accounting's shared accountant tests).

Subclass :class:`AccountantContract` with ``make`` returning a fresh accountant: the same events,
composition laws and monotonicity are then checked for it. Every built-in accountant and a
registered one are checked here.
"""

from __future__ import annotations

import itertools
import math
from typing import ClassVar

import pytest

from dpcurator.accounting import (
    AdvancedCompositionAccountant,
    ApproxDPEvent,
    BasicAccountant,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    OptimalHomogeneousAccountant,
    PoissonSampledEvent,
    PrivacyEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ZCDPEvent,
    make_accountant,
)
from dpcurator.accounting._accountant import Accountant
from dpcurator.accounting._registry import accountant_names, register_accountant
from dpcurator.errors import InvalidParameterError, UnsupportedEventError

CATALOG: list[PrivacyEvent] = [
    NoOpEvent(),
    PureDPEvent(0.5),
    ApproxDPEvent(0.5, 1e-7),
    ZCDPEvent(0.05),
    LaplaceEvent(scale=2.0),
    DiscreteLaplaceEvent(scale=3.0, sensitivity=2),
    GaussianEvent(sigma=4.0),
    DiscreteGaussianEvent(sigma=4.0),
    RandomizedResponseEvent(p_truth=0.6),
    PoissonSampledEvent(0.01, GaussianEvent(sigma=1.0)),
]
DELTAS = (1e-9, 1e-6, 1e-3)
REL = 1e-6


class AccountantContract:
    """The laws; subclasses give ``make`` (and may narrow ``deltas``).

    ``homogeneous`` accountants compose one shared (epsilon, delta) only: their pairs of
    events are the same event twice.
    """

    deltas: ClassVar[tuple[float, ...]] = DELTAS
    homogeneous: ClassVar[bool] = False

    def make(self) -> Accountant:
        raise NotImplementedError

    def supported(self) -> list[PrivacyEvent]:
        return [e for e in CATALOG if self.make().supports(e)]

    def pair(self) -> tuple[PrivacyEvent, PrivacyEvent]:
        events = [e for e in self.supported() if not isinstance(e, NoOpEvent)]
        if self.homogeneous:
            return events[0], events[0]
        assert len(events) >= 2, "an accountant should support at least two kinds of events"
        return events[0], events[-1]

    @staticmethod
    def close(a: float, b: float) -> bool:
        return a == b or math.isclose(a, b, rel_tol=REL, abs_tol=1e-12)

    def test_nothing_composed_costs_nothing(self) -> None:
        acc = self.make()
        for delta in self.deltas:
            assert acc.get_epsilon(delta) == 0.0
        assert acc.get_delta(1.0) == 0.0

    def test_supports_agrees_with_compose(self) -> None:
        for event in CATALOG:
            acc = self.make()
            if acc.supports(event):
                acc.compose(event)
                assert acc.events == ((event, 1),)
            else:
                with pytest.raises(UnsupportedEventError):
                    acc.compose(event)
                assert acc.events == ()  # a refused event composes nothing

    def test_count_is_repetition(self) -> None:
        for event in self.supported():
            once = self.make().compose(event, count=3)
            thrice = self.make().compose(event).compose(event).compose(event)
            for delta in self.deltas:
                assert self.close(once.get_epsilon(delta), thrice.get_epsilon(delta))

    def test_order_does_not_matter(self) -> None:
        a, b = self.pair()
        ab, ba = self.make().compose(a).compose(b), self.make().compose(b).compose(a)
        for delta in self.deltas:
            assert self.close(ab.get_epsilon(delta), ba.get_epsilon(delta))

    def test_more_events_never_cost_less(self) -> None:
        a, b = self.pair()
        for delta in self.deltas:
            one = self.make().compose(a).get_epsilon(delta)
            two = self.make().compose(a).compose(b).get_epsilon(delta)
            assert two >= one * (1 - REL)

    def test_a_larger_delta_never_costs_more_epsilon(self) -> None:
        acc = self.make()
        for event in self.pair() if self.homogeneous else self.supported():
            acc.compose(event)
        epsilons = [acc.get_epsilon(delta) for delta in sorted(self.deltas)]
        assert all(x >= y * (1 - REL) for x, y in itertools.pairwise(epsilons))

    def test_epsilon_and_delta_are_dual(self) -> None:
        a, b = self.pair()
        acc = self.make().compose(a).compose(b, count=2)
        for delta in self.deltas:
            epsilon = acc.get_epsilon(delta)
            if math.isfinite(epsilon):
                assert acc.get_delta(epsilon * (1 + 1e-9) + 1e-12) <= delta * (1 + 1e-6) + 1e-15

    def test_copies_are_independent(self) -> None:
        a, b = self.pair()
        acc = self.make().compose(a)
        before = acc.get_epsilon(self.deltas[0])
        copy = acc.copy()
        copy.compose(b, count=5)
        assert acc.get_epsilon(self.deltas[0]) == before
        assert acc.events == ((a, 1),)
        assert copy.get_epsilon(self.deltas[0]) >= before

    def test_count_zero_composes_nothing(self) -> None:
        a, _ = self.pair()
        acc = self.make().compose(a, count=0)
        assert acc.events == ()
        assert acc.get_epsilon(self.deltas[0]) == 0.0

    def test_it_is_made_by_its_name(self) -> None:
        acc = self.make()
        assert acc.name in accountant_names()
        assert type(make_accountant(acc.name)) is type(acc)


class TestBasic(AccountantContract):
    def make(self) -> Accountant:
        return BasicAccountant()


class TestAdvanced(AccountantContract):
    def make(self) -> Accountant:
        return AdvancedCompositionAccountant()


class TestOptimal(AccountantContract):
    homogeneous = True

    def make(self) -> Accountant:
        return OptimalHomogeneousAccountant()


class TestRDP(AccountantContract):
    def make(self) -> Accountant:
        return make_accountant("rdp")


class TestZCDP(AccountantContract):
    def make(self) -> Accountant:
        return make_accountant("zcdp")


class TestPLD(AccountantContract):
    def make(self) -> Accountant:
        return make_accountant("pld")


class _Halved(BasicAccountant):
    """A registered accountant of the tests' own: basic composition, a name of its own."""

    name = "contract_basic"


register_accountant("contract_basic", _Halved)


class TestRegistered(AccountantContract):
    def make(self) -> Accountant:
        return make_accountant("contract_basic")


def test_every_built_in_accountant_is_under_contract() -> None:
    checked = {cls().make().name for cls in AccountantContract.__subclasses__()}
    assert set(accountant_names()) <= checked | {
        n for n in accountant_names() if n.startswith(("careful", "test_"))
    }


def test_registration_refuses_built_in_names_and_bad_factories() -> None:
    with pytest.raises(InvalidParameterError, match="built-in"):
        register_accountant("basic", BasicAccountant)
    with pytest.raises(InvalidParameterError, match="identifier"):
        register_accountant("not a name", BasicAccountant)
    with pytest.raises(InvalidParameterError, match="callable"):
        register_accountant("fine", 3)  # type: ignore[arg-type]
    register_accountant("test_misnamed", BasicAccountant)  # makes an accountant named "basic"
    with pytest.raises(InvalidParameterError, match="does not make"):
        make_accountant("test_misnamed")
