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
  its one-sided position in the OUT Gaussian (offline). :func:`train_shadow_models` trains the
  shadows once (:class:`ShadowModels`) so that several targets, online and offline, share them;
  :meth:`ShadowModels.pooled_lira` and :meth:`ShadowModels.pooled_loss_attack` attack each model
  with the others as its shadows, Carlini et al.'s evaluation, which resolves low FPRs.
- **Metrics** (Carlini et al. 2022, Section III): the full ROC curve, its AUC (the Mann-Whitney
  probability that a member outscores a non-member), and above all the true-positive rate at low
  false-positive rates (0.1 %, 1 %). For (epsilon, delta)-DP training every threshold satisfies
  ``TPR <= e^eps FPR + delta`` (Kairouz, Oh and Viswanath 2015): :meth:`MembershipResult.violation`
  on the empirical rates, :func:`tradeoff_violations` with Clopper-Pearson bounds simultaneous
  over thresholds (:class:`TradeoffViolations`, and the epsilon the attack certifies).

The attacks are generic: ``train(data) -> model`` and ``score(model, data) -> one number per
record`` are the caller's; data are anything :func:`take` can index (arrays, tuples of arrays,
DataFrames, torch tensors). The learning package's models plug in as they are.

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

from dpcurator._stats import clopper_pearson_bounds
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
    "ShadowModels",
    "TradeoffViolations",
    "lira_attack",
    "logit_confidence",
    "loss_threshold_attack",
    "membership_result",
    "roc_curve",
    "take",
    "tradeoff_violations",
    "train_shadow_models",
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
    if hasattr(data, "shape"):  # numpy arrays, torch tensors: index without a copy to numpy
        return data[indices]
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
    others = np.arange(p.shape[1])[None, :] != y[:, None]
    rest = np.clip(
        np.where(others, p, 0.0).sum(axis=1), 1e-300, None
    )  # not 1 - p_y: no cancellation
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
    return _loss_result(
        _scores(loss(members), "loss(members)"),
        _scores(loss(nonmembers), "loss(nonmembers)"),
        threshold,
    )


def _loss_result(
    loss_in: NDArray[np.float64], loss_out: NDArray[np.float64], threshold: float | None
) -> MembershipResult:
    """Yeom's scores ``-loss``, cut at ``threshold`` (default: the mean loss of members)."""
    cut = float(np.mean(loss_in)) if threshold is None else float(threshold)
    return membership_result(-loss_in, -loss_out, threshold=-cut)


