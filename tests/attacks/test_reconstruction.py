"""Tests of ``dpcurator.attacks._reconstruction``: Dinur-Nissim attacks and the DP bound.

Done-means of issue 7: at n = 500 rows and 2,000 random queries, answers with error up to
0.05 sqrt(n) lose at least 95 % of the secret bits to the attack (seeded). The curator-session
version of the DP check (epsilon = 1) comes with the session; here a Laplace interface whose
whole interaction is epsilon-DP stands in for it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.attacks import (
    MAX_EXHAUSTIVE_ROWS,
    dp_reconstruction_bound,
    exhaustive_reconstruction,
    lp_reconstruction,
    reconstruction_vs_noise,
    subset_sum_oracle,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.noise import InsecureSeededSource, bernoulli


def _secret(n: int, seed: int) -> NDArray[np.int64]:
    return np.asarray(bernoulli("1/2", n, source=InsecureSeededSource(seed)), dtype=np.int64)


@pytest.mark.slow
@pytest.mark.statistical
def test_lp_attack_recovers_95_percent_at_n_500() -> None:
    n, m = 500, 2000
    secret = _secret(n, 1)
    error = 0.05 * math.sqrt(n)
    oracle = subset_sum_oracle(secret, noise="uniform", scale=error, source=InsecureSeededSource(2))
    result = lp_reconstruction(oracle, n, queries=m, source=InsecureSeededSource(3))
    assert result.queries == m
    assert result.fraction_recovered(secret) >= 0.95
    # The LP's fractional solution lies in the unit cube.
    assert result.solution.shape == (n,) and ((result.solution >= 0) & (result.solution <= 1)).all()


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_exhaustive_attack_is_wrong_on_at_most_4e_rows(seed: int) -> None:
    # Error up to E = 1 on every answer: Dinur-Nissim guarantee <= 4E = 4 wrong bits.
    n = 10
    secret = _secret(n, seed)
    oracle = subset_sum_oracle(
        secret, noise="uniform", scale=1.0, source=InsecureSeededSource(seed)
    )
    result = exhaustive_reconstruction(oracle, n)
    assert result.queries == 2**n
    assert result.errors(secret) <= 4
    assert result.max_residual <= 1.0 + 1e-6  # the truth has residual <= E, so the winner too


def test_exhaustive_attack_exact_answers_and_index_queries() -> None:
    secret = _secret(12, 7)
    seen: list[Any] = []
    exact = subset_sum_oracle(secret)

    def oracle(rows: NDArray[np.int64]) -> float:
        seen.append(rows)
        return exact(rows)

    result = exhaustive_reconstruction(oracle, 12, subset_as="indices")
    assert result.errors(secret) == 0 and result.max_residual == 0.0
    assert all(r.dtype.kind == "i" for r in seen)
    assert len(seen) == 4096


def test_lp_variants_agree_on_easy_instances() -> None:
    n = 60
    secret = _secret(n, 8)
    oracle = subset_sum_oracle(secret, noise="rounding", scale=0.5)  # exact answers
    for kwargs in ({"norm": "l1"}, {"norm": "linf"}, {"max_error": 0.5}):
        result = lp_reconstruction(oracle, n, source=InsecureSeededSource(9), **kwargs)
        assert result.errors(secret) == 0, kwargs
        assert result.queries == 4 * n


def test_feasibility_lp_with_too_small_a_bound_is_a_clear_error() -> None:
    n = 40
    oracle = subset_sum_oracle(_secret(n, 10), noise="rounding", scale=3.0)
    with pytest.raises(InvalidParameterError, match="max_error"):
        lp_reconstruction(oracle, n, max_error=0.01, source=InsecureSeededSource(11))


def test_oracle_noise_models() -> None:
    secret = np.array([1, 0, 1, 1, 0, 1])
    everyone = np.ones(6, dtype=bool)
    assert subset_sum_oracle(secret)(everyone) == 4.0
    assert subset_sum_oracle(secret, noise="rounding", scale=1.5)(everyone) == 3.0
    uniform = subset_sum_oracle(secret, noise="uniform", scale=0.5, source=InsecureSeededSource(1))
    answers = np.array([uniform(everyone) for _ in range(2000)])
    assert np.abs(answers - 4).max() <= 0.5 and abs(answers.mean() - 4) < 0.03
    laplace = subset_sum_oracle(secret, noise="laplace", scale=2.0, source=InsecureSeededSource(2))
    noisy = np.array([laplace(np.array([0, 2])) for _ in range(2000)])
    assert abs(noisy.mean() - 2) < 0.3 and noisy.std() == pytest.approx(2 * math.sqrt(2), rel=0.1)


@pytest.mark.statistical
def test_dp_interface_keeps_recovery_below_the_dp_bound() -> None:
    # m Laplace answers of scale m / eps: the whole interaction is eps-DP when one row's bit
    # changes (sensitivity 1 per answer, basic composition), so no attack beats the bound on
    # average; the fraction over n = 200 independent bits has sd <= 1/sqrt(4 n) = 0.035.
    n, m, eps = 200, 800, 1.0
    secret = _secret(n, 12)
    oracle = subset_sum_oracle(
        secret, noise="laplace", scale=m / eps, source=InsecureSeededSource(13)
    )
    result = lp_reconstruction(oracle, n, queries=m, source=InsecureSeededSource(14))
    bound = dp_reconstruction_bound(eps)
    assert result.fraction_recovered(secret) <= bound + 4 * 0.035
    # Negative control: the same attack with 1000x less noise (not DP at eps = 1) beats the bound.
    leaky = subset_sum_oracle(
        secret, noise="laplace", scale=m / eps / 1000, source=InsecureSeededSource(15)
    )
    leaked = lp_reconstruction(leaky, n, queries=m, source=InsecureSeededSource(16))
    assert leaked.fraction_recovered(secret) > bound + 4 * 0.035


def test_dp_bound_formula() -> None:
    assert dp_reconstruction_bound(math.log(3)) == pytest.approx(0.75)
    assert dp_reconstruction_bound(1.0, 0.1) == pytest.approx((math.e + 0.1) / (1 + math.e))
    assert dp_reconstruction_bound(1000.0) == 1.0


@pytest.mark.statistical
def test_recovery_falls_with_the_noise() -> None:
    secret = _secret(80, 17)
    curve = reconstruction_vs_noise(
        secret, [0.05 * math.sqrt(80), 0.5 * math.sqrt(80), 80.0], source=InsecureSeededSource(18)
    )
    fractions = [f for _, f in curve]
    # Research note C.1 (m = 4n, uniform error alpha sqrt(n)): 1.00 at alpha = 0.05, about 0.85
    # at 0.5, then chance.
    assert fractions[0] == 1.0
    assert 0.7 < fractions[1] < 1.0
    assert fractions[2] < 0.75


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: exhaustive_reconstruction(subset_sum_oracle([1] * 15), 15), "rows"),
        (lambda: subset_sum_oracle([0, 2, 1]), "secret"),
        (lambda: subset_sum_oracle([]), "secret"),
        (lambda: subset_sum_oracle([0, 1], noise="gaussian"), "noise"),
        (lambda: subset_sum_oracle([0, 1], noise="laplace"), "scale"),
        (lambda: lp_reconstruction(subset_sum_oracle([0, 1]), 2, norm="l2"), "norm"),
        (lambda: lp_reconstruction(subset_sum_oracle([0, 1]), 2, subset_as="list"), "subset_as"),
        (lambda: lp_reconstruction(lambda s: math.nan, 2), "oracle"),
        (lambda: subset_sum_oracle([0, 1])(np.array([0, 5])), "subset"),
        (lambda: subset_sum_oracle([0, 1])(np.array([True])), "subset"),
    ],
)
def test_bad_input_names_the_argument(call: Any, name: str) -> None:
    assert MAX_EXHAUSTIVE_ROWS == 14
    with pytest.raises(InvalidParameterError, match=name):
        call()
