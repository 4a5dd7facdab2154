r"""Statistical bounds shared by the adversary layer: one implementation, used by all.

:func:`clopper_pearson_bounds` gives exact one-sided Clopper-Pearson bounds on binomial
proportions, vectorised over the counts. :mod:`dpcurator.audit` certifies epsilon lower bounds
with it and :mod:`dpcurator.attacks` certifies where a membership attack breaks the DP trade-off;
both sit in one layer and cannot import each other, so the bound lives here, at the bottom, next
to :mod:`dpcurator._validation`.

Examples
--------
>>> lower, upper = clopper_pearson_bounds([0, 5, 10], 10, 0.025)
>>> lower.round(4).tolist(), upper.round(4).tolist()
([0.0, 0.1871, 0.6915], [0.3085, 0.8129, 1.0])
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from dpcurator._validation import check_probability
from dpcurator.errors import InvalidParameterError

__all__ = ["clopper_pearson_bounds"]


def clopper_pearson_bounds(
    successes: ArrayLike, trials: ArrayLike, alpha: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""One-sided Clopper-Pearson bounds ``(LCB, UCB)`` on binomial proportions, vectorised.

    For ``k`` successes in ``n`` independent trials of probability ``p``,

    .. math:: \mathrm{LCB} = B^{-1}(\alpha;\, k,\, n - k + 1) \ (0 \text{ if } k = 0),
              \qquad
              \mathrm{UCB} = B^{-1}(1 - \alpha;\, k + 1,\, n - k) \ (1 \text{ if } k = n),

    with :math:`B^{-1}(\cdot; a, b)` the Beta quantile; ``P[p < LCB] <= alpha`` and
    ``P[p > UCB] <= alpha`` for every ``p`` (Clopper and Pearson, Biometrika 1934: the bound
    inverts the binomial tail, so it is exact, never below the nominal level).

    Parameters
    ----------
    successes : array_like of int
        Counts ``k``, each in ``[0, n]``.
    trials : int or array_like of int
        ``n >= 1``, broadcast against ``successes``.
    alpha : float
        Failure probability of each one-sided bound, in (0, 1).

    Returns
    -------
    lower, upper : numpy.ndarray of float
        The bounds, shaped like ``successes`` broadcast with ``trials``.

    Raises
    ------
    InvalidParameterError
        If a count is negative or exceeds its trials, a trial count is below 1, a value is not
        an integer, or ``alpha`` is outside (0, 1).

    Examples
    --------
    No success in 1,000 trials: the proportion is below 0.37 % with 97.5 % confidence.

    >>> lower, upper = clopper_pearson_bounds(0, 1000, 0.025)
    >>> float(lower), round(float(upper), 5)
    (0.0, 0.00368)
    """
    a = check_probability(alpha, "alpha", open_left=True, open_right=True)
    k, n = np.broadcast_arrays(
        _counts(successes, "successes", minimum=0), _counts(trials, "trials", minimum=1)
    )
    if (k > n).any():
        raise InvalidParameterError(
            "successes", _show(k[k > n]), f"must be <= trials ({_show(n[k > n])})"
        )
    some, short = k > 0, k < n  # the Beta quantile is undefined on the closed ends
    lower = np.where(some, stats.beta.ppf(a, np.where(some, k, 1), n - k + 1), 0.0)
    upper = np.where(short, stats.beta.ppf(1.0 - a, k + 1, np.where(short, n - k, 1)), 1.0)
    return np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)


def _counts(values: ArrayLike, name: str, *, minimum: int) -> NDArray[np.int64]:
    """Return integer counts of at least ``minimum`` (integral floats are accepted)."""
    raw = np.asarray(values)
    if raw.dtype == np.bool_ or raw.dtype.kind not in "iuf":
        raise InvalidParameterError(name, _show(raw), "must hold integers")
    if raw.dtype.kind == "f" and not (np.isfinite(raw).all() and (raw == np.round(raw)).all()):
        raise InvalidParameterError(name, _show(raw), "must hold integers")
    counts = raw.astype(np.int64)
    if (counts < minimum).any():
        raise InvalidParameterError(name, _show(counts[counts < minimum]), f"must be >= {minimum}")
    return counts


def _show(values: NDArray[np.generic]) -> object:
    """Show offending values in an error message: the number itself, or an array's first few."""
    flat = values.reshape(-1)
    if flat.size == 1:
        return flat[0].item()
    return f"<array with {flat[:3].tolist()}{' ...' if flat.size > 3 else ''}>"
