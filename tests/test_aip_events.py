"""AIP events: access events valid against the schema, citation validation naming the failing
field, the JSON-lines and Redis-stream sinks, nothing lost on close, and `aigw aip events`."""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
from pathlib import Path

import jsonschema
import orjson
import pytest
import redis
import yaml
from processes import ROOT, free_port

from gateway.errors import GatewayError
from gateway.surfaces.aip.events import (
    EventSinkUnavailable,
    JsonlSink,
    RedisStreamSink,
    access_event,
    citation_problem,
    create_sink,
)
from gateway.surfaces.aip.ledger import Claim, EventLedger
from gateway.surfaces.aip.nonces import MemoryNonceStore, RedisNonceStore
from gateway.surfaces.aip.signing_config import Events

REDIS_URL = "redis://127.0.0.1:6379/15"
SCHEMA_FILE = ROOT / "gateway" / "schemas" / "aip" / "access-citation-event.schema.json"
CITATION = {
    "aip_version": "0.1", "event_id": "evt_1", "event_type": "citation",
    "timestamp": "2025-11-14T18:22:05Z", "request_id": "req_92fA1",
    "publisher": {"id": "pub-001", "domain": "example.com"},
    "platform": {"id": "platform-acme-001"},
    "citation": {"source_url": "https://example.com/crm-guide", "chunk_ids": ["c1"],
                 "display_surface": "footnote"},
}


def schema_errors(event: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()),
                                                format_checker=jsonschema.FormatChecker())
    return [error.message for error in validator.iter_errors(event)]


def event(number: int) -> dict:
    return access_event(request_id=f"req_{number}", publisher_id="pub-001",
                        publisher_domain="example.com", platform_id="platform-acme-001",
                        chunks_returned=number % 5, token_count=18 * number)


def aigw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


@pytest.fixture
def stream() -> str:
    name = f"test-aip-events-{secrets.token_hex(6)}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(name)
    client.close()


def test_an_access_event_is_valid_and_counts_chunks_and_tokens():
    built = access_event(request_id="req_92fA1", publisher_id="pub-001",
                         publisher_domain="example.com", platform_id="platform-acme-001",
                         chunks_returned=3, token_count=412)
    assert schema_errors(built) == []
    assert built["access"] == {"chunks_returned": 3, "token_count": 412,
                               "retrieval_mode": "chunks"}
    assert (built["event_type"], built["request_id"]) == ("access", "req_92fA1")
    assert built["timestamp"].endswith("Z") and built["event_id"] != event(1)["event_id"]


def test_access_events_keep_their_id_and_timestamp_forms():
    import re
    import uuid
    from datetime import UTC, datetime, timedelta

    built = [access_event(request_id="r", publisher_id="p", publisher_domain="example.com",
                          platform_id="a", chunks_returned=1, token_count=1)
             for _ in range(600)]  # past one page of randomness
    ids = [event["event_id"] for event in built]
    assert len(set(ids)) == len(ids)
    for event_id in ids:
        assert event_id.startswith("evt_") and uuid.UUID(event_id[4:]).version == 4
        assert uuid.UUID(event_id[4:]).hex == event_id[4:]
    stamp = built[-1]["timestamp"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp)
    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - when) < timedelta(seconds=5)


def test_a_valid_citation_event_passes():
    assert schema_errors(CITATION) == []
    assert citation_problem(CITATION) is None


def _without(document: dict, *path: str) -> dict:
    copy = json.loads(json.dumps(document))
    target = copy
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return copy


def _with(document: dict, value: object, *path: str) -> dict:
    copy = json.loads(json.dumps(document))
    target = copy
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return copy


