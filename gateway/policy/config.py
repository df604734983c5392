"""Models of the policy files in the `policies:` folder. Each file is a policy pack; every key
is optional, so packs can be split by topic (one file per team or per rule kind).

`rules:` is the one format (gateway.policy.rules). `vector_return` is an older key, still read
and translated into rules of that kind (gateway.policy.resources; ids
`<file>.vector_return[0]`); a surface may add an older section of its own (`Surface.policy_key`,
see gateway.registry)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.strict import Strict


class VectorReturnRule(Strict):
    """Stored vectors of `collection` may be returned to callers holding every one of `scopes`."""

    collection: str = Field(
        description="The collection whose stored vectors this entry lets callers receive.",
    )
    scopes: list[str] = Field(
        [], description="Scopes the caller needs; empty means any caller who can read it."
    )
    description: str | None = Field(None, description="Why the entry exists, shown in reports.")


class PolicyPack(Strict):
    description: str | None = Field(
        None,
        description="What the file's rules are for, shown in reports.",
    )
    owner: str | None = Field(None, description="Who answers for the rules of this file.")
    rules: list[Any] = Field([], description="Rules in order; see the README, Policy rules.")
    vector_return: list[VectorReturnRule] = Field(
        [], description="Older form of `vector_return` rules: stored vectors are returned only "
        "where a rule allows it."
    )
