"""Attacks that motivate differential privacy: they break releases that are not DP.

Each attack works against a generic interface, so the same code runs against a naive release, a
query interface, a curator session or a trained model (lectures 000, 001, 003 and 004; research
note C).

- Reconstruction (Dinur and Nissim 2003), against any subset-sum oracle (a function from a
  subset of rows, mask or indices, to a number): :func:`exhaustive_reconstruction` (all ``2^n``
  subsets, ``n <= 14``), :func:`lp_reconstruction` (``O(n)`` random subsets, a HiGHS linear
  program, rounding), :class:`ReconstructionResult`, :func:`reconstruction_vs_noise`,
  :func:`subset_sum_oracle` (a simulated interface with bounded or Laplace error),
  :func:`dp_reconstruction_bound` (what an (epsilon, delta)-DP interface lets any attack get).
- Differencing and averaging, against any ``ask(query)`` callable: :func:`differencing_attack`,
  :func:`averaging_attack`, :class:`DifferencingResult`, :class:`AveragingResult`,
  :func:`repeats_to_pin`; :class:`AggregateInterface` (a naive count/sum interface with query-size
  restriction, fresh noise, or a privacy filter), :class:`QueryRefusedError`.
- Against the curator: :class:`SessionOracle` (a subset-count oracle answered by a
  :class:`~dpcurator.curator.Session`, the budget split over the queries) and
  :class:`SessionInterface` (``ask`` callables through ``session.sql``, every repeat charged).
- Linkage (Sweeney's Weld example): :func:`linkage_attack`, :class:`LinkageResult`,
  :func:`uniqueness`, :func:`weld_example`.
- Syntactic anonymity and its failures: :func:`equivalence_classes`, :func:`k_anonymity`,
  :func:`is_k_anonymous`, :func:`distinct_l_diversity`, :func:`entropy_l_diversity`,
  :func:`recursive_cl_diversity`, :func:`is_l_diverse`, :func:`t_closeness`; :func:`mondrian`
  (:class:`AnonymizedTable`); :func:`homogeneity_attack` (with background knowledge,
  :class:`HomogeneityResult`).
- Membership inference, against any ``train``/``score`` pair: :func:`loss_threshold_attack`
  (Yeom et al. 2018), :func:`lira_attack` (Carlini et al. 2022), :class:`MembershipResult` (ROC,
  AUC, TPR at 0.1 % and 1 % FPR, the DP check ``TPR <= e^eps FPR + delta``), shadow models
  trained once and reused (:func:`train_shadow_models`, :class:`ShadowModels`), the certified
  check of that tradeoff at every threshold (:func:`tradeoff_violations`,
  :class:`TradeoffViolations`), :func:`roc_curve`, :func:`membership_result`,
  :func:`logit_confidence`, :func:`take`.

Randomness (random subsets, shadow-model halves, simulated noise) comes from
:mod:`dpcurator.noise`; pass ``source=InsecureSeededSource(seed)`` for a reproducible experiment.

Examples
--------
>>> from dpcurator.attacks import linkage_attack, weld_example
>>> medical, voters = weld_example()
>>> result = linkage_attack(medical, voters, ["zipcode", "age", "gender"], identity="name")
>>> result.reidentified, result.people
(1, 3)
"""

from __future__ import annotations

from dpcurator.attacks._anonymity import (
    AnonymizedTable,
    HomogeneityResult,
    distinct_l_diversity,
    entropy_l_diversity,
    equivalence_classes,
    homogeneity_attack,
    is_k_anonymous,
    is_l_diverse,
    k_anonymity,
    mondrian,
    recursive_cl_diversity,
    t_closeness,
)
from dpcurator.attacks._differencing import (
    AggregateInterface,
    AveragingResult,
    DifferencingResult,
    QueryRefusedError,
    averaging_attack,
    differencing_attack,
    repeats_to_pin,
)
from dpcurator.attacks._linkage import LinkageResult, linkage_attack, uniqueness, weld_example
from dpcurator.attacks._membership import (
    MembershipResult,
    RocCurve,
    ShadowModels,
    TradeoffViolations,
    lira_attack,
    logit_confidence,
    loss_threshold_attack,
    membership_result,
    roc_curve,
    take,
    tradeoff_violations,
    train_shadow_models,
)
from dpcurator.attacks._reconstruction import (
    MAX_EXHAUSTIVE_ROWS,
    ReconstructionResult,
    dp_reconstruction_bound,
    exhaustive_reconstruction,
    lp_reconstruction,
    reconstruction_vs_noise,
    subset_sum_oracle,
)
from dpcurator.attacks._session import SessionInterface, SessionOracle

__all__ = [
    "MAX_EXHAUSTIVE_ROWS",
    "AggregateInterface",
    "AnonymizedTable",
    "AveragingResult",
    "DifferencingResult",
    "HomogeneityResult",
    "LinkageResult",
    "MembershipResult",
    "QueryRefusedError",
    "ReconstructionResult",
    "RocCurve",
    "SessionInterface",
    "SessionOracle",
    "ShadowModels",
    "TradeoffViolations",
    "averaging_attack",
    "differencing_attack",
    "distinct_l_diversity",
    "dp_reconstruction_bound",
    "entropy_l_diversity",
    "equivalence_classes",
    "exhaustive_reconstruction",
    "homogeneity_attack",
    "is_k_anonymous",
    "is_l_diverse",
    "k_anonymity",
    "linkage_attack",
    "lira_attack",
    "logit_confidence",
    "loss_threshold_attack",
    "lp_reconstruction",
    "membership_result",
    "mondrian",
    "reconstruction_vs_noise",
    "recursive_cl_diversity",
    "repeats_to_pin",
    "roc_curve",
    "subset_sum_oracle",
    "t_closeness",
    "take",
    "tradeoff_violations",
    "train_shadow_models",
    "uniqueness",
    "weld_example",
]
