"""The audit suite: every mechanism of the project, claimed epsilon against certified bound.

Each :class:`AuditCase` names a mechanism, a pair of neighbouring inputs that realises its worst
case, the (epsilon, delta) the library claims for it (read from the release's privacy event, or
the parameters it was calibrated for) and a vectorised sampler. :func:`run_audit_suite` audits
every registered case with :func:`~dpcurator.audit.audit_mechanism`: a sound mechanism gives a
certified lower bound at or below its claim, and a tight audit comes close to it (the bound is
limited by the samples: about ``ln`` of the sample size for the rarest useful event).

Cases: Laplace and geometric (counts, pure DP), Gaussian and discrete Gaussian ((epsilon,
delta)), randomized response (binary and 4-ary), the exponential mechanism, report-noisy-max
(permute-and-flip), AboveThreshold, and the local protocols' randomizers (generalized and binary
randomized response, symmetric and optimized unary encoding, optimized local hashing, Hadamard
response, Duchi et al.'s and the piecewise mean mechanisms). Register more with
:func:`register_audit_case`.

The selection mechanisms and AboveThreshold are sampled through the batch samplers that their
public functions call with ``size=1`` (the same code, vectorised).

One-run cases (:class:`OneRunCase`, :data:`ONE_RUN_CASES`) are audited from a single run with
canaries instead (Steinke, Nasr and Jagielski 2023): DP-SGD (``"dpsgd"``, one training with
gradient canaries, :func:`~dpcurator.audit.audit_dpsgd`; needs PyTorch). A training run takes
seconds, so they run only when named or with ``one_run=True``.

Examples
--------
>>> from dpcurator.noise import InsecureSeededSource
>>> [r] = run_audit_suite(names=["randomized_response"], quick=True,
...                       source=InsecureSeededSource(0))
>>> round(r.claimed_epsilon, 6), 0.7 < r.epsilon_lower_bound <= r.claimed_epsilon
(1.0, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_delta, check_epsilon, check_integer, check_probability
from dpcurator.accounting import BasicAccountant, PrivacyEvent, discrete_gaussian_sigma
from dpcurator.audit._canary import CanaryAudit
from dpcurator.audit._lower_bound import audit_mechanism
from dpcurator.errors import InvalidParameterError
from dpcurator.local import (
    BinaryRandomizedResponse,
    DuchiMean,
    GeneralizedRandomizedResponse,
    HadamardResponse,
    LocalHashReports,
    OptimizedLocalHashing,
    OptimizedUnaryEncoding,
    PiecewiseMean,
    SymmetricUnaryEncoding,
)
from dpcurator.mechanisms import (
    discrete_gaussian_mechanism,
    gaussian_mechanism,
    geometric_mechanism,
    laplace_mechanism,
    randomized_response,
)

# The batch samplers behind exponential_mechanism, report_noisy_max and AboveThreshold (their
# public functions call these with size=1); the audit draws many runs in one call.
from dpcurator.mechanisms._exponential import _exponential_indices, _permute_and_flip_indices
from dpcurator.mechanisms._sparse_vector import _above_threshold_runs
from dpcurator.noise import InsecureSeededSource, RandomSource, resolve_source

__all__ = [
    "AUDIT_CASES",
    "ONE_RUN_CASES",
    "AuditCase",
    "OneRunCase",
    "SuiteResult",
    "audit_case",
    "register_audit_case",
    "run_audit_suite",
    "suite_case_names",
]

Sampler = Callable[[Any, int, RandomSource], Any]


@dataclass(frozen=True)
class AuditCase:
    """One mechanism of the suite, with its worst-case neighbours and its claim.

    Attributes
    ----------
    name : str
        Registry key (``"laplace"``).
    description : str
        The mechanism and the neighbouring inputs, in words.
    claimed_epsilon : float
        What the library claims (natural log).
    claimed_delta : float
        0 for pure DP.
    sample : callable
        ``sample(input, size, source)`` returns ``size`` independent outputs on ``input``.
    dataset, neighbour : object
        The two inputs.
    samples : int
        Certification runs per side in a full audit (as many again select the event).
    quick_samples : int
        The same in a quick audit.
    statistic : callable, optional
        Feature of a batch of outputs the events look at (see
        :func:`~dpcurator.audit.audit_mechanism`).
    """

    name: str
    description: str
    claimed_epsilon: float
    claimed_delta: float
    sample: Sampler
    dataset: Any
    neighbour: Any
    samples: int = 200_000
    quick_samples: int = 20_000
    statistic: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise InvalidParameterError("name", self.name, "must be a non-empty string")
        check_epsilon(self.claimed_epsilon, "claimed_epsilon")
        check_delta(self.claimed_delta, "claimed_delta")
        check_integer(self.samples, "samples", minimum=1)
        check_integer(self.quick_samples, "quick_samples", minimum=1)
        if not callable(self.sample):
            raise InvalidParameterError("sample", self.sample, "must be callable")


class OneRunOutcome(Protocol):
    """What a one-run audit reports: the claim and the canary audit (e.g. ``DPSGDAudit``)."""

    @property
    def epsilon_claimed(self) -> float:
        """The epsilon the run claims."""

    @property
    def delta(self) -> float:
        """The delta of the claim."""

    @property
    def canary(self) -> CanaryAudit:
        """Guesses, correct guesses and the certified bound."""


@dataclass(frozen=True)
class OneRunCase:
    """A mechanism audited from one run with canaries (Steinke, Nasr and Jagielski 2023).

    Attributes
    ----------
    name : str
        Registry key (``"dpsgd"``).
    description : str
        The run and its canaries, in words.
    run : callable
        ``run(quick, confidence, source)`` performs the run and returns its outcome (the
        claim and the :class:`~dpcurator.audit.CanaryAudit`), e.g. a
        :class:`~dpcurator.audit.DPSGDAudit`.
    """

    name: str
    description: str
    run: Callable[[bool, float, RandomSource], OneRunOutcome]

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise InvalidParameterError("name", self.name, "must be a non-empty string")
        if not callable(self.run):
            raise InvalidParameterError("run", self.run, "must be callable")


@dataclass(frozen=True)
class SuiteResult:
    """Claimed against certified epsilon for one case.

    Attributes
    ----------
    name, description : str
    claimed_epsilon, claimed_delta : float
    epsilon_lower_bound : float
        Certified at ``confidence`` (at ``claimed_delta``).
    confidence : float
        Of this bound alone (the suite splits its family-wise confidence over the cases).
    samples : int
        Certification runs per side.
    event : str
        The distinguishing event the audit chose.
    seconds : float
        Wall time of the audit.
    """

    name: str
    description: str
    claimed_epsilon: float
    claimed_delta: float
    epsilon_lower_bound: float
    confidence: float
    samples: int
    event: str
    seconds: float

    @property
    def consistent(self) -> bool:
        """True when the audit does not refute the claim (bound <= claimed epsilon)."""
        return self.epsilon_lower_bound <= self.claimed_epsilon

    @property
    def ratio(self) -> float:
        """Certified bound over claimed epsilon: 1 is a perfectly tight audit."""
        return self.epsilon_lower_bound / self.claimed_epsilon

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary (with ``consistent`` and ``ratio``)."""
        return {
            "name": self.name,
            "description": self.description,
            "claimed_epsilon": self.claimed_epsilon,
            "claimed_delta": self.claimed_delta,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "ratio": self.ratio,
            "consistent": self.consistent,
            "confidence": self.confidence,
            "samples": self.samples,
            "event": self.event,
            "seconds": self.seconds,
        }


