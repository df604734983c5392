"""Any id an upstream returns is addressable: percent-encoded into chunk URLs by the client
and into upstream paths by the gateway, decoded once, bounded only in length and refused only
for control characters and dot segments (issue 21, item 1)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, urlsplit

from aidre_config import aidre_gateway_config
from inprocess import memory_gateway

from gateway.ids import addressable
from gateway.upstream.memory import Reply, UpstreamRequest

IDS = ["g++", "libstdc++6", "a/b", "50%", "with space", "ünïcödé", "x?y#z", "a;b=c", "%2F"]
TEXT = {item: f"Record {item}: a plain text body." for item in IDS}


def legacy(request: UpstreamRequest) -> Reply:
    if request.path == "/api/v1/articles/search":
        return Reply.json({"items": [{"id": i, "title": i, "snippet": TEXT[i]} for i in IDS]})
    raw = urlsplit(request.url).path.removeprefix("/api/v1/articles/")
    assert "/" not in raw  # one path segment, whatever the id holds
    item = request.path.removeprefix("/api/v1/articles/")
    if item not in TEXT:
        return Reply.json({"error": "not found"}, status=404)
    return Reply.json({"id": item, "body": TEXT[item], "title": item})


async def test_every_id_the_upstream_returns_can_be_fetched(tmp_path: Path):
    config = aidre_gateway_config("http://legacy.test", tmp_path)
    async with memory_gateway(config, tmp_path, {"helpcentre": legacy}) as gateway:
        found = await gateway.client.post(
            "/search", json={"query": "record", "collection": "articles", "top_k": 20},
            headers={"content-type": "application/aidre+json"})
        assert found.status_code == 200, found.text
        ids = [result["id"] for result in found.json()["results"]]
        assert ids == [f"articles:{item}" for item in IDS]  # the upstream's order, ids whole
        for item in IDS:
            chunk = await gateway.client.get("/chunks/" + quote(f"articles:{item}", safe=":"))
            assert chunk.status_code == 200, (item, chunk.text)
            assert chunk.json()["id"] == f"articles:{item}"
            assert chunk.json()["text"] == TEXT[item]


async def test_an_id_no_path_can_carry_is_refused_before_any_upstream_call(tmp_path: Path):
    config = aidre_gateway_config("http://legacy.test", tmp_path)
    async with memory_gateway(config, tmp_path, {"helpcentre": legacy}) as gateway:
        for sent in ["articles:..", "articles:%2E%2E", "articles:a%0Ab", "articles:" + "x" * 257]:
            answer = await gateway.client.get("/chunks/" + sent)
            refused = (answer.status_code, answer.json()["error"])
            assert refused in ((404, "not_found"), (400, "invalid_request")), (sent, refused)
        assert gateway.upstreams is not None
        assert not [r for r in gateway.upstreams.requests("helpcentre")
                    if r.path != "/api/v1/articles/search"]


def test_addressable_bounds_length_and_control_characters_only():
    assert all(addressable(item) for item in [*IDS, "x" * 256, "."[:0] + "..."])
    assert not any(addressable(item) for item in ["", ".", "..", "x" * 257, "a\tb", "\x7f",
                                                  "a\u0085b"])
