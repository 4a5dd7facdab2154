"""Limits (src/dpcurator/service/_limits.py): padded response times and per-key rates, as
arithmetic on given clocks (no timed assertions)."""

from __future__ import annotations

import pytest

from dpcurator.service import RateLimiter, padded_delay


@pytest.mark.parametrize(
    ("elapsed", "expected_total"),
    [(0.0, 0.1), (0.03, 0.1), (0.1, 0.1), (0.101, 0.15), (0.149, 0.15), (0.42, 0.45)],
)
def test_latency_is_padded_to_the_minimum_then_to_quanta(
    elapsed: float, expected_total: float
) -> None:
    total = elapsed + padded_delay(elapsed, minimum=0.1, quantum=0.05)
    assert total == pytest.approx(expected_total, abs=1e-9)


def test_the_padded_total_does_not_depend_on_the_time_within_a_quantum() -> None:
    totals = {round(e + padded_delay(e, minimum=0.0, quantum=0.05), 9) for e in (0.051, 0.07, 0.1)}
    assert totals == {0.1}


def test_rate_limits_are_per_key_and_refill() -> None:
    limiter = RateLimiter(per_minute=60)
    assert all(limiter.take("a", now=0.0) == 0.0 for _ in range(60))
    wait = limiter.take("a", now=0.0)
    assert wait == pytest.approx(1.0)
    assert limiter.take("b", now=0.0) == 0.0
    assert limiter.take("a", now=1.0) == 0.0


def test_idle_buckets_are_forgotten_so_made_up_keys_cost_no_memory() -> None:
    limiter = RateLimiter(per_minute=60)
    for i in range(5000):
        limiter.take(f"made-up-{i}", now=i * 0.1)  # one new key every 0.1 s, for 500 s
    assert len(limiter) <= 60 / 0.1 + RateLimiter._PRUNE_EVERY  # a minute's keys, a batch
    assert limiter.wait("made-up-4999", now=500.0) == 0.0
