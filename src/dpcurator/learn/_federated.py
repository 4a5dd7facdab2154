r"""Federated averaging with differential privacy: an in-process simulation.

Clients hold their own data; each round the server sends the global model to a sample of
clients, each runs a few local epochs of SGD and returns its model update, and the server
aggregates (FedAvg, McMahan et al. 2017; lecture 004, Algorithm 1 "FederatedAveraging").

:class:`FedAvg`
    The non-private baseline: a fixed fraction of clients per round, updates averaged with
    weights ``n_k / sum n_k`` (lecture 004).
:class:`DPFedAvg` with ``mode="central"`` (default)
    User-level DP-FedAvg (McMahan, Ramage, Talwar and Zhang, ICLR 2018; research note E.5).
    Round ``t``: each of the ``K`` clients is sampled independently with probability
    ``q = m / K`` (``m`` the expected clients per round; decisions from
    :func:`dpcurator.noise.bernoulli`); each sampled client's update ``Delta_k`` is clipped to
    L2 norm ``S`` and weighted by ``w_k = min(n_k / w_cap, 1) <= 1`` (``w_k = 1`` without a
    cap); the server releases

    .. math:: \theta_{t+1} = \theta_t + \eta_s \frac{2^{-k}\left(\sum_{k \in C_t}
              \mathrm{round}(2^k w_k \bar\Delta_k) + Z\right)}{q W},
              \qquad Z \sim \mathcal{N}_{\mathbb{Z}}(0, \sigma^2 I),

    the fixed-denominator estimator with ``W = sum_k w_k`` (public, like the dataset size in
    DP-SGD), ``sigma = z Delta`` in grid units and ``Delta`` the grid sensitivity of one
    client (:func:`~dpcurator.learn._torch_noise.grid_sensitivity`).
    **Guarantee:** neighbouring federations differ by adding or removing *all* the data of one
    client (user-level DP). A round is the Poisson-subsampled Gaussian mechanism with rate ``q``
    and noise multiplier ``z``; ``T`` rounds compose adaptively, and the accountant (PLD by
    default, or RDP) reports epsilon at ``delta`` after every round (``history_``). Everything
    the server sees, all intermediate global models included, is covered; the clients' own
    computations are not released. Same noise paths and accounting caveat as DP-SGD
    (:mod:`dpcurator.learn._dpsgd`).
:class:`DPFedAvg` with ``mode="local"``
    Clients do not trust the server: each sampled client clips its update to ``S``, rounds it
    to the grid and adds the Gaussian noise itself (``sigma = z Delta_local``,
    ``Delta_local = 2 Delta``: its data may be replaced arbitrarily, and two clipped updates
    differ by at most ``2 S``); the server averages the noisy updates it receives. **Guarantee:**
    each message a client sends is ``(epsilon, delta)``-DP with respect to that client's whole
    dataset against anyone who sees it (local DP, replace-one); across rounds a client's
    messages compose (no amplification: the server knows who took part), and ``epsilon_`` is
    the epsilon of the client that took part most often. The noise added is ``1 / sqrt(m)``
    times larger than in the central model relative to the average, as lecture 004 contrasts
    ("Local DP: weaker trust assumptions, utility often suffers").
:class:`DPFedAvg` with ``mode="distributed"``
    Neither the server nor any client sees a clean update (lecture 004, "Distributed
    Differential Privacy"; Kairouz, Liu and Steinke, ICML 2021). Each of the ``n_t`` sampled
    clients rounds its clipped update to the grid, adds a *share*
    ``N_Z(0, s_t^2)^d`` of discrete Gaussian noise with ``s_t^2 >= sigma^2 / u_t`` for
    ``u_t = ceil((1 - dropout_tolerance) n_t)``, reduces it modulo ``2**b`` and masks it
    (:mod:`dpcurator.learn._distributed`); the server unmasks only the sum of the survivors'
    shares, which carries noise of variance at least ``sigma^2`` whenever at least ``u_t``
    clients survive (fewer: the round is abandoned, nothing is released or spent). The
    update applied is that sum over ``q W``, the central mode's fixed denominator.
    **Guarantee:** user-level DP against the server and anyone who sees the models, for the
    zero-out relation (one client's data replaced by data whose update is zero; participation
    is known to the server). A round
    in which a client's share entered the sum is ``rho_t``-zCDP for it, ``rho_t`` from the DDG
    bound with the actual number of shares summed
    (:func:`~dpcurator.learn._distributed.ddg_rho`: about ``1 / (2 z^2)``); rounds compose
    (no amplification by sampling: the server knows who took part), and ``epsilon_`` is that of
    the client with the largest total ``rho``, by the zCDP accountant (or RDP).

References
----------
H. B. McMahan, E. Moore, D. Ramage, S. Hampson, B. Agüera y Arcas, "Communication-Efficient
Learning of Deep Networks from Decentralized Data", AISTATS 2017. H. B. McMahan, D. Ramage,
K. Talwar, L. Zhang, "Learning Differentially Private Recurrent Language Models", ICLR 2018
(Algorithm 1, DP-FedAvg).

Examples
--------
>>> import torch
>>> from dpcurator.noise import InsecureSeededSource
>>> g = torch.Generator().manual_seed(0)
>>> clients = []
>>> for _ in range(40):
...     X = torch.randn(20, 3, generator=g)
...     clients.append((X, (X[:, 0] > 0).long()))
>>> server = DPFedAvg(torch.nn.Linear(3, 2), loss_fn=torch.nn.functional.cross_entropy,
...                   rounds=5, clients_per_round=20, clip_norm=1.0, noise_multiplier=1.0,
...                   source=InsecureSeededSource(0), progress=False).fit(clients)
>>> len(server.history_), server.history_[-1].epsilon == server.epsilon_
(5, True)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import torch
from torch import nn

from dpcurator._validation import (
    check_delta,
    check_integer,
    check_positive,
    check_probability,
)
from dpcurator.accounting import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SelfComposedEvent,
    dpsgd_noise_multiplier,
    gaussian_sigma_analytic,
    make_accountant,
    zcdp_rho_for,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.learn._describe import settings_html, settings_repr
from dpcurator.learn._distributed import (
    TRUST_MODELS,
    ddg_event,
    noisy_share,
    ring_bits,
    secure_sum,
    share_sigma,
    to_ring,
    unmask_sum,
)
from dpcurator.learn._dpsgd import (
    _Bar,
    as_tensor,
    check_dpsgd_accountant,
    check_module,
    check_noise_target,
)
from dpcurator.learn._torch_noise import (
    NOISE_MODES,
    TensorNoise,
    clipped_grid_sum,
    grid_bits,
    grid_sensitivity,
)
from dpcurator.noise import RandomSource, bernoulli, resolve_source, uniform_integers

__all__ = ["FEDERATED_MODES", "DPFedAvg", "FedAvg", "RoundRecord", "local_sgd"]

FEDERATED_MODES = TRUST_MODELS
"""Where the noise is added: by the server (user-level DP), by each client (local DP), or by
each client a share of it under secure aggregation (distributed DP)."""

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
ClientData = tuple[Any, Any]


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """What one round did.

    Attributes
    ----------
    round : int
        1-based round number.
    clients : int
        Number of clients that took part (public to the server).
    epsilon : float
        Epsilon spent so far at the trainer's ``delta`` (0 for non-private FedAvg).
    """

    round: int
    clients: int
    epsilon: float


def local_sgd(
    model: nn.Module,
    features: torch.Tensor,
    targets: torch.Tensor,
    *,
    loss_fn: LossFn,
    epochs: int,
    batch_size: int,
    lr: float,
    source: RandomSource | None = None,
) -> None:
    """Run ``epochs`` epochs of minibatch SGD on one client's data, in place (ClientUpdate).

    The order of the examples is a uniform random permutation per epoch, drawn from
    ``source`` (lecture 004, Algorithm 1: "split P_k into batches of size B").

    Examples
    --------
    >>> import torch
    >>> model = torch.nn.Linear(1, 1, bias=False)
    >>> with torch.no_grad():
    ...     _ = model.weight.fill_(0.0)
    >>> X = torch.ones(8, 1); y = 2 * torch.ones(8, 1)
    >>> local_sgd(model, X, y, loss_fn=torch.nn.functional.mse_loss, epochs=50, batch_size=4,
    ...           lr=0.1)
    >>> round(model.weight.item(), 3)
    2.0
    """
    n = int(features.shape[0])
    src = resolve_source(source)
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    for _ in range(epochs):
        order = torch.from_numpy(np.argsort(uniform_integers(2**62, size=n, source=src)))
        for start in range(0, n, batch_size):
            index = order[start : start + batch_size]
            model.zero_grad(set_to_none=True)
            torch.autograd.backward(loss_fn(model(features[index]), targets[index]))
            with torch.no_grad():
                for p in params:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-lr)


def _check_clients(clients: object) -> list[tuple[torch.Tensor, torch.Tensor]]:
    if not isinstance(clients, Sequence) or isinstance(clients, str | bytes) or not clients:
        raise InvalidParameterError(
            "clients", type(clients).__name__, "must be a non-empty sequence of (X, y) pairs"
        )
    out = []
    for i, pair in enumerate(clients):
        if not isinstance(pair, Sequence) or len(pair) != 2:
            raise InvalidParameterError(f"clients[{i}]", type(pair).__name__, "must be (X, y)")
        features = as_tensor(pair[0], f"clients[{i}][0]")
        targets = as_tensor(pair[1], f"clients[{i}][1]")
        if features.ndim == 0 or features.shape[0] == 0:
            raise InvalidParameterError(f"clients[{i}]", "<empty>", "must hold at least one row")
        if targets.ndim == 0 or targets.shape[0] != features.shape[0]:
            raise InvalidParameterError(
                f"clients[{i}][1]", tuple(targets.shape), "must have one target per row"
            )
        if features.is_floating_point() and not bool(torch.isfinite(features).all()):
            raise InvalidParameterError(f"clients[{i}][0]", "<tensor>", "must be finite")
        out.append((features, targets))
    return out


class _Federation:
    """Shared machinery: the global model as a flat vector, local training of one client."""

    def __init__(
        self,
        model: nn.Module,
        *,
        loss_fn: LossFn,
        rounds: int,
        local_epochs: int,
        local_batch_size: int,
        local_lr: float,
        server_lr: float,
        server_momentum: float,
        source: RandomSource | None,
        progress: bool | None,
    ) -> None:
        self.model = check_module(model)
        if not callable(loss_fn):
            raise InvalidParameterError("loss_fn", loss_fn, "must be callable")
        self.loss_fn = loss_fn
        self.rounds = check_integer(rounds, "rounds", minimum=1)
        self.local_epochs = check_integer(local_epochs, "local_epochs", minimum=1)
        self.local_batch_size = check_integer(local_batch_size, "local_batch_size", minimum=1)
        self.local_lr = check_positive(local_lr, "local_lr")
        self.server_lr = check_positive(server_lr, "server_lr")
        self.server_momentum = check_probability(
            server_momentum, "server_momentum", open_right=True
        )
        self.source = resolve_source(source)
        self.progress = progress
        self._params = [p for p in model.parameters() if p.requires_grad]
        self.dimension_ = sum(p.numel() for p in self._params)
        self._worker = copy.deepcopy(model)
        self._worker_params = [p for p in self._worker.parameters() if p.requires_grad]
        self._velocity = torch.zeros(self.dimension_, dtype=torch.float64)
        self.history_: list[RoundRecord] = []

    def _settings(self) -> dict[str, object]:
        return {
            "model": type(self.model).__name__,
            "rounds": self.rounds,
            "local_epochs": self.local_epochs,
            "local_batch_size": self.local_batch_size,
            "local_lr": self.local_lr,
            "server_lr": self.server_lr,
            "server_momentum": self.server_momentum,
        }

    def _state(self) -> dict[str, object]:
        return {"rounds_done": len(self.history_)}

    def _note(self) -> str:
        return f"{len(self.history_)} rounds done"

    def __repr__(self) -> str:
        return settings_repr(type(self).__name__, self._settings(), self._state())

    def _repr_html_(self) -> str:
        """Render the settings and the training state as an HTML table for notebooks."""
        return settings_html(type(self).__name__, self._settings(), self._state(), self._note())

    def _global_vector(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self._params])

    def _client_update(self, features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Return ``theta_k - theta_t`` after local training from the global model."""
        start = self._global_vector()
        with torch.no_grad():
            for mine, theirs in zip(self._worker_params, self._params, strict=True):
                mine.copy_(theirs)
        local_sgd(
            self._worker,
            features,
            targets,
            loss_fn=self.loss_fn,
            epochs=self.local_epochs,
            batch_size=self.local_batch_size,
            lr=self.local_lr,
            source=self.source,
        )
        end = torch.cat([p.detach().reshape(-1) for p in self._worker_params])
        return end - start

    def _apply(self, update: torch.Tensor) -> None:
        """``theta += server_lr * v`` with ``v = momentum v + update`` (server optimizer)."""
        self._velocity.mul_(self.server_momentum).add_(update.to(torch.float64))
        step = self._velocity * self.server_lr
        offset = 0
        with torch.no_grad():
            for p in self._params:
                size = p.numel()
                p.add_(step[offset : offset + size].reshape(p.shape).to(p.dtype))
                offset += size


