r"""Fast, vectorised, public hash families for local-DP protocols.

Local hashing (OLH), RAPPOR's Bloom filters and the count-mean sketches map values to buckets
with hash functions that everybody knows: they are *public* and deterministic, not a source of
privacy randomness (the privacy of those protocols holds for any fixed hash function). What the
estimators need is that distinct values collide with probability about ``1/g`` over the choice
of the function, independently enough for the variance formulas to hold. Two families, both
pure numpy (no Python loop over keys):

**Per-device functions** (:func:`universal_hash`, for OLH, where each device draws its own
function: a 64-bit seed per device). Multiply-add-shift (M. Dietzfelbinger, "Universal hashing
and k-wise independent random variables via integer arithmetic without primes", STACS 1996; the
vector form in M. Thorup, "High speed hashing for integers and strings", 2015, arXiv
1504.06804, Section 3.3): a key ``x = x_hi 2**32 + x_lo`` is mapped to 32 bits by

.. math::

    h(x) = \lfloor ((a_{lo} x_{lo} + a_{hi} x_{hi} + b) \bmod 2^{64}) / 2^{32} \rfloor,

*strongly universal* (pairwise independent, uniform on ``[2**32]``) for uniform 64-bit words
``a_lo, a_hi, b``, which come from the seed through SplitMix64 (G. Steele, D. Lea, C. Flood,
"Fast splittable pseudorandom number generators", OOPSLA 2014: the first three outputs of the
generator started at the seed). Pairwise independence is all OLH's estimator needs: every
device has its own function.

**Fixed public tables** (:class:`HashFunctions`, for RAPPOR's cohorts and the sketches' ``k``
rows, where all devices share the functions). Simple tabulation hashing (A. L. Zobrist 1970;
J. L. Carter, M. N. Wegman, JCSS 1979; analysed by M. Pătraşcu, M. Thorup, "The power of
simple tabulation hashing", JACM 2012): the key's eight bytes index eight tables of random
32-bit words, which are XORed. It is 3-independent, so for a fixed ``x`` the collisions
``h(y) = h(x)`` and ``h(z) = h(x)`` of two other values are independent: the condition under
which the sketches' variance over the hash draw holds (linear families such as the one above
make such collisions strongly dependent on structured keys like ``0, 1, 2, ...``). The table
words come from a public seed through the SplitMix64 stream.

Both reduce 32 bits to a bucket in ``[0, g)`` by ``floor(h g / 2**32)`` (Lemire's
multiply-shift range reduction): every bucket receives ``floor(2**32 / g)`` or
``ceil(2**32 / g)`` hash values, exactly uniform for ``g`` a power of two and within a relative
``g / 2**32`` of uniform otherwise.

Values become 64-bit keys through :func:`fingerprint`: integers are keys themselves (their
two's-complement bits), strings and bytes are hashed with BLAKE2b (8-byte digest), which is
deterministic across processes and platforms (unlike Python's :func:`hash`).

Examples
--------
>>> import numpy as np
>>> from dpcurator.local._hashing import HashFunctions, fingerprint, universal_hash
>>> keys = fingerprint(["apple", "pear", "apple"])
>>> bool(keys[0] == keys[2]), bool(keys[0] == keys[1])
(True, False)
>>> table = HashFunctions.from_seed(7, count=3, num_buckets=16)
>>> table.hash_all(keys).shape  # every key under every function
(3, 3)
>>> buckets = universal_hash(np.arange(1000), 12345, 4)
>>> int(buckets.min()), int(buckets.max())
(0, 3)
"""

from __future__ import annotations

import hashlib
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer
from dpcurator.errors import InvalidParameterError

__all__ = ["HashFunctions", "fingerprint", "hash_parameters", "universal_hash"]

_GAMMA = 0x9E3779B97F4A7C15
_GAMMAS = tuple(np.uint64(i * _GAMMA % 2**64) for i in (1, 2, 3))
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)
_MAX_BUCKETS = 2**32
_PERSON = b"dpcurator-fp"


