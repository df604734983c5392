"""AIDIP's endpoints as capabilities of the /.well-known/ai document. What registering and
reading an agent take and answer is written from the metadata schema the registry enforces
(metadata.py), so the document cannot drift from it."""

from __future__ import annotations

from typing import Any

from gateway.capability import Capability, enforced_capability
from gateway.schema_text import shape_text
from gateway.surfaces.aidip.config import Aidip
from gateway.surfaces.aidip.metadata import AGENT_SCHEMA, ANSWERED_AGENT, OPERATION

_SUMMARY = "[] {id, name, description, endpoint, capabilities}"
# An operation's members an invoker reads in aidip_get_agent's answer.
_OPERATION = "operations[] {" + ", ".join(OPERATION["required"]) + "}"


def surface_capabilities(aidip: Aidip | None) -> list[Capability]:
    if aidip is None or not aidip.enabled:
        return []
    base = f"{aidip.base_path}/agents"
    metadata = {"body": f"agent metadata (AIDIP §3, {base}/schema.json): operations, or "
                        "inputs and outputs"}
    return [
        Capability(id="aidip_list_agents", method="GET", endpoint=base,
                   description="List the agents this caller may use, filtered by attributes.",
                   params={"capabilities": "string, optional — comma-separated, all required",
                           "tags": "string, optional — comma-separated, all required",
                           "language": "string, optional — a supported language"},
                   returns=_SUMMARY),
        Capability(id="aidip_search_agents", method="POST", endpoint=f"{base}/search",
                   description="Find agents by filters and free text, best match first (BM25).",
                   params={"query": "string, optional — what the agent should do",
                           "filters": "object, optional — capabilities, tags, "
                                      "supported_languages, publisher, status",
                           "top": f"integer, optional, default {aidip.default_top}, "
                                  f"max {aidip.max_top}"},
                   returns="[] {id, name, description, endpoint, capabilities, score}"),
        Capability(id="aidip_get_agent", method="GET", endpoint=f"{base}/{{id}}",
                   description="Read one agent's full metadata: operations with I/O schemas.",
                   params={"id": "string, required — agent id"},
                   returns=shape_text(ANSWERED_AGENT)),
        Capability(id="aidip_invoke_agent", method="POST",
                   endpoint=f"{base}/{{id}}/invoke/{{operation}}",
                   description="Invoke an agent's operation through the gateway.",
                   params={"id": "string, required — agent id",
                           "operation": "string, optional when the agent has one operation",
                           "body": "JSON, required — the operation's inputs, as its inputs "
                                   f"schema says ({_OPERATION} of aidip_get_agent); "
                                   "an array of them for a batch operation"},
                   returns="outputs: the JSON its operation's outputs schema describes "
                           f"({_OPERATION} of aidip_get_agent), checked before it is "
                           "answered; a batch (an array of inputs): outputs[], in order"),
        enforced_capability(_metadata_request(with_id=False), metadata,
                            id="aidip_register_agent", method="POST", endpoint=base,
                            description="Register an agent (or update one you own); needs a "
                                        "scope.",
                            returns=shape_text(ANSWERED_AGENT, "; 201 new, 200 updated")),
        enforced_capability(_metadata_request(with_id=True), metadata,
                            id="aidip_update_agent", method="PUT", endpoint=f"{base}/{{id}}",
                            description="Replace the metadata of an agent you own.",
                            returns=shape_text(ANSWERED_AGENT)),
        Capability(id="aidip_delete_agent", method="DELETE", endpoint=f"{base}/{{id}}",
                   description="Remove an agent you own (or any, with the admin scope).",
                   params={"id": "string, required — agent id"}, returns="204, no body"),
    ]


def _metadata_request(*, with_id: bool) -> dict[str, Any]:
    """What registering takes (updating, with the agent's id from the path): the metadata
    the registry checks (AGENT_SCHEMA) as the body."""
    body = {name: value for name, value in AGENT_SCHEMA.items() if name not in ("$schema", "$id")}
    properties: dict[str, Any] = {"body": body}
    if with_id:
        properties = {"id": {"type": "string", "minLength": 1, "description": "agent id"},
                      **properties}
    return {"type": "object", "required": list(properties), "properties": properties,
            "additionalProperties": False}
