"""The config warning for a rate limit keyed on what a request declares (a platform id) rather
than on who sends it: a caller that declares a fresh value gets a fresh quota, so such a
rule bounds nobody unless a rule keyed on the caller counts the same requests too."""

from __future__ import annotations

from gateway.paths import matches_prefix, method_covered
from gateway.ratelimit.config import SELF_DECLARED_KEYS, RateLimits, Rule

Problem = tuple[str, str]


def self_declared_key_warnings(limits: RateLimits | None) -> list[Problem]:
    if limits is None:
        return []
    by_caller = [rule for rule in limits.rules if rule.key not in SELF_DECLARED_KEYS]
    return [(f"rate_limits.rules[{index}].key",
             f"expected a rule keyed on the caller (client, subject, client_id or address) "
             f"counting the same requests as {rule.name!r}: key {rule.key!r} is declared by "
             "each request, so a caller naming a fresh value gets a fresh quota")
            for index, rule in enumerate(limits.rules)
            if rule.key in SELF_DECLARED_KEYS and not _backed(rule, by_caller)]


def _backed(rule: Rule, by_caller: list[Rule]) -> bool:
    """Whether every request `rule` counts is also counted by one of `by_caller`."""
    methods: list[str | None] = list(rule.methods) if rule.methods else [None]
    return all(any(_counts(other, path, method) for other in by_caller)
               for path in rule.paths for method in methods)


def _counts(rule: Rule, path: str, method: str | None) -> bool:
    """`rule` counts every request to paths under `path` with `method` (None: any method)."""
    methods_covered = rule.methods is None if method is None else \
        method_covered(method, rule.methods)
    return methods_covered and any(matches_prefix(prefix, path) for prefix in rule.paths)
