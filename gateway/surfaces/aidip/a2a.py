"""The registry read as A2A agent cards, so clients built for A2A find these agents too.

The cards follow A2A 1.0 (`AgentCard` of the a2a-sdk types). A2A's own message bindings are
not served: each card's interface names the AIDIP invocation endpoint with the binding
"AIDIP", which A2A lets cards name, so an A2A client knows where and how to invoke.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.settings import Settings
from gateway.surfaces.aidip.catalog import Agent, Catalog

BINDING = "AIDIP"
PROTOCOL_VERSION = "draft-cui-ai-agent-discovery-invocation-01"
_JSON = ["application/json"]


def security(settings: Settings) -> dict[str, Any]:
    """`securitySchemes` and `securityRequirements` from the gateway's auth section."""
    auth = settings.auth
    if auth is None:
        return {}
    schemes: dict[str, Any] = {}
    if auth.issuers or auth.introspection:
        schemes["bearer"] = {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
    if auth.api_keys is not None:
        schemes["apiKey"] = {"apiKeySecurityScheme": {"location": "header",
                                                      "name": auth.api_keys.header}}
    return {"securitySchemes": schemes,
            "securityRequirements": [{"schemes": {name: {"list": []}}} for name in schemes]}


def agent_card(agent: Agent, catalog: Catalog, settings: Settings) -> dict[str, Any]:
    metadata = agent.metadata
    tags = [*metadata.get("capabilities", []), *metadata.get("tags", [])]
    skills = []
    for operation in metadata.get("operations", []):
        skill = {"id": operation["name"], "name": operation["name"],
                 "description": operation.get("description") or metadata["description"],
                 "tags": tags, "inputModes": _JSON, "outputModes": _JSON}
        examples = [orjson.dumps(example.get("input")).decode()
                    for example in operation.get("examples", []) if "input" in example]
        if examples:
            skill["examples"] = examples
        skills.append(skill)
    card = _card(metadata["name"], metadata["description"], str(metadata["version"]),
                 catalog.invoke_url(agent.id), skills, settings)
    publisher = metadata.get("publisher")
    if publisher and settings.public_base_url:
        card["provider"] = {"organization": publisher, "url": settings.public_base_url}
    return card


def gateway_card(agents: list[Agent], catalog: Catalog, settings: Settings) -> dict[str, Any]:
    """The gateway itself: searching the registry, and one skill per agent the caller sees."""
    service = settings.service
    name = service.name if service else "Agent registry"
    description = (service.description if service else None) or \
        "An AIDIP agent registry: find agents and invoke them through this gateway."
    skills = [{"id": "agent-search", "name": "Find agents",
               "description": "Search the registry by capability, tag, language or free text.",
               "tags": ["discovery", "agents"], "inputModes": _JSON, "outputModes": _JSON}]
    skills += [{"id": agent.id, "name": agent.metadata["name"],
                "description": agent.metadata["description"],
                "tags": list(agent.metadata.get("capabilities", [])),
                "inputModes": _JSON, "outputModes": _JSON} for agent in agents]
    card = _card(name, description, "1", catalog.invoke_base, skills, settings)
    if service and service.organization and service.organization.url:
        card["provider"] = {"organization": service.organization.name,
                            "url": str(service.organization.url)}
    return card


def _card(name: str, description: str, version: str, url: str, skills: list[dict[str, Any]],
          settings: Settings) -> dict[str, Any]:
    return {
        "name": name, "description": description, "version": version,
        "supportedInterfaces": [{"url": url, "protocolBinding": BINDING,
                                 "protocolVersion": PROTOCOL_VERSION}],
        "capabilities": {"streaming": False, "pushNotifications": False},
        "defaultInputModes": _JSON, "defaultOutputModes": _JSON,
        "skills": skills, **security(settings),
    }
