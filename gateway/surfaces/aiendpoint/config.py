"""Config models of the `ai_endpoint` section (the /.well-known/ai document)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from gateway.capability import Capability
from gateway.strict import Strict

if TYPE_CHECKING:
    from gateway.settings import Settings


class TokenHints(Strict):
    compact_mode: bool = False
    field_filtering: bool = False
    delta_support: bool = False


class AiEndpoint(Strict):
    enabled: bool = True
    alias: bool = Field(True, description="Serve the same bytes at /ai too.")
    max_age: Annotated[int, Field(ge=0, le=604800)] = Field(
        86400, description="Cache-Control max-age of the document, in seconds."
    )
    capabilities: list[Capability] = Field(
        [], description="Capabilities to expose besides the gateway's own spec surfaces."
    )
    token_hints: TokenHints = TokenHints()


def ai_endpoint_of(settings: Settings) -> AiEndpoint | None:
    """The config's `ai_endpoint` section, if any. The registry adds the field to `Settings`
    from this surface's model, so the `Settings` type does not declare it."""
    section = getattr(settings, "ai_endpoint", None)
    return section if isinstance(section, AiEndpoint) else None
