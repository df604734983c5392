"""AIDRE (draft-batum-aidre-00): discovery, collections, text and vector search, chunks."""

from __future__ import annotations

from typing import Any

from gateway.capability import Capability
from gateway.policy.resources import ResourceSpec
from gateway.settings import Settings
from gateway.surface import Mount, MountContext, Problem, Surface
from gateway.surfaces.aidre.config import Aidre


class AidrePlugin(Surface):
    name = "aidre"
    config_key = "aidre"
    config_model = Aidre
    config_description = "AIDRE discovery, collections, search, chunks."

    def capabilities(self, settings: Settings) -> list[Capability]:
        from gateway.surfaces.aidre.capabilities import surface_capabilities

        return surface_capabilities(self.section(settings))

    def problems(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        from gateway.surfaces.aidre.checks import aidre_problems

        return aidre_problems(settings, self.section(settings))

    def warnings(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        from gateway.surfaces.aidre.capabilities import endpoint_warnings
        from gateway.surfaces.aidre.checks import cursor_warnings

        section = self.section(settings)
        return endpoint_warnings(settings, section) + cursor_warnings(section)

    def policy_resources(self, settings: Settings) -> dict[str, ResourceSpec]:
        from gateway.surfaces.aidre.policy_rules import collection_resources

        return collection_resources(self.section(settings))

    def mount(self, context: MountContext) -> Mount | None:
        aidre = self.section(context.settings)
        if aidre is None or not aidre.enabled:
            return None
        from gateway.surfaces.aidre.collections import compile_collections
        from gateway.surfaces.aidre.handlers import routes
        from gateway.surfaces.aidre.render import render_error

        collections = compile_collections(aidre, set(context.settings.upstreams))
        route_list = routes(aidre.base_path)
        public = frozenset(route.path for route in route_list
                           if route.name == "aidre.discovery")
        return Mount(self.name, route_list, public_paths=public, render_error=render_error,
                     resources=collections)

    def openapi(self, settings: Settings) -> dict[str, Any]:
        aidre = self.section(settings)
        if aidre is None or not aidre.enabled:
            return {}
        from gateway.surfaces.aidre.openapi import aidre_openapi

        return aidre_openapi(aidre)


SURFACE = AidrePlugin()