@dataclass(frozen=True)
class ShadowModels:
    r"""Shadow models of LiRA, kept as what the attack needs: each one's ``phi`` on every record.

    Train them once with :func:`train_shadow_models`; then :meth:`lira` attacks any number of
    target models (online and offline) without training again, and :meth:`pooled_lira` and
    :meth:`pooled_loss_attack` attack the models themselves, each in turn the target (the
    evaluation of Carlini et al. 2022).

    Attributes
    ----------
    inside : numpy.ndarray of bool, shape (shadows, records)
        ``inside[i, j]``: record ``j`` was in shadow model ``i``'s training set.
    phis : numpy.ndarray of float, shape (shadows, records)
        ``score(shadow_i, population)``: the logit-scaled confidence of every record.
    """

    inside: NDArray[np.bool_]
    phis: NDArray[np.float64]

    def __post_init__(self) -> None:
        if self.inside.ndim != 2 or self.inside.shape != self.phis.shape:
            raise InvalidParameterError(
                "inside",
                f"<shape {self.inside.shape}>",
                f"must be (shadows, records) like phis {self.phis.shape}",
            )
        if self.inside.shape[0] < 2:
            raise InvalidParameterError("shadow_models", self.inside.shape[0], "must be >= 2")

    @property
    def records(self) -> int:
        """Number of records of the population."""
        return int(self.inside.shape[1])

    def lira(
        self,
        target_phi: object,
        members: object,
        *,
        online: bool = True,
        global_variance: bool | None = None,
    ) -> MembershipResult:
        r"""Score a target model's ``phi`` by LiRA against these shadows (steps 2 and 3).

        Per record, fit ``N(mu_in, sigma_in^2)`` to ``phi`` over the shadows it was IN and
        ``N(mu_out, sigma_out^2)`` over those it was OUT; with ``global_variance`` (default when
        fewer than 64 shadows, as the paper advises) the variances are pooled over records. The
        statistic is ``ln N(phi; mu_in, sigma_in^2) - ln N(phi; mu_out, sigma_out^2)`` online
        and ``(phi - mu_out) / sigma_out`` offline (the one-sided test).

        Parameters
        ----------
        target_phi : array_like of float
            ``score(target_model, population)``.
        members : array_like of bool
            Which records the target was trained on (evaluation only).
        online : bool, default True
        global_variance : bool, optional

        Returns
        -------
        MembershipResult

        Examples
        --------
        >>> inside = np.array([[True, False], [False, True], [True, True], [False, False]])
        >>> shadows = ShadowModels(inside, np.where(inside, 3.0, -3.0) + [[0.1, 0.0]] * 4)
        >>> shadows.lira([3.0, -3.0], np.array([True, False])).auc
        1.0
        """
        target = _scores(target_phi, "target_phi")
        truth = _membership(members, self.records)
        if target.size != self.records:
            raise InvalidParameterError(
                "target_phi", f"<{target.size} scores>", f"must score {self.records} records"
            )
        values = self._statistic(target, online, global_variance)
        return membership_result(values[truth], values[~truth])

    def _statistic(
        self, target: NDArray[np.float64], online: bool, global_variance: bool | None
    ) -> NDArray[np.float64]:
        """LiRA's score of each record of a target's ``phi`` (see :meth:`lira`)."""
        count = int(self.inside.shape[0])
        pooled = count < 64 if global_variance is None else bool(global_variance)
        mu_in, sd_in = _moments(self.phis, self.inside, pooled)
        mu_out, sd_out = _moments(self.phis, ~self.inside, pooled)
        if online:
            statistic = stats.norm.logpdf(target, mu_in, sd_in) - stats.norm.logpdf(
                target, mu_out, sd_out
            )
        else:
            statistic = (target - mu_out) / sd_out
        return np.asarray(statistic, dtype=np.float64)

    def pooled_lira(
        self, *, online: bool = True, global_variance: bool | None = None
    ) -> MembershipResult:
        r"""Attack every model with LiRA, the others as its shadows; pool the scores.

        The evaluation of Carlini et al. 2022 (Section VI.A): of ``m`` models trained on
        fair-coin halves, each in turn is the target and the other ``m - 1`` are its shadows
        (:meth:`lira`), so one training budget measures the attack on ``m`` targets, ``m``
        times as many member and non-member scores as one target gives: enough to resolve true
        positives at 0.1 % false positives. No target is ever its own shadow.

        Parameters
        ----------
        online : bool, default True
        global_variance : bool, optional
            As in :meth:`lira` (default: pooled variances with fewer than 64 shadows).

        Returns
        -------
        MembershipResult
            ``m * records`` scores: each model's members and non-members.

        Examples
        --------
        >>> inside = np.array([[True, False], [False, True], [True, True], [False, False]])
        >>> models = ShadowModels(inside, np.where(inside, 3.0, -3.0))
        >>> result = models.pooled_lira()
        >>> result.scores_in.size, result.scores_out.size, result.auc
        (4, 4, 1.0)
        """
        count = int(self.inside.shape[0])
        if count < 3:
            raise InvalidParameterError("shadow_models", count, "must be >= 3 to pool LiRA")
        scores = np.stack(
            [
                ShadowModels(
                    np.delete(self.inside, i, axis=0), np.delete(self.phis, i, axis=0)
                )._statistic(self.phis[i], online, global_variance)
                for i in range(count)
            ]
        )
        return membership_result(scores[self.inside], scores[~self.inside])

    def pooled_loss_attack(self) -> MembershipResult:
        r"""Yeom's loss attack against every model at once, its scores pooled over the models.

        With ``phi`` the logit-scaled confidence of the true label (:func:`logit_confidence`),
        ``p_y = 1 / (1 + e^{-phi})``, so the cross-entropy loss is ``ln(1 + e^{-phi})`` and
        thresholds on it are thresholds on ``phi``. The decision threshold is Yeom's: the mean
        loss on the members (of all models). Pair with :meth:`pooled_lira` to compare the two
        attacks on the same models.

        Returns
        -------
        MembershipResult

        Examples
        --------
        >>> inside = np.array([[True, False], [False, True]])
        >>> result = ShadowModels(inside, np.where(inside, 3.0, -1.0)).pooled_loss_attack()
        >>> result.auc, result.decision
        (1.0, (1.0, 0.0))
        """
        loss = np.logaddexp(0.0, -self.phis)
        return _loss_result(loss[self.inside], loss[~self.inside], None)


def _membership(members: object, records: int) -> NDArray[np.bool_]:
    truth = np.asarray(members).reshape(-1)
    if truth.dtype != np.bool_ or truth.size != records:
        raise InvalidParameterError(
            "members", f"<{truth.dtype} array of {truth.size}>", f"must be {records} booleans"
        )
    return truth


