r"""Reconstruction attacks (Dinur and Nissim, PODS 2003): too many accurate answers leak all.

The model of the lectures (lecture 004, "Reconstruction attack"): ``n`` rows, each with a secret
bit ``b_i``; an *oracle* answers subset-sum queries ``q_S(b) = sum_{i in S} b_i`` with some error
(a query interface, a statistical release, a curator session). The attacks only need the oracle:
a function from a subset of rows (a boolean mask, or an index array) to a number.

- Exhaustive attack: ask all ``2^n`` subsets and output any ``c`` consistent with every answer.
  If every answer is within ``E`` of the truth, ``c`` differs from ``b`` in at most ``4E``
  positions (Dinur and Nissim 2003; lecture 004 theorem: "all but ``4 alpha n``" for
  ``E = alpha n``). Exponential: for ``n <= 14``.
- Efficient attack: ``m = O(n)`` uniformly random subsets, a linear program for
  ``x in [0, 1]^n`` that fits the answers (``min ||Q x - a||_1``, robust to outliers, Dwork,
  McSherry and Talwar 2007; or ``||.||_inf``, or feasibility ``||Q x - a||_inf <= E``), solved by
  HiGHS through :func:`scipy.optimize.linprog`, then rounding ``x_i > 1/2``. With answer error
  ``o(sqrt(n))`` all but ``o(n)`` bits are recovered (lecture 004; lecture 003, "Dinur/Nissim
  result"): answering ``O(n)`` queries needs noise ``Omega(sqrt(n))`` per answer.

A differentially private interface defeats both: if the whole interaction is (epsilon,
delta)-DP with respect to changing one row's bit, no attack recovers a uniformly random bit with
probability above ``(e^eps + delta) / (1 + e^eps)`` (:func:`dp_reconstruction_bound`), however many
queries it asks (research note C.1).

Examples
--------
>>> import numpy as np
>>> from dpcurator.noise import InsecureSeededSource, bernoulli
>>> secret = bernoulli("1/2", 100, source=InsecureSeededSource(0)).astype(int)
>>> oracle = subset_sum_oracle(secret, noise="uniform", scale=0.5,
...                            source=InsecureSeededSource(1))
>>> result = lp_reconstruction(oracle, 100, queries=400, source=InsecureSeededSource(2))
>>> result.fraction_recovered(secret)
1.0
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, sparse

from dpcurator._validation import check_delta, check_epsilon, check_integer, check_positive
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import laplace_mechanism
from dpcurator.noise import RandomSource, bernoulli, resolve_source, uniform_integers

__all__ = [
    "MAX_EXHAUSTIVE_ROWS",
    "ReconstructionResult",
    "dp_reconstruction_bound",
    "exhaustive_reconstruction",
    "lp_reconstruction",
    "reconstruction_vs_noise",
    "subset_sum_oracle",
]

Oracle = Callable[[NDArray[Any]], float]
"""A query interface: a subset of rows (mask or indices) -> a (noisy) number."""

MAX_EXHAUSTIVE_ROWS = 14
"""The exhaustive attack compares ``2^n`` candidates with ``2^n`` answers: ``n <= 14``."""

_NOISES = ("none", "uniform", "rounding", "laplace")
_SUBSETS = ("mask", "indices")
_NORMS = ("l1", "linf")
_UNIFORM_STEPS = 2**30


def _check_secret(secret: object) -> NDArray[np.int64]:
    bits = np.asarray(secret)
    if bits.ndim != 1 or bits.size == 0:
        raise InvalidParameterError(
            "secret", f"<array of shape {bits.shape}>", "must be a non-empty 1-D array of bits"
        )
    if bits.dtype == np.bool_:
        return bits.astype(np.int64)
    if bits.dtype.kind not in "iuf" or not np.isin(bits, (0, 1)).all():
        raise InvalidParameterError("secret", "<array>", "must hold only 0 and 1")
    return bits.astype(np.int64)


def _as_mask(subset: object, n: int) -> NDArray[np.bool_]:
    """Return a subset as a boolean mask over ``n`` rows (from a mask or an index array)."""
    arr = np.asarray(subset)
    if arr.dtype == np.bool_:
        if arr.shape != (n,):
            raise InvalidParameterError("subset", f"<mask of shape {arr.shape}>", f"must be ({n},)")
        return arr
    if arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise InvalidParameterError("subset", "<array>", "must be a boolean mask or row indices")
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise InvalidParameterError("subset", "<indices>", f"must lie in [0, {n})")
    mask = np.zeros(n, dtype=np.bool_)
    mask[arr] = True
    return mask


def subset_sum_oracle(
    secret: Sequence[int] | NDArray[Any],
    *,
    noise: str = "none",
    scale: float = 0.0,
    source: RandomSource | None = None,
) -> Oracle:
    r"""Simulate a query interface answering subset sums of secret bits with some error.

    ``oracle(S)`` returns ``sum_{i in S} b_i + e`` with

    - ``noise="none"``: ``e = 0``;
    - ``"uniform"``: ``e`` uniform on ``[-scale, scale]`` (a grid of ``2**30`` steps), fresh
      per answer;
    - ``"rounding"``: the answer rounded to the nearest multiple of ``2 scale`` (deterministic,
      ``|e| <= scale``: the error model of Dinur and Nissim);
    - ``"laplace"``: the project's :func:`~dpcurator.mechanisms.laplace_mechanism` with scale
      ``scale`` (each answer is ``1/scale``-DP; ``k`` answers compose to ``k/scale``).

    Parameters
    ----------
    secret : array_like of {0, 1}
        The rows' secret bits.
    noise : {"none", "uniform", "rounding", "laplace"}, default "none"
    scale : float, default 0.0
        The error bound (or the Laplace scale), >= 0 (> 0 for Laplace).
    source : RandomSource, optional
        Randomness of the noise (secure by default).

    Returns
    -------
    callable
        ``oracle(subset) -> float``, ``subset`` a boolean mask of length ``n`` or row indices.

    Examples
    --------
    >>> oracle = subset_sum_oracle([1, 0, 1, 1])
    >>> oracle([True, True, False, True]), oracle(np.array([0, 2]))
    (2.0, 2.0)
    """
    bits = _check_secret(secret)
    if noise not in _NOISES:
        raise InvalidParameterError("noise", noise, f"must be one of {_NOISES}")
    size = check_positive(scale, "scale", allow_zero=noise != "laplace")
    src = resolve_source(source)
    n = int(bits.size)

    def oracle(subset: NDArray[Any]) -> float:
        exact = float(bits[_as_mask(subset, n)].sum())
        if noise == "uniform" and size > 0:
            step = uniform_integers(_UNIFORM_STEPS + 1, source=src)
            return exact + size * (2.0 * step / _UNIFORM_STEPS - 1.0)
        if noise == "rounding" and size > 0:
            return 2.0 * size * math.floor(exact / (2.0 * size) + 0.5)
        if noise == "laplace":
            release = laplace_mechanism(exact, epsilon=1.0 / size, sensitivity=1.0, source=src)
            return float(release.value)
        return exact

    return oracle


@dataclass(frozen=True)
class ReconstructionResult:
    """The attacker's guess of the secret bits.

    Attributes
    ----------
    guess : numpy.ndarray of int64
        0/1 per row.
    solution : numpy.ndarray of float64
        The LP's fractional solution in ``[0, 1]^n`` (the guess itself for the exhaustive
        attack); rows near 1/2 are the uncertain ones.
    queries : int
        Oracle calls made.
    max_residual : float
        ``max_j |sum_{i in S_j} guess_i - a_j|``: how well the guess explains the answers.
    """

    guess: NDArray[np.int64]
    solution: NDArray[np.float64]
    queries: int
    max_residual: float

    def errors(self, secret: Sequence[int] | NDArray[Any]) -> int:
        """Rows whose bit the attack got wrong.

        >>> ReconstructionResult(np.array([1, 0, 1]), np.array([1., 0., 1.]), 8, 0.0).errors(
        ...     [1, 1, 1])
        1
        """
        bits = _check_secret(secret)
        if bits.size != self.guess.size:
            raise InvalidParameterError(
                "secret", f"<{bits.size} bits>", f"must have {self.guess.size} bits"
            )
        return int(np.count_nonzero(bits != self.guess))

    def fraction_recovered(self, secret: Sequence[int] | NDArray[Any]) -> float:
        """Fraction of rows whose secret bit the attack recovered (1/2 is chance).

        >>> ReconstructionResult(np.array([1, 0]), np.array([1., 0.]), 4, 0.0
        ...                      ).fraction_recovered([1, 1])
        0.5
        """
        return 1.0 - self.errors(secret) / self.guess.size


def _check_subset_style(subset_as: str) -> str:
    if subset_as not in _SUBSETS:
        raise InvalidParameterError("subset_as", subset_as, f"must be one of {_SUBSETS}")
    return subset_as


def _ask_all(oracle: Oracle, masks: NDArray[np.bool_], subset_as: str) -> NDArray[np.float64]:
    answers = np.empty(masks.shape[0], dtype=np.float64)
    for j, mask in enumerate(masks):
        query = mask if subset_as == "mask" else np.flatnonzero(mask)
        answer = float(oracle(query))
        if not math.isfinite(answer):
            raise InvalidParameterError("oracle", answer, "must return finite numbers")
        answers[j] = answer
    return answers


def _bits_of(codes: NDArray[np.int64], n: int) -> NDArray[np.float32]:
    """Rows of the 0/1 matrix whose row ``j`` is the binary expansion of ``codes[j]``."""
    return ((codes[:, None] >> np.arange(n)) & 1).astype(np.float32)


def exhaustive_reconstruction(
    oracle: Oracle, rows: int, *, subset_as: str = "mask"
) -> ReconstructionResult:
    r"""Dinur and Nissim's exponential attack: all ``2^n`` subset queries, a consistent guess.

    Asks every subset ``S`` of the ``n`` rows, then returns the candidate ``c in {0, 1}^n`` that
    minimises ``max_S |sum_{i in S} c_i - a_S|``. If every answer is within ``E`` of the truth,
    the secret itself scores at most ``E``, so the winner does too, and it differs from the secret
    in at most ``4E`` rows (Dinur and Nissim 2003; lecture 004: the sets ``{c=1, b=0}`` and
    ``{c=0, b=1}`` are queries, each answered within ``2E`` by both, so each has at most ``2E``
    rows).

    Parameters
    ----------
    oracle : callable
        ``oracle(subset) -> number``.
    rows : int
        ``n``, at most :data:`MAX_EXHAUSTIVE_ROWS`.
    subset_as : {"mask", "indices"}, default "mask"
        What the oracle receives: a boolean mask or an array of row indices.

    Returns
    -------
    ReconstructionResult

    Examples
    --------
    >>> secret = [1, 0, 0, 1, 1, 0, 1, 0]
    >>> oracle = subset_sum_oracle(secret, noise="rounding", scale=0.5)  # answers exact
    >>> result = exhaustive_reconstruction(oracle, 8)
    >>> result.guess.tolist() == secret, result.queries
    (True, 256)
    """
    n = check_integer(rows, "rows", minimum=1)
    if n > MAX_EXHAUSTIVE_ROWS:
        raise InvalidParameterError(
            "rows", rows, f"must be <= {MAX_EXHAUSTIVE_ROWS} (the attack is exponential)"
        )
    style = _check_subset_style(subset_as)
    codes = np.arange(2**n, dtype=np.int64)
    queries = _bits_of(codes, n)
    answers = _ask_all(oracle, queries.astype(np.bool_), style).astype(np.float32)
    best_code, best_residual = 0, math.inf
    block = max(1, 2**22 // 2**n)
    for start in range(0, 2**n, block):
        candidates = _bits_of(codes[start : start + block], n)  # (b, n)
        residual = np.abs(queries @ candidates.T - answers[:, None]).max(axis=0)
        j = int(np.argmin(residual))
        if float(residual[j]) < best_residual:
            best_code, best_residual = start + j, float(residual[j])
    guess = _bits_of(np.array([best_code]), n)[0].astype(np.int64)
    return ReconstructionResult(guess, guess.astype(np.float64), int(2**n), best_residual)


def _solve_lp(
    matrix: NDArray[np.float64], answers: NDArray[np.float64], norm: str, max_error: float | None
) -> NDArray[np.float64]:
    m, n = matrix.shape
    q = sparse.csr_matrix(matrix)
    options = {"presolve": False}
    if max_error is not None:
        # Feasibility: Q x + s = a with |s| <= E (lecture 004: ||a - Q x||_inf <= alpha n).
        result = optimize.linprog(
            np.zeros(n + m),
            A_eq=sparse.hstack([q, sparse.identity(m)]).tocsc(),
            b_eq=answers,
            bounds=[(0.0, 1.0)] * n + [(-max_error, max_error)] * m,
            method="highs-ipm",
            options=options,
        )
    elif norm == "l1":
        # min sum(u + v) with Q x + u - v = a, u, v >= 0 (robust LP decoding).
        eye = sparse.identity(m)
        result = optimize.linprog(
            np.concatenate([np.zeros(n), np.ones(2 * m)]),
            A_eq=sparse.hstack([q, eye, -eye]).tocsc(),
            b_eq=answers,
            bounds=[(0.0, 1.0)] * n + [(0.0, None)] * (2 * m),
            method="highs-ipm",
            options=options,
        )
    else:
        # min t with -t <= Q x - a <= t.
        ones = sparse.csr_matrix(np.ones((m, 1)))
        result = optimize.linprog(
            np.concatenate([np.zeros(n), [1.0]]),
            A_ub=sparse.vstack([sparse.hstack([q, -ones]), sparse.hstack([-q, -ones])]).tocsc(),
            b_ub=np.concatenate([answers, -answers]),
            bounds=[(0.0, 1.0)] * n + [(0.0, None)],
            method="highs-ipm",
            options=options,
        )
    if result.status == 2:
        raise InvalidParameterError(
            "max_error",
            max_error,
            "is smaller than the answers' error: no x in [0, 1]^n fits them (leave it out to "
            "minimise the error instead)",
        )
    if result.x is None:  # pragma: no cover - HiGHS failed for another reason
        raise InvalidParameterError(
            "oracle", "<answers>", f"gave an LP HiGHS could not solve: {result.message}"
        )
    return np.clip(np.asarray(result.x[:n], dtype=np.float64), 0.0, 1.0)


def lp_reconstruction(
    oracle: Oracle,
    rows: int,
    *,
    queries: int | None = None,
    norm: str = "l1",
    max_error: float | None = None,
    subset_as: str = "mask",
    source: RandomSource | None = None,
) -> ReconstructionResult:
    r"""Dinur and Nissim's efficient attack: ``O(n)`` random subsets, a linear program, rounding.

    Draws ``m`` subsets ``S_j`` (each row in each subset with probability 1/2), asks the oracle,
    solves for ``x in [0, 1]^n`` with HiGHS (:func:`scipy.optimize.linprog`, interior point)

    - ``norm="l1"`` (default): ``min sum_j |sum_{i in S_j} x_i - a_j|`` (robust to a constant
      fraction of arbitrarily wrong answers, Dwork, McSherry and Talwar 2007);
    - ``norm="linf"``: ``min max_j |...|``;
    - ``max_error=E``: any ``x`` with ``max_j |...| <= E`` (lecture 004's feasibility LP),

    and guesses ``b_i = 1`` iff ``x_i > 1/2``. With answers within ``alpha n`` of the truth the
    guess is wrong on ``O(alpha^2 n^2)`` rows w.h.p. (lecture 004), so error ``o(sqrt(n))``
    reveals almost every bit.

    Parameters
    ----------
    oracle : callable
        ``oracle(subset) -> number``.
    rows : int
        ``n >= 1``.
    queries : int, optional
        ``m`` (default ``4 n``).
    norm : {"l1", "linf"}, default "l1"
    max_error : float, optional
        A known bound on the answers' error (feasibility LP); raises if no ``x`` fits.
    subset_as : {"mask", "indices"}, default "mask"
    source : RandomSource, optional
        Draws the random subsets (secure by default).

    Returns
    -------
    ReconstructionResult

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> secret = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1] * 5
    >>> oracle = subset_sum_oracle(secret, noise="rounding", scale=1.0)
    >>> lp_reconstruction(oracle, 50, source=InsecureSeededSource(3)).errors(secret)
    0
    """
    n = check_integer(rows, "rows", minimum=1)
    m = 4 * n if queries is None else check_integer(queries, "queries", minimum=1)
    if norm not in _NORMS:
        raise InvalidParameterError("norm", norm, f"must be one of {_NORMS}")
    bound = None if max_error is None else check_positive(max_error, "max_error", allow_zero=True)
    style = _check_subset_style(subset_as)
    masks = np.asarray(bernoulli("1/2", (m, n), source=resolve_source(source)), dtype=np.bool_)
    answers = _ask_all(oracle, masks, style)
    matrix = masks.astype(np.float64)
    solution = _solve_lp(matrix, answers, norm, bound)
    guess = (solution > 0.5).astype(np.int64)
    residual = float(np.abs(matrix @ guess - answers).max())
    return ReconstructionResult(guess, solution, m, residual)


def dp_reconstruction_bound(epsilon: float, delta: float = 0.0) -> float:
    r"""Most a reconstruction can recover, on average, from an (epsilon, delta)-DP interface.

    For uniformly random secret bits and an interaction that is (epsilon, delta)-DP with respect
    to changing one row's bit, every guess of bit ``i`` is a test between two neighbours, so its
    false-positive and false-negative rates satisfy ``FPR + e^eps FNR >= 1 - delta`` and the
    symmetric inequality (Kairouz, Oh and Viswanath 2015); adding them, the error rate
    ``(FPR + FNR)/2 >= (1 - delta)/(1 + e^eps)``, so the expected fraction recovered is at most

    .. math:: \frac{e^\epsilon + \delta}{1 + e^\epsilon}.

    (Under add/remove-one-row neighbours, changing a bit is two steps: pass ``2 epsilon``.)

    Examples
    --------
    >>> round(dp_reconstruction_bound(1.0), 4)
    0.7311
    >>> dp_reconstruction_bound(1e-9) < 0.5 + 1e-9
    True
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    return (math.exp(eps) + dlt) / (1.0 + math.exp(eps)) if eps < 700 else 1.0


