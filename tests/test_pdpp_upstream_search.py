"""PDPP search delegated to an upstream that limits its search to columns, in memory: it is sent
only the fields the caller may match, its answer is the records, and the gateway reads nothing
else of the stream (no snapshot, no index of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inprocess import memory_gateway
from pdpp_config import CLIENT_KEY, OWNER_KEY, demo_pdpp
from pdpp_config import config as pdpp_gateway_config

from gateway.surfaces.pdpp.streams import fts5_match
from gateway.upstream.memory import Reply, UpstreamRequest

MESSAGES = [{"id": f"m{index}", "thread_id": "t1", "from": "a@example.com",
             "to": "b@example.com", "subject": f"Refund {index}", "body": f"Card {index}",
             "sent_at": f"2026-01-0{index}T10:00:00Z", "labels": [], "read": False,
             "priority": "normal"} for index in range(1, 6)]


class ColumnSearchApi:
    """Answers /search with the messages, newest first; every other path is recorded as a
    read the gateway should not have made."""

    def __init__(self) -> None:
        self.searches: list[dict[str, str]] = []
        self.other: list[str] = []

    def __call__(self, request: UpstreamRequest) -> Reply:
        if request.path != "/search":
            self.other.append(request.path)
            return Reply.json({"items": MESSAGES})
        self.searches.append(dict(request.query))
        return Reply.json({"items": list(reversed(MESSAGES))})


def searching_config() -> dict[str, Any]:
    pdpp = demo_pdpp()
    messages = pdpp["streams"]["messages"]
    messages["search"]["lexical"] = {"operation": {
        "upstream": "legacy", "path": "/search",
        "query": {"match": "{fts5_match}", "size": "{limit}"}, "max_items": 40,
        "mapping": {"items": "items", "id": "id"}}}
    pdpp["streams"] = {"messages": messages}
    return pdpp_gateway_config("http://legacy.invalid", pdpp, legacy="http://legacy.invalid")


async def test_the_upstream_search_answers_alone_sent_only_the_granted_fields(tmp_path: Path):
    api = ColumnSearchApi()
    async with memory_gateway(searching_config(), tmp_path, {"legacy": api}) as gateway:
        answers = {}
        for key in (OWNER_KEY, CLIENT_KEY):
            response = await gateway.client.get("/v1/search", params={
                "q": 'refund "x" OR body:', "streams[]": "messages"}, headers={"X-API-Key": key})
            assert response.status_code == 200, response.text
            answers[key] = response.json()["data"]
    assert [s["match"] for s in api.searches] == [
        '{subject body} : ("refund" """x""" "OR" "body:")',  # the owner matches both fields
        '{subject} : ("refund" """x""" "OR" "body:")']  # the client's grant: subject only
    assert {s["size"] for s in api.searches} == {"40"}  # max_items, below max_records
    assert api.other == []  # no records page, no record read: nothing kept
    assert [r["record_key"] for r in answers[OWNER_KEY]] == ["m5", "m4", "m3", "m2", "m1"]
    assert all(r["matched_fields"] == ["subject"] for r in answers[CLIENT_KEY])


def test_fts5_match_quotes_every_word_and_caps_their_number():
    assert fts5_match("a  b", ("name",)) == '{name} : ("a" "b")'
    assert fts5_match('say "hi"', ("x", "y")) == '{x y} : ("say" """hi""")'
    assert fts5_match(" ".join(f"w{i}" for i in range(100)), ("x",)).count('" "') == 31
    assert fts5_match("w w w v", ("x",)) == '{x} : ("w" "v")'  # each word once
