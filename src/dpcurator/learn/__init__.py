"""Differentially private learning: convex ERM estimators and private model selection.

Estimators follow the scikit-learn contract (``fit`` returns ``self``, ``predict``,
``decision_function``, ``predict_proba`` where it makes sense, ``score``, ``get_params`` /
``set_params``, fitted attributes ending in ``_``, usable in a :class:`~sklearn.pipeline.Pipeline`)
and carry what they spent: ``privacy_event_`` (for any accountant) and ``budget_``.

API map
-------
Linear models (replace-one neighbours, declared data bounds)
    :class:`DPLogisticRegression`, :class:`DPLinearSVC` (smoothed hinge),
    :class:`DPLinearRegression` and :class:`DPRidge`; each with ``method="objective"``
    (Chaudhuri, Monteleoni and Sarwate 2011; Kifer, Smith and Thakurta 2012) or
    ``method="output"`` (lecture 002), pure-DP Laplace-type or (epsilon, delta) Gaussian-type
    noise, or ``method="gradient"`` (noisy full-batch gradient descent, exact discrete Gaussian
    noise, PLD-calibrated); several classes as one multinomial (softmax) model under one budget
    (the default) or one-vs-rest.
Private selection
    :class:`DPModelSelector`: choose among candidate models or hyper-parameters with the
    exponential mechanism or report-noisy-max over private validation scores (Chaudhuri,
    Monteleoni and Sarwate 2011, Algorithm 3).
Declared bounds
    :func:`clip_rows` (row-norm clipping), :class:`BoundedScaler` (features clipped and scaled by
    declared ranges, no privacy cost).
DP-SGD for PyTorch (the ``learn`` extra; imported on first use)
    :class:`DPSGD` (per-example gradients from outer products for stacks of linear layers,
    ``torch.func`` otherwise, the ``engine`` parameter; per-example clipping, Poisson sampling from
    :mod:`dpcurator.noise`, secure grid noise or a documented float path, PLD/RDP accounting,
    target-epsilon calibration, DP-Adam), :class:`TensorNoise`, :class:`TrainingPhase`.
Federated averaging
    :class:`FedAvg`, :class:`DPFedAvg` (user-level DP, McMahan et al. 2018; or local DP),
    :class:`RoundRecord`, :func:`local_sgd`; with Flower (the ``federated`` extra):
    :class:`DPFedAvgStrategy`, :class:`InProcessGrid`, :func:`torch_client`. The trust model
    (:data:`TRUST_MODELS`: central, local or distributed DP) is one parameter, ``mode``, of
    both. Distributed DP (Kairouz, Liu and Steinke 2021): :func:`noisy_share`,
    :func:`ddg_rho`, :func:`ddg_event`, :class:`MaskingKey`, :func:`secure_sum`; the client
    side of the strategy, :func:`dp_client_reply`; a real multi-process Flower deployment on
    this machine (SuperLink, SuperNodes, ``flwr run``): :class:`FlowerDeployment`.
ERM core
    :func:`output_perturbation`, :func:`objective_perturbation`, :func:`gradient_perturbation`,
    :func:`solve_erm`,
    :func:`erm_sensitivity` (the sensitivity lemma: ``2L/(mu n)`` replace-one, ``L/(mu n)``
    add/remove), :func:`excess_risk_bound`
    (the lecture's utility bound), the losses :func:`logistic_loss`, :func:`huber_hinge_loss`,
    :func:`squared_loss` (:class:`GLMLoss`), :func:`multinomial_loss` (:class:`MultinomialLoss`)
    and :class:`PerturbedModel`.

Examples
--------
>>> import numpy as np
>>> from sklearn.pipeline import make_pipeline
>>> from dpcurator.learn import BoundedScaler, DPLogisticRegression
>>> from dpcurator.noise import InsecureSeededSource
>>> X = np.array([[9.0, 1.0], [1.0, 9.0]] * 200)
>>> y = np.array([1, 0] * 200)
>>> model = make_pipeline(BoundedScaler(lower=0, upper=10),
...                       DPLogisticRegression(epsilon=1.0, classes=[0, 1],
...                                            source=InsecureSeededSource(0)))
>>> model.fit(X, y).predict([[10.0, 0.0]])
array([1])
"""

