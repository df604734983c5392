"""The registry read as A2A agent cards, so that A2A clients find these agents and call them.

The cards follow A2A 1.0 (`AgentCard` of the a2a-sdk types). Each lists first the JSON-RPC
interface a2a-sdk clients call (a2a_rpc.py), then the AIDIP invocation endpoint under the
binding "AIDIP", which A2A lets cards name. An agent's skills are its operations; each skill's
`inputModes` say whether it takes a text part besides a data part (text_parts.py). The gateway's
own card is the registry as an agent: its skills are finding agents (the default) and, one per
agent the caller may see, invoking that agent. The provider is the configured service's
organization; the security members say what the route rules require (a2a_security.py).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.settings import Settings
from gateway.surfaces.aidip.a2a_security import CardSecurity
from gateway.surfaces.aidip.catalog import Agent, Catalog, Operation
from gateway.surfaces.aidip.text_parts import TEXT_MODE, input_modes

BINDING = "AIDIP"
PROTOCOL_VERSION = "draft-cui-ai-agent-discovery-invocation-01"
JSONRPC = "JSONRPC"  # a2a-sdk's TransportProtocol.JSONRPC
A2A_VERSION = "1.0"
SEARCH_SKILL = "agent-search"  # the gateway card's default skill; never an agent's id there
_JSON = ["application/json"]


class Cards:
    """One config generation's cards."""

    def __init__(self, catalog: Catalog, settings: Settings, security: CardSecurity) -> None:
        self.catalog = catalog
        self.settings = settings
        self.security = security
        self.base = f"{catalog.settings.base_path}/agents"  # the route paths' prefix

    def agent(self, agent: Agent) -> dict[str, Any]:
        metadata = agent.metadata
        rpc = f"{self.base}/{agent.id}/a2a"
        tags = [*metadata.get("capabilities", []), *metadata.get("tags", [])]
        skills = []
        for operation in metadata.get("operations", []):
            modes = input_modes(_takes_text(agent.operations.get(operation["name"])))
            skill = {"id": operation["name"], "name": operation["name"],
                     "description": operation.get("description") or metadata["description"],
                     "tags": tags, "inputModes": modes, "outputModes": _JSON,
                     **self._skill_security(rpc, self._invoke(agent.id, operation["name"]))}
            examples = [orjson.dumps(example.get("input")).decode()
                        for example in operation.get("examples", []) if "input" in example]
            if examples:
                skill["examples"] = examples
            skills.append(skill)
        invoke = self.catalog.invoke_url(agent.id)
        return self._card(metadata["name"], metadata["description"], str(metadata["version"]),
                          [self._interface(rpc), _aidip(invoke)], skills,
                          self.security.members(rpc, self._invoke(agent.id)))

    def gateway(self, agents: list[Agent]) -> dict[str, Any]:
        service = self.settings.service
        name = service.name if service else "Agent registry"
        description = (service.description if service else None) or \
            "An AIDIP agent registry: find agents and invoke them through this gateway."
        rpc = f"{self.base}/a2a"
        skills = [{"id": SEARCH_SKILL, "name": "Find agents",
                   "description": "Search the registry by capability, tag, language or free "
                                  "text (the default skill).",
                   "tags": ["discovery", "agents"], "inputModes": input_modes(True),
                   "outputModes": _JSON,
                   **self._skill_security(rpc, f"{self.base}/search")}]
        skills += [{"id": agent.id, "name": agent.metadata["name"],
                    "description": agent.metadata["description"],
                    "tags": list(agent.metadata.get("capabilities", [])),
                    "inputModes": input_modes(_takes_text(_sole(agent))), "outputModes": _JSON,
                    **self._skill_security(rpc, self._invoke(agent.id))}
                   for agent in agents if agent.id != SEARCH_SKILL]
        return self._card(name, description, "1",
                          [self._interface(rpc), _aidip(self.catalog.invoke_base)], skills,
                          self.security.members(rpc, f"{self.base}/search"))

    def _card(self, name: str, description: str, version: str,
              interfaces: list[dict[str, Any]], skills: list[dict[str, Any]],
              security: dict[str, Any]) -> dict[str, Any]:
        card = {
            "name": name, "description": description, "version": version,
            "supportedInterfaces": interfaces,
            "capabilities": {"streaming": False, "pushNotifications": False},
            "defaultInputModes": _common_modes(skills), "defaultOutputModes": _JSON,
            "skills": skills, **security,
        }
        organization = self.settings.service.organization if self.settings.service else None
        if organization is not None and organization.url:
            card["provider"] = {"organization": organization.name, "url": str(organization.url)}
        return card

    def _interface(self, rpc_path: str) -> dict[str, Any]:
        public = (self.settings.public_base_url or "").rstrip("/")
        return {"url": public + rpc_path, "protocolBinding": JSONRPC,
                "protocolVersion": A2A_VERSION}

    def _invoke(self, agent_id: str, operation: str | None = None) -> str:
        path = f"{self.base}/{agent_id}/invoke"
        return f"{path}/{operation}" if operation else path

    def _skill_security(self, *paths: str) -> dict[str, Any]:
        required = self.security.requirements(*paths)
        return {"securityRequirements": required} if required else {}


def _takes_text(operation: Operation | None) -> bool:
    return operation is not None and operation.text_field is not None


def _sole(agent: Agent) -> Operation | None:
    """The operation a call naming no operation invokes: the agent's only one."""
    return next(iter(agent.operations.values())) if len(agent.operations) == 1 else None


def _common_modes(skills: list[dict[str, Any]]) -> list[str]:
    """The card's default input modes: those every skill takes (each skill says its own)."""
    return input_modes(bool(skills) and all(TEXT_MODE in s["inputModes"] for s in skills))


def _aidip(url: str) -> dict[str, Any]:
    return {"url": url, "protocolBinding": BINDING, "protocolVersion": PROTOCOL_VERSION}
