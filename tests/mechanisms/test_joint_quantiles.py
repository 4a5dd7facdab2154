"""Joint quantiles (JointExp on a grid, issue 14): exact law, privacy, sorted outputs, refusals.

The law is checked exactly against brute-force enumeration of every sorted tuple of points on
tiny inputs (the dynamic programme's per-step probabilities multiplied out), the draws against
it by chi-square at a fixed seed, and privacy exactly (every tuple's log-probability ratio on
neighbouring data sets) and empirically (a Clopper-Pearson audit of seeded draws); each with a
negative control that must fail.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats
from scipy.special import logsumexp

from dpcurator.accounting import PureDPEvent
from dpcurator.errors import DPError, InvalidParameterError
from dpcurator.mechanisms._joint_quantiles import (
    _categorical,
    _forward,
    _multiset,
    _widths,
    joint_quantile_error_bound,
    joint_quantile_mechanism,
    joint_quantile_sensitivity,
)
from dpcurator.noise import InsecureSeededSource
from tests.privacy_check import Event, audit

LEVEL = 1e-4  # chi-square goodness-of-fit level

Law = dict[tuple[int, ...], float]

CASES = [
    # lengths, ranks, levels, epsilon, total
    ([2, 1, 3, 1], [0, 1, 3, 4], [0.3, 0.5, 0.8], 2.0, 4),
    ([1, 2, 1], [0, 2, 5], [0.1, 0.9], 0.7, 6),
    ([3], [0], [0.5, 0.6], 1.0, 0),
    ([1, 1, 1, 1, 1], [0, 1, 1, 2, 7], [0.2, 0.4, 0.6, 0.8], 3.0, 7),
    ([4, 1], [0, 3], [0.5], 1.0, 3),
    ([2, 2, 2], [0, 1, 2], [0.0, 1.0], 1.5, 2),
]


def _brute_force(
    lengths: list[int],
    ranks: list[int],
    levels: list[float],
    epsilon: float,
    total: int,
    *,
    sensitivity: float | None = None,
) -> Law:
    """Enumerate every sorted tuple of points: ``P[o] ∝ exp(epsilon u(o) / (2 Delta))``."""
    delta = joint_quantile_sensitivity(levels) if sensitivity is None else sensitivity
    points = [r for run, length in enumerate(lengths) for r in [ranks[run]] * length]
    qs = [0.0, *levels, 1.0]
    logs = {}
    for o in itertools.combinations_with_replacement(range(len(points)), len(levels)):
        rank = [0, *(points[i] for i in o), total]
        u = -0.5 * sum(
            abs(rank[j] - rank[j - 1] - (qs[j] - qs[j - 1]) * total) for j in range(1, len(qs))
        )
        logs[o] = epsilon * u / (2 * delta)
    z = logsumexp(list(logs.values()))
    return {o: math.exp(v - z) for o, v in logs.items()}


def _sampler_law(
    lengths: list[int], ranks: list[int], levels: list[float], epsilon: float, total: int
) -> Law:
    """The law the sampler draws from: its backward steps' probabilities, multiplied out."""
    runs, rank = np.array(lengths), np.array(ranks, dtype=np.float64)
    targets = [float(w * total) for w in _widths(levels)]
    half = epsilon / (4 * joint_quantile_sensitivity(levels))
    alpha = _forward(np.log(runs.astype(np.float64)), rank, targets, runs, half)
    m = len(levels)
    last = alpha[-1] - half * np.abs(total - rank - targets[m])
    starts = np.concatenate([[0], np.cumsum(runs)[:-1]])
    law: Law = {}
    for assignment in itertools.combinations_with_replacement(range(len(lengths)), m):
        ks = [assignment[: j + 1].count(assignment[j]) - 1 for j in range(m)]
        log_p = last[ks[-1], assignment[-1]] - logsumexp(last)
        for j in range(m - 1, 0, -1):
            if ks[j] == 0:
                r = assignment[j]
                step = alpha[j - 1][:, :r] - half * np.abs(rank[r] - rank[:r] - targets[j])
                log_p += step[ks[j - 1], assignment[j - 1]] - logsumexp(step)
        shared = Counter(assignment)
        placements = [
            list(itertools.combinations_with_replacement(range(lengths[r]), shared[r]))
            for r in sorted(shared)
        ]
        each = math.exp(log_p) / math.prod(len(p) for p in placements)
        for combo in itertools.product(*placements):
            o = tuple(
                int(starts[r]) + x
                for r, part in zip(sorted(shared), combo, strict=True)
                for x in part
            )
            law[o] = law.get(o, 0.0) + each
    return law


