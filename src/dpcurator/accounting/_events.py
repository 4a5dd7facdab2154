"""Privacy events: what a release did, as mathematics.

A mechanism does not report "epsilon"; it reports an event that says what it released
(Laplace noise of scale ``b`` on a statistic of sensitivity ``d``, a Gaussian with ``sigma``, a
Poisson subsample of rate ``q`` of another event, ...). Accountants turn sequences of events into
(epsilon, delta), RDP curves, zCDP's rho or privacy-loss distributions. Events are frozen value
objects: an event never changes meaning, and new fields are optional.

Neighbouring datasets: sensitivities are stated for the relation the mechanism was built for
(add/remove one privacy unit unless said otherwise). Subsampling events name their relation:
Poisson subsampling amplifies under add/remove, sampling without replacement under replace-one
(Balle, Barthe and Gaboardi 2018).

Examples
--------
>>> from dpcurator.accounting import LaplaceEvent, SelfComposedEvent
>>> LaplaceEvent(scale=10.0).epsilon
0.1
>>> SelfComposedEvent(LaplaceEvent(scale=10.0), count=3).count
3
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from dpcurator._validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_positive,
    check_probability,
)
from dpcurator.errors import InvalidParameterError

__all__ = [
    "ApproxDPEvent",
    "ComposedEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "NeighbourRelation",
    "NoOpEvent",
    "PoissonSampledEvent",
    "PrivacyEvent",
    "PureDPEvent",
    "RandomizedResponseEvent",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ZCDPEvent",
]


class NeighbourRelation(Enum):
    """Which datasets are neighbours: one privacy unit added or removed, or replaced."""

    ADD_REMOVE = "add_remove"
    REPLACE = "replace"


@dataclass(frozen=True, slots=True)
class PrivacyEvent:
    """Base class of all privacy events (what a release did)."""


@dataclass(frozen=True, slots=True)
class NoOpEvent(PrivacyEvent):
    """A release that does not look at private data (costs nothing)."""


@dataclass(frozen=True, slots=True)
class PureDPEvent(PrivacyEvent):
    """Any epsilon-DP release (exponential mechanism, report-noisy-max, sparse vector ...).

    Accounted through the worst case pair of pure DP, randomized response with
    ``p = e^eps / (1 + e^eps)`` (Kairouz, Oh and Viswanath 2015).
    """

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))


@dataclass(frozen=True, slots=True)
class ApproxDPEvent(PrivacyEvent):
    """Any (epsilon, delta)-DP release, accounted through its worst case pair."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, allow_zero=True))
        object.__setattr__(self, "delta", check_delta(self.delta))


