"""The agents a caller may know of: configured ones and registrations, with entitlements.

An agent restricted to some clients is invisible to every other caller (404, never 403); its
owner and holders of the admin scope always see it. The `endpoint` a client sees is the
gateway's own invoke URL; the upstream's stays inside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.errors import GatewayError
from gateway.model import Principal
from gateway.policy.bundle import PolicyBundle
from gateway.policy.rules import Ask
from gateway.surfaces.aidip.config import Aidip, ConfiguredAgent
from gateway.surfaces.aidip.owners import owner_of, record_owner
from gateway.surfaces.aidip.store import AgentStore, Record


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    idempotent: bool = False
    batch: bool = False
    url: str | None = None  # registered agents: the upstream URL
    upstream: str | None = None  # configured agents: the upstream, method and path
    method: str = "POST"
    path: str = ""
    forward_token: bool = False


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    metadata: dict[str, Any]  # as stored; `public()` is what clients see
    operations: dict[str, Operation]
    owner: str | None = None  # typed (owners.py); None: configured, changed only by the config
    clients: frozenset[str] | None = None
    timeout: float | None = None
    stamp: bytes | None = None  # the stored record, for compare-and-set writes (store.py)

    @property
    def configured(self) -> bool:
        return self.owner is None

    @property
    def status(self) -> str:
        return str(self.metadata.get("status", "active"))


class Catalog:
    def __init__(self, settings: Aidip, store: AgentStore, invoke_base: str,
                 authentication: dict[str, Any], bundle: PolicyBundle | None = None) -> None:
        self.settings = settings
        self.bundle = bundle  # `agent_access` rules (policy_rules.py)
        self.store = store
        self.invoke_base = invoke_base  # e.g. https://gw.example/agents
        self.authentication = authentication
        self.configured = {agent_id: _from_config(agent_id, agent)
                           for agent_id, agent in settings.agents.items()}

    def is_admin(self, principal: Principal) -> bool:
        return self.settings.admin_scope in principal.scopes

    def may_see(self, agent: Agent, principal: Principal) -> bool:
        if self.is_admin(principal):
            return True
        if self.owns(agent, principal):
            return True
        if self.bundle is not None and self.bundle.decide(
                Ask("agent_access", agent.id, principal)).effect == "deny":
            return False
        if agent.clients is None:
            return True
        return principal.client_id is not None and principal.client_id in agent.clients

    def owns(self, agent: Agent, principal: Principal) -> bool:
        return agent.owner is not None and agent.owner == owner_of(principal)

    def may_change(self, agent: Agent, principal: Principal) -> bool:
        if agent.configured:
            return False
        return self.is_admin(principal) or self.owns(agent, principal)

    async def visible(self, principal: Principal) -> list[Agent]:
        registered = [from_record(record) for record in await self.store.all()]
        agents = [*self.configured.values(),
                  *(a for a in registered if a.id not in self.configured)]
        return sorted((a for a in agents if self.may_see(a, principal)), key=lambda a: a.id)

    async def lookup(self, agent_id: str) -> Agent | None:
        if agent_id in self.configured:
            return self.configured[agent_id]
        stored = await self.store.get(agent_id)
        return None if stored is None else from_record(stored.record, stored.stamp)

    async def find(self, agent_id: str, principal: Principal) -> Agent:
        agent = await self.lookup(agent_id)
        if agent is None or not self.may_see(agent, principal):
            raise GatewayError(404, "not_found", "No agent with this id.")
        return agent

    def public(self, agent: Agent, principal: Principal) -> dict[str, Any]:
        """Full metadata as this caller may see it."""
        document = dict(agent.metadata)
        document["id"] = agent.id
        document["endpoint"] = self.invoke_url(agent.id)
        document["authentication"] = self.authentication
        document["operations"] = [
            {**operation, "endpoint": self.invoke_url(agent.id, operation["name"])}
            for operation in agent.metadata.get("operations", [])]
        if not self.may_change(agent, principal):
            document.pop("allowed_clients", None)
        return document

    def summary(self, agent: Agent) -> dict[str, Any]:
        return {"id": agent.id, "name": agent.metadata["name"],
                "description": agent.metadata["description"],
                "endpoint": self.invoke_url(agent.id),
                "capabilities": agent.metadata.get("capabilities", [])}

    def invoke_url(self, agent_id: str, operation: str | None = None) -> str:
        url = f"{self.invoke_base}/{agent_id}/invoke"
        return f"{url}/{operation}" if operation else url


def from_record(record: Record, stamp: bytes | None = None) -> Agent:
    metadata = record["metadata"]
    endpoints = record.get("endpoints", {})
    operations = {
        op["name"]: Operation(op["name"], op["inputs"], op["outputs"],
                              bool(op.get("idempotent")), bool(op.get("batch")),
                              url=endpoints.get(op["name"]))
        for op in metadata.get("operations", [])}
    clients = metadata.get("allowed_clients")
    return Agent(metadata["id"], metadata, operations, record_owner(record),
                 None if clients is None else frozenset(clients), stamp=stamp)


def _from_config(agent_id: str, agent: ConfiguredAgent) -> Agent:
    operations = {
        op.name: Operation(op.name, op.inputs, op.outputs, op.idempotent, op.batch,
                           upstream=op.upstream, method=op.method, path=op.path,
                           forward_token=op.forward_token)
        for op in agent.operations}
    metadata = agent.model_dump(exclude={"clients", "timeout", "operations"}, exclude_none=True)
    metadata["operations"] = [
        op.model_dump(include={"name", "description", "inputs", "outputs", "examples",
                               "idempotent", "batch"})
        for op in agent.operations]
    metadata["id"] = agent_id
    return Agent(agent_id, metadata, operations, None,
                 None if agent.clients is None else frozenset(agent.clients), agent.timeout)
