"""AIDIP's endpoints as capabilities of the /.well-known/ai document."""

from __future__ import annotations

from gateway.capability import Capability
from gateway.surfaces.aidip.config import Aidip

_SUMMARY = "[] {id, name, description, endpoint, capabilities}"


def surface_capabilities(aidip: Aidip | None) -> list[Capability]:
    if aidip is None or not aidip.enabled:
        return []
    base = f"{aidip.base_path}/agents"
    metadata = {"body": "agent metadata JSON (AIDIP §3), required — see /agents/schema.json"}
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
                   returns="id, name, description, version, capabilities, endpoint, operations"),
        Capability(id="aidip_invoke_agent", method="POST",
                   endpoint=f"{base}/{{id}}/invoke/{{operation}}",
                   description="Invoke an agent's operation through the gateway.",
                   params={"id": "string, required — agent id",
                           "operation": "string, optional when the agent has one operation",
                           "body": "JSON, required — the operation's inputs"},
                   returns="the operation's outputs"),
        Capability(id="aidip_register_agent", method="POST", endpoint=base,
                   description="Register an agent (or update one you own); needs a scope.",
                   params=metadata, returns="the stored metadata; 201 new, 200 updated"),
        Capability(id="aidip_update_agent", method="PUT", endpoint=f"{base}/{{id}}",
                   description="Replace the metadata of an agent you own.",
                   params={"id": "string, required — agent id", **metadata},
                   returns="the stored metadata"),
        Capability(id="aidip_delete_agent", method="DELETE", endpoint=f"{base}/{{id}}",
                   description="Remove an agent you own (or any, with the admin scope).",
                   params={"id": "string, required — agent id"}, returns="204, no body"),
    ]
