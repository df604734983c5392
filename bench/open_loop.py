"""Open-loop HTTP traffic: requests due at a fixed rate, each sent when due whatever the
earlier ones are doing, its latency counted from when it was due (a stalled server shows as
the time requests waited, not as fewer requests sent)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import aiohttp


@dataclass(frozen=True)
class Probe:
    """One kind of request."""

    name: str
    method: str
    path: str
    body: bytes = b""
    content_type: str = ""


@dataclass(frozen=True)
class Sample:
    probe: str
    due: float  # when it was due, on the sending loop's clock
    latency: float  # from `due` to the end of the answer
    status: int  # 0: no answer (connection error, timeout)


async def send(session: aiohttp.ClientSession, base: str, probe: Probe, due: float,
               timeout: float, headers: dict[str, str]) -> Sample:
    """One request, due at `due`: its sample."""
    if probe.content_type:
        headers = {**headers, "Content-Type": probe.content_type}
    loop = asyncio.get_running_loop()
    try:
        async with session.request(probe.method, base + probe.path, data=probe.body or None,
                                   headers=headers,
                                   timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            await response.read()
            status = response.status
    except (aiohttp.ClientError, TimeoutError):
        status = 0
    return Sample(probe.name, due, loop.time() - due, status)


async def steady(session: aiohttp.ClientSession, base: str, probe: Probe, rate: float,
                 headers: dict[str, str], stop: asyncio.Event, samples: list[Sample],
                 timeout: float = 120.0) -> None:
    """`rate` requests a second until `stop` is set; returns when all have answered."""
    loop = asyncio.get_running_loop()
    due, pending = loop.time(), set()
    while not stop.is_set():
        task = asyncio.create_task(send(session, base, probe, due, timeout, headers))
        task.add_done_callback(lambda done: samples.append(done.result()))
        pending.add(task)
        task.add_done_callback(pending.discard)
        due += 1 / rate
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, due - loop.time()))
    await asyncio.gather(*pending)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = -(-q * len(ordered) // 1)  # ceil
    return ordered[min(len(ordered), max(1, int(rank))) - 1]
