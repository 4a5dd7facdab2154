r"""Distributed DP for federated learning: discrete Gaussian shares and a masked modular sum.

The third trust model of lecture 004 ("Distributed Differential Privacy", between central DP,
where the server sees clean updates, and local DP, where every client noises its own): each
client adds a *share* of the noise to its own update, the updates travel masked, and the server
learns only their sum, which carries the full noise. No party sees a clean update, and the
noise in the sum is that of central DP (up to the bound below), not ``sqrt(n)`` times more.

The distributed discrete Gaussian (Kairouz, Liu and Steinke, ICML 2021, "DDG")
    Client ``i`` clips its update to L2 norm ``C``, rounds it to the public grid ``2**-k Z``
    (:func:`quantize_update`: integers ``x_i``, ``||x_i||_2 <= Delta`` with ``Delta`` the grid
    sensitivity of :func:`~dpcurator.learn._torch_noise.grid_sensitivity`), adds
    ``Z_i ~ N_Z(0, sigma^2)^d`` drawn exactly by :func:`dpcurator.noise.discrete_gaussian`
    (:func:`noisy_share`), and reduces the result modulo ``M = 2**b`` (:func:`to_ring`). The
    sum of ``n`` such shares, ``sum_i Z_i``, is *not* a discrete Gaussian; KLS21 (Proposition 14,
    third bound) show that releasing ``sum_i x_i + sum_i Z_i`` is ``rho``-zCDP with

    .. math:: \rho = \frac12\Big(\frac{\Delta}{\sqrt{n}\,\sigma} + \tau\sqrt{d}\Big)^2,\qquad
              \tau = 10\sum_{k=1}^{n-1} e^{-2\pi^2\sigma^2 k/(k+1)}

    (:func:`ddg_rho`; for ``n = 1``, ``tau = 0`` and this is CKS20's discrete Gaussian). On the
    grids used here ``sigma`` is thousands of grid units and ``tau`` underflows to 0: the sum
    is as private as one central discrete Gaussian of variance ``n sigma^2``.
    The guarantee is for the *zero-out* neighbour relation (one client's data replaced by data
    whose update is zero; Kairouz et al. 2021), which is what user-level DP means when the set
    of participating clients is known to the server; ``2 Delta`` gives replace-one.
    Reduction modulo ``M`` is post-processing of the sum; it costs accuracy only when the sum
    leaves ``[-M/2, M/2)``, which :func:`ring_bits` makes happen with probability below
    ``2**-40`` per round.

Why the discrete Gaussian and not Skellam (Agarwal, Kairouz and Liu, NeurIPS 2021)
    A sum of Skellam variables is exactly Skellam, which makes its accounting exact under any
    number of survivors; but :mod:`dpcurator.noise` (the only source of privacy randomness in
    this project) has an exact, vectorised discrete Gaussian sampler and no Poisson sampler, and
    at the noise levels federated training needs (``sigma`` of thousands of grid units) the DDG
    bound above is the central discrete Gaussian's ``rho`` to within a term below ``1e-300``,
    whereas Skellam's RDP bound carries a ``1/mu^2`` correction. Dropouts are handled by
    accounting for the number of shares actually summed (``n`` survivors).

Secure aggregation (:class:`MaskingKey`, :func:`unmask_sum`, :func:`secure_sum`)
    Pairwise additive masking modulo ``M`` (Bonawitz et al., CCS 2017, the semi-honest core of
    SecAgg): clients ``i < j`` agree on a key by X25519 Diffie-Hellman (private keys from
    :func:`dpcurator.noise.secret_bytes`), expand it with SHAKE-256 into a mask ``m_ij`` in
    ``Z_M^d``, and client ``i`` sends ``y_i + sum_{j > i} m_ij - sum_{j < i} m_ij (mod M)``.
    The masks cancel in the sum; each masked vector on its own is uniform on ``Z_M^d``. If
    some clients drop out after the key exchange, the survivors send the masks they share
    with them (:meth:`MaskingKey.correction`) and the server removes them. Threat model:
    an honest-but-curious server (and clients); unlike full SecAgg and Flower's SecAgg+, there
    are no self-masks and secret-shared keys, so a server that *lies* about who dropped out
    could unmask a client. That is the price of running over Flower's Message API (see
    :mod:`dpcurator.learn._flower`), where SecAgg+ is not available.

References
----------
P. Kairouz, Z. Liu, T. Steinke, "The Distributed Discrete Gaussian Mechanism for Federated
Learning with Secure Aggregation", ICML 2021, arXiv 2102.06387. N. Agarwal, P. Kairouz, Z. Liu,
"The Skellam Mechanism for Differentially Private Federated Learning", NeurIPS 2021.
K. Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving Machine Learning",
CCS 2017. C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020. Lecture 004 ("Distributed Differential Privacy").

Examples
--------
>>> import numpy as np
>>> from dpcurator.noise import InsecureSeededSource
>>> src = InsecureSeededSource(0)
>>> updates = {1: np.array([0.5, 0.0]), 2: np.array([0.0, 0.5]), 3: np.array([3.0, 4.0])}
>>> shares = {i: noisy_share(u, clip_norm=1.0, bits=8, sigma=2.0, source=src)
...           for i, u in updates.items()}
>>> total = secure_sum(shares, ring_bits=20, dropped=[3])  # client 3 dropped out
>>> bool((total == shares[1] + shares[2]).all())
True
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer, check_positive
from dpcurator.accounting import ZCDPEvent
from dpcurator.errors import InvalidParameterError, MissingDependencyError
from dpcurator.noise import RandomSource, discrete_gaussian, resolve_source, secret_bytes

__all__ = [
    "MAX_RING_BITS",
    "TRUST_MODELS",
    "MaskingKey",
    "ddg_event",
    "ddg_rho",
    "ddg_tau",
    "from_ring",
    "noisy_share",
    "quantize_update",
    "ring_bits",
    "secure_sum",
    "share_sigma",
    "to_ring",
    "unmask_sum",
]

TRUST_MODELS = ("central", "local", "distributed")
"""Who adds the noise: the server (central), each client alone (local), or each client a share
of it under secure aggregation (distributed)."""

MAX_RING_BITS = 62
"""Largest modulus exponent ``b`` (``M = 2**b``): sums stay exact in int64 and uint64."""

_MIN_SHARE_SIGMA = 1.0
"""Smallest noise share (grid units) accepted: KLS21's bounds are stated for sigma >= 1/2."""

