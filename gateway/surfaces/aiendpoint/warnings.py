"""Config warnings of the `/.well-known/ai` document: what loads, but works against the spec."""

from __future__ import annotations

import re

from gateway.ratelimit.coverage import covering_rules, uncovered_warning
from gateway.settings import Settings
from gateway.surfaces.aiendpoint.config import ai_endpoint_of
from gateway.surfaces.aiendpoint.document import local_path

Problem = tuple[str, str]
_COLON_PARAMETER = re.compile(r"/:([A-Za-z_][A-Za-z0-9_]*)")


def ai_endpoint_warnings(settings: Settings) -> list[Problem]:
    """The configured capabilities' warnings; each surface warns about its own endpoints."""
    section = ai_endpoint_of(settings)
    if section is None or not section.enabled or settings.service is None:
        return []
    found: list[Problem] = []
    if settings.auth is not None and settings.service.docs is None:
        found.append(("service.docs", "expected a URL of the documentation for agents: the "
                                      "/.well-known/ai document's auth.docs tells agents how to "
                                      "get credentials (and a higher rate-limit tier)"))
    for index, capability in enumerate(section.capabilities):
        where = f"ai_endpoint.capabilities[{index}]"
        if match := _COLON_PARAMETER.search(capability.endpoint):
            found.append((f"{where}.endpoint",
                          f"expected path parameters as {{{match[1]}}}, got ':{match[1]}': "
                          "one style throughout, as the gateway's own capabilities use"))
        path = local_path(capability.endpoint, settings.public_base_url)
        if path is not None and not covering_rules(settings.rate_limits, path, capability.method):
            found.append(uncovered_warning(f"capability {capability.id}", path,
                                           capability.method))
    return found
