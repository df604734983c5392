"""Config models of the `ai_endpoint` section (the /.well-known/ai document)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from gateway.capability import Capability
from gateway.strict import Strict

if TYPE_CHECKING:
    from gateway.settings import Settings


class TokenHints(Strict):
    compact_mode: bool = Field(False, description="The API has a compact answer mode.")
    field_filtering: bool = Field(False, description="The API can return only requested fields.")
    delta_support: bool = Field(
        False,
        description="The API can return only what changed since a given time.",
    )


class AiEndpoint(Strict):
    enabled: bool = Field(
        True,
        description="Serve /.well-known/ai (false: keep the section, serve nothing).",
    )
    alias: bool = Field(True, description="Serve the same bytes at /ai too.")
    max_age: Annotated[int, Field(ge=0, le=604800)] = Field(
        86400, description="Cache-Control max-age of the document, in seconds."
    )
    capabilities: list[Capability] = Field(
        [], description="Capabilities to expose besides the gateway's own spec surfaces."
    )
    token_hints: TokenHints = Field(
        TokenHints(),
        description="The document's token_hints: what the API does to save an agent's tokens.",
    )


def ai_endpoint_of(settings: Settings) -> AiEndpoint | None:
    """The config's `ai_endpoint` section, if any. The registry adds the field to `Settings`
    from this surface's model, so the `Settings` type does not declare it."""
    section = getattr(settings, "ai_endpoint", None)
    return section if isinstance(section, AiEndpoint) else None
