"""The privacy loss distribution (PLD) accountant: tight (epsilon, delta) by FFT composition.

Each event is reduced to a dominating pair (P, Q) (:mod:`._profiles`) whose privacy loss
``L = ln(dP/dQ)`` under P is discretised on the grid ``{i h}`` by *connect the dots*
(Doroshenko, Ghazi, Kamath, Kumar and Manurangsi, "Connect the Dots: Tighter Discrete
Approximations of Privacy Loss Distributions", PETS 2022): with grid losses ``eps_i``, profile
values ``delta_i`` and ``alpha_i = e^{eps_i}``, the chord slopes
``s_j = (delta_j - delta_{j+1}) / (alpha_{j+1} - alpha_j)``, ``s_{-1} = (1 - delta_0)/alpha_0`` and
``s_k = 0`` put Q-mass ``s_{i-1} - s_i`` and P-mass ``alpha_i (s_{i-1} - s_i)`` on ``eps_i`` and
P-mass ``delta_k`` on ``+inf``. The hockey-stick curve is convex in ``alpha``, so the chord
interpolation lies above it: the discrete pair dominates the event, and dominating pairs compose
(Zhu, Dong and Wang 2022, Theorem 10). Equivalently, each cell's P- and Q-mass is split between
its two end points so that both are preserved; that is how the masses are computed here, from
tail probabilities (no second differences, so no cancellation).

Composition is a convolution of the finite parts; masses at ``+inf`` compose as
``1 - prod(1 - m)``. Distributions on few nodes (pure and approximate DP, randomized response)
are convolved directly and exactly; the others with one real FFT per distinct event and one
power per count (Koskela, Jälkö and Honkela 2020). The FFT window is placed with Chernoff
bounds computed on the discretised PLDs themselves: the mass that could fall above the window
is bounded and added to the mass at ``+inf``; the mass below it only matters for epsilons below
the window. Before the FFT the masses are exponentially tilted (``p_i e^{lam l_i}``; a
convolution commutes with the tilt), which moves the FFT's relative precision from the bulk of
the distribution to its upper tail, where small deltas are decided. The floating-point error of
the FFT is bounded (Higham 2002, Sec. 24.1, propagated through the powers) and that bound is
added to every delta reported. So every epsilon (delta) reported is an upper bound, including
round-off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import fft as sp_fft
from scipy import signal

from dpcurator._validation import check_positive, check_probability
from dpcurator.accounting._accountant import Accountant
from dpcurator.accounting._events import ComposedEvent, PrivacyEvent, SelfComposedEvent
from dpcurator.accounting._profiles import (
    FloatArray,
    Orientation,
    _AtomicPair,
    _BoundedCache,
    _f64,
    _LossPair,
    _pair_for,
    _SplicedPair,
    _TailPair,
)
from dpcurator.errors import InternalError, InvalidParameterError

__all__ = ["PLDAccountant"]

#: Exponents of the Chernoff bounds that place the FFT window.
_LAMBDAS = _f64(2.0 ** np.arange(-10, 15))
#: Each event's grid ends where its delta is below ``tail_mass * _UPPER_CUT``; what lies above
#: goes to ``+inf``, so even 2^20 composed events add at most ``tail_mass`` to delta this way.
_UPPER_CUT = 2.0**-20
#: Largest grid (per event and per FFT window); beyond it the grid step is doubled.
_MAX_NODES = 1 << 22


@dataclass(frozen=True, slots=True)
class _DiscretePLD:
    """P-masses on the nodes ``(offset + i) h`` and on ``+inf``, with what composition needs.

    ``log_mgf_pos``/``log_mgf_neg`` are ``log sum_i p_i e^{+-lam l_i}`` at ``_LAMBDAS``
    (Chernoff bounds), ``variance`` the variance of the finite part (it sets the tilt).
    """

    h: float
    offset: int
    masses: FloatArray
    log_masses: FloatArray
    inf_mass: float
    log_mgf_pos: FloatArray
    log_mgf_neg: FloatArray
    variance: float

    @property
    def top(self) -> int:
        return self.offset + self.masses.size - 1

    @property
    def losses(self) -> FloatArray:
        return _f64((self.offset + np.arange(self.masses.size)) * self.h)

    def log_mgf(self, lam: float) -> float:
        """``log sum_i p_i e^{lam l_i}`` over the finite part."""
        grid = np.flatnonzero(lam == _LAMBDAS)
        if grid.size:
            return float(self.log_mgf_pos[grid[0]])
        return float(_log_mgf(self.masses, self.offset, self.h, _f64([lam]))[0])


def _finish(h: float, offset: int, masses: FloatArray, inf_mass: float) -> _DiscretePLD:
    """Clip round-off, trim zero ends, compute the Chernoff log-MGFs and moments, freeze."""
    masses = np.maximum(masses, 0.0)
    nonzero = np.flatnonzero(masses)
    if nonzero.size == 0:
        masses, offset = _f64([0.0]), 0
    else:
        masses = _f64(masses[nonzero[0] : nonzero[-1] + 1].copy())
        offset += int(nonzero[0])
    losses = _f64((offset + np.arange(masses.size)) * h)
    with np.errstate(divide="ignore"):
        log_m = np.log(masses)
    pos, neg = _log_mgf(masses, offset, h, _LAMBDAS), _log_mgf(masses, offset, h, -_LAMBDAS)
    total = float(np.sum(masses))
    variance = 0.0
    if total > 0:
        mean = float(np.sum(masses * losses)) / total
        variance = float(np.sum(masses * (losses - mean) ** 2)) / total
    masses.flags.writeable = False
    log_m.flags.writeable = False
    inf_mass = min(max(inf_mass, 0.0), 1.0)
    return _DiscretePLD(h, offset, masses, _f64(log_m), inf_mass, pos, neg, variance)


def _log_mgf(masses: FloatArray, offset: int, h: float, lambdas: FloatArray) -> FloatArray:
    """Upper bounds on ``log sum_i m_i e^{lam l_i}``, ``l_i = (offset + i) h``, per ``lam``.

    Each exponential is anchored at the end that dominates (the largest loss for ``lam > 0``,
    the smallest for ``lam < 0``; both carry positive mass), so nothing overflows. Terms with a
    factor below ``1e-150`` are replaced by their bound ``1e-150 (n + 1)`` in total, which
    keeps every product a normal float (subnormal arithmetic is slow).
    """
    n = masses.size
    out = np.empty(lambdas.size)
    distance = np.arange(n) * h
    floor = 1e-150
    slack = floor * (n + 1)
    ends = {1.0: (masses[::-1], (offset + n - 1) * h), -1.0: (masses, offset * h)}
    weights = {
        side: np.where(w >= floor, w, 0.0) if bool(np.any(w < floor)) else np.ascontiguousarray(w)
        for side, (w, _a) in ends.items()
    }
    for k, lam in enumerate(lambdas):
        side = 1.0 if lam >= 0 else -1.0
        anchor = ends[side][1]
        rate = abs(float(lam))
        reach = n if rate == 0 else min(n, int(345.0 / (rate * h)) + 1)  # e^{-345} > 1e-150
        terms = np.exp(-rate * distance[:reach]) * weights[side][:reach]
        total = float(np.sum(terms)) + slack  # (no BLAS: its threads contend on small hosts)
        out[k] = lam * anchor + math.log(total)
    return out


def _ctd_tails(pair: _TailPair, o: Orientation, h: float, i0: int, i1: int) -> _DiscretePLD:
    """Connect the dots from tail probabilities, cell by cell (P and Q mass preserved)."""
    eps = _f64(np.arange(i0, i1 + 1) * h)
    s1, s2 = pair.tails(eps, o)
    p_cell = np.maximum(s1[:-1] - s1[1:], 0.0)
    q_cell = np.maximum(s2[:-1] - s2[1:], 0.0)
    with np.errstate(divide="ignore", over="ignore"):
        alpha_q = np.exp(eps[:-1] + np.log(q_cell))
    # P-mass sent to the right end point of each cell: alpha_{j+1} theta Q_cell.
    right = np.clip((p_cell - alpha_q) / -math.expm1(-h), 0.0, p_cell)
    masses = np.zeros(eps.size)
    masses[:-1] += p_cell - right
    masses[1:] += right
    masses[0] += max(1.0 - float(s1[0]), 0.0)  # everything below eps_0 sits on eps_0
    with np.errstate(divide="ignore", over="ignore"):
        masses[-1] += float(np.exp(eps[-1] + np.log(s2[-1])))
    inf_mass = float(pair.profile(eps[-1:], o)[0])
    return _finish(h, i0, _f64(masses), inf_mass)


def _ctd_atoms(pair: _AtomicPair, o: Orientation, h: float, i0: int, i1: int) -> _DiscretePLD:
    """Connect the dots for finitely many atoms: each atom splits between its two nodes."""
    loss, p, inf_mass = pair.atoms(o)
    n = i1 - i0 + 1
    lo, hi = i0 * h, i1 * h
    masses = np.zeros(n)
    below, above = loss <= lo, loss >= hi
    masses[0] += float(np.sum(p[below]))
    keep = np.exp(hi - loss[above])
    masses[-1] += float(np.sum(p[above] * keep))
    inf_mass += float(np.sum(p[above] * -np.expm1(hi - loss[above])))
    mid = ~below & ~above
    lm, pm = loss[mid], p[mid]
    j = np.clip(np.floor(lm / h).astype(np.int64) - i0, 0, n - 2)
    j -= (lm < (i0 + j) * h) & (j > 0)
    j += (lm >= (i0 + j + 1) * h) & (j < n - 2)
    theta = np.clip(-np.expm1((i0 + j) * h - lm) / -math.expm1(-h), 0.0, 1.0)
    masses += np.bincount(j, weights=pm * (1 - theta), minlength=n)
    masses += np.bincount(j + 1, weights=pm * theta, minlength=n)
    return _finish(h, i0, _f64(masses), inf_mass)


def _grid(pair: _LossPair, o: Orientation, h: float, tail: float) -> tuple[int, int]:
    """Node range ``[i0, i1]`` of an event's discretisation."""
    if isinstance(pair, _SplicedPair):
        a0, a1 = _grid(pair.poisson, "add", h, tail)
        b0, b1 = _grid(pair.poisson, "remove", h, tail)
        return min(a0, b0, -1), max(a1, b1, 1)
    if isinstance(pair, _AtomicPair | _TailPair):
        lo, hi = pair.loss_range(o, tail, tail * _UPPER_CUT)
        i0 = math.floor(lo / h)
        return i0, max(math.ceil(hi / h), i0 + 1)
    raise InternalError(f"unknown pair {pair!r}")  # pragma: no cover


