"""Tests of the secret bytes for keys (src/dpcurator/noise/_secret.py)."""

from __future__ import annotations

import pytest

from dpcurator.errors import InvalidParameterError
from dpcurator.noise import secret_bytes


def test_secret_bytes_are_fresh_and_sized() -> None:
    keys = {secret_bytes(32) for _ in range(64)}
    assert len(keys) == 64  # a repeat among 64 draws of 256 bits has probability ~2**-245
    assert all(isinstance(k, bytes) and len(k) == 32 for k in keys)
    assert secret_bytes(0) == b""


@pytest.mark.parametrize("n", [-1, 1.5, "8", True])
def test_secret_bytes_refuses_a_bad_count(n: object) -> None:
    with pytest.raises(InvalidParameterError, match=r"^n "):
        secret_bytes(n)  # type: ignore[arg-type]
