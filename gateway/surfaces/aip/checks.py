"""Load-time checks of the `aip` section: sources compile, and aip.json matches its schema."""

from __future__ import annotations

from gateway.mapping import MappingError
from gateway.settings import Settings
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.declaration import declaration
from gateway.surfaces.aip.policy import AipPolicy, in_scope
from gateway.surfaces.aip.request import schema_validator
from gateway.surfaces.aip.sources import compile_sources


def aip_problems(settings: Settings, aip: Aip | None) -> list[tuple[str, str]]:
    """(dotted path in the config file, message) for each problem."""
    if aip is None:
        return []
    problems = []
    try:
        compile_sources(aip, set(settings.upstreams))
    except MappingError as exc:
        problems.append((exc.path, str(exc).removeprefix(f"{exc.path}: ")))
    if aip.enabled and not settings.public_base_url:
        problems.append(("public_base_url", "expected the gateway's public URL: aip.json gives "
                                            "absolute endpoint URLs"))
    for name, source in aip.sources.items():
        for index, domain in enumerate(source.domains):
            if not in_scope(aip.editorial_domains, domain):
                problems.append((f"aip.sources.{name}.domains[{index}]",
                                 "expected a domain inside aip.editorial_domains"))
    if aip.event is not None and aip.events is None:
        problems.append(("aip.events", "expected a sink (aip.events) for the events posted to "
                                       "aip.event"))
    if aip.event is not None and aip.event.path == aip.retrieve_path:
        problems.append(("aip.event.path", "expected a path other than retrieve_path"))
    if aip.retrieval.chunk_tokens > aip.retrieval.max_tokens:
        problems.append(("aip.retrieval.chunk_tokens", "expected at most retrieval.max_tokens"))
    document = declaration(aip, settings.public_base_url or "https://invalid", AipPolicy(None))
    problems.extend(("aip", f"aip.json would not match the spec's schema: {error.message}")
                    for error in schema_validator("aip").iter_errors(document))
    return problems