@pytest.mark.parametrize(("document", "field"), [
    (_without(CITATION, "platform", "id"), "platform.id"),
    (_without(CITATION, "request_id"), "request_id"),
    (_with(CITATION, "not a url", "citation", "source_url"), "citation.source_url"),
    (_with(CITATION, "c1", "citation", "chunk_ids"), "citation.chunk_ids"),
    (_with(CITATION, 7, "citation", "chunk_ids", 0), "citation.chunk_ids.0"),
    (_with(CITATION, "yesterday", "timestamp"), "timestamp"),
    (_with(CITATION, "1.0", "aip_version"), "aip_version"),
    (_with(CITATION, "not a host!", "publisher", "domain"), "publisher.domain"),
    (_with(CITATION, {"cpm": 3}, "pricing"), "pricing"),
    (_with(CITATION, "view", "event_type"), "event_type"),
    (_with(CITATION, "access", "event_type"), "event_type"),
    (_with(CITATION, {"chunks_returned": 1}, "access"), "access"),
    (_without(CITATION, "citation"), "citation"),
    ([CITATION], "(body)"),
])
def test_an_invalid_citation_names_the_failing_field(document, field):
    problem = citation_problem(document)
    assert problem is not None and problem[0] == field


async def test_the_jsonl_sink_round_trips_and_reads_the_newest(tmp_path):
    path = str(tmp_path / "events.jsonl")
    sink = JsonlSink(path)
    written = [event(number) for number in range(1, 6)]
    for item in written:
        await sink.emit(item)
    await sink.aclose()
    reader = create_sink(Events(file=path))
    assert await reader.read() == written
    assert await reader.read(limit=2) == written[-2:]
    assert all(schema_errors(item) == [] for item in await reader.read())