AUDIT_CASES: dict[str, AuditCase] = {}
"""The registry: name -> :class:`AuditCase`, in the order the suite runs them."""

ONE_RUN_CASES: dict[str, OneRunCase] = {}
"""One-run cases (a training run each): name -> :class:`OneRunCase`, run when asked for."""


def suite_case_names(*, one_run: bool = False) -> list[str]:
    """Names the suite runs by default, in order (with the one-run cases when ``one_run``).

    >>> "laplace" in suite_case_names(), "dpsgd" in suite_case_names(one_run=True)
    (True, True)
    """
    return [*AUDIT_CASES, *(ONE_RUN_CASES if one_run else ())]


def register_audit_case(
    case: AuditCase | OneRunCase, *, replace: bool = False
) -> AuditCase | OneRunCase:
    """Add a case to :data:`AUDIT_CASES` (or a one-run case to :data:`ONE_RUN_CASES`).

    A name taken in either registry is refused unless ``replace``.

    Examples
    --------
    >>> import math
    >>> import numpy as np
    >>> from dpcurator.mechanisms import randomized_response
    >>> case = AuditCase("coin_rr_example", "coin-flip randomized response, bit 0 vs 1",
    ...                  math.log(3), 0.0,
    ...                  lambda bit, n, src: randomized_response(np.full(n, bit), p_truth="3/4",
    ...                                                          source=src).value, 0, 1)
    >>> register_audit_case(case).name in AUDIT_CASES
    True
    >>> _ = AUDIT_CASES.pop("coin_rr_example")
    """
    if not isinstance(case, AuditCase | OneRunCase):
        raise InvalidParameterError("case", case, "must be an AuditCase or a OneRunCase")
    if (case.name in AUDIT_CASES or case.name in ONE_RUN_CASES) and not replace:
        raise InvalidParameterError(
            "case", case.name, "is already registered (pass replace=True to replace it)"
        )
    AUDIT_CASES.pop(case.name, None)
    ONE_RUN_CASES.pop(case.name, None)
    if isinstance(case, OneRunCase):
        ONE_RUN_CASES[case.name] = case
    else:
        AUDIT_CASES[case.name] = case
    return case


