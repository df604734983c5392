"""The AI Discovery Endpoint (draft-aiendpoint-00): `/.well-known/ai` generated from config."""

from __future__ import annotations

from typing import Any

from gateway.capability import Capability
from gateway.settings import Settings
from gateway.surface import Mount, MountContext, Problem, Surface
from gateway.surfaces.aiendpoint.config import AiEndpoint, ai_endpoint_of


class AiEndpointPlugin(Surface):
    name = "aiendpoint"
    config_key = "ai_endpoint"
    config_model = AiEndpoint
    config_description = "The /.well-known/ai document."

    def problems(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        from gateway.surfaces.aiendpoint.document import ai_endpoint_problems

        return ai_endpoint_problems(settings, extra_capabilities=capabilities)

    def warnings(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        from gateway.surfaces.aiendpoint.warnings import ai_endpoint_warnings

        return ai_endpoint_warnings(settings)

    def mount(self, context: MountContext) -> Mount | None:
        from gateway.surfaces.aiendpoint.document import ai_endpoint_documents

        documents = ai_endpoint_documents(context.settings, config_date=context.modified,
                                          extra_capabilities=context.capabilities)
        if not documents:
            return None
        return Mount(self.name, documents=dict(documents))

    def openapi(self, settings: Settings) -> dict[str, Any]:
        section = ai_endpoint_of(settings)
        if section is None or not section.enabled:
            return {}
        from gateway.surfaces.aiendpoint.openapi import ai_endpoint_openapi

        return ai_endpoint_openapi(section)


SURFACE = AiEndpointPlugin()
