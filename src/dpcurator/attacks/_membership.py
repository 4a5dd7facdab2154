r"""Membership inference: tell whether a record was in a model's training set.

- **Loss threshold** (Yeom, Giacomelli, Fredrikson and Jha, CSF 2018): training records have
  lower loss; score ``-loss`` and say "member" below a threshold (Yeom's: the mean training
  loss). For an epsilon-DP training algorithm the membership advantage ``TPR - FPR`` is at most
  ``e^eps - 1`` (their Theorem 1).
- **LiRA**, the likelihood-ratio attack (Carlini, Chien, Nasr, Song, Terzis and Tramer, IEEE S&P
  2022): train shadow models on random halves of a population, so each record is IN about half
  of them and OUT of the others; fit Gaussians to the record's logit-scaled confidence
  ``phi = ln(p / (1 - p))`` under IN and OUT (per record, or with a global variance when there are
  few shadow models); score the target model's ``phi`` by the log-likelihood ratio (online) or by
  its one-sided position in the OUT Gaussian (offline).
- **Metrics** (Carlini et al. 2022, Section III): the full ROC curve, its AUC (the Mann-Whitney
  probability that a member outscores a non-member), and above all the true-positive rate at low
  false-positive rates (0.1 %, 1 %). For (epsilon, delta)-DP training every threshold satisfies
  ``TPR <= e^eps FPR + delta`` (Kairouz, Oh and Viswanath 2015): :meth:`MembershipResult.violation`.

The attacks are generic: ``train(data) -> model`` and ``score(model, data) -> one number per
record`` are the caller's; data are anything :func:`take` can index (arrays, tuples of arrays,
DataFrames). The learning package's models plug in as they are.

Examples
--------
>>> import numpy as np
>>> members, others = np.array([0.1, 0.2, 0.3, 0.9]), np.array([0.8, 1.0, 1.2, 0.25])
>>> result = membership_result(-members, -others)  # higher score = more likely a member
>>> result.auc, result.tpr_at(0.25)
(0.8125, 0.75)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from dpcurator._validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_probability,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.noise import RandomSource, bernoulli, resolve_source

__all__ = [
    "MembershipResult",
    "RocCurve",
    "lira_attack",
    "logit_confidence",
    "loss_threshold_attack",
    "membership_result",
    "roc_curve",
    "take",
]

Data = Any
Model = Any


def _scores(values: object, name: str) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise InvalidParameterError(name, "<empty>", "must hold at least one score")
    if np.isnan(arr).any():
        raise InvalidParameterError(name, "<NaN scores>", "must not contain NaN")
    return arr


@dataclass(frozen=True)
class RocCurve:
    """The ROC curve of scores: ``(fpr[i], tpr[i])`` for "member iff score >= thresholds[i]".

    Points run from ``(0, 0)`` (threshold ``+inf``) to ``(1, 1)``, one per distinct score.
    """

    fpr: NDArray[np.float64]
    tpr: NDArray[np.float64]
    thresholds: NDArray[np.float64]

    def tpr_at(self, fpr: float) -> float:
        """Largest true-positive rate among thresholds with false-positive rate <= ``fpr``.

        >>> curve = roc_curve([3.0, 2.0], [1.0, 2.5])
        >>> curve.tpr_at(0.0), curve.tpr_at(0.5)
        (0.5, 1.0)
        """
        level = check_probability(fpr, "fpr")
        ok = self.fpr <= level + 1e-12
        return float(self.tpr[ok].max())


def roc_curve(scores_in: object, scores_out: object) -> RocCurve:
    """Compute the ROC curve of member scores against non-member scores (higher = member).

    Examples
    --------
    >>> curve = roc_curve([0.9, 0.8, 0.4], [0.5, 0.1])
    >>> curve.fpr.tolist(), curve.tpr.tolist()
    ([0.0, 0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.3333333333333333, 0.6666666666666666, \
0.6666666666666666, 1.0, 1.0])
    """
    s_in = _scores(scores_in, "scores_in")
    s_out = _scores(scores_out, "scores_out")
    thresholds = np.unique(np.concatenate([s_in, s_out]))[::-1]
    tp = np.searchsorted(np.sort(-s_in), -thresholds, side="right")  # count of s_in >= t
    fp = np.searchsorted(np.sort(-s_out), -thresholds, side="right")
    tpr = np.concatenate([[0.0], tp / s_in.size])
    fpr = np.concatenate([[0.0], fp / s_out.size])
    return RocCurve(fpr=fpr, tpr=tpr, thresholds=np.concatenate([[math.inf], thresholds]))


def _auc(s_in: NDArray[np.float64], s_out: NDArray[np.float64]) -> float:
    """Mann-Whitney: P[member outscores non-member] + P[tie] / 2."""
    ranks = stats.rankdata(np.concatenate([s_in, s_out]))
    u = float(ranks[: s_in.size].sum()) - s_in.size * (s_in.size + 1) / 2.0
    return u / (s_in.size * s_out.size)


@dataclass(frozen=True)
class MembershipResult:
    """Scores of members and non-members, with the metrics of Carlini et al. 2022.

    Attributes
    ----------
    scores_in, scores_out : numpy.ndarray of float
        Attack scores (higher: more likely a member).
    roc : RocCurve
    auc : float
    threshold : float or None
        The attack's own decision threshold, when it has one (Yeom's mean training loss).
    """

    scores_in: NDArray[np.float64]
    scores_out: NDArray[np.float64]
    roc: RocCurve
    auc: float
    threshold: float | None = field(default=None)

    def tpr_at(self, fpr: float) -> float:
        """True-positive rate at false-positive rate ``fpr`` (see :meth:`RocCurve.tpr_at`)."""
        return self.roc.tpr_at(fpr)

    @property
    def tpr_at_0_1_percent(self) -> float:
        """TPR at 0.1 % FPR."""
        return self.tpr_at(0.001)

    @property
    def tpr_at_1_percent(self) -> float:
        """TPR at 1 % FPR."""
        return self.tpr_at(0.01)

    @property
    def advantage(self) -> float:
        """Best membership advantage ``max (TPR - FPR)`` over thresholds (Yeom et al.)."""
        return float(np.max(self.roc.tpr - self.roc.fpr))

    @property
    def decision(self) -> tuple[float, float] | None:
        """``(TPR, FPR)`` of the attack's own threshold (None without one)."""
        if self.threshold is None:
            return None
        return (
            float(np.mean(self.scores_in >= self.threshold)),
            float(np.mean(self.scores_out >= self.threshold)),
        )

    def violation(self, epsilon: float, delta: float = 0.0) -> float:
        r"""Largest ``TPR - e^eps FPR - delta`` over thresholds (<= 0 if consistent with DP).

        These are empirical rates: a positive value of the order of the sampling error is not a
        proof of a violation (use :mod:`dpcurator.audit` for certified bounds).

        >>> result = membership_result([3.0, 2.0, 1.0], [0.0, 0.5, 1.5])
        >>> round(result.violation(1.0), 3)
        0.667
        """
        eps = check_epsilon(epsilon, allow_zero=True)
        dlt = check_delta(delta)
        return float(np.max(self.roc.tpr - math.exp(eps) * self.roc.fpr - dlt))

    def summary(self) -> dict[str, float]:
        """Return AUC, TPR at 0.1 % and 1 % FPR, and the advantage, as a dictionary.

        >>> membership_result([2.0, 3.0], [0.0, 1.0]).summary()["tpr_at_1%_fpr"]
        1.0
        """
        return {
            "auc": self.auc,
            "tpr_at_0.1%_fpr": self.tpr_at_0_1_percent,
            "tpr_at_1%_fpr": self.tpr_at_1_percent,
            "advantage": self.advantage,
        }


