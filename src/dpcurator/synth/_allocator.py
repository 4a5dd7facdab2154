"""Keep the fit's freed tables in the C allocator's heap instead of returning them to the system.

A fit frees and allocates tables of several megabytes every trial step (the stepped potentials,
their marginals, the projections). glibc serves a request at or above its *mmap threshold* with
fresh pages from the system, and returns the top of its heap to the system once more than its
*trim threshold* is free there; the pages it gets back are zeroed by the kernel on first touch,
one more pass over each table for nothing. glibc raises both thresholds by itself when a
program frees a large block that it had mapped (to that block's size, at most 32 MiB, and twice
that for trimming): :func:`raise_thresholds` frees one such block once per process, so that the
fit's tables stay in the heap from its first step on. On AIM at Adult epsilon 10 (seed 1) the
fits between rounds take about 0.93x the time and the whole release 0.93-0.96x; the process
may keep up to 64 MiB of freed memory in its heap for reuse. With another allocator the block
is allocated and freed, nothing else.

Examples
--------
>>> raise_thresholds()  # once per process; later calls do nothing
>>> raise_thresholds()
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["raise_thresholds"]

_BLOCK_BYTES = (32 << 20) - (32 << 10)
"""Just under glibc's largest dynamic mmap threshold (32 MiB on 64-bit systems)."""


@functools.cache
def raise_thresholds() -> None:
    """Allocate and free one block of ``_BLOCK_BYTES`` (once per process)."""
    block = np.empty(_BLOCK_BYTES, dtype=np.uint8)
    del block
