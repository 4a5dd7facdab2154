"""The client side of :class:`~dpcurator.learn._flower.DPFedAvgStrategy`'s private modes.

What a Flower client runs in the local and distributed trust models (and nothing that needs
PyTorch, so that deployed ``ClientApp`` processes start quickly): :func:`dp_client_reply`
answers the strategy's key-exchange, training and unmasking messages, :func:`flat_update`
flattens a model update in the order the server uses. The mechanisms and their guarantees are
in :mod:`dpcurator.learn._distributed` (noise shares, masking) and
:mod:`dpcurator.learn._flower` (the server, the accounting).

Examples
--------
>>> import numpy as np
>>> from flwr.app import Array, ArrayRecord
>>> flat_update(ArrayRecord({"w": Array(np.zeros(2))}), ArrayRecord({"w": Array(np.ones(2))}))
array([1., 1.])
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import numpy as np
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)

from dpcurator.errors import InvalidParameterError
from dpcurator.learn._distributed import MaskingKey, noisy_share
from dpcurator.noise import RandomSource

__all__ = ["config_number", "dp_client_reply", "flat_update", "float_arrays", "message_config"]


def float_arrays(arrays: ArrayRecord) -> dict[str, np.ndarray[Any, Any]]:
    """Return the float arrays by sorted name (the order of the flat vectors, both sides)."""
    out: dict[str, np.ndarray[Any, Any]] = {}
    for key in sorted(arrays):
        value = arrays[key].numpy()
        if np.issubdtype(value.dtype, np.floating):
            out[key] = value
    return out


def message_config(message: Message) -> ConfigRecord:
    """Return the first ConfigRecord of a message (empty if none)."""
    records = message.content.config_records
    return next(iter(records.values())) if records else ConfigRecord()


def flat_update(received: ArrayRecord, trained: ArrayRecord) -> np.ndarray[Any, Any]:
    """Return the update ``trained - received`` over the float arrays, flattened by name.

    The order (float arrays sorted by name) is the one :class:`DPFedAvgStrategy` uses.

    Examples
    --------
    >>> import numpy as np
    >>> from flwr.app import Array, ArrayRecord
    >>> a = ArrayRecord({"w": Array(np.zeros(2)), "b": Array(np.ones(1))})
    >>> b = ArrayRecord({"w": Array(np.ones(2)), "b": Array(np.ones(1))})
    >>> flat_update(a, b).tolist()  # "b" first
    [0.0, 1.0, 1.0]
    """
    before = float_arrays(received)
    after = float_arrays(trained)
    if list(before) != list(after) or any(before[k].shape != after[k].shape for k in before):
        raise InvalidParameterError("trained", "<ArrayRecord>", "must match the received arrays")
    if not before:
        raise InvalidParameterError("received", "<ArrayRecord>", "must hold float arrays")
    return np.concatenate(
        [(after[k].astype(np.float64) - before[k].astype(np.float64)).reshape(-1) for k in before]
    )


def dp_client_reply(
    message: Message,
    trained: ArrayRecord | None = None,
    *,
    keys: MutableMapping[str, Any],
    source: RandomSource | None = None,
    arrayrecord_key: str = "arrays",
    num_examples: int = 1,
) -> Message:
    """Answer :class:`DPFedAvgStrategy` as a client in the local and distributed modes.

    * ``query`` with ``secagg-stage = "keys"``: make a :class:`~dpcurator.learn._distributed.
      MaskingKey` for the round, keep its private half in ``keys`` and reply with the public
      half.
    * ``train`` (after local training, ``trained`` the new arrays): clip the update, round it
      to the grid and add discrete Gaussian noise of the ``dp-sigma`` the server sent
      (:func:`~dpcurator.learn._distributed.noisy_share`); local mode replies with that noisy
      vector, distributed mode with it reduced modulo ``2**b`` and masked against the peers'
      keys. The clean update never leaves the client.
    * ``query`` with ``secagg-stage = "unmask"``: reply with the masks shared with the peers
      that dropped out (to be removed from the sum).

    ``keys`` is the client's state between these messages (a dict in process, the
    ``Context.state`` ``ConfigRecord`` of a deployed ``ClientApp``).

    Examples
    --------
    >>> callable(dp_client_reply)
    True
    """
    config = message_config(message)
    round_ = config_number(config, "secagg-round") if "secagg-round" in config else 0
    slot = f"secagg-key-{round_}"
    if message.metadata.message_type == MessageType.QUERY:
        stage = config.get("secagg-stage")
        if stage == "keys":
            for old in [k for k in keys if k.startswith("secagg-key-") and k != slot]:
                del keys[old]  # older rounds' keys are no longer needed
            key = MaskingKey()
            keys[slot] = key.private_bytes
            content = RecordDict({"config": ConfigRecord({"secagg-public-key": key.public_bytes})})
            return Message(content, reply_to=message)
        if stage == "unmask":
            key = MaskingKey(_stored_key(keys, slot))
            dropped = dict(
                zip(
                    [int(i) for i in _list(config, "secagg-dropped-index", int)],
                    _list(config, "secagg-dropped-keys", bytes),
                    strict=True,
                )
            )
            fix = key.correction(
                own=_own_index(key, config),
                dropped=dropped,
                round=round_,
                dimension=config_number(config, "secagg-dimension"),
                bits=config_number(config, "secagg-ring-bits"),
            )
            content = RecordDict({"arrays": ArrayRecord({"secagg-correction": Array(fix)})})
            return Message(content, reply_to=message)
        raise InvalidParameterError("secagg-stage", stage, "must be 'keys' or 'unmask'")
    if trained is None:
        raise InvalidParameterError("trained", None, "must be the trained arrays")
    received = message.content.array_records[arrayrecord_key]
    share = noisy_share(
        flat_update(received, trained),
        clip_norm=config_number(config, "dp-clip-norm", float),
        bits=config_number(config, "dp-grid-bits"),
        sigma=config_number(config, "dp-sigma", float),
        source=source,
    )
    metrics = MetricRecord({"num-examples": num_examples})
    if config.get("dp-mode") == "local":
        arrays = ArrayRecord({"dp-share": Array(share)})
    else:
        key = MaskingKey(_stored_key(keys, slot))
        peers = dict(enumerate(_list(config, "secagg-peer-keys", bytes)))
        masked = key.mask(
            share,
            own=config_number(config, "secagg-index"),
            peers=peers,
            round=round_,
            bits=config_number(config, "secagg-ring-bits"),
        )
        arrays = ArrayRecord({"dp-masked": Array(masked)})
    return Message(RecordDict({"arrays": arrays, "metrics": metrics}), reply_to=message)


def config_number(config: ConfigRecord, name: str, kind: type[Any] = int) -> Any:
    """Return ``kind(config[name])`` for a number the server sent (else a DPError).

    Examples
    --------
    >>> from flwr.app import ConfigRecord
    >>> config_number(ConfigRecord({"bits": 12}), "bits")
    12
    """
    value = config.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(name, value, "must be a number in the server's config")
    return kind(value)


def _list(config: ConfigRecord, name: str, kind: type[Any]) -> list[Any]:
    value = config.get(name)
    if not isinstance(value, list) or not all(isinstance(v, kind) for v in value):
        raise InvalidParameterError(name, "<value>", f"must be a list of {kind.__name__}")
    return list(value)


def _stored_key(keys: Mapping[str, Any], slot: str) -> bytes:
    value = keys.get(slot)
    if not isinstance(value, bytes):
        raise InvalidParameterError(slot, "<missing>", "must be kept from the key exchange")
    return value


def _own_index(key: MaskingKey, config: ConfigRecord) -> int:
    mine = key.public_bytes
    for index, peer in enumerate(_list(config, "secagg-peer-keys", bytes)):
        if peer == mine:
            return index
    raise InvalidParameterError("secagg-peer-keys", "<keys>", "must include this client's key")
