r"""Differentially private linear models with the scikit-learn estimator API.

:class:`DPLogisticRegression`, :class:`DPLinearSVC` (smoothed hinge), :class:`DPLinearRegression`
and :class:`DPRidge` minimise a regularised empirical risk (:mod:`dpcurator.learn._losses`) and
release it privately, by one of three methods:

- ``method="objective"`` (default): objective perturbation (Chaudhuri, Monteleoni and Sarwate
  2011; Kifer, Smith and Thakurta 2012), :func:`~dpcurator.learn.objective_perturbation`;
- ``method="output"``: output perturbation (lecture 002),
  :func:`~dpcurator.learn.output_perturbation`;
- ``method="gradient"``: noisy full-batch gradient descent accounted with the PLD accountant
  (Bassily, Smith and Thakurta 2014; approximate DP only),
  :func:`~dpcurator.learn._gradient.gradient_perturbation`;

with pure-DP Laplace-type noise or (epsilon, delta) Gaussian-type noise.

Guarantee
    For datasets that differ in one row, the fitted parameters (``coef_``, ``intercept_``) are
    (``epsilon``, ``delta``)-DP (``delta = 0`` with Laplace noise), whatever the data. The
    neighbour relation is a parameter: ``neighbours="replace_one"`` (default; one row replaced,
    the number of rows ``n`` public, as in Chaudhuri, Monteleoni and Sarwate 2011 and
    diffprivlib) or ``"add_remove"`` (one row added or removed, as in DP-SGD and Opacus; ``n``
    is then private and each method releases a noisy count of the rows first, inside the same
    budget, :func:`~dpcurator.learn._erm_noise.row_count`). Under add/remove the sensitivities
    are half the replace-one ones (one example's term of the objective changes, not two). The
    guarantee holds because the data bounds are declared: rows are clipped to L2 norm
    ``data_norm`` (:func:`~dpcurator.learn.clip_rows`), labels to the classes seen or to
    ``label_bounds``. ``privacy_event_`` records what was
    released, for any accountant, and ``budget_`` the guarantee. Several classes are one
    multinomial (softmax) model for :class:`DPLogisticRegression` (one budget, by default), or
    one-vs-rest: the ``K`` binary models see the same rows, so the budget is shared among them
    and accounted.

Not private
    ``n_features_in_``, and ``classes_`` unless the classes are declared (``classes=``): by
    default the set of labels present is read from the data without noise, and a
    :class:`~dpcurator.errors.PrivacyWarning` says so. Refitting draws new noise and spends the
    budget again: the second and later fits of one estimator or of its clones (one per fold in
    ``cross_val_score``, one per fold and candidate in ``GridSearchCV``) warn a
    :class:`~dpcurator.errors.PrivacyWarning` (:class:`~dpcurator.learn._inputs.FitLedgerMixin`);
    :class:`~dpcurator.learn.DPModelSelector` chooses hyper-parameters privately.

Examples
--------
>>> import numpy as np
>>> from dpcurator.noise import InsecureSeededSource
>>> X = np.array([[0.9, 0.1], [0.8, 0.3], [0.1, 0.9], [0.2, 0.7]] * 50)
>>> y = np.array([1, 1, 0, 0] * 50)
>>> model = DPLogisticRegression(epsilon=1.0, classes=[0, 1], source=InsecureSeededSource(0))
>>> model = model.fit(X, y)
>>> model.predict([[1.0, 0.0], [0.0, 1.0]])
array([1, 0])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin  # type: ignore[import-untyped, unused-ignore]
from sklearn.utils.multiclass import check_classification_targets  # type: ignore[import-untyped, unused-ignore]
from sklearn.utils.validation import check_is_fitted  # type: ignore[import-untyped, unused-ignore]

from dpcurator._validation import check_delta, check_epsilon, check_integer, check_positive
from dpcurator.accounting import Budget, PrivacyEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.learn._bounds import check_bounds_pair, clip_rows
from dpcurator.learn._erm import output_perturbation
from dpcurator.learn._erm_noise import NEIGHBOURS, Neighbours, Noise
from dpcurator.learn._gradient import gradient_perturbation
from dpcurator.learn._inputs import (
    FitLedgerMixin,
    check_choice,
    check_flag,
    describe,
    validate_features,
    validate_labels,
    warn_classes_from_data,
)
from dpcurator.learn._losses import (
    ERMLoss,
    huber_hinge_loss,
    logistic_loss,
    multinomial_loss,
    squared_loss,
)
from dpcurator.learn._objective import LossFactory, objective_perturbation
from dpcurator.learn._solver import PerturbedModel
from dpcurator.noise import RandomSource, resolve_source

__all__ = ["DPLinearRegression", "DPLinearSVC", "DPLogisticRegression", "DPRidge"]

METHODS = ("objective", "output", "gradient")
NOISES = ("auto", "laplace", "gaussian")
MULTI_CLASS = ("multinomial", "ovr")


def _store_parameters(estimator: BaseEstimator, parameters: dict[str, Any]) -> None:
    """Store the ``__init__`` arguments unchanged (the scikit-learn contract)."""
    for name, value in parameters.items():
        if name != "self":
            setattr(estimator, name, value)


class _DPLinearModel(FitLedgerMixin, BaseEstimator):  # type: ignore[misc, unused-ignore]
    """Shared fitting logic (parameters are declared by each public class)."""

    epsilon: float
    delta: float
    method: str
    noise: str
    alpha: float
    data_norm: float
    fit_intercept: bool
    intercept_scaling: float
    gradient_steps: int
    max_grad_norm: float | None
    neighbours: str
    source: RandomSource | None

    def _check_params(self) -> tuple[float, float, Noise]:
        eps = check_epsilon(self.epsilon)
        dlt = check_delta(self.delta)
        method = check_choice(self.method, "method", METHODS)
        check_choice(self.neighbours, "neighbours", NEIGHBOURS)
        requested = check_choice(self.noise, "noise", NOISES)
        noise: Noise = "gaussian" if requested == "gaussian" else "laplace"
        if requested == "auto":
            noise = "gaussian" if dlt > 0.0 or method == "gradient" else "laplace"
        if method == "gradient" and noise == "laplace":
            raise InvalidParameterError(
                "noise", self.noise, "must be 'auto' or 'gaussian' with method='gradient'"
            )
        if noise == "gaussian" and dlt == 0.0:
            raise InvalidParameterError("delta", self.delta, "must be > 0 for Gaussian noise")
        check_positive(self.alpha, "alpha")
        check_positive(self.data_norm, "data_norm")
        check_flag(self.fit_intercept, "fit_intercept")
        check_positive(self.intercept_scaling, "intercept_scaling")
        check_integer(self.gradient_steps, "gradient_steps", minimum=1)
        if self.max_grad_norm is not None:
            check_positive(self.max_grad_norm, "max_grad_norm")
        resolve_source(self.source)
        return eps, dlt, noise

    def _design(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        clipped = clip_rows(X, self.data_norm)
        if not self.fit_intercept:
            return clipped
        column = np.full((clipped.shape[0], 1), float(self.intercept_scaling))
        return np.hstack([clipped, column])

    def _row_bound(self) -> float:
        r = float(self.data_norm)
        return math.hypot(r, float(self.intercept_scaling)) if self.fit_intercept else r

    def _release(
        self, X: NDArray[np.float64], targets: NDArray[np.float64], loss_for: LossFactory
    ) -> None:
        """Fit on the declared design, release by ``self.method``, store the fitted state."""
        eps, dlt, noise = self._check_params()
        design = self._design(X)
        mu = float(self.alpha)
        neighbours: Neighbours = "add_remove" if self.neighbours == "add_remove" else "replace_one"
        common: dict[str, Any] = {
            "data_norm": self._row_bound(),
            "strong_convexity": mu,
            "epsilon": eps,
            "delta": dlt,
            "neighbours": neighbours,
            "source": self.source,
        }
        model: PerturbedModel
        if self.method == "output":
            model = output_perturbation(design, targets, loss_for(mu), noise=noise, **common)
        elif self.method == "objective":
            model = objective_perturbation(design, targets, loss_for, noise=noise, **common)
        else:
            model = gradient_perturbation(
                design,
                targets,
                loss_for(mu),
                steps=int(self.gradient_steps),
                max_grad_norm=self.max_grad_norm,
                **common,
            )
        coef = model.coef
        self.intercept_: Any
        if self.fit_intercept:
            self.coef_ = coef[:, :-1].copy()
            self.intercept_ = coef[:, -1] * float(self.intercept_scaling)
        else:
            self.coef_ = coef.copy()
            self.intercept_ = np.zeros(coef.shape[0])
        self.privacy_event_: PrivacyEvent = model.event
        self.budget_ = Budget(eps, dlt if noise == "gaussian" else 0.0)
        self.strong_convexity_ = model.strong_convexity
        self.noise_std_ = model.noise_std

    def _raw_scores(self, X: ArrayLike) -> NDArray[np.float64]:
        check_is_fitted(self)
        array = validate_features(self, X, reset=False)
        out: NDArray[np.float64] = clip_rows(array, self.data_norm) @ self.coef_.T + self.intercept_
        return out


class _DPLinearClassifier(ClassifierMixin, _DPLinearModel):  # type: ignore[misc, unused-ignore]
    classes: ArrayLike | None

    def _loss(self, classes: int) -> ERMLoss:
        raise NotImplementedError  # pragma: no cover

    def fit(self, X: ArrayLike, y: ArrayLike) -> Any:
        """Fit the private model (spends ``epsilon``, ``delta`` on ``X``, ``y``).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Finite features; rows are clipped to L2 norm ``data_norm``.
        y : array_like of shape (n_samples,)
            Class labels (at least two classes).

        Returns
        -------
        self
        """
        self._check_params()
        array = validate_features(self, X, reset=True)
        labels = validate_labels(y, array.shape[0])
        try:
            check_classification_targets(labels)
        except ValueError as exc:
            raise InvalidParameterError("y", describe(labels), f"must hold {exc}") from None
        self.classes_, encoded = self._encode(labels)
        k = self.classes_.size
        loss = self._loss(k)
        if k == 2:
            targets = np.where(encoded == 1, 1.0, -1.0)[:, None]
        elif loss.joint:
            targets = (encoded[:, None] == np.arange(k)).astype(np.float64)
        else:
            targets = np.where(encoded[:, None] == np.arange(k), 1.0, -1.0)
        self._release(array, targets, lambda _mu: loss)
        self._count_fit(self.budget_)
        return self

    def _encode(self, labels: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.intp]]:
        if self.classes is None:
            classes, encoded = np.unique(labels, return_inverse=True)
            if classes.size < 2:
                raise InvalidParameterError(
                    "y", describe(labels), "must hold at least 2 classes (only one class found)"
                )
            warn_classes_from_data(self)
            return classes, encoded.astype(np.intp)
        classes = np.unique(np.asarray(self.classes))
        if classes.ndim != 1 or classes.size < 2:
            raise InvalidParameterError(
                "classes", describe(classes), "must declare at least 2 distinct classes"
            )
        try:
            index = np.clip(np.searchsorted(classes, labels), 0, classes.size - 1)
            known = classes[index] == labels
        except (TypeError, ValueError):
            known = np.zeros(labels.shape, dtype=bool)
            index = np.zeros(labels.shape, dtype=np.intp)
        if not bool(np.all(known)):
            raise InvalidParameterError("y", describe(labels), "must only hold declared classes")
        return classes, index.astype(np.intp)

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """Signed scores (post-processing of the private parameters: no privacy cost).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray of shape (n_samples,) for two classes, (n_samples, n_classes) otherwise
        """
        scores = self._raw_scores(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Predicted class labels: the highest score (post-processing).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
        """
        scores = self._raw_scores(X)
        if scores.shape[1] == 1:
            index = (scores[:, 0] > 0).astype(np.intp)
        else:
            index = np.argmax(scores, axis=1)
        out: NDArray[Any] = self.classes_[index]
        return out


