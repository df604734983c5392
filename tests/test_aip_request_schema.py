"""AIP RetrieveRequest bodies are accepted by a fast check (jsonschema-rs) and refused, with
the member named, by `jsonschema` (issue 24): the fast check never accepts a body `jsonschema`
refuses."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from gateway.errors import GatewayError
from gateway.surfaces.aip.request import FORMATTED, _conforms, _validator, parse_retrieve

BODY = {"aip_version": "0.1", "request_id": "r-1", "timestamp": "2026-01-15T14:30:00Z",
        "platform": {"id": "p", "software": "s"},
        "intent": {"domain": "support.billing", "subdomain": "a.b", "confidence": 0.5},
        "context": {"language": "en-US", "placement": "conversation",
                    "geography": {"country": "US"}},
        "runtime": {"session_id": "s", "turn_index": 0, "query_text": "refund",
                    "latency_budget_ms": 100},
        "extensions": {"aigw": {"mode": "chunks", "use": ["x"]}}}
VALUES = [None, True, False, 0, 1, -1, 1.0, 0.5, 2.5, 1e300, 10**30, "", "a", "A", "en-US",
          "en-us", "US", "us", "support\n", "a.b\n", "0.1", "0.1\n", "2026-01-15T14:30:00Z",
          "2016-12-31T23:59:60Z", "2026-01-15t14:30:00z", "2026-02-30T00:00:00Z", "é", "\x00",
          [], [1], {}, {"a": 1}, "support.billing", "a..b", "a.-b", "1.0"]


def _formats(schema: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    found = [(path, schema["format"])] if "format" in schema else []
    for name, member in schema.get("properties", {}).items():
        found += _formats(member, (*path, name))
    for key in ("items", "additionalProperties", "$defs", "anyOf", "oneOf", "allOf"):
        walked = key not in schema or (key == "additionalProperties"
                                       and isinstance(schema[key], bool))
        assert walked, f"{path}: walk {key} too"
    return found


def test_the_schema_has_no_format_but_the_one_checked_by_jsonschema():
    assert _formats(_validator("retrieve-request").schema) == [FORMATTED]


def _paths(body: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, value in body.items():
        found.append((*prefix, name))
        if isinstance(value, dict):
            found += _paths(value, (*prefix, name))
    return found


def _mutated(rng: random.Random) -> dict:
    body = copy.deepcopy(BODY)
    for _ in range(rng.randint(1, 3)):
        *parents, name = rng.choice(_paths(BODY))
        holder: Any = body
        for parent in parents:
            holder = holder.get(parent) if isinstance(holder, dict) else None
        if not isinstance(holder, dict):
            continue
        roll = rng.random()
        if roll < 0.1:
            holder.pop(name, None)
        elif roll < 0.15:
            holder[f"extra{rng.randint(0, 2)}"] = 1
        else:
            holder[name] = copy.deepcopy(rng.choice(VALUES))
    return body


def test_the_fast_check_never_accepts_what_jsonschema_refuses():
    validator, rng = _validator("retrieve-request"), random.Random(24)
    accepted = 0
    for _ in range(20_000):
        body = _mutated(rng)
        if _conforms(body):
            accepted += 1
            assert validator.is_valid(body), json.dumps(body)
    assert accepted > 1000  # the mutations leave many bodies valid, so both sides are tried


@pytest.mark.parametrize("member,value,where", [
    ("timestamp", "2016-12-31T23:59:60Z", "timestamp"),  # jsonschema-rs would take it
    ("timestamp", "yesterday", "timestamp"),
    ("aip_version", "0.2", "aip_version"),
])
def test_a_refused_body_names_its_member(member, value, where):
    with pytest.raises(GatewayError) as refused:
        parse_retrieve({**BODY, member: value})
    assert refused.value.code == "invalid_request" and f" at {where}: " in refused.value.message


def test_a_body_only_jsonschema_accepts_is_accepted_as_before():
    body = copy.deepcopy(BODY)
    body["intent"]["domain"] = "support\n"  # Python's `$` matches before a final newline
    assert not _conforms(body)
    assert parse_retrieve(body).domain == "support\n"


def test_a_short_body_skips_the_shape_walk_only_where_the_walk_finds_nothing():
    from gateway.surfaces.aip.bounds import (
        MAX_DEPTH,
        MAX_STRING_CHARS,
        _small,
        _within,
        shape_problem,
    )

    def nested(levels: int) -> Any:
        document: Any = "x"
        for _ in range(levels):
            document = [document]
        return document

    bodies = [nested(MAX_DEPTH), nested(MAX_DEPTH + 1), {"a": "é" * (MAX_STRING_CHARS // 2)},
              {"a": "b" * MAX_STRING_CHARS}, {"b" * (MAX_STRING_CHARS - 8): 1},
              {"q": "\\u00e9" * 300}, {"runtime": {"query_text": "long " * 100}}]
    limits = {("runtime", "query_text"): 50}
    for document in bodies:
        raw = json.dumps(document, ensure_ascii=False).encode()
        assert shape_problem(document, limits, raw) == shape_problem(document, limits)
        assert _within(document) or not _small(raw)  # the shortcut never skips a fault
    assert shape_problem(nested(MAX_DEPTH + 1)) is not None
