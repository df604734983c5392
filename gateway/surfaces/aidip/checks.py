"""Load-time checks of the `aidip` section beyond its schema."""

from __future__ import annotations

from gateway.paths import matches_prefix
from gateway.settings import Settings
from gateway.surfaces.aidip.config import Aidip
from gateway.surfaces.aidip.sending import inputs_problem
from gateway.untrusted_schema import SchemaRefused, compiled

Problem = tuple[str, str]


def aidip_problems(settings: Settings, aidip: Aidip | None) -> list[Problem]:
    """(dotted path in the config file, message) for each problem."""
    if aidip is None or not aidip.enabled:
        return []
    problems = _agent_problems(settings, aidip)
    if not settings.public_base_url:
        problems.append(("public_base_url", "expected the gateway's public URL: agent "
                                            "metadata gives absolute invoke URLs"))
    if aidip.default_top > aidip.max_top:
        problems.append(("aidip.default_top", "expected at most aidip.max_top"))
    if not _rate_limited(settings, f"{aidip.base_path}/agents"):
        problems.append(("rate_limits", f"expected a rule counting {aidip.base_path}/agents: "
                                        "AIDIP §9 requires rate limits on the registry"))
    return problems


def _agent_problems(settings: Settings, aidip: Aidip) -> list[Problem]:
    problems = []
    for agent_id, agent in aidip.agents.items():
        names = set()
        for index, operation in enumerate(agent.operations):
            where = f"aidip.agents.{agent_id}.operations[{index}]"
            if operation.upstream not in settings.upstreams:
                problems.append((f"{where}.upstream", "expected the name of an upstream"))
            if operation.name in names:
                problems.append((f"{where}.name", "duplicate operation name"))
            names.add(operation.name)
            for part in ("inputs", "outputs"):
                try:  # the rules registered schemas meet: no fetching, bounded work
                    compiled(getattr(operation, part))
                except SchemaRefused as exc:
                    problems.append((f"{where}.{part}", f"schema refused: {exc}"))
            sent = inputs_problem(operation.method, operation.inputs, operation.path)
            if sent is not None:
                problems.append((f"{where}.inputs", sent))
    return problems


def _rate_limited(settings: Settings, path: str) -> bool:
    limits = settings.rate_limits
    if limits is None:
        return False
    return any(matches_prefix(prefix, path) for rule in limits.rules for prefix in rule.paths)
