r"""The noise step of a hierarchical release: one noisy histogram per level, and its privacy.

A hierarchy of ``L`` measured levels (nation, states, counties ...; with an attribute, each
level's histogram is broken down by attribute cell) is released by adding independent integer
noise to every count of every level:

- ``"geometric"``: two-sided geometric (discrete Laplace) noise, pure epsilon-DP;
- ``"discrete_gaussian"``: discrete Gaussian noise, rho-zCDP.

Neighbour relation: add or remove one person, i.e. one unit of count in one leaf cell. The
person sits in exactly one node of each level, so each level's histogram changes in one
coordinate by one: L1 and L2 sensitivity 1 per level. Level ``l`` gets the share
``w_l / sum(w)`` of the budget; the levels compose by basic composition
(:math:`\epsilon = \sum_l \epsilon_l`) or additively in zCDP (:math:`\rho = \sum_l \rho_l`).
With equal shares the geometric scale is :math:`\lambda = \Delta L / \epsilon` (the lectures'
:math:`\lambda = 2L/\epsilon` for a count-of-counts histogram, :math:`\Delta = 2`; plain counts
have :math:`\Delta = 1`).

Sources: Ghosh, Roughgarden and Sundararajan 2009 (geometric mechanism); Canonne, Kamath and
Steinke 2020 (discrete Gaussian, Theorem 14); Fioretto, Van Hentenryck and Zhu 2021 and Kuo et
al. 2018 (the hierarchical release, hierarchy.md (a) and B1); lecture 003, "The Census Data
Release Problem".

Examples
--------
>>> import numpy as np
>>> from dpcurator.noise import InsecureSeededSource
>>> step = add_level_noise([np.array([10]), np.array([6, 4])], mechanism="geometric",
...                        budget=1.0, source=InsecureSeededSource(0))
>>> [level.epsilon for level in step.levels], step.epsilon
([0.5, 0.5], 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator._validation import check_epsilon, check_integer, check_positive
from dpcurator.accounting import (
    BasicAccountant,
    PrivacyEvent,
    ZCDPAccountant,
    zcdp_gaussian_sigma,
)
from dpcurator.errors import InternalError, InvalidParameterError
from dpcurator.mechanisms import discrete_gaussian_mechanism, geometric_mechanism
from dpcurator.noise import RandomSource

__all__ = [
    "MECHANISMS",
    "LevelNoise",
    "NoisyLevels",
    "add_level_noise",
    "geometric_alpha",
    "geometric_pmf",
    "geometric_scale",
    "geometric_variance",
    "split_budget",
]

Mechanism = Literal["geometric", "discrete_gaussian"]
MECHANISMS: tuple[Mechanism, ...] = ("geometric", "discrete_gaussian")
"""Noise of a hierarchical release: pure epsilon-DP, or rho-zCDP."""


def geometric_scale(epsilon: float, levels: int, sensitivity: int = 1) -> float:
    r"""Scale :math:`\lambda = \Delta L / \epsilon` of each level's geometric noise.

    An equal split of ``epsilon`` over ``L`` levels, each a histogram of L1 sensitivity
    ``Delta``, gives every count noise of scale ``lambda`` (hierarchy.md (a), B1; lecture 003).

    Parameters
    ----------
    epsilon : float
        Total budget, > 0.
    levels : int
        Number of measured levels ``L``, >= 1.
    sensitivity : int, default 1
        L1 sensitivity of one level's histogram: 1 for counts and cumulative count-of-counts,
        2 for a count-of-counts histogram (a group changes size).

    Returns
    -------
    float

    Examples
    --------
    >>> geometric_scale(1.0, 3, sensitivity=2), geometric_scale(1.0, 3)
    (6.0, 3.0)
    """
    eps = check_epsilon(epsilon)
    count = check_integer(levels, "levels", minimum=1)
    delta = check_integer(sensitivity, "sensitivity", minimum=1)
    return delta * count / eps


def geometric_alpha(scale: float) -> float:
    r"""Return the ratio :math:`\alpha = e^{-1/\lambda}` of geometric noise of scale ``lambda``.

    Examples
    --------
    >>> round(geometric_alpha(6.0), 6)
    0.846482
    """
    return math.exp(-1.0 / check_positive(scale, "scale"))


def geometric_variance(scale: float) -> float:
    r"""Variance :math:`2\alpha / (1 - \alpha)^2` of geometric noise of scale :math:`\lambda`.

    Examples
    --------
    >>> round(geometric_variance(6.0), 2), round(geometric_variance(60.0), 2)
    (71.83, 7199.83)
    """
    alpha = geometric_alpha(scale)
    return 2.0 * alpha / math.expm1(-1.0 / scale) ** 2


def geometric_pmf(noise: ArrayLike, scale: float) -> NDArray[np.float64]:
    r"""Probability :math:`\frac{1-\alpha}{1+\alpha}\alpha^{|z|}` of geometric noise ``z``.

    Examples
    --------
    >>> p = geometric_pmf([0, 1], 6.0)
    >>> round(float(p[1] / p[0]), 6) == round(geometric_alpha(6.0), 6)
    True
    """
    alpha = geometric_alpha(scale)
    z = np.abs(np.asarray(noise, dtype=np.float64))
    return np.asarray((1.0 - alpha) / (1.0 + alpha) * alpha**z, dtype=np.float64)


def split_budget(total: float, weights: Sequence[float]) -> tuple[float, ...]:
    """Split a budget over levels in proportion to ``weights``.

    Parameters
    ----------
    total : float
        Epsilon or rho, > 0.
    weights : sequence of float
        One non-negative weight per level, not all zero; a level with weight 0 gets nothing
        (and must not be measured).

    Returns
    -------
    tuple of float
        ``total * w_l / sum(w)``; never more than ``total`` in all.

    Examples
    --------
    >>> split_budget(1.0, [1, 1, 2])
    (0.25, 0.25, 0.5)
    """
    budget = check_positive(total, "budget")
    shares = [check_positive(w, "level_weights", allow_zero=True) for w in weights]
    whole = math.fsum(shares)
    if not shares or whole <= 0.0:
        raise InvalidParameterError("level_weights", list(weights), "must not be all zero")
    return tuple(budget * w / whole for w in shares)


@dataclass(frozen=True, slots=True)
class LevelNoise:
    """The noise one level of a hierarchy received.

    Attributes
    ----------
    mechanism : {"geometric", "discrete_gaussian"}
    share : float
        The level's budget: epsilon (geometric) or rho (discrete Gaussian).
    scale : float
        ``lambda`` of the geometric noise, or ``sigma`` of the discrete Gaussian (rounded up
        so that the level spends at most its share).
    variance : float
        Exact variance of one count's noise (the discrete distributions' own, not the
        continuous approximation); the post-processing weights each count by its inverse.
    event : PrivacyEvent
        What the level's release did, for any accountant.
    """

    mechanism: Mechanism
    share: float
    scale: float
    variance: float
    event: PrivacyEvent

    @property
    def std(self) -> float:
        """Standard deviation of one count's noise."""
        return math.sqrt(self.variance)

    @property
    def epsilon(self) -> float | None:
        """The level's epsilon (geometric noise), else None."""
        return self.share if self.mechanism == "geometric" else None

    @property
    def rho(self) -> float | None:
        """The level's rho (discrete Gaussian noise), else None."""
        return self.share if self.mechanism == "discrete_gaussian" else None