def membership_result(
    scores_in: object, scores_out: object, *, threshold: float | None = None
) -> MembershipResult:
    """Summarise attack scores of members and non-members (ROC, AUC, TPR at low FPR).

    Examples
    --------
    >>> result = membership_result([0.9, 0.8, 0.4], [0.5, 0.1])
    >>> round(result.auc, 4), result.tpr_at_1_percent
    (0.8333, 0.6666666666666666)
    """
    s_in = _scores(scores_in, "scores_in")
    s_out = _scores(scores_out, "scores_out")
    return MembershipResult(
        scores_in=s_in,
        scores_out=s_out,
        roc=roc_curve(s_in, s_out),
        auc=_auc(s_in, s_out),
        threshold=threshold,
    )


def take(data: Data, indices: NDArray[np.int64]) -> Data:
    """Select records by position from an array, a tuple/list of arrays, or a DataFrame.

    >>> take((np.arange(5), np.arange(5) * 10), np.array([1, 3]))
    (array([1, 3]), array([10, 30]))
    """
    if isinstance(data, tuple | list):
        return type(data)(take(part, indices) for part in data)
    if hasattr(data, "iloc"):
        return data.iloc[indices]
    return np.asarray(data)[indices]


def _length(data: Data) -> int:
    if isinstance(data, tuple | list):
        lengths = {_length(part) for part in data}
        if len(lengths) != 1:
            raise InvalidParameterError(
                "population", f"<parts of lengths {sorted(lengths)}>", "must align"
            )
        return lengths.pop()
    return len(data)


