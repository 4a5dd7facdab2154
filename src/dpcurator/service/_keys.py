"""API keys: random tokens, stored only as scrypt hashes, compared in constant time.

A key is ``dpk_<id>_<token>``: ``id`` (12 hex digits) names the key's row in the ledger store,
so that a request finds its key without a search; ``token`` is 32 bytes from the kernel CSPRNG
(:func:`dpcurator.noise.secret_bytes`), base64url. The store keeps the id, a random salt and
``scrypt(token, salt)``; the key itself is shown once, when it is issued, and never stored.

Why scrypt (:func:`hashlib.scrypt`, in the standard library): a stolen copy of the store must not
give working keys. A 256-bit random token cannot be guessed whatever the hash, so the hash's
cost matters less than for passwords; scrypt is memory-hard (``n = 2**14, r = 8``: 16 MiB and a
few tens of milliseconds per check) and needs no dependency, where argon2 would need one. The
server checks a key with scrypt once per process and then remembers a SHA-256 of the verified
key (:class:`VerifiedKeys`), so that a busy analyst does not pay scrypt on every request;
revocation is read from the store on every request, so it takes effect at once in every process.

Every comparison of secret material uses :func:`hmac.compare_digest`.

Examples
--------
>>> key = new_key()
>>> key.text.startswith("dpk_" + key.id + "_")
True
>>> salt, digest = hash_token(parse_key(key.text)[1])
>>> verify_token(parse_key(key.text)[1], salt, digest)
True
>>> verify_token("not-the-token", salt, digest)
False
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import threading
from dataclasses import dataclass

from dpcurator.noise import secret_bytes

__all__ = ["IssuedKey", "VerifiedKeys", "hash_token", "new_key", "parse_key", "verify_token"]

_SCRYPT_N = 2**14
_SCRYPT_R = 8
_SCRYPT_P = 1
_KEY = re.compile(r"^dpk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class IssuedKey:
    """A key as issued: its public ``id`` and the full ``text`` (shown once, never stored)."""

    id: str
    text: str


def new_key() -> IssuedKey:
    """Draw a new key: a 6-byte id and a 32-byte token from the kernel CSPRNG."""
    key_id = secret_bytes(6).hex()
    token = base64.urlsafe_b64encode(secret_bytes(32)).decode("ascii").rstrip("=")
    return IssuedKey(key_id, f"dpk_{key_id}_{token}")


def parse_key(text: str) -> tuple[str, str] | None:
    """Split a key into ``(id, token)``; None if it is not shaped like a key.

    >>> parse_key("dpk_0123456789ab_" + "A" * 43)[0]
    '0123456789ab'
    >>> parse_key("Bearer nonsense") is None
    True
    """
    match = _KEY.match(text)
    return None if match is None else (match.group(1), match.group(2))


def _scrypt(token: str, salt: bytes) -> bytes:
    return hashlib.scrypt(
        token.encode("ascii"), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=32
    )


def hash_token(token: str) -> tuple[str, str]:
    """Return ``(salt, scrypt hash)`` of a token, both hex, with a fresh 16-byte salt."""
    salt = secret_bytes(16)
    return salt.hex(), _scrypt(token, salt).hex()


def verify_token(token: str, salt: str, digest: str) -> bool:
    """Whether ``token`` hashes to ``digest`` under ``salt`` (constant-time comparison)."""
    try:
        expected = bytes.fromhex(digest)
        computed = _scrypt(token, bytes.fromhex(salt))
    except (ValueError, UnicodeEncodeError):
        return False
    return hmac.compare_digest(computed, expected)


class VerifiedKeys:
    """Keys this process has verified with scrypt, remembered as SHA-256 of the full key.

    The store's row (analyst, revocation) is still read on every request; only the scrypt work
    is skipped. A key whose row changed (revoked, re-issued) is checked again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], bytes] = {}

    def check(self, key_id: str, digest: str, token: str, salt: str) -> bool:
        """Whether ``token`` is the key ``key_id`` whose stored hash is ``digest``."""
        fast = hashlib.sha256(token.encode("ascii")).digest()
        with self._lock:
            known = self._known.get((key_id, digest))
        if known is not None:
            return hmac.compare_digest(known, fast)
        if not verify_token(token, salt, digest):
            return False
        with self._lock:
            self._known[(key_id, digest)] = fast
        return True
