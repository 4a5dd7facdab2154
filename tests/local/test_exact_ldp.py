"""Exact local-DP check of every protocol on small domains, and its empirical counterpart.

For each protocol, every possible report ``y`` is enumerated (for OLH: every ``y`` for each of a
sample of hash seeds, since a report's probability factorises as ``P[seed] P[y | H_seed(v)]``),
``P[y | v]`` is computed exactly (rationals) from the probabilities the class itself uses, and

- each conditional distribution sums to exactly 1;
- ``max_{y, v, v'} P[y | v] / P[y | v'] <= e^eps`` (up to ``1e-12``) and is attained (tight);
- the privacy event never reports less than that ratio.

Then the implementation is checked to follow those probabilities: simulated reports are
tabulated and compared with a chi-square test (seeded), with a negative control (the
probabilities of a different epsilon) that must be rejected.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcurator.accounting import BasicAccountant
from dpcurator.local._binary import BinaryRandomizedResponse
from dpcurator.local._grr import GeneralizedRandomizedResponse
from dpcurator.local._hadamard import HadamardResponse
from dpcurator.local._olh import SEED_COUNT, OptimizedLocalHashing
from dpcurator.local._protocol import FrequencyOracle
from dpcurator.local._unary import OptimizedUnaryEncoding, SymmetricUnaryEncoding
from dpcurator.noise import InsecureSeededSource, uniform_integers

EPSILONS = [0.5, 1.0, 2.5]
DOMAINS = [2, 3, 5]
SEEDS = uniform_integers(SEED_COUNT, 40, source=InsecureSeededSource(2024)).tolist()


def _cases() -> list[tuple[str, Callable[[], FrequencyOracle]]]:
    cases: list[tuple[str, Callable[[], FrequencyOracle]]] = [
        ("binary-coin", BinaryRandomizedResponse.coin),
        ("binary-die", BinaryRandomizedResponse.die),
    ]
    for eps in EPSILONS:
        cases.append((f"binary-{eps}", lambda eps=eps: BinaryRandomizedResponse(eps)))
        for d in DOMAINS:
            cases += [
                (f"grr-{eps}-{d}", lambda eps=eps, d=d: GeneralizedRandomizedResponse(eps, d)),
                (f"sue-{eps}-{d}", lambda eps=eps, d=d: SymmetricUnaryEncoding(eps, d)),
                (f"oue-{eps}-{d}", lambda eps=eps, d=d: OptimizedUnaryEncoding(eps, d)),
                (f"olh-{eps}-{d}", lambda eps=eps, d=d: OptimizedLocalHashing(eps, d)),
                (f"blh-{eps}-{d}", lambda eps=eps, d=d: OptimizedLocalHashing(eps, d, g=2)),
                (f"lh3-{eps}-{d}", lambda eps=eps, d=d: OptimizedLocalHashing(eps, d, g=3)),
                (f"hr-{eps}-{d}", lambda eps=eps, d=d: HadamardResponse(eps, d)),
            ]
    # a huge epsilon: the 2**-52 grid caps the achieved epsilon, which the event must report
    cases.append(("grr-60-3", lambda: GeneralizedRandomizedResponse(60.0, 3)))
    cases.append(("oue-60-3", lambda: OptimizedUnaryEncoding(60.0, 3)))
    return cases


CASES = _cases()


def _outputs(protocol: FrequencyOracle) -> list[list[Any]]:
    """Groups of reports whose probabilities sum to the same constant for every input."""
    if isinstance(protocol, OptimizedLocalHashing):
        return [[(seed, y) for y in range(protocol.g)] for seed in SEEDS]
    if isinstance(protocol, SymmetricUnaryEncoding | OptimizedUnaryEncoding):
        return [list(itertools.product((0, 1), repeat=protocol.domain_size))]
    if isinstance(protocol, HadamardResponse):
        return [list(range(protocol.K))]
    return [list(range(protocol.domain_size))]


def _probability(protocol: FrequencyOracle, report: Any, value: int) -> Fraction:
    out = protocol.report_probability(report, value)  # type: ignore[attr-defined]
    assert isinstance(out, Fraction)
    return out


@pytest.mark.parametrize(("name", "make"), CASES, ids=[c[0] for c in CASES])
def test_probability_ratio_is_exactly_bounded_and_tight(
    name: str, make: Callable[[], FrequencyOracle]
) -> None:
    protocol = make()
    d = protocol.domain_size
    worst = Fraction(0)
    for group in _outputs(protocol):
        table = [[_probability(protocol, y, v) for v in range(d)] for y in group]
        group_mass = Fraction(1, SEED_COUNT) if isinstance(protocol, OptimizedLocalHashing) else 1
        for v in range(d):
            assert sum(row[v] for row in table) == group_mass
        for row in table:
            assert min(row) > 0
            worst = max(worst, max(row) / min(row))
    eps = protocol.epsilon
    log_worst = math.log(worst)
    assert log_worst <= eps * (1 + 1e-12), name
    assert log_worst >= eps * (1 - 1e-9) or eps > 36, name  # tight (the grid caps eps ~ 36)
    event_eps = protocol.event.epsilon  # type: ignore[attr-defined]
    assert log_worst <= event_eps * (1 + 1e-15) + 1e-300, name  # never understated
    assert event_eps <= eps * (1 + 1e-12), name
    assert event_eps == pytest.approx(log_worst, rel=1e-12)


@pytest.mark.parametrize(("name", "make"), CASES[:12], ids=[c[0] for c in CASES[:12]])
def test_repeated_reports_compose(name: str, make: Callable[[], FrequencyOracle]) -> None:
    # A device that sends k reports spends at most k times one report's epsilon (basic
    # composition), and the accountant accepts every protocol's event.
    protocol = make()
    one = BasicAccountant().compose(protocol.event).get_epsilon(0.0)
    assert one == pytest.approx(protocol.epsilon, rel=1e-9)
    five = BasicAccountant().compose(protocol.event, count=5).get_epsilon(0.0)
    assert five == pytest.approx(5 * one, rel=1e-12)


# --------------------------------------------------------------------------------------------
# the implementation follows the stated probabilities

N_REPORTS = 20_000


def _tabulate(protocol: FrequencyOracle, value: int, seed: int) -> tuple[NDArray[Any], Any]:
    """Simulate N reports of ``value``; return observed counts per output class and the reports."""
    values = np.full(N_REPORTS, value)
    source = InsecureSeededSource(seed)
    if isinstance(protocol, OptimizedLocalHashing):
        reports = protocol.privatize(values, source=source)
        hashed = protocol.hash(reports.seeds, values)
        offsets = (reports.values - hashed) % protocol.g  # 0: y = H(v), else uniform
        return np.bincount(offsets, minlength=protocol.g), reports
    if isinstance(protocol, SymmetricUnaryEncoding | OptimizedUnaryEncoding):
        bits = protocol.privatize(values, source=source).astype(np.int64)
        index = bits @ (1 << np.arange(protocol.domain_size - 1, -1, -1))
        return np.bincount(index, minlength=2**protocol.domain_size), bits
    size = protocol.K if isinstance(protocol, HadamardResponse) else protocol.domain_size
    reports = protocol.privatize(values, source=source)
    return np.bincount(reports, minlength=size), reports


def _expected(protocol: FrequencyOracle, value: int) -> NDArray[np.float64]:
    """Probabilities of the output classes of :func:`_tabulate`, from report_probability."""
    if isinstance(protocol, OptimizedLocalHashing):
        p, q = float(protocol.p), float(protocol.q_bucket)
        return np.array([p] + [q] * (protocol.g - 1))
    outputs = _outputs(protocol)[0]
    return np.array([float(_probability(protocol, y, value)) for y in outputs])


STATISTICAL = [
    ("grr", lambda e: GeneralizedRandomizedResponse(e, 5)),
    ("binary", BinaryRandomizedResponse),
    ("sue", lambda e: SymmetricUnaryEncoding(e, 3)),
    ("oue", lambda e: OptimizedUnaryEncoding(e, 3)),
    ("olh", lambda e: OptimizedLocalHashing(e, 5, g=4)),
    ("blh", lambda e: OptimizedLocalHashing(e, 5, g=2)),
    ("hr", lambda e: HadamardResponse(e, 5)),
]


@pytest.mark.statistical
@pytest.mark.parametrize(("name", "make"), STATISTICAL, ids=[s[0] for s in STATISTICAL])
def test_reports_follow_the_stated_probabilities(
    name: str, make: Callable[[float], FrequencyOracle]
) -> None:
    # Chi-square goodness of fit at level 1e-4 per protocol (7 tests: family-wise < 1e-3).
    protocol = make(1.0)
    observed, _ = _tabulate(protocol, 1, seed=31)
    expected = _expected(protocol, 1)
    assert float(expected.sum()) == pytest.approx(1.0, rel=1e-12)
    assert stats.chisquare(observed, expected * N_REPORTS).pvalue > 1e-4, name
    # negative control: the probabilities of the same protocol at epsilon 1.3 are rejected
    wrong = _expected(make(1.3), 1)
    assert stats.chisquare(observed, wrong * N_REPORTS).pvalue < 1e-6, name


@pytest.mark.statistical
def test_coin_and_die_follow_their_probabilities() -> None:
    for protocol, other in (
        (BinaryRandomizedResponse.coin(), BinaryRandomizedResponse.die()),
        (BinaryRandomizedResponse.die(), BinaryRandomizedResponse.coin()),
    ):
        observed, _ = _tabulate(protocol, 1, seed=32)
        assert stats.chisquare(observed, _expected(protocol, 1) * N_REPORTS).pvalue > 1e-4
        assert stats.chisquare(observed, _expected(other, 1) * N_REPORTS).pvalue < 1e-6


@pytest.mark.statistical
def test_tight_audit_events() -> None:
    # Research note B.6: the distinguishing events of LDP-Auditor reach e^eps from below.
    # GRR: S = {y = v1}; OUE: S = {bit v1 = 1, bit v2 = 0}; OLH: S = {y = H(v1)} among reports
    # whose hash has H(v1) != H(v2). Clopper-Pearson bounds (1e-4 each side) on the two
    # probabilities must bracket the exact ratio (e^eps up to the 2**-40 rounding), and the
    # lower bound must get close to e^eps (the events are tight).
    eps, n = 1.0, 40_000
    alpha = 1e-4
    v1, v2 = 0, 1

    def bounds(k: int, trials: int) -> tuple[float, float]:
        ci = stats.binomtest(k, trials).proportion_ci(1 - 2 * alpha, method="exact")
        return float(ci.low), float(ci.high)

    results: list[tuple[tuple[int, int], tuple[int, int], Fraction]] = []
    grr = GeneralizedRandomizedResponse(eps, 4)
    k = [
        int(np.sum(grr.privatize(np.full(n, v), source=InsecureSeededSource(40 + v)) == v1))
        for v in (v1, v2)
    ]
    results.append(((k[0], n), (k[1], n), grr.p / grr.q))
    oue = OptimizedUnaryEncoding(eps, 4)
    k = []
    for v in (v1, v2):
        bits = oue.privatize(np.full(n, v), source=InsecureSeededSource(50 + v))
        k.append(int(np.sum(bits[:, v1] & ~bits[:, v2])))
    results.append(((k[0], n), (k[1], n), oue.p * (1 - oue.q) / ((1 - oue.p) * oue.q)))
    olh = OptimizedLocalHashing(eps, 4)
    counts = []
    for v in (v1, v2):
        reports = olh.privatize(np.full(n, v), source=InsecureSeededSource(60 + v))
        h1 = olh.hash(reports.seeds, np.full(n, v1))
        separated = h1 != olh.hash(reports.seeds, np.full(n, v2))
        counts.append(
            (int(np.sum(reports.values[separated] == h1[separated])), int(separated.sum()))
        )
    results.append((counts[0], counts[1], olh.p / olh.q_bucket))
    for first, second, ratio in results:
        lo1, hi1 = bounds(*first)
        lo2, hi2 = bounds(*second)
        assert lo1 / hi2 <= float(ratio) <= hi1 / lo2
        assert float(ratio) == pytest.approx(math.exp(eps), rel=1e-9)
        assert lo1 / hi2 > math.exp(eps) / 1.25