def _discretise_pair(pair: _LossPair, o: Orientation, h: float, tail: float) -> _DiscretePLD:
    if isinstance(pair, _SplicedPair):
        return _ctd_splice(pair, h, tail)
    i0, i1 = _grid(pair, o, h, tail)
    if isinstance(pair, _AtomicPair):
        return _ctd_atoms(pair, o, h, i0, i1)
    if isinstance(pair, _TailPair):
        return _ctd_tails(pair, o, h, i0, i1)
    raise InternalError(f"unknown pair {pair!r}")  # pragma: no cover


def _ctd_splice(pair: _SplicedPair, h: float, tail: float) -> _DiscretePLD:
    """Connect the dots of the spliced profile (add curve below 0, remove curve above).

    Node masses away from 0 are those of each side's own discretisation (they depend on the
    curve at the node and its two neighbours only). At 0 the Q-mass is the chord slope on the
    left minus the one on the right, ``s_{-1} - s_0``; by telescoping ``s_{-1}`` is the left
    curve's Q-mass on nodes >= 0 and ``s_0`` the right curve's Q-mass on nodes >= 1.
    """
    inner = pair.poisson
    parts = {}
    for o in ("add", "remove"):
        i0, i1 = _grid(inner, o, h, tail)
        i0, i1 = min(i0, -1), max(i1, 1)
        if isinstance(inner, _AtomicPair):
            parts[o] = _ctd_atoms(inner, o, h, i0, i1)
        elif isinstance(inner, _TailPair):
            parts[o] = _ctd_tails(inner, o, h, i0, i1)
        else:  # pragma: no cover
            raise InternalError(f"unknown pair {inner!r}")
    left, right = parts["add"], parts["remove"]
    ln = left.offset + np.arange(left.masses.size)
    rn = right.offset + np.arange(right.masses.size)
    q_left = math.fsum(left.masses[ln >= 0] * np.exp(-ln[ln >= 0] * h))
    q_right = math.fsum(right.masses[rn >= 1] * np.exp(-rn[rn >= 1] * h))
    lo = min(left.offset, 0)
    hi = max(right.top, 0)
    masses = np.zeros(hi - lo + 1)
    keep_left = ln < 0
    masses[ln[keep_left] - lo] += left.masses[keep_left]
    keep_right = rn > 0
    masses[rn[keep_right] - lo] += right.masses[keep_right]
    masses[-lo] += max(q_left - q_right, 0.0)
    return _finish(h, lo, _f64(masses), right.inf_mass)


