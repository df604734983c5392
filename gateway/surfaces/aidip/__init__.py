"""AIDIP (draft-cui-ai-agent-discovery-invocation-01): an agent registry and invocation."""

from __future__ import annotations

from typing import Any

from gateway.capability import Capability
from gateway.policy.kinds import RuleKind
from gateway.settings import Settings
from gateway.surface import Mount, MountContext, Problem, Surface
from gateway.surfaces.aidip.config import Aidip


class AidipPlugin(Surface):
    name = "aidip"
    config_key = "aidip"
    config_model = Aidip
    config_description = "AIDIP agent registry and invocation."

    def capabilities(self, settings: Settings) -> list[Capability]:
        from gateway.surfaces.aidip.capabilities import surface_capabilities

        return surface_capabilities(self.section(settings))

    def process_local_state(self, settings: Settings) -> list[str]:
        aidip: Aidip | None = self.section(settings)
        if aidip is None or not aidip.enabled or aidip.registry.redis_url is not None:
            return []
        return ["aidip.registry (no redis_url: registrations in memory)"]

    def openapi(self, settings: Settings) -> dict[str, Any]:
        aidip: Aidip | None = self.section(settings)
        if aidip is None or not aidip.enabled:
            return {}
        from gateway.surfaces.aidip.openapi import aidip_openapi

        return aidip_openapi(aidip)

    def problems(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        from gateway.surfaces.aidip.checks import aidip_problems

        return aidip_problems(settings, self.section(settings))

    def policy_rules(self) -> list[RuleKind]:
        from gateway.surfaces.aidip.policy_rules import AIDIP_KINDS

        return AIDIP_KINDS

    def mount(self, context: MountContext) -> Mount | None:
        aidip: Aidip | None = self.section(context.settings)
        if aidip is None or not aidip.enabled:
            return None
        from gateway.settings_key import secret_key
        from gateway.surfaces.aidip.a2a import Cards
        from gateway.surfaces.aidip.a2a_security import CardSecurity
        from gateway.surfaces.aidip.breaker import Breakers
        from gateway.surfaces.aidip.catalog import Catalog
        from gateway.surfaces.aidip.handlers import AidipService
        from gateway.surfaces.aidip.render import render_error
        from gateway.surfaces.aidip.store import create_store

        # Registrations (in memory) and breaker state outlive reloads with the same settings.
        registry = aidip.registry
        store_args = (registry.redis_url, registry.key_prefix, registry.timeout)
        store_key = (secret_key(registry.redis_url or ""), registry.key_prefix, registry.timeout)
        store = context.shared.acquire(("aidip-registry", *store_key),
                                       lambda: create_store(*store_args))
        breaker_key = (aidip.breaker.failures, aidip.breaker.open_seconds)
        breakers = context.shared.acquire(("aidip-breakers", *breaker_key),
                                          lambda: Breakers(*breaker_key))
        settings = context.settings
        base = (settings.public_base_url or "").rstrip("/") + aidip.base_path + "/agents"
        catalog = Catalog(aidip, store, base, _authentication(settings))
        cards = Cards(catalog, settings, CardSecurity(settings.auth, context.bundle))
        service = AidipService(catalog, breakers, cards)
        routes = service.routes()
        public = frozenset(route.path for route in routes
                           if route.name in ("aidip.card", "aidip.card_legacy", "aidip.schema"))
        return Mount(self.name, routes, public_paths=public, render_error=render_error,
                     egress=aidip.egress)


def _authentication(settings: Settings) -> dict[str, Any]:
    """How a client authenticates to the gateway, which is where it invokes (§3.1)."""
    auth = settings.auth
    if auth is None:
        return {"type": "none"}
    if auth.issuers or auth.introspection:
        return {"type": "oauth2_bearer",
                "instructions": "Send Authorization: Bearer <token>; the protected resource "
                                "metadata (RFC 9728) names the issuers."}
    header = auth.api_keys.header if auth.api_keys else "X-API-Key"
    return {"type": "api_key", "instructions": f"Send your API key in the {header} header."}


SURFACE = AidipPlugin()