from __future__ import annotations

import importlib
from typing import Any

from dpcurator.errors import MissingDependencyError, UnsupportedError

try:  # every estimator here is a scikit-learn estimator: say what to install, not a raw error
    importlib.import_module("sklearn")
except ModuleNotFoundError as missing:
    if missing.name != "sklearn":  # scikit-learn is there but broken: show the real error
        raise
    raise MissingDependencyError("dpcurator.learn", "scikit-learn", "learn") from missing

from dpcurator.learn._bounds import BoundedScaler, clip_rows
from dpcurator.learn._erm import erm_sensitivity, excess_risk_bound, output_perturbation
from dpcurator.learn._gradient import gradient_perturbation
from dpcurator.learn._linear import (
    DPLinearRegression,
    DPLinearSVC,
    DPLogisticRegression,
    DPRidge,
)
from dpcurator.learn._losses import (
    GLMLoss,
    MultinomialLoss,
    huber_hinge_loss,
    logistic_loss,
    multinomial_loss,
    squared_loss,
)
from dpcurator.learn._objective import objective_perturbation
from dpcurator.learn._selection import DPModelSelector
from dpcurator.learn._solver import PerturbedModel, solve_erm

# Names whose modules need torch (and flwr): imported when first used.
_LAZY = {
    "DPSGD": "_dpsgd",
    "TrainingPhase": "_dpsgd",
    "TensorNoise": "_torch_noise",
    "DPFedAvg": "_federated",
    "FedAvg": "_federated",
    "RoundRecord": "_federated",
    "local_sgd": "_federated",
    "DPFedAvgStrategy": "_flower",
    "InProcessGrid": "_flower",
    "torch_client": "_flower",
    # Distributed DP and the Flower deployment (issue 19): need cryptography / flwr.
    "TRUST_MODELS": "_distributed",
    "MaskingKey": "_distributed",
    "ddg_event": "_distributed",
    "ddg_rho": "_distributed",
    "noisy_share": "_distributed",
    "secure_sum": "_distributed",
    "dp_client_reply": "_flower_client",
    "FlowerDeployment": "_flower_deploy",
}


def __getattr__(name: str) -> Any:
    """Import the PyTorch and Flower parts on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'dpcurator.learn' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"dpcurator.learn.{_LAZY[name]}")
    except ImportError as error:
        raise UnsupportedError(
            f"{name} needs PyTorch (pip install 'dpcurator[learn]'; torch==2.13.0) or, for "
            f"Flower, pip install 'dpcurator[federated]': {error}"
        ) from error
    return getattr(module, name)


__all__ = [
    "DPSGD",
    "TRUST_MODELS",
    "BoundedScaler",
    "DPFedAvg",
    "DPFedAvgStrategy",
    "DPLinearRegression",
    "DPLinearSVC",
    "DPLogisticRegression",
    "DPModelSelector",
    "DPRidge",
    "FedAvg",
    "FlowerDeployment",
    "GLMLoss",
    "InProcessGrid",
    "MaskingKey",
    "MultinomialLoss",
    "PerturbedModel",
    "RoundRecord",
    "TensorNoise",
    "TrainingPhase",
    "clip_rows",
    "ddg_event",
    "ddg_rho",
    "dp_client_reply",
    "erm_sensitivity",
    "excess_risk_bound",
    "gradient_perturbation",
    "huber_hinge_loss",
    "local_sgd",
    "logistic_loss",
    "multinomial_loss",
    "noisy_share",
    "objective_perturbation",
    "output_perturbation",
    "secure_sum",
    "solve_erm",
    "squared_loss",
    "torch_client",
]