class DPLogisticRegression(_DPLinearClassifier):
    r"""Differentially private (L2-regularised) logistic regression.

    Minimises :math:`\frac1n\sum_i\ell(\theta; x_i, y_i) + \frac\alpha2\|\theta\|^2` on rows
    clipped to norm ``data_norm`` (plus a constant column ``intercept_scaling`` when
    ``fit_intercept``; the intercept is regularised too), with the logistic loss
    :math:`\ln(1 + e^{-t\langle\theta, x\rangle})` for two classes (``t`` in {-1, 1}, ``G = 1``,
    ``c = 1/4``) and, for ``K > 2`` classes, the multinomial (softmax) cross-entropy of a
    ``K x d`` matrix (``multi_class="multinomial"``, :class:`~dpcurator.learn.MultinomialLoss`:
    ``G = sqrt(2)``, one release and one budget for all classes) or ``K`` logistic models
    (``multi_class="ovr"``, the budget split among them). Released privately by:

    - ``method="objective"`` (default): objective perturbation, ``epsilon``-DP with Laplace-type
      noise (Chaudhuri, Monteleoni and Sarwate 2011, Algorithm 2) or (``epsilon``,
      ``delta``)-DP with Gaussian-type noise (Kifer, Smith and Thakurta 2012); see
      :func:`dpcurator.learn.objective_perturbation` for the proof. The regulariser may be
      raised to ``strong_convexity_`` to keep the curvature cost at most half the budget.
    - ``method="output"``: output perturbation with L2 sensitivity :math:`2GR/(\alpha n)`
      under replace-one neighbours, :math:`GR/(\alpha\tilde n)` under add/remove (lecture 002,
      sensitivity lemma, :func:`~dpcurator.learn.erm_sensitivity`; ``R`` the row bound with the
      intercept column, :math:`\tilde n` the released count) plus the solver's certified
      slack.
    - ``method="gradient"``: ``gradient_steps`` steps of noisy full-batch gradient descent,
      (``epsilon``, ``delta``)-DP by the PLD accountant (``delta > 0`` required); see
      :func:`~dpcurator.learn._gradient.gradient_perturbation`.

    Neighbours: ``neighbours="replace_one"`` (default) or ``"add_remove"``; the guarantee above
    holds for the relation chosen (see the module notes). Add/remove halves every sensitivity
    and costs a noisy row count (an eighth of ``epsilon`` for ``"objective"`` and
    ``"output"``, a thirty-second of the Gaussian-DP budget for ``"gradient"``).

    Parameters
    ----------
    epsilon : float, default 1.0
        > 0.
    delta : float, default 0.0
        In [0, 1); > 0 for Gaussian noise and for ``method="gradient"``.
    method : {"objective", "output", "gradient"}, default "objective"
    noise : {"auto", "laplace", "gaussian"}, default "auto"
        ``"auto"``: Laplace (pure DP) when ``delta == 0``, Gaussian otherwise (always Gaussian
        for ``"gradient"``).
    alpha : float, default 0.01
        Regularisation strength ``mu`` (of the mean loss), > 0.
    data_norm : float, default 1.0
        Declared L2 bound of a row; larger rows are scaled down onto it.
    fit_intercept : bool, default True
    intercept_scaling : float, default 1.0
        Value of the constant column that carries the intercept.
    multi_class : {"multinomial", "ovr"}, default "multinomial"
        How more than two classes are modelled.
    gradient_steps : int, default 100
        Steps of ``method="gradient"`` (ignored otherwise).
    max_grad_norm : float, optional
        Per-example gradient clipping norm of ``method="gradient"``; default the loss's
        Lipschitz bound (no clipping). A declared, data-independent choice.
    neighbours : {"replace_one", "add_remove"}, default "replace_one"
        The neighbour relation of the guarantee: one row replaced (``n`` public), or one row
        added or removed (``n`` private; a noisy count is released inside the budget).
    classes : array_like, optional
        The declared class labels. By default the labels present in ``y`` are used, which is
        not private: a class present in one dataset and absent from a neighbour changes the
        model's shape, and a :class:`~dpcurator.errors.PrivacyWarning` says so. Declare them.
    source : RandomSource, optional
        Randomness; ``None`` (default) is the process-wide secure source. Pass
        ``InsecureSeededSource(seed)`` only for reproducible tests and simulations (a clone
        copies it, so clones replay the same noise, as with an integer ``random_state``).

    Attributes
    ----------
    classes_ : numpy.ndarray
    coef_ : numpy.ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : numpy.ndarray of shape (1,) or (n_classes,)
    privacy_event_ : PrivacyEvent
        What the fit released.
    budget_ : Budget
        The guarantee: (epsilon, delta) with delta 0 for Laplace noise.
    strong_convexity_ : float
        The regularisation actually used.
    noise_std_ : float
        Noise standard deviation per coordinate (of the parameters for ``"output"``, of the
        linear term ``b`` for ``"objective"``, of each gradient sum for ``"gradient"``).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> X = np.array([[0.9, 0.1], [0.1, 0.9]] * 200)
    >>> y = np.array(["spam", "ham"] * 200)
    >>> model = DPLogisticRegression(epsilon=0.5, classes=["ham", "spam"],
    ...                              source=InsecureSeededSource(1)).fit(X, y)
    >>> model.predict([[1.0, 0.0]]), model.budget_
    (array(['spam'], dtype='<U4'), Budget(epsilon=0.5, delta=0.0))
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 0.0,
        method: str = "objective",
        noise: str = "auto",
        alpha: float = 0.01,
        data_norm: float = 1.0,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        multi_class: str = "multinomial",
        gradient_steps: int = 100,
        max_grad_norm: float | None = None,
        neighbours: str = "replace_one",
        classes: ArrayLike | None = None,
        source: RandomSource | None = None,
    ) -> None:
        _store_parameters(self, locals())

    def _loss(self, classes: int) -> ERMLoss:
        joint = check_choice(self.multi_class, "multi_class", MULTI_CLASS) == "multinomial"
        return multinomial_loss(classes) if joint and classes > 2 else logistic_loss()

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Class probabilities (sigmoid; softmax, or one-vs-rest sigmoids normalised).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray of shape (n_samples, n_classes)
        """
        scores = self._raw_scores(X)
        if scores.shape[1] == 1:
            p = expit(scores[:, 0])
            return np.column_stack([1.0 - p, p])
        if self._loss(scores.shape[1]).joint:
            out: NDArray[np.float64] = softmax(scores, axis=1)
            return out
        probs = expit(scores)
        normalised: NDArray[np.float64] = probs / probs.sum(axis=1, keepdims=True)
        return normalised

    def predict_log_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray of shape (n_samples, n_classes)
        """
        with np.errstate(divide="ignore"):
            out: NDArray[np.float64] = np.log(self.predict_proba(X))
        return out


class DPLinearSVC(_DPLinearClassifier):
    r"""Differentially private linear SVM with the smoothed (Huber) hinge loss.

    Minimises the mean Huber hinge of width ``huber_width`` (Chaudhuri, Monteleoni and Sarwate
    2011, Section 3.4.1: :math:`G = 1`, :math:`c = 1/(2h)`) plus :math:`\frac\alpha2\|\theta\|^2`,
    one-vs-rest for more than two classes, released by objective, output or gradient
    perturbation exactly as :class:`DPLogisticRegression` (same guarantee, same parameters).
    The plain hinge is not differentiable, which objective perturbation needs; the Huber hinge
    is its standard smoothing.

    Parameters
    ----------
    epsilon, delta, method, noise, alpha, data_norm, fit_intercept, intercept_scaling
        As for :class:`DPLogisticRegression`.
    huber_width : float, default 0.5
        ``h`` > 0.
    gradient_steps, max_grad_norm, neighbours, classes, source
        As for :class:`DPLogisticRegression`.

    Attributes
    ----------
    classes_, coef_, intercept_, privacy_event_, budget_, strong_convexity_, noise_std_
        As for :class:`DPLogisticRegression`.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> X = np.array([[0.9, 0.1], [0.1, 0.9]] * 200)
    >>> y = np.array([1, 0] * 200)
    >>> svm = DPLinearSVC(epsilon=1.0, classes=[0, 1], source=InsecureSeededSource(2)).fit(X, y)
    >>> svm.predict([[1.0, 0.0], [0.0, 1.0]])
    array([1, 0])
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 0.0,
        method: str = "objective",
        noise: str = "auto",
        alpha: float = 0.01,
        data_norm: float = 1.0,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        huber_width: float = 0.5,
        gradient_steps: int = 100,
        max_grad_norm: float | None = None,
        neighbours: str = "replace_one",
        classes: ArrayLike | None = None,
        source: RandomSource | None = None,
    ) -> None:
        _store_parameters(self, locals())

    def _loss(self, classes: int) -> ERMLoss:
        return huber_hinge_loss(self.huber_width)