async def test_nothing_queued_is_lost_on_close(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(str(path), queue_size=1000)
    written = [event(number) for number in range(500)]
    emits = [asyncio.create_task(sink.emit(item)) for item in written]
    await asyncio.sleep(0)  # every emit has queued its line
    assert not path.exists() or path.read_text().count("\n") < 500  # still queued
    await sink.aclose()
    await asyncio.gather(*emits)
    assert [json.loads(line) for line in path.read_text().splitlines()] == written
    with pytest.raises(EventSinkUnavailable):
        await sink.emit(event(501))


async def test_an_emit_returns_once_its_line_is_written_and_a_failed_write_raises(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(str(path))
    first = event(1)
    await sink.emit(first)
    assert [json.loads(line) for line in path.read_text().splitlines()] == [first]
    await sink.aclose()
    (tmp_path / "blocked").write_text("a file where a directory must be")
    broken = JsonlSink(str(tmp_path / "blocked" / "events.jsonl"))
    with pytest.raises(EventSinkUnavailable):
        await broken.emit(event(2))
    await broken.aclose()


def lines_of(files: list[Path]) -> list[dict]:
    return [json.loads(line) for file in files for line in file.read_text().splitlines()]


def rotated(path: Path) -> list[Path]:
    """The current file and its rotated ones, oldest first."""
    numbered = [f for f in path.parent.glob(path.name + ".*") if f.suffix[1:].isdigit()]
    return [*sorted(numbered, key=lambda f: -int(f.suffix[1:])), path]


async def test_the_file_rotates_by_size_and_keeps_n_files_losing_no_event(tmp_path):
    path = tmp_path / "events.jsonl"
    size = len(orjson.dumps(event(10))) + 1
    sink = JsonlSink(str(path), max_file_bytes=4 * size, keep_files=3)
    written = [event(number) for number in range(10, 26)]  # 16 events: 4 files of 4
    for item in written:
        await sink.emit(item)
    await sink.aclose()
    files = rotated(path)
    assert [f.name for f in files] == [f"events.jsonl.{n}" for n in (3, 2, 1)] + ["events.jsonl"]
    assert all(f.stat().st_size <= 4 * size for f in files)
    assert lines_of(files) == written  # every event, in order, none split across files
    assert await create_sink(Events(file=str(path), keep_files=3)).read() == written
    more = JsonlSink(str(path), max_file_bytes=4 * size, keep_files=3)
    for item in (extra := [event(number) for number in range(26, 34)]):
        await more.emit(item)
    await more.aclose()
    files = rotated(path)
    assert len(files) == 4  # the oldest files beyond keep_files were dropped ...
    assert lines_of(files) == (written + extra)[-16:]  # ... and nothing newer than them


async def test_two_writers_rotating_one_file_lose_and_split_no_line(tmp_path):
    path = str(tmp_path / "events.jsonl")
    size = len(orjson.dumps(event(100))) + 1
    old, new = (JsonlSink(path, max_file_bytes=3 * size, keep_files=1000) for _ in range(2))
    await asyncio.gather(*((old if number % 2 else new).emit(event(number))
                           for number in range(100, 200)))
    await old.aclose()
    await new.aclose()
    stored = lines_of(rotated(tmp_path / "events.jsonl"))
    assert sorted(item["request_id"] for item in stored) == sorted(
        f"req_{number}" for number in range(100, 200))
    assert all(f.stat().st_size <= 3 * size for f in rotated(tmp_path / "events.jsonl"))


async def test_a_full_queue_makes_callers_wait_instead_of_dropping(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(str(path), queue_size=2)
    written = [event(number) for number in range(50)]
    for item in written:
        await sink.emit(item)
    await sink.aclose()
    assert await JsonlSink(str(path)).read() == written


async def test_two_generations_append_to_one_file_without_mixing_lines(tmp_path):
    path = str(tmp_path / "events.jsonl")
    old, new = JsonlSink(path), JsonlSink(path)
    for number in range(100):
        await (old if number % 2 else new).emit(event(number))
    await old.aclose()
    await new.aclose()
    stored = await JsonlSink(path).read()
    assert sorted(item["request_id"] for item in stored) == sorted(
        f"req_{number}" for number in range(100))


async def test_the_redis_stream_sink_round_trips(stream):
    sink = create_sink(Events(redis_url=REDIS_URL, stream=stream))
    assert isinstance(sink, RedisStreamSink)
    written = [event(number) for number in range(1, 4)]
    for item in written:
        await sink.emit(item)
    await sink.aclose()
    other_replica = RedisStreamSink(REDIS_URL, stream, 1000, 1.0)
    assert await other_replica.read() == written
    assert await other_replica.read(limit=1) == written[-1:]
    await other_replica.aclose()


async def test_an_unreachable_redis_stream_refuses_the_event():
    sink = RedisStreamSink(f"redis://127.0.0.1:{free_port()}/0", "aigw:aip:events", 1000, 0.5)
    with pytest.raises(EventSinkUnavailable):
        await sink.emit(event(1))
    await sink.aclose()


async def test_aigw_aip_events_prints_the_jsonl_file(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(str(path))
    written = [event(number) for number in range(1, 4)]
    for item in written:
        await sink.emit(item)
    await sink.aclose()
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"aip": {"events": {"file": str(path)}}}))
    result = aigw("aip", "events", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == written
    newest = aigw("aip", "events", "--config", str(config), "--limit", "1")
    assert [json.loads(line) for line in newest.stdout.splitlines()] == written[-1:]


async def test_aigw_aip_events_prints_the_redis_stream(tmp_path, stream):
    sink = RedisStreamSink(REDIS_URL, stream, 1000, 1.0)
    await sink.emit(CITATION)
    await sink.aclose()
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"aip": {"events": {"redis_url": REDIS_URL,
                                                         "stream": stream}}}))
    result = aigw("aip", "events", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [CITATION]


def test_aigw_aip_events_names_a_bad_setting(tmp_path):
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"aip": {"events": {"redis_url": "http://x", "stram": 1}}}))
    result = aigw("aip", "events", "--config", str(config))
    assert result.returncode == 1
    assert f"{config}: aip.events.redis_url: expected a Redis URL with a scheme among" \
        in result.stderr
    assert f"{config}: aip.events.stram: Extra inputs are not permitted" in result.stderr


def test_aigw_aip_events_reports_an_unreachable_redis_without_a_traceback(tmp_path):
    config = tmp_path / "gateway.yaml"
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    config.write_text(yaml.safe_dump({"aip": {"events": {"redis_url": url}}}))
    result = aigw("aip", "events", "--config", str(config))
    assert result.returncode == 1
    assert "cannot read events" in result.stderr
    assert "Traceback" not in result.stderr and "hunter2" not in result.stderr


def test_events_config_defaults_to_a_jsonl_file():
    assert isinstance(create_sink(Events()), JsonlSink)
    assert Path(Events().file).name == "aip-events.jsonl"


# --------------------------------------------------------------------------- the event ledger