class FedAvg(_Federation):
    """Non-private federated averaging (McMahan et al. 2017; lecture 004, Algorithm 1).

    Each round a uniformly random set of ``max(round(fraction K), 1)`` clients trains locally
    from the global model; the server sets ``theta_{t+1} = theta_t + server_lr * sum_k
    (n_k / m_t) Delta_k``. No privacy: the baseline DP-FedAvg is compared with.

    Parameters
    ----------
    model : torch.nn.Module
        The global model (trained in place).
    loss_fn : callable
        ``loss_fn(output, target) -> scalar`` on a minibatch.
    rounds : int
        Communication rounds.
    fraction : float, default 0.1
        Fraction ``C`` of clients per round, in (0, 1].
    local_epochs, local_batch_size, local_lr
        ClientUpdate's ``E``, ``B`` and learning rate.
    server_lr : float, default 1.0
    server_momentum : float, default 0.0
    source : RandomSource, optional
        Randomness for the client sample and the local shuffles.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator().manual_seed(1)
    >>> clients = [(X, (X[:, 1] > 0).long()) for X in torch.randn(10, 30, 2, generator=g)]
    >>> model = torch.nn.Linear(2, 2)
    >>> fed = FedAvg(model, loss_fn=torch.nn.functional.cross_entropy, rounds=10,
    ...              fraction=0.5, local_lr=0.5).fit(clients)
    >>> X, y = clients[0]
    >>> bool((model(X).argmax(1) == y).float().mean() > 0.9)
    True
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        loss_fn: LossFn,
        rounds: int,
        fraction: float = 0.1,
        local_epochs: int = 1,
        local_batch_size: int = 32,
        local_lr: float = 0.1,
        server_lr: float = 1.0,
        server_momentum: float = 0.0,
        source: RandomSource | None = None,
        progress: bool | None = None,
    ) -> None:
        super().__init__(
            model,
            loss_fn=loss_fn,
            rounds=rounds,
            local_epochs=local_epochs,
            local_batch_size=local_batch_size,
            local_lr=local_lr,
            server_lr=server_lr,
            server_momentum=server_momentum,
            source=source,
            progress=progress,
        )
        self.fraction = check_probability(fraction, "fraction", open_left=True)

    def _settings(self) -> dict[str, object]:
        return {**super()._settings(), "fraction": self.fraction}

    def _note(self) -> str:
        return f"{len(self.history_)} rounds done; not private (no clipping, no noise)"

    def fit(self, clients: Sequence[ClientData]) -> FedAvg:
        """Run ``rounds`` rounds over ``clients`` (a sequence of ``(X, y)``); returns ``self``."""
        data = _check_clients(clients)
        count = max(round(self.fraction * len(data)), 1)
        with _Bar(self.rounds, "FedAvg round", self.progress) as bar:
            for _ in range(self.rounds):
                keys = uniform_integers(2**62, size=len(data), source=self.source)
                chosen = np.argsort(keys)[:count]
                sizes = np.array([data[i][0].shape[0] for i in chosen], dtype=np.float64)
                total = torch.zeros(self.dimension_, dtype=torch.float64)
                for i, size in zip(chosen, sizes, strict=True):
                    update = self._client_update(*data[i]).to(torch.float64)
                    total += update * (size / sizes.sum())
                self._apply(total)
                self.history_.append(RoundRecord(len(self.history_) + 1, count, 0.0))
                bar.advance(None, None)
        return self


class DPFedAvg(_Federation):
    """DP federated averaging: user-level central DP (McMahan et al. 2018) or local DP.

    Parameters
    ----------
    model : torch.nn.Module
        The global model (trained in place). No BatchNorm.
    loss_fn : callable
        ``loss_fn(output, target) -> scalar`` on a minibatch (local training).
    rounds : int
        Communication rounds ``T``.
    clients_per_round : float
        Expected number ``m`` of clients per round; the sampling rate is ``q = m / K``.
    clip_norm : float
        ``S`` > 0, the L2 bound of each client's update.
    noise_multiplier : float, optional
        ``z`` > 0 (``sigma / Delta``). Exactly one of ``noise_multiplier`` and
        ``target_epsilon``.
    target_epsilon : float, optional
        Calibrate ``z`` so that ``T`` rounds spend at most this epsilon at ``delta`` (central:
        :func:`~dpcurator.accounting.dpsgd_noise_multiplier`; local: the analytic Gaussian of
        ``T`` participations, Balle and Wang 2018).
    delta : float, default 1e-5
    mode : {"central", "local", "distributed"}, default "central"
        The trust model: who adds the noise (see the module docstring).
    weight_cap : float, optional
        ``w_k = min(n_k / weight_cap, 1)`` (McMahan et al. 2018); uniform weights if None.
    local_epochs, local_batch_size, local_lr
        ClientUpdate's ``E``, ``B`` and learning rate.
    server_lr : float, default 1.0
    server_momentum : float, default 0.0
        Momentum of the server's update (post-processing).
    accountant : {"pld", "rdp"}, default "pld"
        Central mode's accountant (local mode composes Gaussians exactly with PLD; distributed
        mode's zCDP events go to the zCDP accountant, or to RDP if ``"rdp"``).
    noise : {"secure", "float"}, default "secure"
        Central and local modes; distributed mode always draws exact discrete Gaussian shares.
    dropout_tolerance : float, default 0.0
        Distributed mode: the fraction of a round's sampled clients that may drop out after
        the key exchange with the round still released (each share is scaled for
        ``ceil((1 - dropout_tolerance) n_t)`` survivors).
    simulated_dropout : float, default 0.0
        Distributed mode, for simulations: each sampled client independently drops out after
        the key exchange with this probability (decisions from :func:`dpcurator.noise.bernoulli`).
    masking : bool, default True
        Distributed mode: run the pairwise masking (X25519 key agreement per pair of sampled
        clients, ``O(n_t^2)`` per round). ``False`` sums the shares modulo ``2**b`` directly,
        which gives the same sum (the masks cancel exactly) and is for simulations with
        hundreds of clients per round.
    source : RandomSource, optional
    progress : bool, optional
        A rich progress bar per round with the epsilon spent.

    Attributes
    ----------
    sampling_rate_ : float
        ``q``.
    noise_multiplier_ : float
        ``z``.
    sigma_ : float
        Noise parameter in grid units.
    sensitivity_ : float
        ``Delta`` (central) or ``Delta_local`` (local) in grid units.
    grid_bits_ : int
    history_ : list of RoundRecord
        One per round, with the epsilon spent so far.
    epsilon_ : float
    privacy_event_ : PrivacyEvent
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        loss_fn: LossFn,
        rounds: int,
        clients_per_round: float,
        clip_norm: float,
        noise_multiplier: float | None = None,
        target_epsilon: float | None = None,
        delta: float = 1e-5,
        mode: str = "central",
        weight_cap: float | None = None,
        local_epochs: int = 1,
        local_batch_size: int = 32,
        local_lr: float = 0.1,
        server_lr: float = 1.0,
        server_momentum: float = 0.0,
        accountant: str = "pld",
        noise: str = "secure",
        dropout_tolerance: float = 0.0,
        simulated_dropout: float = 0.0,
        masking: bool = True,
        source: RandomSource | None = None,
        progress: bool | None = None,
    ) -> None:
        super().__init__(
            model,
            loss_fn=loss_fn,
            rounds=rounds,
            local_epochs=local_epochs,
            local_batch_size=local_batch_size,
            local_lr=local_lr,
            server_lr=server_lr,
            server_momentum=server_momentum,
            source=source,
            progress=progress,
        )
        self.dropout_tolerance = check_probability(
            dropout_tolerance, "dropout_tolerance", open_right=True
        )
        self.simulated_dropout = check_probability(
            simulated_dropout, "simulated_dropout", open_right=True
        )
        if not isinstance(masking, bool):
            raise InvalidParameterError("masking", masking, "must be True or False")
        self.masking = masking
        self.clients_per_round = check_positive(clients_per_round, "clients_per_round")
        self.clip_norm = check_positive(clip_norm, "clip_norm")
        self.noise_multiplier, self.target_epsilon, self.delta = check_noise_target(
            noise_multiplier, target_epsilon, delta
        )
        if mode not in FEDERATED_MODES:
            raise InvalidParameterError("mode", mode, f"must be one of {FEDERATED_MODES}")
        self.mode = mode
        self.weight_cap = None if weight_cap is None else check_positive(weight_cap, "weight_cap")
        self.accountant = check_dpsgd_accountant(accountant)
        if noise not in NOISE_MODES:
            raise InvalidParameterError("noise", noise, f"must be one of {NOISE_MODES}")
        self.noise = noise
        self._noise = TensorNoise(noise, source=self.source)
        self.grid_bits_ = grid_bits(self.clip_norm, self.dimension_)
        central = grid_sensitivity(self.clip_norm, self.dimension_, self.grid_bits_)
        # Central: add/remove one client; distributed: zero-out; local: replace-one (2 Delta).
        self.sensitivity_ = 2.0 * central if mode == "local" else central
        self._participations: np.ndarray[Any, np.dtype[np.int64]] = np.zeros(0, dtype=np.int64)
        self._rho_totals: list[Fraction] = []
        self._shares: list[tuple[PrivacyEvent, frozenset[int]]] = []

    # -- privacy --------------------------------------------------------------------------
    def _calibrate(self, rate: float) -> float:
        if self.noise_multiplier is not None:
            return self.noise_multiplier
        assert self.target_epsilon is not None
        if self.mode == "distributed":
            # T rounds of rho = 1 / (2 z^2) each (the DDG bound's tau term is below 1e-300 at
            # these noise levels; the reported epsilon includes it).
            rho = zcdp_rho_for(self.target_epsilon, self.delta)
            return math.sqrt(self.rounds / (2.0 * rho)) * (1.0 + 1e-9)
        if self.mode == "central":
            return dpsgd_noise_multiplier(
                self.target_epsilon,
                self.delta,
                sampling_rate=rate,
                steps=self.rounds,
                accountant=self.accountant,
            )
        # T Gaussian releases with multiplier z compose to one with multiplier z / sqrt(T).
        return gaussian_sigma_analytic(
            self.target_epsilon, self.delta, sensitivity=math.sqrt(self.rounds)
        )

    def _round_event(self) -> PrivacyEvent:
        gaussian = GaussianEvent(sigma=self.sigma_, sensitivity=self.sensitivity_)
        if self.mode == "local":
            return gaussian
        return PoissonSampledEvent(self.sampling_rate_, gaussian)

    def epsilon(self, delta: float | None = None) -> float:
        """Epsilon spent so far at ``delta`` (default: the trainer's ``delta``)."""
        dlt = self.delta if delta is None else check_delta(delta)
        event = self.privacy_event_
        if isinstance(event, SelfComposedEvent) and event.count == 0:
            return 0.0
        if isinstance(event, ComposedEvent) and not event.events:
            return 0.0
        name = {"central": self.accountant, "local": "pld"}.get(
            self.mode, "rdp" if self.accountant == "rdp" else "zcdp"
        )
        return make_accountant(name).compose(event).get_epsilon(dlt)

    def _settings(self) -> dict[str, object]:
        noise: dict[str, object] = (
            {"noise_multiplier": self.noise_multiplier}
            if self.target_epsilon is None
            else {"target_epsilon": self.target_epsilon}
        )
        return {
            **super()._settings(),
            "clients_per_round": self.clients_per_round,
            "clip_norm": self.clip_norm,
            **noise,
            "delta": self.delta,
            "mode": self.mode,
            "accountant": self.accountant,
            "noise": self.noise,
            **(
                {
                    "dropout_tolerance": self.dropout_tolerance,
                    "simulated_dropout": self.simulated_dropout,
                }
                if self.mode == "distributed"
                else {}
            ),
        }

    def _state(self) -> dict[str, object]:
        if not self.history_:
            return super()._state()
        return {**super()._state(), "epsilon": self.history_[-1].epsilon}

    def _note(self) -> str:
        if not self.history_:
            return "not trained yet: nothing spent"
        who = {
            "central": "",
            "local": " (by the most frequent participant)",
            "distributed": " (by the client with the largest total rho)",
        }[self.mode]
        return f"epsilon spent at delta={self.delta:g} after {len(self.history_)} rounds{who}"

    @property
    def epsilon_(self) -> float:
        """Epsilon spent at ``delta`` (local mode: by the most frequent participant)."""
        return self.epsilon()

    @property
    def privacy_event_(self) -> PrivacyEvent:
        """Central: all rounds so far. Local: the messages of the most frequent participant.

        Distributed: the sums that the client with the largest total ``rho`` contributed to.
        """
        if not hasattr(self, "sigma_"):
            raise InvalidParameterError("fit", "not called", "must run before this attribute")
        if self.mode == "central":
            return SelfComposedEvent(self._round_event(), len(self.history_))
        if self.mode == "distributed":
            if not self._rho_totals:
                return ComposedEvent(())
            worst = max(range(len(self._rho_totals)), key=self._rho_totals.__getitem__)
            return ComposedEvent(
                tuple(event for event, members in self._shares if worst in members)
            )
        most = int(self._participations.max()) if self._participations.size else 0
        return SelfComposedEvent(self._round_event(), most)

    # -- training -------------------------------------------------------------------------
    def fit(self, clients: Sequence[ClientData]) -> DPFedAvg:
        """Run ``rounds`` rounds over ``clients`` (a sequence of ``(X, y)``); returns ``self``."""
        data = _check_clients(clients)
        count = len(data)
        if self.clients_per_round > count:
            raise InvalidParameterError(
                "clients_per_round", self.clients_per_round, f"must be <= {count} clients"
            )
        self.sampling_rate_ = self.clients_per_round / count
        sizes = np.array([float(x.shape[0]) for x, _ in data])
        weights = (
            np.ones(count) if self.weight_cap is None else np.minimum(sizes / self.weight_cap, 1.0)
        )
        self.total_weight_ = float(weights.sum())
        self.noise_multiplier_ = self._calibrate(self.sampling_rate_)
        sigma = self.noise_multiplier_ * self.sensitivity_
        while sigma / self.sensitivity_ < self.noise_multiplier_:
            sigma = math.nextafter(sigma, math.inf)
        self.sigma_ = sigma
        self._participations = np.zeros(count, dtype=np.int64)
        self._rho_totals = [Fraction(0)] * count
        self._shares = []
        self.history_ = []
        unit = math.ldexp(1.0, -self.grid_bits_)
        with _Bar(self.rounds, "DP-FedAvg round", self.progress) as bar:
            for _ in range(self.rounds):
                chosen = np.flatnonzero(
                    bernoulli(self.sampling_rate_, size=count, source=self.source)
                )
                rows = torch.zeros((len(chosen), self.dimension_), dtype=torch.float32)
                for row, i in enumerate(chosen):
                    update = self._client_update(*data[i]).to(torch.float32)
                    norm = float(torch.linalg.vector_norm(update.to(torch.float64)))
                    factor = min(1.0, self.clip_norm / norm) if norm > 0 else 1.0
                    rows[row] = update * (factor * float(weights[i]))
                self._participations[chosen] += 1
                if self.mode == "distributed":
                    included, update = self._distributed_round(chosen, rows, unit)
                    chosen = included
                elif self.mode == "central":
                    total = clipped_grid_sum(
                        rows, clip_norm=self.clip_norm, bits=self.grid_bits_, overwrite=True
                    )
                    total += self._noise.sample(self.sigma_, self.dimension_)
                    update = total * (unit / (self.sampling_rate_ * self.total_weight_))
                else:
                    total = torch.zeros(self.dimension_, dtype=torch.float64)
                    for row in rows:  # each client noises its own update
                        mine = clipped_grid_sum(
                            row[None, :], clip_norm=self.clip_norm, bits=self.grid_bits_
                        )
                        total += mine + self._noise.sample(self.sigma_, self.dimension_)
                    update = total * (unit / max(len(chosen), 1))
                self._apply(update)
                record = RoundRecord(len(self.history_) + 1, len(chosen), 0.0)
                self.history_.append(record)
                epsilon = self.epsilon()
                self.history_[-1] = RoundRecord(record.round, record.clients, epsilon)
                bar.advance(epsilon, self.delta)
        return self

    def _distributed_round(
        self, chosen: np.ndarray[Any, Any], rows: torch.Tensor, unit: float
    ) -> tuple[np.ndarray[Any, Any], torch.Tensor]:
        """One round of distributed DP: noisy shares, masked modular sum, accounting.

        Returns the clients whose shares entered the released sum, and the update (zero and
        no clients when the round is abandoned: too few survivors).
        """
        zero = torch.zeros(self.dimension_, dtype=torch.float64)
        sampled = len(chosen)
        if sampled == 0:
            return chosen[:0], zero
        need = max(1, math.ceil((1 - Fraction(self.dropout_tolerance)) * sampled))
        share = share_sigma(self.sigma_, need)
        bits = ring_bits(
            sensitivity=self.sensitivity_, sigma=share, shares=sampled, dimension=self.dimension_
        )
        if self.simulated_dropout > 0:
            gone = bernoulli(self.simulated_dropout, size=sampled, source=self.source)
        else:
            gone = np.zeros(sampled, dtype=bool)
        survivors = chosen[~gone]
        if len(survivors) < need:
            return chosen[:0], zero  # SecAgg cannot unmask: nothing released, nothing spent
        shares = {}
        for row, i in enumerate(chosen):
            if gone[row]:  # never sent: takes part in the key exchange only
                shares[int(i)] = np.zeros(self.dimension_, dtype=np.int64)
            else:
                shares[int(i)] = noisy_share(
                    rows[row].numpy(),
                    clip_norm=self.clip_norm,
                    bits=self.grid_bits_,
                    sigma=share,
                    source=self.source,
                )
        dropped = [int(i) for i in chosen[gone]]
        if self.masking:
            total = secure_sum(shares, ring_bits=bits, dropped=dropped, round=len(self.history_))
        else:  # the same modular sum without the masks (they cancel exactly)
            total = unmask_sum([to_ring(shares[int(i)], bits) for i in survivors], [], bits=bits)
        event = ddg_event(
            sigma=share,
            sensitivity=self.sensitivity_,
            shares=len(survivors),
            dimension=self.dimension_,
        )
        rho = Fraction(event.rho)
        for i in survivors:
            self._rho_totals[int(i)] += rho
        self._shares.append((event, frozenset(int(i) for i in survivors)))
        # The fixed denominator q W of the central mode (public): the same estimator.
        scale = unit / (self.sampling_rate_ * self.total_weight_)
        update = torch.from_numpy(total.astype(np.float64)) * scale
        return survivors, update