def _discretise_key(key: tuple[PrivacyEvent, Orientation, float, float]) -> _DiscretePLD:
    event, o, h, tail = key
    pair = _pair_for(event)
    return _discretise_pair(pair, "remove" if pair.symmetric else o, h, tail)


_discretised: _BoundedCache[tuple[PrivacyEvent, Orientation, float, float], _DiscretePLD] = (
    _BoundedCache(_discretise_key, lambda pld: 2 * pld.masses.size + 64, 1 << 24)
)


def _discretise_event(event: PrivacyEvent, o: Orientation, h: float, tail: float) -> _DiscretePLD:
    """Return the connect-the-dots PLD of one event (cached; events are hashable)."""
    pair = _pair_for(event)
    return _discretised((event, "remove" if pair.symmetric else o, h, tail))


# ---------------------------------------------------------------------------------------------
# Composition and queries
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _ComposedPLD:
    """A composed PLD, ready for queries.

    ``suffix[j] = sum_{i>=j} p_i e^{(j-i)h}`` and ``deltas[j] = delta(l_j)``;
    ``allowance[j]`` (length ``size + 1``) bounds the floating-point error of the masses on the
    nodes ``i >= j`` and is added to every delta reported; ``at_nodes[j] = deltas[j] +
    allowance[j + 1]`` is what is reported at node ``j``.
    """

    h: float
    offset: int
    masses: FloatArray
    inf_mass: float
    suffix: FloatArray
    deltas: FloatArray
    allowance: FloatArray
    at_nodes: FloatArray

    @classmethod
    def build(
        cls,
        h: float,
        offset: int,
        masses: FloatArray,
        inf_mass: float,
        allowance: FloatArray | None = None,
    ) -> _ComposedPLD:
        n = masses.size
        # Reversed order (from the top node down): S by a first-order recursion, D by a sum.
        backward = signal.lfilter([1.0], [1.0, -math.exp(-h)], masses[::-1])
        deltas_back = np.empty(n)
        deltas_back[0] = 0.0
        np.cumsum(backward[:-1], out=deltas_back[1:])
        deltas_back *= -math.expm1(-h)
        deltas_back += inf_mass
        full = np.zeros(n + 1)
        if allowance is not None:
            full[:-1] = allowance
        deltas = deltas_back[::-1]
        at_nodes = deltas + full[1:]
        suffix = _f64(backward[::-1])
        return cls(h, offset, masses, inf_mass, suffix, _f64(deltas), _f64(full), _f64(at_nodes))

    def _first_above(self, eps: float) -> int:
        """Index of the first node strictly above ``eps`` (may be 0 or ``size``)."""
        j = min(max(math.floor(eps / self.h) + 1 - self.offset, 0), self.masses.size)
        while j > 0 and (self.offset + j - 1) * self.h > eps:
            j -= 1
        while j < self.masses.size and (self.offset + j) * self.h <= eps:
            j += 1
        return j

    def delta(self, eps: float) -> float:
        """Return ``sum_{l_i > eps} p_i (1 - e^{eps - l_i}) + m_inf`` plus the allowance."""
        j = self._first_above(eps)
        if j >= self.masses.size:
            return self.inf_mass
        node = (self.offset + j) * self.h
        cell = self.suffix[j] * -math.expm1(min(eps - node, 0.0))
        return float(self.deltas[j] + cell + self.allowance[j])

    def epsilon(self, delta: float) -> float:
        """Smallest eps with ``delta(eps) <= delta``: exact inversion between two nodes.

        On ``[l_{j-1}, l_j)`` the set ``{l_i > eps}`` is fixed and
        ``delta(eps) = D_j + A_j + S_j (1 - e^{eps - l_j})``, so
        ``eps = l_j + ln(1 - (delta - D_j - A_j) / S_j)``.
        """
        if self.inf_mass > delta:
            return math.inf
        count = int(np.searchsorted(self.at_nodes[::-1], delta, side="right"))
        j = self.masses.size - count
        node = (self.offset + j) * self.h
        slack = delta - float(self.deltas[j]) - float(self.allowance[j])
        if slack < 0:
            return node  # node j's own allowance is what keeps delta above target below it
        s = float(self.suffix[j])
        if s <= 0.0:
            return -math.inf if j == 0 else node
        frac = slack / s
        if frac >= 1.0:
            return -math.inf
        eps = node + math.log1p(-frac)
        # eps is stored to 1 ulp; where delta is steep that ulp matters: step up until the
        # reported delta is within target (the node itself always is).
        for _ in range(8):
            if self.delta(eps) <= delta:
                return eps
            eps = math.nextafter(eps, math.inf)
        return node


