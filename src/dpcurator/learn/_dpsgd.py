r"""DP-SGD for PyTorch: per-example clipping, Poisson sampling, grid noise, tight accounting.

:class:`DPSGD` wraps an existing ``torch.nn.Module`` and ``torch.optim.Optimizer`` and trains
them with the DP-SGD algorithm of Abadi et al. (CCS 2016), research note E.3. Each step

1. draws a Poisson sample: every example joins the lot independently with probability
   ``q = L / n`` (``L`` the expected lot size ``batch_size``), the decisions coming from
   :func:`dpcurator.noise.bernoulli` (exact, from the secure source by default; one call per
   epoch);
2. computes per-example gradients, clips each to L2 norm ``C`` (``max_grad_norm``, flat over all
   parameters), rounds it to the public grid ``2**-k`` and sums exactly
   (:mod:`dpcurator.learn._per_example`: for a stack of ``nn.Linear`` layers and row-wise
   activations from the factors of the outer products, otherwise with ``torch.func``);
3. adds Gaussian-type noise of standard deviation ``sigma = z * Delta`` in grid units
   (``z`` the noise multiplier, ``Delta ~= C 2**k`` the grid sensitivity), drawn for several
   steps per sampler call (the noise does not depend on the data, so drawing it ahead changes
   nothing in its law), and divides by the *expected* lot size ``L`` (fixed denominator):
   :math:`\tilde g = 2^{-k}(\sum_{i \in \text{lot}} \mathrm{round}(2^k \bar g_i) + Z) / L`;
4. hands ``\tilde g`` to the wrapped optimizer as the gradient. With ``torch.optim.SGD`` this is
   DP-SGD; with ``torch.optim.Adam`` it is DP-Adam (Adam's moments are post-processing of the
   private gradients, so the guarantee is the same).

Guarantee
    Neighbouring datasets differ by adding or removing one example (add/remove-one; ``n`` and
    hence ``q`` and ``L`` are treated as public, as in Abadi et al.). One step is the
    Poisson-subsampled Gaussian mechanism with rate ``q`` and noise multiplier ``z``; ``T`` steps
    are its adaptive ``T``-fold composition, which releases every intermediate model. The run is
    :math:`(\varepsilon, \delta)`-DP with :math:`\varepsilon` the epsilon that the chosen
    accountant certifies at ``delta`` for ``PoissonSampledEvent(q, GaussianEvent(sigma, Delta))``
    composed ``T`` times: the privacy-loss distribution (PLD, the default: Zhu, Dong and Wang
    2022; an upper bound) or Rényi DP (Mironov, Talwar and Zhang 2019, the moments accountant of
    Abadi et al.). A ``target_epsilon`` is met by calibrating ``z`` with
    :func:`dpcurator.accounting.dpsgd_noise_multiplier` for the planned number of steps.

Accounting of the noise paths, precisely
    With ``noise="float"`` the noise is a continuous Gaussian (up to floating point; see
    :mod:`dpcurator.learn._torch_noise` for the attack surface). With ``noise="secure"``
    (default) it is the exact ``d``-dimensional discrete Gaussian with ``sigma = z Delta`` and
    ``Delta >= 2**16`` grid units. Its Rényi divergences are at most the continuous Gaussian's
    for every integer shift of L2 norm ``<= Delta`` (Canonne, Kamath and Steinke 2020,
    Proposition 5 and Theorem 14), so at integer orders every term of the binomial expansion of
    the subsampled mixture (MTZ19, Section 3.3) is at most the continuous one's: the
    add-direction RDP at integer orders is proven. That the remove direction and the PLD of the
    subsampled discrete Gaussian are within the continuous one's is, at this sigma, a numerical
    fact (the privacy loss is a lattice discretisation of step
    ``Delta / sigma**2 <= 2**-16 / z**2`` of the Gaussian one) rather than a theorem here: the
    event reported is the continuous ``GaussianEvent`` with the same ``(sigma, Delta)``.

Not private
    Anything computed from the data outside the noisy gradients: this class reports no training
    loss or accuracy (evaluate on public or held-out data). Hyper-parameter searches on the
    private data cost privacy too (Papernot and Steinke 2022). BatchNorm mixes examples and is
    refused (use GroupNorm or LayerNorm).

References
----------
M. Abadi, A. Chu, I. Goodfellow, H. B. McMahan, I. Mironov, K. Talwar, L. Zhang, "Deep Learning
with Differential Privacy", CCS 2016 (Algorithm 1). I. Mironov, K. Talwar, L. Zhang, "Rényi
Differential Privacy of the Sampled Gaussian Mechanism", arXiv 1908.10530 (MTZ19). Y. Zhu,
J. Dong, Y.-X. Wang, "Optimal Accounting of Differential Privacy via Characteristic Function",
AISTATS 2022. C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020.

Examples
--------
>>> import torch
>>> from dpcurator.noise import InsecureSeededSource
>>> X = torch.randn(200, 5, generator=torch.Generator().manual_seed(0))
>>> y = (X[:, 0] > 0).long()
>>> model = torch.nn.Linear(5, 2)
>>> trainer = DPSGD(model, torch.optim.SGD(model.parameters(), lr=0.5),
...                 loss_fn=torch.nn.functional.cross_entropy, max_grad_norm=1.0,
...                 batch_size=50, epochs=3, target_epsilon=2.0, delta=1e-5,
...                 source=InsecureSeededSource(0), progress=False)
>>> trainer.fit(X, y).steps_
12
>>> trainer.epsilon_ <= 2.0
True
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from torch import nn

from dpcurator._validation import check_delta, check_epsilon, check_integer, check_positive
from dpcurator.accounting import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SelfComposedEvent,
    dpsgd_noise_multiplier,
    make_accountant,
)
from dpcurator.errors import BudgetExceededError, InvalidParameterError, UnsupportedError
from dpcurator.learn._describe import settings_html, settings_repr
from dpcurator.learn._per_example import GRADIENT_ENGINES, make_gradient_sum
from dpcurator.learn._torch_noise import NOISE_MODES, TensorNoise, grid_bits, grid_sensitivity
from dpcurator.noise import RandomSource, bernoulli

__all__ = ["DPSGD", "DPSGD_ACCOUNTANTS", "TrainingPhase", "check_dpsgd_accountant"]

DPSGD_ACCOUNTANTS = ("pld", "rdp")
"""The built-in accountants that certify DP-SGD (both account the Poisson-sampled Gaussian)."""

_DPSGD_STEP = PoissonSampledEvent(0.01, GaussianEvent(sigma=1.0))


def check_dpsgd_accountant(name: object) -> str:
    """Return ``name`` if its accountant can certify DP-SGD's steps; refuse it otherwise.

    The accountant is asked (:meth:`~dpcurator.accounting.Accountant.supports`) whether it
    accounts a Poisson-sampled Gaussian, so a registered accountant that does is accepted too.

    Raises
    ------
    InvalidParameterError
        For an unknown name, or an accountant without the subsampled Gaussian.

    Examples
    --------
    >>> check_dpsgd_accountant("rdp")
    'rdp'
    >>> check_dpsgd_accountant("basic")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: accountant cannot account DP-SGD's steps ...'basic'.
    """
    if not isinstance(name, str):
        raise InvalidParameterError("accountant", name, "must be an accountant's name")
    if not make_accountant(name).supports(_DPSGD_STEP):
        raise InvalidParameterError(
            "accountant",
            name,
            "cannot account DP-SGD's steps (a Poisson-sampled Gaussian): use one that can, "
            f"such as {' or '.join(DPSGD_ACCOUNTANTS)}",
        )
    return name


LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

NOISE_BLOCK_COORDINATES = 2**14
"""Noise is drawn for ``max(1, 2**14 // d)`` steps per sampler call (fewer calls, same law)."""

SAMPLING_BLOCK_DECISIONS = 2**22
"""Poisson sampling draws ``max(1, 2**22 // n)`` steps' membership bits per sampler call."""

_BAR_ACCOUNTING_SHARE = 0.25
"""The progress bar refreshes epsilon while accounting took at most this share of training."""


@dataclass(frozen=True, slots=True)
class TrainingPhase:
    """One call of :meth:`DPSGD.fit`: its sampling rate, noise and number of steps.

    Attributes
    ----------
    sampling_rate : float
        Poisson rate ``q = L / n``.
    noise_multiplier : float
        ``z = sigma / Delta``.
    steps : int
        Steps taken.
    event : PrivacyEvent
        ``PoissonSampledEvent(q, GaussianEvent(sigma, Delta))`` of one step (grid units).
    """

    sampling_rate: float
    noise_multiplier: float
    steps: int
    event: PrivacyEvent


def check_noise_target(
    noise_multiplier: float | None, target_epsilon: float | None, delta: float
) -> tuple[float | None, float | None, float]:
    """Return the checked ``(noise_multiplier, target_epsilon, delta)`` of a noisy trainer.

    Exactly one of ``noise_multiplier`` and ``target_epsilon`` must be given; ``delta`` must be
    in (0, 1).
    """
    if (noise_multiplier is None) == (target_epsilon is None):
        raise InvalidParameterError(
            "noise_multiplier",
            noise_multiplier,
            "must be given, or target_epsilon instead (exactly one of the two)",
        )
    checked_delta = check_delta(delta)
    if checked_delta == 0.0:
        raise InvalidParameterError("delta", delta, "must be in (0, 1)")
    return (
        None if noise_multiplier is None else check_positive(noise_multiplier, "noise_multiplier"),
        None if target_epsilon is None else check_epsilon(target_epsilon, "target_epsilon"),
        checked_delta,
    )


def check_module(model: object, name: str = "model") -> nn.Module:
    """Return ``model`` if it is a ``torch.nn.Module`` without batch normalisation.

    Raises
    ------
    InvalidParameterError
        If ``model`` is not a module, or has no trainable parameter.
    UnsupportedError
        If it contains BatchNorm (its batch statistics mix examples: no per-example bound).

    Examples
    --------
    >>> import torch
    >>> check_module(torch.nn.Linear(2, 1)).out_features
    1
    """
    if not isinstance(model, nn.Module):
        raise InvalidParameterError(name, model, "must be a torch.nn.Module")
    for sub_name, sub in model.named_modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm):
            raise UnsupportedError(
                f"{name} contains {type(sub).__name__} at {sub_name or '<root>'!r}: batch "
                "normalisation mixes the examples of a lot, so no per-example sensitivity "
                "exists; replace it with GroupNorm or LayerNorm."
            )
    if not any(p.requires_grad for p in model.parameters()):
        raise InvalidParameterError(name, type(model).__name__, "must have trainable parameters")
    return model


