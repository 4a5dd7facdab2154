"""The DP linear estimators: scikit-learn contract, empirical privacy, bad input, accounting.

Privacy audits fit each estimator ``N`` times on two neighbouring datasets (one row replaced,
chosen so that the minimiser moves as much as the sensitivity allows), record a coefficient, and
bound epsilon from below with Clopper-Pearson intervals over threshold events fixed in advance
(``tests/privacy_check.py``, failure probability ``ALPHA``). The claim must survive; a variant
that spends ten times the claimed epsilon must be caught (negative control).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer
from sklearn.utils.estimator_checks import parametrize_with_checks

from dpcurator.accounting import (
    BasicAccountant,
    Budget,
    PLDAccountant,
    PureDPEvent,
    SelfComposedEvent,
    ZCDPAccountant,
    epsilon_for,
)
from dpcurator.errors import InvalidParameterError, PrivacyWarning
from dpcurator.learn import (
    BoundedScaler,
    DPLinearRegression,
    DPLinearSVC,
    DPLogisticRegression,
    DPRidge,
    clip_rows,
)
from dpcurator.noise import InsecureSeededSource
from tests.privacy_check import AuditResult, audit, threshold_events

ALPHA = 1e-3
N = 700

# Re-fitting one instance draws fresh noise from its (stateful) source. Reusing the noise of a
# previous fit would make two releases on different data differ by exactly the difference of the
# non-private models (a differencing attack), so these three checks must fail for a DP estimator.
_FRESH_NOISE = "each fit draws fresh noise from the stateful source; reusing noise breaks DP"
EXPECTED_FAILURES = {
    "check_fit_idempotent": _FRESH_NOISE,
    "check_estimators_overwrite_params": "the source parameter advances its state when drawn from",
}


def _expected_failed_checks(estimator: Any) -> dict[str, str]:
    if isinstance(estimator, BoundedScaler):
        return {}
    if isinstance(estimator, DPLinearRegression):
        # The check refits the same instance with y as a column and compares real-valued
        # predictions; class predictions at epsilon = 1e6 do not move with the fresh noise.
        return {**EXPECTED_FAILURES, "check_supervised_y_2d": _FRESH_NOISE}
    return EXPECTED_FAILURES


# A large epsilon: the common checks test the API conventions, not the accuracy under noise.
@parametrize_with_checks(
    [
        DPLogisticRegression(epsilon=1e6, source=InsecureSeededSource(0)),
        DPLogisticRegression(epsilon=1e6, method="output", source=InsecureSeededSource(0)),
        DPLogisticRegression(
            epsilon=1e6, multi_class="ovr", delta=1e-6, source=InsecureSeededSource(0)
        ),
        DPLogisticRegression(
            epsilon=1e6, method="gradient", delta=1e-6, source=InsecureSeededSource(0)
        ),
        DPLinearSVC(epsilon=1e6, delta=1e-6, source=InsecureSeededSource(0)),
        DPLinearRegression(
            epsilon=1e6, label_bounds=(-4, 4), data_norm=4.0, source=InsecureSeededSource(0)
        ),
        BoundedScaler(),
    ],
    expected_failed_checks=_expected_failed_checks,
)
def test_scikit_learn_contract(estimator: Any, check: Callable[[Any], None]) -> None:
    # The checks fit with labels of their own and refit the same instance: both warn by design.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        check(estimator)


# -- empirical privacy -------------------------------------------------------------------------
def _neighbours(kind: str) -> tuple[NDArray[np.float64], NDArray[Any], NDArray[Any]]:
    """Five rows on one axis; the neighbour flips the label (moves the target) of row 0."""
    X = np.array([[1.0], [1.0], [-1.0], [-1.0], [1.0]])
    if kind == "multiclass":
        labels = np.array([0, 1, 2, 0, 1])
        flipped = labels.copy()
        flipped[0] = 2
        return X, labels, flipped
    if kind == "classifier":
        y = np.array([1, 1, 0, 0, 1])
        y2 = y.copy()
        y2[0] = 0
        return X, y, y2
    y_reg = np.array([1.0, 1.0, -1.0, -1.0, 1.0])
    y2_reg = y_reg.copy()
    y2_reg[0] = -1.0
    return X, y_reg, y2_reg


def _samples(estimator: Any, X: NDArray[Any], y: NDArray[Any], seed: int) -> NDArray[np.float64]:
    out = np.empty(N)
    model = estimator.set_params(source=InsecureSeededSource(seed))
    with warnings.catch_warnings():  # the audit refits one instance on purpose: N releases
        warnings.filterwarnings("ignore", ".* has been fitted", PrivacyWarning)
        for i in range(N):
            out[i] = np.ravel(model.fit(X, y).coef_)[0]
    return out


def _audit(estimator: Any, kind: str, claimed_delta: float) -> AuditResult:
    X, y, y2 = _neighbours(kind)
    a = _samples(estimator, X, y, 11)
    if estimator.neighbours == "add_remove":  # the neighbour has one more row: row 0 flipped
        b = _samples(estimator, np.vstack([X, X[:1]]), np.append(y, y2[:1]), 12)
    else:
        b = _samples(estimator, X, y2, 12)
    # Thresholds fixed in advance: a grid over the range where both laws have mass (the
    # non-private coefficients are within +-1 / alpha = +-2 here; the grid covers the noise).
    thresholds = np.linspace(-4.0, 4.0, 33)
    return audit(a, b, threshold_events(thresholds), alpha=ALPHA, delta=claimed_delta)


PRIVATE_CASES = [
    pytest.param("logistic-objective-laplace", DPLogisticRegression, {}, "classifier"),
    pytest.param(
        "logistic-output-laplace", DPLogisticRegression, {"method": "output"}, "classifier"
    ),
    pytest.param("svc-objective-gaussian", DPLinearSVC, {"delta": 1e-3}, "classifier"),
    pytest.param(
        "ridge-output-gaussian", DPRidge, {"method": "output", "delta": 1e-3}, "regressor"
    ),
    pytest.param("ridge-objective-laplace", DPRidge, {}, "regressor"),
    pytest.param("multinomial-objective-laplace", DPLogisticRegression, {}, "multiclass"),
    pytest.param(
        "multinomial-objective-gaussian", DPLogisticRegression, {"delta": 1e-3}, "multiclass"
    ),
    pytest.param(
        "logistic-gradient",
        DPLogisticRegression,
        {"method": "gradient", "delta": 1e-3, "gradient_steps": 4},
        "classifier",
    ),
    pytest.param(
        "multinomial-gradient",
        DPLogisticRegression,
        {"method": "gradient", "delta": 1e-3, "gradient_steps": 4, "max_grad_norm": 0.5},
        "multiclass",
    ),
    pytest.param(
        "logistic-objective-laplace-add-remove",
        DPLogisticRegression,
        {"neighbours": "add_remove"},
        "classifier",
    ),
    pytest.param(
        "ridge-output-gaussian-add-remove",
        DPRidge,
        {"method": "output", "delta": 1e-3, "neighbours": "add_remove"},
        "regressor",
    ),
    pytest.param(
        "logistic-gradient-add-remove",
        DPLogisticRegression,
        {"method": "gradient", "delta": 1e-3, "gradient_steps": 4, "neighbours": "add_remove"},
        "classifier",
    ),
]


def _make(cls: type, params: dict[str, Any], kind: str, epsilon: float) -> Any:
    extra: dict[str, Any] = {"label_bounds": (-1.0, 1.0)}
    if kind != "regressor":
        extra = {"classes": [0, 1, 2] if kind == "multiclass" else [0, 1]}
    return cls(epsilon=epsilon, alpha=0.5, fit_intercept=False, **extra, **params)


@pytest.mark.statistical
@pytest.mark.slow
@pytest.mark.parametrize(("name", "cls", "params", "kind"), PRIVATE_CASES)
def test_estimators_are_private_on_neighbours(
    name: str, cls: type, params: dict[str, Any], kind: str
) -> None:
    estimator = _make(cls, params, kind, 1.0)
    delta = float(params.get("delta", 0.0))
    result = _audit(estimator, kind, delta)
    assert result.epsilon_lower_bound <= 1.0, (name, result)
    assert estimator.budget_.epsilon == 1.0


@pytest.mark.statistical
@pytest.mark.slow
@pytest.mark.parametrize(
    ("params", "kind", "spent"),
    [
        ({"method": "output"}, "classifier", 10.0),
        ({"method": "objective"}, "classifier", 10.0),
        ({"method": "objective"}, "multiclass", 10.0),
        # On one axis the logistic gradients of neighbours differ by zeta, half the replace-one
        # bound 2 zeta the noise is calibrated for, so a larger violation is needed to show.
        ({"method": "gradient", "delta": 1e-3, "gradient_steps": 4}, "classifier", 40.0),
        (
            {"method": "gradient", "delta": 1e-3, "gradient_steps": 4, "neighbours": "add_remove"},
            "classifier",
            40.0,
        ),
    ],
)
def test_privacy_audit_negative_control(params: dict[str, Any], kind: str, spent: float) -> None:
    # Broken: fitted with a larger epsilon while epsilon = 1 is claimed; the audit must catch it.
    estimator = _make(DPLogisticRegression, params, kind, spent)
    result = _audit(estimator, kind, float(params.get("delta", 0.0)))
    assert result.epsilon_lower_bound > 1.0, result


# -- accounting ------------------------------------------------------------------------------
def _data(n: int = 200) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    return X, y


@pytest.mark.parametrize("method", ["output", "objective"])
@pytest.mark.parametrize(("noise", "delta"), [("laplace", 0.0), ("gaussian", 1e-6)])
def test_privacy_event_accounts_for_the_budget(method: str, noise: str, delta: float) -> None:
    X, y = _data()
    y3 = y + (X[:, 2] > 0.5)  # three classes: one-vs-rest shares the budget
    model = DPLogisticRegression(
        epsilon=0.7,
        delta=delta,
        method=method,
        noise=noise,
        classes=[0, 1, 2],
        source=InsecureSeededSource(1),
    ).fit(X, y3)
    assert model.budget_.epsilon == 0.7
    assert model.budget_.delta == delta
    if method == "output" and noise == "gaussian":
        spent = epsilon_for(model.privacy_event_, delta, ZCDPAccountant())
    else:
        spent = BasicAccountant().compose(model.privacy_event_).get_epsilon(delta)
    assert spent <= 0.7 * (1 + 1e-12)
    assert model.coef_.shape == (3, 3)
    assert model.intercept_.shape == (3,)


def test_gradient_method_is_accounted_by_pld() -> None:
    X, y = _data()
    y3 = y + (X[:, 2] > 0.5)
    model = DPLogisticRegression(
        epsilon=0.7,
        delta=1e-6,
        method="gradient",
        gradient_steps=20,
        classes=[0, 1, 2],
        source=InsecureSeededSource(1),
    ).fit(X, y3)
    assert model.budget_ == Budget(0.7, 1e-6)
    assert epsilon_for(model.privacy_event_, 1e-6, PLDAccountant()) <= 0.7 * (1 + 1e-9)
    assert model.privacy_event_.count == 20  # one multinomial model: 20 steps, not 3 x 20


@pytest.mark.parametrize("method", ["output", "objective", "gradient"])
def test_add_remove_releases_a_count_within_the_budget(method: str) -> None:
    """Under add/remove the fit composes a noisy row count with a release of half the noise."""
    X, y = _data(400)
    common = {
        "epsilon": 0.8,
        "delta": 1e-6,
        "method": method,
        "gradient_steps": 10,
        "classes": [0, 1],
    }
    replace = DPLogisticRegression(source=InsecureSeededSource(4), **common).fit(X, y)
    model = DPLogisticRegression(
        neighbours="add_remove", source=InsecureSeededSource(4), **common
    ).fit(X, y)
    assert model.budget_ == replace.budget_ == Budget(0.8, 1e-6)
    count = model.privacy_event_.events[0]
    assert type(count).__name__ == (
        "GaussianEvent" if method == "gradient" else "DiscreteLaplaceEvent"
    )
    # Objective: a pure count and (epsilon, delta) problems compose basically; output: the count
    # and the vector discrete Gaussian under zCDP; gradient: Gaussian count and steps under PLD.
    accountants = {"objective": BasicAccountant(), "output": ZCDPAccountant()}
    accountant = accountants.get(method, PLDAccountant())
    assert epsilon_for(model.privacy_event_, 1e-6, accountant) <= 0.8 * (1 + 1e-9)
    # Half the sensitivity with 7/8 of epsilon (31/32 of mu^2 for gradient): less noise.
    assert model.noise_std_ < 0.6 * replace.noise_std_


def test_multinomial_is_one_release_and_ovr_splits_the_budget() -> None:
    X, y = _data()
    y3 = y + (X[:, 2] > 0.5)
    classes = [0, 1, 2]
    joint = DPLogisticRegression(epsilon=2.0, classes=classes, source=InsecureSeededSource(2))
    joint = joint.fit(X, y3)
    ovr = DPLogisticRegression(
        epsilon=2.0, multi_class="ovr", classes=classes, source=InsecureSeededSource(2)
    ).fit(X, y3)
    first_joint = joint.privacy_event_.events[0]
    first_ovr = ovr.privacy_event_.events[0]
    assert isinstance(first_joint, PureDPEvent)  # one problem: the whole budget
    assert first_joint.epsilon == pytest.approx(2.0 * (1 - 2**-8))
    assert isinstance(first_ovr, SelfComposedEvent) and first_ovr.count == 3
    for model in (joint, ovr):
        assert BasicAccountant().compose(model.privacy_event_).get_epsilon(0.0) <= 2.0
        assert model.coef_.shape == (3, 3)
    scores = joint.decision_function(X[:5])
    expected = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(joint.predict_proba(X[:5]), expected)


@pytest.mark.statistical
@pytest.mark.slow
def test_digits_multinomial_gradient_beats_one_vs_rest() -> None:
    # sklearn's digits (1,797 rows, 10 classes), pixels mapped to [-1, 1] (declared 0..16) and
    # rows to the unit sphere; first 1,200 rows train. At epsilon = 1 (delta = 1e-5), 30 steps:
    # the multinomial model (one budget) reaches about 0.8 (measured 0.78 to 0.83 over seeds),
    # ten one-vs-rest models splitting it about 0.6. Two seeds each; the margin is > 5 sigma of
    # the seed spread measured here.
    X, y = load_digits(return_X_y=True)
    Z = X / 8.0 - 1.0
    Z = Z / np.linalg.norm(Z, axis=1, keepdims=True)

    def accuracy(multi_class: str) -> float:
        scores = []
        for seed in range(2):
            model = DPLogisticRegression(
                epsilon=1.0,
                delta=1e-5,
                method="gradient",
                multi_class=multi_class,
                alpha=1e-4,
                gradient_steps=30,
                max_grad_norm=1.0,
                intercept_scaling=0.3,
                classes=list(range(10)),
                source=InsecureSeededSource(seed),
            ).fit(Z[:1200], y[:1200])
            scores.append(model.score(Z[1200:], y[1200:]))
        return float(np.mean(scores))

    multinomial = accuracy("multinomial")
    assert multinomial > 0.7
    assert multinomial > accuracy("ovr") + 0.05


# -- scikit-learn usage ----------------------------------------------------------------------
def test_pipeline_probabilities_and_params() -> None:
    X, y = _data()
    model = make_pipeline(
        BoundedScaler(lower=-1, upper=1, feature_range=(-1, 1)),
        Normalizer(),
        DPLogisticRegression(epsilon=5.0, classes=[0, 1], source=InsecureSeededSource(2)),
    ).fit(X, y)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert model.score(X, y) > 0.8
    estimator = DPLogisticRegression(alpha=0.3)
    assert estimator.get_params()["alpha"] == 0.3
    assert estimator.set_params(method="output").method == "output"


def test_multiclass_probabilities_and_svc_decision() -> None:
    X, y = _data()
    y3 = y + (X[:, 2] > 0.5)
    model = DPLogisticRegression(
        epsilon=50.0, classes=[0, 1, 2], source=InsecureSeededSource(3)
    ).fit(X, y3)
    np.testing.assert_allclose(model.predict_proba(X[:5]).sum(axis=1), 1.0)
    assert model.predict_log_proba(X[:5]).shape == (5, 3)
    svc = DPLinearSVC(epsilon=50.0, classes=[0, 1], source=InsecureSeededSource(4)).fit(X, y)
    assert svc.decision_function(X).shape == (200,)
    assert not hasattr(svc, "predict_proba")


def test_regression_learns_a_slope_and_clips_predictions() -> None:
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, size=(3000, 1))
    y = 2 * x[:, 0] + 0.05 * rng.normal(size=3000)
    model = DPLinearRegression(
        epsilon=2.0, label_bounds=(0, 2), alpha=0.003, source=InsecureSeededSource(6)
    ).fit(x, y)
    assert model.score(x, y) > 0.8
    assert float(model.predict([[100.0]])[0]) <= 2.0  # clipped to the declared range
    assert model.budget_.epsilon == 2.0


@pytest.mark.statistical
def test_breast_cancer_accuracy_and_objective_beats_output() -> None:
    # Rows normalised to the unit sphere (data-independent); the first 400 rows train, the rest
    # test. Mean over 8 seeds at epsilon = 2; measured here: objective 0.92, output 0.72.
    X, y = load_breast_cancer(return_X_y=True)
    low, high = X.min(axis=0), X.max(axis=0)  # stands for a declared data dictionary
    Z = 2 * (np.log1p(X) - np.log1p(low)) / (np.log1p(high) - np.log1p(low)) - 1
    Z = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    order = np.random.default_rng(7).permutation(len(y))
    train, test = order[:400], order[400:]

    def mean_accuracy(method: str) -> float:
        scores = []
        for seed in range(8):
            model = DPLogisticRegression(
                epsilon=2.0,
                method=method,
                alpha=0.01,
                classes=[0, 1],
                source=InsecureSeededSource(seed),
            ).fit(Z[train], y[train])
            scores.append(model.score(Z[test], y[test]))
        return float(np.mean(scores))

    objective, output = mean_accuracy("objective"), mean_accuracy("output")
    assert objective > 0.85
    assert objective > output


# -- bad input -----------------------------------------------------------------------------
BAD_PARAMS = [
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": -1.0}, "epsilon"),
    ({"epsilon": math.nan}, "epsilon"),
    ({"delta": 1.0}, "delta"),
    ({"noise": "gaussian"}, "delta"),
    ({"method": "magic"}, "method"),
    ({"noise": "cauchy"}, "noise"),
    ({"alpha": 0.0}, "alpha"),
    ({"data_norm": math.inf}, "data_norm"),
    ({"data_norm": math.nan}, "data_norm"),
    ({"intercept_scaling": -1.0}, "intercept_scaling"),
    ({"fit_intercept": "yes"}, "fit_intercept"),
    ({"source": 42}, "source"),
    ({"multi_class": "crammer_singer"}, "multi_class"),
    ({"method": "gradient"}, "delta"),
    ({"method": "gradient", "delta": 1e-5, "noise": "laplace"}, "noise"),
    ({"gradient_steps": 0}, "gradient_steps"),
    ({"max_grad_norm": 0.0}, "max_grad_norm"),
    ({"neighbours": "swap_two"}, "neighbours"),
]


@pytest.mark.parametrize(("params", "name"), BAD_PARAMS)
def test_bad_parameters_name_the_argument(params: dict[str, Any], name: str) -> None:
    X, y = _data(20)
    with pytest.raises(InvalidParameterError) as info:
        DPLogisticRegression(**{"classes": [0, 1], **params}).fit(X, y)
    assert info.value.name == name


def test_bad_data_names_the_argument() -> None:
    X, y = _data(20)
    model = DPLogisticRegression(classes=[0, 1], source=InsecureSeededSource(0))
    for bad_X in (np.where(np.eye(20, 3) > 0, np.nan, X), np.where(np.eye(20, 3) > 0, np.inf, X)):
        with pytest.raises(InvalidParameterError, match="NaN") as info:
            model.fit(bad_X, y)
        assert info.value.name == "X"
    with pytest.raises(InvalidParameterError) as info:
        model.fit(X[:, 0], y)  # 1-D X
    assert info.value.name == "X"
    with pytest.raises(InvalidParameterError) as info:
        model.fit(X, y[:-1])
    assert info.value.name == "y"
    with pytest.raises(InvalidParameterError, match="one class") as info:
        DPLogisticRegression().fit(X, np.zeros(20))  # undeclared classes, read from y
    assert info.value.name == "y"
    with pytest.raises(InvalidParameterError, match="Unknown label type"):
        model.fit(X, np.linspace(0, 1, 20))
    fitted = model.fit(X, y)
    with pytest.raises(InvalidParameterError, match="features") as info:
        fitted.predict(X[:, :2])
    assert info.value.name == "X"


def test_regression_needs_declared_label_bounds() -> None:
    X, y = _data(20)
    with pytest.raises(InvalidParameterError) as info:
        DPLinearRegression().fit(X, y.astype(float))
    assert info.value.name == "label_bounds"
    with pytest.raises(InvalidParameterError) as info:
        DPLinearRegression(label_bounds=(1, 0)).fit(X, y.astype(float))
    assert info.value.name == "label_bounds"
    with pytest.raises(InvalidParameterError) as info:
        DPRidge(label_bounds=(0, 1)).fit(X, np.where(y > 0, np.nan, 0.0))
    assert info.value.name == "y"


def test_clip_rows_bounds_every_row() -> None:
    rng = np.random.default_rng(8)
    X = rng.normal(scale=10, size=(500, 4))
    clipped = clip_rows(X, 2.5)
    assert float(np.linalg.norm(clipped, axis=1).max()) <= 2.5
    small = X[np.linalg.norm(X, axis=1) <= 2.5]
    np.testing.assert_array_equal(clip_rows(small, 2.5), small)
    with pytest.raises(InvalidParameterError) as info:
        clip_rows(X, 0.0)
    assert info.value.name == "data_norm"


def test_bounded_scaler_uses_declared_ranges_only() -> None:
    scaler = BoundedScaler(lower=[0, -5], upper=[10, 5]).fit(np.full((3, 2), 1e9))
    out = scaler.transform([[5.0, 0.0], [20.0, -50.0]])
    np.testing.assert_allclose(out, [[0.5, 0.5], [1.0, 0.0]])
    with pytest.raises(InvalidParameterError) as info:
        BoundedScaler(lower=1, upper=0).fit(np.zeros((2, 2)))
    assert info.value.name == "upper"
    with pytest.raises(InvalidParameterError) as info:
        BoundedScaler(lower=[0, 0, 0]).fit(np.zeros((2, 2)))
    assert info.value.name == "lower"


def test_declared_classes_fix_the_model_shape() -> None:
    X, y = _data()
    y3 = y + (X[:, 2] > 0.5)
    declared = DPLogisticRegression(classes=[0, 1, 2, 3], source=InsecureSeededSource(9))
    model = declared.fit(X, y3)  # class 3 is absent: the shape does not reveal it
    assert model.coef_.shape == (4, 3)
    np.testing.assert_array_equal(model.classes_, [0, 1, 2, 3])
    with pytest.raises(InvalidParameterError, match="declared") as info:
        declared.fit(X, y3 + 2)  # labels 4 and 5 were not declared
    assert info.value.name == "y"
    with pytest.raises(InvalidParameterError) as info:
        DPLinearSVC(classes=[1]).fit(X, y)
    assert info.value.name == "classes"
