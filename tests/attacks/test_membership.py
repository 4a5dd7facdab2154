"""Tests of ``dpcurator.attacks._membership``: ROC metrics, Yeom's loss attack and LiRA.

Until the learning issue's models land, the target is a small numpy kernel classifier
(Nadaraya-Watson with a narrow Gaussian kernel) on UCI Adult: it memorises its training records
(each one votes for its own label with weight 1), as an over-fitted network would, so membership
leaks; it is accurate enough (about 80 % on held-out records) to be a model, not a lookup
table. The DP side of the done-means (TPR <= e^eps FPR + delta for a DP model) is exercised here
on a membership signal that is exactly epsilon-DP (randomized response of the membership bit).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray

from dpcurator.attacks import (
    lira_attack,
    logit_confidence,
    loss_threshold_attack,
    membership_result,
    roc_curve,
    take,
)
from dpcurator.datasets import load_adult
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import randomized_response
from dpcurator.noise import InsecureSeededSource, bernoulli

Data = tuple[NDArray[np.float64], NDArray[np.int64]]


@pytest.fixture(scope="module")
def adult_features() -> Data:
    frame = load_adult().sample(n=600, random_state=0).reset_index(drop=True)
    categories = [
        "workclass",
        "education",
        "marital_status",
        "occupation",
        "relationship",
        "race",
        "sex",
    ]
    numbers = ["age", "education_num", "hours_per_week"]
    onehot = pd.get_dummies(frame[categories].fillna("?"), dtype=float).to_numpy()
    scaled = ((frame[numbers] - frame[numbers].mean()) / frame[numbers].std()).to_numpy()
    labels = (frame["income"] == ">50K").to_numpy().astype(np.int64)
    return np.hstack([onehot, scaled]), labels


def train(data: Data) -> Data:
    """The kernel classifier keeps its training set."""
    return data


def predict(model: Data, features: NDArray[np.float64]) -> NDArray[np.float64]:
    train_x, train_y = model
    distances = ((features[:, None, :] - train_x[None, :, :]) ** 2).sum(axis=-1)
    weights = np.exp(-distances / 2.0)
    p_rich = (weights @ train_y + 0.5) / (weights.sum(axis=1) + 1.0)
    return np.column_stack([1 - p_rich, p_rich])


def phi(model: Data, data: Data) -> NDArray[np.float64]:
    return logit_confidence(predict(model, data[0]), data[1])


def loss_of(model: Data) -> Any:
    def loss(data: Data) -> NDArray[np.float64]:
        p = predict(model, data[0])[np.arange(data[1].size), data[1]]
        return -np.log(p)

    return loss


@pytest.fixture(scope="module")
def target(adult_features: Data) -> tuple[Data, NDArray[np.bool_]]:
    members = np.asarray(
        bernoulli("1/2", adult_features[1].size, source=InsecureSeededSource(1)), dtype=bool
    )
    return train(take(adult_features, np.flatnonzero(members))), members


@pytest.mark.statistical
def test_lira_beats_the_loss_attack_at_low_fpr(
    adult_features: Data, target: tuple[Data, NDArray[np.bool_]]
) -> None:
    model, members = target
    heldout = ~members
    accuracy = (
        (predict(model, adult_features[0][heldout])[:, 1] > 0.5) == adult_features[1][heldout]
    ).mean()
    assert accuracy > 0.75  # a real classifier, not a lookup table
    inside = take(adult_features, np.flatnonzero(members))
    outside = take(adult_features, np.flatnonzero(heldout))
    yeom = loss_threshold_attack(loss_of(model), inside, outside)
    lira = lira_attack(
        train,
        phi,
        adult_features,
        model,
        members,
        shadow_models=16,
        source=InsecureSeededSource(2),
    )
    # A non-private model leaks: TPR at 1 % FPR far above the 1 % of guessing.
    assert lira.tpr_at_1_percent > 0.1
    assert lira.auc > 0.8
    assert lira.tpr_at_1_percent > yeom.tpr_at_1_percent  # Carlini et al.'s point
    assert yeom.auc > 0.55 and yeom.advantage > 0.1
    tpr, fpr = yeom.decision or (math.nan, math.nan)
    assert tpr > fpr  # Yeom's threshold (mean training loss) separates members
    offline = lira_attack(
        train,
        phi,
        adult_features,
        model,
        members,
        shadow_models=8,
        online=False,
        source=InsecureSeededSource(3),
    )
    assert offline.auc > 0.7


@pytest.mark.statistical
def test_dp_membership_signal_respects_the_tradeoff() -> None:
    # The attacker sees randomized response of each record's membership bit at epsilon = 1:
    # every threshold has TPR <= e FPR exactly, up to sampling error (5,000 per side: sd of a
    # rate <= 0.007, so 4 sd of TPR - e FPR is about 0.08).
    source = InsecureSeededSource(4)
    in_reports = randomized_response(np.ones(5000, dtype=int), epsilon=1.0, source=source).value
    out_reports = randomized_response(np.zeros(5000, dtype=int), epsilon=1.0, source=source).value
    result = membership_result(in_reports, out_reports)
    assert result.violation(1.0) <= 0.08
    assert result.tpr_at_1_percent == 0.0  # a single threshold step: nothing below 27 % FPR
    # Negative control: claiming epsilon = 0.5 is refuted by the same scores.
    assert result.violation(0.5) > 0.08
    assert result.advantage == pytest.approx((math.e - 1) / (math.e + 1), abs=0.03)


def test_roc_and_auc_against_sklearn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(5)  # fixture data only
    s_in = np.round(rng.normal(0.5, 1.0, 300), 1)  # rounded: ties
    s_out = np.round(rng.normal(0.0, 1.0, 400), 1)
    result = membership_result(s_in, s_out)
    labels = np.concatenate([np.ones(300), np.zeros(400)])
    scores = np.concatenate([s_in, s_out])
    assert result.auc == pytest.approx(metrics.roc_auc_score(labels, scores), rel=1e-12)
    fpr, tpr, _ = metrics.roc_curve(labels, scores, drop_intermediate=False)
    assert np.allclose(result.roc.fpr, fpr) and np.allclose(result.roc.tpr, tpr)
    for level in (0.001, 0.01, 0.1):
        assert result.tpr_at(level) == pytest.approx(tpr[fpr <= level].max())


def test_roc_of_separable_and_identical_scores() -> None:
    perfect = membership_result([2.0, 3.0], [0.0, 1.0])
    assert perfect.auc == 1.0 and perfect.tpr_at_0_1_percent == 1.0 and perfect.advantage == 1.0
    same = membership_result([1.0] * 5, [1.0] * 5)
    assert same.auc == 0.5 and same.tpr_at_1_percent == 0.0
    curve = roc_curve([1.0, 2.0], [1.5])
    assert curve.thresholds[0] == math.inf
    assert curve.fpr[-1] == 1.0 and curve.tpr[-1] == 1.0
    assert perfect.summary()["auc"] == 1.0
    assert perfect.decision is None


def test_logit_confidence_is_finite_and_symmetric() -> None:
    probabilities = np.array([[0.0, 1.0], [1.0, 0.0], [0.3, 0.7], [0.2, 0.5]])
    phis = logit_confidence(probabilities, [1, 1, 0, 1])
    assert np.isfinite(phis).all()
    assert phis[0] > 600 and phis[1] < -600  # clipped at 1e-300: ln(1e300) = 690.8
    assert phis[2] == pytest.approx(math.log(0.3 / 0.7))
    assert phis[3] == pytest.approx(math.log(0.5 / 0.2))  # unnormalised rows: p_y / rest


def test_take_selects_records() -> None:
    frame = pd.DataFrame({"a": [10, 20, 30]})
    assert take(frame, np.array([2, 0]))["a"].tolist() == [30, 10]
    parts = take([np.arange(3), np.arange(3) * 2], np.array([1]))
    assert isinstance(parts, list) and [p.tolist() for p in parts] == [[1], [2]]
    assert take(np.arange(5), np.array([4])).tolist() == [4]


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: membership_result([], [1.0]), "scores_in"),
        (lambda: membership_result([1.0], [math.nan]), "scores_out"),
        (lambda: membership_result([1.0], [0.0]).tpr_at(1.5), "fpr"),
        (lambda: membership_result([1.0], [0.0]).violation(-1.0), "epsilon"),
        (lambda: loss_threshold_attack("loss", [1], [2]), "loss"),
        (lambda: logit_confidence([0.5, 0.5], [0]), "probabilities"),
        (lambda: lira_attack(train, phi, np.arange(4), None, [True] * 3), "members"),
        (
            lambda: lira_attack(train, phi, np.arange(4), None, [True] * 4, shadow_models=1),
            "shadow_models",
        ),
        (
            lambda: lira_attack(train, phi, (np.arange(4), np.arange(3)), None, [True] * 4),
            "population",
        ),
    ],
)
def test_bad_input_names_the_argument(call: Any, name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        call()
