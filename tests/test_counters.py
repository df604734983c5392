"""The window counters against the real Redis at 127.0.0.1:6379 and against `limits` itself."""

from __future__ import annotations

import secrets

import limits
import pytest

from gateway.ratelimit.counters import (
    LimitsCounter,
    RedisSlidingWindow,
    StoreUnavailable,
    create_counter,
)

REDIS = "redis://127.0.0.1:6379/15"


def fresh_prefix() -> str:
    return f"aigw-test-{secrets.token_hex(4)}"


async def test_the_lua_counter_agrees_with_limits_within_a_window():
    item = limits.parse("5/minute")
    ours = RedisSlidingWindow(REDIS, fresh_prefix(), 1.0)
    reference = create_counter("sliding-window-counter", "memory://", "x", 1.0)
    assert isinstance(reference, LimitsCounter)
    for _ in range(7):
        mine, theirs = await ours.hit(item, "rule", "client"), await reference.hit(item, "r", "c")
        assert (mine.allowed, mine.remaining) == (theirs.allowed, theirs.remaining)
        assert 0 < mine.reset <= 60


async def test_two_counters_on_one_redis_share_counts_and_keys_are_separate():
    item = limits.parse("3/minute")
    prefix = fresh_prefix()
    replica_a, replica_b = (RedisSlidingWindow(REDIS, prefix, 1.0) for _ in range(2))
    results = [await counter.hit(item, "rule", "alice")
               for counter in (replica_a, replica_b, replica_a, replica_b)]
    assert [r.allowed for r in results] == [True, True, True, False]
    assert [r.remaining for r in results] == [2, 1, 0, 0]
    assert (await replica_b.hit(item, "rule", "bob")).remaining == 2


def test_redis_urls_pick_the_one_round_trip_counter_only_for_the_sliding_window():
    assert isinstance(create_counter("sliding-window-counter", REDIS, "p", 1.0),
                      RedisSlidingWindow)
    assert isinstance(create_counter("moving-window", REDIS, "p", 1.0), LimitsCounter)


@pytest.mark.parametrize("strategy", ["sliding-window-counter", "moving-window"])
async def test_an_unreachable_store_raises_store_unavailable(strategy: str, unused_tcp_port):
    counter = create_counter(strategy, f"redis://127.0.0.1:{unused_tcp_port}/0", "p", 0.2)
    with pytest.raises(StoreUnavailable):
        await counter.hit(limits.parse("1/second"), "rule", "client")
