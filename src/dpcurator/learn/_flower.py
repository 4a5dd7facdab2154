r"""DP federated averaging as a Flower strategy (``flwr``, the ``federated`` extra).

:class:`DPFedAvgStrategy` is a Flower ``Strategy`` (the Message API of ``flwr.serverapp``,
Flower 1.20 and later) that does on the server what :class:`~dpcurator.learn._federated.
DPFedAvg` does in the simulation: Poisson sampling of the connected nodes with rate
``q = m / K`` (decisions from :func:`dpcurator.noise.bernoulli`), clipping of each returned
model update to L2 norm ``S``, rounding to the public grid and exact integer summation,
Gaussian noise from :mod:`dpcurator.noise` (exact discrete Gaussian by default), the
fixed-denominator average ``/ m`` and an accountant that reports epsilon after every round
(McMahan, Ramage, Talwar and Zhang, ICLR 2018). A user deploys it like any Flower strategy, in a
``ServerApp`` run with ``flwr run`` across machines::

    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        strategy = DPFedAvgStrategy(clip_norm=1.0, noise_multiplier=1.0, clients_per_round=50)
        strategy.start(grid=grid, initial_arrays=ArrayRecord(model.state_dict()), num_rounds=100)

Guarantee
    User-level DP against anyone who sees the global models (the server's outputs): neighbouring
    federations differ by all the data of one node; a round is the Poisson-subsampled Gaussian
    mechanism ``PoissonSampledEvent(q, GaussianEvent(sigma, Delta))`` in grid units, and the
    accountant composes the rounds. The server itself sees the clients' raw updates (the central
    model: combine with secure aggregation, or use ``DPFedAvg(mode="local")``, to trust it less).
    Nodes that fail or return malformed arrays contribute a zero update (never an error that
    depends on data). Client-side evaluation metrics (``fraction_evaluate > 0``) and the
    ``num-examples`` they report are not covered. ``K``, the number of connected nodes, is
    treated as public.

Trust models (``mode``, as in :class:`~dpcurator.learn._federated.DPFedAvg`)
    ``"central"`` (above). ``"local"``: each sampled node clips its update, rounds it to the
    grid and adds ``N_Z(0, (2 z Delta)^2)`` itself (:func:`~dpcurator.learn._distributed.
    noisy_share`) before it leaves; the server sums and averages; each node's messages compose
    (replace-one, no amplification) and the epsilon reported is the most frequent
    participant's. ``"distributed"``: a key exchange (a ``query`` message), then each node sends
    its grid update plus a discrete Gaussian *share* of the noise, modulo ``2**b`` and
    pairwise-masked; nodes that answered the key exchange but not the training message have
    their masks removed by the survivors (a second ``query``); the server unmasks only the sum
    (:mod:`dpcurator.learn._distributed`, Kairouz, Liu and Steinke 2021), and each survivor is
    charged the round's DDG ``ZCDPEvent`` (zero-out neighbours, no amplification). A node that
    drops out is charged nothing for that round and the round's noise is accounted for the
    shares actually summed; with fewer than ``ceil((1 - dropout_tolerance) n_t)`` survivors the
    round is abandoned (nothing released, nothing spent). Client handlers answer these
    messages with :func:`dp_client_reply` (:func:`torch_client` does).

Flower's own ``DifferentialPrivacyServerSideFixedClipping`` draws NumPy's floating-point normal
noise (the floating-point attack of Jin et al. 2022 applies) and accounts only without
amplification; this strategy uses the project's noise and its tightest accountant.

:class:`InProcessGrid` runs a strategy with plain in-process client handlers (no SuperLink, no
network) for tests and simulations, and :func:`torch_client` builds such a handler for a PyTorch
model and one client's data.

Examples
--------
>>> import torch
>>> from flwr.app import ArrayRecord
>>> from dpcurator.noise import InsecureSeededSource
>>> g = torch.Generator().manual_seed(0)
>>> handlers = {}
>>> for node in range(1, 21):
...     X = torch.randn(30, 2, generator=g)
...     handlers[node] = torch_client(torch.nn.Linear(2, 2), X, (X[:, 0] > 0).long(),
...                                   loss_fn=torch.nn.functional.cross_entropy, lr=0.5)
>>> strategy = DPFedAvgStrategy(clip_norm=1.0, noise_multiplier=2.0, clients_per_round=10,
...                             source=InsecureSeededSource(0))
>>> result = strategy.start(grid=InProcessGrid(handlers),
...                         initial_arrays=ArrayRecord(torch.nn.Linear(2, 2).state_dict()),
...                         num_rounds=3)
>>> len(strategy.history_), round(strategy.epsilon(), 2)
(3, 2.21)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import torch
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity
from torch import nn

from dpcurator._validation import (
    check_delta,
    check_epsilon,
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
    ZCDPEvent,
    event_rho,
    make_accountant,
)
from dpcurator.errors import BudgetExceededError, InvalidParameterError
from dpcurator.learn._distributed import (
    TRUST_MODELS,
    ddg_event,
    ddg_tau,
    ring_bits,
    share_sigma,
    unmask_sum,
)
from dpcurator.learn._dpsgd import as_tensor, check_dpsgd_accountant, check_module
from dpcurator.learn._federated import LossFn, RoundRecord, local_sgd
from dpcurator.learn._flower_client import (
    dp_client_reply,
    flat_update,
    float_arrays,
    message_config,
)
from dpcurator.learn._torch_noise import (
    NOISE_MODES,
    TensorNoise,
    clipped_grid_sum,
    grid_bits,
    grid_sensitivity,
)
from dpcurator.noise import RandomSource, bernoulli

__all__ = ["DPFedAvgStrategy", "InProcessGrid", "dp_client_reply", "flat_update", "torch_client"]

_SERVER_NODE_ID = 1
"""The node id Flower gives the server (``flwr.common.constant.SUPERLINK_NODE_ID``)."""


class DPFedAvgStrategy(FedAvg):
    """Flower strategy: user-level DP-FedAvg with server-side clipping, grid noise, accounting.

    Parameters
    ----------
    clip_norm : float
        ``S`` > 0, the L2 bound of each node's model update.
    noise_multiplier : float
        ``z = sigma / Delta`` > 0.
    clients_per_round : float
        Expected number ``m`` of nodes per round (``q = m / K``, ``K`` connected nodes); also
        the fixed denominator of the average.
    delta : float, default 1e-5
        The delta at which epsilon is reported.
    max_epsilon : float, optional
        A budget: a round that would bring epsilon above it raises
        :class:`~dpcurator.errors.BudgetExceededError` in ``configure_train``, before any node
        is sampled.
    accountant : {"pld", "rdp"}, default "pld"
    noise : {"secure", "float"}, default "secure"
    source : RandomSource, optional
        Randomness for sampling and noise (the OS CSPRNG by default).
    mode : {"central", "local", "distributed"}, default "central"
        The trust model (module docstring). Local and distributed modes need clients that
        answer with :func:`dp_client_reply`.
    dropout_tolerance : float, default 0.0
        Distributed mode: the fraction of the nodes that answered the key exchange that may
        drop out with the round still released.
    phase_timeout : float, default 120.0
        Seconds to wait for the replies of the key-exchange and unmasking messages.
    fraction_evaluate : float, default 0.0
        Flower's client-side evaluation (not covered by the guarantee).
    **kwargs
        Further ``FedAvg`` options (``arrayrecord_key``, ``configrecord_key``,
        ``weighted_by_key``, ``min_evaluate_nodes``, ...).

    Attributes
    ----------
    history_ : list of RoundRecord
        One per aggregated round, with the epsilon spent so far.
    grid_bits_, sensitivity_, sigma_
        The grid, ``Delta`` and ``sigma`` in grid units (set at the first round, from the
        model's size).
    """

    def __init__(
        self,
        *,
        clip_norm: float,
        noise_multiplier: float,
        clients_per_round: float,
        delta: float = 1e-5,
        max_epsilon: float | None = None,
        accountant: str = "pld",
        noise: str = "secure",
        source: RandomSource | None = None,
        mode: str = "central",
        dropout_tolerance: float = 0.0,
        phase_timeout: float = 120.0,
        fraction_evaluate: float = 0.0,
        **kwargs: Any,
    ) -> None:
        if fraction_evaluate == 0.0:
            kwargs.setdefault("min_evaluate_nodes", 0)
        super().__init__(fraction_evaluate=fraction_evaluate, **kwargs)
        self.clip_norm = check_positive(clip_norm, "clip_norm")
        self.noise_multiplier = check_positive(noise_multiplier, "noise_multiplier")
        self.clients_per_round = check_positive(clients_per_round, "clients_per_round")
        self.delta = check_delta(delta)
        if self.delta == 0.0:
            raise InvalidParameterError("delta", delta, "must be in (0, 1)")
        self.max_epsilon = (
            None if max_epsilon is None else check_epsilon(max_epsilon, "max_epsilon")
        )
        self.accountant = check_dpsgd_accountant(accountant)
        if noise not in NOISE_MODES:
            raise InvalidParameterError("noise", noise, f"must be one of {NOISE_MODES}")
        if mode not in TRUST_MODELS:
            raise InvalidParameterError("mode", mode, f"must be one of {TRUST_MODELS}")
        self.mode = mode
        self.dropout_tolerance = check_probability(
            dropout_tolerance, "dropout_tolerance", open_right=True
        )
        self.phase_timeout = check_positive(phase_timeout, "phase_timeout")
        self._noise = TensorNoise(noise, source=source)
        self.source = self._noise.source
        self.history_: list[RoundRecord] = []
        self._events: dict[PrivacyEvent, int] = {}
        self._ledgers: dict[int, dict[PrivacyEvent, int]] = {}
        self._pending: dict[int, tuple[ArrayRecord, PrivacyEvent]] = {}
        self._rounds: dict[int, _SecureRound] = {}
        self._grid: Grid | None = None
        self.grid_bits_: int | None = None
        self.sensitivity_ = 0.0
        self.sigma_ = 0.0

    # -- privacy --------------------------------------------------------------------------
    def epsilon(self, delta: float | None = None) -> float:
        """Epsilon spent by the aggregated rounds at ``delta`` (default: the strategy's).

        Local and distributed modes: by the node whose ledger has the largest total ``rho``.
        """
        dlt = self.delta if delta is None else check_delta(delta)
        if self.mode == "central":
            return self._epsilon_of(self._events, dlt)
        return self._epsilon_of(self._worst_ledger(), dlt)

    @property
    def privacy_event_(self) -> PrivacyEvent:
        """What has been accounted: all rounds (central) or the worst node's ledger."""
        events = self._events if self.mode == "central" else self._worst_ledger()
        return ComposedEvent(tuple(SelfComposedEvent(e, c) for e, c in events.items()))

    def node_epsilons(self, delta: float | None = None) -> dict[int, float]:
        """Local and distributed modes: epsilon spent by each node that took part."""
        dlt = self.delta if delta is None else check_delta(delta)
        return {node: self._epsilon_of(ledger, dlt) for node, ledger in self._ledgers.items()}

    def _worst_ledger(self, extra: PrivacyEvent | None = None) -> dict[PrivacyEvent, int]:
        """Return the ledger with the largest total rho (plus ``extra``, a planned event)."""
        best: dict[PrivacyEvent, int] = {}
        best_rho = -1.0
        for ledger in self._ledgers.values():
            rho = math.fsum(event_rho(e) * c for e, c in ledger.items())
            if rho > best_rho:
                best, best_rho = ledger, rho
        out = dict(best)
        if extra is not None:
            out[extra] = out.get(extra, 0) + 1
        return out

    def _accountant_name(self) -> str:
        if self.mode == "distributed":  # zCDP events: the zCDP accountant, or RDP
            return "rdp" if self.accountant == "rdp" else "zcdp"
        return self.accountant

    def _epsilon_of(self, events: Mapping[PrivacyEvent, int], delta: float) -> float:
        if not events:
            return 0.0
        acc = make_accountant(self._accountant_name())
        for event, count in events.items():
            acc.compose(event, count)
        return acc.get_epsilon(delta)

    def _prepare(self, arrays: ArrayRecord) -> int:
        """Fix the grid from the model's size (public) at the first round; returns ``d``."""
        dimension = sum(int(a.size) for a in float_arrays(arrays).values())
        if dimension == 0:
            raise InvalidParameterError("arrays", "<ArrayRecord>", "must hold float arrays")
        if self.grid_bits_ is None:
            self.grid_bits_ = grid_bits(self.clip_norm, dimension)
            self.sensitivity_ = grid_sensitivity(self.clip_norm, dimension, self.grid_bits_)
            if self.mode == "local":  # replace-one: two clipped updates differ by 2 Delta
                self.sensitivity_ *= 2.0
            sigma = self.noise_multiplier * self.sensitivity_
            while sigma / self.sensitivity_ < self.noise_multiplier:
                sigma = math.nextafter(sigma, math.inf)
            self.sigma_ = sigma
            self._dimension = dimension
        elif dimension != self._dimension:
            raise InvalidParameterError(
                "arrays", dimension, f"must keep the model size {self._dimension}"
            )
        return dimension

    # -- Flower's Strategy interface ------------------------------------------------------
    def summary(self) -> None:
        """Log the configuration (Flower calls this at start)."""
        super().summary()

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """Poisson-sample the nodes and send them the global model (nothing private yet)."""
        self._prepare(arrays)
        nodes = sorted(int(n) for n in grid.get_node_ids())
        if not nodes or self.clients_per_round > len(nodes):
            raise InvalidParameterError(
                "clients_per_round",
                self.clients_per_round,
                f"must be <= the {len(nodes)} connected nodes",
            )
        rate = self.clients_per_round / len(nodes)
        if self.mode != "central":
            return self._configure_private_clients(
                server_round, arrays, config, grid, nodes=nodes, rate=rate
            )
        event = PoissonSampledEvent(
            rate, GaussianEvent(sigma=self.sigma_, sensitivity=self.sensitivity_)
        )
        if self.max_epsilon is not None:
            planned = dict(self._events)
            planned[event] = planned.get(event, 0) + 1
            spent = self._epsilon_of(planned, self.delta)
            if spent > self.max_epsilon:
                raise BudgetExceededError(
                    f"round {server_round} would bring epsilon to {spent:.4g} > max_epsilon = "
                    f"{self.max_epsilon:.4g} at delta = {self.delta:g}; nothing was spent.",
                    remaining=self.max_epsilon - self.epsilon(),
                    requested=spent,
                )
        chosen = np.flatnonzero(bernoulli(rate, size=len(nodes), source=self.source))
        self._pending[server_round] = (arrays, event)
        config["server-round"] = server_round
        record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
        return self._construct_messages(record, [nodes[i] for i in chosen], MessageType.TRAIN)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Clip each update, sum on the grid, add noise, average over ``m``; account the round.

        Always returns a new (noisy) model, also when no node was sampled or none answered.
        Local and distributed modes: sum the nodes' noisy (or masked) shares instead; an
        abandoned distributed round returns no model (the global model stays).
        """
        if self.mode != "central":
            return self._aggregate_private_clients(server_round, replies)
        if server_round not in self._pending:
            raise InvalidParameterError("server_round", server_round, "was not configured")
        arrays, event = self._pending.pop(server_round)
        current = float_arrays(arrays)
        start = np.concatenate([a.reshape(-1) for a in current.values()]).astype(np.float64)
        rows: list[torch.Tensor] = []
        for reply in replies:
            update = _update_of(reply, self.arrayrecord_key, current)
            if update is not None:
                rows.append(torch.from_numpy(update - start).to(torch.float32))
        assert self.grid_bits_ is not None
        total = torch.zeros(start.size, dtype=torch.float64)
        if rows:
            total += clipped_grid_sum(
                torch.stack(rows), clip_norm=self.clip_norm, bits=self.grid_bits_, overwrite=True
            )
        total += self._noise.sample(self.sigma_, start.size)
        step = total.numpy() * (math.ldexp(1.0, -self.grid_bits_) / self.clients_per_round)
        new_arrays = _withfloat_arrays(arrays, current, start + step)
        self._events[event] = self._events.get(event, 0) + 1
        epsilon = self.epsilon()
        self.history_.append(RoundRecord(server_round, len(rows), epsilon))
        metrics = MetricRecord({"epsilon": epsilon, "delta": self.delta, "clients": len(rows)})
        return new_arrays, metrics

    # -- local and distributed modes ------------------------------------------------------
    def _check_budget(self, event: PrivacyEvent, server_round: int) -> None:
        if self.max_epsilon is None:
            return
        spent = self._epsilon_of(self._worst_ledger(event), self.delta)
        if spent > self.max_epsilon:
            raise BudgetExceededError(
                f"round {server_round} could bring a node's epsilon to {spent:.4g} > "
                f"max_epsilon = {self.max_epsilon:.4g} at delta = {self.delta:g}; nothing was "
                "spent.",
                remaining=self.max_epsilon - self.epsilon(),
                requested=spent,
            )

    def _configure_private_clients(
        self,
        server_round: int,
        arrays: ArrayRecord,
        config: ConfigRecord,
        grid: Grid,
        *,
        nodes: list[int],
        rate: float,
    ) -> list[Message]:
        assert self.grid_bits_ is not None
        self._grid = grid  # the unmasking phase of aggregate_train talks to the same nodes
        if self.mode == "local":
            event: PrivacyEvent = GaussianEvent(sigma=self.sigma_, sensitivity=self.sensitivity_)
            self._check_budget(event, server_round)
        chosen = [
            nodes[i] for i in np.flatnonzero(bernoulli(rate, size=len(nodes), source=self.source))
        ]
        settings: dict[str, Any] = {
            "server-round": server_round,
            "dp-mode": self.mode,
            "dp-clip-norm": self.clip_norm,
            "dp-grid-bits": self.grid_bits_,
        }
        if self.mode == "local":
            self._rounds[server_round] = _SecureRound(
                arrays, nodes=chosen, keys={}, need=0, share=0.0, bits=0
            )
            settings["dp-sigma"] = self.sigma_
            return self._messages(arrays, config, settings, chosen)
        # Distributed: the key exchange first (public keys only; nothing private yet).
        stage = {"secagg-stage": "keys", "secagg-round": server_round}
        keys: dict[int, bytes] = {}
        for reply in self._exchange(grid, chosen, stage):
            key = _reply_config(reply).get("secagg-public-key")
            if isinstance(key, bytes) and len(key) == 32:
                keys[int(reply.metadata.src_node_id)] = key
        holders = sorted(keys)
        sampled = len(holders)
        need = max(1, math.ceil((1 - Fraction(self.dropout_tolerance)) * sampled))
        if sampled == 0:
            self._rounds[server_round] = _SecureRound(
                arrays, nodes=[], keys={}, need=0, share=0.0, bits=0
            )
            return []
        share = share_sigma(self.sigma_, need)
        bits = ring_bits(
            sensitivity=self.sensitivity_, sigma=share, shares=sampled, dimension=self._dimension
        )
        # The worst round for a survivor: `need` shares (and tau for all of them).
        root = self.sensitivity_ / (math.sqrt(need) * share) + ddg_tau(share, sampled) * math.sqrt(
            self._dimension
        )
        self._check_budget(ZCDPEvent(math.nextafter(0.5 * root * root, math.inf)), server_round)
        self._rounds[server_round] = _SecureRound(
            arrays, nodes=holders, keys=keys, need=need, share=share, bits=bits
        )
        settings.update(
            {
                "dp-sigma": share,
                "secagg-round": server_round,
                "secagg-ring-bits": bits,
                "secagg-peer-keys": [keys[node] for node in holders],
            }
        )
        return [
            message
            for index, node in enumerate(holders)
            for message in self._messages(
                arrays, config, {**settings, "secagg-index": index}, [node]
            )
        ]

    def _messages(
        self,
        arrays: ArrayRecord,
        config: ConfigRecord,
        settings: Mapping[str, Any],
        nodes: list[int],
    ) -> list[Message]:
        record = ConfigRecord(dict(config))
        for key, value in settings.items():
            record[key] = value
        content = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: record})
        return list(self._construct_messages(content, nodes, MessageType.TRAIN))

    def _exchange(
        self, grid: Grid, nodes: Iterable[int], settings: Mapping[str, Any]
    ) -> list[Message]:
        """Send a ``query`` with ``settings`` to ``nodes``; return the replies without errors."""
        targets = list(nodes)
        if not targets:
            return []
        record = RecordDict({self.configrecord_key: ConfigRecord(dict(settings))})
        messages = self._construct_messages(record, targets, MessageType.QUERY)
        replies = grid.send_and_receive(messages, timeout=self.phase_timeout)
        return [reply for reply in replies if not reply.has_error()]

    def _aggregate_private_clients(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        if server_round not in self._rounds:
            raise InvalidParameterError("server_round", server_round, "was not configured")
        assert self.grid_bits_ is not None
        state = self._rounds.pop(server_round)
        current = float_arrays(state.arrays)
        start = np.concatenate([a.reshape(-1) for a in current.values()]).astype(np.float64)
        name = "dp-share" if self.mode == "local" else "dp-masked"
        vectors: dict[int, np.ndarray[Any, Any]] = {}
        for reply in replies:
            node = int(reply.metadata.src_node_id)
            vector = _vector_of(reply, name, start.size)
            if vector is not None and node in state.nodes and node not in vectors:
                vectors[node] = vector
        if self.mode == "local":
            total = np.zeros(start.size, dtype=np.float64)
            event: PrivacyEvent = GaussianEvent(sigma=self.sigma_, sensitivity=self.sensitivity_)
            for vector in vectors.values():
                total += vector.astype(np.float64)
            included = sorted(vectors)
            count = max(len(included), 1)
        else:
            outcome = self._unmask(server_round, state, vectors, start.size)
            if outcome is None:  # too few survivors: abandoned, nothing released or spent
                self.history_.append(RoundRecord(server_round, 0, self.epsilon()))
                return None, MetricRecord({"epsilon": self.epsilon(), "clients": 0})
            included, summed = outcome
            total = summed.astype(np.float64)
            count = len(included)
            event = ddg_event(
                sigma=state.share,
                sensitivity=self.sensitivity_,
                shares=count,
                dimension=start.size,
            )
        for node in included:
            ledger = self._ledgers.setdefault(node, {})
            ledger[event] = ledger.get(event, 0) + 1
        step = total * (math.ldexp(1.0, -self.grid_bits_) / count)
        new_arrays = _withfloat_arrays(state.arrays, current, start + step)
        epsilon = self.epsilon()
        self.history_.append(RoundRecord(server_round, len(included), epsilon))
        metrics = MetricRecord({"epsilon": epsilon, "delta": self.delta, "clients": len(included)})
        return new_arrays, metrics

    def _unmask(
        self,
        server_round: int,
        state: _SecureRound,
        vectors: Mapping[int, np.ndarray[Any, Any]],
        dimension: int,
    ) -> tuple[list[int], np.ndarray[Any, Any]] | None:
        survivors = sorted(vectors)
        if len(survivors) < max(state.need, 1):
            return None
        dropped = [node for node in state.nodes if node not in vectors]
        fixes: list[np.ndarray[Any, Any]] = []
        if dropped:
            index = {node: i for i, node in enumerate(state.nodes)}
            stage = {
                "secagg-stage": "unmask",
                "secagg-round": server_round,
                "secagg-ring-bits": state.bits,
                "secagg-dimension": dimension,
                "secagg-dropped-index": [index[node] for node in dropped],
                "secagg-dropped-keys": [state.keys[node] for node in dropped],
                "secagg-peer-keys": [state.keys[node] for node in state.nodes],
            }
            answers: dict[int, np.ndarray[Any, Any]] = {}
            assert self._grid is not None
            for reply in self._exchange(self._grid, survivors, stage):
                fix = _vector_of(reply, "secagg-correction", dimension)
                if fix is not None:
                    answers[int(reply.metadata.src_node_id)] = fix
            if set(answers) != set(survivors):  # a survivor vanished: cannot unmask
                return None
            fixes = [answers[node] for node in survivors]
        total = unmask_sum([vectors[node] for node in survivors], fixes, bits=state.bits)
        return survivors, total


class _SecureRound:
    """What the server keeps between configuring and aggregating a local/distributed round."""

    __slots__ = ("arrays", "bits", "keys", "need", "nodes", "share")

    def __init__(
        self,
        arrays: ArrayRecord,
        *,
        nodes: list[int],
        keys: dict[int, bytes],
        need: int,
        share: float,
        bits: int,
    ) -> None:
        self.arrays = arrays
        self.nodes = nodes
        self.keys = keys
        self.need = need
        self.share = share
        self.bits = bits


def _reply_config(reply: Message) -> ConfigRecord:
    records = reply.content.config_records
    return next(iter(records.values())) if records else ConfigRecord()


def _vector_of(reply: Message, name: str, size: int) -> np.ndarray[Any, Any] | None:
    """Return the integer vector ``name`` of a reply (None if it failed or is malformed)."""
    if reply.has_error():
        return None
    for record in reply.content.array_records.values():
        if name in record:
            array = record[name].numpy()
            if array.shape == (size,) and np.issubdtype(array.dtype, np.integer):
                return array
    return None


def _update_of(
    reply: Message, key: str, current: Mapping[str, np.ndarray[Any, Any]]
) -> np.ndarray[Any, Any] | None:
    """Return the reply's float arrays flattened (None if it failed or does not fit the model)."""
    if reply.has_error() or key not in reply.content.array_records:
        return None
    record = reply.content.array_records[key]
    parts = []
    for name, value in current.items():
        if name not in record:
            return None
        array = record[name].numpy()
        if array.shape != value.shape or not np.issubdtype(array.dtype, np.floating):
            return None
        parts.append(array.reshape(-1))
    return np.concatenate(parts).astype(np.float64) if parts else None


def _withfloat_arrays(
    arrays: ArrayRecord, current: Mapping[str, np.ndarray[Any, Any]], flat: np.ndarray[Any, Any]
) -> ArrayRecord:
    new: dict[str, Array] = {}
    offset = 0
    for key, old in current.items():
        new[key] = Array(flat[offset : offset + old.size].reshape(old.shape).astype(old.dtype))
        offset += old.size
    return ArrayRecord({key: new.get(key, arrays[key]) for key in arrays})


class InProcessGrid(Grid):
    """A Flower ``Grid`` that delivers messages to in-process handlers (no network).

    Each handler receives a message and returns its reply (``Message(content, reply_to=msg)``),
    as a ``ClientApp`` would. For tests and single-machine simulations; deployments use
    ``flwr run``. Creating messages outside a Flower runtime needs a task identity, which this
    grid sets (as Flower's own legacy in-process entry point does).

    Parameters
    ----------
    handlers : mapping of int to callable
        Node id -> ``handler(message) -> reply``.
    run_id : int, default 1

    Examples
    --------
    >>> grid = InProcessGrid({7: lambda message: message})
    >>> list(grid.get_node_ids())
    [7]
    """

    def __init__(
        self, handlers: Mapping[int, Callable[[Message], Message]], *, run_id: int = 1
    ) -> None:
        if not handlers:
            raise InvalidParameterError("handlers", handlers, "must name at least one node")
        self._handlers = {check_integer(k, "handlers key"): v for k, v in handlers.items()}
        self._run = Run.create_empty(run_id=check_integer(run_id, "run_id"))
        self._outbox: dict[str, Message] = {}
        TaskIdentity.task_id = 1
        TaskIdentity.run_id = self._run.run_id
        TaskIdentity.node_id = _SERVER_NODE_ID

    def set_run(self, run: Run) -> None:
        """Set the run."""
        self._run = run

    @property
    def run(self) -> Run:
        """The run."""
        return self._run

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        """Create a message to ``dst_node_id``."""
        return Message(
            content=content,
            message_type=message_type,
            dst_node_id=dst_node_id,
            group_id=group_id,
            ttl=ttl,
        )

    def get_node_ids(self) -> Iterable[int]:
        """Return the node ids of the handlers."""
        return list(self._handlers)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Queue messages; returns their ids."""
        ids = []
        for i, message in enumerate(messages):
            key = f"{len(self._outbox)}-{i}"
            self._outbox[key] = message
            ids.append(key)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Deliver the queued messages and return the replies."""
        return [self._deliver(self._outbox.pop(key)) for key in message_ids]

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        """Deliver each message to its handler and return the replies."""
        return [self._deliver(message) for message in messages]

    def _deliver(self, message: Message) -> Message:
        handler = self._handlers.get(int(message.metadata.dst_node_id))
        if handler is None:
            raise InvalidParameterError("dst_node_id", message.metadata.dst_node_id, "is unknown")
        return handler(message)


def torch_client(
    model: nn.Module,
    features: Any,
    targets: Any,
    *,
    loss_fn: LossFn,
    epochs: int = 1,
    batch_size: int = 32,
    lr: float = 0.1,
    arrayrecord_key: str = "arrays",
    source: RandomSource | None = None,
) -> Callable[[Message], Message]:
    """Build a client handler: local SGD on its own data from the received model (ClientUpdate).

    On a ``train`` message it loads the received arrays into (a copy of) ``model``, runs
    :func:`~dpcurator.learn._federated.local_sgd` and replies with the trained arrays and
    ``{"num-examples": n}`` (central mode) or its noisy or masked share (local and distributed
    modes, through :func:`dp_client_reply`, which also answers the secure-aggregation
    ``query`` messages); on ``evaluate`` it replies with the mean loss (not private).

    Examples
    --------
    >>> import torch
    >>> handler = torch_client(torch.nn.Linear(2, 1), torch.zeros(4, 2), torch.zeros(4, 1),
    ...                        loss_fn=torch.nn.functional.mse_loss)
    >>> callable(handler)
    True
    """
    local = copy.deepcopy(check_module(model))
    x = as_tensor(features, "features")
    y = as_tensor(targets, "targets")
    n = int(x.shape[0])

    keys: dict[str, Any] = {}

    def handle(message: Message) -> Message:
        if message.metadata.message_type == MessageType.QUERY:
            return dp_client_reply(message, keys=keys, source=source)
        received = message.content.array_records[arrayrecord_key]
        local.load_state_dict(received.to_torch_state_dict())
        if message.metadata.message_type == MessageType.EVALUATE:
            with torch.no_grad():
                loss = float(loss_fn(local(x), y))
            content = RecordDict({"metrics": MetricRecord({"loss": loss, "num-examples": n})})
            return Message(content, reply_to=message)
        local_sgd(
            local, x, y, loss_fn=loss_fn, epochs=epochs, batch_size=batch_size, lr=lr, source=source
        )
        if message_config(message).get("dp-mode") in ("local", "distributed"):
            return dp_client_reply(
                message,
                ArrayRecord(local.state_dict()),
                keys=keys,
                source=source,
                arrayrecord_key=arrayrecord_key,
                num_examples=n,
            )
        content = RecordDict(
            {
                arrayrecord_key: ArrayRecord(local.state_dict()),
                "metrics": MetricRecord({"num-examples": n}),
            }
        )
        return Message(content, reply_to=message)

    return handle
