"""Which rate-limit rules count a given path and method (for discovery and config warnings)."""

from __future__ import annotations

from gateway.paths import matches_prefix, method_covered
from gateway.ratelimit.config import RateLimits, Rule


def covers(rule: Rule, path: str, method: str) -> bool:
    """Whether `rule` counts requests of `method` to `path` (GET covers HEAD)."""
    return method_covered(method, rule.methods) and any(
        matches_prefix(prefix, path) for prefix in rule.paths)


def covering_rules(limits: RateLimits | None, path: str, method: str) -> list[Rule]:
    if limits is None:
        return []
    return [rule for rule in limits.rules if covers(rule, path, method)]


def uncovered_warning(what: str, path: str, method: str) -> tuple[str, str]:
    """The config warning for an advertised endpoint no rule limits."""
    return ("rate_limits.rules",
            f"expected a rule counting {method} {path} ({what}): every advertised capability "
            "must be rate-limited")
