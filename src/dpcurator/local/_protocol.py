"""The shape every local-DP protocol shares: a client randomiser and a server estimator.

A protocol object holds its privacy parameter and the domain. ``privatize`` runs on each device
(vectorised here, to simulate millions of devices) and returns the reports; ``aggregate`` runs on
the server and returns unbiased frequency estimates with their standard errors. The protocol's
``event`` is the privacy event of ONE report of one device, so repeated reports by the same
device are accounted by composing it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

from dpcurator._display import MAX_ROWS, html_table
from dpcurator._validation import check_epsilon, check_integer, check_probability
from dpcurator.accounting import PrivacyEvent, PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.noise import RandomSource

__all__ = ["FrequencyEstimate", "FrequencyOracle", "check_values"]


@dataclass(frozen=True, slots=True, eq=False)
class FrequencyEstimate:
    """Unbiased estimates of how many devices hold each value, with their uncertainty.

    Attributes
    ----------
    counts : numpy.ndarray
        Estimated count of each domain value (unbiased, so possibly negative; see
        :func:`dpcurator.local.project_counts` for consistent post-processing).
    variances : numpy.ndarray
        Variance of each estimate from the protocol's closed form, with the unknown true count
        replaced by the (clipped) estimate.
    n : int
        Number of reports aggregated.
    """

    counts: NDArray[np.float64]
    variances: NDArray[np.float64]
    n: int

    @property
    def std(self) -> NDArray[np.float64]:
        """Standard error of each count."""
        return np.sqrt(self.variances)

    @property
    def frequencies(self) -> NDArray[np.float64]:
        """Estimated frequencies ``counts / n``."""
        return self.counts / self.n

    def confidence_interval(
        self, level: float = 0.95
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Normal-approximation interval for each count (the estimators are sums of n terms)."""
        lvl = check_probability(level, "level", open_left=True, open_right=True)
        z = float(ndtri(0.5 + lvl / 2.0))
        return self.counts - z * self.std, self.counts + z * self.std

    def __repr__(self) -> str:
        head = ", ".join(f"{c:.4g}" for c in self.counts[:5])
        more = ", …" if self.counts.size > 5 else ""
        return (
            f"FrequencyEstimate(n={self.n}, domain_size={self.counts.size}, counts=[{head}{more}])"
        )

    def _repr_html_(self) -> str:
        """Render the estimates as an HTML table for notebooks: count ± std, interval, share."""
        low, high = self.confidence_interval(0.95)
        std = self.std
        frequencies = self.frequencies
        rows = [
            [
                value,
                f"{self.counts[value]:,.1f} ± {std[value]:,.1f}",
                f"[{low[value]:,.1f}, {high[value]:,.1f}]",
                f"{frequencies[value]:.4f}",
            ]
            for value in range(min(self.counts.size, MAX_ROWS))
        ]
        notes = [
            f"{self.n:,} reports. Counts are unbiased, so possibly negative (project_counts "
            "makes them consistent); intervals: normal approximation at 95%."
        ]
        return html_table(
            ["value", "count ± std", "95% interval", "frequency"],
            rows,
            title=f"Frequency estimate over {self.counts.size:,} values",
            notes=notes,
            total_rows=self.counts.size,
        )


def check_values(values: object, domain_size: int, name: str = "values") -> NDArray[np.int64]:
    """Return ``values`` as a flat int64 array of domain indices in ``[0, domain_size)``."""
    arr = np.asarray(values)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int64)
    if arr.size == 0:
        raise InvalidParameterError(name, "<empty array>", "must hold at least one value")
    if not np.issubdtype(arr.dtype, np.integer):
        raise InvalidParameterError(
            name, f"array of dtype {arr.dtype}", "must hold integer domain indices"
        )
    flat = arr.reshape(-1).astype(np.int64)
    outside = int(np.count_nonzero((flat < 0) | (flat >= domain_size)))
    if outside:
        # The message counts the bad entries but never shows a device's value.
        raise InvalidParameterError(
            name, f"array with {outside} entries out of range", f"must lie in [0, {domain_size})"
        )
    return flat


class FrequencyOracle(ABC):
    """Base class of local-DP frequency protocols over the domain ``{0, ..., d-1}``.

    Subclasses implement :meth:`privatize`, :meth:`aggregate` and :meth:`variance`, and document
    their guarantee: for any two inputs ``v, v'`` and any report ``y``,
    ``P[y | v] <= e^eps P[y | v']`` (local DP: the neighbour relation is one device changing
    its value).

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``d >= 2``.
    """

    name: ClassVar[str] = "protocol"

    def __init__(self, *, epsilon: float, domain_size: int) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.domain_size = check_integer(domain_size, "domain_size", minimum=2)

    @property
    def event(self) -> PrivacyEvent:
        """The privacy event of one report by one device."""
        return PureDPEvent(self.epsilon)

    @abstractmethod
    def privatize(self, values: object, *, source: RandomSource | None = None) -> Any:
        """Randomise each device's value (client side); returns the reports."""

    @abstractmethod
    def aggregate(self, reports: Any) -> FrequencyEstimate:
        """Turn reports into unbiased count estimates (server side)."""

    @abstractmethod
    def variance(self, n: int, counts: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """Closed-form variance of each count estimate for ``n`` reports.

        With ``counts`` (true or estimated counts) the exact variance; without, the
        approximation ``Var*`` that drops the count-dependent term (research note D).
        """

    def estimate(self, values: object, *, source: RandomSource | None = None) -> FrequencyEstimate:
        """Simulate: privatize every value, then aggregate the reports."""
        return self.aggregate(self.privatize(values, source=source))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, domain_size={self.domain_size})"