@pytest.mark.parametrize(("lengths", "ranks", "levels", "epsilon", "total"), CASES)
def test_the_dynamic_programme_is_the_joint_law_exactly(
    lengths: list[int], ranks: list[int], levels: list[float], epsilon: float, total: int
) -> None:
    truth = _brute_force(lengths, ranks, levels, epsilon, total)
    law = _sampler_law(lengths, ranks, levels, epsilon, total)
    assert set(law) == set(truth)
    assert max(abs(law[o] - truth[o]) for o in truth) < 1e-12
    # Negative control: placements counted as l**k (ordered tuples), not C(l + k - 1, k).
    wrong = {o: p for o, p in truth.items()}
    for o in wrong:
        wrong[o] *= math.prod(math.factorial(c) for c in Counter(o).values())
    z = sum(wrong.values())
    if any(c > 1 for o in truth for c in Counter(o).values()):
        assert max(abs(law[o] - wrong[o] / z) for o in truth) > 1e-3


def test_one_level_is_smiths_mechanism() -> None:
    """With one level the law is ``exp(epsilon (-|rank - q n|) / (2 max(q, 1 - q)))``."""
    lengths, ranks, q, eps = [2, 3, 1, 4], [0, 2, 3, 6], 0.3, 1.3
    law = _brute_force(lengths, ranks, [q], eps, 6)
    points = np.repeat(np.array(ranks, dtype=np.float64), lengths)
    w = np.exp(eps * -np.abs(points - q * 6) / (2 * max(q, 1 - q)))
    assert np.allclose([law[(i,)] for i in range(points.size)], w / w.sum(), rtol=1e-12)


def _counts(draws: list[tuple[int, ...]], outcomes: list[tuple[int, ...]]) -> NDArray[np.int64]:
    seen = Counter(draws)
    assert set(seen) <= set(outcomes)
    return np.array([seen.get(o, 0) for o in outcomes])


@pytest.mark.statistical
def test_draws_follow_the_joint_law() -> None:
    lengths, ranks, levels, eps, total = [2, 1, 2], [0, 1, 3], [0.3, 0.7], 2.0, 3
    truth = _brute_force(lengths, ranks, levels, eps, total)
    outcomes = sorted(truth)
    source, size = InsecureSeededSource(5), 4000
    sens = joint_quantile_sensitivity(levels)
    draws = [
        joint_quantile_mechanism(
            lengths, ranks, levels, epsilon=eps, sensitivity=sens, total=total, source=source
        ).value
        for _ in range(size)
    ]
    counts = _counts(draws, outcomes)
    expected = np.array([truth[o] for o in outcomes]) * size
    assert stats.chisquare(counts, expected).pvalue > LEVEL
    # Negative control: the law of a mechanism 40 % less private is rejected.
    loose = _brute_force(lengths, ranks, levels, 1.4 * eps, total)
    assert stats.chisquare(counts, np.array([loose[o] for o in outcomes]) * size).pvalue < LEVEL


@pytest.mark.statistical
def test_categorical_draws_are_exact_given_their_log_weights() -> None:
    log_weights = np.array([0.0, -0.5, -np.inf, -3.2, -0.01, -12.0, 1.7, -np.inf])
    source, size = InsecureSeededSource(2), 12_000
    draws = np.array([_categorical(log_weights, source) for _ in range(size)])
    assert not np.isin(draws, [2, 7]).any()  # -inf: never
    finite = np.isfinite(log_weights)
    law = np.exp(log_weights[finite] - logsumexp(log_weights[finite]))
    counts = np.bincount(draws, minlength=log_weights.size)[finite]
    keep = law * size > 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(law[keep], law[~keep].sum()) * size
    assert stats.chisquare(observed, expected).pvalue > LEVEL
    # Negative control: weights tempered by 10 % are rejected.
    tempered = np.exp(0.9 * log_weights[finite] - logsumexp(0.9 * log_weights[finite]))
    wrong = np.append(tempered[keep], tempered[~keep].sum()) * size
    assert stats.chisquare(observed, wrong).pvalue < LEVEL


