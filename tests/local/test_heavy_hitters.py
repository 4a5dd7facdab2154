"""Heavy hitters over large domains with the prefix extending method (PEM) and OLH."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._hashing import universal_hash
from dpcurator.local._heavy_hitters import _LocalHashing, heavy_hitters
from dpcurator.noise import InsecureSeededSource

BITS = 20
SUPPORT = 500


def _zipf_population(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Zipf(1.2) over 500 values scattered in [0, 2^20); returns values and the true top 10."""
    rng = np.random.default_rng(seed)  # the population, not privacy noise
    pmf = 1.0 / np.arange(1, SUPPORT + 1) ** 1.2
    pmf /= pmf.sum()
    ids = rng.choice(2**BITS, size=SUPPORT, replace=False)
    values = ids[rng.choice(SUPPORT, size=n, p=pmf)]
    uniq, counts = np.unique(values, return_counts=True)
    return values, uniq[np.argsort(-counts, kind="stable")][:10]


@pytest.mark.statistical
def test_recovers_the_top_of_a_zipf_population() -> None:
    """200 000 devices, eps = 2, 2^20 domain, k = 10, three populations: the top 5 values are
    always found and at least 8 of the top 10 (the 10th and 11th differ by ~10 %, within the
    noise). Negative control: at eps = 0.25 the top 5 are not all found."""
    for seed in range(3):
        values, top = _zipf_population(200_000, seed)
        found = heavy_hitters(
            values, epsilon=2.0, bits=BITS, k=10, source=InsecureSeededSource(seed)
        )
        assert set(top[:5].tolist()) <= set(found.values.tolist())
        assert len(set(top.tolist()) & set(found.values.tolist())) >= 8
        assert found.prefix_bits == (8, 12, 16, 20)
        assert found.group_sizes.sum() == 200_000
    values, top = _zipf_population(200_000, 0)
    weak = heavy_hitters(values, epsilon=0.25, bits=BITS, k=10, source=InsecureSeededSource(0))
    assert not set(top[:5].tolist()) <= set(weak.values.tolist())


@pytest.mark.statistical
def test_reported_intervals_cover_the_true_counts() -> None:
    """Across 4 populations x 10 values found, 95 % intervals (OLH noise + group sampling)
    cover the true counts at least at the binomial(40, 0.95) 0.1 % quantile; intervals from
    the OLH noise of the group alone, without the n / n_t scaling, fail (negative control)."""
    covered = covered_unscaled = total = 0
    for seed in range(4):
        values, _ = _zipf_population(200_000, 10 + seed)
        found = heavy_hitters(
            values, epsilon=2.0, bits=BITS, k=10, source=InsecureSeededSource(50 + seed)
        )
        truth = np.array([np.count_nonzero(values == v) for v in found.values])
        err = np.abs(found.estimate.counts - truth)
        groups = len(found.prefix_bits)
        covered += int((err <= 1.96 * found.estimate.std).sum())
        covered_unscaled += int((err <= 1.96 * found.estimate.std / groups).sum())
        total += truth.size
    threshold = stats.binom.ppf(1e-3, total, 0.95)
    assert covered >= threshold
    assert covered_unscaled < threshold


def test_olh_client_is_exactly_epsilon_ldp() -> None:
    """Given the device's hash, P[y | v] = p if y = H(v), else (1 - p)/(g - 1): the worst ratio
    is p (g - 1)/(1 - p) = e^achieved <= e^eps, with p a rational multiple of 2^-52."""
    for eps in (0.5, 1.0, 2.0, 5.0):
        oracle = _LocalHashing(eps)
        assert oracle.g == max(2, round(math.exp(eps) + 1))
        assert oracle.p.denominator <= 2**52
        assert oracle.p <= Fraction(math.exp(eps) / (math.exp(eps) + oracle.g - 1)) * (1 + 2**-40)
        ratio = oracle.p * (oracle.g - 1) / (1 - oracle.p)
        assert math.log(ratio) <= oracle.epsilon <= eps + 1e-12
        assert oracle.epsilon == pytest.approx(eps, rel=1e-9)