def audit_case(
    case: AuditCase | OneRunCase,
    *,
    quick: bool = False,
    confidence: float = 0.95,
    source: RandomSource | None = None,
) -> SuiteResult:
    """Audit one case: ``samples`` (or ``quick_samples``) runs per side and split, or one run.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> result = audit_case(AUDIT_CASES["geometric"], quick=True,
    ...                     source=InsecureSeededSource(1))
    >>> result.consistent
    True
    """
    src = resolve_source(source)
    if isinstance(case, OneRunCase):
        return _audit_one_run(case, quick=quick, confidence=confidence, source=src)
    n = case.quick_samples if quick else case.samples

    def mechanism(data: Any, size: int) -> Any:
        return case.sample(data, size, src)

    start = time.perf_counter()
    result = audit_mechanism(
        mechanism,
        case.dataset,
        case.neighbour,
        samples=n,
        delta=case.claimed_delta,
        confidence=confidence,
        statistic=case.statistic,
        batched=True,
    )
    return SuiteResult(
        name=case.name,
        description=case.description,
        claimed_epsilon=case.claimed_epsilon,
        claimed_delta=case.claimed_delta,
        epsilon_lower_bound=result.epsilon_lower_bound,
        confidence=result.confidence,
        samples=n,
        event=result.event,
        seconds=time.perf_counter() - start,
    )


def _audit_one_run(
    case: OneRunCase, *, quick: bool, confidence: float, source: RandomSource
) -> SuiteResult:
    start = time.perf_counter()
    outcome = case.run(quick, confidence, source)
    audit = outcome.canary
    return SuiteResult(
        name=case.name,
        description=case.description,
        claimed_epsilon=outcome.epsilon_claimed,
        claimed_delta=outcome.delta,
        epsilon_lower_bound=audit.epsilon_lower_bound,
        confidence=audit.confidence,
        samples=1,
        event=f"one run: {audit.correct} of {audit.guesses} guesses right, "
        f"{audit.canaries} canaries",
        seconds=time.perf_counter() - start,
    )


