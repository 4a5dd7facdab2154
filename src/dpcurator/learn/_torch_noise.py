"""Clipping, the public grid and Gaussian noise for PyTorch tensors (DP-SGD, DP-FedAvg).

Both DP-SGD (:mod:`dpcurator.learn._dpsgd`) and DP federated averaging
(:mod:`dpcurator.learn._federated`) release a *sum of clipped vectors plus Gaussian noise*.
This module does that one thing, the same way for both:

1. each row ``g_i`` (a per-example gradient, or a client's model update) is scaled by
   ``min(1, C / ||g_i||)`` so that ``||g_i|| <= C``, in float64; a row that is not finite is
   replaced by zero (an error would be a data-dependent signal);
2. each clipped row is rounded to the public grid ``2**-k Z`` and the rows are summed *as
   integers* (float64 holds them exactly below ``2**53``): the sum is exact and independent of
   the summation order, so its sensitivity is exactly that of one rounded row (floating-point
   sums are not: Casacuberta et al. 2022);
3. noise is added in grid units.

Sensitivity (add/remove one row)
    Removing row ``j`` changes the integer sum by ``round(2**k c_j)``, whose L2 norm is at most
    ``2**k C (1 + 2**-16 + 4 eta) + sqrt(d) / 2`` (``eta = (d + 64) 2**-52``: the float errors of
    the norm and the scaling; rounding to the nearest integer moves each of the ``d``
    coordinates by at most 1/2). :func:`grid_sensitivity` returns that bound. :func:`grid_bits`
    picks the grid so that ``2**k C >= 2**16 sqrt(d)`` (rounding costs a relative ``2**-17``),
    relaxed down to ``2**10 sqrt(d)`` where that keeps ``2**k C <= 2**22`` so that the rows can be
    scaled and rounded in float32. The grid depends on ``C`` and ``d`` only (public).

Noise (:class:`TensorNoise`)
    ``"secure"`` (the default): exact discrete Gaussian noise ``N_Z(0, sigma^2)`` per coordinate
    from :func:`dpcurator.noise.discrete_gaussian`, drawn from a :class:`~dpcurator.noise.
    RandomSource` (the OS CSPRNG unless an ``InsecureSeededSource`` is passed). The released
    vector ``2**-k (S + Z)`` lies on the grid whatever the data, so the floating-point attacks on
    Gaussian samplers (Mironov 2012; Jin, McMurtry, Rubinstein and Ohrimenko, "Are we there yet?
    Timing and floating-point attacks on differential privacy systems", S&P 2022, part 1) have
    nothing to read. Cost: about 0.2 microseconds per coordinate and step.

    ``"float"``: ``torch.normal`` in float64 from a ``torch.Generator`` whose 63-bit seed is drawn
    from the source. **Attack surface:** this is the textbook floating-point Gaussian that Jin et
    al. (2022) attack: the set of floats that ``S + Z`` can take depends on ``S``, so an observer
    of the exact noisy sum (e.g. of a single step's update) can rule out inputs, and they report
    membership inference on DP-SGD's noisy gradients with up to 92.56% success; the generator
    (Philox/Mersenne twister) is not cryptographic, so its state is predictable from its outputs;
    and its 63-bit seed bounds the entropy of every draw of a run. Use it only where the noisy sum
    is never observed exactly (it is usually consumed by an optimizer, which then rounds), or for
    experiments; the privacy accounting is the same for both paths.

Examples
--------
>>> import torch
>>> from dpcurator.noise import InsecureSeededSource
>>> rows = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
>>> bits = grid_bits(1.0, 2)
>>> total = clipped_grid_sum(rows, clip_norm=1.0, bits=bits)  # (0.6, 0.8) + (0.3, 0.4)
>>> [round(v, 4) for v in (total * 2.0**-bits).tolist()]
[0.9, 1.2]
>>> noise = TensorNoise("secure", source=InsecureSeededSource(0)).sample(1000.0, 4)
>>> noise.dtype, bool((noise == noise.round()).all())
(torch.float64, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import torch

from dpcurator._validation import check_integer, check_positive
from dpcurator.errors import InvalidParameterError
from dpcurator.noise import (
    RandomSource,
    discrete_gaussian,
    floor_log2,
    grid_exponent,
    resolve_source,
    uniform_integers,
)

__all__ = [
    "GRID_PRECISION_BITS",
    "NOISE_MODES",
    "TensorNoise",
    "clipped_grid_sum",
    "grid_bits",
    "grid_sensitivity",
]

GRID_PRECISION_BITS = 16
"""Preferred grid: ``2**k C >= 2**16 sqrt(d)``, so that rounding every clipped row to it raises
the L2 sensitivity by a relative ``2**-17`` at most (see :func:`grid_bits`)."""

NOISE_MODES = ("secure", "float")
"""The noise paths of :class:`TensorNoise`."""

_MIN_PRECISION_BITS = 10
"""Below this precision the grid is not capped for float32 (see :func:`grid_bits`)."""
_FLOAT32_UNIT = 2.0**22
"""Largest ``C 2**k`` for which clipped rows are scaled and rounded in float32."""
_NARROW = (torch.float32, torch.float16, torch.bfloat16)
_NORM_BLOCK = 64
"""float32 norms are taken over blocks of this many coordinates (bounded rounding error)."""
_SUM_BLOCK = 32
"""Rows summed per float64 block."""
_MAX_UNITS = 2.0**38
"""Largest noise parameter (grid units) asked of the exact sampler (it accepts ``2**40``)."""
_EXACT_SUM = 2.0**52
"""Integer sums in float64 are exact while every partial sum stays below ``2**53``."""


def grid_bits(clip_norm: float, dimension: int) -> int:
    """Return the grid exponent ``k`` for rows of ``dimension`` coordinates clipped to ``C``.

    The grid ``2**-k Z`` depends on the public ``C`` and ``d`` only. Preferred: the smallest
    ``k`` with ``C 2**k >= 2**16 sqrt(d)`` (rounding then raises the sensitivity by a relative
    ``2**-17`` at most). If that puts ``C 2**k`` above ``2**22`` (where float32 stops holding the
    rounded rows exactly), ``k`` is lowered to keep ``C 2**k <= 2**22`` as long as
    ``C 2**k >= 2**10 sqrt(d)`` still holds (rounding cost below ``2**-11``); beyond that (more
    than about ``2**24`` coordinates) the preferred grid is kept and the sums run in float64.
    Both exponents are computed exactly (:func:`dpcurator.noise.grid_exponent`,
    :func:`dpcurator.noise.floor_log2`: no rounded ``sqrt(d)`` or ``log2``).

    Parameters
    ----------
    clip_norm : float
        The clipping norm ``C`` > 0.
    dimension : int
        The number of coordinates ``d`` >= 1.

    Returns
    -------
    int

    Examples
    --------
    >>> grid_bits(1.0, 1)
    16
    >>> grid_bits(1.0, 4810)  # 2**16 sqrt(4810) is about 2**22.1 > 2**22: capped
    22
    """
    c = check_positive(clip_norm, "clip_norm")
    d = check_integer(dimension, "dimension", minimum=1)
    # Exact (dpcurator.noise.grid_exponent): the smallest k with C 2**k >= 2**p sqrt(d) is the
    # k with 2**-k the largest power of two <= (C / sqrt(d)) 2**-p.
    preferred = grid_exponent(c, GRID_PRECISION_BITS, coordinates=d)
    cap = floor_log2(Fraction(_FLOAT32_UNIT) / Fraction(c))  # the largest k with C 2**k <= 2**22
    if preferred <= cap:
        return preferred
    if grid_exponent(c, _MIN_PRECISION_BITS, coordinates=d) <= cap:
        return cap
    return preferred


def _norm_slack(dimension: int) -> float:
    """Relative bound on how far a clipped row's norm can exceed ``C 2**k`` (float errors).

    float32 rows: the norm is assembled from float32 norms of blocks of 64 coordinates (each
    exact to a relative ``66 * 2**-24`` whatever the summation order: 64 rounded squares and 63
    additions of non-negative terms) combined in float64, so the row norm is within a relative
    ``2**-17`` of the truth; casting the scale to float32 and the product add ``2**-24`` each.
    float64 rows: ``vector_norm`` in float64 is within ``eta = (d + 64) 2**-52``; the scaling adds
    ``2**-53`` twice. ``2**-16 + 4 eta`` covers both.
    """
    eta = (dimension + 64) * 2.0**-52
    return 2.0**-16 + 4.0 * eta


def grid_sensitivity(clip_norm: float, dimension: int, bits: int) -> float:
    """L2 norm bound, in grid units, of one clipped row after rounding to the grid ``2**-bits``.

    ``2**k C (1 + 2**-16 + 4 eta) + sqrt(d) / 2`` with ``eta = (d + 64) 2**-52``, rounded up: the
    float errors of the norm and the scaling cost the first factor (see :func:`clipped_grid_sum`)
    and rounding each coordinate to the nearest integer moves it by at most 1/2. This is the
    add/remove-one sensitivity of :func:`clipped_grid_sum`.

    Parameters
    ----------
    clip_norm : float
        ``C`` > 0.
    dimension : int
        ``d`` >= 1.
    bits : int
        The grid exponent ``k``.

    Returns
    -------
    float

    Examples
    --------
    >>> round(grid_sensitivity(1.0, 4, 16), 3)  # 2**16 (1 + 2**-16) + sqrt(4) / 2
    65538.0
    """
    c = check_positive(clip_norm, "clip_norm")
    d = check_integer(dimension, "dimension", minimum=1)
    k = check_integer(bits, "bits")
    bound = math.ldexp(c, k) * (1.0 + _norm_slack(d)) + math.sqrt(d) / 2.0
    return math.nextafter(bound * (1.0 + 2.0**-50), math.inf)  # covers this line's rounding


def clipped_grid_sum(
    parts: torch.Tensor | Sequence[torch.Tensor],
    *,
    clip_norm: float,
    bits: int,
    overwrite: bool = False,
) -> torch.Tensor:
    """Clip each row to L2 norm ``clip_norm``, round it to the grid, and sum the rows exactly.

    A row is the concatenation of the flattened ``parts[j][i]`` (e.g. one example's gradient
    over all parameters). Rows whose norm is not finite become zero; each row is scaled by
    ``2**k min(1, C / ||g_i||)`` and rounded to integers, and the integer rows are summed in
    float64, exactly. Scaling and rounding run in float32 when ``C 2**k <= 2**22`` (integers
    below ``2**24`` are exact there) and the parts are float32 or narrower, in float64
    otherwise; :func:`grid_sensitivity` bounds the norm of one rounded row in both cases.

    Parameters
    ----------
    parts : torch.Tensor or sequence of torch.Tensor
        One tensor of shape ``(n, d)``, or tensors of shapes ``(n, ...)`` (one per parameter).
    clip_norm : float
        ``C`` > 0.
    bits : int
        The grid exponent ``k`` (from :func:`grid_bits`).
    overwrite : bool, default False
        Scale and round float32 parts in place (saves a copy; for callers that own them).

    Returns
    -------
    torch.Tensor
        Shape ``(d,)``, float64, integer-valued: ``sum_i round(2**k clip(g_i))`` in grid units
        (the parts flattened and concatenated). Its add/remove-one sensitivity is
        :func:`grid_sensitivity`.

    Examples
    --------
    >>> import torch
    >>> clipped_grid_sum(torch.tensor([[30.0, 40.0]]), clip_norm=1.0, bits=2).tolist()
    [2.0, 3.0]
    """
    tensors = [parts] if isinstance(parts, torch.Tensor) else list(parts)
    if not tensors or any(t.ndim < 1 for t in tensors):
        raise InvalidParameterError("parts", "<tensors>", "must be tensors with a row axis")
    c = check_positive(clip_norm, "clip_norm")
    k = check_integer(bits, "bits")
    n = int(tensors[0].shape[0])
    if any(int(t.shape[0]) != n for t in tensors):
        raise InvalidParameterError("parts", "<tensors>", "must all have the same number of rows")
    unit = math.ldexp(c, k)
    if n * (unit * (1.0 + 2.0**-10) + 1.0) >= _EXACT_SUM:
        raise InvalidParameterError(
            "parts", f"<{n} rows>", f"are too many for exact integer sums on the grid 2**-{k}"
        )
    narrow = all(t.dtype in _NARROW for t in tensors)
    work = torch.float32 if narrow and unit <= _FLOAT32_UNIT else torch.float64
    flat = [t.detach().reshape(n, -1) for t in tensors]
    if not (overwrite and all(f.dtype == work for f in flat)):
        flat = [f.to(work, copy=True) for f in flat]
    squares = torch.zeros(n, dtype=torch.float64)
    for f in flat:
        squares += _squared_norms(f)
    norms = squares.sqrt()
    finite = torch.isfinite(norms)
    scale = torch.where(
        norms > c, unit / norms.clamp_min(torch.finfo(torch.float64).tiny), math.ldexp(1.0, k)
    )
    if not bool(finite.all()):
        scale = torch.where(finite, scale, torch.zeros((), dtype=torch.float64))
        flat = [torch.where(finite[:, None], f, torch.zeros((), dtype=work)) for f in flat]
    factor = scale.to(work)[:, None]
    sums = []
    for f in flat:
        f.mul_(factor)
        f.round_()
        total = torch.zeros(f.shape[1], dtype=torch.float64)
        for start in range(0, n, _SUM_BLOCK):  # float64 blocks that stay in cache
            total += f[start : start + _SUM_BLOCK].to(torch.float64).sum(dim=0)
        sums.append(total)
    return torch.cat(sums)


def _squared_norms(f: torch.Tensor) -> torch.Tensor:
    """Squared L2 norms of the rows of ``f`` (float64 result; see :func:`_norm_slack`)."""
    if f.dtype == torch.float64:
        squares: torch.Tensor = torch.linalg.vector_norm(f, dim=1).square()
        return squares
    n, d = f.shape
    whole = d - d % _NORM_BLOCK
    out = torch.zeros(n, dtype=torch.float64)
    if whole:
        blocks = torch.linalg.vector_norm(f[:, :whole].reshape(n, -1, _NORM_BLOCK), dim=2)
        out += blocks.to(torch.float64).square().sum(dim=1)
    if whole < d:
        out += torch.linalg.vector_norm(f[:, whole:], dim=1).to(torch.float64).square()
    return out


class TensorNoise:
    """Gaussian-type noise for tensors, in grid units: exact discrete (secure) or float.

    Parameters
    ----------
    mode : {"secure", "float"}, default "secure"
        ``"secure"``: exact discrete Gaussian ``N_Z(0, sigma^2)`` (Canonne, Kamath and Steinke
        2020, Algorithm 3) from :func:`dpcurator.noise.discrete_gaussian`; the noisy sum stays on
        the integer grid. ``"float"``: ``torch.normal`` (float64) from a generator seeded once
        with 63 bits from ``source``; see the module docstring for its attack surface (Jin et al.
        2022).
    source : RandomSource, optional
        Where the randomness comes from (the secure OS source by default;
        ``InsecureSeededSource(seed)`` for reproducible experiments).

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> z = TensorNoise("float", source=InsecureSeededSource(1)).sample(2.0, 10000)
    >>> bool(abs(float(z.std()) - 2.0) < 0.1)
    True
    """

    def __init__(self, mode: str = "secure", *, source: RandomSource | None = None) -> None:
        if mode not in NOISE_MODES:
            raise InvalidParameterError("noise", mode, f"must be one of {NOISE_MODES}")
        self.mode = mode
        self.source = resolve_source(source)
        self._generator: torch.Generator | None = None

    def _float_generator(self) -> torch.Generator:
        if self._generator is None:
            generator = torch.Generator()
            generator.manual_seed(int(uniform_integers(2**63, source=self.source)))
            self._generator = generator
        return self._generator

    def sample(self, sigma: float, size: int) -> torch.Tensor:
        """Draw ``size`` noise values with parameter ``sigma`` (grid units), as float64.

        Parameters
        ----------
        sigma : float
            Noise parameter, in ``[2**-40, 2**38]`` for the secure path.
        size : int
            Number of coordinates.

        Returns
        -------
        torch.Tensor
            Shape ``(size,)``, float64; integer-valued on the secure path.
        """
        s = check_positive(sigma, "sigma")
        n = check_integer(size, "size", minimum=0)
        if self.mode == "float":
            return torch.normal(
                0.0, s, (n,), generator=self._float_generator(), dtype=torch.float64
            )
        if not 2.0**-40 <= s <= _MAX_UNITS:
            raise InvalidParameterError("sigma", sigma, "must be in [2**-40, 2**38] grid units")
        draws = discrete_gaussian(s, n, source=self.source)
        return torch.from_numpy(draws).to(torch.float64)

    def __repr__(self) -> str:
        return f"TensorNoise({self.mode!r}, source={self.source!r})"
