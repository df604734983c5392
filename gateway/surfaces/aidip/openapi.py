"""AIDIP's part of the gateway's OpenAPI document: the registry (§4), invocation (§5), the
agent-metadata schema, the A2A cards and A2A's JSON-RPC endpoints, with §5.2's error object for
every failure answered over HTTP (A2A's own errors are JSON-RPC results)."""

from __future__ import annotations

from typing import Any

from gateway.openapi import json_content, ref
from gateway.surfaces.aidip.config import Aidip
from gateway.surfaces.aidip.metadata import AGENT_SCHEMA
from gateway.surfaces.aidip.render import CODES
from gateway.surfaces.aidip.search import TEXT_FILTERS

_TAG = "aidip"
_ERRORS = {
    400: "`InvalidInput`: the body or a parameter is invalid; `details.fields` names each.",
    401: "`Unauthorized`: no acceptable credential (registering needs one).",
    403: "`Forbidden`: a scope is missing, the agent is not yours to change, or the agent "
         "refused the call.",
    404: "`NotFound`: no such agent (or not visible to this caller) or operation, or the "
         "agent found nothing the input refers to.",
    405: "`MethodNotAllowed`; `Allow` names the methods served.",
    409: "`Conflict`: the id is taken (whether or not you may see its agent), the registry is "
         "full, the agent changed during the request, or the agent reported a conflict.",
    413: "`PayloadTooLarge`: the body is over the limit.",
    415: "`UnsupportedMediaType`: the body is not application/json.",
    422: "`InvalidInput`: the agent refused the input (its own 422).",
    429: "`RateLimited`, with Retry-After.",
    502: "`AgentError` or `EndpointRefused`: the agent failed or its endpoint is not allowed.",
    503: "`AgentUnavailable` (circuit open, agent down), `RegistryUnavailable` or "
         "`ServiceUnavailable` (auth or rate-limit store down).",
    504: "`AgentTimeout`: the agent did not answer in time.",
}
_READ = (400, 401, 403, 404, 405, 429, 503)
_WRITE = (400, 401, 403, 404, 405, 413, 415, 429, 503)
_INVOKE = (400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 502, 503, 504)
_A2A = (400, 401, 403, 405, 413, 415, 429, 503)


def aidip_openapi(aidip: Aidip) -> dict[str, Any]:
    base = f"{aidip.base_path}/agents"
    agent_id = _path("id", "The agent's id.")
    listing = {"description": "Agents, best match first.",
               "content": json_content({"type": "array", "items": ref("AidipAgentSummary")})}
    one = {"description": "The agent's metadata as this caller may see it.",
           "content": json_content(ref("AidipAgent"))}
    invoked = {"description": "The operation's output (an array for an array of inputs).",
               "content": json_content({})}
    rpc = {"description": "A JSON-RPC 2.0 response (A2A 1.0): SendMessage's result is a "
                          "message with one data part; A2A's errors are JSON-RPC errors.",
           "content": json_content({"type": "object"})}
    card = _operation("The gateway's A2A agent card", {"200": _object("The A2A agent card.")},
                      _READ, public=True)
    paths: dict[str, Any] = {
        "/.well-known/agent-card.json": {"get": card},
        "/.well-known/agent.json": {"get": {**card, "summary": "The gateway's A2A agent card "
                                                               "(where A2A clients before 0.3 "
                                                               "look)"}},
        f"{base}/schema.json": {"get": _operation(
            "The agent-metadata JSON Schema", {"200": _object("The JSON Schema.")}, _READ,
            public=True)},
        base: {
            "get": _operation("List agents", {"200": listing}, _READ,
                              parameters=_list_parameters(aidip)),
            "post": _operation("Register an agent", {"201": one, "200": one},
                               (*_WRITE, 409), body=ref("AidipAgentMetadata")),
        },
        f"{base}/search": {"post": _operation(
            "Search agents", {"200": listing}, _WRITE, body=ref("AidipSearch"))},
        f"{base}/a2a": {"post": _operation(
            "The registry over A2A (JSON-RPC): find agents, or invoke one named as the "
            "message's skill", {"200": rpc}, _A2A, body={"type": "object"})},
        f"{base}/{{id}}": {
            "get": _operation("Read an agent", {"200": one}, _READ, parameters=[agent_id]),
            "put": _operation("Update an agent you own", {"200": one}, (*_WRITE, 409),
                              parameters=[agent_id], body=ref("AidipAgentMetadata")),
            "delete": _operation("Delete an agent you own",
                                 {"204": {"description": "Deleted."}}, (*_READ, 409),
                                 parameters=[agent_id]),
        },
        f"{base}/{{id}}/agent-card.json": {"get": _operation(
            "An agent's A2A card", {"200": _object("The A2A agent card.")}, _READ,
            parameters=[agent_id])},
        f"{base}/{{id}}/a2a": {"post": _operation(
            "The agent over A2A (JSON-RPC): SendMessage with one data part (or text, where "
            "the card's skill takes text/plain) invokes it",
            {"200": rpc}, _A2A, parameters=[agent_id], body={"type": "object"})},
        f"{base}/{{id}}/invoke": {"post": _operation(
            "Invoke the agent's only operation", {"200": invoked}, _INVOKE,
            parameters=[agent_id], body={})},
        f"{base}/{{id}}/invoke/{{operation}}": {"post": _operation(
            "Invoke a named operation", {"200": invoked}, _INVOKE,
            parameters=[agent_id, _path("operation", "The operation's name.")], body={})},
    }
    return {"paths": paths, "components": {"schemas": _components(aidip)}}


