"""Work on large tables in pieces, on a pool of threads (the inference's passes over its tables).

numpy releases the interpreter lock inside its loops, so the pieces of one large table are
worked on in parallel by threads. Two ways of cutting a table:

- :func:`in_pieces`: flat pieces of ``PIECE`` cells (a piece and its temporaries stay in a
  core's L2 cache while several operations run on it), fixed by the table's size alone, and
  their results returned in order: sums of partial results do not depend on the number of
  threads, to the bit.
- :func:`in_rows`: one range of the table's first axis per thread, for work whose every output
  cell is computed the same whichever rows are worked on together (elementwise operations,
  broadcasts, sums along other axes).

Tables under ``LEAST`` cells, and every table when one thread is allowed, are worked on in the
calling thread. The number of threads is the CPUs this process may run on, or the environment
variable ``DPCURATOR_THREADS``, or :func:`limited`'s within a ``with`` block.

Examples
--------
>>> import numpy as np
>>> table = np.arange(300_000, dtype=np.float64)
>>> float(sum(in_pieces(lambda part: float(table[part].sum()), table.size)))
44999850000.0
>>> with limited(1):
...     threads()
1
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from dpcurator.errors import InvalidParameterError

__all__ = ["LEAST", "PIECE", "in_pieces", "in_rows", "limited", "pieces", "threads"]

T = TypeVar("T")

PIECE = 1 << 16
"""Cells of a flat piece: 512 KiB of float64."""
LEAST = 1 << 17
"""Least cells of a table worth handing to threads."""
_MOST = 16
"""Most threads used, whatever the machine."""


class _Pool:
    """The shared pool of threads (created on first use) and the limit of :func:`limited`.

    One pool for the process, never resized or shut down while in use: it starts a thread only
    when a task finds none idle, up to ``_MOST``, so a call that hands out ``k`` runs at once
    uses at most ``k`` threads, and calls from several threads at once share it safely.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executor: ThreadPoolExecutor | None = None
        self.limit: int | None = None
        """The count set by :func:`limited` (process-wide), or None."""

    def get(self) -> ThreadPoolExecutor:
        """Return the pool."""
        with self.lock:
            if self.executor is None:
                self.executor = ThreadPoolExecutor(_MOST, thread_name_prefix="dpcurator-synth")
            return self.executor


_POOL = _Pool()


def _available() -> int:
    """Return the threads allowed: ``DPCURATOR_THREADS``, else the CPUs this process may use."""
    setting = os.environ.get("DPCURATOR_THREADS", "").strip()
    if setting:
        if not setting.isdigit() or int(setting) < 1:
            raise InvalidParameterError(
                "DPCURATOR_THREADS", setting, "must be a positive integer (or unset)"
            )
        return min(int(setting), _MOST)
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, _MOST))


def threads() -> int:
    """Return the number of threads the inference works with."""
    return _POOL.limit if _POOL.limit is not None else _available()


@contextmanager
def limited(count: int) -> Iterator[None]:
    """Work with at most ``count`` threads within the block (results are the same).

    The limit holds for the whole process while the block runs (for tests and benchmarks;
    ``DPCURATOR_THREADS`` sets it for a deployment).

    Parameters
    ----------
    count : int
        At least 1.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidParameterError("count", count, "must be a positive integer")
    before = _POOL.limit
    _POOL.limit = min(count, _MOST)
    try:
        yield
    finally:
        _POOL.limit = before


def _run(work: Callable[[slice], T], parts: list[slice], count: int) -> list[T]:
    """Apply ``work`` to each part, ``count`` runs of consecutive parts at once; in order.

    The first run is worked on by the calling thread, the others by the pool's.
    """
    if count <= 1 or len(parts) <= 1:
        return [work(part) for part in parts]
    count = min(count, len(parts))
    bounds = [len(parts) * i // count for i in range(count + 1)]
    runs = [parts[bounds[i] : bounds[i + 1]] for i in range(count)]
    pool = _POOL.get()
    others = [pool.submit(lambda run: [work(part) for part in run], run) for run in runs[1:]]
    first = [work(part) for part in runs[0]]  # the calling thread works too
    return first + [result for other in others for result in other.result()]


def pieces(cells: int) -> list[slice]:
    """Return the flat pieces of ``range(cells)``: ``PIECE`` cells each, the last one shorter."""
    return [slice(start, min(start + PIECE, cells)) for start in range(0, cells, PIECE)]


def in_pieces(work: Callable[[slice], T], cells: int) -> list[T]:
    """Return ``[work(piece) for piece in pieces(cells)]``, the pieces worked on in threads.

    The pieces depend on ``cells`` only, so partial results combined in order do not depend on
    the number of threads.
    """
    return _run(work, pieces(cells), threads() if cells >= LEAST else 1)


def in_rows(work: Callable[[slice], T], rows: int, cells: int) -> list[T]:
    """Return ``work(part)`` for one range of ``range(rows)`` per thread, in order.

    ``cells`` is the size of the table worked on (under ``LEAST``: one part, in this thread).
    """
    count = min(threads() if cells >= LEAST else 1, rows)
    if count <= 1:
        return [work(slice(0, rows))]
    parts = [slice(rows * i // count, rows * (i + 1) // count) for i in range(count)]
    return _run(work, parts, count)
