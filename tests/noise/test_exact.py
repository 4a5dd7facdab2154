"""Tests of the exact comparison primitive (src/dpcurator/noise/_exact.py).

The enclosures are checked against mpmath at high precision (an independent oracle); the fast
path is checked to agree with exact comparisons word by word; the lazy uniform is driven with
scripted words.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from noise_stats import ScriptedSource

from dpcurator.noise import InsecureSeededSource, _exact

PREC = 5000  # bits of mpmath working precision: far beyond every enclosure tested here


def mp_exp_neg(x: Fraction) -> mpmath.mpf:
    return mpmath.exp(-mpmath.mpf(x.numerator) / x.denominator)


def floor_ceil(value: Callable[[], mpmath.mpf]) -> tuple[int, int]:
    """Floor and ceiling of a real, at PREC bits: lo <= v <= hi iff lo <= floor and ceil <= hi."""
    with mpmath.workprec(PREC):
        v = value()
        return int(mpmath.floor(v)), int(mpmath.ceil(v))


def exp_neg_scaled_64(g: float) -> tuple[int, int]:
    """Floor and ceiling of exp(-g) * 2**64 for a float g (taken as its exact value)."""
    return floor_ceil(lambda: mpmath.exp(-mpmath.mpf(g)) * mpmath.mpf(2) ** 64)


@pytest.mark.parametrize("bits", [0, 1, 10, 64, 80, 200, 1100])
@pytest.mark.parametrize(
    "x",
    [
        Fraction(0),
        Fraction(1, 10**6),
        Fraction(1, 3),
        Fraction(1, 2),
        Fraction(1),
        Fraction(22, 7),
        Fraction(5.5),
        Fraction(40),
        Fraction(0.1),
        Fraction(745),
        Fraction(10**4, 3),
    ],
)
def test_exp_neg_bounds_enclose_and_are_tight(x: Fraction, bits: int) -> None:
    lo, hi = _exact.exp_neg_bounds(x, bits)
    floor, ceil = floor_ceil(lambda: mp_exp_neg(x) * mpmath.mpf(2) ** bits)
    assert lo <= floor and ceil <= hi
    assert 0 <= hi - lo <= 3


@settings(max_examples=60, deadline=None)
@given(
    num=st.integers(min_value=0, max_value=10**12),
    den=st.integers(min_value=1, max_value=10**9),
    bits=st.integers(min_value=0, max_value=700),
)
def test_exp_neg_bounds_property(num: int, den: int, bits: int) -> None:
    x = Fraction(num, den)
    lo, hi = _exact.exp_neg_bounds(x, bits)
    floor, ceil = floor_ceil(lambda: mp_exp_neg(x) * mpmath.mpf(2) ** bits)
    assert lo <= floor and ceil <= hi
    assert hi - lo <= 3


def test_exp_neg_bounds_rejects_negative() -> None:
    with pytest.raises(AssertionError):
        _exact.exp_neg_bounds(Fraction(-1), 10)


@pytest.mark.parametrize(
    "p", [Fraction(0), Fraction(1, 3), Fraction(2, 7), Fraction(1), Fraction(3, 8)]
)
@pytest.mark.parametrize("bits", [0, 3, 64, 130])
def test_rational_bounds(p: Fraction, bits: int) -> None:
    lo, hi = _exact.rational_bounds(p, bits)
    assert Fraction(lo) <= p * 2**bits <= Fraction(hi)
    assert hi - lo == (0 if (p * 2**bits).denominator == 1 else 1)


@pytest.mark.parametrize("m", [0, 1, 2, 17, 400])
@pytest.mark.parametrize(
    "inv_scale", [Fraction(1, 10), Fraction(3), Fraction(1, 2**30), Fraction(7, 3)]
)
@pytest.mark.parametrize("bits", [8, 64, 300])
def test_dlap_tail_bounds(m: int, inv_scale: Fraction, bits: int) -> None:
    lo, hi = _exact.dlap_tail_bounds(m, inv_scale, bits)

    def exact() -> mpmath.mpf:
        if m == 0:
            return mpmath.mpf(2) ** bits
        return 2 * mp_exp_neg(m * inv_scale) / (1 + mp_exp_neg(inv_scale)) * mpmath.mpf(2) ** bits

    floor, ceil = floor_ceil(exact)
    assert lo <= floor and ceil <= hi
    assert hi - lo <= 3


def test_lazy_uniform_refines_only_while_undecided() -> None:
    third = Fraction(1, 3)
    prefix = (1 << 64) // 3  # floor(2**64 / 3): u in [prefix, prefix + 1) / 2**64 straddles 1/3
    # next word 0: u = (prefix + tiny) / 2**64 < 1/3
    src = ScriptedSource([0])
    u = _exact.LazyUniform(prefix, src)
    assert u.less(_exact.rational_enclosure(third)) is True
    assert src.drawn == 1
    assert u.bits == 128
    # next words prefix, prefix, all ones: still tied twice, then above 1/3
    src = ScriptedSource([prefix, prefix, 2**64 - 1])
    u = _exact.LazyUniform(prefix, src)
    assert u.less(_exact.rational_enclosure(third)) is False
    assert src.drawn == 3
    # a first word far from the threshold needs no more words
    src = ScriptedSource([])
    assert _exact.LazyUniform(0, src).less(_exact.rational_enclosure(third)) is True
    assert src.drawn == 0


def test_lazy_uniform_dyadic_threshold_decides_exactly() -> None:
    # T = 1/2 exactly: u in [2**63, 2**63 + 1) / 2**64 is >= 1/2 without more words
    src = ScriptedSource([])
    assert _exact.slow_less(2**63, _exact.rational_enclosure(Fraction(1, 2)), src) is False
    assert _exact.slow_less(2**63 - 1, _exact.rational_enclosure(Fraction(1, 2)), src) is True
    assert src.drawn == 0


def test_slow_path_near_exp_threshold() -> None:
    gamma = Fraction(1)
    with mpmath.workprec(PREC):
        scaled = mp_exp_neg(gamma) * mpmath.mpf(2) ** 64
        word = int(mpmath.floor(scaled))
        frac = scaled - word  # u < e^-1 iff next word / 2**64 < frac (for the next word alone)
        assert 2**-20 < frac < 1 - 2**-20
        below = int(mpmath.floor(frac * 2**64)) - 5
        above = int(mpmath.floor(frac * 2**64)) + 5
    assert _exact.slow_less(word, _exact.exp_neg_enclosure(gamma), ScriptedSource([below])) is True
    assert _exact.slow_less(word, _exact.exp_neg_enclosure(gamma), ScriptedSource([above])) is False
    # the float fast path must leave this word undecided (it is within 2**-64 of e^-1)
    lo, hi = _exact.exp_band(np.array([1.0]), 0.0)
    _, undecided = _exact.fast_less(_exact.top_bits(np.array([word], dtype=np.uint64)), lo, hi)
    assert undecided.tolist() == [True]


def test_underflow_threshold_is_never_decided_on_a_zero_word() -> None:
    gamma = Fraction(800)  # e^-800 ~ 2**-1154.2
    lo, hi = _exact.exp_band(np.array([800.0]), 0.0)
    top = _exact.top_bits(np.array([0, 1 << 11], dtype=np.uint64))
    less, undecided = _exact.fast_less(top, lo, hi)
    assert undecided.tolist() == [True, False]
    assert less.tolist() == [False, False]
    # After k zero words u lies in [0, 2**(-64 k)): "u < T" is decided once 2**(-64 k) <= T,
    # i.e. k = 19 (2**-1216 < 2**-1154.2), so the first word plus 18 drawn ones.
    src = ScriptedSource([0] * 19 + [1])
    assert _exact.slow_less(0, _exact.exp_neg_enclosure(gamma), src) is True
    assert src.drawn == 18
    # a non-zero word early puts u above the threshold
    src = ScriptedSource([0] * 5 + [2**63])
    assert _exact.slow_less(0, _exact.exp_neg_enclosure(gamma), src) is False
    assert src.drawn == 6


def test_fast_path_agrees_with_exact_comparison() -> None:
    """On random words, every fast-path decision equals the exact comparison (mpmath)."""
    rng_words = InsecureSeededSource(11).words(3000)
    gammas = np.concatenate(
        [np.linspace(0.0, 3.0, 1000), np.linspace(3.0, 60.0, 1000), np.geomspace(1e-9, 1.0, 1000)]
    )
    lo, hi = _exact.exp_band(gammas, 0.0)
    less, undecided = _exact.fast_less(_exact.top_bits(rng_words), lo, hi)
    assert not undecided.any()  # probability of any undecided here is about 3000 * 2**-29
    for w, g, got in zip(rng_words.tolist(), gammas.tolist(), less.tolist(), strict=True):
        floor, _ = exp_neg_scaled_64(g)
        assert got == (w + 1 <= floor), (w, g)


def test_fast_path_decisions_are_sound_with_crafted_words() -> None:
    """Words just below/above a threshold: decided correctly or left undecided, never wrong."""
    gammas = [0.0, 1e-12, 0.3, 1.0, 5.5, 40.0, 699.0, 701.0, 1e5]
    for g in gammas:
        center, ceil = exp_neg_scaled_64(g)
        candidates = {0, 1, 2**64 - 1}
        for delta in (2**40, 2**34, 2**12, 2**11, 1, 0):
            for w in (center - delta, center + delta):
                if 0 <= w < 2**64:
                    candidates.add(w)
        words = np.array(sorted(candidates), dtype=np.uint64)
        lo, hi = _exact.exp_band(np.full(words.size, g), 0.0)
        less, undecided = _exact.fast_less(_exact.top_bits(words), lo, hi)
        for w, got, und in zip(words.tolist(), less.tolist(), undecided.tolist(), strict=True):
            if und:
                continue
            if got:
                assert w + 1 <= center, (g, w)  # u < (w + 1) / 2**64 <= T
            else:
                assert w >= ceil, (g, w)  # u >= w / 2**64 >= T


def test_exp_band_unusable_error_and_nan_go_to_the_slow_path() -> None:
    lo, hi = _exact.exp_band(np.array([1.0, math.nan, 2.0]), np.array([0.0, 0.0, 1.0]))
    assert lo[1] == 0.0 and hi[1] == math.inf
    assert lo[2] == 0.0 and hi[2] == math.inf
    less, undecided = _exact.fast_less(np.array([0.0, 0.0, 0.0]), lo, hi)
    assert undecided.tolist() == [False, True, True]
    assert bool(less[0])


def test_fast_less_threshold_at_least_one_is_always_below() -> None:
    top = _exact.top_bits(np.array([0, 2**64 - 1], dtype=np.uint64))
    less, undecided = _exact.fast_less(top, 2.0**53, 2.0**53 * 1.5)
    assert less.tolist() == [True, True]
    assert not undecided.any()


def test_band_constant_is_used_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    lo1, hi1 = _exact.exp_band(np.array([1.0]), 0.0)
    monkeypatch.setattr(_exact, "_BAND", 2.0**-4)
    lo2, hi2 = _exact.exp_band(np.array([1.0]), 0.0)
    assert lo2[0] < lo1[0] < hi1[0] < hi2[0]
    assert hi2[0] / lo2[0] > 1.1


def test_numpy_exp_error_is_far_inside_the_float_slack() -> None:
    """The fast path assumes float64 exp within a few ulps; _FLOAT_SLACK (2**-40) covers it.

    Checked on this platform's vectorised numpy exp (the code path the samplers use) against
    mpmath, over the exponent range of the fast path.
    """
    x = np.concatenate([np.linspace(0.0, 700.0, 20_000), np.geomspace(1e-12, 1.0, 2000)])
    values = np.exp(-x)
    worst = 0.0
    with mpmath.workprec(120):
        for xi, vi in zip(x[::7].tolist(), values[::7].tolist(), strict=True):
            exact = mpmath.exp(-mpmath.mpf(xi))
            worst = max(worst, float(abs(mpmath.mpf(vi) / exact - 1)))
    assert worst < 2.0**-50
    assert worst < _exact._FLOAT_SLACK / 1000
