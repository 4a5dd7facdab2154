"""Secret bytes for keys: the kernel CSPRNG, for code that needs a key rather than noise.

The curator's ledger keys its hash chain with a steward's secret (:mod:`dpcurator.curator`); as
every other draw from the operating system's entropy, it comes from this package.
"""

from __future__ import annotations

import os

from dpcurator._validation import check_integer

__all__ = ["secret_bytes"]


def secret_bytes(n: int) -> bytes:
    """Return ``n`` bytes from the kernel CSPRNG (:func:`os.urandom`, ``getrandom`` on Linux).

    Unlike :class:`~dpcurator.noise.SecureRandomSource`, nothing is buffered: every call reads
    fresh bytes from the kernel, so a key never shares a buffer with noise.

    Parameters
    ----------
    n : int
        Number of bytes, ``n >= 0``.

    Returns
    -------
    bytes

    Examples
    --------
    >>> from dpcurator.noise import secret_bytes
    >>> len(secret_bytes(32)), secret_bytes(16) != secret_bytes(16)
    (32, True)
    """
    return os.urandom(check_integer(n, "n", minimum=0))