@pytest.mark.statistical
def test_olh_client_distribution() -> None:
    """100 000 reports of one key: y = H_i(v) for a fraction p (binomial z-test, 4.5 sigma); the
    other reports are uniform over the g - 1 other buckets (chi-square, df = g - 2)."""
    oracle = _LocalHashing(2.0)
    n = 100_000
    seeds, ys = oracle.privatize(np.full(n, 12345, dtype=np.uint64), InsecureSeededSource(3))
    hashed = universal_hash(np.full(n, 12345, dtype=np.uint64), seeds, oracle.g)
    hit = ys == hashed
    p = float(oracle.p)
    assert abs(hit.mean() - p) < 4.5 * math.sqrt(p * (1 - p) / n)
    assert abs(hit.mean() - 1 / oracle.g) > 4.5 * math.sqrt(p * (1 - p) / n)  # control
    offset = (ys[~hit] - hashed[~hit] - 1) % oracle.g  # 0..g-2 for the other buckets
    assert stats.chisquare(np.bincount(offset, minlength=oracle.g - 1)).pvalue > 1e-4


def test_event_and_structure() -> None:
    values = np.repeat([3, 900, 77], [500, 300, 200])
    found = heavy_hitters(values, epsilon=1.5, bits=10, k=2, source=InsecureSeededSource(1))
    assert isinstance(found.event, PureDPEvent)
    assert found.event.epsilon <= 1.5
    assert found.event.epsilon == pytest.approx(1.5, rel=1e-9)
    assert found.prefix_bits == (5, 9, 10)  # gamma = 1, eta = 4, capped at b = 10
    assert found.values.shape == found.estimate.counts.shape == (2,)
    assert found.estimate.n == 1000
    assert (np.diff(found.estimate.counts) <= 0).all()  # largest first
    wide = heavy_hitters(
        values, epsilon=1.5, bits=10, k=1, extension_bits=10, source=InsecureSeededSource(1)
    )
    assert wide.prefix_bits == (10,)  # one group: plain OLH over the whole domain


@pytest.mark.statistical
def test_short_strings_encoded_as_integers() -> None:
    """Three-letter words as 24-bit integers (prefix = string prefix): the two frequent words
    are found among 40 000 devices at eps = 3, and decode back to the strings."""
    words = (
        ["the"] * 12_000 + ["and"] * 8_000 + [f"{a}{b}x" for a in "klmnop" for b in "qrs"] * 1111
    )

    def encode(word: str) -> int:
        return int.from_bytes(word.encode().ljust(3, b"\0"), "big")

    values = np.array([encode(w) for w in words])
    found = heavy_hitters(values, epsilon=3.0, bits=24, k=2, source=InsecureSeededSource(4))
    decoded = {int(v).to_bytes(3, "big").rstrip(b"\0").decode() for v in found.values}
    assert decoded == {"the", "and"}


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": 25.0}, "epsilon"),
        ({"bits": 0}, "bits"),
        ({"bits": 63}, "bits"),
        ({"k": 0}, "k"),
        ({"bits": 3, "k": 9}, "k"),
        ({"extension_bits": 0}, "extension_bits"),
        ({"extension_bits": 17}, "extension_bits"),
        ({"beam_width": 1, "k": 2}, "beam_width"),
        ({"values": [0, 2**12]}, "values"),
        ({"values": [0.5]}, "values"),
        ({"values": [1, 2, 3]}, "values"),  # fewer devices than groups need
        ({"source": 3}, "source"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs: dict[str, object], name: str) -> None:
    call: dict[str, object] = {"epsilon": 1.0, "bits": 12, "k": 2, "values": np.arange(100)}
    call.update(kwargs)
    values = call.pop("values")
    with pytest.raises(InvalidParameterError) as err:
        heavy_hitters(values, **call)  # type: ignore[arg-type]
    assert err.value.name == name
