"""Config warnings of the core: a config that loads and serves, but not as it should.

`aigw validate` prints them (and fails on them with `--strict`); `aigw run` logs them once.
Spec surfaces add theirs through `Surface.warnings`; a secret of any section is judged by the
one rule in `gateway.weak_secrets`.
"""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from gateway import registry
from gateway.operations import UpstreamOperation
from gateway.ratelimit.keys import self_declared_key_warnings
from gateway.settings import Settings
from gateway.upstream_urls import url_field_warnings
from gateway.weak_secrets import weak_secret_warnings

Problem = tuple[str, str]  # (dotted path in the file, message)


def core_warnings(settings: Settings) -> list[Problem]:
    found = weak_secret_warnings(settings)  # every section's, plug-ins' included
    url = settings.public_base_url
    if url and urlsplit(url).scheme == "http" and not is_loopback(urlsplit(url).hostname):
        found.append(("public_base_url",
                      f"expected an https:// URL, got {url!r}: discovery documents and the "
                      "URLs they give must be served over HTTPS"))
    found.extend(self_declared_key_warnings(settings.rate_limits))
    if settings.decision_log.subjects is not None:
        found.append(("decision_log.subjects",
                      "deprecated: set logging.subjects, one rule for the subject in every log "
                      f"(read as logging.subjects: {settings.log_subjects})"))
    return found + passthrough_warnings(settings) + public_rule_warnings(settings) \
        + mapped_url_warnings(settings)


def passthrough_warnings(settings: Settings) -> list[Problem]:
    """A passthrough (`default_upstream`) with nothing in front of it: every caller reaches
    the upstream unauthenticated, or without any limit."""
    if settings.default_upstream is None:
        return []
    found = []
    if settings.auth is None:
        found.append(("auth", "expected authentication in front of the passthrough to "
                      f"{settings.default_upstream!r}: without `auth` every request reaches it "
                      "anonymously"))
    if settings.rate_limits is None or not settings.rate_limits.rules:
        found.append(("rate_limits", "expected a rate limit in front of the passthrough to "
                      f"{settings.default_upstream!r}: without one any caller may send it "
                      "any number of requests"))
    return found


def mapped_url_warnings(settings: Settings) -> list[Problem]:
    """Every upstream operation's mapped fields that look like URLs, in any section, while
    `public_base_url` is unset (see `gateway.upstream_urls`)."""
    if settings.public_base_url:
        return []
    found = []
    for where, operation in _operations(settings, ""):
        mapping = operation.mapping
        for group in ("fields", "metadata"):
            found += url_field_warnings(settings, f"{where}.mapping.{group}",
                                        mapping.get(group) or {})
        if mapping.get("text"):
            found += url_field_warnings(settings, f"{where}.mapping", {"text": mapping["text"]})
    return found


def _operations(value: Any, where: str) -> Iterator[tuple[str, UpstreamOperation]]:
    """The upstream operations anywhere in a config, with their dotted paths."""
    if isinstance(value, UpstreamOperation):
        yield where, value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _operations(getattr(value, name), f"{where}.{name}".lstrip("."))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _operations(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _operations(item, f"{where}[{index}]")


def public_rule_warnings(settings: Settings) -> list[Problem]:
    """`public: true` without `methods` on a path the passthrough serves admits every method
    (a POST to a health check, say) and every path under it; surfaces answer only the methods
    their routes take, so their paths are left alone (judged by the surfaces' capabilities)."""
    if settings.auth is None or settings.default_upstream is None:
        return []
    surface_paths = [urlsplit(capability.endpoint).path
                     for capability in registry.capabilities(settings)]
    found = []
    for index, rule in enumerate(settings.auth.routes):
        if not rule.public or rule.methods is not None:
            continue
        prefix = rule.path.rstrip("/")
        if prefix and any(path == prefix or path.startswith(prefix + "/")
                          for path in surface_paths):
            continue
        found.append((f"auth.routes[{index}].methods",
                      f"expected the methods anonymous callers may use on {rule.path}: "
                      "without them every method (POST, DELETE, ...) is public there, on "
                      "every path under it"))
    return found


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False
