"""Randomness for dpcurator: a secure source and exact samplers, vectorised.

This package is the only code in dpcurator that draws random bits. It knows nothing of privacy:
mechanisms in higher layers call it for noise.

API map
-------
Sources
    :class:`RandomSource` (abstract: ``.secure``, ``.words(n)``), :class:`SecureRandomSource`
    (the OS CSPRNG, the default), :class:`InsecureSeededSource` (PCG64, for tests and
    simulations only), :func:`default_source`, :func:`resolve_source`; :func:`secret_bytes`
    (fresh kernel bytes for keys, such as the curator ledger's).
Exact samplers
    :func:`uniform_integers`, :func:`bernoulli` (rational ``p``), :func:`bernoulli_exp`
    (``P[True] = exp(-gamma)``), :func:`discrete_laplace`, :func:`discrete_gaussian`.
The grid
    :func:`to_grid` and :func:`from_grid`: real values are rounded to the public grid
    ``2**-bits * Z`` before integer noise is added to the index. :func:`grid_exponent` picks
    ``bits`` for every caller by one exact rule (the largest ``2**-bits <= bound * 2**-precision``),
    from :func:`floor_log2` and :func:`pow2` (exact rationals, no floating-point logarithm).
Fixed point
    :class:`FixedPointRange` holds declared bounds exactly (refusing NaN, infinities, empty or
    too wide ranges: :data:`MAX_MAGNITUDE`, :data:`MIN_WIDTH`); its
    :meth:`~FixedPointRange.encoding` (a :class:`FixedPointEncoding`) gives the public pieces of
    the rule by which bounded values are summed exactly in integers, each row's index clamped in
    integers so that floating-point error costs accuracy, never sensitivity.

Security model
--------------
* **Entropy.** By default every word comes from the kernel CSPRNG (``getrandom`` through
  :func:`os.urandom`), buffered 64 KiB at a time under a lock; a forked child drops its
  parent's buffer. Nothing takes a bare seed: reproducibility needs an explicit
  ``source=InsecureSeededSource(seed)``, whose name and ``secure = False`` say what it is.
* **Exactness.** Every sampler's output distribution is exactly the stated one. Outputs are
  integers decided by exact comparisons of lazily drawn uniforms with exactly defined
  thresholds (rationals, ``exp`` of rationals); floats only make guesses and decide comparisons
  that a rigorous error band proves far from the threshold, and the rest is settled with
  integer arithmetic (:mod:`dpcurator.noise._exact`). There is no floating-point inversion of a
  continuous CDF, so the porous-output attack on textbook Laplace (Mironov, CCS 2012) and its
  Gaussian variants (Jin et al., S&P 2022, part 1) do not apply; with :func:`to_grid`, the set of
  possible outputs does not depend on the input (Haney et al. 2022 precision attack).
* **Out of scope: timing side channels.** Running time depends on the noise drawn (the exact
  slow path runs with probability about ``2**-29`` per comparison, the discrete Gaussian's
  rejection loop repeats a random number of times). An adversary who can time individual
  sampling calls can learn about the noise, as for every CKS20-style sampler (Jin, McMurtry,
  Rubinstein, Ohrimenko, "Are we there yet? Timing and floating-point attacks on differential
  privacy systems", S&P 2022, arXiv 2112.05307, part 2). Vectorised calls blur but do not remove
  this; draw noise independently of the data, or outside the attacker's view, where it matters.
  Memory and RNG-state disclosure are out of scope too.

References
----------
C. L. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020, arXiv 2004.00010 (CKS20). I. Mironov, "On Significance of the Least Significant
Bits for Differential Privacy", CCS 2012.

Examples
--------
>>> from dpcurator.noise import InsecureSeededSource, discrete_gaussian, from_grid, to_grid
>>> index = to_grid([2.71828], bits=8)
>>> noisy = index + discrete_gaussian(3, size=1, source=InsecureSeededSource(0))
>>> bool((to_grid(from_grid(noisy, bits=8), bits=8) == noisy).all())
True
"""

from __future__ import annotations

from dpcurator.noise._exact import dlap_tail_bounds
from dpcurator.noise._fixed_point import (
    ENCODING_KINDS,
    MAX_ENCODING_BITS,
    MAX_MAGNITUDE,
    MIN_WIDTH,
    FixedPointEncoding,
    FixedPointRange,
)
from dpcurator.noise._grid import floor_log2, from_grid, grid_exponent, pow2, to_grid
from dpcurator.noise._samplers import (
    bernoulli,
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    uniform_integers,
)
from dpcurator.noise._secret import secret_bytes
from dpcurator.noise._source import (
    InsecureSeededSource,
    RandomSource,
    SecureRandomSource,
    default_source,
    resolve_source,
)

__all__ = [
    "ENCODING_KINDS",
    "MAX_ENCODING_BITS",
    "MAX_MAGNITUDE",
    "MIN_WIDTH",
    "FixedPointEncoding",
    "FixedPointRange",
    "InsecureSeededSource",
    "RandomSource",
    "SecureRandomSource",
    "bernoulli",
    "bernoulli_exp",
    "default_source",
    "discrete_gaussian",
    "discrete_laplace",
    "dlap_tail_bounds",
    "floor_log2",
    "from_grid",
    "grid_exponent",
    "pow2",
    "resolve_source",
    "secret_bytes",
    "to_grid",
    "uniform_integers",
]
