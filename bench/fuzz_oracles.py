"""What `make fuzz` counts: each exchange is judged by the owner of its path, exactly as the
gateway routes it (the same `PathOwners`), against the schemas of the served OpenAPI document.

- `server_errors`: any 5xx, or a connection closed without an answer.
- `outside_envelope`: a body the gateway wrote that is not its owner's envelope (AIDRE error or
  success shape; AIP's RetrieveResponse, event receipt and aip.json; AIDIP's and PDPP's error
  objects; the gateway's error dialect; the /.well-known/ai schema), a wrong media type, or a
  `request_id` that is not the response's `X-Request-Id` (AIP may echo the body's instead).
- `not_for_caller`: a private collection's name or description the caller may not read (and did
  not send itself), a `vector` no vector-return rule allows this caller, a leaked `embedding`.
- `accepted_attacks`: a request of bench/fuzz_attacks.py that the gateway honoured (a hostile
  schema registered, an integer in other digits or JSON nested too deep answered 2xx, a repeated
  signing header let through), or a PDPP answer to a token whose grant cannot be enforced.
- `unauthenticated_upstream`: the recorder saw a passthrough request whose route needs
  credentials (or scopes) the caller lacked, identity headers that are not the caller's, or the
  caller's credential itself.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson
from fuzz_attacks import refuses
from jsonschema import Draft202012Validator

from gateway import registry
from gateway.auth.routes import RouteTable
from gateway.discovery import core_documents
from gateway.loader import LoadedConfig
from gateway.model import ANONYMOUS, Principal, TokenKind
from gateway.policy.rules import Ask
from gateway.routing import PathOwners
from gateway.surface import MountContext

COUNTS = ("requests_sent", "server_errors", "outside_envelope", "not_for_caller",
          "unauthenticated_upstream", "accepted_attacks")
# Refusals by the listener, before any ASGI app runs (gateway/edge.py): the gateway's own
# dialect whatever the path, since no request (so no owner) exists yet.
_LISTENER_CODES = {(400, "invalid_http"), (408, "request_timeout"),
                   (431, "request_header_fields_too_large")}
# Each surface's error object (schema, media type) and where its request id sits.
_ERRORS = {"aidre": ("AidreError", "application/aidre+json"),
           "aip": ("AipRetrieveResponse", "application/json"),
           "aidip": ("AidipError", "application/json"),
           "pdpp": ("PdppError", "application/json")}
_TOP_LEVEL_REQUEST_ID = {"aidre", "aip"}
_MAX_ECHOED_ID = 128
_JSONRPC_CODES = {-32700, -32600, -32601, -32602, -32603}
_PYTHON_TEXTS = ("object has no attribute", "Traceback", "object is not", "unexpected keyword",
                 "NoneType", "KeyError", "TypeError", "ValueError", "takes ", "got an ")
_AIDRE_ROUTES = {"/.well-known/ai-discovery": "AidreDiscovery", "/collections": "AidreCollections",
                 "/search": "AidreSearchResponse"}


@dataclass(frozen=True)
class Caller:
    name: str
    headers: dict[str, str]
    subject: str | None = None
    scopes: frozenset[str] = frozenset()
    refused_grant: bool = False  # its PDPP grant cannot be enforced exactly: always refused


@dataclass
class Exchange:
    caller: Caller
    method: str
    target: str  # as sent: raw path and query
    request_id: str
    sent: bytes  # target and body, to tell an echoed name from a leaked one
    status: int
    headers: dict[str, str]
    body: bytes
    must_refuse: str = ""


@dataclass
class Findings:
    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, what: str) -> None:
        self.counts[kind] += 1
        kept = self.examples.setdefault(kind, [])
        if len(kept) < 5:
            kept.append(what[:600])


class Oracles:
    def __init__(self, loaded: LoadedConfig, openapi: dict[str, Any]) -> None:
        settings = loaded.settings
        context = MountContext(settings, registry.capabilities(settings), loaded.modified)
        mounts = [m for s in registry.surfaces() if (m := s.mount(context)) is not None]
        self.owners = PathOwners(mounts, core_documents(settings))
        # Route access as the gateway decides it: the policy bundle's route rules.
        self.routes = RouteTable(settings.auth, bundle=loaded.bundle)
        self.base_path = settings.aidre.base_path
        self.private = {name: (frozenset(c.scopes), c.description)
                        for name, c in settings.aidre.collections.items()
                        if c.visibility == "private"}
        assert loaded.bundle is not None
        self.bundle = loaded.bundle
        self.components = openapi["components"]
        self.findings = Findings()
        self.statuses: Counter = Counter()
        self.by_request_id: dict[str, tuple[Exchange, str]] = {}

    def schema(self, name: str) -> Draft202012Validator:
        return Draft202012Validator({"$ref": f"#/components/schemas/{name}",
                                     "components": self.components})

    def check(self, exchange: Exchange, upstream_ids: set[str]) -> None:
        self.findings.counts["requests_sent"] += 1
        self.statuses[exchange.status] += 1
        path = _gateway_path(exchange.target)
        owner = self._owner(path)
        self.by_request_id[exchange.request_id] = (exchange, owner)
        label = f"{exchange.caller.name} {exchange.method} {exchange.target[:200]} -> " \
                f"{exchange.status} {exchange.body[:300]!r}"
        if exchange.status >= 500 or exchange.status == 0:  # 0: closed without an answer
            self.findings.add("server_errors", label)
            if exchange.status == 0:
                return
        attack = self._accepted_attack(exchange, owner)
        if attack:
            self.findings.add("accepted_attacks", f"{attack}: {label}")
        from_upstream = owner == "passthrough" and exchange.request_id in upstream_ids \
            and exchange.status not in (502, 504)
        if self._listener_refusal(exchange):
            self.findings.counts["server_rejected"] += 1  # malformed HTTP: never reached the app
            return
        if not from_upstream:
            problem = self._envelope_problem(exchange, owner, path)
            if problem:
                self.findings.add("outside_envelope", f"{problem}: {label}")
            leak = self._leak(exchange)
            if leak:
                self.findings.add("not_for_caller", f"{leak}: {label}")

    @staticmethod
    def _accepted_attack(exchange: Exchange, owner: str) -> str | None:
        if exchange.must_refuse and exchange.status < 500 \
                and not refuses(exchange.status, exchange.body):
            return exchange.must_refuse
        if exchange.caller.refused_grant and owner == "pdpp" and 200 <= exchange.status < 300:
            return "a grant that cannot be enforced was honoured"
        return None

    @staticmethod
    def _listener_refusal(exchange: Exchange) -> bool:
        """A listener refusal: JSON in the gateway dialect whose request id is the header's."""
        try:
            error = orjson.loads(exchange.body)["error"]
        except (ValueError, TypeError, KeyError):
            return False
        return isinstance(error, dict) and (exchange.status, error.get("code")) in \
            _LISTENER_CODES and error.get("request_id") == exchange.headers.get("x-request-id")

    def check_upstream(self, entry: dict[str, Any]) -> None:
        self.findings.counts["upstream_seen"] += 1
        # A call the gateway makes for a request (an MCP tool's inner request, a fill) carries
        # that request's id with a `.n` suffix.
        request_id = (entry.get("request_id") or "").split(".", 1)[0]
        seen = self.by_request_id.get(request_id)
        what = f"upstream saw {entry['method']} {entry['raw_path'][:200]}"
        if entry["authorization"] or entry["api_key"]:
            self.findings.add("unauthenticated_upstream", f"caller's credential forwarded: {what}")
        if seen is None:
            if entry["subject"] is not None:
                self.findings.add("unauthenticated_upstream", f"unattributed identity: {what}")
            return
        exchange, owner = seen
        shared_fill = owner == "pdpp" and entry["subject"] is None  # a stream not per subject
        if entry["subject"] != exchange.caller.subject and not shared_fill:
            self.findings.add("unauthenticated_upstream",
                              f"identity {entry['subject']!r} for {exchange.caller.name}: {what}")
        if owner == "passthrough":
            access = self.routes.access(entry["path"], entry["method"])
            caller = exchange.caller
            if not access.public and (caller.subject is None or not access.scopes <= caller.scopes):
                self.findings.add("unauthenticated_upstream", f"{caller.name}: {what}")

    def _owner(self, path: str) -> str:
        document = self.owners.documents.get(path)
        if document is not None:
            return "document:" + (document.owner.name if document.owner else "core")
        mount = self.owners.owner(path)
        return mount.name if mount is not None else "passthrough"

    def _envelope_problem(self, exchange: Exchange, owner: str, path: str) -> str | None:
        if exchange.status == 304 or exchange.method == "HEAD" or exchange.status == 204:
            return None
        media = exchange.headers.get("content-type", "")
        try:
            body = orjson.loads(exchange.body)
        except orjson.JSONDecodeError:
            return "not JSON"
        if exchange.status >= 400 and owner == "mcp":
            return _jsonrpc_problem(body, exchange.headers.get("x-request-id"), refusal=True)
        if exchange.status >= 400:
            name, wanted = _ERRORS.get(owner, ("GatewayError", "application/json"))
            problem = self._request_id_problem(exchange, owner, body)
            if problem:
                return problem
        else:
            found = self._success(owner, path, exchange.status, body)
            if found is None or isinstance(found, str):
                return found
            name, wanted = found
        if not media.startswith(wanted):
            return f"media type {media!r}, expected {wanted}"
        errors = sorted(self.schema(name).iter_errors(body), key=lambda e: e.path)
        return f"not {name}: {errors[0].message[:200]}" if errors else None

    def _request_id_problem(self, exchange: Exchange, owner: str, body: Any) -> str | None:
        if not isinstance(body, dict):
            return "not a JSON object"
        error = body.get("error")
        found = body.get("request_id") if owner in _TOP_LEVEL_REQUEST_ID \
            else error.get("request_id") if isinstance(error, dict) else None
        if found == exchange.headers.get("x-request-id"):
            return None
        # AIP echoes the body's request_id when one can be read: one the caller sent, capped.
        if owner == "aip" and isinstance(found, str) and 0 < len(found) <= _MAX_ECHOED_ID \
                and any(form in exchange.sent for form in _encodings(found)):
            return None
        return "request_id differs from X-Request-Id"

    def _success(self, owner: str, path: str, status: int,
                 body: Any) -> tuple[str, str] | str | None:
        """(schema, media type) a success must have; a problem; None: any JSON is fine."""
        if owner == "aidre":
            name = self._aidre_success(path)
            return name, "application/json" if name == "AidreDiscovery" \
                else "application/aidre+json"
        if owner == "document:aiendpoint":
            return "AiEndpointDocument", "application/json"
        if owner == "document:aip" and path.endswith("aip.json"):
            return "AipDeclaration", "application/json"
        if owner == "aip":
            if status == 202:
                return "AipEventAccepted", "application/json"
            return ("AipRetrieveResponse", "application/json") if "status" in body \
                else None if isinstance(body, dict) else "not a JSON object"
        if owner == "aidip":  # listings and searches are arrays, the rest objects
            return None if isinstance(body, dict | list) else "not JSON object or array"
        if owner == "mcp":
            return _jsonrpc_problem(body)
        return None if isinstance(body, dict) else "not a JSON object"

    def _aidre_success(self, path: str) -> str:
        local = path.removeprefix(self.base_path) if path != "/.well-known/ai-discovery" else path
        return _AIDRE_ROUTES.get(local, "AidreChunk")

    def _vectors_allowed(self, caller: Caller, collection: str) -> bool:
        """What the policy bundle (the gateway's one decider) says of vectors for `caller`."""
        principal = ANONYMOUS if caller.subject is None else Principal(
            caller.subject, caller.name, caller.scopes, TokenKind.CLIENT)
        return self.bundle.decide(Ask("vector_return", collection, principal)).effect == "allow"

    def _leak(self, exchange: Exchange) -> str | None:
        caller = exchange.caller
        for name, (scopes, description) in self.private.items():
            if scopes <= caller.scopes:
                continue
            for secret in (name.encode(), description.encode()):
                if secret in exchange.body and secret not in exchange.sent:
                    return f"private collection {name!r} shown"
        try:
            body = orjson.loads(exchange.body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(body, dict):
            return None
        if b'"embedding"' in exchange.body:
            return "upstream embedding leaked"
        for result in body.get("results") or ():
            if isinstance(result, dict) and "vector" in result \
                    and not self._vectors_allowed(caller, str(body.get("collection"))):
                return "vector without a rule allowing it"
        return None


def _jsonrpc_problem(body: Any, request_id: str | None = None,
                     refusal: bool = False) -> str | None:
    """A JSON-RPC answer's error must carry one of its spec's codes (or the server range) and a
    message that is not Python's; one the gateway refuses at HTTP level also its request id."""
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        return "not a JSON-RPC object"
    error = body.get("error")
    if error is None:
        return "a refusal without a JSON-RPC error" if refusal else None
    code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(code, int) or not (code in _JSONRPC_CODES or -32099 <= code <= -32000):
        return f"JSON-RPC error code {code!r}"
    if any(text in str(error.get("message", "")) for text in _PYTHON_TEXTS):
        return "Python's exception text in a JSON-RPC error"
    data = error.get("data")
    if refusal and (not isinstance(data, dict) or data.get("request_id") != request_id):
        return "request_id differs from X-Request-Id"
    return None


def _encodings(value: str) -> tuple[bytes, ...]:
    """How a string may appear in a JSON body sent: raw UTF-8 or ASCII-escaped."""
    return value.encode(), json.dumps(value)[1:-1].encode()


def _gateway_path(target: str) -> str:
    """The path as the gateway decides on it (percent-decoded as uvicorn does)."""
    raw = target.split("?", 1)[0]
    return unquote(raw) if "%" in raw else raw