# Componentwise bound on the floating-point error of a length-n FFT, per unit of l1-norm of
# its input, per stage: each of the ~log2(n) butterfly stages (twiddle factors included) adds
# at most a few ulps (Higham, Accuracy and Stability of Numerical Algorithms, 2002, Sec. 24.1);
# 10 leaves a margin for pocketfft's mixed radices.
_FFT_ULPS_PER_STAGE = 10.0
_UNIT_ROUNDOFF = 2.0**-53
#: Composed masses below this are set to 0 (subnormal arithmetic is slow); the allowance
#: covers them.
_FLUSH = 1e-280
#: The tilt centres the FFT's relative precision near the loss whose upper tail is about
#: _TILT_TAIL, and at most _TILT_SIGMAS standard deviations above the mean: half-way between
#: the bulk (delta ~ 1/2) and delta ~ 1e-15, so that the error bound stays small on both.
_TILT_TAIL = 1e-6
_TILT_SIGMAS = 4.0
#: Largest tilted mass allowed above the window (it wraps around, amplified by the untilt),
#: and the room left above the Chernoff top for the tilted law (a fraction of the width).
_TILT_WRAP = 1e-10
_TILT_ROOM = 0.25
#: Largest ``lam * window width``: keeps every exponential of the (un)tilt in range.
_MAX_TILT_RANGE = 500.0