def run_audit_suite(
    *,
    quick: bool = False,
    names: Iterable[str] | None = None,
    one_run: bool = False,
    confidence: float = 0.95,
    source: RandomSource | None = None,
    on_result: Callable[[SuiteResult], None] | None = None,
) -> list[SuiteResult]:
    """Audit every registered mechanism (or those in ``names``), in registry order.

    ``confidence`` holds for the whole suite: each of the ``c`` cases is certified at
    ``1 - (1 - confidence) / c`` (Bonferroni), so the probability that *any* certified bound
    exceeds its mechanism's true epsilon is at most ``1 - confidence``. A bound above a claim is
    then a finding, not a multiple-testing accident.

    Parameters
    ----------
    quick : bool, default False
        Use each case's ``quick_samples`` (a few seconds in all) instead of ``samples``.
    names : iterable of str, optional
        Cases to run, from :data:`AUDIT_CASES` or :data:`ONE_RUN_CASES` (default:
        :func:`suite_case_names`).
    one_run : bool, default False
        With the default ``names``, also run the one-run cases (DP-SGD: one training run).
    confidence : float, default 0.95
        Family-wise, over the cases run.
    source : RandomSource, optional
        The mechanisms' randomness (secure by default; a seeded source makes the run
        reproducible).
    on_result : callable, optional
        Called with each :class:`SuiteResult` as soon as it is ready (progress display).

    Returns
    -------
    list of SuiteResult

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> results = run_audit_suite(names=["geometric", "local_grr"], quick=True,
    ...                           source=InsecureSeededSource(2))
    >>> [(r.name, r.consistent, r.ratio > 0.8) for r in results]
    [('geometric', True, True), ('local_grr', True, True)]
    >>> round(results[0].confidence, 3)  # 0.95 family-wise: 0.975 each
    0.975
    """
    cases: dict[str, AuditCase | OneRunCase] = {**AUDIT_CASES, **ONE_RUN_CASES}
    chosen = suite_case_names(one_run=one_run) if names is None else list(names)
    unknown = [name for name in chosen if name not in cases]
    if unknown or not chosen:
        raise InvalidParameterError(
            "names", unknown or chosen, f"must name registered cases: {', '.join(cases)}"
        )
    level = check_probability(confidence, "confidence", open_left=True, open_right=True)
    each = 1.0 - (1.0 - level) / len(chosen)
    src = resolve_source(source)
    results: list[SuiteResult] = []
    for name in chosen:
        result = audit_case(cases[name], quick=quick, confidence=each, source=src)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


# -- the project's mechanisms ---------------------------------------------------------------------
def _claimed(event: PrivacyEvent) -> float:
    """Return the epsilon the library's own (basic) accountant charges for ``event``."""
    return BasicAccountant().compose(event).get_epsilon(0.0)


def _full(value: Any, size: int) -> NDArray[Any]:
    return np.full(size, value)


def _laplace(x: float, size: int, src: RandomSource) -> NDArray[np.float64]:
    release = laplace_mechanism(
        _full(float(x), size), epsilon=1.0, sensitivity=1.0, changed_coordinates=1, source=src
    )
    return release.value


def _geometric(x: int, size: int, src: RandomSource) -> NDArray[np.int64]:
    values: NDArray[np.int64] = geometric_mechanism(
        _full(int(x), size), epsilon=1.0, source=src
    ).value
    return values


_GAUSSIAN_DELTA = 1e-5


def _gaussian(x: float, size: int, src: RandomSource) -> NDArray[np.float64]:
    release = gaussian_mechanism(
        _full(float(x), size),
        epsilon=1.0,
        delta=_GAUSSIAN_DELTA,
        sensitivity=1.0,
        changed_coordinates=1,
        source=src,
    )
    return release.value


_DISCRETE_SIGMA = float(discrete_gaussian_sigma(1.0, _GAUSSIAN_DELTA, 1))


def _discrete_gaussian(x: int, size: int, src: RandomSource) -> NDArray[np.int64]:
    return discrete_gaussian_mechanism(_full(int(x), size), sigma=_DISCRETE_SIGMA, source=src).value


def _rr(x: int, size: int, src: RandomSource) -> NDArray[np.int64]:
    return randomized_response(_full(int(x), size), epsilon=1.0, source=src).value


def _rr4(x: int, size: int, src: RandomSource) -> NDArray[np.int64]:
    return randomized_response(_full(int(x), size), epsilon=1.0, categories=4, source=src).value


_EM_CANDIDATES = 20


def _exponential(utilities: list[float], size: int, src: RandomSource) -> NDArray[np.int64]:
    return _exponential_indices(
        utilities, epsilon=1.0, sensitivity=1.0, monotonic=False, size=size, source=src
    )


def _noisy_max(scores: list[float], size: int, src: RandomSource) -> NDArray[np.int64]:
    return _permute_and_flip_indices(
        scores, epsilon=1.0, sensitivity=1.0, monotonic=True, size=size, source=src
    )


def _above_threshold(queries: list[float], size: int, src: RandomSource) -> NDArray[np.int64]:
    return _above_threshold_runs(0.0, queries, epsilon=1.0, sensitivity=1.0, size=size, source=src)


def _protocol_sampler(protocol: Any) -> Sampler:
    def sample(value: Any, size: int, src: RandomSource) -> Any:
        return protocol.privatize(_full(value, size), source=src)

    return sample


