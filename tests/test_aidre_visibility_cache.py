"""AIDRE `record_visibility: lookup: chunk` remembers what it learnt (issue 24): a repeated search
reads no chunk again, a record changed upstream (its validators) is read again, nothing learnt
for one caller serves another, and `cache.ttl` bounds what no validator shows."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest
from aidre_config import collection
from test_aidre import search

from gateway.caching import BoundedCache
from gateway.upstream.memory import Reply, UpstreamRequest

KEYS = {"alice-key": "alice", "bob-key": "bob"}  # both may see internal records


class Articles:
    """A search that gives no visibility, and a chunk read that does; every call counted."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {
            f"a{n}": {"id": f"a{n}", "body": f"text {n}", "updated_at": "2026-01-01T00:00:00Z",
                      "content_hash": f"h{n}", "visibility": "public"} for n in range(4)}
        self.chunk_reads: list[tuple[str, str | None]] = []  # (id, subject)
        self.validators = True  # whether search hits carry updated_at

    def __call__(self, request: UpstreamRequest) -> Reply:
        if request.path == "/search":
            items = [{"id": r["id"], "snippet": r["body"], "score": 1.0,
                      **({"updated_at": r["updated_at"]} if self.validators else {})}
                     for r in self.records.values()]
            return Reply.json({"items": items})
        item = request.path.rsplit("/", 1)[1]
        self.chunk_reads.append((item, request.header("x-aigw-subject")))
        if item not in self.records:
            return Reply.json({"error": "not found"}, 404)
        return Reply.json(self.records[item])


def config(workdir: Path, ttl: int = 60) -> dict[str, Any]:
    policies = workdir / "policies"
    policies.mkdir(exist_ok=True)
    keys = [{"sha256": hashlib.sha256(key.encode()).hexdigest(), "subject": subject,
             "client_id": subject, "scopes": ["staff:read"]} for key, subject in KEYS.items()]
    articles = collection(record_visibility={"scopes": {"internal": ["staff:read"]},
                                             "lookup": "chunk", "cache": {"ttl": ttl}})
    articles.pop("vector_search")
    articles["text_search"].update(path="/search", query={"q": "{query}"})
    articles["chunk"]["path"] = "/articles/{id}"
    articles["chunk"]["mapping"]["metadata"]["visibility"] = "visibility"
    return {"public_base_url": "https://ai.example.com", "policies": str(policies),
            "upstreams": {"helpcentre": {"url": "http://helpcentre.test"}},
            "auth": {"default_access": "public", "api_keys": {"keys": keys}},
            "aidre": {"collections": {"articles": articles}}}


def ids(gateway: Any, key: str | None = None) -> list[str]:
    response = search(gateway, {"query": "text", "collection": "articles"}, key=key)
    assert response.status_code == 200, response.text
    return [r["id"].removeprefix("articles:") for r in response.json()["results"]]


@pytest.fixture
def upstream() -> Articles:
    return Articles()


def test_a_repeated_search_reads_no_chunk_again(upstream, inprocess_factory, tmp_path):
    gateway = inprocess_factory(config(tmp_path), {"helpcentre": upstream})
    assert ids(gateway) == ["a0", "a1", "a2", "a3"]
    assert len(upstream.chunk_reads) == 4
    assert ids(gateway) == ["a0", "a1", "a2", "a3"]
    assert len(upstream.chunk_reads) == 4


def test_a_record_changed_upstream_is_read_again(upstream, inprocess_factory, tmp_path):
    gateway = inprocess_factory(config(tmp_path), {"helpcentre": upstream})
    assert ids(gateway) == ["a0", "a1", "a2", "a3"]
    upstream.records["a1"].update(visibility="internal", updated_at="2026-02-01T00:00:00Z")
    upstream.chunk_reads.clear()
    assert ids(gateway) == ["a0", "a2", "a3"]  # anonymous: an internal record is hidden
    assert upstream.chunk_reads == [("a1", None)]


def test_nothing_learnt_for_one_caller_serves_another(upstream, inprocess_factory, tmp_path):
    gateway = inprocess_factory(config(tmp_path), {"helpcentre": upstream})
    upstream.records["a2"]["visibility"] = "internal"
    assert ids(gateway, "alice-key") == ["a0", "a1", "a2", "a3"]
    assert ids(gateway) == ["a0", "a1", "a3"]  # anonymous: read for itself, hidden
    assert ids(gateway, "bob-key") == ["a0", "a1", "a2", "a3"]
    readers = [subject for _, subject in upstream.chunk_reads]
    assert readers == ["alice"] * 4 + [None] * 4 + ["bob"] * 4
    assert ids(gateway, "alice-key") == ["a0", "a1", "a2", "a3"]
    assert len(upstream.chunk_reads) == 12


def test_hits_without_validators_are_always_read(upstream, inprocess_factory, tmp_path):
    upstream.validators = False
    gateway = inprocess_factory(config(tmp_path), {"helpcentre": upstream})
    ids(gateway)
    ids(gateway)
    assert len(upstream.chunk_reads) == 8


def test_ttl_zero_remembers_nothing(upstream, inprocess_factory, tmp_path):
    gateway = inprocess_factory(config(tmp_path, ttl=0), {"helpcentre": upstream})
    ids(gateway)
    ids(gateway)
    assert len(upstream.chunk_reads) == 8


def test_a_change_no_validator_shows_is_seen_after_the_ttl(upstream, inprocess_factory,
                                                           tmp_path):
    gateway = inprocess_factory(config(tmp_path, ttl=1), {"helpcentre": upstream})
    assert ids(gateway) == ["a0", "a1", "a2", "a3"]
    upstream.records["a3"]["visibility"] = "internal"  # updated_at unchanged: a stale upstream
    assert ids(gateway) == ["a0", "a1", "a2", "a3"]  # remembered: the staleness `ttl` allows
    time.sleep(1.1)
    assert ids(gateway) == ["a0", "a1", "a2"]


def test_the_bounded_cache_keeps_to_its_entries_and_bytes():
    cache: BoundedCache[str, int] = BoundedCache(max_entries=3, max_bytes=800)
    for n in range(5):
        cache.put(f"k{n}", n, 100)
    assert len(cache) == 3 and cache.get("k0") is None and cache.get("k4") == 4
    cache.put("big", 0, 101)  # past an eighth of max_bytes: not kept
    assert cache.get("big") is None
    cache.get("k2")  # used: kept over k3
    for n in range(5, 7):
        cache.put(f"k{n}", n, 100)
    assert cache.get("k2") == 2 and cache.get("k3") is None and cache.bytes == 300
    small = BoundedCache[str, int](max_entries=100, max_bytes=800)
    for n in range(20):
        small.put(f"k{n}", n, 100)
    assert small.bytes <= 800 and len(small) == 8