def _splitmix(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """Apply the SplitMix64 output function (a bijection of 64-bit words), in place."""
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


def _as_seeds(seeds: object) -> NDArray[np.uint64]:
    """Seeds as a uint64 array (at least one-dimensional, so arithmetic wraps silently)."""
    arr = np.asarray(seeds)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise InvalidParameterError("seeds", f"<array of dtype {arr.dtype}>", "must be integers")
    if arr.dtype.kind == "i":
        arr = arr.astype(np.int64).view(np.uint64)
    return np.atleast_1d(arr.astype(np.uint64))


def hash_parameters(
    seeds: object,
) -> tuple[NDArray[np.uint64], NDArray[np.uint64], NDArray[np.uint64]]:
    """Return the words ``(a_lo, a_hi, b)`` of the hash functions named by ``seeds``.

    They are the first three SplitMix64 outputs from each seed (Steele, Lea and Flood 2014).

    Parameters
    ----------
    seeds : int or array_like of int
        64-bit seeds (negative integers are taken modulo ``2**64``).

    Returns
    -------
    tuple of three numpy.ndarray of uint64
        Each of shape ``np.atleast_1d(seeds).shape``.

    Examples
    --------
    >>> from dpcurator.local._hashing import hash_parameters
    >>> a_lo, a_hi, b = hash_parameters([1, 2])
    >>> a_lo.dtype, a_lo.shape
    (dtype('uint64'), (2,))
    """
    s = _as_seeds(seeds)
    return (
        _splitmix(s + _GAMMAS[0]),
        _splitmix(s + _GAMMAS[1]),
        _splitmix(s + _GAMMAS[2]),
    )


def _check_buckets(num_buckets: object) -> int:
    g = check_integer(num_buckets, "num_buckets", minimum=1)
    if g > _MAX_BUCKETS:
        raise InvalidParameterError("num_buckets", num_buckets, "must be <= 2**32")
    return g


def _bucket(
    keys: NDArray[np.uint64],
    a_lo: NDArray[np.uint64],
    a_hi: NDArray[np.uint64] | None,
    b: NDArray[np.uint64],
    num_buckets: int,
) -> NDArray[np.int64]:
    """``floor(h(x) g / 2**32)`` with broadcasting of keys against the parameters.

    ``a_hi`` may be ``None`` when every key is below ``2**32`` (its term is then zero).
    """
    h = a_lo * (keys & _LOW32)
    if a_hi is not None:
        h += a_hi * (keys >> np.uint64(32))
    h += b
    h >>= np.uint64(32)
    return _reduce(h, num_buckets)


def _as_keys(keys: object) -> NDArray[np.uint64]:
    arr = np.asarray(keys)
    if arr.dtype == np.uint64:
        return np.atleast_1d(arr)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise InvalidParameterError(
            "keys", f"<array of dtype {arr.dtype}>", "must be integers (use fingerprint() first)"
        )
    return np.atleast_1d(arr.astype(np.int64).view(np.uint64) if arr.dtype.kind == "i" else arr)


def universal_hash(keys: object, seeds: object, num_buckets: int) -> NDArray[np.int64]:
    """Hash each key with the function named by its seed, into ``[0, num_buckets)``.

    ``keys`` and ``seeds`` broadcast against each other: one seed per device with one key per
    device (OLH's client), or ``keys[None, :]`` against ``seeds[:, None]`` to evaluate every
    device's function on every candidate (OLH's server).

    Parameters
    ----------
    keys : array_like of int
        64-bit keys (see :func:`fingerprint` for strings).
    seeds : int or array_like of int
        The functions' seeds.
    num_buckets : int
        ``1 <= g <= 2**32``.

    Returns
    -------
    numpy.ndarray of int64
        Buckets in ``[0, g)``, of the broadcast shape (at least one-dimensional).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.local._hashing import universal_hash
    >>> seeds = np.arange(4)
    >>> universal_hash(np.array([[10], [11]]), seeds, 5).shape  # 2 keys x 4 functions
    (2, 4)
    >>> bool((universal_hash(10, seeds, 5) == universal_hash(10, seeds, 5)).all())  # public
    True
    """
    g = _check_buckets(num_buckets)
    key_arr = _as_keys(keys)
    s = _as_seeds(seeds)
    a_lo = _splitmix(s + _GAMMAS[0])
    # keys below 2**32 have x_hi = 0: a_hi is not needed (a third of the cost saved)
    a_hi = _splitmix(s + _GAMMAS[1]) if key_arr.size and int(key_arr.max()) >> 32 else None
    b = _splitmix(s + _GAMMAS[2])
    try:
        np.broadcast_shapes(key_arr.shape, a_lo.shape)
    except ValueError:
        raise InvalidParameterError(
            "seeds", f"<array of shape {a_lo.shape}>", f"must broadcast with keys {key_arr.shape}"
        ) from None
    return _bucket(key_arr, a_lo, a_hi, b, g)


def _reduce(h: NDArray[np.uint64], num_buckets: int) -> NDArray[np.int64]:
    """Map 32-bit hash values to ``[0, g)``: ``floor(h g / 2**32)``."""
    if num_buckets & (num_buckets - 1) == 0:  # a power of two: the top bits
        h >>= np.uint64(33 - num_buckets.bit_length())
        return h.astype(np.int64)
    h *= np.uint64(num_buckets)
    h >>= np.uint64(32)
    return h.astype(np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class HashFunctions:
    """A fixed, public family of hash functions ``h_0, ..., h_{F-1}`` into ``[0, num_buckets)``.

    Simple tabulation hashing (Zobrist 1970; Pătraşcu and Thorup, JACM 2012; see the module
    docstring): ``h_f(x) = T_f[0][x_0] XOR ... XOR T_f[7][x_7]`` over the bytes ``x_i`` of the
    64-bit key, then reduced to ``[0, g)``. 3-independent. Used for RAPPOR's cohort Bloom
    filters and the count-mean sketches' ``k`` hash functions.

    Attributes
    ----------
    tables : numpy.ndarray of uint64
        Shape ``(F, 8, 256)``: the 32-bit table words of each function.
    num_buckets : int
        Size of the range.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.local._hashing import HashFunctions
    >>> table = HashFunctions.from_seed(0, count=2, num_buckets=8)
    >>> table(np.array([5, 5]), np.array([0, 1])).tolist() == table.hash_all(5)[:, 0].tolist()
    True
    """

    tables: NDArray[np.uint64]
    num_buckets: int

    @classmethod
    def from_seed(cls, seed: int, *, count: int, num_buckets: int) -> HashFunctions:
        """Derive ``count`` functions from one public seed.

        The table words are the top 32 bits of the SplitMix64 stream started at
        ``splitmix(seed)`` (Steele et al. 2014).

        Parameters
        ----------
        seed : int
            Any integer (taken modulo ``2**64``).
        count : int
            Number of functions, ``>= 1``.
        num_buckets : int
            ``1 <= g <= 2**32``.

        Returns
        -------
        HashFunctions

        Examples
        --------
        >>> from dpcurator.local._hashing import HashFunctions
        >>> len(HashFunctions.from_seed(3, count=4, num_buckets=10))
        4
        """
        seed_int = check_integer(seed, "seed")
        n = check_integer(count, "count", minimum=1)
        if n > 2**16:
            raise InvalidParameterError("count", count, "must be <= 2**16")
        g = _check_buckets(num_buckets)
        base = _splitmix(np.array([seed_int % 2**64], dtype=np.uint64))
        stream = np.arange(1, n * 8 * 256 + 1, dtype=np.uint64)
        stream *= _GAMMAS[0]
        stream += base
        words = _splitmix(stream) >> np.uint64(32)
        return cls(words.reshape(n, 8, 256), g)

    def __len__(self) -> int:
        return int(self.tables.shape[0])

    def __call__(self, keys: object, which: object) -> NDArray[np.int64]:
        """Hash ``keys`` with the functions of index ``which`` (the two broadcast).

        Parameters
        ----------
        keys : array_like of int
            64-bit keys.
        which : array_like of int
            Function indices in ``[0, F)``.

        Returns
        -------
        numpy.ndarray of int64
        """
        key_arr = _as_keys(keys)
        idx = np.atleast_1d(np.asarray(which, dtype=np.int64))
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= len(self)):
            raise InvalidParameterError(
                "which",
                f"<indices in [{int(idx.min())}, {int(idx.max())}]>",
                f"must lie in [0, {len(self)})",
            )
        key_arr, idx = np.broadcast_arrays(key_arr, idx)
        used = _used_bytes(key_arr)
        flat = self.tables.reshape(-1)
        base = idx * 2048  # offset of each function's tables in the flat array
        h = np.take(self._constant(used), idx)
        for byte in range(used):
            digits = ((key_arr >> np.uint64(8 * byte)) & np.uint64(255)).astype(np.intp)
            digits += base
            digits += 256 * byte
            h ^= np.take(flat, digits)
        return _reduce(h, self.num_buckets)

    def _constant(self, used: int) -> NDArray[np.uint64]:
        """XOR of the entries for byte value 0 of the bytes ``>= used`` (zero in every key)."""
        out = np.zeros(len(self), dtype=np.uint64)
        for byte in range(used, 8):
            out ^= self.tables[:, byte, 0]
        return out

    def hash_all(self, keys: object) -> NDArray[np.int64]:
        """Hash every key with every function: an array of shape ``(F, number of keys)``.

        Examples
        --------
        >>> from dpcurator.local._hashing import HashFunctions
        >>> HashFunctions.from_seed(1, count=3, num_buckets=4).hash_all([1, 2]).shape
        (3, 2)
        """
        key_arr = _as_keys(keys).reshape(-1)
        used = _used_bytes(key_arr)
        h = np.repeat(self._constant(used)[:, None], key_arr.size, axis=1)
        for byte in range(used):
            digits = ((key_arr >> np.uint64(8 * byte)) & np.uint64(255)).astype(np.intp)
            h ^= self.tables[:, byte, digits]
        return _reduce(h, self.num_buckets)


def _used_bytes(keys: NDArray[np.uint64]) -> int:
    """Count the low-order bytes that are non-zero in some key (the others are all zero)."""
    if keys.size == 0:
        return 0
    return (int(keys.max()).bit_length() + 7) // 8


def _digest(item: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(item, digest_size=8, person=_PERSON).digest(), "little")


def _key_of(item: Any) -> int:
    if isinstance(item, str):
        return _digest(item.encode("utf-8"))
    if isinstance(item, bytes):
        return _digest(item)
    if isinstance(item, bool | np.bool_):
        raise InvalidParameterError("values", item, "must be strings, bytes or integers, not bool")
    if isinstance(item, numbers.Integral):
        return int(item) % 2**64
    raise InvalidParameterError(
        "values", f"<element of type {type(item).__name__}>", "must be strings, bytes or integers"
    )


def fingerprint(values: object) -> NDArray[np.uint64]:
    """Map values to 64-bit keys: integers to themselves, strings and bytes through BLAKE2b.

    Distinct strings collide with probability about ``2**-64`` per pair. Strings are hashed once
    per distinct value (``numpy.unique``), so millions of devices holding a few thousand distinct
    strings cost a few thousand digests.

    Parameters
    ----------
    values : array_like
        Integers (any integer dtype; negative ones modulo ``2**64``), or strings / bytes (a numpy
        string array, a list, or an object array).

    Returns
    -------
    numpy.ndarray of uint64
        One key per value, flattened.

    Examples
    --------
    >>> from dpcurator.local._hashing import fingerprint
    >>> fingerprint([3, -1]).tolist()
    [3, 18446744073709551615]
    >>> int(fingerprint(["smith"])[0]) == int(fingerprint([b"smith"])[0])  # UTF-8 bytes
    True
    """
    arr = np.asarray(values)
    if arr.size == 0:
        raise InvalidParameterError("values", "<empty array>", "must hold at least one value")
    flat = arr.reshape(-1)
    if flat.dtype.kind in "iu" and flat.dtype != np.bool_:
        return (
            flat.astype(np.int64).view(np.uint64)
            if flat.dtype.kind == "i"
            else flat.astype(np.uint64)
        )
    if flat.dtype.kind in "US":
        unique, inverse = np.unique(flat, return_inverse=True)
        keys = np.array([_key_of(item) for item in unique.tolist()], dtype=np.uint64)
        return keys[inverse.reshape(-1)]
    if flat.dtype.kind == "O":
        cache: dict[tuple[type, Any], int] = {}
        out = np.empty(flat.size, dtype=np.uint64)
        for i, item in enumerate(flat.tolist()):
            try:
                key = cache[type(item), item]
            except KeyError:
                key = cache[type(item), item] = _key_of(item)
            except TypeError:  # unhashable: _key_of refuses it
                key = _key_of(item)
            out[i] = key
        return out
    raise InvalidParameterError(
        "values", f"<array of dtype {flat.dtype}>", "must hold strings, bytes or integers"
    )
