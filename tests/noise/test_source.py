"""Tests of the random sources (src/dpcurator/noise/_source.py)."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.errors import InvalidParameterError
from dpcurator.noise import (
    InsecureSeededSource,
    RandomSource,
    SecureRandomSource,
    default_source,
    resolve_source,
)


def bit_frequencies_ok(words: NDArray[np.uint64], z: float = 5.5) -> bool:
    """Each of the 64 bit positions is set in about half of the words.

    Under uniform words, the count of ones at one position is Binomial(n, 1/2), standard
    deviation sqrt(n) / 2; z = 5.5 gives a false alarm probability below 64 * 4e-8 = 2.4e-6.
    """
    n = words.size
    bits = np.unpackbits(words.view(np.uint8)).reshape(n, 64)
    ones = bits.sum(axis=0)
    return bool(np.all(np.abs(ones - n / 2) <= z * np.sqrt(n) / 2))


def test_secure_source_returns_uint64_and_is_secure() -> None:
    source = SecureRandomSource()
    assert source.secure is True
    for n in (0, 1, 7, 3000, 10_000):  # buffered and bulk paths
        words = source.words(n)
        assert words.dtype == np.uint64
        assert words.shape == (n,)
        assert words.flags.writeable
    assert repr(source) == "SecureRandomSource()"


def test_secure_source_never_repeats_words() -> None:
    source = SecureRandomSource()
    # 20 000 words from the buffer and from bulk reads: a repeated 64-bit word has probability
    # below 20000**2 / 2**65 = 1e-11 unless bytes are handed out twice.
    chunks = [source.words(n) for n in (1, 2, 3, 100, 5000, 1, 4000, 7, 10_000)]
    words = np.concatenate(chunks)
    assert np.unique(words).size == words.size


@pytest.mark.statistical
def test_secure_source_bit_frequencies() -> None:
    words = SecureRandomSource().words(100_000)
    assert bit_frequencies_ok(words)
    # negative control: a generator whose bit 63 is set 3/4 of the time must be caught
    biased = words | (InsecureSeededSource(1).words(100_000) & np.uint64(1 << 63))
    assert not bit_frequencies_ok(biased)


def test_secure_source_is_thread_safe() -> None:
    source = SecureRandomSource()
    results: list[NDArray[np.uint64]] = []
    lock = threading.Lock()

    def work() -> None:
        local = [source.words(3) for _ in range(500)]
        with lock:
            results.extend(local)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    words = np.concatenate(results)
    assert words.size == 8 * 500 * 3
    assert np.unique(words).size == words.size  # no byte handed out twice


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_replay_parent_buffer() -> None:
    source = default_source()
    source.words(1)  # the buffer now holds unread bytes
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child process
        try:
            os.write(write_fd, source.words(4).tobytes())
        finally:
            os._exit(0)
    os.close(write_fd)
    child = np.frombuffer(os.read(read_fd, 32), dtype=np.uint64)
    os.close(read_fd)
    os.waitpid(pid, 0)
    parent = source.words(4)
    assert child.size == 4
    assert not np.array_equal(child, parent)


def test_insecure_source_is_reproducible_and_marked_insecure() -> None:
    a = InsecureSeededSource(123)
    b = InsecureSeededSource(123)
    assert a.secure is False
    assert a.seed == 123
    assert np.array_equal(a.words(50), b.words(50))
    assert np.array_equal(a.words(3), b.words(3))
    assert not np.array_equal(
        InsecureSeededSource(124).words(50), InsecureSeededSource(123).words(50)
    )
    assert repr(a) == "InsecureSeededSource(123)"
    assert a.words(0).shape == (0,)


@pytest.mark.parametrize("seed", [-1, 1.5, "3", True, None])
def test_insecure_source_rejects_bad_seed(seed: object) -> None:
    with pytest.raises(InvalidParameterError) as info:
        InsecureSeededSource(seed)  # type: ignore[arg-type]
    assert info.value.name == "seed"


def test_words_rejects_bad_count() -> None:
    for source in (SecureRandomSource(), InsecureSeededSource(0)):
        with pytest.raises(InvalidParameterError, match="n must be >= 0"):
            source.words(-1)


def test_default_and_resolve_source() -> None:
    assert default_source() is default_source()
    assert isinstance(default_source(), SecureRandomSource)
    assert resolve_source(None) is default_source()
    seeded = InsecureSeededSource(5)
    assert resolve_source(seeded) is seeded
    assert isinstance(seeded, RandomSource)


@pytest.mark.parametrize(
    "bad", [0, 42, np.random.default_rng(0), np.random.PCG64(1), "secure", 1.0]
)
def test_resolve_source_rejects_seeds_and_generators(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match=r"InsecureSeededSource\(seed\)") as info:
        resolve_source(bad)  # type: ignore[arg-type]
    assert info.value.name == "source"


def test_secure_source_deep_copies_to_itself() -> None:
    import copy

    from dpcurator.noise import SecureRandomSource

    source = SecureRandomSource()
    assert copy.deepcopy(source) is source
    assert copy.deepcopy({"source": source})["source"] is source
