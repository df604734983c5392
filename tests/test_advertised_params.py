"""What agents read must be what the gateway enforces: a differential test between the
advertisement (each capability's `params` in `/.well-known/ai`, each MCP tool's
`inputSchema`) and the enforcer (the route, and the MCP argument check in front of it).

For every capability and every MCP tool of the demo config, from a call known to be valid:
- the call with only what the advertisement marks required (members of object parameters
  too) is not refused for a missing member: every field the enforcer requires is advertised
  as required;
- each parameter or member the advertisement lists, added to it, is not refused as unknown:
  every advertised parameter is one the enforcer takes.
Refusals for a value (a sample of the advertised type the route finds wrong) are no finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from idp_helpers import running_idp
from inprocess import InProcessGateway
from processes import Gateway
from test_mcp import KEY, arguments, demo_config, policies, token

from gateway.surfaces.aidip.metadata import AGENT_SCHEMA
from gateway.surfaces.aip.request import schema_validator

SCOPES = "articles:read messages:read tasks:run agents:register agents:find"
JSON_TYPES = ("string", "integer", "number", "boolean", "object", "array")
SAMPLES: dict[str | None, Any] = {"string": "x", "integer": 1, "number": 0.5, "boolean": True,
                                  "object": {}, "array": [], None: "x"}
UNKNOWN = re.compile(r"unknown (or unsupported )?(member|field|argument|parameter)|"
                     r"unexpected (field|member|argument|parameter)|not an argument",
                     re.IGNORECASE)
MISSING = re.compile(r"\bis required\b|required field is missing|\bis missing\b",
                     re.IGNORECASE)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
PER_SURFACE = {"/mcp/aidre": {"search": {"query": "reset my password"},
                              "fetch": {"id": "articles:art-0001"}}}


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """The MCP tests' demo gateway, with rate limits it does not reach: this test makes a few
    hundred calls in seconds, and a 429 would hide what the route says."""
    workdir = tmp_path_factory.mktemp("advertised")
    with running_idp(workdir) as idp:
        idp.publish(KEY)
        config = demo_config(backend, idp.url, policies(workdir))
        for rule in config["rate_limits"]["rules"]:
            rule.update(limit="100000/minute")
            rule.pop("burst", None), rule.pop("tiers", None)
        started = InProcessGateway(config, workdir)
        yield started
        started.stop()


@dataclass
class Param:
    required: bool
    kind: str | None = None
    members: dict[str, Param] = field(default_factory=dict)
    values: list[Any] = field(default_factory=list)  # those allowed, when a schema lists them

    def sample(self) -> Any:
        return self.values[0] if self.values else SAMPLES[self.kind]


def from_text(text: str) -> Param:
    """A capability parameter: `type, required|optional[, ...] — meaning`, its members (of an
    object) as `{name: type, optional?: type}` or a trailing list of names."""
    head, _, meaning = text.partition("—")
    qualifiers = [part.strip().lower() for part in head.split(",")]
    kind = qualifiers[0] if qualifiers[0] in JSON_TYPES else None
    param = Param("required" in qualifiers[1:], kind)
    if kind == "object" and "{" in meaning and "}" in meaning:
        listed = meaning[meaning.rindex("{") + 1:meaning.rindex("}")]
        for item in listed.split(","):
            name, _, member_kind = item.partition(":")
            name = name.strip()
            if name:
                param.members[name.rstrip("?")] = Param(
                    not name.endswith("?"), member_kind.strip() or None)
    elif kind == "object":
        names = [part.strip() for part in meaning.split(",") if part.strip() != "..."]
        if len(names) > 1 and all(IDENTIFIER.fullmatch(name) for name in names):
            param.members = {name: Param(False) for name in names}  # required: not said
    return param


def from_schema(schema: dict[str, Any], required: bool = False) -> Param:
    kind = schema.get("type")
    param = Param(required, kind if isinstance(kind, str) else None,
                  values=list(schema.get("enum", ())))
    needed = set(schema.get("required", ()))
    for name, sub in schema.get("properties", {}).items():
        param.members[name] = from_schema(sub, name in needed)
    return param


def required_only(baseline: dict[str, Any], advertised: dict[str, Param]) -> dict[str, Any]:
    call = {}
    for name, param in advertised.items():
        if not param.required:
            continue
        value = baseline.get(name, param.sample())
        if param.members and isinstance(value, dict):
            value = {member: value.get(member, sub.sample())
                     for member, sub in param.members.items() if sub.required}
        call[name] = value
    return call


def one_more(call: dict[str, Any], baseline: dict[str, Any],
             advertised: dict[str, Param]) -> list[tuple[str, dict[str, Any]]]:
    """`call` with one more advertised parameter or member, for each one it lacks."""
    more = []
    for name, param in advertised.items():
        if name not in call:
            more.append((name, {**call, name: baseline.get(name, param.sample())}))
            continue
        given, sent = call[name], baseline.get(name)
        if not isinstance(given, dict):
            continue
        for member, sub in param.members.items():
            if member not in given:
                value = sent.get(member, sub.sample()) if isinstance(sent, dict) else \
                    sub.sample()
                more.append((f"{name}.{member}", {**call, name: {**given, member: value}}))
    return more


def refusal(answer: httpx.Response) -> tuple[str, str] | None:
    """("missing" | "unknown", what was said) when the call was refused for a member."""
    body = answer.json()
    if "error" in body:
        data = body["error"].get("data") or {}
        said = f"{body['error'].get('message')} {data}"
        if body["error"].get("code") == -32602 and data.get("constraint") == "required":
            return "missing", said
        if body["error"].get("code") == -32602 and data.get("constraint") == "unknown":
            return "unknown", said
        return None
    result = body["result"]
    if not result.get("isError"):
        return None
    error = result["structuredContent"]["error"]
    said = f"{error.get('code')}: {error.get('message')}"
    assert error.get("status") != 429, said  # no finding can be read from it
    if error.get("status") not in (400, 422):
        return None
    if UNKNOWN.search(said):
        return "unknown", said
    if MISSING.search(said):
        return "missing", said
    return None


def rpc(url: str, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    return httpx.post(url, json=body, timeout=30, headers={
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {token(SCOPES, 'u-001')}"})


def findings(url: str, name: str, baseline: dict[str, Any],
             advertised: dict[str, Param]) -> list[str]:
    found = []
    call = required_only(baseline, advertised)
    said = refusal(rpc(url, "tools/call", {"name": name, "arguments": call}))
    if said is not None:
        found.append(f"{name}: with what is advertised as required {call}: {said}")
    # Each addition is tried on a call the enforcer takes: the one above, else the valid one
    # cut to what is advertised.
    start = call if said is None else {name: value for name, value in baseline.items()
                                       if name in advertised}
    for added, more in one_more(start, baseline, advertised):
        said = refusal(rpc(url, "tools/call", {"name": name, "arguments": more}))
        if said is not None and said[0] == "unknown":
            found.append(f"{name}: advertised {added} is refused: {said[1]}")
    return found


def test_every_capability_advertises_what_its_route_enforces(gateway):
    document = httpx.get(gateway.url + "/.well-known/ai").json()
    baselines = arguments("messages")
    found, tried = [], 0
    for capability in document["capabilities"]:
        if capability["id"] == "mcp":
            continue
        advertised = {name: from_text(text)
                      for name, text in capability.get("params", {}).items()}
        found += findings(gateway.url + "/mcp", capability["id"],
                          baselines[capability["id"]], advertised)
        tried += 1
    assert tried >= 13
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", ["/mcp", "/mcp/pdpp", "/mcp/aidre", "/mcp/aidip", "/mcp/aip"])
def test_every_mcp_tool_advertises_what_its_route_enforces(gateway, path):
    tools = rpc(gateway.url + path, "tools/list").json()["result"]["tools"]
    assert tools
    baselines = {**arguments("messages"), **{name.removeprefix("pdpp_"): value for name, value
                                             in arguments("messages").items()
                                             if name.startswith("pdpp_")},
                 **PER_SURFACE.get(path, {})}
    found = []
    for tool in tools:
        advertised = from_schema(tool["inputSchema"]).members
        found += findings(gateway.url + path, tool["name"], baselines[tool["name"]], advertised)
    assert not found, "\n".join(found)


def test_the_texts_are_written_from_the_schemas_the_routes_enforce(gateway):
    document = httpx.get(gateway.url + "/.well-known/ai").json()
    capabilities = {c["id"]: c for c in document["capabilities"]}
    retrieve = schema_validator("retrieve-request").schema
    params = capabilities["aip_retrieve"]["params"]
    assert set(params) == set(retrieve["properties"])
    for name, member in retrieve["properties"].items():
        advertised = from_text(params[name])
        assert advertised.required == (name in retrieve["required"]), name
        assert set(advertised.members) == set(member.get("properties", {})), name
        assert {m for m, p in advertised.members.items() if p.required} == \
            set(member.get("required", ())), name
    body = from_text(capabilities["aidip_register_agent"]["params"]["body"])
    assert set(body.members) == set(AGENT_SCHEMA["properties"])
    assert {m for m, p in body.members.items() if p.required} == set(AGENT_SCHEMA["required"])
    # The AI Discovery scorers count a `returns` as specific when it names fields.
    for capability in capabilities.values():
        returns = capability.get("returns", "")
        assert len(returns) > 5 and ("," in returns or "[" in returns
                                     or re.search(r"\bwith\b", returns)), capability["id"]
    assert "operations[] {name, inputs, outputs}" in capabilities["aidip_invoke_agent"]["returns"]
    assert capabilities["aidip_update_agent"]["returns"].startswith(
        "id, name, description, version, capabilities[], endpoint, operations[] {")
