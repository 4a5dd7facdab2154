r"""Private model and hyper-parameter selection over private validation scores.

:class:`DPModelSelector` trains candidate DP estimators and picks one with the exponential
mechanism or report-noisy-max (as permute-and-flip) applied to validation scores, following
Chaudhuri, Monteleoni and Sarwate (2011), Algorithm 3 ("private parameter tuning").

Guarantee (replace-one neighbours, ``n`` public)
    Rows are split into parts by a uniformly random permutation drawn independently of the
    data, so a replaced row stays in its part. Each validation row adds a score in [0, 1] to
    every candidate (1 if classified correctly; for regressors
    :math:`1 - \min(1, ((\hat y - y)/(u - l))^2)` with the declared ``label_bounds``), so the
    scores have sensitivity 1 and the selection is ``epsilon``-DP in the validation rows
    (McSherry and Talwar 2007; McKenna and Sheldon 2020 for permute-and-flip); the trained
    candidates are DP in their training rows, and the choice is post-processing of them.

    - ``strategy="disjoint"`` (default, CMS11 Algorithm 3): candidate ``i`` trains on its own
      part. A row lies in exactly one part, so the whole procedure is
      :math:`(\max(\epsilon_{sel}, \max_i\epsilon_i), \max_i\delta_i)`-DP (parallel composition,
      lecture 003; McSherry 2009).
    - ``strategy="shared"``: every candidate trains on the same training part, the validation
      part is held out: :math:`(\max(\epsilon_{sel}, \sum_i\epsilon_i), \sum_i\delta_i)`-DP
      (sequential composition of the candidates, in parallel with the selection).
    - ``refit=True`` retrains the chosen configuration on all rows and adds its budget
      (sequential composition).

Only the chosen index is released, never the scores (publishing them would cost more).

Warnings: a :class:`~dpcurator.errors.PrivacyWarning` when a classifier candidate has no
declared ``classes=`` (its labels would be read from its part of the rows), and when the
selector itself, or a clone of it, is fitted again (``cross_val_score``, ``GridSearchCV``).
Its own fits of the candidates are accounted in ``budget_`` and do not warn.

Examples
--------
>>> import numpy as np
>>> from dpcurator.learn import DPLogisticRegression
>>> from dpcurator.noise import InsecureSeededSource
>>> X = np.array([[0.9, 0.1], [0.1, 0.9]] * 300)
>>> y = np.array([1, 0] * 300)
>>> candidates = [DPLogisticRegression(alpha=a, classes=[0, 1]) for a in (0.001, 0.01, 0.1)]
>>> selector = DPModelSelector(candidates, epsilon=1.0, source=InsecureSeededSource(0))
>>> selector.fit(X, y).budget_
Budget(epsilon=1.0, delta=0.0)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, is_classifier, is_regressor  # type: ignore[import-untyped, unused-ignore]
from sklearn.exceptions import NotFittedError  # type: ignore[import-untyped, unused-ignore]

from dpcurator._validation import check_epsilon, check_probability
from dpcurator.accounting import (
    ApproxDPEvent,
    Budget,
    ComposedEvent,
    PrivacyEvent,
    PureDPEvent,
    parallel_composition,
)
from dpcurator.errors import InvalidParameterError, PrivacyWarning
from dpcurator.learn._bounds import check_bounds_pair, check_matrix
from dpcurator.learn._inputs import (
    FitLedgerMixin,
    check_choice,
    check_flag,
    internal_fits,
    validate_labels,
    with_source,
)
from dpcurator.mechanisms import exponential_mechanism, report_noisy_max
from dpcurator.noise import RandomSource, resolve_source, uniform_integers

__all__ = ["DPModelSelector", "random_permutation"]

_MECHANISMS = ("report_noisy_max", "exponential")
_STRATEGIES = ("disjoint", "shared")


def random_permutation(n: int, source: RandomSource | None = None) -> NDArray[np.int64]:
    """Return a uniformly random permutation of ``range(n)``, from exact uniform integers.

    Sorts ``n`` independent uniform 63-bit keys; keys that tie (probability below
    ``n**2 / 2**64``) are redrawn, so the permutation is exactly uniform.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> sorted(random_permutation(5, InsecureSeededSource(0)).tolist())
    [0, 1, 2, 3, 4]
    """
    while True:
        keys = np.asarray(uniform_integers(2**63, n, source=source), dtype=np.int64)
        if np.unique(keys).size == n:
            out: NDArray[np.int64] = np.argsort(keys, kind="stable").astype(np.int64)
            return out


def _event_of(budget: Budget) -> PrivacyEvent:
    if budget.delta == 0.0:
        return PureDPEvent(epsilon=budget.epsilon)
    return ApproxDPEvent(epsilon=budget.epsilon, delta=budget.delta)


def _budget_of(model: object, index: int) -> Budget:
    budget = getattr(model, "budget_", None)
    if not isinstance(budget, Budget):
        raise InvalidParameterError(
            f"estimators[{index}]",
            type(model).__name__,
            "must be a DP estimator that records its budget_ when fitted",
        )
    return budget


class DPModelSelector(FitLedgerMixin, BaseEstimator):  # type: ignore[misc, unused-ignore]
    r"""Choose among DP candidate estimators with a private validation score.

    Parameters
    ----------
    estimators : sequence of estimators
        Unfitted DP estimators of one kind (classifiers, or regressors): different models or
        hyper-parameters, each with its own ``epsilon``/``delta``. They are cloned.
    epsilon : float, default 1.0
        Budget of the selection step, > 0.
    mechanism : {"report_noisy_max", "exponential"}, default "report_noisy_max"
        Permute-and-flip (report-noisy-max with exponential noise) or the exponential mechanism;
        both from :mod:`dpcurator.mechanisms`.
    strategy : {"disjoint", "shared"}, default "disjoint"
        See the module guarantee.
    validation_fraction : float, optional
        Share of rows used for validation, in (0, 1). Default: ``1 / (m + 1)`` for ``m``
        candidates with ``"disjoint"`` (equal parts, as in CMS11), 0.2 with ``"shared"``.
    label_bounds : tuple (low, high), optional
        Declared label range for regressors' scores (required for regressors).
    refit : bool, default False
        Retrain the chosen configuration on all rows (spends its budget once more).
    source : RandomSource, optional
        Randomness for the split and the selection, and for candidates whose ``source`` is
        ``None``; ``None`` means the secure source.

    Attributes
    ----------
    best_estimator_ : estimator
        The chosen candidate, fitted (on its part, or on all rows with ``refit``).
    best_index_ : int
    privacy_event_ : PrivacyEvent
    budget_ : Budget
        The guarantee of the whole procedure.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.learn import DPLinearSVC, DPLogisticRegression
    >>> from dpcurator.noise import InsecureSeededSource
    >>> X = np.array([[0.9, 0.1], [0.1, 0.9]] * 300)
    >>> y = np.array([1, 0] * 300)
    >>> candidates = [DPLogisticRegression(classes=[0, 1]), DPLinearSVC(classes=[0, 1])]
    >>> selector = DPModelSelector(candidates, epsilon=2.0,
    ...                            source=InsecureSeededSource(3)).fit(X, y)
    >>> selector.best_index_ in (0, 1), selector.predict([[1.0, 0.0]])
    (True, array([1]))
    """

    def __init__(
        self,
        estimators: Sequence[Any],
        *,
        epsilon: float = 1.0,
        mechanism: str = "report_noisy_max",
        strategy: str = "disjoint",
        validation_fraction: float | None = None,
        label_bounds: tuple[float, float] | None = None,
        refit: bool = False,
        source: RandomSource | None = None,
    ) -> None:
        self.estimators = estimators
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.strategy = strategy
        self.validation_fraction = validation_fraction
        self.label_bounds = label_bounds
        self.refit = refit
        self.source = source

    def _candidates(self) -> list[Any]:
        if isinstance(self.estimators, str) or not isinstance(self.estimators, Sequence):
            raise InvalidParameterError(
                "estimators", type(self.estimators).__name__, "must be a sequence of estimators"
            )
        if len(self.estimators) == 0:
            raise InvalidParameterError("estimators", "[]", "must hold at least one estimator")
        out = []
        for i, estimator in enumerate(self.estimators):
            if not (is_classifier(estimator) or is_regressor(estimator)):
                raise InvalidParameterError(
                    f"estimators[{i}]",
                    type(estimator).__name__,
                    "must be a classifier or regressor",
                )
            out.append(with_source(estimator, self.source))
        kinds = {is_classifier(m) for m in out}
        if len(kinds) != 1:
            raise InvalidParameterError(
                "estimators", "<mixed>", "must be all classifiers or all regressors"
            )
        return out

    @staticmethod
    def _warn_undeclared_classes(candidates: list[Any]) -> None:
        undeclared = [
            f"estimators[{i}]"
            for i, model in enumerate(candidates)
            if model.get_params().get("classes", "") is None
        ]
        if undeclared:
            warnings.warn(
                f"{', '.join(undeclared)} read their class labels from y: the set of labels "
                "present is not private. Declare every label that may occur on each "
                "candidate, e.g. DPLogisticRegression(classes=[0, 1]).",
                PrivacyWarning,
                stacklevel=3,
            )

    def _fraction(self, m: int) -> float:
        if self.validation_fraction is None:
            return 1.0 / (m + 1) if self.strategy == "disjoint" else 0.2
        return check_probability(
            self.validation_fraction, "validation_fraction", open_left=True, open_right=True
        )

    def _scores(
        self, model: Any, X: NDArray[np.float64], y: NDArray[Any], classifier: bool
    ) -> float:
        predicted = np.asarray(model.predict(X))
        if classifier:
            return float(np.count_nonzero(predicted == y))
        low, high = check_bounds_pair(self.label_bounds, "label_bounds")
        scaled = (predicted.astype(np.float64) - np.clip(y.astype(np.float64), low, high)) / (
            high - low
        )
        return float(np.sum(1.0 - np.minimum(1.0, scaled * scaled)))

    def fit(self, X: ArrayLike, y: ArrayLike) -> DPModelSelector:
        """Train the candidates, score them privately and keep the chosen one.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
        y : array_like of shape (n_samples,)

        Returns
        -------
        DPModelSelector
            ``self``.
        """
        eps = check_epsilon(self.epsilon)
        check_choice(self.mechanism, "mechanism", _MECHANISMS)
        check_choice(self.strategy, "strategy", _STRATEGIES)
        check_flag(self.refit, "refit")
        source = resolve_source(self.source)
        candidates = self._candidates()
        classifier = is_classifier(candidates[0])
        if not classifier:
            check_bounds_pair(self.label_bounds, "label_bounds")
        else:
            self._warn_undeclared_classes(candidates)
        array = check_matrix(X)
        labels = validate_labels(y, array.shape[0])
        n = array.shape[0]
        m = len(candidates)
        n_valid = round(self._fraction(m) * n)
        n_train = n - n_valid
        parts = m if self.strategy == "disjoint" else 1
        if n_valid < 1 or n_train < 2 * parts:
            raise InvalidParameterError(
                "X", f"<{n} rows>", f"has too few rows to train {m} candidates and validate"
            )
        order = random_permutation(n, source)
        valid, train = order[:n_valid], order[n_valid:]
        chunks = np.array_split(train, parts)
        scores = np.empty(m)
        budgets = []
        for i, model in enumerate(candidates):
            rows = chunks[i] if self.strategy == "disjoint" else chunks[0]
            with internal_fits():  # accounted below, in budget_
                model.fit(array[rows], labels[rows])
            budgets.append(_budget_of(model, i))
            scores[i] = self._scores(model, array[valid], labels[valid], classifier)
        if self.mechanism == "report_noisy_max":
            index = report_noisy_max(
                scores, epsilon=eps, sensitivity=1.0, monotonic=False, source=source
            ).value
        else:
            index = exponential_mechanism(
                list(range(m)), scores, epsilon=eps, sensitivity=1.0, source=source
            ).value
        selection = PureDPEvent(epsilon=eps)
        if self.strategy == "disjoint":
            training = parallel_composition([_event_of(b) for b in budgets])
            spent = Budget(max(b.epsilon for b in budgets), max(b.delta for b in budgets))
        else:
            total = Budget(0.0)
            for b in budgets:
                total = total + b
            training = _event_of(total)
            spent = total
        event: PrivacyEvent = parallel_composition([training, selection])
        budget = Budget(max(spent.epsilon, eps), spent.delta)
        best = candidates[index]
        if self.refit:
            with internal_fits():
                best = with_source(self.estimators[index], self.source).fit(array, labels)
            again = _budget_of(best, index)
            event = ComposedEvent((event, _event_of(again)))
            budget = budget + again
        self.best_estimator_ = best
        self.best_index_ = int(index)
        self.privacy_event_ = event
        self.budget_ = budget
        self.n_features_in_ = array.shape[1]
        self._count_fit(budget)
        return self

    def _fitted(self) -> Any:
        if not hasattr(self, "best_estimator_"):
            raise NotFittedError("DPModelSelector is not fitted yet; call fit first.")
        return self.best_estimator_

    @property
    def classes_(self) -> NDArray[Any]:
        """Class labels of the chosen classifier."""
        out: NDArray[Any] = self._fitted().classes_
        return out

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Predict with the chosen estimator.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
        """
        out: NDArray[Any] = self._fitted().predict(X)
        return out

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """Decision function of the chosen estimator (classifiers).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray
        """
        out: NDArray[np.float64] = self._fitted().decision_function(X)
        return out

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities of the chosen estimator (if it has them).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray of shape (n_samples, n_classes)
        """
        out: NDArray[np.float64] = self._fitted().predict_proba(X)
        return out

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Score of the chosen estimator (accuracy or R^2) on ``X``, ``y``.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
        y : array_like of shape (n_samples,)

        Returns
        -------
        float
        """
        return float(self._fitted().score(X, y))