_TAIL_BITS = 40
"""The ring is sized so that a round's sum wraps around with probability below 2**-40."""

_DOMAIN = b"dpcurator-secagg-v1"

IntArray = NDArray[np.int64]
RingArray = NDArray[np.uint64]


def ddg_tau(sigma: float, shares: int) -> float:
    r"""KLS21's ``tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k / (k + 1))``, rounded up.

    Parameters
    ----------
    sigma : float
        Each share's discrete Gaussian parameter (grid units), ``>= 1``.
    shares : int
        ``n``, the number of shares summed (``>= 1``; ``tau = 0`` for one share).

    Returns
    -------
    float

    Examples
    --------
    >>> ddg_tau(1.0, 1), ddg_tau(1000.0, 50)
    (0.0, 0.0)
    >>> 0.0 < ddg_tau(1.0, 2) < 1e-3
    True
    """
    s = _check_share_sigma(sigma)
    n = check_integer(shares, "shares", minimum=1)
    total = 0.0
    for k in range(1, n):
        # The exponent shrunk by 2**-40 (more than its rounding error): each term rounded up.
        exponent = 2.0 * math.pi**2 * s * s * k / (k + 1) * (1.0 - 2.0**-40)
        total += math.exp(-exponent)  # 0.0 once the exponent passes ~745 (below 5e-324)
    return math.nextafter(10.0 * total * (1.0 + 2.0**-40), math.inf) if total > 0 else 0.0


def ddg_rho(*, sigma: float, sensitivity: float, shares: int, dimension: int) -> float:
    r"""Return the zCDP ``rho`` of a sum of ``n`` discrete Gaussian shares (KLS21, Prop. 14).

    ``rho = (Delta / (sqrt(n) sigma) + tau sqrt(d))^2 / 2`` with ``tau`` from :func:`ddg_tau`,
    for an integer vector query of L2 sensitivity ``Delta`` (zero-out neighbours) to which each
    of ``n`` parties adds ``N_Z(0, sigma^2)^d``. Rounded up.

    Parameters
    ----------
    sigma : float
        Each share's parameter (grid units), ``>= 1``.
    sensitivity : float
        ``Delta``, the L2 sensitivity in grid units.
    shares : int
        ``n``, the number of shares in the released sum.
    dimension : int
        ``d``.

    Returns
    -------
    float

    Examples
    --------
    >>> round(ddg_rho(sigma=100.0, sensitivity=100.0, shares=4, dimension=10), 6)  # 1/(2*4)
    0.125
    """
    s = _check_share_sigma(sigma)
    delta = check_positive(sensitivity, "sensitivity")
    n = check_integer(shares, "shares", minimum=1)
    d = check_integer(dimension, "dimension", minimum=1)
    root = delta / (math.sqrt(n) * s) + ddg_tau(s, n) * math.sqrt(d)
    return math.nextafter(0.5 * root * root * (1.0 + 2.0**-48), math.inf)


