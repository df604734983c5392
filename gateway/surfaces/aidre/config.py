"""Config models of the `aidre` section: collections and how each maps onto upstream calls."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr

from gateway.operations import UpstreamOperation
from gateway.policy.resources import RecordScopes
from gateway.settings import Settings
from gateway.strict import Strict

CollectionName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]


class VectorOperation(UpstreamOperation):
    embedding_space: str


class EmbeddingSpace(Strict):
    id: Annotated[str, Field(min_length=1, max_length=200)]
    dimensions: Annotated[int, Field(ge=1, le=8192)]
    distance: Literal["cosine", "dot", "euclidean"]
    normalized: bool | None = None
    provider: str | None = None
    model: str | None = None
    revision: str | None = None


class RecordVisibility(RecordScopes):
    """The shared record-visibility shape (gateway.policy.resources), and how a collection
    learns a record's visibility when its search does not say."""

    lookup: Literal["none", "chunk"] = Field(
        "none", description="`chunk`: a search hit whose mapping gives no visibility is read "
        "through the chunk operation to learn it (one upstream call per hit, counted in "
        "aidre.max_upstream_calls).",
    )


class Collection(Strict):
    description: Annotated[str, Field(max_length=500)]
    visibility: Literal["public", "private"] = "public"
    scopes: list[str] = Field(
        [], description="Scopes a caller needs to see or read a private collection."
    )
    updated_at: str | None = None
    record_visibility: RecordVisibility | None = Field(
        None, description="Per-record visibility (AIDRE §12); without it every record has the "
        "collection's visibility, or the one its mapping gives.",
    )
    text_search: UpstreamOperation = Field(
        description="Placeholders: {query}, {top_k}, {offset}, {limit}, {fetch}, {visibility}, "
        "and {after} (the token the previous answer gave, read by the mapping's `next`; \"\" "
        "for the first page) for an upstream that pages by token instead of {offset}.")
    vector_search: VectorOperation | None = Field(
        None, description="Placeholders: {vector}, {top_k}, {offset}, {limit}, {fetch}, "
        "{visibility}, {after} (as text_search).")
    chunk: UpstreamOperation | None = Field(
        None, description="Placeholders: {id}, {visibility}.")


class Aidre(Strict):
    enabled: bool = True
    base_path: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._~-]+)*$")] = Field(
        "", description="Prefix of /collections, /search and /chunks/{id}."
    )
    default_collection: str | None = None
    default_top_k: Annotated[int, Field(ge=1, le=1000)] = 10
    max_top_k: Annotated[int, Field(ge=1, le=1000)] = 50
    top_k_over_max: Literal["clamp", "reject"] = Field(
        "clamp", description="A top_k above max_top_k is clamped (meta.top_k says so) or refused."
    )
    denied_return_field: Literal["ignore", "reject"] = Field(
        "ignore", description="A return field the caller may not have (vectors, semantic_payload)"
        " is dropped, or refused with unsupported_return_field.",
    )
    max_query_chars: Annotated[int, Field(ge=1, le=100_000)] = 2000
    cursor_secret: SecretStr | None = Field(
        None, description="Key that encrypts and authenticates pagination cursors. Unset: a "
        "key derived from this section, the same in every replica with the same config, but "
        "not secret (whoever reads the config can read and forge cursors)."
    )
    max_upstream_calls: Annotated[int, Field(ge=2, le=1000)] = Field(
        60, description="Upstream calls one search may make: search pages (read on until "
        "top_k records the caller may see) and record_visibility lookups. Past it the page "
        "ends early with meta.truncated and a next_cursor that continues.",
    )
    cursor_ttl: Annotated[int, Field(ge=60, le=86400)] = 3600
    discovery_max_age: Annotated[int, Field(ge=0, le=86400)] = 300
    embedding_spaces: list[EmbeddingSpace] = []
    collections: dict[CollectionName, Collection] = Field(min_length=1)


def aidre_of(settings: Settings) -> Aidre:
    """The config's `aidre` section. The registry adds the field to `Settings` from this
    surface's model, so the `Settings` type does not declare it."""
    section = getattr(settings, "aidre", None)
    if not isinstance(section, Aidre):
        raise LookupError("the config has no aidre section")
    return section