def _path(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string", "minLength": 1}}


def _list_parameters(aidip: Aidip) -> list[dict[str, Any]]:
    listed = [{"name": name, "in": "query", "required": False,
               "description": "Comma-separated; every value must match.",
               "schema": {"type": "string"}}
              for name in ("capabilities", "tags", "language", "supported_languages")]
    text = [{"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
            for name in TEXT_FILTERS]
    top = {"name": "top", "in": "query", "required": False,
           "schema": {"type": "integer", "minimum": 1, "maximum": aidip.max_top}}
    return [*listed, *text, top]


def _object(description: str) -> dict[str, Any]:
    return {"description": description, "content": json_content({"type": "object"})}


def _operation(summary: str, ok: dict[str, Any], statuses: tuple[int, ...], *,
               parameters: list[dict[str, Any]] | None = None, body: dict[str, Any] | None = None,
               public: bool = False) -> dict[str, Any]:
    responses = dict(ok)
    for status in statuses:
        response: dict[str, Any] = {"description": _ERRORS[status],
                                    "content": json_content(ref("AidipError"))}
        if status in (405, 429):
            name = "Allow" if status == 405 else "Retry-After"
            response["headers"] = {name: {"schema": {"type": "string"}}}
        responses[str(status)] = response
    operation: dict[str, Any] = {"summary": summary, "tags": [_TAG], "responses": responses}
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = {"required": True, "content": json_content(body)}
    if public:
        operation["security"] = [{}]
    return operation


def _components(aidip: Aidip) -> dict[str, Any]:
    metadata = {key: value for key, value in AGENT_SCHEMA.items()
                if key not in ("$schema", "$id")}
    strings = {"type": "array", "items": {"type": "string"}}
    return {
        "AidipAgentMetadata": metadata,
        "AidipAgent": {
            "type": "object", "required": ["id", "name", "description", "endpoint"],
            "properties": {"id": {"type": "string"}, "name": {"type": "string"},
                           "description": {"type": "string"}, "endpoint": {"type": "string"},
                           "authentication": {"type": "object"},
                           "operations": {"type": "array", "items": {"type": "object"}}}},
        "AidipAgentSummary": {
            "type": "object", "required": ["id", "name", "description", "endpoint",
                                           "capabilities"],
            "properties": {"id": {"type": "string"}, "name": {"type": "string"},
                           "description": {"type": "string"}, "endpoint": {"type": "string"},
                           "capabilities": strings, "score": {"type": "number"}}},
        "AidipSearch": {
            "type": "object", "additionalProperties": False,
            "properties": {"query": {"type": "string"}, "filters": {"type": "object"},
                           "top": {"type": "integer", "minimum": 1,
                                   "maximum": aidip.max_top}}},
        "AidipError": {
            "type": "object", "required": ["error"], "additionalProperties": False,
            "properties": {"error": {
                "type": "object", "required": ["code", "message", "request_id"],
                "additionalProperties": False,
                "properties": {"code": {"enum": CODES}, "message": {"type": "string"},
                               "request_id": {"type": "string"},
                               "details": {"type": "object"}}}}},
    }