@dataclass(frozen=True, slots=True, eq=False)
class NoisyLevels:
    """The output of the noise step: every level's noisy histogram and its noise.

    Attributes
    ----------
    values : tuple of numpy.ndarray
        Noisy int64 histograms, in the order of the input levels.
    levels : tuple of LevelNoise
        The noise of each level.
    """

    values: tuple[NDArray[np.int64], ...]
    levels: tuple[LevelNoise, ...]

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        """The privacy events, one per level."""
        return tuple(level.event for level in self.levels)

    @property
    def epsilon(self) -> float | None:
        """Total epsilon by basic composition (geometric noise), else None."""
        if not self.levels or self.levels[0].mechanism != "geometric":
            return None
        accountant = BasicAccountant()
        for event in self.events:
            accountant.compose(event)
        return accountant.get_epsilon(0.0)

    @property
    def rho(self) -> float | None:
        """Total rho, the sum of the levels' (discrete Gaussian noise), else None."""
        if not self.levels or self.levels[0].mechanism != "discrete_gaussian":
            return None
        accountant = ZCDPAccountant()
        for event in self.events:
            accountant.compose(event)
        return accountant.rho


def check_mechanism(mechanism: object) -> Mechanism:
    """Return ``mechanism`` if it is one of :data:`MECHANISMS`, else raise."""
    for name in MECHANISMS:
        if mechanism == name:
            return name
    raise InvalidParameterError("mechanism", mechanism, f"must be one of {', '.join(MECHANISMS)}")


