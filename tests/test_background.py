"""Background work yields the CPU to the event loop (gateway/background.py): its threads run at
a lower priority on Linux, and the serving process keeps the tokenizers library to the calling
thread."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from processes import ROOT

from gateway import background, server
from gateway.settings import Settings

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="per-thread nice values are Linux's")


def nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def expected_background_nice() -> int:
    return min(background.MAX_NICE, nice_of_this_thread() + background.BACKGROUND_NICE)


@linux_only
def test_a_background_pool_thread_runs_at_a_lower_priority_and_the_caller_keeps_its_own():
    before = nice_of_this_thread()
    pool = background.background_pool(1, "test-background")
    try:
        assert pool.submit(nice_of_this_thread).result(timeout=10) == expected_background_nice()
    finally:
        pool.shutdown()
    assert nice_of_this_thread() == before  # per thread, not the whole process


def test_lowering_the_priority_is_harmless_where_the_system_refuses(
        monkeypatch: pytest.MonkeyPatch):
    def refuse(*args: Any) -> None:
        raise PermissionError("not here")

    monkeypatch.setattr(os, "setpriority", refuse)
    monkeypatch.setattr(os, "getpriority", lambda *args: 0)
    background.lower_priority()  # no error: the work runs at the priority it has


@pytest.fixture
def switch_interval_kept() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("interpreter,interval", [({}, 0.005), ({"switch_interval": 0.001}, 0.001)])
def test_the_serving_process_keeps_the_tokenizer_in_the_calling_thread_and_sets_the_interval(
        monkeypatch: pytest.MonkeyPatch, switch_interval_kept: None,
        interpreter: dict[str, float], interval: float):
    monkeypatch.delenv(background.TOKENIZERS_PARALLELISM, raising=False)
    seen: list[tuple[str | None, float]] = []

    async def serve(*args: Any) -> None:
        seen.append((os.environ.get(background.TOKENIZERS_PARALLELISM),
                     sys.getswitchinterval()))

    monkeypatch.setattr(server, "serve", serve)
    loaded = SimpleNamespace(settings=Settings.model_validate({
        "upstreams": {"api": {"url": "http://api.invalid"}}, "interpreter": interpreter}))
    server.run(loaded)  # type: ignore[arg-type]
    assert seen == [("false", pytest.approx(interval))]


def test_an_explicit_tokenizer_setting_is_left_as_it_is(
        monkeypatch: pytest.MonkeyPatch, switch_interval_kept: None):
    monkeypatch.setenv(background.TOKENIZERS_PARALLELISM, "true")
    background.serving_process(0.005)
    assert os.environ[background.TOKENIZERS_PARALLELISM] == "true"


def test_wordllama_in_a_serving_process_tokenizes_without_threads_of_its_own(tmp_path: Path):
    """A fresh process (the library's pool starts on first use): embedding starts no thread."""
    script = "\n".join([
        "import os",
        "from gateway.background import serving_process",
        "from gateway.embeddings.config import WordLlamaSettings",
        "from gateway.embeddings.wordllama import WordLlamaEmbedder",
        "serving_process(0.001)",
        "embedder = WordLlamaEmbedder(WordLlamaSettings(provider='wordllama'))",
        "embedder.load()",
        "before = len(os.listdir('/proc/self/task'))",
        "embedder.embed([f'text number {i} about refunds' * 20 for i in range(512)])",
        "print(before, len(os.listdir('/proc/self/task')))",
    ])
    env = {k: v for k, v in os.environ.items() if k != background.TOKENIZERS_PARALLELISM}
    if not Path("/proc/self/task").is_dir():
        pytest.skip("counts threads in /proc")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**env, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = done.stdout.split()
    assert after == before


@linux_only
async def test_a_streams_refresh_runs_at_the_lower_priority_its_first_read_and_searches_do_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from inprocess import memory_gateway
    from test_pdpp_index_scope import KEYS, scoped_config

    from gateway.index.sqlite import SqliteIndex
    from gateway.surfaces.pdpp import store

    many = [{"id": f"r{i:05d}", "title": f"Refund {i}", "text": f"Card payment {i}",
             "updated_at": "2026-01-01T00:00:00Z"} for i in range(3_000)]
    normal = nice_of_this_thread()
    seen: dict[str, set[tuple[str, int]]] = {}

    def watched(name: str, work: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            thread = threading.current_thread().name.rsplit("_", 1)[0]
            seen.setdefault(name, set()).add((thread, nice_of_this_thread()))
            return work(*args, **kwargs)
        return run

    monkeypatch.setattr(SqliteIndex, "lexical", watched("search", SqliteIndex.lexical))
    monkeypatch.setattr(store, "indexed", watched("build", store.indexed))
    monkeypatch.setattr(store, "_applied", watched("refresh", store._applied))

    def legacy(request: Any) -> Any:
        from gateway.upstream.memory import Reply

        return Reply.json({"data": many, "paging": {"next": None}})

    config = scoped_config("/records")
    config["pdpp"]["streams"]["messages"]["max_records"] = 5_000
    config["pdpp"]["refresh_seconds"] = 1
    secret = next(iter(KEYS))
    async with memory_gateway(config, tmp_path, {"legacy": legacy}) as gateway:
        async def get(path: str) -> None:
            response = await gateway.client.get(path, headers={"X-API-Key": secret})
            assert response.status_code == 200, (path, response.text)

        await get("/v1/search?q=refund")
        await asyncio.sleep(1.1)
        await get("/v1/streams/messages/records?limit=5")  # starts a refresh behind it
        low = expected_background_nice()
        # Waited for until done, however busy the machine: the refresh, and its build.
        deadline = time.monotonic() + 120
        while "refresh" not in seen or ("aigw-pdpp-index", low) not in seen.get("build", ()):
            assert time.monotonic() < deadline, f"the refresh never built: {seen}"
            await asyncio.sleep(0.05)
    # indexed() runs twice in a refresh too: the build, then the records it changes
    # the first build is waited for (normal priority), the refresh's is not (lower)
    assert seen["build"] == {("aigw-pdpp", normal), ("aigw-pdpp-index", low)}
    assert seen["refresh"] == {("aigw-pdpp-index", low)}
    assert seen["search"] == {("aigw-pdpp", normal)}
