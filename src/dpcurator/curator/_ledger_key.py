"""The ledger's tamper evidence: a chain of MACs under the steward's key, and an anchor.

The analyst is the adversary, and a budget that starts afresh when its file is edited, cut
short, swapped or deleted protects nobody. A :class:`~dpcurator.curator.Ledger` given the
steward's **key file** (a session opened from a TOML declaration always uses the one the
declaration names) is tamper-evident:

* **A chain of MACs.** Every entry carries ``mac``, an HMAC-SHA256 under the steward's secret of
  the previous entry's MAC and of all the entry's fields, its id included; the first entry chains
  from the header's MAC (a random ledger id, the budget, the accountant ...). Editing a field,
  deleting or reordering entries, or copying entries from another ledger breaks the chain.
* **An anchor.** The key file holds the secret and an *anchor*: the ledger's id and the id and
  MAC of its last entry, rewritten atomically (temporary file, ``fsync``, rename) after every
  record, under SQLite's write lock so that writers never move it backwards. A ledger shorter than
  its anchor (entries cut off its end, its ``-wal`` file removed, an older copy put back), another
  ledger in its place, or a missing ledger whose key file records one is detected.
* **On open**, the whole chain is verified against the key and compared with the anchor; any
  mismatch raises :class:`~dpcurator.errors.InvalidParameterError` saying that the ledger was
  altered and what the steward can do. Later reads verify only the entries they have not seen.
  A ledger *ahead* of its anchor is accepted, and the anchor brought forward: that is what a crash
  between committing an entry and rewriting the key file leaves, entries cannot be forged without
  the secret, and extra entries only spend budget.

What this does not do: it holds against whoever can write the ledger but can neither read nor
write the key file. Whoever reads the key can forge entries, and whoever can write it can roll
both files back, so the key file belongs to the steward (it is created with mode ``0600``), and
in a deployment the curator runs as the steward with the analysts outside (a service), not in
their shell. Without a key (``key=None``: ledgers built in Python by the steward, simulations)
the entries carry an unkeyed SHA-256 chain, which catches accidental edits only, and there is no
anchor. A ``":memory:"`` ledger keeps nothing and ignores any key.

The key file is JSON: ``{"format": "dpcurator ledger key", "version": 1, "secret": <64 hex
digits>, "anchor": null or {"ledger_id", "last_id", "entries", "mac"}}``; its secret comes from
:func:`dpcurator.noise.secret_bytes` (the kernel CSPRNG). One key file serves one ledger.

Examples
--------
>>> chain = Chain(bytes(32))
>>> header = chain.header({"ledger_id": "ab", "budget_epsilon": "1.0"})
>>> first = chain.entry(header, [1, "SELECT COUNT(*) FROM t", 0.25])
>>> first == chain.entry(header, [1, "SELECT COUNT(*) FROM t", 0.125])
False
>>> Chain(None).kind, chain.kind
('sha256', 'hmac-sha256')
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dpcurator.errors import InvalidParameterError
from dpcurator.noise import secret_bytes

__all__ = [
    "KEYED",
    "UNKEYED",
    "Anchor",
    "Chain",
    "KeyFile",
    "altered",
    "canonical",
    "default_key_path",
    "missing",
    "same_mac",
]

KEYED = "hmac-sha256"
"""The chain kind of a ledger with a key."""
UNKEYED = "sha256"
"""The chain kind of a ledger without a key (catches accidental edits only)."""
_KEY_FORMAT = "dpcurator ledger key"
_SECRET_BYTES = 32


def default_key_path(ledger: str | os.PathLike[str]) -> str:
    """Return the conventional key file of a ledger: its name with ``.key`` for the suffix.

    ``people.ledger.sqlite`` has ``people.ledger.key`` (what a TOML declaration uses unless its
    ``[ledger]`` section names another); :meth:`Ledger.open` looks there when given no key.

    Examples
    --------
    >>> default_key_path("/srv/people.ledger.sqlite")
    '/srv/people.ledger.key'
    """
    return str(Path(ledger).with_suffix(".key"))


def canonical(values: object) -> bytes:
    """One byte string per value: JSON with floats as exact hex and sorted keys."""

    def plain(value: object) -> object:
        if isinstance(value, float):
            return {"float": value.hex()}
        if value is None or isinstance(value, str | int):
            return value
        if isinstance(value, Mapping):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return {"other": repr(value)}  # what SQLite returns only for a tampered cell

    return json.dumps(plain(values), sort_keys=True, separators=(",", ":")).encode("ascii")


def same_mac(expected: str, stored: object) -> bool:
    """Compare a MAC in constant time (``stored`` may be anything a tampered cell holds)."""
    if not isinstance(stored, str):
        return False
    return hmac.compare_digest(expected.encode(), stored.encode("utf-8", "surrogatepass"))


class Chain:
    """MACs of the header and the entries: HMAC-SHA256 with a secret, else plain SHA-256."""

    def __init__(self, secret: bytes | None) -> None:
        self._secret = secret

    @property
    def kind(self) -> str:
        return UNKEYED if self._secret is None else KEYED

    def _digest(self, *parts: bytes) -> str:
        message = b"".join(len(p).to_bytes(8, "big") + p for p in parts)
        if self._secret is None:
            return hashlib.sha256(b"dpcurator ledger chain\x00" + message).hexdigest()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def header(self, metadata: Mapping[str, object]) -> str:
        return self._digest(b"header", canonical(dict(metadata)))

    def entry(self, previous: str, values: Sequence[object]) -> str:
        return self._digest(b"entry", previous.encode("ascii"), canonical(list(values)))


# -- the key file ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where the ledger ended when last recorded: its id, last entry's id and MAC, its size."""

    ledger_id: str
    last_id: int
    entries: int
    mac: str


