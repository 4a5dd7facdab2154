"""Bernoulli batches by exact block inversion (``dpcurator.noise._block``).

Significance: every statistical test uses ALPHA = 1e-4 (fixed seeds, so deterministic) and is
paired with a negative control, the same test against a wrong law, that must reject.
"""

from __future__ import annotations

import bisect
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcurator.noise import InsecureSeededSource, RandomSource, _block, bernoulli
from dpcurator.noise._samplers import _BLOCK_PATH_MIN

ALPHA = 1e-4
E_RATIO = Fraction(1) / (Fraction(2.718281828459045) + 1)  # 0.2689..., the unary-encoding q


class CountingSource(RandomSource):
    """A seeded source that counts the words it hands out."""

    def __init__(self, seed: int) -> None:
        self._inner = InsecureSeededSource(seed)
        self.count = 0

    @property
    def secure(self) -> bool:
        return False

    def words(self, n: int) -> NDArray[np.uint64]:
        self.count += n
        return self._inner.words(n)


class CallScriptedSource(RandomSource):
    """Returns scripted arrays for the first calls (one array per call), then seeded words."""

    def __init__(self, script: list[NDArray[np.uint64]], seed: int) -> None:
        self._script = list(script)
        self._rest = InsecureSeededSource(seed)

    @property
    def secure(self) -> bool:
        return False

    def words(self, n: int) -> NDArray[np.uint64]:
        if self._script:
            head = self._script.pop(0)
            assert head.size == n
            return head
        return self._rest.words(n)