def ddg_event(*, sigma: float, sensitivity: float, shares: int, dimension: int) -> ZCDPEvent:
    """Return the privacy event of one released DDG sum: ``ZCDPEvent(ddg_rho(...))``.

    Any accountant that takes zCDP events (``"zcdp"``, ``"rdp"``) composes it.

    Examples
    --------
    >>> ddg_event(sigma=100.0, sensitivity=100.0, shares=1, dimension=1).rho > 0.5
    True
    """
    return ZCDPEvent(
        ddg_rho(sigma=sigma, sensitivity=sensitivity, shares=shares, dimension=dimension)
    )


def share_sigma(sigma: float, shares: int) -> float:
    """Return the smallest float ``s`` with ``n s^2 >= sigma^2`` exactly (a share's noise).

    If at least ``n`` shares end up in the sum, its noise has variance parameter at least
    ``sigma^2`` (the comparison is exact, in rationals).

    Examples
    --------
    >>> share_sigma(4.0, 4)
    2.0
    >>> s = share_sigma(10.0, 3)
    >>> 3 * s * s >= 100.0
    True
    """
    target = Fraction(check_positive(sigma, "sigma")) ** 2
    n = check_integer(shares, "shares", minimum=1)
    s = sigma / math.sqrt(n)
    while n * Fraction(s) ** 2 < target:
        s = math.nextafter(s, math.inf)
    return s


def ring_bits(*, sensitivity: float, sigma: float, shares: int, dimension: int) -> int:
    """Bits ``b`` of the modulus ``M = 2**b`` so that a round's sum wraps with prob. < 2**-40.

    Each coordinate of the true sum is at most ``n Delta`` in absolute value, and the noise
    ``sum_i Z_i`` is sub-Gaussian with variance proxy ``n sigma^2`` (CKS20, Corollary 9), so
    ``|sum| < n Delta + sigma sqrt(2 n ln(2 d 2**40))`` for every coordinate except with
    probability ``2**-40``; ``M/2`` is the next power of two above that.

    Examples
    --------
    >>> ring_bits(sensitivity=2.0**16, sigma=2.0**16, shares=10, dimension=100)
    23
    """
    delta = check_positive(sensitivity, "sensitivity")
    s = check_positive(sigma, "sigma")
    n = check_integer(shares, "shares", minimum=1)
    d = check_integer(dimension, "dimension", minimum=1)
    tail = s * math.sqrt(2.0 * n * (math.log(2.0 * d) + _TAIL_BITS * math.log(2.0)))
    bound = (n * delta + tail) * (1.0 + 2.0**-20) + 1.0
    bits = math.frexp(bound)[1] + 1  # 2**(bits - 1) > bound
    if bits > MAX_RING_BITS:
        raise InvalidParameterError(
            "ring_bits",
            bits,
            f"must be <= {MAX_RING_BITS}: use a coarser grid, fewer clients or less noise",
        )
    return bits


def quantize_update(update: Any, *, clip_norm: float, bits: int) -> IntArray:
    """Clip an update to L2 norm ``C`` and round it to the grid ``2**-bits Z`` (integers).

    ``round(u * 2**k * min(1, C / ||u||))`` in float64, rounding half to even; an update that
    is not finite becomes zero (an error would be a data-dependent signal). The result's L2
    norm is at most :func:`~dpcurator.learn._torch_noise.grid_sensitivity` ``(C, d, k)`` (the
    same float64 rule as :func:`~dpcurator.learn._torch_noise.clipped_grid_sum`).

    Examples
    --------
    >>> quantize_update([30.0, 40.0], clip_norm=1.0, bits=2).tolist()
    [2, 3]
    """
    u = np.asarray(update, dtype=np.float64).reshape(-1)
    c = check_positive(clip_norm, "clip_norm")
    k = check_integer(bits, "bits")
    if u.size == 0:
        raise InvalidParameterError("update", "<empty>", "must have at least one coordinate")
    norm = float(np.linalg.norm(u))
    if not math.isfinite(norm):
        return np.zeros(u.size, dtype=np.int64)
    scale = math.ldexp(c, k) / norm if norm > c else math.ldexp(1.0, k)
    return np.rint(u * scale).astype(np.int64)


