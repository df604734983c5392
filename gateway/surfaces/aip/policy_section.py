"""The older `aip:` section of a policy file, read as `aip_retrieve` and `aip_limit` rules
(gateway.surfaces.aip.policy_rules); new files write those rules under `rules:`."""

from __future__ import annotations

from pydantic import Field

from gateway.strict import Strict


class AipRules(Strict):
    """AIP denial rules and limits; every pack's rules add up, and the strictest limit wins."""

    denied_platforms: list[str] = Field([], description="platform.id values always denied.")
    allowed_placements: list[str] | None = Field(
        None, description="Intent types (context.placement) allowed; none: any.",
    )
    forbidden_uses: list[str] = Field(
        [], description="Uses a platform may not declare in extensions.aigw.use.",
    )
    max_chunks: int | None = Field(
        None, ge=1,
        description="Most chunks in one answer (read as an aip_limit rule).",
    )
    max_tokens: int | None = Field(
        None, ge=1,
        description="Most tokens in one answer (read as an aip_limit rule).",
    )
