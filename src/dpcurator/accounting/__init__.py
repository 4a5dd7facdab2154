"""Privacy as data: events, accountants, budgets and filters, calibration.

- Events: frozen records of what a release did (:class:`LaplaceEvent`, :class:`GaussianEvent`,
  :class:`PoissonSampledEvent`, :class:`SelfComposedEvent` ...).
- Accountants, all consuming the same events (:class:`Accountant`; build one by name with
  :func:`make_accountant`): :class:`BasicAccountant`, :class:`AdvancedCompositionAccountant`
  (Dwork, Rothblum and Vadhan 2010), :class:`OptimalHomogeneousAccountant` (Kairouz, Oh and
  Viswanath 2015), :class:`RDPAccountant` (Mironov 2017; the sampled Gaussian of Mironov, Talwar and
  Zhang 2019), :class:`ZCDPAccountant` (Bun and Steinke 2016), :class:`PLDAccountant` (privacy-loss
  distributions, "connect the dots" discretisation, so the epsilon reported is an upper bound).
- Privacy profiles: :func:`privacy_profile` (the hockey-stick divergence delta(epsilon) of an
  event) and closed forms for the Gaussian, Laplace, sampled Gaussian and discrete Gaussian.
- Conversions: :func:`rdp_to_epsilon`, :func:`rdp_to_delta`, :func:`zcdp_to_epsilon`,
  :func:`zcdp_to_delta`.
- Serialisation: :func:`event_to_json` / :func:`event_from_json` (and dicts), exact round trips
  for ledgers and files.
- Budgets: :class:`Budget`, :class:`PrivacyFilter` (refuses a release that would exceed the budget,
  before any noise is drawn), :class:`PrivacyOdometer`; :func:`parallel_composition` over disjoint
  partitions and :func:`group_privacy` for groups of k units.
- Calibration: :func:`laplace_scale`, :func:`gaussian_sigma_classic`,
  :func:`gaussian_sigma_analytic` (Balle and Wang 2018), :func:`discrete_gaussian_sigma`,
  :func:`zcdp_gaussian_sigma`, :func:`dpsgd_noise_multiplier`, :func:`epsilon_for`.

Examples
--------
>>> from dpcurator.accounting import PLDAccountant, PoissonSampledEvent, GaussianEvent
>>> step = PoissonSampledEvent(sampling_rate=0.01, event=GaussianEvent(sigma=1.0))
>>> eps = PLDAccountant().compose(step, count=1000).get_epsilon(1e-5)
>>> 1.82 < eps < 1.83
True
"""

from __future__ import annotations

from dpcurator.accounting._accountant import Accountant
from dpcurator.accounting._budget import Budget
from dpcurator.accounting._calibration import (
    discrete_gaussian_sigma,
    dpsgd_noise_multiplier,
    epsilon_for,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    laplace_scale,
    zcdp_gaussian_sigma,
    zcdp_rho_for,
)
from dpcurator.accounting._composition import (
    AdvancedCompositionAccountant,
    BasicAccountant,
    OptimalHomogeneousAccountant,
    advanced_composition_epsilon,
    advanced_composition_per_step,
)
from dpcurator.accounting._events import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    NeighbourRelation,
    NoOpEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpcurator.accounting._filters import PrivacyFilter, PrivacyOdometer, parallel_composition
from dpcurator.accounting._group import group_privacy
from dpcurator.accounting._pld import PLDAccountant
from dpcurator.accounting._profiles import (
    hockey_stick_discrete_gaussian,
    hockey_stick_gaussian,
    hockey_stick_laplace,
    hockey_stick_sampled_gaussian,
    privacy_profile,
)
from dpcurator.accounting._rdp import (
    DEFAULT_RDP_ORDERS,
    RDPAccountant,
    rdp_curve,
    rdp_to_delta,
    rdp_to_epsilon,
    sampled_gaussian_rdp,
)
from dpcurator.accounting._registry import ACCOUNTANT_NAMES, make_accountant
from dpcurator.accounting._serialize import (
    event_from_dict,
    event_from_json,
    event_to_dict,
    event_to_json,
)
from dpcurator.accounting._zcdp import ZCDPAccountant, event_rho, zcdp_to_delta, zcdp_to_epsilon

__all__ = [
    "ACCOUNTANT_NAMES",
    "DEFAULT_RDP_ORDERS",
    "Accountant",
    "AdvancedCompositionAccountant",
    "ApproxDPEvent",
    "BasicAccountant",
    "Budget",
    "ComposedEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "NeighbourRelation",
    "NoOpEvent",
    "OptimalHomogeneousAccountant",
    "PLDAccountant",
    "PoissonSampledEvent",
    "PrivacyEvent",
    "PrivacyFilter",
    "PrivacyOdometer",
    "PureDPEvent",
    "RDPAccountant",
    "RandomizedResponseEvent",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ZCDPAccountant",
    "ZCDPEvent",
    "advanced_composition_epsilon",
    "advanced_composition_per_step",
    "discrete_gaussian_sigma",
    "dpsgd_noise_multiplier",
    "epsilon_for",
    "event_from_dict",
    "event_from_json",
    "event_rho",
    "event_to_dict",
    "event_to_json",
    "gaussian_sigma_analytic",
    "gaussian_sigma_classic",
    "group_privacy",
    "hockey_stick_discrete_gaussian",
    "hockey_stick_gaussian",
    "hockey_stick_laplace",
    "hockey_stick_sampled_gaussian",
    "laplace_scale",
    "make_accountant",
    "parallel_composition",
    "privacy_profile",
    "rdp_curve",
    "rdp_to_delta",
    "rdp_to_epsilon",
    "sampled_gaussian_rdp",
    "zcdp_gaussian_sigma",
    "zcdp_rho_for",
    "zcdp_to_delta",
    "zcdp_to_epsilon",
]