def reconstruction_vs_noise(
    secret: Sequence[int] | NDArray[Any],
    scales: Sequence[float],
    *,
    noise: str = "uniform",
    queries: int | None = None,
    source: RandomSource | None = None,
) -> list[tuple[float, float]]:
    """Fraction of secret bits the LP attack recovers at each noise level.

    For each ``scale`` a fresh :func:`subset_sum_oracle` (``noise``, ``scale``) is attacked
    with :func:`lp_reconstruction`. The curve falls from 1 (error ``o(sqrt(n))``) towards 1/2.

    Returns
    -------
    list of (scale, fraction recovered)

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource, bernoulli
    >>> secret = bernoulli("1/2", 64, source=InsecureSeededSource(4)).astype(int)
    >>> curve = reconstruction_vs_noise(secret, [0.1, 40.0], source=InsecureSeededSource(5))
    >>> curve[0][1] == 1.0 and curve[1][1] < 0.8
    True
    """
    bits = _check_secret(secret)
    src = resolve_source(source)
    out: list[tuple[float, float]] = []
    for scale in scales:
        oracle = subset_sum_oracle(bits, noise=noise, scale=scale, source=src)
        result = lp_reconstruction(oracle, int(bits.size), queries=queries, source=src)
        out.append((float(scale), result.fraction_recovered(bits)))
    return out