def noisy_share(
    update: Any,
    *,
    clip_norm: float,
    bits: int,
    sigma: float,
    source: RandomSource | None = None,
) -> IntArray:
    r"""One client's noisy contribution: ``quantize_update(u) + N_Z(0, sigma^2)^d`` (integers).

    In the local model this is what the client releases (``sigma`` calibrated alone); in the
    distributed model it is the client's share, reduced modulo ``M`` and masked before it
    leaves the client. The noise comes from :func:`dpcurator.noise.discrete_gaussian` (exact).

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> share = noisy_share([0.1, 0.2], clip_norm=1.0, bits=4, sigma=3.0,
    ...                     source=InsecureSeededSource(1))
    >>> share.dtype, share.shape
    (dtype('int64'), (2,))
    """
    x = quantize_update(update, clip_norm=clip_norm, bits=bits)
    s = _check_share_sigma(sigma)
    noise = discrete_gaussian(s, x.size, source=resolve_source(source))
    return x + noise


def to_ring(values: Any, bits: int) -> RingArray:
    """Reduce integers modulo ``M = 2**bits`` into ``[0, M)`` (uint64).

    Examples
    --------
    >>> to_ring([-1, 0, 5], 4).tolist()
    [15, 0, 5]
    """
    b = _check_ring_bits(bits)
    x = np.asarray(values, dtype=np.int64)
    return x.astype(np.uint64) & np.uint64((1 << b) - 1)


def from_ring(values: Any, bits: int) -> IntArray:
    """Return the centred representatives in ``[-M/2, M/2)`` of residues modulo ``2**bits``.

    Examples
    --------
    >>> from_ring([15, 0, 5], 4).tolist()
    [-1, 0, 5]
    """
    b = _check_ring_bits(bits)
    mask = np.uint64((1 << b) - 1)
    x = np.asarray(values, dtype=np.uint64) & mask
    out = x.astype(np.int64)
    out[out >= (1 << (b - 1))] -= 1 << b
    return out


class MaskingKey:
    """One client's key for pairwise masking (X25519 agreement, SHAKE-256 masks modulo 2**b).

    Parameters
    ----------
    private_bytes : bytes, optional
        A 32-byte X25519 private key (to restore a key kept between two messages); a fresh
        one from :func:`dpcurator.noise.secret_bytes` if omitted.

    Examples
    --------
    >>> a, b = MaskingKey(), MaskingKey()
    >>> x = to_ring([1, 2, 3], 16); y = to_ring([10, 20, 30], 16)
    >>> ma = a.mask(x, own=1, peers={2: b.public_bytes}, round=1, bits=16)
    >>> mb = b.mask(y, own=2, peers={1: a.public_bytes}, round=1, bits=16)
    >>> unmask_sum([ma, mb], [], bits=16).tolist()
    [11, 22, 33]
    """

    def __init__(self, private_bytes: bytes | None = None) -> None:
        x25519 = _x25519()
        raw = secret_bytes(32) if private_bytes is None else private_bytes
        if not isinstance(raw, bytes) or len(raw) != 32:
            raise InvalidParameterError("private_bytes", "<bytes>", "must be 32 bytes")
        self._key = x25519.X25519PrivateKey.from_private_bytes(raw)
        self._raw = raw

    @property
    def private_bytes(self) -> bytes:
        """The raw private key (keep it on the client)."""
        return self._raw

    @property
    def public_bytes(self) -> bytes:
        """The raw 32-byte public key (sent to the peers through the server)."""
        raw: bytes = self._key.public_key().public_bytes_raw()
        return raw

    def _pair_mask(self, peer: bytes, round: int, dimension: int, bits: int) -> RingArray:
        x25519 = _x25519()
        if not isinstance(peer, bytes) or len(peer) != 32:
            raise InvalidParameterError("peers", "<bytes>", "must map ids to 32-byte keys")
        secret = self._key.exchange(x25519.X25519PublicKey.from_public_bytes(peer))
        stream = hashlib.shake_256(_DOMAIN + secret + round.to_bytes(8, "little")).digest(
            8 * dimension
        )
        words = np.frombuffer(stream, dtype="<u8").astype(np.uint64)
        return words & np.uint64((1 << bits) - 1)

    def _signed_masks(
        self, own: int, peers: Mapping[int, bytes], round: int, dimension: int, bits: int
    ) -> RingArray:
        total = np.zeros(dimension, dtype=np.uint64)
        for peer_id, peer_key in peers.items():
            if int(peer_id) == own:
                continue
            mask = self._pair_mask(peer_key, round, dimension, bits)
            total = total + mask if own < int(peer_id) else total - mask  # uint64 wraps
        return total & np.uint64((1 << bits) - 1)

    def mask(
        self, values: Any, *, own: int, peers: Mapping[int, bytes], round: int, bits: int
    ) -> RingArray:
        """``values + sum_{j > own} m_j - sum_{j < own} m_j (mod 2**bits)`` over the peers.

        ``peers`` maps every other participant's id to its public key (the own id is skipped);
        ``round`` separates the masks of different rounds.
        """
        b = _check_ring_bits(bits)
        x = to_ring(values, b)
        own_id = check_integer(own, "own")
        r = check_integer(round, "round", minimum=0)
        return (x + self._signed_masks(own_id, peers, r, x.size, b)) & np.uint64((1 << b) - 1)

    def correction(
        self, *, own: int, dropped: Mapping[int, bytes], round: int, dimension: int, bits: int
    ) -> RingArray:
        """Return the masks this client shares with those that ``dropped`` out (to subtract)."""
        b = _check_ring_bits(bits)
        d = check_integer(dimension, "dimension", minimum=1)
        own_id = check_integer(own, "own")
        return self._signed_masks(own_id, dropped, check_integer(round, "round"), d, b)