def train_shadow_models(
    train: Callable[[Data], Model],
    score: Callable[[Model, Data], object],
    population: Data,
    *,
    shadow_models: int = 16,
    source: RandomSource | None = None,
) -> ShadowModels:
    """Train LiRA's shadow models, each on a fair-coin half of ``population`` (step 1).

    Every record of ``population`` joins each shadow's training set independently with
    probability 1/2 (:func:`dpcurator.noise.bernoulli`), so it is IN about half of the shadows and
    OUT of the others; ``phi = score(model, population)`` is kept for every shadow.

    Parameters
    ----------
    train : callable
        ``train(data) -> model``, the training procedure under attack (the same as the
        target's: the attacker knows the algorithm, not the data).
    score : callable
        ``score(model, data) -> phi`` per record (:func:`logit_confidence` of the true label).
    population : data
        Records the attacker holds; :func:`take` selects the halves.
    shadow_models : int, default 16
        ``>= 2``.
    source : RandomSource, optional
        Draws the halves (secure by default).

    Returns
    -------
    ShadowModels

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> def train(data): return set(data.tolist())
    >>> def score(model, data): return np.array([4.0 if x in model else -4.0 for x in data])
    >>> shadows = train_shadow_models(train, score, np.arange(10), shadow_models=4,
    ...                               source=InsecureSeededSource(0))
    >>> shadows.phis.shape, bool((shadows.phis > 0).sum() == shadows.inside.sum())
    ((4, 10), True)
    """
    if not callable(train) or not callable(score):
        raise InvalidParameterError("train", train, "and score must be callable")
    count = check_integer(shadow_models, "shadow_models", minimum=2)
    n = _length(population)
    inside = np.asarray(bernoulli("1/2", (count, n), source=resolve_source(source)), dtype=np.bool_)
    phis = np.empty((count, n), dtype=np.float64)
    for i in range(count):
        model = train(take(population, np.flatnonzero(inside[i])))
        phis[i] = _scores(score(model, population), "score(model, population)")
        if phis[i].size != n:
            raise InvalidParameterError(
                "score", f"<{phis[i].size} scores>", f"must return one per record ({n})"
            )
    return ShadowModels(inside=inside, phis=phis)


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

    1. Train ``shadow_models`` models on fair-coin halves of ``population`` and keep their
       ``phi`` (:func:`train_shadow_models`).
    2. Per record, fit Gaussians to ``phi`` IN and OUT (:meth:`ShadowModels.lira`).
    3. Score the target model's ``phi`` by the likelihood ratio (online) or by its one-sided
       position in the OUT Gaussian (offline).

    To attack several targets, or online and offline, with the same shadows, call
    :func:`train_shadow_models` once and :meth:`ShadowModels.lira` for each.

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
    check_integer(shadow_models, "shadow_models", minimum=2)
    truth = _membership(members, _length(population))
    shadows = train_shadow_models(
        train, score, population, shadow_models=shadow_models, source=source
    )
    target = score(target_model, population)
    return shadows.lira(target, truth, online=online, global_variance=global_variance)


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


@dataclass(frozen=True)
class TradeoffViolations:
    r"""Thresholds at which an attack certifiably breaks ``TPR <= e^eps FPR + delta``.

    Returned by :func:`tradeoff_violations`; empty (``len() == 0``) when every threshold is
    consistent with (epsilon, delta)-DP at the stated confidence.

    Attributes
    ----------
    epsilon, delta : float
        The claim under test.
    confidence : float
        Simultaneous over all thresholds.
    thresholds : numpy.ndarray of float
        Score thresholds (member iff ``score >= t``) where ``TPR_lower > e^eps FPR_upper +
        delta``.
    tpr_lower, fpr_upper : numpy.ndarray of float
        The certified bounds at those thresholds.
    margin : float
        ``max_t TPR_lower(t) - e^eps FPR_upper(t) - delta`` over all thresholds: positive
        exactly when the claim is refuted.
    epsilon_lower_bound : float
        ``max_t ln((TPR_lower(t) - delta) / FPR_upper(t))`` (0 if none is positive): every
        epsilon below it is refuted by the same bounds, at the same confidence.
    """

    epsilon: float
    delta: float
    confidence: float
    thresholds: NDArray[np.float64]
    tpr_lower: NDArray[np.float64]
    fpr_upper: NDArray[np.float64]
    margin: float
    epsilon_lower_bound: float

    def __len__(self) -> int:
        """Return the number of thresholds that break the bound."""
        return int(self.thresholds.size)

    @property
    def refuted(self) -> bool:
        """True when at least one threshold certifiably breaks the bound."""
        return len(self) > 0


