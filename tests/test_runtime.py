"""Config generations: a transport shared by several generations closes only when the last
one that uses it has finished its requests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from gateway.loader import load_config
from gateway.runtime import Runtime


def loaded(tmp_path: Path, read_timeout: float):
    file = tmp_path / f"gw-{read_timeout}.yaml"
    file.write_text(yaml.safe_dump({"upstreams": {
        "a": {"url": "http://127.0.0.1:9", "timeout": {"read": read_timeout}},
        "b": {"url": "http://127.0.0.1:10"}}}))
    return load_config(file, env={})


async def test_two_quick_reloads_never_close_a_transport_still_in_use(tmp_path: Path):
    runtime = Runtime(loaded(tmp_path, 5))
    first = runtime.current
    shared = first.transports["a"]
    closed: list[bool] = []
    original = shared.aclose

    async def record() -> None:
        closed.append(True)
        await original()

    shared.aclose = record  # type: ignore[method-assign]
    first.enter()  # a slow request still running on generation 1
    second = runtime.swap(loaded(tmp_path, 5))  # same upstream settings: "a" is reused
    assert second.transports["a"] is shared
    runtime.swap(loaded(tmp_path, 6))  # "a" changes: generation 3 gets a new transport
    await asyncio.sleep(0.05)  # generation 2 has drained and retired by now
    assert closed == []  # generation 1 still holds a request on it
    first.leave()
    await asyncio.sleep(0.05)
    assert closed == [True]
    await runtime.aclose()


async def test_a_config_that_validates_but_cannot_be_built_keeps_the_old_one(tmp_path: Path):
    from gateway import observability
    from gateway.reload import Reloader

    runtime = Runtime(loaded(tmp_path, 5))
    reloader = Reloader(runtime)

    def broken_swap(loaded_config):
        raise RuntimeError("cannot build")

    runtime.swap = broken_swap  # type: ignore[method-assign]
    before = observability.CONFIG_RELOADS.labels("failure")._value.get()
    assert await reloader.reload("test") is False
    assert observability.CONFIG_RELOADS.labels("failure")._value.get() == before + 1
    assert runtime.current.number == 1
    await runtime.aclose()


def _with_stores(tmp_path: Path, name: str, *, limits_storage: str, registry_prefix: str):
    """A config whose generation holds a rate-limit counter and an AIDIP registry."""
    file = tmp_path / f"{name}.yaml"
    file.write_text(yaml.safe_dump({
        "public_base_url": "http://127.0.0.1:8080",
        "upstreams": {"a": {"url": "http://127.0.0.1:9"}},
        "rate_limits": {"storage": limits_storage, "rules": [
            {"name": "all", "paths": ["/"], "limit": "100/minute", "key": "client"}]},
        "aidip": {"registry": {"key_prefix": registry_prefix}}}))
    return load_config(file, env={})


def _closing(resource: object, closed: list[str], name: str) -> None:
    original = resource.aclose  # type: ignore[attr-defined]

    async def record() -> None:
        closed.append(name)
        await original()

    resource.aclose = record  # type: ignore[attr-defined]


async def test_every_shared_resource_is_closed_once_by_the_last_generation_using_it(
        tmp_path: Path):
    """Rate-limit counters and surfaces' stores live as long as the generations that lease
    them: kept over a reload with the same settings, closed once when none uses them."""
    runtime = Runtime(_with_stores(tmp_path, "one", limits_storage="memory://",
                                   registry_prefix="aigw:agents"))
    closed: list[str] = []
    first = runtime.current
    counter = first.pipeline.limiter._counter  # type: ignore[attr-defined]
    _closing(counter, closed, "counter")
    registry = runtime.shared  # one entry per key, whichever generations hold it
    held_before = len(registry)  # the upstream client, the counter, the AIDIP registry, ...
    second = runtime.swap(_with_stores(tmp_path, "two", limits_storage="memory://",
                                       registry_prefix="aigw:agents"))
    assert second.pipeline.limiter._counter is counter  # type: ignore[attr-defined]
    await asyncio.sleep(0.05)  # generation 1 retires: nothing it shared is closed
    assert closed == [] and len(registry) == held_before
    runtime.swap(_with_stores(tmp_path, "three", limits_storage="memory://",
                              registry_prefix="aigw:other"))
    await asyncio.sleep(0.05)  # generation 2 retires: its registry is no one's now
    assert len(registry) == held_before and closed == []
    await runtime.aclose()
    assert closed == ["counter"] and len(registry) == 0


def _with_egress(tmp_path: Path, name: str, host: str):
    """A config whose AIDIP surface declares egress rules allowing one origin."""
    file = tmp_path / f"{name}.yaml"
    file.write_text(yaml.safe_dump({
        "public_base_url": "http://127.0.0.1:8080",
        "upstreams": {"a": {"url": "http://127.0.0.1:9"}},
        "rate_limits": {"storage": "memory://", "rules": [
            {"name": "all", "paths": ["/"], "limit": "100/minute", "key": "client"}]},
        "aidip": {"egress": {"origins": [{"host": host}]}}}))
    return load_config(file, env={})


async def test_the_runtime_builds_a_surfaces_egress_client_and_closes_it_once(tmp_path: Path):
    """The client for registered URLs is the pipeline's, built from the mount's rules: kept
    over a reload with the same rules, closed once the last generation using it retires."""
    runtime = Runtime(_with_egress(tmp_path, "one", "a.example"))
    client = runtime.current.pipeline.egress["aidip"]
    assert client.policy.url_problem("https://a.example/x") is None
    closed: list[str] = []
    _closing(client, closed, "egress")
    second = runtime.swap(_with_egress(tmp_path, "two", "a.example"))
    assert second.pipeline.egress["aidip"] is client
    third = runtime.swap(_with_egress(tmp_path, "three", "b.example"))
    assert third.pipeline.egress["aidip"] is not client
    assert third.pipeline.egress["aidip"].policy.url_problem("https://a.example/x") is not None
    await asyncio.sleep(0.05)  # generations 1 and 2 retire: nobody uses the first client
    assert closed == ["egress"]
    await runtime.aclose()
    assert closed == ["egress"]