@pytest.mark.statistical
def test_multisets_are_uniform() -> None:
    source, size = InsecureSeededSource(4), 12_000
    draws = [tuple(_multiset(4, 3, source)) for _ in range(size)]
    outcomes = list(itertools.combinations_with_replacement(range(4), 3))  # C(6, 3) = 20
    counts = _counts(draws, outcomes)
    assert stats.chisquare(counts).pvalue > LEVEL
    # Negative control: sorted independent uniform points are not uniform over multisets.
    independent = [
        math.prod(range(1, 4)) / math.prod(math.factorial(c) for c in Counter(o).values())
        for o in outcomes
    ]
    expected = np.array(independent) / sum(independent) * size
    assert stats.chisquare(counts, expected).pvalue < LEVEL


# -- privacy ------------------------------------------------------------------------------------
def _runs_of(values: list[int], points: int) -> tuple[list[int], list[int]]:
    """Runs of the grid ``0 .. points - 1`` for data values at grid buckets ``values``.

    Point ``p`` has the values in buckets ``< p`` below it; runs break after non-empty buckets.
    """
    ranks = [sum(v < p for v in values) for p in range(points)]
    lengths, run_ranks = [], []
    for rank in ranks:
        if run_ranks and run_ranks[-1] == rank:
            lengths[-1] += 1
        else:
            lengths.append(1)
            run_ranks.append(rank)
    return lengths, run_ranks


def test_every_tuple_is_epsilon_close_on_neighbouring_data() -> None:
    """Add/remove of one value (and of a unit of 2): every tuple's log-ratio is within epsilon."""
    levels, eps, points = [0.25, 0.5, 0.75], 1.0, 6
    base = [0, 1, 1, 3, 4]
    for rows in (1, 2):
        sens = joint_quantile_sensitivity(levels, rows=rows)
        worst = 0.0
        for added in itertools.combinations_with_replacement(range(points), rows):
            laws = []
            for values in (base, [*base, *added]):
                lengths, ranks = _runs_of(values, points)
                laws.append(
                    _brute_force(lengths, ranks, levels, eps, len(values), sensitivity=sens)
                )
            worst = max(worst, *(abs(math.log(laws[0][o] / laws[1][o])) for o in laws[0]))
        assert worst <= eps * (1 + 1e-12)
        # Negative control: a sensitivity 60 % too small breaks the guarantee.
        lengths, ranks = _runs_of(base, points)
        tight = 0.4 * sens
        gaps = []
        for added in itertools.combinations_with_replacement(range(points), rows):
            other = _runs_of([*base, *added], points)
            a = _brute_force(lengths, ranks, levels, eps, len(base), sensitivity=tight)
            b = _brute_force(*other, levels, eps, len(base) + rows, sensitivity=tight)
            gaps.append(max(abs(math.log(a[o] / b[o])) for o in a))
        assert max(gaps) > eps