_GRR = GeneralizedRandomizedResponse(epsilon=1.0, domain_size=4)
_BINARY = BinaryRandomizedResponse(epsilon=1.0)
_SUE = SymmetricUnaryEncoding(epsilon=1.0, domain_size=4)
_OUE = OptimizedUnaryEncoding(epsilon=1.0, domain_size=4)
_OLH = OptimizedLocalHashing(epsilon=1.0, domain_size=8)
_HR = HadamardResponse(epsilon=1.0, domain_size=4)
_DUCHI = DuchiMean(1.0, 0.0, 1.0)
_PIECEWISE = PiecewiseMean(1.0, 0.0, 1.0)


def _olh_supports(reports: LocalHashReports) -> NDArray[np.int64]:
    """Which of the two audited values (0 and 1) each report supports: 2 [y = H(0)] + [y = H(1)].

    Conditioned on ``H(0) != H(1)``, the report supports 0 with ratio ``e^eps`` (Arcolezi and
    Gambs, LDP-Auditor; research note B.6).
    """
    n = reports.seeds.size
    h0 = _OLH.hash(reports.seeds, np.zeros(n, dtype=np.int64))
    h1 = _OLH.hash(reports.seeds, np.ones(n, dtype=np.int64))
    values = np.asarray(reports.values)
    support: NDArray[np.int64] = 2 * (values == h0).astype(np.int64) + (values == h1)
    return support


def _default_cases() -> list[AuditCase]:
    # Releases made only to read their privacy event (the noise drawn is discarded).
    event_only = InsecureSeededSource(0)
    em_d = [0.0] * _EM_CANDIDATES
    em_d_prime = [1.0] + [-1.0] * (_EM_CANDIDATES - 1)
    return [
        AuditCase(
            "laplace",
            "laplace_mechanism, eps=1, L1 sensitivity 1: count 0 vs 1",
            _claimed(laplace_mechanism(0.0, epsilon=1.0, sensitivity=1.0, source=event_only).event),
            0.0,
            _laplace,
            0.0,
            1.0,
        ),
        AuditCase(
            "geometric",
            "geometric_mechanism, eps=1: count 0 vs 1",
            _claimed(geometric_mechanism(0, epsilon=1.0, source=event_only).event),
            0.0,
            _geometric,
            0,
            1,
        ),
        AuditCase(
            "gaussian",
            f"gaussian_mechanism (analytic), eps=1, delta={_GAUSSIAN_DELTA:g}, L2 sens. 1: 0 vs 1",
            1.0,
            _GAUSSIAN_DELTA,
            _gaussian,
            0.0,
            1.0,
            samples=2_000_000,
            quick_samples=200_000,
        ),
        AuditCase(
            "discrete_gaussian",
            f"discrete_gaussian_mechanism, sigma for eps=1, delta={_GAUSSIAN_DELTA:g}: 0 vs 1",
            1.0,
            _GAUSSIAN_DELTA,
            _discrete_gaussian,
            0,
            1,
            samples=2_000_000,
            quick_samples=200_000,
        ),
        AuditCase(
            "randomized_response",
            "randomized_response, eps=1, binary: bit 0 vs 1",
            _claimed(randomized_response(0, epsilon=1.0, source=event_only).event),
            0.0,
            _rr,
            0,
            1,
        ),
        AuditCase(
            "randomized_response_4",
            "randomized_response, eps=1, 4 categories: 0 vs 1",
            _claimed(randomized_response(0, epsilon=1.0, categories=4, source=event_only).event),
            0.0,
            _rr4,
            0,
            1,
        ),
        AuditCase(
            "exponential",
            f"exponential_mechanism, eps=1, {_EM_CANDIDATES} candidates: utilities 0 vs "
            "(+1, -1, ..., -1)",
            1.0,
            0.0,
            _exponential,
            em_d,
            em_d_prime,
        ),
        AuditCase(
            "report_noisy_max",
            "report_noisy_max (permute-and-flip), eps=1, counts: (0, 0) vs (1, 0)",
            1.0,
            0.0,
            _noisy_max,
            [0.0, 0.0],
            [1.0, 0.0],
        ),
        AuditCase(
            "above_threshold",
            "AboveThreshold, eps=1, threshold 0: queries (0,0,0,0,0) vs (1,1,1,1,-1)",
            1.0,
            0.0,
            _above_threshold,
            [0.0] * 5,
            [1.0, 1.0, 1.0, 1.0, -1.0],
        ),
        AuditCase(
            "local_grr",
            "GeneralizedRandomizedResponse, eps=1, d=4: value 0 vs 1",
            _claimed(_GRR.event),
            0.0,
            _protocol_sampler(_GRR),
            0,
            1,
        ),
        AuditCase(
            "local_binary_rr",
            "BinaryRandomizedResponse, eps=1: bit 0 vs 1",
            _claimed(_BINARY.event),
            0.0,
            _protocol_sampler(_BINARY),
            0,
            1,
        ),
        AuditCase(
            "local_sue",
            "SymmetricUnaryEncoding (basic RAPPOR), eps=1, d=4: value 0 vs 1",
            _claimed(_SUE.event),
            0.0,
            _protocol_sampler(_SUE),
            0,
            1,
        ),
        AuditCase(
            "local_oue",
            "OptimizedUnaryEncoding, eps=1, d=4: value 0 vs 1",
            _claimed(_OUE.event),
            0.0,
            _protocol_sampler(_OUE),
            0,
            1,
        ),
        AuditCase(
            "local_olh",
            "OptimizedLocalHashing, eps=1, d=8: value 0 vs 1 (events on the supported value)",
            _claimed(_OLH.event),
            0.0,
            _protocol_sampler(_OLH),
            0,
            1,
            statistic=_olh_supports,
        ),
        AuditCase(
            "local_hadamard",
            "HadamardResponse, eps=1, d=4: value 0 vs 1",
            _claimed(_HR.event),
            0.0,
            _protocol_sampler(_HR),
            0,
            1,
        ),
        AuditCase(
            "local_duchi_mean",
            "DuchiMean, eps=1, range [0, 1]: value 0 vs 1",
            _claimed(_DUCHI.event),
            0.0,
            _protocol_sampler(_DUCHI),
            0.0,
            1.0,
        ),
        AuditCase(
            "local_piecewise_mean",
            "PiecewiseMean, eps=1, range [0, 1]: value 0 vs 1",
            _claimed(_PIECEWISE.event),
            0.0,
            _protocol_sampler(_PIECEWISE),
            0.0,
            1.0,
        ),
    ]


