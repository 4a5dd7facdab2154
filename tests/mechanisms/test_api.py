"""The public surface of dpcurator.mechanisms is exactly the documented list."""

from __future__ import annotations

from dpcurator import mechanisms

DOCUMENTED = {
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
    "exponential_mechanism_runs",
    "sum_sensitivity",
}


def test_all_is_the_documented_list_and_each_name_is_in_the_module_docstring() -> None:
    assert set(mechanisms.__all__) == DOCUMENTED
    assert mechanisms.__doc__ is not None
    for name in DOCUMENTED:
        assert name in mechanisms.__doc__, name
        assert getattr(mechanisms, name).__doc__, name