@pytest.mark.statistical
def test_empirical_privacy_on_neighbouring_data() -> None:
    """A Clopper-Pearson audit of draws on neighbours stays below epsilon; a broken one fails."""
    levels, eps, points = [0.25, 0.75], 2.0, 8
    base = [1, 2, 2, 3, 5, 6]
    neighbour = [*base, 7, 7]  # one unit of two rows
    sens = joint_quantile_sensitivity(levels, rows=2)
    events = [Event(f"low<{t}", lambda y, t=t: y[:, 0] < t) for t in range(1, points)]
    events += [Event(f"high>={t}", lambda y, t=t: y[:, 1] >= t) for t in range(1, points)]

    def draw(values: list[int], sensitivity: float, seed: int, size: int) -> NDArray[np.int64]:
        lengths, ranks = _runs_of(values, points)
        source = InsecureSeededSource(seed)
        return np.array(
            [
                joint_quantile_mechanism(
                    lengths,
                    ranks,
                    levels,
                    epsilon=eps,
                    sensitivity=sensitivity,
                    total=len(values),
                    source=source,
                ).value
                for _ in range(size)
            ]
        )

    result = audit(draw(base, sens, 1, 1500), draw(neighbour, sens, 2, 1500), events, alpha=1e-3)
    assert result.epsilon_lower_bound <= eps, result
    assert result.epsilon_lower_bound > 0.3, result  # the audit has power
    # Negative control: the sensitivity of one row for a unit of two.
    thin = joint_quantile_sensitivity(levels, rows=1) / 3
    broken = draw(base, thin, 3, 1500), draw(neighbour, thin, 4, 1500)
    assert audit(*broken, events, alpha=1e-3).epsilon_lower_bound > eps


# -- outputs, bounds and refusals ----------------------------------------------------------------
def test_outputs_are_sorted_points_and_the_event_is_the_whole_charge() -> None:
    rng = np.random.default_rng(0)
    source = InsecureSeededSource(6)
    for _ in range(40):
        runs = int(rng.integers(1, 30))
        lengths = rng.integers(1, 50, runs)
        ranks = np.concatenate([[0], np.cumsum(rng.integers(0, 4, runs - 1))])
        m = int(rng.integers(1, 6))
        levels = sorted(set(np.round(rng.uniform(0, 1, m), 3).tolist()))
        eps = float(rng.choice([0.01, 1.0, 50.0]))
        release = joint_quantile_mechanism(
            lengths,
            ranks,
            levels,
            epsilon=eps,
            sensitivity=joint_quantile_sensitivity(levels),
            source=source,
        )
        value = release.value
        assert len(value) == len(levels)
        assert list(value) == sorted(value)
        assert value[0] >= 0 and value[-1] < int(lengths.sum())
        assert release.event == PureDPEvent(epsilon=eps)


def test_sensitivity_and_error_bound() -> None:
    assert joint_quantile_sensitivity([0.5]) == 0.5
    assert joint_quantile_sensitivity([0.1, 0.9], rows=4) == pytest.approx(3.6)
    assert joint_quantile_sensitivity([0.0, 1.0]) == 1.0
    # One level: the single-quantile bound (2 Delta / epsilon) ln(P / beta).
    one = joint_quantile_error_bound(1025, 1, epsilon=1.0, sensitivity=0.5, beta=0.05)
    assert one == pytest.approx(math.log(1025 / 0.05), rel=1e-4)
    three = joint_quantile_error_bound(1025, 3, epsilon=1.0, sensitivity=0.75, beta=0.05)
    tuples = math.comb(1025 + 2, 3)
    assert three == pytest.approx(1.5 * (math.log(tuples) + math.log(20)), rel=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"levels": [0.5, 0.5]}, "levels"),
        ({"levels": [0.7, 0.2]}, "levels"),
        ({"levels": [1.2]}, "levels"),
        ({"levels": []}, "levels"),
        ({"ranks": [2, 1]}, "ranks"),
        ({"ranks": [0, 5], "total": 3}, "ranks"),
        ({"lengths": [0, 2]}, "lengths"),
        ({"lengths": [1.5, 2.0]}, "lengths"),
        ({"lengths": [1]}, "lengths"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": math.inf}, "epsilon"),
        ({"sensitivity": -1.0}, "sensitivity"),
    ],
)
def test_refusals(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {
        "lengths": [2, 3],
        "ranks": [0, 2],
        "levels": [0.25, 0.75],
        "epsilon": 1.0,
        "sensitivity": 0.75,
    }
    args.update(kwargs)
    with pytest.raises(InvalidParameterError) as raised:
        joint_quantile_mechanism(**args)  # type: ignore[arg-type]
    assert isinstance(raised.value, DPError)
    assert raised.value.name == field
