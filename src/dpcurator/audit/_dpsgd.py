r"""The one-run canary audit of DP-SGD (Steinke, Nasr and Jagielski, NeurIPS 2023, Section 6).

:func:`audit_dpsgd` trains a model once with :class:`dpcurator.learn.DPSGD` on the caller's data
plus ``m`` *gradient canaries*, each included by a fair coin, and certifies a lower bound on
epsilon from how well the final model gives the coins away (:func:`~dpcurator.audit.
score_canaries`, Theorem 3.3 of the paper).

White-box Dirac canaries, realised as training rows
    The audited model is the caller's model plus a canary head: a parameter vector
    ``theta_c`` of ``m`` zeros that only canary rows touch. Canary ``j`` is a row whose loss is
    ``-C theta_c[j]`` (``C`` the clipping norm; the caller's loss is multiplied by zero on it),
    so its per-example gradient is exactly ``-C e_j``: a Dirac canary of norm ``C`` in a
    coordinate of its own, which clipping leaves as it is. The caller's rows have loss
    ``loss_fn`` and no gradient on ``theta_c``. With ``torch.optim.SGD`` the final
    ``theta_c[j]`` is ``lr / L`` times the number of steps that sampled canary ``j`` (0 when it
    is out) times ``C``, plus the Gaussian noise of every step in that coordinate: the score of
    canary ``j`` is that dot product of the total model update with the canary's direction.

Validity
    DP-SGD is (epsilon, delta)-DP under adding or removing any one example, whatever its
    gradient; a canary row is an example. So each canary's inclusion is protected at the
    accountant's (epsilon, delta), the one-run theorem applies, and with probability at least
    ``confidence`` the certified bound does not exceed the true epsilon. A bound above the
    accountant's epsilon refutes the implementation or its accounting (too little noise, a
    wrong sensitivity, a forgotten step). ``n`` (and hence ``q = L / n``) counts the included
    canaries and is treated as public, as :class:`~dpcurator.learn.DPSGD` does.

Power
    With full batches (``batch_size=None``, ``q = 1``) the canary scores are exactly Gaussian:
    ``N(T C, T z^2 C^2)`` in units of ``lr / L`` when in and ``N(0, T z^2 C^2)`` when out, a
    ``mu = sqrt(T) / z`` Gaussian test, the case where the one-run bound is closest to the
    truth. Poisson sampling (``q < 1``) makes the truth smaller and the linear score loses more
    of it. One run with ``m = 1000`` canaries certifies about a quarter of epsilon = 2 (0.56 at
    ``mu = 0.53``, the example of :func:`audit_dpsgd`) and at most about 3.5 whatever the truth
    (all 100 guesses right): the audit catches gross errors (a noise multiplier 4x too small),
    not a few percent.

References
----------
T. Steinke, M. Nasr, M. Jagielski, "Privacy auditing with one (1) training run", NeurIPS 2023
(Theorem 3.3; Section 6, white-box Dirac canaries). M. Nasr, J. Hayes, T. Steinke, B. Balle,
F. Tramèr, M. Jagielski, N. Carlini, A. Terzis, "Tight auditing of differentially private machine
learning", USENIX Security 2023 (gradient canaries).

Examples
--------
>>> import torch
>>> from dpcurator.noise import InsecureSeededSource
>>> X = torch.randn(100, 3, generator=torch.Generator().manual_seed(0))
>>> y = (X[:, 0] > 0).long()
>>> audit = audit_dpsgd(lambda: torch.nn.Linear(3, 2), X, y,
...                     loss_fn=torch.nn.functional.cross_entropy, max_grad_norm=1.0,
...                     epochs=4, target_epsilon=2.0, canaries=200,
...                     source=InsecureSeededSource(0))
>>> audit.consistent, audit.epsilon_claimed <= 2.0
(True, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from dpcurator._validation import check_epsilon, check_integer
from dpcurator.audit._canary import CanaryAudit, score_canaries
from dpcurator.errors import InvalidParameterError
from dpcurator.learn import DPSGD
from dpcurator.noise import RandomSource, bernoulli, resolve_source

__all__ = ["DPSGDAudit", "audit_dpsgd"]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]


@dataclass(frozen=True)
class DPSGDAudit:
    """A one-run canary audit of one DP-SGD training: the claim and the certified bound.

    Attributes
    ----------
    canary : CanaryAudit
        Guesses, correct guesses, scores and the certified ``epsilon_lower_bound``.
    epsilon_claimed : float
        What the run claims (default: the accountant's epsilon at ``delta`` for the steps run).
    delta : float
    noise_multiplier : float
        ``z`` the run used.
    sampling_rate : float
        ``q``.
    steps : int
    """

    canary: CanaryAudit
    epsilon_claimed: float
    delta: float
    noise_multiplier: float
    sampling_rate: float
    steps: int

    @property
    def epsilon_lower_bound(self) -> float:
        """Certified lower bound on the run's epsilon (at ``delta``, ``canary.confidence``)."""
        return self.canary.epsilon_lower_bound

    @property
    def consistent(self) -> bool:
        """True when the audit does not refute the claim (bound <= claimed epsilon)."""
        return self.epsilon_lower_bound <= self.epsilon_claimed

    @property
    def ratio(self) -> float:
        """Certified bound over claimed epsilon (1: the audit reaches the claim)."""
        return self.epsilon_lower_bound / self.epsilon_claimed


class _CanaryHead(nn.Module):
    """The caller's model plus one parameter per canary; the output carries the canary parts.

    Input rows are ``[features, code]`` with ``code`` one-hot for canary ``j`` and zero for the
    caller's rows. The output is ``[model(features), flag, theta_c . code]`` with ``flag`` 1 on a
    canary row and 0 elsewhere.
    """

    def __init__(self, model: nn.Module, canaries: int, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.model = model
        self.canary = nn.Parameter(torch.zeros(canaries))
        self.shape = shape
        self.features = math.prod(shape)

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        features, code = rows[:, : self.features], rows[:, self.features :]
        flag = code.sum(dim=1, keepdim=True)
        outputs = self.model(features.reshape(rows.shape[0], *self.shape))
        score = (code * self.canary).sum(dim=1, keepdim=True)
        return torch.cat([outputs, flag.to(outputs.dtype), score.to(outputs.dtype)], dim=1)


def _canary_loss(loss_fn: LossFn, clip: float) -> LossFn:
    """``loss_fn`` on the caller's rows, ``-C theta_c[j]`` on canary ``j`` (gradient ``-C e_j``)."""

    def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        outputs, flag, score = output[:, :-2], output[:, -2], output[:, -1]
        real = (1.0 - flag).mean()
        return real * loss_fn(outputs, target) - clip * (flag * score).sum()

    return loss


def audit_dpsgd(
    model_factory: Callable[[], nn.Module],
    X: object,
    y: object,
    *,
    loss_fn: LossFn,
    max_grad_norm: float,
    epochs: int = 1,
    batch_size: int | None = None,
    noise_multiplier: float | None = None,
    target_epsilon: float | None = None,
    delta: float = 1e-5,
    canaries: int = 1000,
    guesses: int | None = None,
    optimizer: OptimizerFactory | None = None,
    epsilon_claimed: float | None = None,
    confidence: float = 0.95,
    accountant: str = "pld",
    noise: str = "secure",
    source: RandomSource | None = None,
) -> DPSGDAudit:
    r"""Audit DP-SGD in one training run with gradient canaries (Steinke, Nasr, Jagielski 2023).

    Draws ``m = canaries`` fair coins, appends the included canary rows to ``(X, y)``, trains
    ``model_factory()`` (plus the canary head) once with :class:`~dpcurator.learn.DPSGD`, scores
    every canary by its coordinate of the total update, guesses "in" for the ``guesses``
    highest and "out" for the ``guesses`` lowest, and certifies (:func:`score_canaries`).

    Guarantee tested
        :class:`~dpcurator.learn.DPSGD` claims (epsilon, delta)-DP under add/remove-one, epsilon
        from its accountant (PLD or RDP) for ``T`` steps of the Poisson-subsampled Gaussian
        (Abadi et al. 2016). If that holds, ``epsilon_lower_bound <= epsilon`` with probability
        at least ``confidence`` (Theorem 3.3 of the paper, with its delta term).

    Parameters
    ----------
    model_factory : callable
        ``model_factory() -> torch.nn.Module``, a fresh model (no BatchNorm).
    X, y : torch.Tensor or array_like
        The training data (first axis the examples); canary rows get zero features, target 0.
    loss_fn : callable
        ``loss_fn(output, target) -> scalar`` for one example, as for ``DPSGD``.
    max_grad_norm : float
        Clipping norm ``C`` > 0.
    epochs : int, default 1
    batch_size : int, optional
        Expected lot size ``L``; default: every example each step (``q = 1``, the most
        powerful audit).
    noise_multiplier, target_epsilon : float, optional
        Exactly one, as for ``DPSGD``.
    delta : float, default 1e-5
    canaries : int, default 1000
        ``m >= 2``; each adds one parameter to the model and, when included, one example.
    guesses : int, optional
        ``k+ = k-``, fixed before training (default ``m // 20``: 5 % at each end, near the best
        for a Gaussian test at ``mu`` around 1).
    optimizer : callable, optional
        ``optimizer(parameters) -> torch.optim.Optimizer``; default ``SGD(lr=0.1)``.
    epsilon_claimed : float, optional
        The epsilon to test (default: the accountant's after training).
    confidence : float, default 0.95
    accountant : {"pld", "rdp"}, default "pld"
    noise : {"secure", "float"}, default "secure"
    source : RandomSource, optional
        The coins, DP-SGD's sampling and noise (secure by default).

    Returns
    -------
    DPSGDAudit

    Examples
    --------
    A planted fault: a run claimed at the epsilon of ``z = 6`` but trained at ``z = 1.5``:

    >>> import torch
    >>> from dpcurator.noise import InsecureSeededSource
    >>> X, y = torch.zeros(50, 2), torch.zeros(50, dtype=torch.long)
    >>> def model(): return torch.nn.Linear(2, 2)
    >>> options = dict(loss_fn=torch.nn.functional.cross_entropy, max_grad_norm=1.0, epochs=10)
    >>> honest = audit_dpsgd(model, X, y, noise_multiplier=6.0, **options,
    ...                      source=InsecureSeededSource(1))
    >>> faulty = audit_dpsgd(model, X, y, noise_multiplier=1.5, **options,
    ...                      epsilon_claimed=honest.epsilon_claimed,
    ...                      source=InsecureSeededSource(1))
    >>> round(honest.epsilon_claimed, 2), round(honest.epsilon_lower_bound, 2)
    (2.11, 0.56)
    >>> faulty.epsilon_lower_bound > honest.epsilon_claimed, faulty.consistent
    (True, False)
    """
    if not callable(model_factory):
        raise InvalidParameterError("model_factory", model_factory, "must be callable")
    m = check_integer(canaries, "canaries", minimum=2)
    k = m // 20 if guesses is None else check_integer(guesses, "guesses", minimum=1)
    if 2 * k > m:
        raise InvalidParameterError("guesses", guesses, f"must be <= canaries / 2 ({m // 2})")
    claimed = None if epsilon_claimed is None else check_epsilon(epsilon_claimed, "epsilon_claimed")
    features = torch.as_tensor(X).float()
    targets = torch.as_tensor(y)
    if features.ndim == 0 or targets.ndim == 0 or features.shape[0] != targets.shape[0]:
        raise InvalidParameterError(
            "y", tuple(targets.shape), f"must hold one target per row of X {tuple(features.shape)}"
        )
    src = resolve_source(source)
    included = np.asarray(bernoulli("1/2", m, source=src), dtype=np.bool_)
    rows, labels = _with_canaries(features, targets, included)
    model = _CanaryHead(model_factory(), m, tuple(features.shape[1:]))
    make_optimizer = optimizer or (lambda params: torch.optim.SGD(params, lr=0.1))
    trainer = DPSGD(
        model,
        make_optimizer(model.parameters()),
        loss_fn=_canary_loss(loss_fn, float(max_grad_norm)),
        max_grad_norm=max_grad_norm,
        batch_size=int(rows.shape[0]) if batch_size is None else batch_size,
        epochs=epochs,
        noise_multiplier=noise_multiplier,
        target_epsilon=target_epsilon,
        delta=delta,
        accountant=accountant,
        noise=noise,
        source=src,
        progress=False,
    ).fit(rows, labels)
    scores = model.canary.detach().double().numpy()
    audit = score_canaries(
        scores, included, guesses_in=k, guesses_out=k, delta=delta, confidence=confidence
    )
    return DPSGDAudit(
        canary=audit,
        epsilon_claimed=trainer.epsilon_ if claimed is None else claimed,
        delta=trainer.delta,
        noise_multiplier=trainer.noise_multiplier_,
        sampling_rate=trainer.sampling_rate_,
        steps=trainer.steps_,
    )


def _with_canaries(
    features: torch.Tensor, targets: torch.Tensor, included: NDArray[np.bool_]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``[features, 0]`` of the caller and ``[0, e_j]`` of each included canary ``j``."""
    n, m = int(features.shape[0]), int(included.size)
    flat = features.reshape(n, -1)
    chosen = torch.from_numpy(np.flatnonzero(included))
    canary_rows = torch.zeros(chosen.numel(), flat.shape[1] + m, dtype=flat.dtype)
    canary_rows[torch.arange(chosen.numel()), flat.shape[1] + chosen] = 1.0
    real_rows = torch.cat([flat, torch.zeros(n, m, dtype=flat.dtype)], dim=1)
    canary_targets = torch.zeros((chosen.numel(), *targets.shape[1:]), dtype=targets.dtype)
    return torch.cat([real_rows, canary_rows]), torch.cat([targets, canary_targets])
