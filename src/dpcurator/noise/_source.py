"""Sources of random 64-bit words: the only place where dpcurator touches entropy.

A :class:`RandomSource` hands out independent, uniformly distributed 64-bit words. Every sampler
in :mod:`dpcurator.noise` is a deterministic function of such words, so the source alone decides
whether a release is protected by a cryptographically secure generator
(:class:`SecureRandomSource`, the default) or is merely a reproducible simulation
(:class:`InsecureSeededSource`).
"""

from __future__ import annotations

import os
import threading
import weakref
from abc import ABC, abstractmethod

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer
from dpcurator.errors import InvalidParameterError

__all__ = [
    "InsecureSeededSource",
    "RandomSource",
    "SecureRandomSource",
    "default_source",
    "resolve_source",
]

_BUFFER_BYTES = 64 * 1024
"""Size of the buffer of :class:`SecureRandomSource` (one ``getrandom`` call refills it)."""


class RandomSource(ABC):
    """A supply of independent uniform 64-bit words.

    Subclasses implement :meth:`words` and the :attr:`secure` flag. Samplers never look at
    anything but the words, so any two sources that produce i.i.d. uniform words give exactly
    the same output distributions.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> source = InsecureSeededSource(7)
    >>> source.words(3).dtype
    dtype('uint64')
    """

    @property
    @abstractmethod
    def secure(self) -> bool:
        """Whether the words come from a cryptographically secure generator."""

    @abstractmethod
    def words(self, n: int) -> NDArray[np.uint64]:
        """Return ``n`` independent words, each uniform on ``[0, 2**64)``.

        Parameters
        ----------
        n : int
            Number of words, ``n >= 0``.

        Returns
        -------
        numpy.ndarray of uint64
            A fresh, writable array of shape ``(n,)``.
        """


def _check_count(n: object) -> int:
    return check_integer(n, "n", minimum=0)


_LIVE_SECURE_SOURCES: weakref.WeakSet[SecureRandomSource] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A child process must never reuse the bytes its parent had buffered (both processes would
    # then draw the same "random" words), and a lock held by another thread at fork time would
    # stay locked forever in the child. Drop every buffer and make new locks.
    for src in list(_LIVE_SECURE_SOURCES):
        src._reset_after_fork()


if hasattr(os, "register_at_fork"):  # pragma: no branch - absent only on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)


class SecureRandomSource(RandomSource):
    """Words from the operating system's CSPRNG (:func:`os.urandom`, ``getrandom`` on Linux).

    Small requests are served from an internal 64 KiB buffer so that they do not each make a
    system call; large requests read directly from the kernel. Bytes handed out are never handed
    out again. The buffer is guarded by a lock (thread-safe) and discarded in a forked child (a
    child never replays its parent's buffered bytes).

    Examples
    --------
    >>> from dpcurator.noise import SecureRandomSource
    >>> source = SecureRandomSource()
    >>> source.secure
    True
    >>> source.words(4).shape
    (4,)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer = b""
        self._position = 0
        _LIVE_SECURE_SOURCES.add(self)

    def __deepcopy__(self, memo: dict[int, object]) -> SecureRandomSource:
        """Return ``self``: a copy must never replay buffered secure bytes.

        scikit-learn's ``clone`` deep-copies estimator parameters, a source among them.
        """
        return self

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._buffer = b""
        self._position = 0

    @property
    def secure(self) -> bool:
        """Always ``True``: the words come from the kernel CSPRNG."""
        return True

    def words(self, n: int) -> NDArray[np.uint64]:
        """Return ``n`` words from the kernel CSPRNG (see :meth:`RandomSource.words`).

        Examples
        --------
        >>> from dpcurator.noise import SecureRandomSource
        >>> SecureRandomSource().words(2).dtype
        dtype('uint64')
        """
        n = _check_count(n)
        nbytes = 8 * n
        if nbytes > _BUFFER_BYTES // 4:
            raw = os.urandom(nbytes)
        else:
            with self._lock:
                if self._position + nbytes > len(self._buffer):
                    self._buffer = os.urandom(_BUFFER_BYTES)
                    self._position = 0
                raw = self._buffer[self._position : self._position + nbytes]
                self._position += nbytes
        return np.frombuffer(raw, dtype=np.uint64).copy()

    def __repr__(self) -> str:
        return "SecureRandomSource()"


class InsecureSeededSource(RandomSource):
    """Reproducible words from numpy's PCG64, for tests and simulations only.

    PCG64 is a statistical generator, not a cryptographic one: its output is predictable from a
    few observed words. Never use this source for a release that must protect privacy; it says
    so in its name and in :attr:`secure`.

    Parameters
    ----------
    seed : int
        A non-negative integer; the same seed gives the same words.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> a = InsecureSeededSource(42).words(3)
    >>> b = InsecureSeededSource(42).words(3)
    >>> bool((a == b).all()), InsecureSeededSource(42).secure
    (True, False)
    """

    def __init__(self, seed: int) -> None:
        self._seed = check_integer(seed, "seed", minimum=0)
        self._bit_generator = np.random.PCG64(self._seed)

    @property
    def seed(self) -> int:
        """The seed this source was created with."""
        return self._seed

    @property
    def secure(self) -> bool:
        """Always ``False``: PCG64 is predictable."""
        return False

    def words(self, n: int) -> NDArray[np.uint64]:
        """Return the next ``n`` raw PCG64 words (see :meth:`RandomSource.words`).

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> InsecureSeededSource(0).words(2).shape
        (2,)
        """
        n = _check_count(n)
        out: NDArray[np.uint64] = np.asarray(
            self._bit_generator.random_raw(n), dtype=np.uint64
        ).reshape(n)
        return out

    def __repr__(self) -> str:
        return f"InsecureSeededSource({self._seed})"


_DEFAULT_SOURCE = SecureRandomSource()


def default_source() -> RandomSource:
    """Return the process-wide :class:`SecureRandomSource`.

    Examples
    --------
    >>> from dpcurator.noise import default_source
    >>> default_source().secure
    True
    """
    return _DEFAULT_SOURCE


def resolve_source(source: RandomSource | None) -> RandomSource:
    """Return the source a sampler should use.

    Parameters
    ----------
    source : RandomSource or None
        ``None`` means :func:`default_source` (secure); a :class:`RandomSource` is returned as is.

    Returns
    -------
    RandomSource

    Raises
    ------
    InvalidParameterError
        For anything else: a bare seed or a numpy ``Generator`` is refused, because it would
        silently replace the secure default with a predictable generator. Pass
        ``InsecureSeededSource(seed)`` to ask for reproducibility explicitly.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource, resolve_source
    >>> resolve_source(None).secure
    True
    >>> resolve_source(InsecureSeededSource(3))
    InsecureSeededSource(3)
    >>> resolve_source(3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: source must be None or a RandomSource ...; got 3.
    """
    if source is None:
        return _DEFAULT_SOURCE
    if isinstance(source, RandomSource):
        return source
    raise InvalidParameterError(
        "source",
        source,
        "must be None or a RandomSource (for reproducible tests pass "
        "source=InsecureSeededSource(seed) explicitly)",
    )