class DPLinearRegression(RegressorMixin, _DPLinearModel):  # type: ignore[misc, unused-ignore]
    r"""Differentially private linear regression with a ridge penalty.

    Minimises :math:`\frac1{2n}\sum_i(\langle\theta, x_i\rangle - t_i)^2 +
    \frac\alpha2\|\theta\|^2` where :math:`t_i` is the label clipped to the declared
    ``label_bounds = (l, u)`` and centred at :math:`m = (l + u)/2`, so :math:`|t_i| \le B =
    (u - l)/2`. A penalty is required: without strong convexity the minimiser has unbounded
    sensitivity (lecture 002, "What if we had no regularizer"). The minimiser lies in the ball
    :math:`\|\theta\| \le B/\sqrt\alpha`, where every residual is at most :math:`a = RB/\sqrt\alpha
    + B`; the squared loss is made linear beyond ``a`` (:func:`dpcurator.learn.squared_loss`),
    which leaves the non-private solution unchanged and bounds the slope, so the loss is
    :math:`aR`-Lipschitz with curvature 1. Then:

    - ``method="output"``: sensitivity :math:`2aR/(\alpha n)` (replace-one; lecture 002) or
      :math:`aR/(\alpha\tilde n)` (add/remove, with a released count :math:`\tilde n`);
    - ``method="objective"`` (default): objective perturbation with :math:`\zeta = aR`,
      :math:`\lambda = R^2` (``a`` computed with the regulariser actually used);
    - ``method="gradient"``: noisy gradient descent with per-example gradients of norm
      :math:`\le aR`.

    Predictions are clipped to ``label_bounds`` (post-processing).

    Parameters
    ----------
    epsilon, delta, method, noise, alpha, data_norm, fit_intercept, intercept_scaling
        As for :class:`DPLogisticRegression` (``alpha`` defaults to 0.1).
    label_bounds : tuple (low, high)
        Declared range of the labels (required; labels outside are clipped).
    gradient_steps, max_grad_norm, neighbours, source
        As for :class:`DPLogisticRegression`.

    Attributes
    ----------
    coef_ : numpy.ndarray of shape (n_features,)
    intercept_ : float
    privacy_event_, budget_, strong_convexity_, noise_std_
        As for :class:`DPLogisticRegression`.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> x = np.linspace(0, 1, 5000)[:, None]
    >>> model = DPLinearRegression(epsilon=2.0, label_bounds=(0, 2), alpha=0.01,
    ...                            source=InsecureSeededSource(0)).fit(x, 2 * x[:, 0])
    >>> bool(model.score(x, 2 * x[:, 0]) > 0.9)  # R^2 (0.94 to 0.99 over 20 seeds)
    True
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 0.0,
        method: str = "objective",
        noise: str = "auto",
        alpha: float = 0.1,
        data_norm: float = 1.0,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        label_bounds: tuple[float, float] | None = None,
        gradient_steps: int = 100,
        max_grad_norm: float | None = None,
        neighbours: str = "replace_one",
        source: RandomSource | None = None,
    ) -> None:
        _store_parameters(self, locals())

    def _bounds(self) -> tuple[float, float]:
        if self.label_bounds is None:
            raise InvalidParameterError(
                "label_bounds", None, "must be declared as (low, high) for a DP regression"
            )
        return check_bounds_pair(self.label_bounds, "label_bounds")

    def fit(self, X: ArrayLike, y: ArrayLike) -> Any:
        """Fit the private model (spends ``epsilon``, ``delta`` on ``X``, ``y``).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Finite features; rows are clipped to L2 norm ``data_norm``.
        y : array_like of shape (n_samples,)
            Finite targets; clipped to ``label_bounds``.

        Returns
        -------
        self
        """
        self._check_params()
        low, high = self._bounds()
        array = validate_features(self, X, reset=True)
        labels = validate_labels(y, array.shape[0])
        try:
            values = np.asarray(labels, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidParameterError("y", describe(labels), "must hold numbers") from None
        if not np.isfinite(values).all():
            raise InvalidParameterError(
                "y", describe(values), "must be finite (no NaN, inf or infinity)"
            )
        middle, half = (low + high) / 2.0, (high - low) / 2.0
        radius = self._row_bound()

        def loss_for(mu: float) -> ERMLoss:
            return squared_loss(radius * half / math.sqrt(mu) + half)

        self._release(array, (np.clip(values, low, high) - middle)[:, None], loss_for)
        self.coef_ = self.coef_[0]
        self.intercept_ = float(self.intercept_[0]) + middle
        self._count_fit(self.budget_)
        return self

    def predict(self, X: ArrayLike) -> NDArray[np.float64]:
        """Predicted targets, clipped to ``label_bounds``.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        array = validate_features(self, X, reset=False)
        low, high = self._bounds()
        raw = clip_rows(array, self.data_norm) @ self.coef_ + self.intercept_
        out: NDArray[np.float64] = np.clip(raw, low, high)
        return out


class DPRidge(DPLinearRegression):
    r"""Differentially private ridge regression: :class:`DPLinearRegression` under its usual name.

    A private linear regression needs the ridge penalty (strong convexity bounds the
    sensitivity), so the two are the same estimator; this name matches
    :class:`sklearn.linear_model.Ridge` for users who look for it.

    Parameters
    ----------
    epsilon, delta, method, noise, alpha, data_norm, fit_intercept, intercept_scaling
        As for :class:`DPLinearRegression`.
    label_bounds, gradient_steps, max_grad_norm, neighbours, source
        As for :class:`DPLinearRegression`.

    Attributes
    ----------
    coef_, intercept_, privacy_event_, budget_, strong_convexity_, noise_std_, n_features_in_
        As for :class:`DPLinearRegression`.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> DPRidge(label_bounds=(0, 1), source=InsecureSeededSource(0)).fit(
    ...     [[0.0], [1.0]] * 100, [0.0, 1.0] * 100).budget_.epsilon
    1.0
    """
