"""Tests of ``dpcurator.attacks._membership``: ROC metrics, Yeom's loss attack, LiRA, trade-off.

The targets are the learning issue's models on UCI Adult (1,000 rows, heavy-tailed columns
log-scaled, then standardised): a two-hidden-layer MLP (256 units each) that a practitioner
trains with plain PyTorch (full-batch Adam, 200 steps, no regularisation: it fits its training
set to near-zero loss) and the same MLP trained with :class:`dpcurator.learn.DPSGD` at
epsilon = 1 (plain SGD, lot 250, 10 epochs). Each model is trained on a fair-coin half of the
rows (:mod:`dpcurator.noise`), and the attacks follow Carlini et al.'s evaluation
(:meth:`ShadowModels.pooled_lira`): every model is a target, attacked by online LiRA with the
others as its shadows (the attacker knows the algorithm, not the data), which gives thousands
of member and non-member scores from a dozen trainings and so resolves true-positive rates at
0.1 % and 1 % false positives.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
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
from dpcurator.attacks._membership import (
    ShadowModels,
    tradeoff_violations,
    train_shadow_models,
)
from dpcurator.datasets import load_adult
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import randomized_response
from dpcurator.noise import InsecureSeededSource

torch = pytest.importorskip("torch")
from dpcurator.learn import DPSGD  # noqa: E402  (after torch: the learn extra)

Data = tuple[Any, Any]
DELTA = 1e-5
POPULATION = 1000
WIDTH = 256
PLAIN_MODELS = 12  # each the target of the 11 others: 6,000 member and non-member scores
PRIVATE_MODELS = 8


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Small models: one thread is fastest, and fair to the other tests on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def adult() -> Data:
    frame = load_adult().sample(n=POPULATION, random_state=0).reset_index(drop=True)
    categories = [
        "workclass",
        "education",
        "marital_status",
        "occupation",
        "relationship",
        "race",
        "sex",
        "native_country",
    ]
    numbers = frame[["age", "education_num", "hours_per_week"]].astype(float)
    numbers["fnlwgt"] = np.log(frame["fnlwgt"])  # heavy tails: log first, as practitioners do
    numbers["capital_gain"] = np.log1p(frame["capital_gain"])
    numbers["capital_loss"] = np.log1p(frame["capital_loss"])
    onehot = pd.get_dummies(frame[categories], dtype=float).to_numpy()
    scaled = ((numbers - numbers.mean()) / numbers.std()).to_numpy()
    features = torch.tensor(np.hstack([onehot, scaled]), dtype=torch.float32)
    labels = torch.tensor((frame["income"] == ">50K").to_numpy().astype(np.int64))
    return features, labels


def mlp(inputs: int) -> Any:
    torch.manual_seed(0)  # the architecture and its initialisation are public
    return torch.nn.Sequential(
        torch.nn.Linear(inputs, WIDTH),
        torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, WIDTH),
        torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, 2),
    )


def train_plain(data: Data, steps: int = 200) -> Any:
    """What a practitioner does: full-batch Adam, no regularisation, until the loss is ~0."""
    features, labels = data
    model = mlp(features.shape[1])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(features), labels).backward()
        optimizer.step()
    return model


def dpsgd_trainer(epsilon: float, seed: int) -> Callable[[Data], Any]:
    source = InsecureSeededSource(seed)

    def train(data: Data) -> Any:
        features, labels = data
        model = mlp(features.shape[1])
        DPSGD(
            model,
            torch.optim.SGD(model.parameters(), lr=1.0),
            loss_fn=torch.nn.functional.cross_entropy,
            max_grad_norm=1.0,
            batch_size=250,
            epochs=10,
            target_epsilon=epsilon,
            delta=DELTA,
            source=source,
            progress=False,
        ).fit(features, labels)
        return model

    return train


def probabilities(model: Any, features: Any) -> NDArray[np.float64]:
    with torch.no_grad():  # float64 softmax: confidences near 1 keep their log-odds
        return np.asarray(torch.softmax(model(features).double(), dim=1).numpy())


def phi(model: Any, data: Data) -> NDArray[np.float64]:
    return logit_confidence(probabilities(model, data[0]), data[1].numpy())


def heldout_accuracy(models: ShadowModels) -> float:
    """Accuracy of each model on the rows it did not see (phi > 0: the true label wins)."""
    return float((models.phis[~models.inside] > 0).mean())


@pytest.fixture(scope="module")
def plain(adult: Data) -> ShadowModels:
    return train_shadow_models(
        train_plain, phi, adult, shadow_models=PLAIN_MODELS, source=InsecureSeededSource(2)
    )


@pytest.fixture(scope="module")
def private(adult: Data) -> ShadowModels:
    return train_shadow_models(
        dpsgd_trainer(1.0, seed=3),
        phi,
        adult,
        shadow_models=PRIVATE_MODELS,
        source=InsecureSeededSource(2),
    )


def binomial_se(rate: float, trials: int) -> float:
    return math.sqrt(max(rate * (1.0 - rate), 1.0 / trials) / trials)


@pytest.mark.slow
@pytest.mark.statistical
def test_non_private_mlp_leaks_membership(plain: ShadowModels) -> None:
    assert heldout_accuracy(plain) > 0.78  # a real classifier (Adult's majority class is 76 %)
    assert (plain.phis[plain.inside] > 0).mean() > 0.99  # it fits its training set
    lira, loss = plain.pooled_lira(), plain.pooled_loss_attack()
    assert lira.auc > 0.65 and loss.auc > 0.55
    tpr, fpr = loss.decision or (math.nan, math.nan)
    assert tpr > fpr + 0.1  # Yeom's threshold (mean training loss) separates members
    # Carlini et al.'s point: LiRA finds members at low FPR, where the loss attack is at chance
    # (about 0.01 at 1 % FPR; 3 binomial standard errors of 6,000 scores are 0.004).
    assert lira.tpr_at_1_percent > 0.06 > 3 * loss.tpr_at_1_percent
    assert lira.tpr_at_0_1_percent > 0.01


@pytest.mark.slow
@pytest.mark.statistical
def test_dp_sgd_at_epsilon_1_respects_the_tradeoff(
    plain: ShadowModels, private: ShadowModels
) -> None:
    # A useful DP model (above Adult's majority class, 76 %), so its privacy is not a constant's.
    assert heldout_accuracy(private) > 0.76
    lira, lira_private = plain.pooled_lira(), private.pooled_lira()
    # DP-SGD at epsilon = 1: no threshold of any attack certifiably breaks
    # TPR <= e FPR + delta (Clopper-Pearson, simultaneous over thresholds; 0.975 each, so the
    # test fails by chance with probability at most 0.05 if DPSGD is (1, 1e-5)-DP).
    for result in (private.pooled_loss_attack(), lira_private, private.pooled_lira(online=False)):
        found = tradeoff_violations(result, 1.0, DELTA, confidence=0.975)
        assert not found.refuted and found.margin < 0, found
        assert found.epsilon_lower_bound < 1.0
    # At 1 % FPR an epsilon = 1 model has TPR <= e 0.01 + delta = 0.027 (population rates);
    # 4,000 members: 3 binomial standard errors add 3 sqrt(0.027 / 4,000) = 0.008.
    n_private = lira_private.scores_in.size
    assert lira_private.tpr_at_1_percent <= math.e * 0.01 + DELTA + 3 * binomial_se(
        0.027, n_private
    )
    # The done-means: TPR at 1 % FPR of the non-private model clearly above the DP model's:
    # more than 5 times it, plus 3 standard errors of the difference (binomial, both sides).
    tpr, tpr_private = lira.tpr_at_1_percent, lira_private.tpr_at_1_percent
    se = math.hypot(binomial_se(tpr, lira.scores_in.size), 5 * binomial_se(tpr_private, n_private))
    assert tpr > 5 * tpr_private + 3 * se, (tpr, tpr_private, se)
    # Negative control: the same certified check, at the same epsilon, delta and confidence,
    # refutes epsilon = 1 for the non-private model.
    leaky = tradeoff_violations(lira, 1.0, DELTA, confidence=0.975)
    assert leaky.refuted and leaky.margin > 0 and leaky.epsilon_lower_bound > 1.0
    assert lira.violation(1.0, DELTA) > 0 >= lira_private.violation(1.0, DELTA)


@pytest.mark.slow
def test_lira_attack_equals_shadows_then_lira(adult: Data) -> None:
    # lira_attack is train_shadow_models + ShadowModels.lira with the same coins.
    small = take(adult, np.arange(200))
    truth = np.arange(200) % 3 == 0

    def train(data: Data) -> Any:
        return train_plain(data, steps=20)

    model = train(take(small, np.flatnonzero(truth)))
    whole = lira_attack(
        train, phi, small, model, truth, shadow_models=3, source=InsecureSeededSource(9)
    )
    shadows = train_shadow_models(
        train, phi, small, shadow_models=3, source=InsecureSeededSource(9)
    )
    assert shadows.phis.shape == (3, 200) and shadows.records == 200
    assert np.array_equal(whole.scores_in, shadows.lira(phi(model, small), truth).scores_in)


def test_pooled_attacks_are_each_model_against_the_others() -> None:
    rng = np.random.default_rng(6)  # fixture data only
    inside = rng.random((5, 40)) < 0.5
    phis = rng.normal(size=(5, 40)) + 2.0 * inside
    models = ShadowModels(inside, phis)
    pooled = models.pooled_lira(online=False)
    scores_in, scores_out = [], []
    for i in range(5):
        others = ShadowModels(np.delete(inside, i, axis=0), np.delete(phis, i, axis=0))
        one = others.lira(phis[i], inside[i], online=False)
        scores_in.append(one.scores_in)
        scores_out.append(one.scores_out)
    assert np.array_equal(np.sort(pooled.scores_in), np.sort(np.concatenate(scores_in)))
    assert np.array_equal(np.sort(pooled.scores_out), np.sort(np.concatenate(scores_out)))
    assert pooled.scores_in.size == inside.sum() and pooled.auc > 0.8
    # The pooled loss attack is Yeom's attack on the cross-entropy ln(1 + e^-phi) of every model.
    loss = np.logaddexp(0.0, -phis)
    yeom = loss_threshold_attack(lambda part: part, loss[inside], loss[~inside])
    pooled_loss = models.pooled_loss_attack()
    assert pooled_loss.auc == yeom.auc and pooled_loss.decision == yeom.decision
    assert models.pooled_lira().auc > 0.8


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
    # Certified: epsilon = 1 stands, 0.5 falls, and the certified bound lies in between.
    assert not tradeoff_violations(result, 1.0).refuted
    refuted = tradeoff_violations(result, 0.5)
    assert refuted.refuted and refuted.thresholds.tolist() == [1.0]
    assert 0.5 < refuted.epsilon_lower_bound <= 1.0


@pytest.mark.statistical
def test_tradeoff_check_is_valid_over_many_repetitions() -> None:
    # 200 repetitions of exact ln 3-randomized response (200 per side): at confidence 0.8 the
    # certified bound exceeds ln 3 in at most 20 % of them (Binomial(200, 0.2): 0.999 quantile
    # 58); the union over thresholds makes it conservative (far fewer). Negative control: the
    # empirical rates alone exceed ln 3 about half of the time.
    source = InsecureSeededSource(11)
    certified, empirical = 0, 0
    for _ in range(200):
        scores_in = randomized_response(np.ones(200, dtype=int), p_truth="3/4", source=source)
        scores_out = randomized_response(np.zeros(200, dtype=int), p_truth="3/4", source=source)
        result = membership_result(scores_in.value, scores_out.value)
        certified += tradeoff_violations(result, math.log(3), confidence=0.8).refuted
        empirical += result.violation(math.log(3)) > 0
    assert certified <= 58
    assert empirical > 58


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
        (lambda: lira_attack(train_plain, phi, np.arange(4), None, [True] * 3), "members"),
        (
            lambda: lira_attack(train_plain, phi, np.arange(4), None, [True] * 4, shadow_models=1),
            "shadow_models",
        ),
        (
            lambda: lira_attack(train_plain, phi, (np.arange(4), np.arange(3)), None, [True] * 4),
            "population",
        ),
        (lambda: tradeoff_violations("scores", 1.0), "result"),  # type: ignore[arg-type]
        (lambda: tradeoff_violations(membership_result([1.0], [0.0]), -1.0), "epsilon"),
        (lambda: tradeoff_violations(membership_result([1.0], [0.0]), 1.0, 1.0), "delta"),
        (
            lambda: tradeoff_violations(membership_result([1.0], [0.0]), 1.0, confidence=1.0),
            "confidence",
        ),
        (lambda: train_shadow_models("train", phi, np.arange(4)), "train"),
        (lambda: ShadowModels(np.ones((2, 3), dtype=bool), np.zeros((2, 4))), "inside"),
        (lambda: ShadowModels(np.ones((1, 3), dtype=bool), np.zeros((1, 3))), "shadow_models"),
        (
            lambda: ShadowModels(np.eye(2, dtype=bool), np.zeros((2, 2))).pooled_lira(),
            "shadow_models",
        ),
        (
            lambda: ShadowModels(np.ones((2, 3), dtype=bool), np.zeros((2, 3))).lira(
                [0.0, 1.0], np.ones(3, dtype=bool)
            ),
            "target_phi",
        ),
    ],
)
def test_bad_input_names_the_argument(call: Any, name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        call()