def logit_confidence(probabilities: object, labels: object) -> NDArray[np.float64]:
    r"""LiRA's statistic ``phi = ln(p_y / (1 - p_y))`` of each record's true-label probability.

    Computed as ``ln p_y - ln(sum_{y' != y} p_y')`` from class probabilities (rows of
    ``probabilities``), clipped to ``[1e-300, 1]`` so that ``phi`` stays finite (Carlini et al.
    2022, Section IV.B: the logit scaling makes the statistic close to Gaussian).

    Examples
    --------
    >>> logit_confidence([[0.1, 0.9], [0.5, 0.5]], [1, 0]).round(4).tolist()
    [2.1972, 0.0]
    """
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels).astype(np.int64).reshape(-1)
    if p.ndim != 2 or p.shape[0] != y.size:
        raise InvalidParameterError(
            "probabilities", f"<shape {p.shape}>", f"must be (records, classes) with {y.size} rows"
        )
    rows = np.arange(y.size)
    p_true = np.clip(p[rows, y], 1e-300, 1.0)
    rest = np.clip(p.sum(axis=1) - p[rows, y], 1e-300, None)
    return np.asarray(np.log(p_true) - np.log(rest), dtype=np.float64)


def loss_threshold_attack(
    loss: Callable[[Data], object],
    members: Data,
    nonmembers: Data,
    *,
    threshold: float | None = None,
) -> MembershipResult:
    """Yeom et al.'s attack: score ``-loss``; say "member" when the loss is below a threshold.

    Parameters
    ----------
    loss : callable
        ``loss(data)`` returns the target model's loss on each record.
    members, nonmembers : data
        Records known to be in / out of the training set (for evaluation).
    threshold : float, optional
        The decision threshold on the loss (default: the mean loss on ``members``, the
        attacker's knowledge of the average training loss in Yeom et al.).

    Returns
    -------
    MembershipResult
        Scores ``-loss``; ``threshold`` is ``-threshold_on_loss`` in score units.

    Examples
    --------
    >>> table = {"a": 0.1, "b": 0.2, "c": 1.5, "d": 2.0}
    >>> result = loss_threshold_attack(lambda keys: [table[k] for k in keys],
    ...                                ["a", "b"], ["c", "d"])
    >>> result.auc, result.decision
    (1.0, (0.5, 0.0))
    """
    if not callable(loss):
        raise InvalidParameterError("loss", loss, "must be callable")
    loss_in = _scores(loss(members), "loss(members)")
    loss_out = _scores(loss(nonmembers), "loss(nonmembers)")
    cut = float(np.mean(loss_in)) if threshold is None else float(threshold)
    return membership_result(-loss_in, -loss_out, threshold=-cut)