def as_tensor(values: object, name: str) -> torch.Tensor:
    """Convert an array-like to a tensor (numpy arrays without a copy)."""
    if isinstance(values, torch.Tensor):
        return values
    if isinstance(values, np.ndarray):
        return torch.from_numpy(values)
    try:
        return torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError):
        raise InvalidParameterError(name, type(values).__name__, "must be array-like") from None


class DPSGD:
    """Train a PyTorch model with DP-SGD (or DP-Adam): clip per example, add noise, account.

    Parameters
    ----------
    model : torch.nn.Module
        The model to train (in place). No BatchNorm.
    optimizer : torch.optim.Optimizer
        Holds exactly the model's trainable parameters; ``SGD`` gives DP-SGD, ``Adam`` DP-Adam.
    loss_fn : callable
        ``loss_fn(output, target) -> scalar`` for a batch of one example (e.g.
        ``torch.nn.functional.cross_entropy``).
    max_grad_norm : float
        Clipping norm ``C`` > 0 of each example's gradient (flat over all parameters).
    batch_size : int
        Expected lot size ``L``; the sampling rate is ``q = L / n``.
    epochs : int, default 1
        Epochs per :meth:`fit` call; an epoch is ``round(n / L)`` steps.
    noise_multiplier : float, optional
        ``z = sigma / Delta`` > 0. Exactly one of ``noise_multiplier`` and ``target_epsilon``.
    target_epsilon : float, optional
        Calibrate ``z`` so that the first :meth:`fit` spends at most this epsilon at ``delta``;
        later calls that would exceed it raise :class:`~dpcurator.errors.BudgetExceededError`.
    delta : float, default 1e-5
        The delta at which epsilon is reported, in (0, 1).
    accountant : {"pld", "rdp"}, default "pld"
        The accountant that certifies epsilon (PLD is the tighter).
    noise : {"secure", "float"}, default "secure"
        Exact discrete Gaussian on the grid, or ``torch.normal`` (faster, floating-point attack
        surface documented in :mod:`dpcurator.learn._torch_noise`).
    source : RandomSource, optional
        Randomness for sampling and noise (the OS CSPRNG by default).
    progress : bool, optional
        Show a rich progress bar per epoch with the epsilon spent; default: when stdout is a
        terminal. Epsilon is refreshed after an epoch while the accounting has taken at most a
        quarter of the training time (PLD accounting is not free), and always after the last.
    engine : {"auto", "functorch", "linear-stack"}, default "auto"
        How per-example gradients are computed (:func:`~dpcurator.learn._per_example.
        make_gradient_sum`): ``"auto"`` takes the fast linear-stack engine for an
        ``nn.Sequential`` of ``nn.Linear`` layers and row-wise activations, ``torch.func``
        otherwise. Both have the same sensitivity.

    Attributes
    ----------
    sampling_rate_ : float
        ``q`` of the last :meth:`fit`.
    noise_multiplier_ : float
        ``z``.
    grid_bits_ : int
        The grid exponent ``k``.
    sensitivity_ : float
        ``Delta`` in grid units (:func:`~dpcurator.learn._torch_noise.grid_sensitivity`).
    sigma_ : float
        Noise parameter in grid units, ``z * Delta``.
    engine_ : str
        The per-example gradient engine in use (``"linear-stack"`` or ``"functorch"``).
    steps_ : int
        Steps taken in all.
    phases_ : list of TrainingPhase
        One per :meth:`fit`.
    epsilon_ : float
        Epsilon spent at ``delta`` (all steps).
    privacy_event_ : PrivacyEvent
        Everything released, as an event.

    Examples
    --------
    DP-Adam on a small MLP:

    >>> import torch
    >>> from dpcurator.noise import InsecureSeededSource
    >>> X = torch.randn(300, 4, generator=torch.Generator().manual_seed(1))
    >>> y = (X.sum(dim=1) > 0).long()
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> trainer = DPSGD(model, torch.optim.Adam(model.parameters(), lr=0.02),
    ...                 loss_fn=torch.nn.functional.cross_entropy, max_grad_norm=1.0,
    ...                 batch_size=60, epochs=5, noise_multiplier=1.0,
    ...                 source=InsecureSeededSource(2), progress=False).fit(X, y)
    >>> round(trainer.epsilon_, 2) == round(trainer.epsilon(1e-5), 2)
    True
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        loss_fn: LossFn,
        max_grad_norm: float,
        batch_size: int,
        epochs: int = 1,
        noise_multiplier: float | None = None,
        target_epsilon: float | None = None,
        delta: float = 1e-5,
        accountant: str = "pld",
        noise: str = "secure",
        source: RandomSource | None = None,
        progress: bool | None = None,
        engine: str = "auto",
    ) -> None:
        self.model = check_module(model)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise InvalidParameterError("optimizer", optimizer, "must be a torch.optim.Optimizer")
        trainable = [p for p in model.parameters() if p.requires_grad]
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        if held != {id(p) for p in trainable}:
            raise InvalidParameterError(
                "optimizer",
                type(optimizer).__name__,
                "must hold exactly the model's trainable parameters",
            )
        self.optimizer = optimizer
        if not callable(loss_fn):
            raise InvalidParameterError("loss_fn", loss_fn, "must be callable")
        self.loss_fn = loss_fn
        self.max_grad_norm = check_positive(max_grad_norm, "max_grad_norm")
        self.batch_size = check_integer(batch_size, "batch_size", minimum=1)
        self.epochs = check_integer(epochs, "epochs", minimum=1)
        self.noise_multiplier, self.target_epsilon, self.delta = check_noise_target(
            noise_multiplier, target_epsilon, delta
        )
        self.accountant = check_dpsgd_accountant(accountant)
        if noise not in NOISE_MODES:
            raise InvalidParameterError("noise", noise, f"must be one of {NOISE_MODES}")
        self._noise = TensorNoise(noise, source=source)
        self.noise = noise
        self.source = self._noise.source
        self.progress = progress
        if engine not in GRADIENT_ENGINES:
            raise InvalidParameterError("engine", engine, f"must be one of {GRADIENT_ENGINES}")
        self._params = [p for p in model.parameters() if p.requires_grad]
        self.dimension_ = sum(p.numel() for p in self._params)
        self.grid_bits_ = grid_bits(self.max_grad_norm, self.dimension_)
        self.sensitivity_ = grid_sensitivity(self.max_grad_norm, self.dimension_, self.grid_bits_)
        self._gradient_sum = make_gradient_sum(
            model, loss_fn, clip_norm=self.max_grad_norm, bits=self.grid_bits_, engine=engine
        )
        self.engine_ = self._gradient_sum.name
        self.phases_: list[TrainingPhase] = []
        self.steps_ = 0
        self._epsilon_cache: dict[tuple[int, float], float] = {}

    # -- one step -------------------------------------------------------------------------
    def _step(
        self, x: torch.Tensor, target: torch.Tensor, noise: torch.Tensor, scale: float
    ) -> None:
        """Apply one update from the lot ``(x, target)`` and its noise (grid units)."""
        total = self._gradient_sum(x, target)
        total += noise
        total *= scale
        start = 0
        for p in self._params:
            size = p.numel()
            p.grad = total[start : start + size].view(p.shape).to(p.dtype)
            start += size
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    # -- accounting -----------------------------------------------------------------------
    def _step_event(self, rate: float, z: float) -> tuple[PrivacyEvent, float]:
        sigma = z * self.sensitivity_
        while sigma / self.sensitivity_ < z:  # the reported multiplier is never below z
            sigma = math.nextafter(sigma, math.inf)
        event = PoissonSampledEvent(rate, GaussianEvent(sigma=sigma, sensitivity=self.sensitivity_))
        return event, sigma

    def _epsilon_of(self, phases: list[tuple[PrivacyEvent, int]], delta: float) -> float:
        acc = make_accountant(self.accountant)
        for event, count in phases:
            acc.compose(event, count)
        return acc.get_epsilon(delta)

    def epsilon(self, delta: float | None = None) -> float:
        """Epsilon spent so far at ``delta`` (default: the ``delta`` given at construction).

        Examples
        --------
        >>> import torch
        >>> model = torch.nn.Linear(2, 2)
        >>> DPSGD(model, torch.optim.SGD(model.parameters(), lr=0.1),
        ...       loss_fn=torch.nn.functional.cross_entropy, max_grad_norm=1.0, batch_size=8,
        ...       noise_multiplier=1.0).epsilon()
        0.0
        """
        dlt = self.delta if delta is None else check_delta(delta)
        key = (self.steps_, dlt)
        if key not in self._epsilon_cache:
            done = [(ph.event, ph.steps) for ph in self.phases_ if ph.steps]
            self._epsilon_cache[key] = self._epsilon_of(done, dlt) if done else 0.0
        return self._epsilon_cache[key]

    @property
    def epsilon_(self) -> float:
        """Epsilon spent at ``delta`` by all steps taken."""
        return self.epsilon()

    @property
    def privacy_event_(self) -> PrivacyEvent:
        """Everything released so far, as one privacy event."""
        parts: list[PrivacyEvent] = [
            SelfComposedEvent(ph.event, ph.steps) for ph in self.phases_ if ph.steps
        ]
        return parts[0] if len(parts) == 1 else ComposedEvent(tuple(parts))

    @property
    def sampling_rate_(self) -> float:
        """``q`` of the last :meth:`fit`."""
        return self._last_phase().sampling_rate

    @property
    def noise_multiplier_(self) -> float:
        """``z`` of the last :meth:`fit`."""
        return self._last_phase().noise_multiplier

    @property
    def sigma_(self) -> float:
        """Noise parameter in grid units of the last :meth:`fit`."""
        event = self._last_phase().event
        assert isinstance(event, PoissonSampledEvent) and isinstance(event.event, GaussianEvent)
        return event.event.sigma

    def _settings(self) -> dict[str, object]:
        noise: dict[str, object] = (
            {"noise_multiplier": self.noise_multiplier}
            if self.target_epsilon is None
            else {"target_epsilon": self.target_epsilon}
        )
        return {
            "model": type(self.model).__name__,
            "optimizer": type(self.optimizer).__name__,
            "max_grad_norm": self.max_grad_norm,
            "batch_size": self.batch_size,
            "epochs": self.epochs,
            **noise,
            "delta": self.delta,
            "accountant": self.accountant,
            "noise": self.noise,
        }

    def _state(self) -> dict[str, object]:
        if not self.steps_:
            return {"steps": 0}
        return {"steps": self.steps_, "epsilon": self.epsilon_}

    def __repr__(self) -> str:
        return settings_repr("DPSGD", self._settings(), self._state())

    def _repr_html_(self) -> str:
        """Render the settings and the privacy spent as an HTML table for notebooks."""
        note = (
            f"epsilon spent at delta={self.delta:g} after {self.steps_:,} steps "
            f"({self.accountant} accountant)"
            if self.steps_
            else "not trained yet: nothing spent"
        )
        return settings_html("DPSGD", self._settings(), self._state(), note)

    def _last_phase(self) -> TrainingPhase:
        if not self.phases_:
            raise InvalidParameterError("fit", "not called", "must run before this attribute")
        return self.phases_[-1]

    # -- training -------------------------------------------------------------------------
    def fit(self, X: Any, y: Any) -> DPSGD:
        """Train for ``epochs`` epochs on ``(X, y)``; returns ``self``.

        Parameters
        ----------
        X : torch.Tensor or array_like
            Inputs, first axis the examples (``n`` of them, ``n >= batch_size``).
        y : torch.Tensor or array_like
            Targets, ``n`` of them.

        Returns
        -------
        DPSGD

        Raises
        ------
        BudgetExceededError
            If ``target_epsilon`` was given and these steps would exceed it (nothing is
            trained or spent then).
        """
        features = as_tensor(X, "X")
        targets = as_tensor(y, "y")
        if features.ndim == 0 or features.shape[0] == 0:
            raise InvalidParameterError(
                "X", tuple(features.shape), "must hold at least one example"
            )
        n = int(features.shape[0])
        if targets.ndim == 0 or int(targets.shape[0]) != n:
            raise InvalidParameterError("y", tuple(targets.shape), f"must hold {n} targets")
        if features.is_floating_point() and not bool(torch.isfinite(features).all()):
            raise InvalidParameterError("X", "<tensor>", "must be finite (no NaN or inf)")
        if self.batch_size > n:
            raise InvalidParameterError("batch_size", self.batch_size, f"must be <= n = {n}")
        rate = self.batch_size / n
        lot = rate * n
        steps_per_epoch = max(1, round(n / self.batch_size))
        steps = self.epochs * steps_per_epoch
        done = [(ph.event, ph.steps) for ph in self.phases_ if ph.steps]
        if self.noise_multiplier is not None:
            z = self.noise_multiplier
        elif not self.phases_:
            assert self.target_epsilon is not None
            z = dpsgd_noise_multiplier(
                self.target_epsilon,
                self.delta,
                sampling_rate=rate,
                steps=steps,
                accountant=self.accountant,
            )
        else:
            z = self.phases_[-1].noise_multiplier
        event, sigma = self._step_event(rate, z)
        if self.target_epsilon is not None:
            planned = self._epsilon_of([*done, (event, steps)], self.delta)
            if planned > self.target_epsilon:
                raise BudgetExceededError(
                    f"{steps} more steps would bring epsilon to {planned:.4g} > target_epsilon "
                    f"= {self.target_epsilon:.4g} at delta = {self.delta:g}; nothing was spent.",
                    remaining=self.target_epsilon - self.epsilon(),
                    requested=planned,
                )
        phase_index = len(self.phases_)
        self.phases_.append(TrainingPhase(rate, z, 0, event))
        self.model.train()
        noise = step_noise(self._noise, sigma, self.dimension_, steps)
        scale = math.ldexp(1.0, -self.grid_bits_) / lot
        trained = accounted = 0.0
        share = _BAR_ACCOUNTING_SHARE
        shown: tuple[float, int] | None = None  # the epsilon on the bar and its epoch
        with _Bar(self.epochs, "DP-SGD epoch", self.progress) as bar:
            for epoch in range(1, self.epochs + 1):
                start = time.perf_counter()
                for index in poisson_lots(rate, n, steps_per_epoch, source=self.source):
                    self._step(features[index], targets[index], next(noise), scale)
                    self.steps_ += 1
                    self.phases_[phase_index] = TrainingPhase(
                        rate, z, self.phases_[phase_index].steps + 1, event
                    )
                trained += time.perf_counter() - start
                if bar.shown:
                    if shown is None or epoch == self.epochs or accounted <= share * trained:
                        start = time.perf_counter()
                        shown = (self.epsilon(), epoch)
                        accounted += time.perf_counter() - start
                    stale = "" if shown[1] == epoch else f" (after epoch {shown[1]})"
                    bar.advance(shown[0], self.delta, note=stale)
        return self


def poisson_lots(
    rate: float,
    n: int,
    steps: int,
    *,
    source: RandomSource,
    decisions: int = SAMPLING_BLOCK_DECISIONS,
) -> Iterator[torch.Tensor]:
    """Yield the indices of ``steps`` Poisson lots: each example joins with probability ``rate``.

    The membership bits are exact Bernoulli draws (:func:`dpcurator.noise.bernoulli`), drawn
    for ``max(1, decisions // n)`` steps per call (bounded memory, fewer calls), independent
    across examples and steps.

    Parameters
    ----------
    rate : float
        The sampling rate ``q`` (its exact dyadic value).
    n : int
        Number of examples.
    steps : int
        Number of lots.
    source : RandomSource
        Where the bits come from.
    decisions : int, default 2**22
        Target number of membership bits per sampler call.

    Yields
    ------
    torch.Tensor
        The sorted indices (int64) of one lot.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> lots = list(poisson_lots(0.5, 10, 3, source=InsecureSeededSource(0)))
    >>> len(lots), all(0 <= int(i) < 10 for lot in lots for i in lot)
    (3, True)
    """
    per_call = max(1, decisions // max(1, n))
    done = 0
    while done < steps:
        count = min(per_call, steps - done)
        for chosen in bernoulli(rate, size=(count, n), source=source):
            yield torch.from_numpy(np.flatnonzero(chosen))
        done += count


def step_noise(
    noise: TensorNoise,
    sigma: float,
    dimension: int,
    steps: int,
    *,
    coordinates: int = NOISE_BLOCK_COORDINATES,
) -> Iterator[torch.Tensor]:
    """Yield ``steps`` independent noise vectors, drawing several steps per sampler call.

    Each call of :meth:`TensorNoise.sample` draws ``max(1, coordinates // dimension)`` steps'
    worth (never more than the steps left), which amortises the sampler's fixed cost on small
    models. The vectors are independent with the sampler's law whatever the blocking, and none
    of them depends on the data.

    Parameters
    ----------
    noise : TensorNoise
        The sampler (secure or float).
    sigma : float
        Noise parameter in grid units.
    dimension : int
        Coordinates per step.
    steps : int
        How many vectors to yield.
    coordinates : int, default 2**14
        Target number of coordinates per sampler call.

    Yields
    ------
    torch.Tensor
        Shape ``(dimension,)``, float64.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> draws = step_noise(TensorNoise("secure", source=InsecureSeededSource(0)), 4.0, 3, 5)
    >>> [tuple(v.shape) for v in draws]
    [(3,), (3,), (3,), (3,), (3,)]
    """
    per_call = max(1, coordinates // dimension)
    done = 0
    while done < steps:
        count = min(per_call, steps - done)
        yield from noise.sample(sigma, count * dimension).view(count, dimension)
        done += count


class _Bar:
    """A rich progress bar (epochs or rounds) showing the epsilon spent, or nothing."""

    def __init__(self, total: int, label: str, show: bool | None) -> None:
        if show is None:
            show = sys.stdout.isatty()
        self._progress: Any = None
        if show:
            self._progress = Progress(
                TextColumn(label),
                MofNCompleteColumn(),
                BarColumn(),
                TextColumn("ε = {task.fields[epsilon]}"),
            )
            self._task = self._progress.add_task(label, total=total, epsilon="0")

    @property
    def shown(self) -> bool:
        """Whether the bar is displayed."""
        return self._progress is not None

    def __enter__(self) -> _Bar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *args: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, epsilon: float | None, delta: float | None, *, note: str = "") -> None:
        """Advance by one and show ``epsilon`` at ``delta`` (or a dash), then ``note``."""
        if self._progress is not None:
            text = "-" if epsilon is None else f"{epsilon:.3f} at δ = {delta:g}{note}"
            self._progress.update(self._task, advance=1, epsilon=text)
