"""Config models of the `ai_endpoint` section (the /.well-known/ai document)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gateway.capability import Capability
from gateway.strict import Strict


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
