"""Whose records PDPP reads and keeps: one copy per stream when its records do not depend on
the caller, one per subject only when they do (`records_scope`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from inprocess import memory_gateway
from pdpp_config import config as pdpp_gateway_config
from pdpp_config import demo_pdpp, key
from test_upstream_tokens import RECORDS, KeysetApi

from gateway.upstream.memory import Reply, UpstreamRequest

KEYS = {"owner-a-key-0001": "subject-a", "owner-b-key-0001": "subject-b",
        "owner-c-key-0001": "subject-c"}


def scoped_config(path: str, scope: str | None = None) -> dict[str, Any]:
    pdpp = demo_pdpp()
    messages = pdpp["streams"]["messages"]
    messages.pop("record", None)
    messages["records"] = {"upstream": "legacy", "path": path,
                           "query": {"limit": "{limit}", "after": "{after}"},
                           "mapping": {"items": "data", "id": "id", "next": "paging.next"}}
    messages["page_size"] = 100
    messages["fields"] = {"id": {"path": "id"}, "subject": {"path": "title"},
                          "body": {"path": "text"},
                          "sent_at": {"path": "updated_at", "format": "date-time"}}
    if scope is not None:
        messages["records_scope"] = scope
    pdpp["streams"] = {"messages": messages}
    config = pdpp_gateway_config("http://legacy.invalid", pdpp, legacy="http://legacy.invalid")
    config["auth"]["api_keys"]["keys"] = [key(secret, subject, "owner")
                                          for secret, subject in KEYS.items()]
    return config


async def read_as_everyone(config: dict[str, Any], tmp_path: Path, api: KeysetApi) -> set[str]:
    """Every key reads the stream; the subjects the upstream was told of."""
    told: set[str] = set()

    def legacy(request: UpstreamRequest) -> Reply:
        told.add(request.header("X-Aigw-Subject") or "")
        return api(request)

    async with memory_gateway(config, tmp_path, {"legacy": legacy}) as gateway:
        for secret in KEYS:
            response = await gateway.client.get("/v1/streams/messages/records?limit=5",
                                                headers={"X-API-Key": secret})
            assert response.status_code == 200, response.text
            assert len(response.json()["data"]) == 5
    return told


async def test_a_stream_that_does_not_name_the_subject_is_read_once_for_everyone(
        tmp_path: Path):
    api = KeysetApi()
    told = await read_as_everyone(scoped_config("/records"), tmp_path, api)
    assert len(api.calls) == len(RECORDS) // 100 + 1  # one read of the stream, for all three
    assert told == {""}  # read as the gateway: no caller's identity could shape it


@pytest.mark.parametrize("path,scope", [("/users/{subject}/records", None),
                                        ("/records", "subject")])
async def test_a_stream_of_each_subjects_own_records_is_read_per_subject(
        tmp_path: Path, path: str, scope: str | None):
    api = KeysetApi()
    told = await read_as_everyone(scoped_config(path, scope), tmp_path, api)
    assert len(api.calls) == 3 * (len(RECORDS) // 100 + 1)
    assert told == set(KEYS.values())


async def test_an_old_copy_keeps_serving_while_it_refreshes_and_when_a_refresh_fails(
        tmp_path: Path):
    from prometheus_client import REGISTRY

    api = KeysetApi()
    failing = {"now": False}

    def legacy(request: UpstreamRequest) -> Reply:
        if failing["now"]:
            return Reply.json({"error": "down"}, status=503)
        return api(request)

    def refreshes(outcome: str) -> float:
        return REGISTRY.get_sample_value("aigw_index_refreshes_total", {
            "surface": "pdpp", "collection": "messages", "outcome": outcome}) or 0.0

    config = scoped_config("/records")
    config["pdpp"]["refresh_seconds"] = 1
    secret = next(iter(KEYS))
    before = refreshes("ok"), refreshes("failed")
    async with memory_gateway(config, tmp_path, {"legacy": legacy}) as gateway:
        async def read() -> int:
            response = await gateway.client.get("/v1/streams/messages/records?limit=5",
                                                headers={"X-API-Key": secret})
            assert response.status_code == 200, response.text
            return len(response.json()["data"])

        assert await read() == 5
        first = len(api.calls)
        await asyncio.sleep(1.1)
        assert await read() == 5  # the old copy, at once; a refresh starts behind it
        await asyncio.sleep(0.2)
        assert len(api.calls) == 2 * first and refreshes("ok") == before[0] + 1
        failing["now"] = True
        await asyncio.sleep(1.1)
        assert await read() == 5
        await asyncio.sleep(0.2)
        assert refreshes("failed") == before[1] + 1
        assert await read() == 5  # still the last good copy


async def test_indexes_scores_and_listings_of_a_big_stream_never_run_on_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import threading

    from gateway.index.sqlite import SqliteIndex
    from gateway.surfaces.pdpp import indexing, store

    many = [{"id": f"r{i:05d}", "title": f"Refund {i}", "text": f"Card payment {i}",
             "updated_at": "2026-01-01T00:00:00Z"} for i in range(3_000)]
    loop_thread = threading.current_thread()
    on_loop: list[str] = []

    def watched(name: str, work: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is loop_thread:
                on_loop.append(name)
            return work(*args, **kwargs)
        return run

    for method in ("replace", "lexical", "semantic", "records"):
        monkeypatch.setattr(SqliteIndex, method, watched(method, getattr(SqliteIndex, method)))
    monkeypatch.setattr(store, "indexed", watched("indexed", indexing.indexed))
    monkeypatch.setattr(store, "sort_records", watched("sort", store.sort_records))

    def legacy(request: UpstreamRequest) -> Reply:
        return Reply.json({"data": many, "paging": {"next": None}})

    config = scoped_config("/records")
    config["pdpp"]["streams"]["messages"]["max_records"] = 5_000
    secret = next(iter(KEYS))
    async with memory_gateway(config, tmp_path, {"legacy": legacy}) as gateway:
        for path in ("/v1/streams/messages/records?limit=5", "/v1/search?q=refund",
                     "/v1/search/semantic?q=refund"):
            response = await gateway.client.get(path, headers={"X-API-Key": secret})
            assert response.status_code == 200, (path, response.text)
            assert response.json()["data"], path
    assert on_loop == []


async def test_the_index_survives_a_restart_and_one_stream_has_one_index(tmp_path: Path):
    config = scoped_config("/records")
    folder = tmp_path / "index"
    config["pdpp"]["index"] = {"path": str(folder)}
    api = KeysetApi()
    await read_as_everyone(config, tmp_path, api)  # three subjects, one stream
    assert len(api.calls) == len(RECORDS) // 100 + 1
    assert len(list(folder.glob("*.db"))) == 1
    restarted = KeysetApi()
    await read_as_everyone(config, tmp_path, restarted)  # a new gateway, the same folder
    assert restarted.calls == []  # served from the index on disk


async def test_per_subject_indexes_are_bounded_by_bytes_together(tmp_path: Path):
    config = scoped_config("/users/{subject}/records")
    folder = tmp_path / "index"
    config["pdpp"]["index"] = {"path": str(folder), "subjects_max_bytes": 1 << 20}
    api = KeysetApi()
    await read_as_everyone(config, tmp_path, api)
    kept = list(folder.glob("*.db"))
    assert 1 <= len(kept) < len(KEYS)  # the least recently used were dropped, files and all


async def test_two_gateways_share_one_postgres_index_and_one_of_them_refreshes(tmp_path: Path):
    psycopg = pytest.importorskip("psycopg")
    conninfo = "host=127.0.0.1 port=5432 user=postgres dbname=test"
    try:
        psycopg.connect(conninfo, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432: {exc}")
    config = scoped_config("/records")
    origin = f"http://legacy-{os.urandom(4).hex()}.invalid"  # an index of this test's own
    config["upstreams"]["legacy"]["url"] = origin
    config["pdpp"]["index"] = {"engine": "postgres", "dsn": "postgresql://postgres@127.0.0.1/test"}
    config["pdpp"]["refresh_seconds"] = 1
    first, second = KeysetApi(), KeysetApi()
    secret = next(iter(KEYS))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    try:
        async with memory_gateway(config, tmp_path / "a", {origin: first}) as a, \
                memory_gateway(config, tmp_path / "b", {origin: second}) as b:
            for _ in range(3):
                for gateway in (a, b):
                    response = await gateway.client.get("/v1/streams/messages/records?limit=5",
                                                        headers={"X-API-Key": secret})
                    assert response.status_code == 200, response.text
                    assert len(response.json()["data"]) == 5
                await asyncio.sleep(1.1)  # past refresh_seconds: each tries to refresh
        assert len(first.calls) >= 2 * (len(RECORDS) // 100 + 1)  # read, then refreshed
        assert second.calls == []  # the other replica read only what the first wrote
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            schemas = [row[0] for row in conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'aigw_ix_messages%'")]
            for schema in schemas:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def test_a_refresh_applies_what_changed_and_removes_what_vanished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gateway.index.sqlite import SqliteIndex

    rows = [dict(record) for record in RECORDS[:50]]
    changed: list[str] = []

    def legacy(request: UpstreamRequest) -> Reply:
        return Reply.json({"data": rows, "paging": {"next": None}})

    real_apply = SqliteIndex.apply

    def apply(self: SqliteIndex, upserts: Any, deletions: Any) -> None:
        changed.extend([record.key for record in upserts] + [f"-{key}" for key in deletions])
        real_apply(self, upserts, deletions)

    config = scoped_config("/records")
    config["pdpp"]["refresh_seconds"] = 1
    secret = next(iter(KEYS))
    monkeypatch.setattr(SqliteIndex, "apply", apply)
    async with memory_gateway(config, tmp_path, {"legacy": legacy}) as gateway:
        async def search(q: str) -> list[str]:
            response = await gateway.client.get("/v1/search", params={"q": q},
                                                headers={"X-API-Key": secret})
            assert response.status_code == 200, response.text
            return [hit["record_key"] for hit in response.json()["data"]]

        assert await search("Record 7") != []
        rows[6] = {**rows[6], "title": "Renamed zebra"}  # r0007 changes
        del rows[9]  # r0010 vanishes
        await asyncio.sleep(1.1)
        await search("zebra")  # starts the refresh behind the old copy
        await asyncio.sleep(0.3)
        assert await search("zebra") == ["r0007"]
    assert sorted(changed) == ["-r0010", "r0007"]  # nothing else rewritten


async def test_a_hundred_subjects_of_a_shared_stream_cost_what_one_does(tmp_path: Path):
    """RSS after one subject read (and searched) a 5,000-record stream, then 99 more."""
    rows = [{"id": f"r{i:05d}", "title": f"Message {i}", "text": "Refunds and card payments. " * 20,
             "updated_at": "2026-01-01T00:00:00Z"} for i in range(5_000)]

    def legacy(request: UpstreamRequest) -> Reply:
        return Reply.json({"data": rows, "paging": {"next": None}})

    def rss() -> int:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

    config = scoped_config("/records")
    config["pdpp"]["streams"]["messages"]["max_records"] = 10_000
    config["auth"]["api_keys"]["keys"] = [key(f"subject-key-{i:04d}", f"subject-{i}", "owner")
                                          for i in range(100)]
    async with memory_gateway(config, tmp_path, {"legacy": legacy}) as gateway:
        async def serve(subject: int) -> None:
            for path in ("/v1/streams/messages/records?limit=10", "/v1/search?q=refunds"):
                response = await gateway.client.get(
                    path, headers={"X-API-Key": f"subject-key-{subject:04d}"})
                assert response.status_code == 200, response.text

        await serve(0)
        one = rss()
        for subject in range(1, 100):
            await serve(subject)
        hundred = rss()
    assert hundred <= one * 1.10, (one, hundred)


async def test_a_request_during_a_first_read_is_told_the_stream_is_being_indexed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gateway.surfaces.pdpp import store

    monkeypatch.setattr(store, "FIRST_READ_WAIT", 0.2)
    api = KeysetApi()

    async def slow(request: UpstreamRequest) -> Reply:
        await asyncio.sleep(0.5)
        return api(request)

    secret = next(iter(KEYS))
    async with memory_gateway(scoped_config("/records"), tmp_path, {"legacy": slow}) as gateway:
        async def read() -> Any:
            return await gateway.client.get("/v1/streams/messages/records?limit=5",
                                            headers={"X-API-Key": secret})

        waiting = await read()
        assert waiting.status_code == 503 and waiting.headers["retry-after"] == "5"
        assert waiting.json()["error"]["code"] == "index_building"
        assert (await read()).status_code == 503  # the same read goes on: no second one
        await asyncio.sleep(2.0)
        assert (await read()).status_code == 200
    assert len(api.calls) == len(RECORDS) // 100 + 1