def _patterns(bits: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Read rows of 8 booleans as integers, draw ``i`` being bit ``i``."""
    weights = 1 << np.arange(8, dtype=np.int64)
    return bits.reshape(-1, 8).astype(np.int64) @ weights


def _product_law(p: float) -> NDArray[np.float64]:
    ones = np.array([x.bit_count() for x in range(256)], dtype=np.float64)
    return np.asarray(p**ones * (1.0 - p) ** (8.0 - ones), dtype=np.float64)


def _chi2_pvalue(patterns: NDArray[np.int64], p: float) -> float:
    observed = np.bincount(patterns, minlength=256)
    expected = _product_law(p) * patterns.size
    return float(stats.chisquare(observed, expected).pvalue)


def _binom_pvalue(hits: int, n: int, p: float) -> float:
    return float(stats.binomtest(hits, n, p).pvalue)


def _shifted(p: Fraction) -> float:
    """A wrong probability for negative controls: p moved by 10 % of min(p, 1 - p)."""
    return float(p + min(p, 1 - p) / 10)


MARGINAL_PS = [
    Fraction(1, 3),
    Fraction(2, 7),
    E_RATIO,
    Fraction(1, 2),
    Fraction(1, 1000),
    Fraction(999, 1000),
]


@pytest.mark.statistical
@pytest.mark.parametrize("p", MARGINAL_PS, ids=str)
def test_marginal_frequency(p: Fraction) -> None:
    # Binomial test at ALPHA; n = 4e6 gives the control shift of 0.1 min(p, 1 - p) at least
    # 6 standard deviations (p = 1/1000: shift 400, sd 63), so the control rejects.
    n = 4_000_003  # not a multiple of 8: the last block is trimmed
    x = bernoulli(p, n, source=InsecureSeededSource(11))
    assert x.shape == (n,) and x.dtype == np.bool_
    hits = int(x.sum())
    assert _binom_pvalue(hits, n, float(p)) > ALPHA
    assert _binom_pvalue(hits, n, _shifted(p)) < ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize("p", [E_RATIO, Fraction(1, 3), Fraction(5, 16)], ids=str)
def test_joint_law_of_eight_consecutive_draws(p: Fraction) -> None:
    # Chi-square over the 256 patterns (smallest expected count ~ 2e6 * 0.2689**8 = 54 >= 20),
    # on aligned blocks and on windows straddling two blocks (offset 4). Control: p * 1.1.
    m = 2_000_000
    x = bernoulli(p, 8 * m + 8, source=InsecureSeededSource(23))
    aligned = _patterns(x[: 8 * m])
    straddling = _patterns(x[4 : 4 + 8 * m])
    for patterns in (aligned, straddling):
        assert _chi2_pvalue(patterns, float(p)) > ALPHA
        assert _chi2_pvalue(patterns, float(p) * 1.1) < ALPHA


@pytest.mark.parametrize(
    ("p", "chunk_bits"),
    [(Fraction(1, 3), 8), (Fraction(5, 16), 8), (Fraction(1, 1000), 8), (E_RATIO, 16)],
    ids=str,
)
def test_table_matches_exact_boundaries(p: Fraction, chunk_bits: int) -> None:
    # Every unambiguous cell [V, V + 1) / 2**k lies in its pattern's interval [B_x, B_{x+1});
    # every ambiguous cell has a boundary strictly inside.
    plan = _block._plan(p, chunk_bits)
    cells = 1 << chunk_bits
    boundaries = [Fraction(0)]
    for x in range(256):
        k = x.bit_count()
        boundaries.append(boundaries[-1] + p**k * (1 - p) ** (8 - k))
    assert boundaries[-1] == 1
    # Integer form: B_j 2**k D (D = the common denominator) against the cell edges V D.
    common = p.denominator**8
    scaled = [int(b * common) << chunk_bits for b in boundaries]
    expansion_to_pattern = {int(e): x for x, e in enumerate(_block._EXPANSION)}
    ambiguous = set(plan.cells.tolist())
    for v in range(cells):
        lo, hi = v * common, (v + 1) * common
        below = bisect.bisect_right(scaled, lo) - 1  # the last boundary <= the lower edge
        inside = scaled[below + 1] < hi  # the next boundary is strictly inside the cell
        if v in ambiguous:
            assert inside
            assert int(plan.table[v]) == _block._AMBIGUOUS
        else:
            assert not inside
            x = expansion_to_pattern[int(plan.table[v])]
            assert x == below
            assert scaled[x] <= lo and hi <= scaled[x + 1]


@pytest.mark.parametrize("p", [Fraction(1, 2), Fraction(3, 4)], ids=str)
def test_dyadic_boundaries_on_cell_edges_need_no_extra_words(p: Fraction) -> None:
    # p = 1/2 and 3/4: every boundary is a multiple of 2**-16, so no cell is ambiguous and a
    # batch reads exactly 16 bits per 8 draws.
    assert _block._plan(p, 16).cells.size == 0
    source = CountingSource(3)
    n = 8 * 4 * 10_000
    x = bernoulli(p, n, source=source)
    assert source.count == n // 32
    assert abs(float(x.mean()) - float(p)) < 0.01


@pytest.mark.statistical
def test_entropy_cost_about_two_bits_per_draw() -> None:
    # 16 bits per block of 8, plus a 64-bit word for each ambiguous cell (probability
    # <= 255 / 2**16): at most 2 + 8 * 255 / 2**16 < 2.04 bits per draw on average.
    source = CountingSource(5)
    n = 8_000_000
    bernoulli(E_RATIO, n, source=source)
    bits_per_draw = 64 * source.count / n
    assert 2.0 < bits_per_draw < 2.04


@pytest.mark.statistical
@pytest.mark.parametrize("p", [Fraction(1, 3), E_RATIO, Fraction(5, 16), Fraction(1, 2)], ids=str)
def test_slow_path_with_coarse_chunks(p: Fraction, monkeypatch: pytest.MonkeyPatch) -> None:
    # With 4-bit chunks (16 cells for 255 boundaries) nearly every block goes through the exact
    # resolution; marginal (binomial) and joint (chi-square) laws must still be exact, with the
    # negative controls of the tests above.
    monkeypatch.setattr(_block, "_CHUNK_BITS", 4)
    resolved = 0
    original = _block._resolve

    def counting_resolve(
        plan: _block._Plan, cell_ids: NDArray[np.int64], source: RandomSource
    ) -> NDArray[np.int64]:
        nonlocal resolved
        resolved += cell_ids.size
        return original(plan, cell_ids, source)

    monkeypatch.setattr(_block, "_resolve", counting_resolve)
    m = 400_000
    x = bernoulli(p, 8 * m, source=InsecureSeededSource(31))
    assert resolved > m // 2  # the slow path really ran
    hits = int(x.sum())
    assert _binom_pvalue(hits, 8 * m, float(p)) > ALPHA
    assert _binom_pvalue(hits, 8 * m, _shifted(p)) < ALPHA
    patterns = _patterns(x)
    assert _chi2_pvalue(patterns, float(p)) > ALPHA
    assert _chi2_pvalue(patterns, float(p) * 1.1) < ALPHA


def _repeat_chunk(v: int, blocks: int) -> NDArray[np.uint64]:
    word = v * (1 + (1 << 16) + (1 << 32) + (1 << 48))
    return np.full(-(-blocks // 4), word, dtype=np.uint64)


@pytest.mark.statistical
def test_word_ties_are_refined_exactly() -> None:
    # p = 1/3, 16-bit chunks: force every block into the ambiguous cell V whose single inner
    # boundary is t, and the next word to W = floor(t 2**64). Given r in [W, W + 1) / 2**64
    # the pattern is `base` with probability f = frac(t 2**64) (r < t), else base + 1; each
    # block needs LazyUniform's further words. Binomial test at ALPHA; control: f + 0.05.
    p = Fraction(1, 3)
    plan = _block._plan(p, 16)
    cell = 1
    (t,) = plan.inner[cell]
    v = int(plan.cells[cell])
    floor_t = (t.numerator << 64) // t.denominator
    f = t * 2**64 - floor_t
    assert 0 < f < 1
    blocks = 20_000
    script = [_repeat_chunk(v, blocks), np.full(blocks, floor_t, dtype=np.uint64)]
    x = bernoulli(p, 8 * blocks, source=CallScriptedSource(script, 7))
    patterns = _patterns(x)
    base = int(plan.base[cell])
    assert set(np.unique(patterns).tolist()) <= {base, base + 1}
    low = int(np.sum(patterns == base))
    assert _binom_pvalue(low, blocks, float(f)) > ALPHA
    assert _binom_pvalue(low, blocks, float(f) + 0.05) < ALPHA


def test_exact_word_tie_on_a_dyadic_boundary() -> None:
    # p = 5/16: boundaries are multiples of 2**-32, so t 2**64 is an integer. W = t 2**64 means
    # r >= t: the pattern must be base + 1, every time (an exact tie, decided exactly).
    p = Fraction(5, 16)
    plan = _block._plan(p, 16)
    cell = 0
    t = plan.inner[cell][0]
    assert (t * 2**64).denominator == 1
    v = int(plan.cells[cell])
    blocks = _BLOCK_PATH_MIN // 8
    script = [_repeat_chunk(v, blocks), np.full(blocks, int(t * 2**64), dtype=np.uint64)]
    x = bernoulli(p, 8 * blocks, source=CallScriptedSource(script, 1))
    patterns = _patterns(x)
    assert (patterns == int(plan.base[cell]) + 1).all()


def test_small_batches_keep_the_nibble_path() -> None:
    # Below the threshold the block table is not used (same words as before this path).
    source = CountingSource(0)
    bernoulli(Fraction(1, 3), _BLOCK_PATH_MIN - 1, source=source)
    assert source.count < 2 * (_BLOCK_PATH_MIN - 1) // 16 + 64
    assert bernoulli(Fraction(1), 10_000).all()
    assert not bernoulli(Fraction(0), 10_000).any()
