"""The window counters against the real Redis at 127.0.0.1:6379 and against `limits` itself:
exact (the hits of one loop turn in one round trip) and batched (answered here, synced)."""

from __future__ import annotations

import asyncio
import secrets

import limits
import pytest

from gateway.ratelimit.batched import BatchedWindow
from gateway.ratelimit.counters import LimitsCounter, StoreUnavailable
from gateway.ratelimit.redis_window import RedisSlidingWindow
from gateway.ratelimit.stores import create_counter

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


@pytest.mark.parametrize("sync", ["exact", "batched"])
async def test_an_unreachable_store_raises_store_unavailable_in_either_sync(
        sync: str, unused_tcp_port):
    counter = create_counter("sliding-window-counter", f"redis://127.0.0.1:{unused_tcp_port}/0",
                             "p", 0.2, sync=sync)
    with pytest.raises(StoreUnavailable):
        await counter.hit(limits.parse("1/second"), "rule", "client")
    await counter.aclose()


# --------------------------------------------------------------------------- one turn, one trip


async def test_hits_of_one_loop_turn_are_counted_one_after_another_in_one_round_trip():
    item = limits.parse("20/minute")
    counter = RedisSlidingWindow(REDIS, fresh_prefix(), 1.0)
    calls = 0
    run = counter._run

    async def counted(script, keys, args):
        nonlocal calls
        calls += 1
        return await run(script, keys, args)

    counter._run = counted
    results = await asyncio.gather(*(counter.hit(item, "rule", "alice") for _ in range(30)),
                                   counter.hit(item, "rule", "bob"))
    alice, bob = results[:30], results[30]
    assert calls == 1
    assert [r.allowed for r in alice] == [True] * 20 + [False] * 10
    assert [r.remaining for r in alice] == [*range(19, -1, -1)] + [0] * 10
    assert bob.allowed and bob.remaining == 19  # another key, counted apart in the same call
    assert (await counter.hit(item, "rule", "alice")).allowed is False  # the next turn agrees
    await counter.aclose()


async def test_an_unexpected_reply_is_a_store_error_and_leaves_no_hit_waiting():
    counter = RedisSlidingWindow(REDIS, fresh_prefix(), 1.0)

    async def garbage(script, keys, args):
        return [b"OK"]

    counter._run = garbage
    hits = (counter.hit(limits.parse("5/minute"), "rule", "alice") for _ in range(3))
    results = await asyncio.wait_for(asyncio.gather(*hits, return_exceptions=True), 5)
    assert all(isinstance(result, StoreUnavailable) for result in results)
    await counter.aclose()


# --------------------------------------------------------------------------- batched


def batched(prefix: str, interval: float = 0.05, share: float = 0.01,
            url: str = REDIS) -> BatchedWindow:
    return BatchedWindow(RedisSlidingWindow(url, prefix, 1.0), interval, share)


async def test_batched_alone_never_admits_over_the_limit_and_needs_few_round_trips():
    item = limits.parse("50/minute")
    counter = batched(fresh_prefix(), interval=60, share=0.2)  # allowance 10; no timed sync
    trips = 0
    sync = counter._window.sync

    async def counted(changes):
        nonlocal trips
        trips += 1
        return await sync(changes)

    counter._window.sync = counted
    results = [await counter.hit(item, "rule", "alice") for _ in range(60)]
    assert [r.allowed for r in results] == [True] * 50 + [False] * 10
    assert [r.remaining for r in results[:50]] == [*range(49, -1, -1)]
    assert trips <= 50 // 5  # a sync half way through each allowance, not one per hit
    await counter.aclose()


async def test_batched_alone_under_concurrency_admits_exactly_the_limit():
    item = limits.parse("30/minute")
    counter = batched(fresh_prefix(), share=0.1)  # allowance 3
    results = await asyncio.gather(*(counter.hit(item, "rule", "alice") for _ in range(80)))
    assert sum(r.allowed for r in results) == 30
    await counter.aclose()


async def test_two_batched_processes_stay_within_the_stated_bound_and_meet_in_redis():
    limit, share, processes = 40, 0.1, 2  # allowance 4: at most 40 + (2 - 1) x 4 admitted
    item = limits.parse(f"{limit}/minute")
    prefix = fresh_prefix()
    first, second = batched(prefix, share=share), batched(prefix, share=share)

    async def traffic(counter: BatchedWindow) -> int:
        admitted = 0
        for _ in range(60):
            admitted += (await counter.hit(item, "rule", "alice")).allowed
            await asyncio.sleep(0.002)
        return admitted

    admitted = sum(await asyncio.gather(traffic(first), traffic(second)))
    assert limit <= admitted <= limit + (processes - 1) * 4
    await first.aclose()  # sends what it admitted
    await second.aclose()
    exact = RedisSlidingWindow(REDIS, prefix, 1.0)
    assert (await exact.hit(item, "rule", "alice")).allowed is False  # Redis saw every hit
    await exact.aclose()


async def test_batched_learns_other_processes_hits_at_the_next_sync():
    item = limits.parse("10/minute")
    prefix = fresh_prefix()
    counter, other = batched(prefix, interval=0.05, share=0.5), RedisSlidingWindow(REDIS, prefix,
                                                                                  1.0)
    assert (await counter.hit(item, "rule", "alice")).remaining == 9
    for _ in range(8):
        await other.hit(item, "rule", "alice")
    await counter.hit(item, "rule", "alice")  # the key stays busy here
    await asyncio.sleep(0.2)  # a few syncs
    last = await counter.hit(item, "rule", "alice")
    assert last.allowed is False and last.remaining == 0
    await counter.aclose()
    await other.aclose()


async def test_a_key_idle_for_a_sync_is_forgotten_and_asks_redis_again():
    item = limits.parse("10/minute")
    counter = batched(fresh_prefix(), interval=0.02)
    await counter.hit(item, "rule", "alice")
    key = counter._window.key(item, ("rule", "alice"))
    assert key in counter._local
    await asyncio.sleep(0.15)
    assert key not in counter._local
    assert (await counter.hit(item, "rule", "alice")).remaining == 8  # counted by Redis
    await counter.aclose()


def test_batched_sync_needs_redis_and_the_sliding_window_counter():
    from pydantic import ValidationError

    from gateway.ratelimit.config import RateLimits

    RateLimits.model_validate({"storage": REDIS, "sync": "batched"})
    for wrong in ({"storage": "memory://"}, {"storage": REDIS, "strategy": "fixed-window"}):
        with pytest.raises(ValidationError, match="sync batched needs a Redis storage"):
            RateLimits.model_validate({**wrong, "sync": "batched"})
