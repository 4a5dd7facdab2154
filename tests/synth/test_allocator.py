"""The fit's tables stay in the C allocator's heap once the thresholds are raised (glibc).

Each check runs in a fresh interpreter, whose allocator has not yet raised its thresholds by
itself: an 8 MiB table is then mapped from the system (glibc's ``mallinfo2().hblkhd`` grows by
its size), and after :func:`raise_thresholds`, or a fit, it comes from the heap.
"""

from __future__ import annotations

import ctypes.util
import platform
import subprocess
import sys

import pytest

_MAPPED_BYTES = """
import ctypes, sys
import numpy as np

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd",
        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
{before}
mapped = libc.mallinfo2().hblkhd
table = np.empty(1 << 20)  # 8 MiB
print(libc.mallinfo2().hblkhd - mapped)
"""

_RAISED = "from dpcurator.synth._allocator import raise_thresholds; raise_thresholds()"
_FITTED = """
import numpy as np
from dpcurator.synth import Marginal, fit_model
fit_model((2, 3), [Marginal((0, 1), np.arange(6.0), 1.0)], iterations=2)
"""


def _glibc() -> bool:
    return platform.libc_ver()[0] == "glibc" and ctypes.util.find_library("c") is not None


def _mapped_by_a_new_table(before: str) -> int:
    script = _MAPPED_BYTES.format(before=before)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return int(done.stdout.strip())


@pytest.mark.skipif(not _glibc(), reason="glibc's allocator statistics (mallinfo2)")
@pytest.mark.parametrize("before", [_RAISED, _FITTED], ids=["raised", "after a fit"])
def test_a_large_table_comes_from_the_heap_once_raised(before: str) -> None:
    assert _mapped_by_a_new_table(before) == 0
    # Control: in a fresh interpreter the same table is mapped from the system.
    assert _mapped_by_a_new_table("") >= 1 << 23
