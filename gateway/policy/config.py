"""Models of the policy files in the `policies:` folder. Each file is a policy pack; every key
is optional, so packs can be split by topic (one file per team or per rule kind).

`rules:` is the one format (gateway.policy.rules); `vector_return` and `aip` are the older
keys, still read and translated into rules (ids `<file>.vector_return[0]`, `<file>.aip...`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.strict import Strict


class VectorReturnRule(Strict):
    """Stored vectors of `collection` may be returned to callers holding every one of `scopes`."""

    collection: str
    scopes: list[str] = Field(
        [], description="Scopes the caller needs; empty means any caller who can read it."
    )
    description: str | None = None


class AipRules(Strict):
    """AIP denial rules and limits; every pack's rules add up, and the strictest limit wins."""

    denied_platforms: list[str] = Field([], description="platform.id values always denied.")
    allowed_placements: list[str] | None = Field(
        None, description="Intent types (context.placement) allowed; none: any.",
    )
    forbidden_uses: list[str] = Field(
        [], description="Uses a platform may not declare in extensions.aigw.use.",
    )
    max_chunks: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)


class PolicyPack(Strict):
    description: str | None = None
    owner: str | None = Field(None, description="Who answers for the rules of this file.")
    rules: list[Any] = Field([], description="Rules in order; see the README, Policy rules.")
    vector_return: list[VectorReturnRule] = Field(
        [], description="AIDRE §11.2: vectors are never returned unless a rule here allows it."
    )
    aip: AipRules | None = Field(None, description="AIP retrieve: denials and limits.")