def unmask_sum(masked: Iterable[Any], corrections: Iterable[Any], *, bits: int) -> IntArray:
    """Unmask on the server: ``sum(masked) - sum(corrections) (mod 2**bits)``, centred.

    With every survivor's masked vector and every survivor's correction for the dropped
    clients, the masks cancel and the result is the sum of the survivors' inputs (as long as
    it lies in ``[-M/2, M/2)``).

    Examples
    --------
    >>> unmask_sum([to_ring([3], 8), to_ring([-5], 8)], [], bits=8).tolist()
    [-2]
    """
    b = _check_ring_bits(bits)
    rows = [np.asarray(m, dtype=np.uint64) for m in masked]
    if not rows:
        raise InvalidParameterError("masked", "<empty>", "must hold at least one vector")
    total = np.zeros(rows[0].shape, dtype=np.uint64)
    for row in rows:
        if row.shape != total.shape:
            raise InvalidParameterError("masked", row.shape, f"must all have shape {total.shape}")
        total = total + row
    for fix in corrections:
        total = total - np.asarray(fix, dtype=np.uint64)
    return from_ring(total, b)


def secure_sum(
    shares: Mapping[int, Any], *, ring_bits: int, dropped: Iterable[int] = (), round: int = 0
) -> IntArray:
    """Run the masked modular sum among ``shares``' owners, in process; returns the sum.

    Every owner makes a :class:`MaskingKey` and takes part in the key exchange; the owners in
    ``dropped`` then send nothing, the survivors send their masked shares and their
    corrections, and the server unmasks. The result is ``sum`` over the survivors of their
    shares (centred modulo ``2**ring_bits``); the server code path never holds an unmasked
    individual share.

    Examples
    --------
    >>> secure_sum({1: [1, -2], 2: [5, 5], 3: [7, 7]}, ring_bits=8, dropped=[2]).tolist()
    [8, 5]
    """
    b = _check_ring_bits(ring_bits)
    ids = sorted(int(i) for i in shares)
    gone = {int(i) for i in dropped}
    if not ids or not gone <= set(ids) or gone == set(ids):
        raise InvalidParameterError(
            "dropped", sorted(gone), "must name some, not all, of the clients with shares"
        )
    keys = {i: MaskingKey() for i in ids}
    public = {i: keys[i].public_bytes for i in ids}
    survivors = [i for i in ids if i not in gone]
    masked = [keys[i].mask(shares[i], own=i, peers=public, round=round, bits=b) for i in survivors]
    lost = {j: public[j] for j in sorted(gone)}
    dimension = int(masked[0].size)
    fixes = (
        [
            keys[i].correction(own=i, dropped=lost, round=round, dimension=dimension, bits=b)
            for i in survivors
        ]
        if lost
        else []
    )
    return unmask_sum(masked, fixes, bits=b)


def _check_share_sigma(sigma: float) -> float:
    s = check_positive(sigma, "sigma")
    if s < _MIN_SHARE_SIGMA:
        raise InvalidParameterError(
            "sigma", sigma, "must be >= 1 grid unit per share: use more noise or fewer clients"
        )
    return s


def _check_ring_bits(bits: int) -> int:
    b = check_integer(bits, "ring_bits", minimum=2)
    if b > MAX_RING_BITS:
        raise InvalidParameterError("ring_bits", bits, f"must be <= {MAX_RING_BITS}")
    return b


def _x25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import x25519  # noqa: PLC0415
    except ModuleNotFoundError as missing:  # pragma: no cover - shipped with flwr
        raise MissingDependencyError(
            "distributed DP (secure aggregation)", "cryptography", "federated"
        ) from missing
    return x25519
