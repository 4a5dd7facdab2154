"""Mechanisms: each release returns its value, its privacy event and its error model.

- :class:`Release` (value, :class:`~dpcurator.accounting.PrivacyEvent`, :class:`ErrorModel`).
- Randomized response (local DP): :func:`randomized_response` (k-ary),
  :func:`coin_randomized_response` (ln 3), :func:`die_randomized_response` (ln 2), estimators
  :func:`estimate_proportion` (:class:`ProportionEstimate`), :func:`estimate_frequencies`
  (:class:`FrequencyEstimate`), and :func:`posterior_probability`.
- Additive noise, exact and on a public grid (no floating-point noise anywhere):
  :func:`laplace_mechanism` and :func:`geometric_mechanism` (pure DP; :func:`geometric_event`
  gives its privacy event without running it),
  :func:`gaussian_mechanism` and :func:`discrete_gaussian_mechanism` ((epsilon, delta), zCDP).
- Selection: :func:`exponential_mechanism` (and :func:`exponential_mechanism_runs` over runs
  of points that share a utility), :func:`report_noisy_max` (permute-and-flip),
  :func:`selection_error_bound`.
- Several quantiles of one data set jointly (JointExp): :func:`joint_quantile_mechanism`,
  with :func:`joint_quantile_sensitivity` and :func:`joint_quantile_error_bound`.
- Sparse vector: :class:`AboveThreshold`.
- Sensitivities with named neighbour relations: :func:`count_sensitivity`,
  :func:`sum_sensitivity`, :func:`mean_sensitivity`, :func:`histogram_sensitivity`.

Examples
--------
>>> from dpcurator.mechanisms import laplace_mechanism
>>> from dpcurator.noise import InsecureSeededSource
>>> release = laplace_mechanism(42.0, epsilon=1.0, sensitivity=1.0,
...                             source=InsecureSeededSource(0))
>>> release.event.epsilon <= 1.0, release.error.distribution
(True, 'discrete_laplace')
"""

from __future__ import annotations

from dpcurator.mechanisms._exponential import (
    exponential_mechanism,
    exponential_mechanism_runs,
    report_noisy_max,
    selection_error_bound,
)
from dpcurator.mechanisms._gaussian import discrete_gaussian_mechanism, gaussian_mechanism
from dpcurator.mechanisms._joint_quantiles import (
    joint_quantile_error_bound,
    joint_quantile_mechanism,
    joint_quantile_sensitivity,
)
from dpcurator.mechanisms._laplace import geometric_event, geometric_mechanism, laplace_mechanism
from dpcurator.mechanisms._randomized_response import (
    FrequencyEstimate,
    ProportionEstimate,
    coin_randomized_response,
    die_randomized_response,
    estimate_frequencies,
    estimate_proportion,
    posterior_probability,
    randomized_response,
)
from dpcurator.mechanisms._release import ErrorModel, Release
from dpcurator.mechanisms._sensitivity import (
    count_sensitivity,
    histogram_sensitivity,
    mean_sensitivity,
    sum_sensitivity,
)
from dpcurator.mechanisms._sparse_vector import AboveThreshold

__all__ = [
    "AboveThreshold",
    "ErrorModel",
    "FrequencyEstimate",
    "ProportionEstimate",
    "Release",
    "coin_randomized_response",
    "count_sensitivity",
    "die_randomized_response",
    "discrete_gaussian_mechanism",
    "estimate_frequencies",
    "estimate_proportion",
    "exponential_mechanism",
    "exponential_mechanism_runs",
    "gaussian_mechanism",
    "geometric_event",
    "geometric_mechanism",
    "histogram_sensitivity",
    "joint_quantile_error_bound",
    "joint_quantile_mechanism",
    "joint_quantile_sensitivity",
    "laplace_mechanism",
    "mean_sensitivity",
    "posterior_probability",
    "randomized_response",
    "report_noisy_max",
    "selection_error_bound",
    "sum_sensitivity",
]