def memory_ledger(entries: int, clock: list[float], retention: float = 100) -> EventLedger:
    return EventLedger(MemoryNonceStore(entries, clock=lambda: clock[0], evict=True), retention)


async def test_the_ledger_knows_issued_request_ids_per_platform_for_the_retention():
    clock = [0.0]
    ledger = memory_ledger(100, clock)
    await ledger.issue("acme", "req_1")
    assert await ledger.issued("acme", "req_1")
    assert not await ledger.issued("other", "req_1")  # issued to another platform
    assert not await ledger.issued("acme", "req_2")
    clock[0] += 100
    assert not await ledger.issued("acme", "req_1")  # past the retention


async def test_an_event_id_is_claimed_once_per_platform_and_a_retry_is_told_apart():
    ledger = memory_ledger(100, [0.0])
    assert await ledger.claim("acme", "evt_1", b"digest-a") is Claim.NEW
    assert await ledger.claim("acme", "evt_1", b"digest-a") is Claim.RETRY
    assert await ledger.claim("acme", "evt_1", b"digest-b") is Claim.CONFLICT
    assert await ledger.claim("other", "evt_1", b"digest-b") is Claim.NEW  # not squatted
    await ledger.release("acme", "evt_1")  # the event could not be stored
    assert await ledger.claim("acme", "evt_1", b"digest-b") is Claim.NEW


async def test_the_memory_store_is_bounded_and_evicts_a_request_before_its_events():
    clock = [0.0]
    ledger = memory_ledger(4, clock)
    await ledger.issue("acme", "req_old")
    clock[0] += 1
    assert await ledger.claim("acme", "evt_old", b"d") is Claim.NEW
    for number in range(3):  # fills the store: the entry closest to expiry goes first
        clock[0] += 1
        await ledger.issue("acme", f"req_{number}")
    store = ledger._store
    assert isinstance(store, MemoryNonceStore) and len(store) == 4
    assert not await ledger.issued("acme", "req_old")  # evicted: can no longer be cited ...
    assert await ledger.claim("acme", "evt_old", b"d") is Claim.RETRY  # ... its event remains


async def test_a_discarded_entry_written_again_outlives_its_old_expiry():
    clock = [0.0]
    store = MemoryNonceStore(10, clock=lambda: clock[0], evict=True)
    assert await store.add("event", "e", 10, b"first")
    await store.discard("event", "e")
    clock[0] += 5
    assert await store.add("event", "e", 10, b"second")
    clock[0] += 6  # past the first write's expiry, before the second's
    assert await store.add("event", "other", 10)  # purges what expired
    assert await store.get("event", "e") == b"second"


async def test_two_replicas_share_the_ledger_through_redis():
    prefix = f"test-aip-ledger-{secrets.token_hex(6)}"
    first = EventLedger(RedisNonceStore(REDIS_URL, prefix, 1.0), 60)
    second = EventLedger(RedisNonceStore(REDIS_URL, prefix, 1.0), 60)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        await first.issue("acme", "req_1")
        assert await second.issued("acme", "req_1")
        assert await first.claim("acme", "evt_1", b"d") is Claim.NEW
        assert await second.claim("acme", "evt_1", b"d") is Claim.RETRY
        assert await second.claim("acme", "evt_1", b"x") is Claim.CONFLICT
        [issued] = client.keys(f"{prefix}:issued:*")
        [claimed] = client.keys(f"{prefix}:event:*")
        assert 59_000 < client.pttl(issued) <= 60_000 < client.pttl(claimed) <= 61_000
    finally:
        for key in client.keys(f"{prefix}:*"):
            client.delete(key)
        client.close()
        await first.aclose()
        await second.aclose()


async def test_an_unreachable_ledger_store_is_a_503():
    ledger = EventLedger(RedisNonceStore(f"redis://127.0.0.1:{free_port()}/0", "p", 0.5), 60)
    with pytest.raises(GatewayError) as refused:
        await ledger.issued("acme", "req_1")
    assert (refused.value.status, refused.value.code) == (503, "events_unavailable")
    await ledger.release("acme", "evt_1")  # best effort: never raises
    await ledger.aclose()