_DPSGD_ROWS = 500
_DPSGD_EPOCHS = 10


def _dpsgd(quick: bool, confidence: float, source: RandomSource) -> OneRunOutcome:
    """DP-SGD on a small MLP over UCI Adult (numeric columns, public scalings), full batches."""
    import torch  # noqa: PLC0415 (the learn extra: imported when this case runs)

    from dpcurator.audit._dpsgd import audit_dpsgd  # noqa: PLC0415
    from dpcurator.datasets import load_adult  # noqa: PLC0415

    frame = load_adult().iloc[:_DPSGD_ROWS]
    columns = {"age": 90.0, "education_num": 16.0, "hours_per_week": 99.0}
    features = np.column_stack(
        [frame[column].clip(0, top).to_numpy() / top for column, top in columns.items()]
    )
    labels = (frame["income"] == ">50K").to_numpy().astype(np.int64)

    def model() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(len(columns), 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)
        )

    return audit_dpsgd(
        model,
        torch.from_numpy(features).float(),
        torch.from_numpy(labels),
        loss_fn=torch.nn.functional.cross_entropy,
        max_grad_norm=1.0,
        epochs=_DPSGD_EPOCHS,
        target_epsilon=1.0,
        delta=_GAUSSIAN_DELTA,
        canaries=1000 if quick else 5000,
        confidence=confidence,
        source=source,
    )


_CASES: list[AuditCase | OneRunCase] = [
    *_default_cases(),
    OneRunCase(
        "dpsgd",
        f"DPSGD, target eps=1, delta={_GAUSSIAN_DELTA:g}, full batches, {_DPSGD_EPOCHS} steps, "
        f"MLP on {_DPSGD_ROWS} Adult rows + gradient canaries (1,000 quick, 5,000 full)",
        _dpsgd,
    ),
]
for _case in _CASES:
    register_audit_case(_case)
del _case, _CASES
