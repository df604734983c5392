"""AIP remembers the articles its `article` operation read (issue 24): a repeated retrieve reads
no article again, an article changed upstream (its validators) is read again, nothing read for
one caller serves another, a hit without validators is always read, and `article_cache.ttl: 0`
remembers nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_aip import ask

from gateway.upstream.memory import Reply, UpstreamRequest

KEYS = {"alice-key": "alice", "bob-key": "bob"}  # both may see internal articles
SENTENCES = " ".join(f"Sentence {n} says something about refunds." for n in range(12))


class Articles:
    """A search whose hits carry updated_at, and whole articles; article reads counted."""

    def __init__(self) -> None:
        self.articles = {f"a{n}": {"id": f"a{n}", "body": f"Article {n}. {SENTENCES}",
                                   "title": f"Article {n}", "visibility": "public",
                                   "updated_at": "2026-01-01T00:00:00Z"} for n in range(3)}
        self.reads: list[tuple[str, str | None]] = []  # (id, subject)
        self.validators = True

    def __call__(self, request: UpstreamRequest) -> Reply:
        if request.path == "/search":
            return Reply.json({"items": [
                {"id": a["id"], "snippet": a["title"],
                 **({"updated_at": a["updated_at"]} if self.validators else {})}
                for a in self.articles.values()]})
        item = request.path.rsplit("/", 1)[1]
        self.reads.append((item, request.header("x-aigw-subject")))
        return Reply.json(self.articles[item])


def config(workdir: Path, **cache: Any) -> dict[str, Any]:
    (workdir / "policies").mkdir(exist_ok=True)
    keys = [{"sha256": hashlib.sha256(key.encode()).hexdigest(), "subject": subject,
             "client_id": subject, "scopes": ["articles:read"]} for key, subject in KEYS.items()]
    source = {
        "record_visibility": {"scopes": {"internal": ["articles:read"]}},
        "search": {"upstream": "cms", "path": "/search", "query": {"q": "{query}"},
                   "mapping": {"items": "items", "id": "id", "text": "snippet",
                               "metadata": {"updated_at": "updated_at"}}},
        "article": {"upstream": "cms", "path": "/articles/{id}",
                    "mapping": {"id": "id", "text": "body", "fields": {"title": "title"},
                                "metadata": {"visibility": "visibility",
                                             "updated_at": "updated_at"}}},
        **({"article_cache": cache} if cache else {}),
    }
    return {"public_base_url": "https://ai.example.com", "policies": str(workdir / "policies"),
            "upstreams": {"cms": {"url": "http://cms.test"}},
            "auth": {"default_access": "public", "api_keys": {"keys": keys}},
            "aip": {"publisher": {"id": "acme", "name": "Acme", "domain": "acme.example.com"},
                    "editorial_domains": ["support"], "sources": {"help": source},
                    "retrieval": {"max_chunks": 20, "max_tokens": 5000, "chunk_tokens": 40}}}


def articles_in(gateway: Any, key: str | None = None) -> set[str]:
    headers = {"X-API-Key": key} if key else {}
    response = httpx.post(gateway.url + "/pag/retrieve", json=ask(query="refunds"),
                          headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["status"] == "ok", document
    return {chunk["id"].split("#")[0] for chunk in document["content"]["chunks"]}


@pytest.fixture
def upstream() -> Articles:
    return Articles()


def test_a_repeated_retrieve_reads_no_article_again(upstream, inprocess_factory, tmp_path):
    gateway = inprocess_factory(config(tmp_path), {"cms": upstream})
    first = articles_in(gateway)
    assert first == {"a0", "a1", "a2"} and len(upstream.reads) == 3
    assert articles_in(gateway) == first and len(upstream.reads) == 3


def test_an_article_changed_upstream_is_read_again(upstream, inprocess_factory, tmp_path):
    gateway = inprocess_factory(config(tmp_path), {"cms": upstream})
    articles_in(gateway)
    upstream.articles["a1"].update(visibility="internal", updated_at="2026-02-01T00:00:00Z")
    upstream.reads.clear()
    assert articles_in(gateway) == {"a0", "a2"}  # anonymous: the internal article is left out
    assert upstream.reads == [("a1", None)]


def test_nothing_read_for_one_caller_serves_another(upstream, inprocess_factory, tmp_path):
    gateway = inprocess_factory(config(tmp_path), {"cms": upstream})
    upstream.articles["a2"]["visibility"] = "internal"
    assert articles_in(gateway, "alice-key") == {"a0", "a1", "a2"}
    assert articles_in(gateway) == {"a0", "a1"}
    assert articles_in(gateway, "bob-key") == {"a0", "a1", "a2"}
    assert [subject for _, subject in upstream.reads] == ["alice"] * 3 + [None] * 3 + ["bob"] * 3


def test_hits_without_validators_are_always_read(upstream, inprocess_factory, tmp_path):
    upstream.validators = False
    gateway = inprocess_factory(config(tmp_path), {"cms": upstream})
    articles_in(gateway)
    articles_in(gateway)
    assert len(upstream.reads) == 6


def test_ttl_zero_remembers_nothing(upstream, inprocess_factory, tmp_path):
    gateway = inprocess_factory(config(tmp_path, ttl=0), {"cms": upstream})
    articles_in(gateway)
    articles_in(gateway)
    assert len(upstream.reads) == 6
