"""Candidate distinguishing events, scored on the selection split (private helpers).

Each *family* turns the selection samples of ``M(D)`` and ``M(D')`` into candidate events and
their selection hit counts, vectorised, and can rebuild any candidate as an
:class:`~dpcurator.audit.Event` to count on the certification split. Families:

- thresholds on a scalar score ``{s > t}``, ``{s <= t}`` at pooled quantiles (DP-Sniper's
  threshold attacks, Bichsel et al. 2021; for a scalar output with a monotone likelihood ratio,
  such as a shift of Laplace or Gaussian noise, the Neyman-Pearson optimal events);
- prefix unions of categories (values, histogram bins, float granularities) sorted by their
  estimated likelihood ratio: the plug-in version of the Neyman-Pearson super-level sets
  ``{y : P[M(D) = y] / P[M(D') = y] >= c}``;
- a logistic-regression score for vector outputs (DP-Sniper's classifier), thresholded.

Nothing here looks at the certification split: the events only depend on the selection split,
so the certified Clopper-Pearson bound needs no multiple-comparison correction.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

from dpcurator._stats import clopper_pearson_bounds

__all__ = [
    "Candidates",
    "Event",
    "categorical_codes",
    "categorical_family",
    "custom_family",
    "granularity_feature",
    "histogram_family",
    "logistic_score",
    "selection_bounds",
    "threshold_family",
]

Indicator = Callable[[Any], NDArray[np.bool_]]

_QUANTILE_POINTS = 120
"""Threshold candidates per tail: geometric quantile levels from ``5/N`` to 1/2."""


@dataclass(frozen=True)
class Event:
    """A set ``S`` of outputs, given by its indicator on a batch of outputs.

    Parameters
    ----------
    name : str
        A readable description (``"Y > 1.5"``).
    contains : callable
        Maps a batch of outputs (an array with one entry or row per run, after the audit's
        ``statistic``) to a boolean array: which runs fell in ``S``.

    Examples
    --------
    >>> import numpy as np
    >>> event = Event("Y > 0", lambda y: np.asarray(y) > 0)
    >>> event.contains(np.array([-1.0, 2.0])).tolist()
    [False, True]
    """

    name: str
    contains: Indicator


@dataclass(frozen=True)
class Candidates:
    """Candidate events of one family with their selection hit counts.

    ``hits[i]`` and ``hits_other[i]`` count the selection samples of ``M(D)`` and ``M(D')`` in
    candidate ``i``; ``build(i)`` rebuilds it as an :class:`Event`.
    """

    hits: NDArray[np.float64]
    hits_other: NDArray[np.float64]
    build: Callable[[int], Event]


def _as_float(values: Any) -> NDArray[np.float64]:
    return np.asarray(values, dtype=np.float64)


# -- thresholds ------------------------------------------------------------------------------
def _threshold_levels(total: int) -> NDArray[np.float64]:
    low = max(5.0 / max(total, 1), 1e-9)
    tail = np.geomspace(low, 0.5, _QUANTILE_POINTS) if low < 0.5 else np.array([0.5])
    return np.unique(np.concatenate([tail, 1.0 - tail, np.linspace(0.02, 0.98, 49)]))


def threshold_family(
    score: NDArray[np.float64],
    score_other: NDArray[np.float64],
    transform: Callable[[Any], NDArray[np.float64]],
    label: str,
) -> Candidates | None:
    """Events ``{s > t}`` and ``{s <= t}`` for thresholds ``t`` at pooled quantiles of ``s``."""
    finite = np.concatenate([score, score_other])
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return None
    levels = _threshold_levels(int(finite.size))
    thresholds = np.unique(np.quantile(finite, levels, method="inverted_cdf"))
    s0, s1 = np.sort(score), np.sort(score_other)
    below0 = np.searchsorted(s0, thresholds, side="right").astype(np.float64)
    below1 = np.searchsorted(s1, thresholds, side="right").astype(np.float64)
    hits = np.concatenate([s0.size - below0, below0])
    hits_other = np.concatenate([s1.size - below1, below1])
    count = thresholds.size

    def build(i: int) -> Event:
        t = float(thresholds[i % count])
        if i < count:
            return Event(f"{label} > {t:.6g}", lambda y: transform(y) > t)
        return Event(f"{label} <= {t:.6g}", lambda y: transform(y) <= t)

    return Candidates(hits, hits_other, build)


# -- categories --------------------------------------------------------------------------------
def categorical_codes(
    values: NDArray[Any], pooled_values: list[NDArray[Any]]
) -> Callable[[NDArray[Any]], NDArray[Any]]:
    """Return an injective map from outputs (values or rows) to hashable 1-D keys.

    1-D arrays are their own keys. Integer or boolean rows are packed into one integer (the
    packing is fixed from ``pooled_values``, all four batches, which does not make the events
    depend on the certification split: the map is injective). Other rows become raw bytes.
    """
    if values.ndim == 1:
        return np.asarray
    if values.dtype.kind in "biu":
        lo = min(int(np.min(v)) for v in pooled_values if v.size)
        hi = max(int(np.max(v)) for v in pooled_values if v.size)
        base = hi - lo + 1
        width = values.shape[1]
        if width * math.log2(max(base, 2)) < 62:
            weights = base ** np.arange(width, dtype=np.int64)

            def pack(v: NDArray[Any]) -> NDArray[np.int64]:
                return (np.asarray(v, dtype=np.int64) - lo) @ weights

            return pack

    def as_bytes(v: NDArray[Any]) -> NDArray[Any]:
        rows = np.ascontiguousarray(v)
        return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).reshape(-1)

    return as_bytes


def _isin(keys: NDArray[Any], chosen: NDArray[Any]) -> NDArray[np.bool_]:
    if keys.dtype.kind == "O":
        members = set(chosen.tolist())
        return np.fromiter((k in members for k in keys.tolist()), dtype=bool, count=keys.size)
    return np.isin(keys, chosen)


def categorical_family(
    keys: NDArray[Any],
    keys_other: NDArray[Any],
    transform: Callable[[Any], NDArray[Any]],
    label: str,
    max_categories: int,
    *,
    describe: Callable[[NDArray[Any]], str] | None = None,
) -> Candidates | None:
    """Prefix unions of categories sorted by their smoothed likelihood ratio, both ways.

    With ``c_v``, ``c'_v`` the selection counts of category ``v`` among ``n``, ``n'`` samples,
    ``r_v = ln((c_v + 1/2)/(n + 1)) - ln((c'_v + 1/2)/(n' + 1))``; the candidates are the sets of
    the ``j`` categories with the largest ``r_v`` (they favour ``D``) and with the smallest (they
    favour ``D'``), for every ``j``. Returns None beyond ``max_categories`` categories.
    """
    if keys.dtype.kind == "O":
        pooled = np.array(sorted(set(keys.tolist()) | set(keys_other.tolist())), dtype=object)
        index = {k: i for i, k in enumerate(pooled.tolist())}
        c0 = np.bincount([index[k] for k in keys.tolist()], minlength=pooled.size)
        c1 = np.bincount([index[k] for k in keys_other.tolist()], minlength=pooled.size)
    else:
        pooled, inverse = np.unique(np.concatenate([keys, keys_other]), return_inverse=True)
        c0 = np.bincount(inverse[: keys.size], minlength=pooled.size)
        c1 = np.bincount(inverse[keys.size :], minlength=pooled.size)
    count = int(pooled.size)
    if count < 2 or count > max_categories:
        return None
    n0, n1 = keys.size, keys_other.size
    ratio = np.log((c0 + 0.5) / (n0 + 1.0)) - np.log((c1 + 0.5) / (n1 + 1.0))
    order_up = np.argsort(-ratio, kind="stable")
    order_down = order_up[::-1]
    prefixes = count - 1
    hits = np.concatenate(
        [np.cumsum(c0[order_up])[:prefixes], np.cumsum(c0[order_down])[:prefixes]]
    )
    hits_other = np.concatenate(
        [np.cumsum(c1[order_up])[:prefixes], np.cumsum(c1[order_down])[:prefixes]]
    )

    def build(i: int) -> Event:
        order = order_up if i < prefixes else order_down
        chosen = pooled[order[: i % prefixes + 1]]
        shown = _describe(chosen) if describe is None else describe(chosen)
        return Event(f"{label} in {shown}", lambda y: _isin(transform(y), chosen))

    return Candidates(hits.astype(np.float64), hits_other.astype(np.float64), build)


def _describe(chosen: NDArray[Any]) -> str:
    values = [_plain(v) for v in chosen.tolist()]
    with contextlib.suppress(TypeError):  # mixed types keep their order
        values = sorted(values)
    shown = ", ".join(repr(v) for v in values[:4])
    more = f", ... ({len(values)} values)" if len(values) > 4 else ""
    return f"{{{shown}{more}}}"


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, np.generic):
        return value.item()
    return value


def histogram_family(
    batch: Any,
    batch_other: Any,
    transform: Callable[[Any], NDArray[np.float64]],
    label: str,
    bins: int,
) -> Candidates | None:
    """Quantile bins of a scalar score ``transform(Y)`` (edges from the selection split)."""
    score, score_other = transform(batch), transform(batch_other)
    pooled = np.concatenate([score, score_other])
    pooled = pooled[np.isfinite(pooled)]
    if pooled.size == 0:
        return None
    edges = np.unique(np.quantile(pooled, np.linspace(0, 1, bins + 1)[1:-1]))

    def binned(y: Any) -> NDArray[np.int64]:
        return np.searchsorted(edges, transform(y), side="right").astype(np.int64)

    def intervals(chosen: NDArray[Any]) -> str:
        # Bin b is (edges[b-1], edges[b]]; adjacent bins merge into one interval.
        runs: list[list[int]] = []
        for b in sorted(int(v) for v in chosen.tolist()):
            if runs and b == runs[-1][1] + 1:
                runs[-1][1] = b
            else:
                runs.append([b, b])
        parts = []
        for lo, hi in runs[:3]:
            left = f"{edges[lo - 1]:.6g}" if lo > 0 else "-inf"
            right = f"{edges[hi]:.6g}]" if hi < edges.size else "inf)"
            parts.append(f"({left}, {right}")
        more = f" ... ({len(runs)} intervals)" if len(runs) > 3 else ""
        return " U ".join(parts) + more

    return categorical_family(
        np.searchsorted(edges, score, side="right").astype(np.int64),
        np.searchsorted(edges, score_other, side="right").astype(np.int64),
        binned,
        label,
        max_categories=bins + 1,
        describe=intervals,
    )


# -- float granularity ---------------------------------------------------------------------------
def granularity_feature(values: Any) -> NDArray[np.int64]:
    """Exponent of the lowest set bit of each float64 (``y = m 2**e`` with ``m`` odd).

    The precision attack of Haney et al. (2022) and the porous-output attack of Mironov (2012)
    both show in this feature: the doubles a textbook floating-point mechanism can output near
    ``f(D)`` sit on a grid that depends on ``f(D)``. Zero maps to -2000, infinities to 2000 and
    NaN to 2001.

    >>> granularity_feature([0.75, 1.0, 0.1]).tolist()
    [-2, 0, -55]
    """
    y = np.asarray(values, dtype=np.float64)
    out = np.zeros(y.shape, dtype=np.int64)
    finite = np.isfinite(y) & (y != 0)
    mantissa, exponent = np.frexp(np.where(finite, y, 1.0))
    digits = np.ldexp(np.abs(mantissa), 53).astype(np.int64)  # exact: 53 significant bits
    lowest = digits & -digits
    trailing = np.log2(lowest.astype(np.float64)).astype(np.int64)  # exact: a power of two
    out[finite] = (exponent - 53 + trailing)[finite]
    out[y == 0] = -2000
    out[np.isinf(y)] = 2000
    out[np.isnan(y)] = 2001
    return out


# -- vector outputs: DP-Sniper's classifier -----------------------------------------------------
def logistic_score(
    features: NDArray[np.float64], features_other: NDArray[np.float64]
) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """Fit ``P[D | y]`` by L2-regularised logistic regression; return the log-odds map.

    Features are standardised with the pooled selection mean and deviation. The returned map is
    fixed once fitted (it depends on the selection split only).
    """
    pooled = np.vstack([features, features_other])
    mean = pooled.mean(axis=0)
    scale = pooled.std(axis=0)
    scale[scale == 0] = 1.0
    x = np.hstack([(pooled - mean) / scale, np.ones((pooled.shape[0], 1))])
    label = np.concatenate([np.ones(features.shape[0]), np.zeros(features_other.shape[0])])
    sign = 2.0 * label - 1.0
    size = float(x.shape[0])

    def loss(w: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        margin = sign * (x @ w)
        value = float(np.logaddexp(0.0, -margin).sum() / size + 1e-4 * w[:-1] @ w[:-1])
        weight = -sign * _expit(-margin)
        grad = x.T @ weight / size
        grad[:-1] += 2e-4 * w[:-1]
        return value, grad

    fit = optimize.minimize(loss, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B")
    w = np.asarray(fit.x, dtype=np.float64)

    def score(y: NDArray[np.float64]) -> NDArray[np.float64]:
        z = (np.asarray(y, dtype=np.float64).reshape(len(y), -1) - mean) / scale
        return np.asarray(z @ w[:-1] + w[-1], dtype=np.float64)

    return score


def _expit(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(stats.logistic.cdf(x), dtype=np.float64)


# -- events given by the caller ----------------------------------------------------------------
def custom_family(events: list[Event], batch: Any, batch_other: Any) -> Candidates:
    """Count the caller's events on the selection split."""
    hits = np.array([np.count_nonzero(e.contains(batch)) for e in events], dtype=np.float64)
    hits_other = np.array(
        [np.count_nonzero(e.contains(batch_other)) for e in events], dtype=np.float64
    )
    return Candidates(hits, hits_other, lambda i: events[i])


# -- scoring -----------------------------------------------------------------------------------
def selection_bounds(
    hits: NDArray[np.float64],
    trials: int,
    hits_other: NDArray[np.float64],
    trials_other: int,
    *,
    alpha: float,
    delta: float,
) -> NDArray[np.float64]:
    """Clopper-Pearson bounds ``ln((LCB(p) - delta) / UCB(p'))`` for many events at once.

    Each one-sided bound is at level ``alpha`` (the caller splits its failure probability over
    the candidates); ``-inf`` where ``LCB(p) <= delta``.
    """
    lcb, _ = clopper_pearson_bounds(hits, trials, alpha)
    _, ucb = clopper_pearson_bounds(hits_other, trials_other, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(lcb > delta, np.log(np.maximum(lcb - delta, 1e-300) / ucb), -np.inf)
    return np.asarray(bound, dtype=np.float64)
