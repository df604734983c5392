"""Load-time checks of the `aidre` section (policy rules naming its collections are checked by
the core, with every surface's resources: gateway.policy.resources.unknown_resources)."""

from __future__ import annotations

from gateway.mapping import MappingError
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


def cursor_warnings(aidre: Aidre | None) -> list[tuple[str, str]]:
    """No cursor secret: the key is derived from the config, which others can read. (A weak
    secret is judged with every other one, by `gateway.weak_secrets`.)"""
    if aidre is None or not aidre.enabled or aidre.cursor_secret is not None:
        return []
    return [("aidre.cursor_secret", "expected a secret: without one the cursor key is "
             "derived from the config, so whoever can read the config can forge cursors")]