@dataclass(frozen=True, slots=True)
class ZCDPEvent(PrivacyEvent):
    """Any rho-zCDP release (Bun and Steinke 2016)."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_positive(self.rho, "rho"))


@dataclass(frozen=True, slots=True)
class LaplaceEvent(PrivacyEvent):
    """Laplace noise of scale ``b`` on a statistic with L1 sensitivity ``d``: (d/b)-DP.

    Source: Dwork, McSherry, Nissim and Smith 2006; lecture 000 (the Laplace mechanism).
    """

    scale: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", check_positive(self.scale, "scale"))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))

    @property
    def epsilon(self) -> float:
        """The pure-DP epsilon, ``sensitivity / scale``."""
        return self.sensitivity / self.scale


@dataclass(frozen=True, slots=True)
class DiscreteLaplaceEvent(PrivacyEvent):
    """Discrete Laplace noise ``P[x] ∝ exp(-|x|/scale)`` on an integer statistic.

    With integer L1 sensitivity ``d`` it is (d/scale)-DP (Canonne, Kamath and Steinke 2020).
    """

    scale: float
    sensitivity: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", check_positive(self.scale, "scale"))
        object.__setattr__(
            self, "sensitivity", check_integer(self.sensitivity, "sensitivity", minimum=1)
        )

    @property
    def epsilon(self) -> float:
        """The pure-DP epsilon, ``sensitivity / scale``."""
        return self.sensitivity / self.scale


@dataclass(frozen=True, slots=True)
class GaussianEvent(PrivacyEvent):
    """Gaussian noise ``N(0, sigma^2)`` per coordinate on a statistic with L2 sensitivity ``d``.

    It is rho-zCDP with ``rho = d^2 / (2 sigma^2)``; ``noise_multiplier = sigma / d``.
    """

    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive(self.sigma, "sigma"))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))

    @property
    def noise_multiplier(self) -> float:
        """``sigma / sensitivity``, the only quantity the privacy loss depends on."""
        return self.sigma / self.sensitivity


@dataclass(frozen=True, slots=True)
class DiscreteGaussianEvent(PrivacyEvent):
    """Discrete Gaussian ``P[x] ∝ exp(-x^2 / (2 sigma^2))`` on an integer statistic.

    With integer L2 sensitivity ``d`` it is rho-zCDP with ``rho = d^2 / (2 sigma^2)``
    (Canonne, Kamath and Steinke 2020, Theorem 4); ``sensitivity`` is the L2 sensitivity.

    ``dimension`` is how many coordinates can change between neighbours. With 1 (and an integer
    sensitivity) accountants may use the exact one-dimensional privacy profile (CKS20, Theorem 7).
    With more, the lattice is not rotation invariant and only the Renyi bound
    ``D_alpha <= alpha Delta^2 / (2 sigma^2)`` (CKS20, Theorem 14: zCDP) is proven, so profile-based
    accountants (PLD, and basic composition through a per-event delta) refuse the event.
    """

    sigma: float
    sensitivity: float = 1.0
    dimension: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive(self.sigma, "sigma"))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "dimension", check_integer(self.dimension, "dimension", minimum=1))


@dataclass(frozen=True, slots=True)
class RandomizedResponseEvent(PrivacyEvent):
    """k-ary randomized response: the true value w.p. ``p_truth``, any other one uniformly.

    Each other value is reported with probability ``(1 - p_truth) / (k - 1)``, so it is
    epsilon-DP (replace-one, for one respondent's value) with
    ``epsilon = ln(p_truth (k - 1) / (1 - p_truth))``. The lecture's coin version is
    ``p_truth = 3/4, k = 2`` (epsilon = ln 3), the die version ``p_truth = 2/3`` (ln 2).
    """

    p_truth: float
    categories: int = 2

    def __post_init__(self) -> None:
        categories = check_integer(self.categories, "categories", minimum=2)
        p = check_probability(self.p_truth, "p_truth", open_right=True)
        if p <= 1.0 / categories:
            raise InvalidParameterError(
                "p_truth", self.p_truth, f"must be > 1/categories = {1.0 / categories}"
            )
        object.__setattr__(self, "categories", categories)
        object.__setattr__(self, "p_truth", p)

    @property
    def p_other(self) -> float:
        """Probability of reporting one particular wrong value."""
        return (1.0 - self.p_truth) / (self.categories - 1)

    @property
    def epsilon(self) -> float:
        """``ln(p_truth / p_other)``."""
        return math.log(self.p_truth / self.p_other)


@dataclass(frozen=True, slots=True)
class PoissonSampledEvent(PrivacyEvent):
    """``event`` run on a Poisson subsample (each unit kept independently w.p. ``sampling_rate``).

    Amplifies privacy under add/remove neighbours (DP-SGD's sampled Gaussian).
    """

    sampling_rate: float
    event: PrivacyEvent

    def __post_init__(self) -> None:
        rate = check_probability(self.sampling_rate, "sampling_rate", open_left=True)
        object.__setattr__(self, "sampling_rate", rate)
        _check_event(self.event, "event")


@dataclass(frozen=True, slots=True)
class SampledWithoutReplacementEvent(PrivacyEvent):
    """``event`` run on ``sample_size`` units drawn without replacement from ``population_size``.

    Amplifies under replace-one neighbours: an (eps, delta) event becomes
    (ln(1 + m/n (e^eps - 1)), m/n delta) (Balle, Barthe and Gaboardi 2018, Theorem 9).
    """

    sample_size: int
    population_size: int
    event: PrivacyEvent

    def __post_init__(self) -> None:
        m = check_integer(self.sample_size, "sample_size", minimum=1)
        n = check_integer(self.population_size, "population_size", minimum=1)
        if m > n:
            raise InvalidParameterError("sample_size", m, f"must be <= population_size = {n}")
        object.__setattr__(self, "sample_size", m)
        object.__setattr__(self, "population_size", n)
        _check_event(self.event, "event")

    @property
    def sampling_rate(self) -> float:
        """``sample_size / population_size``."""
        return self.sample_size / self.population_size


@dataclass(frozen=True, slots=True)
class ComposedEvent(PrivacyEvent):
    """Several events run one after the other on the same data (adaptively)."""

    events: tuple[PrivacyEvent, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        events = tuple(self.events)
        for i, event in enumerate(events):
            _check_event(event, f"events[{i}]")
        object.__setattr__(self, "events", events)


@dataclass(frozen=True, slots=True)
class SelfComposedEvent(PrivacyEvent):
    """The same ``event`` run ``count`` times on the same data."""

    event: PrivacyEvent
    count: int

    def __post_init__(self) -> None:
        _check_event(self.event, "event")
        object.__setattr__(self, "count", check_integer(self.count, "count", minimum=0))


def _check_event(event: object, name: str) -> None:
    if not isinstance(event, PrivacyEvent):
        raise InvalidParameterError(name, event, "must be a PrivacyEvent")