def add_level_noise(
    histograms: Sequence[ArrayLike],
    *,
    mechanism: str,
    budget: float,
    weights: Sequence[float] | None = None,
    sensitivity: int = 1,
    source: RandomSource | None = None,
) -> NoisyLevels:
    r"""Add independent noise to each level's histogram, with the budget split over levels.

    .. math::

        \tilde c^{(l)} = c^{(l)} + Z^{(l)}, \qquad
        Z^{(l)}_v \sim \mathrm{DLap}(\Delta/\epsilon_l)
        \ \text{or}\ \mathcal{N}_{\mathbb Z}(0, \Delta^2/(2\rho_l)),

    with :math:`\epsilon_l = \epsilon\, w_l / \sum w` (or :math:`\rho_l` likewise). The release
    of all levels is epsilon-DP (:math:`\sum_l \epsilon_l \le \epsilon`, basic composition) or
    rho-zCDP (:math:`\sum_l \rho_l \le \rho`) under add/remove-one-person neighbours, when each
    person adds one to exactly one count of each level (L1 = L2 sensitivity ``Delta = 1`` per
    level; count-of-counts histograms have ``Delta = 2``).

    Sources: Ghosh, Roughgarden and Sundararajan 2009 (geometric mechanism); Canonne, Kamath
    and Steinke 2020, Theorem 14 (discrete Gaussian); Dwork and Roth 2014, Theorem 3.16 (basic
    composition); Bun and Steinke 2016, Lemma 2.3 (zCDP composition).

    Parameters
    ----------
    histograms : sequence of array_like of int
        One histogram per measured level (counts of its nodes, by attribute cell if any).
    mechanism : {"geometric", "discrete_gaussian"}
        Pure epsilon-DP or rho-zCDP noise.
    budget : float
        Epsilon (geometric) or rho (discrete Gaussian), > 0.
    weights : sequence of float, optional
        The split of the budget over the levels (default equal); positive.
    sensitivity : int, default 1
        ``Delta``, the L1 sensitivity of each level's histogram (used as its L2 sensitivity for
        the discrete Gaussian too, which is an upper bound: L2 <= L1 for integer vectors).
    source : RandomSource, optional
        Randomness; secure by default. Pass ``InsecureSeededSource(seed)`` only for
        simulations.

    Returns
    -------
    NoisyLevels

    Raises
    ------
    InvalidParameterError
        For an unknown mechanism, a non-positive budget or weight, or weights that do not
        match the levels.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> step = add_level_noise([[100], [60, 40]], mechanism="discrete_gaussian", budget=0.5,
    ...                        weights=[1, 3], source=InsecureSeededSource(1))
    >>> [round(level.scale, 4) for level in step.levels], round(step.rho, 12)
    ([2.0, 1.1547], 0.5)
    """
    name = check_mechanism(mechanism)
    if len(histograms) == 0:
        raise InvalidParameterError("histograms", histograms, "must hold at least one level")
    split = [1.0] * len(histograms) if weights is None else list(weights)
    if len(split) != len(histograms):
        raise InvalidParameterError(
            "level_weights", split, f"must give one weight per measured level ({len(histograms)})"
        )
    if any(w <= 0 for w in split):
        raise InvalidParameterError("level_weights", split, "must all be > 0")
    delta = check_integer(sensitivity, "sensitivity", minimum=1)
    shares = split_budget(budget, split)
    values: list[NDArray[np.int64]] = []
    levels: list[LevelNoise] = []
    for histogram, share in zip(histograms, shares, strict=True):
        counts = np.asarray(histogram, dtype=np.int64)
        if name == "geometric":
            release = geometric_mechanism(counts, epsilon=share, sensitivity=delta, source=source)
        else:
            sigma = zcdp_gaussian_sigma(share, sensitivity=float(delta))
            release = discrete_gaussian_mechanism(
                counts, sigma=sigma, sensitivity=float(delta), source=source
            )
        error = release.error
        if error is None:  # pragma: no cover (both mechanisms return their error model)
            raise InternalError(f"the {name} mechanism returned no error model")
        values.append(np.asarray(release.value, dtype=np.int64))
        levels.append(LevelNoise(name, share, error.noise_scale, error.variance, release.event))
    return NoisyLevels(tuple(values), tuple(levels))
