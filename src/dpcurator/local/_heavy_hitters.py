r"""Heavy hitters over a large domain under local DP: the prefix extending method (PEM).

T. Wang, N. Li, S. Jha, "Locally Differentially Private Heavy Hitter Identification", IEEE TDSC
2019, arXiv 1708.06674 (WLJ19), Section 5 (PEM); the frequency oracle is optimised local hashing
(T. Wang, J. Blocki, N. Li, S. Jha, "Locally Differentially Private Protocols for Frequency
Estimation", USENIX Security 2017 (WBLJ17), Section 4.4; research note D).

Values are ``b``-bit integers (a domain of ``2**b``, e.g. ``2**32``), too many to estimate one
by one. The devices are split at random into ``G`` groups; group ``t`` reports, with OLH, the
prefix of its value of ``s_t = min(b, γ + t η)`` bits (``γ = ceil(log2 k)``, ``t = 1..G``,
``G = ceil((b - γ) / η)``). The server estimates the counts of all ``2**s_1`` prefixes from
group 1 and keeps the ``beam_width`` largest; each later step extends the kept prefixes by
``η`` bits in every way (``beam_width * 2**η`` candidates), estimates them from the next
group, and keeps the largest again. The last step has full values: the ``k`` largest are
returned with their estimated counts, scaled by ``n / n_t`` to the whole population.

Privacy: every device sends exactly one OLH report, in one group; the group is drawn
independently of its value. OLH is ``ε``-LDP (GRR over ``g`` hashed buckets: the likelihood
ratio of any report for two values is at most ``p (g - 1) / (1 - p) = e^ε``, for any hash
function), so each device is ``ε``-LDP, whatever the number of groups: :attr:`HeavyHitters.event`
is ``PureDPEvent(ε)`` with the epsilon actually achieved by the rational ``p`` used.

Examples
--------
>>> import numpy as np
>>> from dpcurator.noise import InsecureSeededSource
>>> from dpcurator.local._heavy_hitters import heavy_hitters
>>> values = np.repeat([123456, 987654, 555555, 42], [30000, 20000, 15000, 35000])
>>> found = heavy_hitters(values, epsilon=4.0, bits=20, k=3, source=InsecureSeededSource(0))
>>> found.values.tolist()  # 555555 (15000 devices) is fourth
[42, 123456, 987654]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_epsilon, check_integer
from dpcurator.accounting import PrivacyEvent, PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._hashing import universal_hash
from dpcurator.local._protocol import FrequencyEstimate, check_values
from dpcurator.noise import RandomSource, bernoulli, resolve_source, uniform_integers

__all__ = ["HeavyHitters", "heavy_hitters"]

_DENOMINATOR_BITS = 52
_MARGIN = Fraction(2**40 + 1, 2**40)
"""Relative safety margin on the float evaluation of ``(g-1) / (e^eps + g - 1)``."""
_MAX_EPSILON = 20.0
"""Above this, ``g = e^eps + 1`` would exceed the hash range ``2**32``."""
_BLOCK = 1 << 21
"""Devices x candidates evaluated at once when counting supports."""


@dataclass(frozen=True, slots=True, eq=False)
class HeavyHitters:
    """The heavy hitters found, with their estimated counts.

    Attributes
    ----------
    values : numpy.ndarray of int64
        The ``k`` values found, largest estimated count first.
    estimate : FrequencyEstimate
        Their estimated population counts and variances (``n`` = number of devices).
    epsilon : float
        Local-DP epsilon of each device (achieved; at most the requested one).
    prefix_bits : tuple of int
        Prefix length reported by each group.
    group_sizes : numpy.ndarray of int64
        Number of devices in each group.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> from dpcurator.local._heavy_hitters import heavy_hitters
    >>> found = heavy_hitters(np.repeat([5, 9], 3000), epsilon=2.0, bits=8, k=1,
    ...                       source=InsecureSeededSource(0))
    >>> found.prefix_bits, int(found.group_sizes.sum()), found.estimate.n
    ((4, 8), 6000, 6000)
    """

    values: NDArray[np.int64]
    estimate: FrequencyEstimate
    epsilon: float
    prefix_bits: tuple[int, ...]
    group_sizes: NDArray[np.int64]

    @property
    def event(self) -> PrivacyEvent:
        """Privacy event of each device: one ``ε``-LDP report.

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._heavy_hitters import heavy_hitters
        >>> found = heavy_hitters(np.arange(100), epsilon=1.0, bits=8, k=1,
        ...                       source=InsecureSeededSource(0))
        >>> 1.0 - 1e-9 < found.event.epsilon <= 1.0
        True
        """
        return PureDPEvent(self.epsilon)


class _LocalHashing:
    """Optimised local hashing (WBLJ17, Section 4.4) over 64-bit keys, with per-device seeds."""

    def __init__(self, epsilon: float) -> None:
        e = math.exp(epsilon)
        self.g = max(2, round(e + 1))  # WBLJ17: g = e^eps + 1 minimises the variance
        lie = Fraction((self.g - 1) / (e + self.g - 1)) * _MARGIN
        scale = 2**_DENOMINATOR_BITS
        self.p = 1 - Fraction(max(1, math.ceil(lie * scale)), scale)  # <= e^eps/(e^eps+g-1)
        if self.p <= Fraction(1, self.g):
            raise InvalidParameterError(
                "epsilon", epsilon, "is too small for local hashing in float64 (use >= 1e-9)"
            )
        ratio = self.p * (self.g - 1) / (1 - self.p)
        self.epsilon = math.nextafter(math.log(ratio), math.inf)

    def privatize(
        self, keys: NDArray[np.uint64], source: RandomSource
    ) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
        """Each device: a fresh hash seed, its hashed key, then GRR over ``[g]``."""
        n = keys.size
        seeds = uniform_integers(1 << 63, n, source=source).astype(np.uint64)
        hashed = universal_hash(keys, seeds, self.g)
        keep = bernoulli(self.p, n, source=source)
        other = uniform_integers(self.g - 1, n, source=source)
        lie = other + (other >= hashed)  # uniform over the g - 1 other buckets
        return seeds, np.where(keep, hashed, lie)

    def estimate(
        self,
        candidates: NDArray[np.uint64],
        seeds: NDArray[np.uint64],
        reports: NDArray[np.int64],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Unbiased counts ``(C_v - n/g) / (p - 1/g)`` and variances (research note D)."""
        n = seeds.size
        support = np.zeros(candidates.size, dtype=np.int64)
        rows = max(1, _BLOCK // max(1, candidates.size))
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            hashed = universal_hash(candidates[None, :], seeds[start:stop, None], self.g)
            support += np.count_nonzero(hashed == reports[start:stop, None], axis=0)
        p, q = float(self.p), 1.0 / self.g
        counts = ((support - n * q) / (p - q)).astype(np.float64)
        plug = np.clip(counts, 0.0, float(n))
        var = n * q * (1 - q) / (p - q) ** 2 + plug * (1 - p - q) / (p - q)
        return counts, np.clip(var, 0.0, None)


def heavy_hitters(
    values: object,
    *,
    epsilon: float,
    bits: int,
    k: int,
    extension_bits: int = 4,
    beam_width: int | None = None,
    source: RandomSource | None = None,
) -> HeavyHitters:
    r"""Find the ``k`` most frequent values of a ``2**bits`` domain under ``ε``-LDP (PEM).

    The prefix extending method of WLJ19 (Section 5) with OLH as frequency oracle (module
    docstring). Each device sends one OLH report about a prefix of its value, so each device
    is ``ε``-LDP (local DP: the neighbour relation is one device changing its value).

    Parameters
    ----------
    values : array_like of int
        One value per device, in ``[0, 2**bits)``.
    epsilon : float
        Local-DP epsilon of each device, ``0 < ε <= 20``.
    bits : int
        ``b``, the values' width, ``1 <= b <= 62``.
    k : int
        Number of heavy hitters to return, ``1 <= k <= 2**bits``.
    extension_bits : int
        ``η``, bits added per step (``>= 1``); more bits mean fewer groups (more devices each)
        but ``2**η`` times more candidates per step.
    beam_width : int, optional
        Prefixes kept after each step (``>= k``); default ``2 k`` (WLJ19 keep ``k``; a wider
        beam makes losing a heavy value's prefix at an early step less likely).
    source : RandomSource, optional
        Randomness (secure by default); ``InsecureSeededSource(seed)`` for simulations.

    Returns
    -------
    HeavyHitters

    Notes
    -----
    Short strings (up to 7 bytes) are found the same way once encoded as integers whose
    prefixes are the strings' prefixes: ``int.from_bytes(s.encode().ljust(L, b"\0"), "big")``
    with ``bits = 8 L``; decode the values found with ``v.to_bytes(L, "big").rstrip(b"\0")``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> from dpcurator.local._heavy_hitters import heavy_hitters
    >>> values = np.concatenate([np.full(40000, 2**31 + 7), np.arange(60000) * 65537])
    >>> found = heavy_hitters(values, epsilon=3.0, bits=32, k=1, source=InsecureSeededSource(1))
    >>> found.values.tolist(), found.prefix_bits
    ([2147483655], (4, 8, 12, 16, 20, 24, 28, 32))
    """
    eps = check_epsilon(epsilon)
    if eps > _MAX_EPSILON:
        raise InvalidParameterError("epsilon", epsilon, f"must be <= {_MAX_EPSILON:g}")
    width = check_integer(bits, "bits", minimum=1)
    if width > 62:
        raise InvalidParameterError("bits", bits, "must be <= 62")
    top = check_integer(k, "k", minimum=1)
    if top > 2**width:
        raise InvalidParameterError("k", k, f"must be <= 2**bits = {2**width}")
    step = check_integer(extension_bits, "extension_bits", minimum=1)
    if step > 16:
        raise InvalidParameterError("extension_bits", extension_bits, "must be <= 16")
    beam = 2 * top if beam_width is None else check_integer(beam_width, "beam_width", minimum=1)
    if beam < top:
        raise InvalidParameterError("beam_width", beam_width, f"must be >= k = {top}")
    src = resolve_source(source)
    data = check_values(values, 2**width)
    n = data.size

    start_bits = max(0, math.ceil(math.log2(top)))
    prefix_bits: list[int] = []
    s = start_bits
    while not prefix_bits or prefix_bits[-1] < width:
        s = min(width, s + step)
        prefix_bits.append(s)
    num_groups = len(prefix_bits)
    if n < 2 * num_groups:
        raise InvalidParameterError(
            "values", f"<{n} devices>", f"must hold at least {2 * num_groups} devices"
        )

    # client side: each device joins a random group and reports its prefix with OLH
    oracle = _LocalHashing(eps)
    groups = uniform_integers(num_groups, n, source=src)
    sizes = np.bincount(groups, minlength=num_groups).astype(np.int64)
    if int(sizes.min()) == 0:
        raise InvalidParameterError(
            "values", f"<{n} devices>", f"must fill each of the {num_groups} groups"
        )
    reports = []
    for t, length in enumerate(prefix_bits):
        prefixes = (data[groups == t] >> (width - length)).view(np.uint64)
        reports.append(oracle.privatize(prefixes, src))

    # server side: extend the kept prefixes step by step
    kept = np.zeros(1, dtype=np.int64)
    previous = 0
    counts = np.zeros(1)
    variances = np.zeros(1)
    candidates = kept
    for t, length in enumerate(prefix_bits):
        extension = np.arange(2 ** (length - previous), dtype=np.int64)
        candidates = ((kept[:, None] << (length - previous)) | extension[None, :]).reshape(-1)
        seeds, ys = reports[t]
        group_counts, group_var = oracle.estimate(candidates.view(np.uint64), seeds, ys)
        n_t = int(sizes[t])
        scale = n / n_t
        counts = group_counts * scale
        plug = np.clip(counts, 0.0, float(n))
        # OLH noise, scaled; plus the sampling of group t out of the population (hypergeometric)
        variances = group_var * scale**2 + plug * (1 - plug / n) * (n - n_t) / max(1, n - 1) * scale
        width_now = top if t == num_groups - 1 else beam
        order = np.argsort(-counts, kind="stable")[:width_now]
        kept = candidates[order]
        counts, variances = counts[order], variances[order]
        previous = length
    return HeavyHitters(
        values=kept,
        estimate=FrequencyEstimate(counts, variances, n),
        epsilon=oracle.epsilon,
        prefix_bits=tuple(prefix_bits),
        group_sizes=sizes,
    )
