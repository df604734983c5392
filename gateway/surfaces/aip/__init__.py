"""AIP 0.1: the publisher declaration (aip.json), capabilities, and the retrieve endpoint."""

from __future__ import annotations

from typing import Any

from gateway.capability import Capability, enforced_capability
from gateway.policy.kinds import RuleKind
from gateway.policy.resources import ResourceSpec
from gateway.settings import Settings
from gateway.surface import Mount, MountContext, Problem, Surface
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.policy_section import AipRules


class AipPlugin(Surface):
    name = "aip"
    config_key = "aip"
    config_model = Aip
    config_description = "AIP 0.1: aip.json, the retrieve and event endpoints, signing."
    policy_key = "aip"
    policy_model = AipRules
    policy_description = "AIP retrieve: denials and limits."

    def capabilities(self, settings: Settings) -> list[Capability]:
        aip = self.section(settings)
        if aip is None or not aip.enabled:
            return []
        from gateway.schema_text import shape_text
        from gateway.surfaces.aip.request import MAX_REQUEST_ID, schema_validator

        # Written from the schemas the retrieve route enforces and answers by.
        return [enforced_capability(
            schema_validator("retrieve-request").schema, {
                "request_id": f"the caller's id for this request (at most {MAX_REQUEST_ID} "
                              "characters), echoed in the answer",
                "timestamp": "when the request was made (RFC 3339)"},
            id="aip_retrieve", method="POST", endpoint=aip.retrieve_path,
            description="Retrieve licensed content chunks with citations for an intent (AIP 0.1).",
            returns=shape_text(schema_validator("retrieve-response").schema))]

    def problems(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        from gateway.surfaces.aip.checks import aip_problems

        return aip_problems(settings, self.section(settings))

    def policy_rules(self) -> list[RuleKind]:
        from gateway.surfaces.aip.policy_rules import AIP_KINDS

        return AIP_KINDS

    def policy_resources(self, settings: Settings) -> dict[str, ResourceSpec]:
        from gateway.surfaces.aip.policy_rules import source_resources

        return source_resources(self.section(settings))

    def process_local_state(self, settings: Settings) -> list[str]:
        aip = self.section(settings)
        if aip is None or not aip.enabled:
            return []
        found = []
        signing = aip.signing
        if signing is not None and signing.enabled and signing.nonce_store.startswith("memory:"):
            found.append("aip.signing.nonce_store (memory://: a nonce seen by one worker is not "
                         "seen by the others)")
        if aip.event is not None and aip.events is not None and \
                aip.ledger_store().startswith("memory:"):
            found.append("aip.event.store (memory://: a request answered by one worker cannot "
                         "be cited through another, nor a duplicate event seen there)")
        return found

    def add_commands(self, commands: Any) -> None:
        from gateway.surfaces.aip.cli import add_aip_parser

        add_aip_parser(commands)

    def mount(self, context: MountContext) -> Mount | None:
        aip = self.section(context.settings)
        if aip is None or not aip.enabled:
            return None
        from gateway.surfaces.aip.declaration import aip_documents
        from gateway.surfaces.aip.handlers import routes
        from gateway.surfaces.aip.policy import AipPolicy
        from gateway.surfaces.aip.signed import AipErrors
        from gateway.surfaces.aip.sources import compile_sources
        from gateway.surfaces.aip.wiring import Wiring

        settings = context.settings
        policy = AipPolicy(context.bundle)
        documents = aip_documents(aip, settings.public_base_url or "", policy, context.modified)
        wiring = Wiring.acquire(aip, context.shared)
        # The sources compile: the load-time checks made sure of it.
        sources = compile_sources(aip, set(settings.upstreams))
        served = routes(aip, sources, policy, wiring)
        return Mount(self.name, served, documents=dict(documents),
                     render_error=AipErrors(aip.retrieve_path), resources=sources)

    def openapi(self, settings: Settings) -> dict[str, Any]:
        aip = self.section(settings)
        if aip is None or not aip.enabled:
            return {}
        from gateway.surfaces.aip.openapi import aip_openapi

        return aip_openapi(aip)


SURFACE = AipPlugin()