def lira_attack(
    train: Callable[[Data], Model],
    score: Callable[[Model, Data], object],
    population: Data,
    target_model: Model,
    members: object,
    *,
    shadow_models: int = 16,
    online: bool = True,
    global_variance: bool | None = None,
    source: RandomSource | None = None,
) -> MembershipResult:
    r"""Run the likelihood-ratio attack (LiRA) of Carlini et al. 2022 against a trained model.

    1. For each of ``shadow_models`` models, include every record of ``population``
       independently with probability 1/2, train on the included records, and compute
       ``phi = score(model, population)`` (the logit-scaled confidence; :func:`logit_confidence`).
    2. Per record, fit ``N(mu_in, sigma_in^2)`` to ``phi`` over the shadows it was IN and
       ``N(mu_out, sigma_out^2)`` over those it was OUT; with ``global_variance`` (default when
       fewer than 64 shadows, as the paper advises) the variances are pooled over records.
    3. Score the target model's ``phi``: online, ``ln N(phi; mu_in, sigma_in^2) - ln N(phi;
       mu_out, sigma_out^2)``; offline, ``(phi - mu_out) / sigma_out`` (the one-sided test).

    Parameters
    ----------
    train : callable
        ``train(data) -> model``.
    score : callable
        ``score(model, data) -> phi`` per record (higher: more confident in the true label).
    population : data
        The records the attacker can use (the target's training set is a subset).
    target_model : object
        The model under attack.
    members : array_like of bool
        Which records of ``population`` the target was trained on (evaluation only).
    shadow_models : int, default 16
        ``>= 2``.
    online : bool, default True
    global_variance : bool, optional
    source : RandomSource, optional
        Draws the shadow models' halves (secure by default).

    Returns
    -------
    MembershipResult

    Examples
    --------
    A "model" that memorises its training set outright:

    >>> from dpcurator.noise import InsecureSeededSource
    >>> population = np.arange(200)
    >>> def train(data): return set(data.tolist())
    >>> def score(model, data): return np.array([4.0 if x in model else -4.0 for x in data])
    >>> truth = population % 2 == 0
    >>> result = lira_attack(train, score, population, train(population[truth]), truth,
    ...                      shadow_models=8, source=InsecureSeededSource(0))
    >>> result.auc, result.tpr_at_0_1_percent
    (1.0, 1.0)
    """
    if not callable(train) or not callable(score):
        raise InvalidParameterError("train", train, "and score must be callable")
    count = check_integer(shadow_models, "shadow_models", minimum=2)
    n = _length(population)
    truth = np.asarray(members).reshape(-1)
    if truth.dtype != np.bool_ or truth.size != n:
        raise InvalidParameterError(
            "members", f"<{truth.dtype} array of {truth.size}>", f"must be {n} booleans"
        )
    pooled = count < 64 if global_variance is None else bool(global_variance)
    src = resolve_source(source)
    inside = np.asarray(bernoulli("1/2", (count, n), source=src), dtype=np.bool_)
    phis = np.empty((count, n), dtype=np.float64)
    for i in range(count):
        model = train(take(population, np.flatnonzero(inside[i])))
        phis[i] = _scores(score(model, population), "score(model, population)")
    target = _scores(score(target_model, population), "score(target_model, population)")
    mu_in, sd_in = _moments(phis, inside, pooled)
    mu_out, sd_out = _moments(phis, ~inside, pooled)
    if online:
        statistic = stats.norm.logpdf(target, mu_in, sd_in) - stats.norm.logpdf(
            target, mu_out, sd_out
        )
    else:
        statistic = (target - mu_out) / sd_out
    values = np.asarray(statistic, dtype=np.float64)
    return membership_result(values[truth], values[~truth])


def _moments(
    phis: NDArray[np.float64], mask: NDArray[np.bool_], pooled: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-record mean and deviation of ``phi`` over the shadows in ``mask`` (with fallbacks)."""
    counts = mask.sum(axis=0)
    total = np.where(mask, phis, 0.0).sum(axis=0)
    overall = float(phis[mask].mean()) if mask.any() else float(phis.mean())
    mean = np.where(counts > 0, total / np.maximum(counts, 1), overall)
    deviation = np.where(mask, phis - mean, 0.0)
    if pooled or (counts < 2).any():
        dof = max(int(counts.sum()) - int((counts > 0).sum()), 1)
        shared = math.sqrt(float((deviation**2).sum()) / dof)
    else:
        shared = 0.0
    if pooled:
        sd = np.full(phis.shape[1], shared)
    else:
        per_record = np.sqrt((deviation**2).sum(axis=0) / np.maximum(counts - 1, 1))
        sd = np.where(counts >= 2, per_record, shared)
    return mean, np.maximum(sd, 1e-6)
