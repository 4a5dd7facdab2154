"""API keys (src/dpcurator/service/_keys.py): random, stored as scrypt hashes, checked in
constant time, remembered per process only after a full check."""

from __future__ import annotations

from dpcurator.service._keys import VerifiedKeys, hash_token, new_key, parse_key, verify_token


def test_keys_are_distinct_and_well_formed() -> None:
    keys = {new_key().text for _ in range(50)}
    assert len(keys) == 50
    assert all(parse_key(k) is not None for k in keys)
    for bad in ("", "dpk_", "dpk_0123456789ab_short", "dpk_XYZ456789abc_" + "A" * 43, "A" * 60):
        assert parse_key(bad) is None


def test_the_hash_verifies_the_token_only() -> None:
    token = parse_key(new_key().text)
    assert token is not None
    salt, digest = hash_token(token[1])
    assert token[1] not in digest and verify_token(token[1], salt, digest)
    assert not verify_token(token[1][:-1] + "x", salt, digest)
    assert not verify_token(token[1], "00" * 16, digest)  # another salt
    assert not verify_token(token[1], "zz", digest)  # malformed salt: refused, no error
    other_salt, other = hash_token(token[1])
    assert other_salt != salt and other != digest  # salted


def test_a_remembered_key_is_still_compared_and_a_changed_row_checked_again() -> None:
    key = new_key()
    parsed = parse_key(key.text)
    assert parsed is not None
    salt, digest = hash_token(parsed[1])
    cache = VerifiedKeys()
    assert cache.check(key.id, digest, parsed[1], salt)
    assert not cache.check(key.id, digest, parsed[1][:-1] + "x", salt)  # cached, still compared
    salt2, digest2 = hash_token("another-token-entirely-000000000000000000000")
    assert not cache.check(key.id, digest2, parsed[1], salt2)  # re-issued row: full check
