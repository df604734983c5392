"""AIDIP's rule kind: which callers are entitled to see and invoke an agent (`agent_access`).
A configured agent's `clients` list is read as rules of this kind too."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.policy.kinds import RawRule, RuleKind, Sample
from gateway.policy.rules import Ask, Rule
from gateway.settings import Settings


class AgentAccess(Rule):
    """Who may see and invoke an agent; an agent no caller is entitled to is a 404 to them.
    Its owner and holders of `aidip.admin_scope` always are."""

    kind: Literal["agent_access"] = Field(
        description="`agent_access`: who may see and invoke an agent.",
    )
    agent: str = Field(description="An agent id (configured or registered).")

    def selects(self, ask: Ask) -> bool:
        return ask.resource == self.agent


def _config_clients(settings: Settings) -> list[RawRule]:
    aidip = getattr(settings, "aidip", None)
    return [{"id": f"config:aidip.agents.{agent_id}.clients", "kind": "agent_access",
             "agent": agent_id, "when": {"clients": list(agent.clients)},
             "description": f"aidip.agents.{agent_id}.clients in the config file"}
            for agent_id, agent in (aidip.agents.items() if aidip is not None else ())
            if agent.clients is not None]


def _agents(settings: Settings, rules: list[Rule]) -> list[Sample]:
    aidip = getattr(settings, "aidip", None)
    named = {getattr(rule, "agent", "") for rule in rules}
    return [(agent, {}) for agent in sorted(set(aidip.agents if aidip else ()) | named)]


AIDIP_KINDS = [
    RuleKind("agent_access", "aidip", AgentAccess,
             "who may see and invoke an agent (default: every caller)", default="allow",
             from_config=_config_clients, samples=_agents),
]
