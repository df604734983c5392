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
