"""The inference's work in threads: the same results, to the bit, whatever the threads.

``dpcurator.synth._threads`` cuts large tables into pieces fixed by their size and rows per
thread; the fit's passes (:func:`_normalised`, :func:`_plus_terms`, :func:`_sum_middle`,
``_Map.added``) must equal their plain numpy forms, and a whole fit must give the same model
with one thread as with several.
"""

from __future__ import annotations

import itertools
import math
import threading

import numpy as np
import pytest

from dpcurator.errors import InvalidParameterError
from dpcurator.synth import Marginal, fit_model
from dpcurator.synth._model import _Map, _normalised, _plus_terms, _sum_middle
from dpcurator.synth._threads import PIECE, in_pieces, in_rows, limited, threads
from tests.synth.conftest import noisy_marginals

SIZES = (8, 8, 8, 8, 8, 8)  # 262,144 cells: above the least handed to threads


def _measurements(seed: int) -> list[Marginal]:
    """Noisy 3-way marginals of a random table over ``SIZES`` (their tree: one large clique)."""
    return noisy_marginals(SIZES, list(itertools.combinations(range(len(SIZES)), 3)), 2_000, seed)


def test_a_fit_is_the_same_to_the_bit_with_one_thread_or_several() -> None:
    measurements = _measurements(0)
    fits = []
    for count in (1, 2, 3):
        with limited(count):
            fits.append(fit_model(SIZES, measurements, iterations=12, start="uniform"))
    assert fits[0].tree.size == math.prod(SIZES)  # one clique: every pass is threaded
    for other in fits[1:]:
        assert other.loss == fits[0].loss
        assert other.iterations == fits[0].iterations
        for a, b in zip(fits[0].marginals, other.marginals, strict=True):
            np.testing.assert_array_equal(a, b)


def test_fits_in_several_threads_at_once_share_the_pool() -> None:
    """Two sessions fitting at the same time (a service) get the same models as one by one."""
    from concurrent.futures import ThreadPoolExecutor

    inputs = [_measurements(5), _measurements(6)]
    alone = [fit_model(SIZES, m, iterations=6, start="uniform").loss for m in inputs]
    with ThreadPoolExecutor(2) as callers:
        together = list(
            callers.map(lambda m: fit_model(SIZES, m, iterations=6, start="uniform").loss, inputs)
        )
    assert together == alone
    assert alone[0] != alone[1]  # control: different inputs, different fits


def test_the_bit_equality_is_sensitive_to_the_order_of_the_sums() -> None:
    """Negative control: adding the same pieces' sums in another order changes the total."""
    values = np.random.default_rng(1).random(4 * PIECE) * 1e6
    sums = in_pieces(lambda part: float(np.sum(values[part])), values.size)
    assert len(sums) == 4
    orders = {sum(sums[i] for i in order) for order in itertools.permutations(range(4))}
    assert len(orders) > 1


def test_work_is_spread_over_threads_and_returned_in_order() -> None:
    seen: set[int] = set()
    barrier = threading.Barrier(2, timeout=10)

    def work(part: slice) -> int:
        seen.add(threading.get_ident())
        if part.start == 0 or part.start == 2 * PIECE:  # the first piece of each run
            barrier.wait()  # both runs at once: two threads
        return part.start

    with limited(2):
        starts = in_pieces(work, 4 * PIECE)
    assert starts == [i * PIECE for i in range(4)]
    assert len(seen) == 2
    with limited(2):  # small tables stay in the calling thread
        assert in_rows(lambda part: threading.get_ident(), 8, 1_000) == [threading.get_ident()]


def test_normalised_equals_numpy_softmax_with_pieces_without_mass() -> None:
    rng = np.random.default_rng(2)
    belief = rng.normal(0.0, 30.0, size=(64, 4_096))
    belief[:20] = -np.inf  # whole pieces of zeros (a message that is 0 there)
    with limited(2):
        weights, log_z = _normalised(belief)
    top = np.max(belief)
    expected = np.exp(belief - top)
    np.testing.assert_allclose(weights, expected / expected.sum(), rtol=1e-12, atol=0)
    assert log_z == pytest.approx(top + math.log(expected.sum()), rel=1e-14)
    assert float(weights.sum()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(("before", "after"), [(6, 7_000), (1, 50_000), (20_000, 20), (3, 2)])
def test_sum_middle_is_the_same_whatever_the_threads(before: int, after: int) -> None:
    table = np.random.default_rng(3).random((before, 9, after))
    with limited(2):
        summed = _sum_middle(table)
    with limited(1):
        alone = _sum_middle(table)
    np.testing.assert_array_equal(summed, alone)
    np.testing.assert_allclose(summed, np.einsum("ijk->ik", table), rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("keeps", [((0, 2), (1, 3)), ((3,), (0, 1, 2)), ((1,), (2, 3), (0,))])
def test_plus_terms_and_added_equal_numpy_broadcasts(
    keeps: tuple[tuple[int, ...], ...], dtype: type[np.floating]
) -> None:
    """Terms gathered through an index, (1, 3) added as a view of runs of 40, in either dtype."""
    sizes = (16, 12, 30, 40)  # 230,400 cells
    attrs = (0, 1, 2, 3)
    rng = np.random.default_rng(4)
    table = rng.random(sizes).astype(dtype)
    terms = [
        (_Map(attrs, keep, sizes), rng.random(tuple(sizes[a] for a in keep))) for keep in keeps
    ]
    expected = table.astype(np.float64)
    for mapping, values in terms:
        expected += -0.25 * np.broadcast_to(values.reshape(mapping.broadcast), sizes)
    with limited(2):
        stepped = _plus_terms(table, terms, -0.25)
        added = terms[0][0].added(terms[0][1], table)
    assert stepped.dtype == dtype
    tolerance = 1e-13 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(stepped, expected, rtol=tolerance, atol=tolerance)
    first = np.broadcast_to(terms[0][1].reshape(terms[0][0].broadcast), sizes)
    np.testing.assert_array_equal(added, table + first)
    assert added is not table


def test_thread_counts_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidParameterError, match="count"), limited(0):
        pass
    monkeypatch.setenv("DPCURATOR_THREADS", "many")
    with pytest.raises(InvalidParameterError, match="DPCURATOR_THREADS"):
        threads()
    monkeypatch.setenv("DPCURATOR_THREADS", "3")
    assert threads() == 3
