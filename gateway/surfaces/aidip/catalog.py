"""The agents a caller may know of: configured ones and registrations, with entitlements.

An agent restricted to some clients is invisible to every other caller (404, never 403); its
owner and holders of the admin scope always see it. Whom else it is for is the `agent_access`
rules' decision (a configured agent's `clients` are rules of that kind too), asked through
the pipeline's policy stage (`Permitted`), which notes each decision in the decision log. A
registration's own `allowed_clients` is no rule: it is checked before the rules are asked.
The `endpoint` a client sees is the gateway's own invoke URL; the upstream's stays inside.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.errors import GatewayError
from gateway.model import Principal
from gateway.policy.rules import Ask
from gateway.surfaces.aidip.config import Aidip, ConfiguredAgent
from gateway.surfaces.aidip.owners import owner_of, record_owner
from gateway.surfaces.aidip.store import AgentStore, Record
from gateway.surfaces.aidip.text_parts import text_field

# The policy stage for a request: whether the rules allow each ask (pipeline.permitted).
Permitted = Callable[[Sequence[Ask]], list[bool]]


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    idempotent: bool = False
    batch: bool = False
    url: str | None = None  # registered agents: the upstream URL
    upstream: str | None = None  # configured agents: the upstream and path
    method: str = "POST"  # how the gateway calls the agent (sending.py)
    path: str = ""
    forward_token: bool = False
    text_input: str | None = None  # the config's field for A2A text parts (text_parts.py)

    @property
    def text_field(self) -> str | None:
        """The input field an A2A text part fills; None: data parts only."""
        return text_field(self.inputs, self.text_input)


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
                 authentication: dict[str, Any]) -> None:
        self.settings = settings
        self.store = store
        self.invoke_base = invoke_base  # e.g. https://gw.example/agents
        self.authentication = authentication
        self.configured = {agent_id: _from_config(agent_id, agent)
                           for agent_id, agent in settings.agents.items()}

    def is_admin(self, principal: Principal) -> bool:
        return self.settings.admin_scope in principal.scopes

    def entitled(self, agents: Sequence[Agent], principal: Principal,
                 permitted: Permitted) -> list[Agent]:
        """Those of `agents` the caller may see and invoke, in their order: the admin scope
        and an agent's owner always may; for the others the `agent_access` rules are asked
        (after a registration's own client list), and an agent's `clients` list holds even
        where a rule allows more."""
        if self.is_admin(principal):
            return list(agents)
        asked = [agent for agent in agents if not self.owns(agent, principal)
                 and (agent.configured or _listed(agent, principal))]
        allowed = permitted([Ask("agent_access", agent.id, principal) for agent in asked])
        granted = {id(agent) for agent, allow in zip(asked, allowed, strict=True)
                   if allow and _listed(agent, principal)}
        return [agent for agent in agents
                if self.owns(agent, principal) or id(agent) in granted]

    def needs(self, agent: Agent, principal: Principal) -> tuple[Ask, ...] | None:
        """What the rules must allow for the caller to see and invoke the agent, as `entitled`
        decides it: nothing for the admin scope and the agent's owner, its `agent_access` ask
        for a caller its own client list (if any) names, and None (never) for any other."""
        if self.is_admin(principal) or self.owns(agent, principal):
            return ()
        if not _listed(agent, principal):
            return None
        return (Ask("agent_access", agent.id, principal),)

    def owns(self, agent: Agent, principal: Principal) -> bool:
        return agent.owner is not None and agent.owner == owner_of(principal)

    def may_change(self, agent: Agent, principal: Principal) -> bool:
        if agent.configured:
            return False
        return self.is_admin(principal) or self.owns(agent, principal)

    async def visible(self, principal: Principal, permitted: Permitted) -> list[Agent]:
        agents = [agent async for agent in self.every()]
        return sorted(self.entitled(agents, principal, permitted), key=lambda a: a.id)

    async def every(self) -> AsyncGenerator[Agent, None]:
        """Every agent: the configured ones, then the registrations (the store is read only
        when they are asked for)."""
        for agent in self.configured.values():
            yield agent
        for record in await self.store.all():
            agent = from_record(record)
            if agent.id not in self.configured:
                yield agent

    async def lookup(self, agent_id: str) -> Agent | None:
        if agent_id in self.configured:
            return self.configured[agent_id]
        stored = await self.store.get(agent_id)
        return None if stored is None else from_record(stored.record, stored.stamp)

    async def find(self, agent_id: str, principal: Principal, permitted: Permitted) -> Agent:
        """The agent, when this caller may see it; else 404, whether or not it exists."""
        agent = await self.lookup(agent_id)
        if agent is None or not self.entitled([agent], principal, permitted):
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


def _listed(agent: Agent, principal: Principal) -> bool:
    """Whether the agent's own client list (if it has one) names the caller's client."""
    return agent.clients is None or (principal.client_id is not None
                                     and principal.client_id in agent.clients)


def from_record(record: Record, stamp: bytes | None = None) -> Agent:
    metadata = record["metadata"]
    endpoints = record.get("endpoints", {})
    methods = record.get("methods", {})  # none in records stored before GET: all POST
    operations = {
        op["name"]: Operation(op["name"], op["inputs"], op["outputs"],
                              bool(op.get("idempotent")), bool(op.get("batch")),
                              url=endpoints.get(op["name"]),
                              method=methods.get(op["name"], "POST"))
        for op in metadata.get("operations", [])}
    clients = metadata.get("allowed_clients")
    return Agent(metadata["id"], metadata, operations, record_owner(record),
                 None if clients is None else frozenset(clients), stamp=stamp)


def _from_config(agent_id: str, agent: ConfiguredAgent) -> Agent:
    operations = {
        op.name: Operation(op.name, op.inputs, op.outputs, op.idempotent, op.batch,
                           upstream=op.upstream, method=op.method, path=op.path,
                           forward_token=op.forward_token, text_input=op.text_input)
        for op in agent.operations}
    metadata = agent.model_dump(exclude={"clients", "timeout", "operations"}, exclude_none=True)
    metadata["operations"] = [
        op.model_dump(include={"name", "description", "inputs", "outputs", "examples",
                               "idempotent", "batch"})
        for op in agent.operations]
    metadata["id"] = agent_id
    return Agent(agent_id, metadata, operations, None,
                 None if agent.clients is None else frozenset(agent.clients), agent.timeout)