def _compose(items: list[tuple[_DiscretePLD, int]], h: float, tail: float) -> _ComposedPLD:
    """Convolve ``count`` copies of each PLD: directly when cheap, else in one FFT window.

    The masses are exponentially tilted, ``p_i -> p_i e^{lam l_i - K(lam)}``, before the FFT
    and untilted after it: convolution commutes with the tilt, and the FFT's absolute error
    (relative to the largest tilted mass) then falls where the upper tail of the composed loss
    is, so small deltas keep their relative accuracy. A bound on that error is kept as an
    allowance and added to every delta.
    """
    if not items:
        return _ComposedPLD.build(h, 0, _f64([1.0]), 0.0)
    if len(items) == 1 and items[0][1] == 1:  # nothing to convolve
        single = items[0][0]
        return _ComposedPLD.build(h, single.offset, single.masses, single.inf_mass)
    log_keep = math.fsum(c * math.log1p(-min(p.inf_mass, 1.0 - 1e-300)) for p, c in items)
    inf_mass = -math.expm1(log_keep)  # 1 - prod (1 - m_inf)^count
    direct = _compose_sparse(items, h, inf_mass)
    if direct is not None:
        return direct
    sup_lo = sum(c * p.offset for p, c in items)
    sup_hi = sum(c * p.top for p, c in items)
    plan = _window(items, h, tail, sup_lo, sup_hi)
    n, i_lo, lam = plan.size, plan.first, plan.tilt
    inf_mass += plan.outside
    inputs: list[tuple[FloatArray, float]] = []
    spectrum = np.ones(n // 2 + 1, dtype=np.complex128)
    power_ulps = np.zeros(n // 2 + 1)
    k_total = 0.0
    for pld, count in items:
        k_e = pld.log_mgf(lam)
        k_total += count * k_e
        # Exponents are clipped at -600: that can only add mass (never lose it), and it keeps
        # the FFT's arithmetic away from subnormal numbers, which are slow.
        x = np.exp(np.maximum(pld.log_masses + (lam * pld.losses - k_e), -600.0))
        if x.size > n:  # fold: circular convolution only needs the masses modulo n
            x = np.pad(x, (0, -x.size % n)).reshape(-1, n).sum(axis=0)
        f = np.fft.rfft(x, n=n)
        log_mag = np.log(np.maximum(np.abs(f), 1e-300))
        inputs.append((_f64(log_mag), math.sqrt(float(np.sum(x * x)))))
        if count > 1:  # f^count in polar form, only where it is not negligible
            scaled = count * log_mag
            live = scaled > -700.0
            powered = np.zeros_like(f)
            powered[live] = np.exp(scaled[live] + 1j * (count * np.angle(f[live])))
            f = powered
        power_ulps += count * (4.0 + np.abs(log_mag)) + 1.0
        spectrum *= f
    raw = np.fft.irfft(spectrum, n=n)
    eta_max, eta_two = _roundoff_bound(items, inputs, spectrum, power_ulps, n)
    tilted = np.roll(raw, sup_lo - i_lo)
    np.maximum(tilted, 0.0, out=tilted)
    tilted[: max(sup_lo - i_lo, 0)] = 0.0  # outside the true support: round-off only
    tilted[max(sup_hi - i_lo + 1, 0) :] = 0.0
    exponent = k_total - lam * ((i_lo + np.arange(n)) * h)
    untilt = np.exp(np.maximum(exponent, -700.0))  # finite: lam W <= _MAX_TILT_RANGE
    masses = tilted * untilt
    masses[masses < _FLUSH] = 0.0  # keeps later arithmetic normal; covered by the allowance
    # Allowance for the nodes i >= j (up to the support's top): the smaller of
    # max|e| sum_i w_i and ||e||_2 sqrt(sum_i w_i^2), with w_i = e^{K - lam l_i} (geometric).
    above = np.maximum(min(sup_hi - i_lo + 1, n) - np.arange(n), 0).astype(np.float64)
    if lam > 0:
        first = -np.expm1(-lam * h * above) / -math.expm1(-lam * h)
        second = np.sqrt(-np.expm1(-2 * lam * h * above) / -math.expm1(-2 * lam * h))
    else:
        first, second = above, np.sqrt(above)
    allowance = np.minimum(eta_max * first, eta_two * second) * untilt + _FLUSH * above
    return _ComposedPLD.build(h, i_lo, _f64(masses), min(inf_mass, 1.0), _f64(allowance))


#: Budget (multiply-adds) of the direct, sparse composition used for few-atom distributions.
_SPARSE_WORK = 4_000_000


def _compose_sparse(
    items: list[tuple[_DiscretePLD, int]], h: float, inf_mass: float
) -> _ComposedPLD | None:
    """Compose by direct sparse convolution (binary powers), or None if it would cost too much.

    Masses on few nodes (pure and approximate DP, randomized response, discrete Laplace and
    their compositions) are convolved exactly: every output is a sum of products of
    nonnegative numbers, with a relative error below ``(number of terms) u``, covered by
    scaling the result up by ``1 + 1e-9``. No FFT, so no round-off allowance is needed. The
    work is bounded beforehand (node counts never exceed the supports' widths).
    """
    Sparse = tuple[NDArray[np.int64], FloatArray]

    def product(a: Sparse, b: Sparse) -> Sparse:
        nodes = (a[0][:, None] + b[0][None, :]).ravel()
        lo = int(a[0][0] + b[0][0])
        dense = np.bincount(nodes - lo, weights=(a[1][:, None] * b[1][None, :]).ravel())
        where = np.flatnonzero(dense)
        return (where + lo).astype(np.int64), _f64(dense[where])

    # Bound the work first: (nodes, width) of the running product and of the base.
    work = 0
    size, width = 1, 1
    for pld, times in items:
        base_size, base_width = int(np.count_nonzero(pld.masses)), pld.masses.size
        count = times
        while count:
            if count & 1:
                work += size * base_size
                size, width = min(size * base_size, width + base_width - 1), width + base_width - 1
            count >>= 1
            if count:
                work += base_size * base_size
                base_size, base_width = min(base_size**2, 2 * base_width - 1), 2 * base_width - 1
            if work > _SPARSE_WORK:
                return None
    if width > _MAX_NODES:
        return None
    total: Sparse = (np.zeros(1, dtype=np.int64), _f64([1.0]))
    for pld, times in items:
        support = np.flatnonzero(pld.masses)
        base: Sparse = ((support + pld.offset).astype(np.int64), _f64(pld.masses[support]))
        count = times
        while count:  # binary powers
            if count & 1:
                total = product(total, base)
            count >>= 1
            if count:
                base = product(base, base)
    nodes, values = total
    lo, hi = int(nodes[0]), int(nodes[-1])
    masses = np.zeros(hi - lo + 1)
    masses[nodes - lo] = values * (1 + 1e-9)
    return _ComposedPLD.build(h, lo, _f64(masses), inf_mass)


def _roundoff_bound(
    items: list[tuple[_DiscretePLD, int]],
    inputs: list[tuple[FloatArray, float]],
    spectrum: NDArray[np.complex128],
    power_ulps: FloatArray,
    n: int,
) -> tuple[float, float]:
    """Bounds on the error ``e`` of the tilted output masses: ``max |e_k|`` and ``||e||_2``.

    ``inputs`` holds, per event, ``log |X_e|`` on the half spectrum and ``||x_e||_2`` (the
    tilted inputs sum to 1). A length-n FFT errs by at most ``c u log2(n)`` relative to its
    input, componentwise (``|dX_j| <= c u log2(n) ||x||_1``) and normwise (``||dX||_2 <=
    c u log2(n) sqrt(n) ||x||_2``) (Higham, Accuracy and Stability of Numerical Algorithms,
    2002, Sec. 24.1). To first order ``prod_e X_e^{c_e}`` errs by ``E_j = sum_e c_e |dX_e,j|
    W_e,j`` with ``W_e = |X_e|^{c_e - 1} prod_{e' != e} |X_e'|^{c_e'}``, plus a few ulps of
    ``|Y_j|`` per power and product; the inverse FFT adds its own error. Then ``max |e_k| <=
    mean_j |E_j|`` and ``||e||_2 = ||E||_2 / sqrt(n)`` (Parseval), each bounded both ways.
    """
    u = _UNIT_ROUNDOFF
    stages = _FFT_ULPS_PER_STAGE * max(math.log2(n), 1.0)
    weights = np.full(n // 2 + 1, 2.0)  # the half spectrum stands for both halves
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0

    def mean(values: FloatArray) -> float:
        return float(np.sum(weights * values)) / n

    log_total = np.zeros(n // 2 + 1)
    for (_p, count), (log_abs, _norm) in zip(items, inputs, strict=True):
        log_total += count * log_abs
    forward_max = forward_two = 0.0
    for (_p, count), (log_abs, norm) in zip(items, inputs, strict=True):
        w = np.exp(np.maximum(log_total - log_abs, -300.0))  # (>= e^-300: stays normal)
        mean_w, rms_w = mean(w), math.sqrt(mean(w * w))
        forward_max += count * min(mean_w, norm * rms_w)
        forward_two += count * min(rms_w, norm * float(np.max(w)) * math.sqrt(n))
    abs_y = np.maximum(np.abs(spectrum), 1e-150)
    rms_y = math.sqrt(mean(abs_y * abs_y))
    powered = power_ulps * abs_y
    eta_max = stages * forward_max + mean(powered) + stages * min(mean(abs_y), rms_y)
    eta_two = stages * forward_two + math.sqrt(mean(powered * powered)) + stages * rms_y
    return 2.0 * u * eta_max, 2.0 * u * eta_two  # 2: second-order terms and margin


@dataclass(frozen=True, slots=True)
class _Window:
    size: int  # FFT length
    first: int  # node index of the first window position
    tilt: float  # lam
    outside: float  # bound on the mass that the window cannot see (added to m_inf)


def _window(
    items: list[tuple[_DiscretePLD, int]], h: float, tail: float, sup_lo: int, sup_hi: int
) -> _Window:
    """Place the FFT window and choose the tilt.

    Chernoff: ``P(T >= t) <= exp(K(lam) - lam t)`` with ``K = sum count * log E[e^{lam L}]``
    over the discretised PLDs (their finite parts), and likewise below with ``-lam``. Mass
    above the window is bounded and reported in ``outside`` (it is added to ``m_inf``); mass
    below it only matters for eps below the window, so it is reported when the window starts
    above 0 (after tilting, what wraps around from below is shrunk, not kept).

    The tilt ``lam`` is the largest on the grid that is at most the Chernoff-optimal one for
    the ``_TILT_TAIL`` quantile (the tilted law is centred near it) and whose tilted law puts
    at most ``_TILT_WRAP`` above the window: that mass wraps around amplified, so it must be
    negligible (it could only raise delta). Sums of subsampled events have heavy tails: there
    a large tilt would be dominated by a single event's extreme loss.
    """
    k_pos = _f64(np.sum([c * p.log_mgf_pos for p, c in items], axis=0))
    k_neg = _f64(np.sum([c * p.log_mgf_neg for p, c in items], axis=0))
    log_tail = math.log(tail)
    hi_loss = float(np.min((k_pos - log_tail) / _LAMBDAS))
    lo_loss = float(np.max((log_tail - k_neg) / _LAMBDAS))
    i_lo = max(sup_lo, math.floor(lo_loss / h) if math.isfinite(lo_loss) else sup_lo)
    i_hi = min(sup_hi, math.ceil(hi_loss / h) if math.isfinite(hi_loss) else sup_hi)
    i_hi = max(i_hi, i_lo)
    width = i_hi - i_lo + 1
    # When the true top is within reach, take it (nothing wraps from above); else leave some
    # room above the Chernoff top for the tilted law.
    reach = sup_hi - i_lo + 1 <= (1.5 + _TILT_ROOM) * width
    i_hi = sup_hi if reach else min(sup_hi, i_hi + int(_TILT_ROOM * width))
    n = int(sp_fft.next_fast_len(i_hi - i_lo + 1, real=True))
    # Use the extra room: first up to the true top, then down to the true bottom.
    i_hi = min(sup_hi, i_lo + n - 1)
    i_lo = max(sup_lo, i_hi - n + 1)
    wraps = i_lo + n - 1 < sup_hi
    lam = 0.0
    best = int(np.argmin((k_pos - math.log(_TILT_TAIL)) / _LAMBDAS))
    variance = math.fsum(c * p.variance for p, c in items)
    if variance > 0:  # not beyond _TILT_SIGMAS standard deviations either
        below = np.flatnonzero(_TILT_SIGMAS / math.sqrt(variance) >= _LAMBDAS)
        best = min(best, int(below[-1])) if below.size else -1
    top = (i_lo + n) * h
    for k in range(best, -1, -1):
        candidate = float(_LAMBDAS[k])
        if candidate * n * h > _MAX_TILT_RANGE:
            continue
        if wraps:
            # P_tilted(T >= top) <= exp(K(lam + theta) - K(lam) - theta top), theta = lam, 3 lam
            bounds = [
                k_pos[j] - k_pos[k] - (_LAMBDAS[j] - candidate) * top
                for j in (k + 1, k + 2)
                if j < _LAMBDAS.size
            ]
            if not bounds or min(bounds) > math.log(_TILT_WRAP):
                continue
        lam = candidate
        break
    outside = 0.0
    if wraps:
        outside += float(np.min(np.exp(np.minimum(k_pos - _LAMBDAS * top, 0.0))))
    if i_lo > sup_lo and i_lo > 0:
        outside += float(np.min(np.exp(np.minimum(k_neg + _LAMBDAS * i_lo * h, 0.0))))
    return _Window(n, i_lo, lam, outside)


def _window_nodes(items: list[tuple[_DiscretePLD, int]], h: float, tail: float) -> int:
    sup_lo = sum(c * p.offset for p, c in items)
    sup_hi = sum(c * p.top for p, c in items)
    return _window(items, h, tail, sup_lo, sup_hi).size if items else 1


def _flatten(event: PrivacyEvent, count: int, out: dict[PrivacyEvent, int]) -> None:
    """Accumulate base events with their total counts (composition is commutative)."""
    if count == 0:
        return
    if isinstance(event, ComposedEvent):
        for sub in event.events:
            _flatten(sub, count, out)
    elif isinstance(event, SelfComposedEvent):
        _flatten(event.event, count * event.count, out)
    else:
        out[event] = out.get(event, 0) + count


class PLDAccountant(Accountant):
    r"""Privacy loss distribution accountant: tight (epsilon, delta) upper bounds.

    For the composition of all events, with ``L`` the total privacy loss of the composed
    dominating pairs,

    .. math:: \delta(\epsilon) = E_P[(1 - e^{\epsilon - L})_+] + P(L = +\infty),

    reported as the larger of the two orientations (``H(P||Q)`` and ``H(Q||P)``) for
    add/remove neighbours; replace-one events have symmetric pairs. Each event's pair comes
    from :func:`privacy_profile`'s sources (Balle and Wang 2018; Canonne, Kamath and Steinke
    2020; Kairouz, Oh and Viswanath 2015; Zhu, Dong and Wang 2022; Balle, Barthe and Gaboardi
    2018), is discretised by connect the dots (Doroshenko, Ghazi, Kamath, Kumar and Manurangsi
    2022) and composed by FFT (Koskela, Jälkö and Honkela 2020) or exactly. Every approximation
    is pessimistic, floating-point round-off included (see the module), so the reported epsilon
    (delta) is an upper bound on the true one; the tests compare with closed forms.

    ``fully_adaptive`` is False: the composition theorem for dominating pairs (Zhu, Dong and
    Wang 2022, Theorem 10) holds for adaptively chosen mechanisms whose privacy parameters are
    fixed in advance, not for parameters chosen from earlier answers (use a filter built on a
    fully adaptive accountant for that).

    Parameters
    ----------
    discretization : float, default 1e-4
        Grid step ``h`` of the privacy loss (in (0, 1]). Doubled automatically when a grid
        would exceed 2^22 points (the result stays an upper bound, only looser).
    tail_mass : float, default 1e-15
        How much probability may be cut from a distribution's lower tail per event (it is moved
        up, pessimistically) and per FFT window (bounded and added to delta). Each event's grid
        ends where its delta is below ``tail_mass * 2^-20`` (the rest goes to ``+inf``).

    Examples
    --------
    >>> from dpcurator.accounting import GaussianEvent, PoissonSampledEvent
    >>> acc = PLDAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 1000)
    >>> eps = acc.get_epsilon(1e-5)
    >>> 1.82 < eps <= 1.830
    True
    """

    name = "pld"
    fully_adaptive = False

    def __init__(self, *, discretization: float = 1e-4, tail_mass: float = 1e-15) -> None:
        super().__init__()
        h = check_positive(discretization, "discretization")
        if h > 1.0:
            raise InvalidParameterError("discretization", discretization, "must be <= 1")
        tail = check_probability(tail_mass, "tail_mass", open_left=True)
        if tail > 1e-3:
            raise InvalidParameterError("tail_mass", tail_mass, "must be <= 1e-3")
        self.discretization = h
        self.tail_mass = tail
        self._state: dict[Orientation, _ComposedPLD] | None = None

    def _check_supported(self, event: PrivacyEvent) -> None:
        flat: dict[PrivacyEvent, int] = {}
        _flatten(event, 1, flat)
        for base in flat:
            _pair_for(base)

    def _on_compose(self, event: PrivacyEvent, count: int) -> None:
        self._state = None

    def _composed(self) -> dict[Orientation, _ComposedPLD]:
        if self._state is None:
            flat: dict[PrivacyEvent, int] = {}
            for event, count in self._events:
                _flatten(event, count, flat)
            self._state = _compose_all(flat, self.discretization, self.tail_mass)
        return self._state

    def _epsilon(self, delta: float) -> float:
        return max(0.0, *(c.epsilon(delta) for c in self._composed().values()))

    def _delta(self, epsilon: float) -> float:
        return min(1.0, max(c.delta(epsilon) for c in self._composed().values()))


def _compose_all(
    events: dict[PrivacyEvent, int], h: float, tail: float
) -> dict[Orientation, _ComposedPLD]:
    """Compose every orientation, doubling the grid step until every grid fits."""
    pairs = {event: _pair_for(event) for event in events}
    orientations: tuple[Orientation, ...] = (
        ("remove",) if all(p.symmetric for p in pairs.values()) else ("remove", "add")
    )
    for _ in range(64):
        widest = max(
            (_grid(p, o, h, tail) for p in pairs.values() for o in orientations),
            key=lambda g: g[1] - g[0],
            default=(0, 0),
        )
        nodes = widest[1] - widest[0] + 1
        if nodes > _MAX_NODES:
            h *= 2.0 ** math.ceil(math.log2(nodes / _MAX_NODES))
            continue
        items = {
            o: [(_discretise_event(e, o, h, tail), c) for e, c in events.items()]
            for o in orientations
        }
        window = max(_window_nodes(items[o], h, tail) for o in orientations)
        if window > _MAX_NODES:
            h *= 2.0 ** math.ceil(math.log2(window / _MAX_NODES))
            continue
        composed = {o: _compose(items[o], h, tail) for o in orientations}
        if len(orientations) == 1:
            composed["add"] = composed["remove"]
        return composed
    raise InternalError("the PLD grid could not be made to fit")  # pragma: no cover
