"""PrivacyWarning of the scikit-learn estimators: class labels read from y, budgets spent again.

Class labels read from ``y`` are not private (their set is released without noise), and every
fit spends the budget: refitting one estimator, or fitting its clones as ``cross_val_score``
and ``GridSearchCV`` do, spends it once per fit. ``DPModelSelector`` accounts its own fits of
the candidates and must not warn about them.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score

from dpcurator.errors import PrivacyWarning
from dpcurator.learn import DPLinearSVC, DPLogisticRegression, DPModelSelector, DPRidge
from dpcurator.noise import InsecureSeededSource


def _data(n: int = 300) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, (X[:, 0] > 0).astype(np.int64)


def _declared(**params: object) -> DPLogisticRegression:
    return DPLogisticRegression(classes=[0, 1], source=InsecureSeededSource(0), **params)


@pytest.mark.parametrize("cls", [DPLogisticRegression, DPLinearSVC])
def test_class_labels_read_from_y_warn_and_say_what_to_pass(cls: type) -> None:
    X, y = _data()
    with pytest.warns(PrivacyWarning, match=r"class labels from y.*classes=\[0, 1\]") as caught:
        cls(source=InsecureSeededSource(0)).fit(X, y)
    assert len(caught) == 1
    assert caught[0].filename == __file__  # points at the user's call to fit
    assert cls.__name__ in str(caught[0].message)


def test_declared_classes_and_a_single_fit_do_not_warn() -> None:
    X, y = _data()
    _declared().fit(X, y)  # warnings are errors in the test suite
    DPRidge(label_bounds=(0, 1), source=InsecureSeededSource(0)).fit(X, y.astype(float))


def test_refitting_one_instance_warns_that_the_budget_is_spent_again() -> None:
    X, y = _data()
    model = _declared(epsilon=0.5).fit(X, y)
    with pytest.warns(PrivacyWarning, match=r"fitted 2 times.*spends its budget") as caught:
        model.fit(X, y)
    assert "epsilon=0.5" in str(caught[0].message)
    assert caught[0].filename == __file__


def test_cross_val_score_folds_are_counted_across_clones() -> None:
    X, y = _data()
    model = _declared()
    with pytest.warns(PrivacyWarning, match="cross_val_score") as caught:
        cross_val_score(model, X, y, cv=3)
    assert [str(w.message).split(" times")[0][-1] for w in caught] == ["2", "3"]


def test_grid_search_fits_are_counted_for_regressors_too() -> None:
    X, y = _data()
    ridge = DPRidge(label_bounds=(0, 1), source=InsecureSeededSource(0))
    with pytest.warns(PrivacyWarning, match="DPRidge has been fitted"):
        GridSearchCV(ridge, {"alpha": [0.1, 1.0]}, cv=2).fit(X, y.astype(float))


def test_clones_share_the_count_and_pickles_keep_it() -> None:
    X, y = _data()
    model = _declared()
    clone(model).fit(X, y)
    copy = pickle.loads(pickle.dumps(model))
    with pytest.warns(PrivacyWarning, match="fitted 2 times"):
        copy.fit(X, y)


@pytest.mark.parametrize("strategy", ["disjoint", "shared"])
def test_model_selector_internal_fits_do_not_warn(strategy: str) -> None:
    X, y = _data(600)
    candidates = [_declared(alpha=a) for a in (0.01, 0.1)]
    selector = DPModelSelector(
        [*candidates, candidates[0]],  # the same object twice: still one fit each, accounted
        epsilon=1.0,
        strategy=strategy,
        refit=True,
        source=InsecureSeededSource(1),
    )
    selector.fit(X, y)  # any PrivacyWarning would be an error here
    candidates[0].fit(X, y)  # the user's own first fit of this object: no warning either


def test_model_selector_warns_once_for_undeclared_classes() -> None:
    X, y = _data(600)
    candidates = [DPLogisticRegression(), DPLinearSVC(), _declared()]
    selector = DPModelSelector(candidates, source=InsecureSeededSource(2))
    with pytest.warns(PrivacyWarning, match="classes") as caught:
        selector.fit(X, y)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "estimators[0], estimators[1] read" in message
    assert "estimators[2]" not in message
    assert caught[0].filename == __file__


def test_cross_validating_the_selector_warns_about_the_selector() -> None:
    X, y = _data(600)
    selector = DPModelSelector([_declared(), _declared(alpha=1.0)], source=InsecureSeededSource(3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cross_val_score(selector, X, y, cv=2)
    messages = [str(w.message) for w in caught if issubclass(w.category, PrivacyWarning)]
    assert len(messages) == 1
    assert messages[0].startswith("DPModelSelector has been fitted 2 times")