def _fsync_directory(folder: str) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class KeyFile:
    """The steward's key file: the chain's secret and the ledger's anchor (JSON, mode 0600)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._secret: bytes | None = None

    def _bad(self, why: str) -> InvalidParameterError:
        return InvalidParameterError(
            "key", self.path, f"must be a dpcurator ledger key file ({why})"
        )

    def read(self) -> tuple[bytes, Anchor | None]:
        """Return the secret and the anchor; FileNotFoundError if there is no key file."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise self._bad(str(exc)) from None
        if not isinstance(data, dict) or data.get("format") != _KEY_FORMAT:
            raise self._bad(f"no 'format': {_KEY_FORMAT!r}")
        try:
            secret = bytes.fromhex(data["secret"])
            raw = data["anchor"]
            anchor = (
                None
                if raw is None
                else Anchor(
                    str(raw["ledger_id"]), int(raw["last_id"]), int(raw["entries"]), str(raw["mac"])
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise self._bad(f"malformed {exc}") from None
        if len(secret) < _SECRET_BYTES:
            raise self._bad(f"a secret of {len(secret)} bytes, fewer than {_SECRET_BYTES}")
        if self._secret is not None and not hmac.compare_digest(secret, self._secret):
            raise InvalidParameterError(
                "key", self.path, "was replaced by another key while the ledger was open"
            )
        self._secret = secret
        return secret, anchor

    def anchor(self) -> Anchor | None:
        """Return the anchor, or None for a key file that has none (or no key file)."""
        try:
            return self.read()[1]
        except FileNotFoundError:
            return None

    def load_or_create(self) -> tuple[bytes, Anchor | None]:
        """Read the key file, or create it with a fresh secret (atomic across processes)."""
        try:
            return self.read()
        except FileNotFoundError:
            pass
        folder = os.path.dirname(os.path.abspath(self.path))
        temporary = self._write_temporary(folder, secret_bytes(_SECRET_BYTES), None)
        try:
            os.link(temporary, self.path)  # fails if another process created it meanwhile
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)
        _fsync_directory(folder)
        return self.read()

    def advance(self, anchor: Anchor) -> None:
        """Record ``anchor``, unless the key file already records the same ledger further on.

        Called under SQLite's write lock, so that two writers cannot move it backwards.
        """
        try:
            secret, current = self.read()
        except FileNotFoundError:
            raise InvalidParameterError(
                "key",
                self.path,
                "was deleted while its ledger was open: restore it from a backup (the entry "
                "just recorded is committed; without the key file the ledger cannot be opened)",
            ) from None
        if current is not None and current.ledger_id == anchor.ledger_id:
            if current.last_id >= anchor.last_id:
                return
        elif current is not None:
            raise InvalidParameterError(
                "key",
                self.path,
                f"anchors another ledger ({current.ledger_id}); a key file serves one ledger",
            )
        folder = os.path.dirname(os.path.abspath(self.path))
        temporary = self._write_temporary(folder, secret, anchor)
        try:
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        _fsync_directory(folder)

    def _write_temporary(self, folder: str, secret: bytes, anchor: Anchor | None) -> str:
        data = {
            "format": _KEY_FORMAT,
            "version": 1,
            "secret": secret.hex(),
            "anchor": None
            if anchor is None
            else {
                "ledger_id": anchor.ledger_id,
                "last_id": anchor.last_id,
                "entries": anchor.entries,
                "mac": anchor.mac,
            },
        }
        name = os.path.basename(self.path)
        fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)  # 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1)
                handle.write("\n")
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return temporary


def altered(path: str, key: str | None, what: str) -> InvalidParameterError:
    """Return the refusal of an altered ledger: what was found, what the steward can do."""
    remedy = (
        "Its record of the budget spent cannot be trusted, so it is refused. The steward can "
        "restore the ledger (with its -wal file) from a backup"
    )
    if key is not None:
        remedy += (
            ", or deliberately start a new budget by moving both the ledger and its key file"
            f" {key!r} aside"
        )
    else:
        remedy += ", or deliberately start a new budget by moving the ledger aside"
    remedy += " (the releases already made keep costing the people in the data their privacy)"
    return InvalidParameterError(
        "ledger", path, f"was altered after it was written: {what}. {remedy}"
    )


def missing(anchor: Anchor) -> str:
    """Say that a ledger's file is missing although its key file anchors it."""
    return (
        f"the file is missing, but its key file records a ledger of {anchor.entries} entries "
        "(it was deleted or moved)"
    )
