"""Config models of the `aidre` section: collections and how each maps onto upstream calls."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, SecretStr, TypeAdapter, ValidationError, model_validator

from gateway.embeddings.config import EmbedderSettings
from gateway.operations import UpstreamOperation
from gateway.policy.resources import RecordScopes
from gateway.record_cache import RecordCacheSettings
from gateway.settings import Settings
from gateway.strict import Strict

CollectionName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]


class VectorOperation(UpstreamOperation):
    embedding_space: str = Field(
        description="The embedding space (an `id` of embedding_spaces) its vectors are in.",
    )


_EMBEDDER: TypeAdapter[Any] = TypeAdapter(EmbedderSettings)
_DERIVED = ("dimensions", "distance", "normalized", "model")


def _embedder_or_dimensions(schema: dict[str, Any]) -> None:
    """In the JSON Schema as in validation: `dimensions` and `distance` come from an
    `embedder` when there is one."""
    schema["required"] = [name for name in schema.get("required", [])
                          if name not in ("dimensions", "distance")]
    schema["anyOf"] = [{"required": ["embedder"]}, {"required": ["dimensions", "distance"]}]


class EmbeddingSpace(Strict):
    """A space of vectors (§19.1). With an `embedder`, its `model`, `dimensions`, `distance`
    and `normalized` are the embedder's (and `provider` too, unless given): leave them out, or
    give the same."""

    model_config = ConfigDict(json_schema_extra=_embedder_or_dimensions)

    id: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        description="The space's id, which a vector search names as embedding_space.",
    )
    embedder: EmbedderSettings | None = Field(
        None, description="The embedder whose vectors the space holds: what the discovery "
        "document says of the space comes from it. Without one, say it here.")
    dimensions: Annotated[int, Field(ge=1, le=8192)] = Field(
        description="Length of its vectors; a query vector of another length is 422 "
        "invalid_embedding_dimension. With an embedder: the embedder's.",
    )
    distance: Literal["cosine", "dot", "euclidean"] = Field(
        description="How vectors are compared. With an embedder: the embedder's.",
    )
    normalized: bool | None = Field(
        None,
        description="Whether its vectors have unit length. With an embedder: the embedder's.",
    )
    provider: str | None = Field(
        None,
        description="Who makes the vectors, as the discovery document says it.",
    )
    model: str | None = Field(
        None,
        description="The model that makes the vectors. With an embedder: the embedder's.",
    )
    revision: str | None = Field(None, description="Bump it when stored vectors are recomputed.")

    @model_validator(mode="before")
    @classmethod
    def _from_embedder(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("embedder") is None:
            return data
        try:
            spec = _EMBEDDER.validate_python(data["embedder"]).spec
        except ValidationError:
            return data  # the `embedder` field reports what is wrong with it
        derived = {name: getattr(spec, name) for name in _DERIVED}
        for name, value in derived.items():
            if data.get(name) is not None and data[name] != value:
                raise ValueError(f"{name} {data[name]!r} is not the embedder's ({value!r}): "
                                 "leave it out")
        return {**derived, "provider": spec.provider,
                **{name: value for name, value in data.items() if value is not None}}

    def advertised(self) -> dict[str, Any]:
        """The space as a discovery document shows it (§19.1)."""
        return self.model_dump(exclude_none=True, exclude={"embedder"})


class RecordVisibility(RecordScopes):
    """The shared record-visibility shape (gateway.policy.resources), and how a collection
    learns a record's visibility when its search does not say."""

    lookup: Literal["none", "chunk"] = Field(
        "none", description="`chunk`: a search hit whose mapping gives no visibility is read "
        "through the chunk operation to learn it (one upstream call per hit, counted in "
        "aidre.max_upstream_calls), unless `cache` remembers it.",
    )
    cache: RecordCacheSettings = Field(
        default_factory=RecordCacheSettings,
        description="Visibilities `lookup: chunk` learnt, remembered per record and caller "
        "while the search hit's updated_at / content_hash equal the chunk answer's (a record "
        "changed upstream is read again); one changed upstream without either changing is "
        "seen within `ttl`.")


class Collection(Strict):
    description: Annotated[str, Field(max_length=500)] = Field(
        description="What the collection holds, as /collections shows it.",
    )
    visibility: Literal["public", "private"] = Field(
        "public",
        description="`private` collections need their `scopes` and are hidden from everyone else "
        "(404, like an unknown name).",
    )
    scopes: list[str] = Field(
        [], description="Scopes a caller needs to see or read a private collection."
    )
    updated_at: str | None = Field(
        None,
        description="When the collection last changed, as /collections shows it.",
    )
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
    enabled: bool = Field(True, description="Serve the section (false: keep it, serve nothing).")
    base_path: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._~-]+)*$")] = Field(
        "", description="Prefix of /collections, /search and /chunks/{id}."
    )
    default_collection: str | None = Field(
        None,
        description="Collection a search without `collection` reads; unset, a search must name "
        "one.",
    )
    default_top_k: Annotated[int, Field(ge=1, le=1000)] = Field(
        10,
        description="Results per page when a search gives no `top_k`.",
    )
    max_top_k: Annotated[int, Field(ge=1, le=1000)] = Field(
        50,
        description="Most results per page; a larger `top_k` is clamped (or refused with "
        "top_k_over_max: reject).",
    )
    top_k_over_max: Literal["clamp", "reject"] = Field(
        "clamp", description="A top_k above max_top_k is clamped (meta.top_k says so) or refused."
    )
    denied_return_field: Literal["ignore", "reject"] = Field(
        "ignore", description="A return field the caller may not have (vectors, semantic_payload)"
        " is dropped, or refused with unsupported_return_field.",
    )
    max_query_chars: Annotated[int, Field(ge=1, le=100_000)] = Field(
        2000,
        description="Longest `query` text accepted.",
    )
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
    cursor_ttl: Annotated[int, Field(ge=60, le=86400)] = Field(
        3600,
        description="How long a next_cursor stays valid, in seconds.",
    )
    discovery_max_age: Annotated[int, Field(ge=0, le=86400)] = Field(
        300,
        description="Cache-Control max-age of the discovery document and /collections, in "
        "seconds.",
    )
    embedding_spaces: list[EmbeddingSpace] = Field(
        [],
        description="The vector spaces vector searches are in (§19.1), as the discovery document "
        "shows them.",
    )
    collections: dict[CollectionName, Collection] = Field(
        min_length=1,
        description="The collections, by name: which upstream calls answer their searches and "
        "chunk reads.",
    )


def aidre_of(settings: Settings) -> Aidre:
    """The config's `aidre` section. The registry adds the field to `Settings` from this
    surface's model, so the `Settings` type does not declare it."""
    section = getattr(settings, "aidre", None)
    if not isinstance(section, Aidre):
        raise LookupError("the config has no aidre section")
    return section
