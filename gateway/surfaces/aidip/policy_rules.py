"""AIDIP's rule kinds: which callers are entitled to see and invoke an agent (`agent_access`),
and who may register agents (`agent_registration`). A configured agent's `clients` list is
read as rules of the first, `aidip.register_scope` and `aidip.admin_scope` as rules of the
second."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.model import Principal
from gateway.policy.kinds import RawRule, RuleKind, Sample
from gateway.policy.rules import Ask, Rule
from gateway.settings import Settings

REGISTRATION_KIND, REGISTRY = "agent_registration", "registry"


class AgentAccess(Rule):
    """Who may see and invoke an agent; an agent no caller is entitled to is a 404 to them.
    Its owner and holders of `aidip.admin_scope` always are."""

    kind: Literal["agent_access"] = Field(
        description="`agent_access`: who may see and invoke an agent.",
    )
    agent: str = Field(description="An agent id (configured or registered).")

    def selects(self, ask: Ask) -> bool:
        return ask.resource == self.agent


class AgentRegistration(Rule):
    """Who may register agents, and update the ones they own (changing another's needs the
    admin scope). The config's `register_scope` and `admin_scope` are rules of this kind
    (`config:aidip.register_scope`, `config:aidip.admin_scope`); without a matching allow a
    caller may not register."""

    kind: Literal["agent_registration"] = Field(
        description="`agent_registration`: who may register agents and update their own.",
    )


def registration_ask(principal: Principal) -> Ask:
    return Ask(REGISTRATION_KIND, REGISTRY, principal)


def _config_clients(settings: Settings) -> list[RawRule]:
    aidip = getattr(settings, "aidip", None)
    return [{"id": f"config:aidip.agents.{agent_id}.clients", "kind": "agent_access",
             "agent": agent_id, "when": {"clients": list(agent.clients)},
             "description": f"aidip.agents.{agent_id}.clients in the config file"}
            for agent_id, agent in (aidip.agents.items() if aidip is not None else ())
            if agent.clients is not None]


def _config_registrants(settings: Settings) -> list[RawRule]:
    aidip = getattr(settings, "aidip", None)
    if aidip is None:
        return []
    return [{"id": f"config:aidip.{name}", "kind": REGISTRATION_KIND,
             "when": {"scopes": [scope]},
             "description": f"aidip.{name} in the config file: {scope}"}
            for name, scope in (("register_scope", aidip.register_scope),
                                ("admin_scope", aidip.admin_scope))]


def _agents(settings: Settings, rules: list[Rule]) -> list[Sample]:
    aidip = getattr(settings, "aidip", None)
    named = {getattr(rule, "agent", "") for rule in rules}
    return [(agent, {}) for agent in sorted(set(aidip.agents if aidip else ()) | named)]


AIDIP_KINDS = [
    RuleKind("agent_access", "aidip", AgentAccess,
             "who may see and invoke an agent (default: every caller)", default="allow",
             from_config=_config_clients, samples=_agents),
    RuleKind(REGISTRATION_KIND, "aidip", AgentRegistration,
             "who may register agents and update their own (default: nobody; the config's "
             "register_scope and admin_scope allow)", from_config=_config_registrants,
             resources=lambda settings: [REGISTRY],
             samples=lambda settings, rules: [(REGISTRY, {})]),
]
