"""Work that grows with an upstream's answer leaves the event loop once the answer is large:
parsing (and scrubbing) a surface's upstream JSON, and rewriting a passthrough body's URLs."""

from __future__ import annotations

import threading
from pathlib import Path

import orjson
from inprocess import memory_gateway

from gateway import upstream_call
from gateway.offload import ON_LOOP_MAX_BYTES, sized_job
from gateway.upstream.memory import Reply, UpstreamRequest


async def test_a_small_job_runs_on_the_loop_and_a_large_one_in_a_worker_thread():
    loop_thread = threading.get_ident()
    assert await sized_job(ON_LOOP_MAX_BYTES, threading.get_ident) == loop_thread
    assert await sized_job(ON_LOOP_MAX_BYTES + 1, threading.get_ident) != loop_thread


async def test_a_large_upstream_answer_is_parsed_off_the_loop(tmp_path: Path, monkeypatch):
    from aidre_config import aidre_gateway_config

    threads: list[int] = []
    parse = upstream_call._document

    def recorded(body: bytes, urls: object) -> object:
        threads.append(threading.get_ident())
        return parse(body, urls)  # type: ignore[arg-type]

    monkeypatch.setattr(upstream_call, "_document", recorded)
    filler = "x" * 1024

    def legacy(request: UpstreamRequest) -> Reply:
        items = [{"id": f"a{i}", "title": "t", "snippet": "s", "pad": filler}
                 for i in range(2 if "small" in request.url else 600)]
        return Reply(200, [(b"content-type", b"application/json")], orjson.dumps({"items": items}))

    config = aidre_gateway_config("http://legacy.test", tmp_path)
    async with memory_gateway(config, tmp_path, {"helpcentre": legacy}) as gateway:
        for query in ("small", "large"):
            answer = await gateway.client.post(
                "/search", json={"query": query, "collection": "articles", "top_k": 2},
                headers={"content-type": "application/aidre+json"})
            assert answer.status_code == 200, answer.text
    loop_thread = threading.get_ident()
    assert threads[0] == loop_thread and threads[-1] != loop_thread
