"""Gaussian mechanism on the grid and discrete Gaussian mechanism: calibration and events."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcurator.accounting import BasicAccountant, DiscreteGaussianEvent, gaussian_sigma_analytic
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import discrete_gaussian_mechanism, gaussian_mechanism, mean_sensitivity
from dpcurator.noise import InsecureSeededSource


def test_classic_sigma_is_the_lecture_formula() -> None:
    # Lecture 002: sigma = Delta sqrt(2 ln(1.25/delta)) / eps.
    eps, delta, sensitivity = 0.5, 1e-5, 2.0
    release = gaussian_mechanism(
        1.0, epsilon=eps, delta=delta, sensitivity=sensitivity, calibration="classic"
    )
    assert release.error is not None
    lecture = sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / eps
    assert release.error.scale == pytest.approx(lecture, rel=2**-11)
    assert release.error.scale >= lecture


def test_analytic_sigma_is_smaller_and_matches_balle_wang() -> None:
    eps, delta = 0.5, 1e-6
    analytic = gaussian_mechanism(0.0, epsilon=eps, delta=delta, sensitivity=1.0)
    classic = gaussian_mechanism(
        0.0, epsilon=eps, delta=delta, sensitivity=1.0, calibration="classic"
    )
    assert analytic.error is not None and classic.error is not None
    assert analytic.error.scale < 0.8 * classic.error.scale
    reference = gaussian_sigma_analytic(eps, delta, 1.0)
    assert reference <= analytic.error.scale <= reference * (1 + 2**-11)


def test_mean_estimation_uses_the_l2_grid_sensitivity() -> None:
    # Lecture 002: mean of n vectors with ||x||_2 <= c under replace-one: Delta_2 = 2c/n.
    sensitivity = mean_sensitivity(1.0, 500)
    release = gaussian_mechanism(
        np.array([0.1, -0.2, 0.3]), epsilon=1.0, delta=1e-6, sensitivity=sensitivity
    )
    assert release.error is not None
    assert isinstance(release.event, DiscreteGaussianEvent)
    scaled = sensitivity / release.error.unit
    # ceil(Delta 2^k) + ceil(sqrt(3)) grid units, an integer.
    assert release.event.sensitivity == math.ceil(scaled) + 2
    assert release.error.unit <= sensitivity / math.sqrt(3) * 2**-12
    assert release.value.shape == (3,)


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-5), (3.0, 1e-3), (0.5, 1e-6)])
def test_accountant_with_the_exact_discrete_profile_certifies_the_request(
    epsilon: float, delta: float
) -> None:
    # The accountant sums the exact discrete Gaussian profile (CKS20, Theorem 7) on the event;
    # the calibration margin must cover the discrete-versus-continuous difference.
    release = gaussian_mechanism(0.0, epsilon=epsilon, delta=delta, sensitivity=1.0)
    event = release.event
    assert isinstance(event, DiscreteGaussianEvent)
    assert event.sensitivity == int(event.sensitivity)
    certified = BasicAccountant(gaussian_delta=delta).compose(event).get_epsilon(delta)
    assert certified <= epsilon
    assert certified == pytest.approx(epsilon, rel=1e-5)


def test_grid_does_not_depend_on_the_data_and_outputs_live_on_it() -> None:
    a = gaussian_mechanism(3.14159, epsilon=1.0, delta=1e-5, sensitivity=0.5)
    b = gaussian_mechanism(-271.8, epsilon=1.0, delta=1e-5, sensitivity=0.5)
    assert a.event == b.event
    assert a.error is not None and b.error is not None
    assert a.error.unit == b.error.unit
    for release in (a, b):
        assert release.error is not None
        index = release.value / release.error.unit
        assert index == math.floor(index)


def test_discrete_gaussian_mechanism_on_integers() -> None:
    release = discrete_gaussian_mechanism(
        np.array([[1, 2], [3, 4]]), sigma=2.5, sensitivity=2.0, source=InsecureSeededSource(0)
    )
    assert release.value.dtype == np.int64 and release.value.shape == (2, 2)
    # 4 coordinates, L2 sensitivity 2: up to 4 integer coordinates can move by 1 each.
    assert release.event == DiscreteGaussianEvent(sigma=2.5, sensitivity=2.0, dimension=4)
    assert release.error is not None and release.error.unit == 1.0 and release.error.rounding == 0
    # The discrete Gaussian's variance is below sigma^2, by e^{-2 pi^2 sigma^2} (Poisson
    # summation): invisible in float64 at sigma = 2.5, clear at sigma = 0.4.
    assert release.error.std <= 2.5
    small = discrete_gaussian_mechanism(0, sigma=0.4).error
    assert small is not None and small.std < 0.9 * 0.4
    assert isinstance(discrete_gaussian_mechanism(5, sigma=1.0).value, int)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: gaussian_mechanism(0.0, epsilon=1.0, delta=0.0, sensitivity=1.0), "delta"),
        (lambda: gaussian_mechanism(0.0, epsilon=1.0, delta=1.0, sensitivity=1.0), "delta"),
        (lambda: gaussian_mechanism(0.0, epsilon=1.0, delta=-0.1, sensitivity=1.0), "delta"),
        (lambda: gaussian_mechanism(0.0, epsilon=1.0, delta=math.nan, sensitivity=1.0), "delta"),
        (lambda: gaussian_mechanism(0.0, epsilon=0.0, delta=1e-5, sensitivity=1.0), "epsilon"),
        (lambda: gaussian_mechanism(0.0, epsilon=math.nan, delta=1e-5, sensitivity=1.0), "epsilon"),
        (
            lambda: gaussian_mechanism(0.0, epsilon=1.0, delta=1e-5, sensitivity=math.inf),
            "sensitivity",
        ),
        (
            lambda: gaussian_mechanism(
                0.0, epsilon=1.0, delta=1e-5, sensitivity=1.0, calibration="fast"
            ),
            "calibration",
        ),
        (
            lambda: gaussian_mechanism(
                0.0, epsilon=2.0, delta=1e-5, sensitivity=1.0, calibration="classic"
            ),
            "epsilon",
        ),
        (lambda: gaussian_mechanism([math.nan], epsilon=1.0, delta=1e-5, sensitivity=1.0), "value"),
        (lambda: discrete_gaussian_mechanism(1, sigma=0.0), "sigma"),
        (lambda: discrete_gaussian_mechanism(1, sigma=2.0**50), "sigma"),
        (lambda: discrete_gaussian_mechanism(1.5, sigma=1.0), "value"),
        (lambda: discrete_gaussian_mechanism(1, sigma=1.0, sensitivity=-1.0), "sensitivity"),
    ],
)
def test_bad_parameters_name_the_argument(call: object, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        call()  # type: ignore[operator]
    assert info.value.name == name
    assert name in str(info.value)


def test_vector_release_is_accounted_through_zcdp_only() -> None:
    """Several changing coordinates: the exact 1-D profile does not apply (CKS20 Thm 14)."""
    from dpcurator.accounting import PLDAccountant, ZCDPAccountant
    from dpcurator.errors import UnsupportedEventError
    from dpcurator.noise import InsecureSeededSource

    release = gaussian_mechanism(
        [1.0, 2.0, 3.0], epsilon=1.0, delta=1e-5, sensitivity=1.0, source=InsecureSeededSource(3)
    )
    assert release.event.dimension == 3
    assert ZCDPAccountant().compose(release.event).get_epsilon(1e-5) <= 1.0
    with pytest.raises(UnsupportedEventError, match="zCDP"):
        PLDAccountant().compose(release.event)
    scalar = gaussian_mechanism(1.0, epsilon=1.0, delta=1e-5, sensitivity=1.0)
    assert scalar.event.dimension == 1
    assert PLDAccountant().compose(scalar.event).get_epsilon(1e-5) <= 1.0