def tradeoff_violations(
    result: MembershipResult,
    epsilon: float,
    delta: float = 0.0,
    *,
    confidence: float = 0.95,
) -> TradeoffViolations:
    r"""Certify where a membership attack breaks the DP trade-off ``TPR <= e^eps FPR + delta``.

    If training is (epsilon, delta)-DP under add/remove-one, every membership test (here:
    "member iff score >= t") satisfies ``TPR <= e^eps FPR + delta`` (Kairouz, Oh and Viswanath,
    ICML 2015, Theorem 2.1; Wasserman and Zhou 2010). This function bounds both rates at every
    threshold with one-sided Clopper-Pearson intervals, a lower bound on TPR from the ``n_in``
    members' scores and an upper bound on FPR from the ``n_out`` non-members', and returns the
    thresholds where ``TPR_lower > e^eps FPR_upper + delta``.

    Multiplicity (the correction, stated)
        The bounds are simultaneous over *all* real thresholds, including those chosen after
        seeing the scores: the true TPR is non-increasing in ``t`` and the count above ``t`` is
        a step function, so "some threshold with ``k`` members above it has
        ``TPR(t) < LCB(k)``" is a single binomial tail event of probability at most ``alpha``
        for each ``k``. A union bound over the ``n_in + 1`` possible counts of members and the
        ``n_out + 1`` of non-members (Bonferroni, ``alpha = (1 - confidence) / (2 (n + 1))``
        per count) makes the whole check hold with probability at least ``confidence``.

    What must hold for the bounds to be valid
        Clopper-Pearson treats each record's outcome as an independent trial given its
        membership: exact when members and non-members are scored on independently trained
        models, the standard evaluation (Carlini et al. 2022) for one model whose members were
        chosen by fair coins. For a guarantee from one training run without any independence,
        treat the records as canaries of the one-run audit of Steinke, Nasr and Jagielski 2023
        (:func:`dpcurator.audit.score_canaries`). Scores pooled over models
        (:meth:`ShadowModels.pooled_lira`) add targets trained independently, each on its own
        coins; their LiRA scores share shadow models, the usual evaluation's approximation.

    Parameters
    ----------
    result : MembershipResult
        Scores of members and non-members (higher: more likely a member).
    epsilon : float
        The claimed epsilon, >= 0.
    delta : float, default 0.0
    confidence : float, default 0.95
        Probability that no threshold is reported in error, in (0, 1).

    Returns
    -------
    TradeoffViolations

    Examples
    --------
    Scores that separate 400 members from 400 non-members perfectly refute epsilon = 1; with
    the scores shuffled between the groups nothing is certified:

    >>> perfect = membership_result(np.ones(400), np.zeros(400))
    >>> found = tradeoff_violations(perfect, 1.0)
    >>> found.refuted, found.thresholds.tolist(), round(float(found.tpr_lower[0]), 3)
    (True, [1.0], 0.976)
    >>> round(found.epsilon_lower_bound, 2)  # the largest epsilon these scores refute
    3.71
    >>> mixed = membership_result(np.arange(400) % 2, np.arange(400) % 2)
    >>> len(tradeoff_violations(mixed, 1.0))
    0
    """
    if not isinstance(result, MembershipResult):
        raise InvalidParameterError("result", result, "must be a MembershipResult")
    eps = check_epsilon(epsilon, allow_zero=True)
    dlt = check_delta(delta)
    level = check_probability(confidence, "confidence", open_left=True, open_right=True)
    n_in, n_out = result.scores_in.size, result.scores_out.size
    tp = np.rint(result.roc.tpr * n_in).astype(np.int64)
    fp = np.rint(result.roc.fpr * n_out).astype(np.int64)
    tpr_lower, _ = clopper_pearson_bounds(tp, n_in, (1.0 - level) / (2 * (n_in + 1)))
    _, fpr_upper = clopper_pearson_bounds(fp, n_out, (1.0 - level) / (2 * (n_out + 1)))
    excess = tpr_lower - math.exp(eps) * fpr_upper - dlt
    broken = excess > 0
    with np.errstate(divide="ignore"):
        ratios = np.log(np.maximum(tpr_lower - dlt, 0.0) / fpr_upper)
    return TradeoffViolations(
        epsilon=eps,
        delta=dlt,
        confidence=level,
        thresholds=result.roc.thresholds[broken],
        tpr_lower=tpr_lower[broken],
        fpr_upper=fpr_upper[broken],
        margin=float(excess.max()),
        epsilon_lower_bound=max(float(ratios.max()), 0.0),
    )
