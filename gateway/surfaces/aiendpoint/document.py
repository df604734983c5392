"""The AI Discovery Endpoint surface (draft-aiendpoint-00): the `/.well-known/ai` document
generated from config, and the config problems that would make it invalid or unsafe."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import date
from importlib import resources
from typing import Any
from urllib.parse import SplitResult, urlsplit

import orjson

from gateway.auth.config import Auth
from gateway.capability import Capability
from gateway.endpoints import StaticDocument
from gateway.paths import matches_prefix
from gateway.ratelimit.coverage import covers
from gateway.ratelimit.tiers import higher_tier_reachable, per_minute
from gateway.service import Service
from gateway.settings import Settings
from gateway.surfaces.aiendpoint.config import AiEndpoint, ai_endpoint_of

WELL_KNOWN = "/.well-known/ai"
ALIAS = "/ai"
CONTENT_TYPE = "application/json; charset=utf-8"
MAX_BYTES = 64 * 1024  # §4.5
ADMIN_PATHS = ("/metrics", "/healthz", "/readyz")
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARD = frozenset({"", "0.0.0.0", "::"})
_ANY_DATE = date(2000, 1, 1)  # the checks depend on the date's length only

Problem = tuple[str, str]  # (dotted config path, message)


def build_ai_document(
    settings: Settings, *, config_date: date | None = None,
    extra_capabilities: Sequence[Capability] = (),
) -> dict[str, Any]:
    """The AI Discovery Document of a config.

    Capabilities are the configured ones, then `extra_capabilities` (the gateway's own
    surfaces). `auth` and `rate_limits` describe what the gateway really enforces.
    `meta.last_updated` is `service.last_updated`, else `config_date`.
    """
    service = settings.service
    if service is None:
        raise ValueError("the AI Discovery Document needs a `service` section")
    section = ai_endpoint_of(settings) or AiEndpoint()
    capabilities = [*section.capabilities, *extra_capabilities]
    document: dict[str, Any] = {
        "aiendpoint": "1.0",
        "service": _service(service),
        "capabilities": [capability.model_dump(exclude_none=True) for capability in capabilities],
        "auth": _auth(settings.auth, service.docs),
        "token_hints": section.token_hints.model_dump(),
    }
    rate_limits = _rate_limits(settings, capabilities)
    if rate_limits:
        document["rate_limits"] = rate_limits
    meta = _meta(service, config_date)
    if meta:
        document["meta"] = meta
    return document


def ai_endpoint_documents(
    settings: Settings, *, config_date: date | None = None,
    extra_capabilities: Sequence[Capability] = (),
) -> dict[str, StaticDocument]:
    """The document by path: `/.well-known/ai` and, with `alias`, the same object at `/ai`."""
    section = ai_endpoint_of(settings)
    if section is None or not section.enabled:
        return {}
    document = StaticDocument(
        "aiendpoint",
        build_ai_document(settings, config_date=config_date,
                          extra_capabilities=extra_capabilities),
        max_age=section.max_age, content_type=CONTENT_TYPE,
    )
    return {WELL_KNOWN: document, ALIAS: document} if section.alias else {WELL_KNOWN: document}


def ai_endpoint_problems(
    settings: Settings, *, extra_capabilities: Sequence[Capability] = ()
) -> list[Problem]:
    """What in the config would make the served document invalid or unsafe."""
    section = ai_endpoint_of(settings)
    if section is None or not section.enabled:
        return []
    if settings.service is None:
        return [("service", "expected a service section (name, description): ai_endpoint is "
                            "enabled and the /.well-known/ai document begins with it")]
    capabilities = [*section.capabilities, *extra_capabilities]
    if not capabilities:
        return [("ai_endpoint.capabilities",
                 "expected at least one capability: the spec requires a non-empty list")]
    configured = len(section.capabilities)
    document = build_ai_document(settings, config_date=_ANY_DATE,
                                 extra_capabilities=extra_capabilities)
    return [*_admin_problems(settings, capabilities, configured),
            *_duplicate_ids(capabilities, configured),
            *_schema_problems(document, configured),
            *_size_problems(document)]


def _service(service: Service) -> dict[str, Any]:
    described: dict[str, Any] = {"name": service.name, "description": service.description}
    if service.category:
        described["category"] = list(service.category)
    if service.language:
        described["language"] = list(service.language)
    return described


def _auth(auth: Auth | None, docs: str | None) -> dict[str, str]:
    """How callers authenticate; names a header at most, never a credential."""
    if auth is None:
        described = {"type": "none"}
    elif auth.issuers:  # tokens from the authorization servers listed in the RFC 9728 metadata
        described = {"type": "oauth2"}
    elif auth.api_keys is not None and auth.introspection is None:
        described = {"type": "apikey", "header": auth.api_keys.header}
    else:
        described = {"type": "bearer"}
    if docs:
        described["docs"] = docs
    return described


def _rate_limits(settings: Settings, capabilities: list[Capability]) -> dict[str, Any] | None:
    """The strictest per-minute figure among the rules that count a capability's requests;
    `agent_tier_available` only when one of them has a higher tier some caller can reach."""
    if settings.rate_limits is None:
        return None
    targets = [(path, capability.method) for capability in capabilities
               if (path := local_path(capability.endpoint, settings.public_base_url))]
    rules = [rule for rule in settings.rate_limits.rules
             if any(covers(rule, path, method) for path, method in targets)]
    if not rules:
        return None
    described: dict[str, Any] = {
        "requests_per_minute": min(per_minute(rule.limit, rule.burst) for rule in rules)}
    if any(higher_tier_reachable(rule, settings) for rule in rules):
        described["agent_tier_available"] = True
    return described


def _meta(service: Service, config_date: date | None) -> dict[str, str]:
    last_updated = service.last_updated or (config_date.isoformat() if config_date else None)
    meta = {"last_updated": last_updated, "changelog": service.changelog,
            "status": service.status}
    return {name: value for name, value in meta.items() if value}


def local_path(endpoint: str, public_base_url: str | None) -> str | None:
    """The path a capability has on this gateway; None when it is served elsewhere."""
    parts = urlsplit(endpoint)
    if not parts.scheme:
        return parts.path
    if public_base_url and _origin(parts) == _origin(urlsplit(public_base_url)):
        return parts.path or "/"
    return None


def _origin(parts: SplitResult) -> tuple[str, str | None, int | None]:
    return parts.scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def _admin_problems(
    settings: Settings, capabilities: list[Capability], configured: int
) -> list[Problem]:
    problems = []
    for index, capability in enumerate(capabilities):
        reason = _admin_reason(capability.endpoint, settings)
        if reason is not None:
            problems.append(_located(index, capability, configured, "endpoint", reason))
    return problems


def _admin_reason(endpoint: str, settings: Settings) -> str | None:
    parts = urlsplit(endpoint)
    admin = settings.admin
    if parts.scheme and _on_admin_listener(parts, settings):
        return (f"expected a public endpoint, got {endpoint!r}: it points at the admin listener "
                f"({admin.host}:{admin.port}), which must never be advertised")
    path = local_path(endpoint, settings.public_base_url)
    if path is not None and any(matches_prefix(admin_path, path) for admin_path in ADMIN_PATHS):
        return (f"expected a public endpoint, got {path!r}: admin paths "
                f"({', '.join(ADMIN_PATHS)}) must never be advertised")
    return None


def _on_admin_listener(parts: SplitResult, settings: Settings) -> bool:
    admin = settings.admin
    if admin.port == 0 or _origin(parts)[2] != admin.port:
        return False
    hosts = {admin.host.lower(), *_LOOPBACK}
    if settings.public_base_url:
        hosts.add(urlsplit(settings.public_base_url).hostname or "")
    return admin.host in _WILDCARD or parts.hostname in hosts


def _duplicate_ids(capabilities: list[Capability], configured: int) -> list[Problem]:
    first_seen: dict[str, int] = {}
    problems = []
    for index, capability in enumerate(capabilities):
        first = first_seen.setdefault(capability.id, index)
        if first == index:
            continue
        if index < configured:
            problems.append((f"ai_endpoint.capabilities[{index}].id",
                             f"expected a unique id, got {capability.id!r} again "
                             f"(first at ai_endpoint.capabilities[{first}])"))
        else:  # a configured capability takes an id the gateway's own surfaces use
            where = f"ai_endpoint.capabilities[{first}].id" if first < configured \
                else "ai_endpoint.capabilities"
            problems.append((where, f"expected an id the gateway's own capabilities do not "
                                    f"use, got {capability.id!r}"))
    return problems


def _located(index: int, capability: Capability, configured: int, field: str,
             message: str) -> Problem:
    if index < configured:
        return f"ai_endpoint.capabilities[{index}].{field}", message
    return "ai_endpoint.capabilities", f"the gateway's own capability {capability.id!r}: {message}"


@functools.cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    text = (resources.files("gateway") / "schemas" / "aiendpoint.schema.json").read_text("utf-8")
    return Draft202012Validator(json.loads(text),
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def _schema_problems(document: dict[str, Any], configured: int) -> list[Problem]:
    return [(_config_path(list(error.absolute_path), configured),
             f"the /.well-known/ai document would not match the spec's schema: {error.message}")
            for error in _validator().iter_errors(document)]


def _config_path(where: list[str | int], configured: int) -> str:
    """The config path a document path comes from, as near as it can be told."""
    if where[:1] == ["service"]:
        return _dotted(where)
    if where[:1] == ["capabilities"] and len(where) > 1 and int(where[1]) < configured:
        return "ai_endpoint." + _dotted(where)
    return "ai_endpoint"


def _dotted(where: list[str | int]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in where)[1:]


def _size_problems(document: dict[str, Any]) -> list[Problem]:
    size = len(orjson.dumps(document))
    if size <= MAX_BYTES:
        return []
    return [("ai_endpoint.capabilities",
             f"expected the /.well-known/ai document to stay within 64 KB ({MAX_BYTES} bytes), "
             f"it would be {size} bytes: expose fewer capabilities or shorten their text")]
