"""Privacy as data: events, accountants, budgets and filters, calibration.

- Events: frozen records of what a release did (:class:`LaplaceEvent`, :class:`GaussianEvent`,
  :class:`PoissonSampledEvent`, :class:`SelfComposedEvent` ...).
- Accountants, all consuming the same events (:class:`Accountant`; build one by name with
  :func:`make_accountant`, add one of your own with :func:`register_accountant`):
  :class:`BasicAccountant`, :class:`AdvancedCompositionAccountant`
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

from typing import TYPE_CHECKING

from dpcurator._lazy import lazy_exports

# Each public name is imported from its module when first used (dpcurator._lazy), so that
# importing the package is cheap; type checkers read the same imports below.
_EXPORTS: dict[str, str] = {
    "Accountant": "._accountant",
    "Budget": "._budget",
    "discrete_gaussian_sigma": "._calibration",
    "dpsgd_noise_multiplier": "._calibration",
    "epsilon_for": "._calibration",
    "gaussian_sigma_analytic": "._calibration",
    "gaussian_sigma_classic": "._calibration",
    "laplace_scale": "._calibration",
    "zcdp_gaussian_sigma": "._calibration",
    "zcdp_rho_for": "._calibration",
    "AdvancedCompositionAccountant": "._composition",
    "BasicAccountant": "._composition",
    "OptimalHomogeneousAccountant": "._composition",
    "advanced_composition_epsilon": "._composition",
    "advanced_composition_per_step": "._composition",
    "ApproxDPEvent": "._events",
    "ComposedEvent": "._events",
    "DiscreteGaussianEvent": "._events",
    "DiscreteLaplaceEvent": "._events",
    "GaussianEvent": "._events",
    "LaplaceEvent": "._events",
    "NeighbourRelation": "._events",
    "NoOpEvent": "._events",
    "PoissonSampledEvent": "._events",
    "PrivacyEvent": "._events",
    "PureDPEvent": "._events",
    "RandomizedResponseEvent": "._events",
    "SampledWithoutReplacementEvent": "._events",
    "SelfComposedEvent": "._events",
    "ZCDPEvent": "._events",
    "PrivacyFilter": "._filters",
    "PrivacyOdometer": "._filters",
    "parallel_composition": "._filters",
    "group_privacy": "._group",
    "PLDAccountant": "._pld",
    "hockey_stick_discrete_gaussian": "._profiles",
    "hockey_stick_gaussian": "._profiles",
    "hockey_stick_laplace": "._profiles",
    "hockey_stick_sampled_gaussian": "._profiles",
    "privacy_profile": "._profiles",
    "DEFAULT_RDP_ORDERS": "._rdp",
    "RDPAccountant": "._rdp",
    "rdp_curve": "._rdp",
    "rdp_to_delta": "._rdp",
    "rdp_to_epsilon": "._rdp",
    "sampled_gaussian_rdp": "._rdp",
    "ACCOUNTANT_NAMES": "._registry",
    "accountant_names": "._registry",
    "make_accountant": "._registry",
    "register_accountant": "._registry",
    "event_from_dict": "._serialize",
    "event_from_json": "._serialize",
    "event_to_dict": "._serialize",
    "event_to_json": "._serialize",
    "ZCDPAccountant": "._zcdp",
    "event_rho": "._zcdp",
    "zcdp_to_delta": "._zcdp",
    "zcdp_to_epsilon": "._zcdp",
}

if TYPE_CHECKING:
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
    from dpcurator.accounting._registry import (
        ACCOUNTANT_NAMES,
        accountant_names,
        make_accountant,
        register_accountant,
    )
    from dpcurator.accounting._serialize import (
        event_from_dict,
        event_from_json,
        event_to_dict,
        event_to_json,
    )
    from dpcurator.accounting._zcdp import ZCDPAccountant, event_rho, zcdp_to_delta, zcdp_to_epsilon
else:
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, namespace=globals())

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
    "accountant_names",
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
    "register_accountant",
    "sampled_gaussian_rdp",
    "zcdp_gaussian_sigma",
    "zcdp_rho_for",
    "zcdp_to_delta",
    "zcdp_to_epsilon",
]
