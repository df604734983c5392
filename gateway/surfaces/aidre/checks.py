"""Load-time checks of the `aidre` section, and of policy rules that name its collections."""

from __future__ import annotations

import re

from gateway.mapping import MappingError
from gateway.policy.config import PolicyPack
from gateway.settings import Settings
from gateway.surfaces.aidre.collections import compile_collections
from gateway.surfaces.aidre.config import Aidre


def aidre_problems(settings: Settings, aidre: Aidre | None) -> list[tuple[str, str]]:
    """(dotted path in the config file, message) for each problem."""
    if aidre is None:
        return []
    problems = []
    try:
        compile_collections(aidre, set(settings.upstreams))
    except MappingError as exc:
        problems.append((exc.path, str(exc).removeprefix(f"{exc.path}: ")))
    if aidre.default_collection and aidre.default_collection not in aidre.collections:
        problems.append(("aidre.default_collection", "expected the name of a collection"))
    if aidre.default_top_k > aidre.max_top_k:
        problems.append(("aidre.default_top_k", "expected at most aidre.max_top_k"))
    return problems


_PLACEHOLDER = re.compile(r"change-?me|example|demo|secret|password", re.IGNORECASE)
_MIN_SECRET_LENGTH = 32


def cursor_warnings(aidre: Aidre | None) -> list[tuple[str, str]]:
    """A cursor key others can know: whoever knows it can forge cursors (and read them)."""
    if aidre is None or not aidre.enabled:
        return []
    if aidre.cursor_secret is None:
        return [("aidre.cursor_secret", "expected a secret: without one the cursor key is "
                 "derived from the config, so whoever can read the config can forge cursors")]
    value = aidre.cursor_secret.get_secret_value()
    if len(value) < _MIN_SECRET_LENGTH or _PLACEHOLDER.search(value):
        return [("aidre.cursor_secret", f"expected a random secret of at least "
                 f"{_MIN_SECRET_LENGTH} characters, not a placeholder such as the demo's "
                 "default: whoever guesses it can forge cursors")]
    return []


def vector_rule_problems(aidre: Aidre | None, pack: PolicyPack) -> list[tuple[str, str]]:
    """(dotted path in the policy file, message) for rules naming no AIDRE collection."""
    known = set(aidre.collections) if aidre else set()
    expected = f"expected one of the AIDRE collections ({', '.join(sorted(known)) or 'none'})"
    problems = [(f"vector_return[{index}].collection", expected)
                for index, rule in enumerate(pack.vector_return) if rule.collection not in known]
    problems.extend((f"rules[{index}].collection", expected)
                    for index, rule in enumerate(pack.rules)
                    if rule.kind in _KINDS and rule.collection not in known)
    return problems


_KINDS = ("collection_read", "vector_return", "record_visibility")
