"""The attack classes of the third security review, as `make fuzz` generators.

Each request here is one the gateway must refuse (`RawRequest.must_refuse` says why); the
oracles count any that it honours. Classes: integers spelled in other scripts' digits, JSON
nested past any sane depth, hostile schemas registered with an AIDIP agent, repeated AIP
signing headers (a bogus one before a valid one), and PDPP tokens whose grants cannot be
enforced exactly (callers of their own, see `grant_callers`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fuzz_raw import RawRequest
from hypothesis import strategies as st

from gateway.surfaces.aip.signing import SIGNATURE, sign

DIGITS = ("²", "١٢", "\uff11\uff12", "৫", " 5", "5 ", "1_0", "+3", "-1", "0x10", "9" * 40, "",
          "1e2")
NUMERIC_TARGETS = ("/v1/streams/messages/records?limit={}", "/v1/search?q=refund&limit={}",
                   "/v1/search/semantic?q=refund&limit={}", "/agents?top={}")
NESTED_TARGETS = (("/pag/events", "extensions"), ("/pag/retrieve", "query_text"),
                  ("/search", "query"), ("/agents/search", "query"), ("/agents", "inputs"))
DEPTHS = (200, 253, 254, 255, 300, 1000)
PLATFORM = "demo-assistant"  # the platform the demo's signing key speaks for
HOSTILE_SCHEMAS: tuple[Any, ...] = (
    {"$ref": "http://127.0.0.1:9/internal"},
    {"$ref": "https://example.com/schema.json"},
    {"$ref": "#"},
    {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}},
    {"type": "nonsense"},
    {"type": "object", "properties": {"text": {"type": "string", "pattern": "(("}}},
    {"type": "object", "properties": {"text": {"type": "string", "pattern": r"(a)\1"}}},
    {"type": "object", "patternProperties": {"(?<=x)y": {}}},
    {"type": "array", "uniqueItems": True},
    {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
)


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


def _agent(inputs: Any) -> dict[str, Any]:
    return {"name": "Fuzz agent", "description": "Registered by make fuzz.",
            "capabilities": ["testing"], "endpoint": "https://fuzz.agents.example.com/run",
            "operations": [{"name": "run", "description": "Runs.", "inputs": inputs,
                            "outputs": {"type": "object"}}]}


def _json_request(method: str, target: str, body: Any, why: str,
                  headers: tuple[tuple[str, str], ...] = ()) -> RawRequest:
    return RawRequest(method, target, (("Content-Type", "application/json"), *headers),
                      json.dumps(body).encode(), why)


@st.composite
def _digits(draw: st.DrawFn) -> RawRequest:
    spelled = draw(st.sampled_from(DIGITS))
    if draw(st.booleans()):
        target = draw(st.sampled_from(NUMERIC_TARGETS)).format(quote(spelled))
        return RawRequest("GET", target, (), b"", "an integer not in ASCII digits")
    return _json_request("POST", "/agents/search", {"query": "x", "top": spelled},
                         "an integer not in ASCII digits")


@st.composite
def _deep(draw: st.DrawFn) -> RawRequest:
    target, member = draw(st.sampled_from(NESTED_TARGETS))
    return _json_request("POST", target, {member: _nested(draw(st.sampled_from(DEPTHS)))},
                         "JSON nested too deep")


@st.composite
def _schemas(draw: st.DrawFn) -> RawRequest:
    inputs = draw(st.sampled_from(HOSTILE_SCHEMAS))
    if draw(st.booleans()):
        return _json_request("POST", "/agents", _agent(inputs), "a hostile schema registered")
    return _json_request("PUT", "/agents/fuzz-agent", _agent(inputs),
                         "a hostile schema registered")


def _repeated_signature(secret: bytes) -> st.SearchStrategy[RawRequest]:
    @st.composite
    def build(draw: st.DrawFn) -> RawRequest:
        body = json.dumps({"aip_version": "0.1", "request_id": "fuzz-signed",
                           "platform": {"id": PLATFORM, "name": "Fuzz"},
                           "query_text": "refund"}).encode()
        valid = sign(secret, "demo-platform", "POST", "/pag/retrieve", body)
        repeated = draw(st.sampled_from(sorted(valid)))
        bogus = "v1=" + "A" * 43 + "=" if repeated == SIGNATURE else "bogus"
        headers = (("Content-Type", "application/json"), (repeated, bogus), *valid.items())
        return RawRequest("POST", "/pag/retrieve", headers, body, "a repeated signing header")
    return build()


def attack_requests(aip_secret_file: Path) -> st.SearchStrategy[RawRequest]:
    secret = aip_secret_file.read_bytes().strip()
    return st.one_of(_digits(), _deep(), _schemas(), _repeated_signature(secret))


# PDPP grants the gateway cannot enforce exactly: each must be refused, never widened.
BAD_GRANTS: dict[str, list[dict[str, Any]]] = {
    "grant-stream-twice": [{"type": "pdpp_grant", "streams": [
        {"name": "messages", "fields": ["id"]},
        {"name": "messages", "fields": ["id", "subject", "body"]}]}],
    "grant-without-fields": [{"type": "pdpp_grant", "streams": [{"name": "messages"}]}],
    "grant-time-without-field": [{"type": "pdpp_grant", "streams": [
        {"name": "messages", "fields": ["id", "subject"],
         "time_constraint": {"since": "2030-01-01T00:00:00Z"}}]}],
    "grant-conflicting-details": [  # one stream under two time windows: which one holds?
        {"type": "pdpp_grant", "streams": [
            {"name": "messages", "fields": ["id"],
             "time_constraint": {"field": "sent_at", "since": "2030-01-01T00:00:00Z"}}]},
        {"type": "pdpp_grant", "streams": [{"name": "messages", "fields": ["id", "body"]}]}],
}


def refuses(status: int, body: bytes) -> bool:
    """A refusal: 4xx, an AIP answer whose status is not `ok`, or a JSON-RPC answer refusing
    the call's parameters (-32602: a tool argument its inputSchema does not admit)."""
    if 400 <= status < 500:
        return True
    try:
        found = json.loads(body)
    except ValueError:
        return False
    if not isinstance(found, dict):
        return False
    if "jsonrpc" in found:
        error = found.get("error")
        return isinstance(error, dict) and error.get("code") == -32602
    return found.get("status") in ("denied", "error")
