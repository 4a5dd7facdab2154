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

from dpcurator._validation import check_delta, check_epsilon, check_integer, check_positive
from dpcurator.accounting import GaussianEvent, PoissonSampledEvent, PrivacyEvent, make_accountant
from dpcurator.errors import BudgetExceededError, InvalidParameterError
from dpcurator.learn._dpsgd import as_tensor, check_dpsgd_accountant, check_module
from dpcurator.learn._federated import LossFn, RoundRecord, local_sgd
from dpcurator.learn._torch_noise import (
    NOISE_MODES,
    TensorNoise,
    clipped_grid_sum,
    grid_bits,
    grid_sensitivity,
)
from dpcurator.noise import RandomSource, bernoulli

__all__ = ["DPFedAvgStrategy", "InProcessGrid", "torch_client"]

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
        self._noise = TensorNoise(noise, source=source)
        self.source = self._noise.source
        self.history_: list[RoundRecord] = []
        self._events: dict[PrivacyEvent, int] = {}
        self._pending: dict[int, tuple[ArrayRecord, PrivacyEvent]] = {}
        self.grid_bits_: int | None = None
        self.sensitivity_ = 0.0
        self.sigma_ = 0.0

    # -- privacy --------------------------------------------------------------------------
    def epsilon(self, delta: float | None = None) -> float:
        """Epsilon spent by the aggregated rounds at ``delta`` (default: the strategy's)."""
        return self._epsilon_of(self._events, self.delta if delta is None else check_delta(delta))

    def _epsilon_of(self, events: Mapping[PrivacyEvent, int], delta: float) -> float:
        if not events:
            return 0.0
        acc = make_accountant(self.accountant)
        for event, count in events.items():
            acc.compose(event, count)
        return acc.get_epsilon(delta)

    def _prepare(self, arrays: ArrayRecord) -> int:
        """Fix the grid from the model's size (public) at the first round; returns ``d``."""
        dimension = sum(int(a.size) for a in _float_arrays(arrays).values())
        if dimension == 0:
            raise InvalidParameterError("arrays", "<ArrayRecord>", "must hold float arrays")
        if self.grid_bits_ is None:
            self.grid_bits_ = grid_bits(self.clip_norm, dimension)
            self.sensitivity_ = grid_sensitivity(self.clip_norm, dimension, self.grid_bits_)
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
        """
        if server_round not in self._pending:
            raise InvalidParameterError("server_round", server_round, "was not configured")
        arrays, event = self._pending.pop(server_round)
        current = _float_arrays(arrays)
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
        new_arrays = _with_float_arrays(arrays, current, start + step)
        self._events[event] = self._events.get(event, 0) + 1
        epsilon = self.epsilon()
        self.history_.append(RoundRecord(server_round, len(rows), epsilon))
        metrics = MetricRecord({"epsilon": epsilon, "delta": self.delta, "clients": len(rows)})
        return new_arrays, metrics


def _float_arrays(arrays: ArrayRecord) -> dict[str, np.ndarray[Any, Any]]:
    out: dict[str, np.ndarray[Any, Any]] = {}
    for key in arrays:
        value = arrays[key].numpy()
        if np.issubdtype(value.dtype, np.floating):
            out[key] = value
    return out


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


def _with_float_arrays(
    arrays: ArrayRecord, current: Mapping[str, np.ndarray[Any, Any]], flat: np.ndarray[Any, Any]
) -> ArrayRecord:
    out: dict[str, Array] = {}
    offset = 0
    for key in arrays:
        if key in current:
            old = current[key]
            new = flat[offset : offset + old.size].reshape(old.shape).astype(old.dtype)
            out[key] = Array(new)
            offset += old.size
        else:
            out[key] = arrays[key]
    return ArrayRecord(out)


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
    ``{"num-examples": n}``; on ``evaluate`` it replies with the mean loss (not private).

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

    def handle(message: Message) -> Message:
        state = message.content.array_records[arrayrecord_key].to_torch_state_dict()
        local.load_state_dict(state)
        if message.metadata.message_type == MessageType.EVALUATE:
            with torch.no_grad():
                loss = float(loss_fn(local(x), y))
            content = RecordDict({"metrics": MetricRecord({"loss": loss, "num-examples": n})})
            return Message(content, reply_to=message)
        local_sgd(
            local, x, y, loss_fn=loss_fn, epochs=epochs, batch_size=batch_size, lr=lr, source=source
        )
        content = RecordDict(
            {
                arrayrecord_key: ArrayRecord(local.state_dict()),
                "metrics": MetricRecord({"num-examples": n}),
            }
        )
        return Message(content, reply_to=message)

    return handle
