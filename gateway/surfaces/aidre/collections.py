"""Collections compiled from config: which upstream call answers a text search, a vector
search or a chunk read, and how its JSON maps onto hits. No collection needs Python code.

The placeholders each of those operations fills are the fields of its kind below."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.mapping import MappingError
from gateway.operations import (
    K,
    Operation,
    Placeholders,
    UpstreamOperation,
    compile_operation,
    placeholder,
)
from gateway.surfaces.aidre import visibility
from gateway.surfaces.aidre.config import Aidre, Collection, EmbeddingSpace

VISIBILITY = ("the record visibilities the caller may see, comma-separated (`public`, and what "
              "`record_visibility` rules give), for an upstream that can filter by them")


@dataclass(frozen=True, slots=True)
class _Page(Placeholders):
    """What every search page fills. `limit` is how many items this call asks for (top_k + 1,
    to see whether more follow), `fetch` is offset + limit (everything up to the end of the
    page, for upstreams without an offset), `visibility` the record visibilities the caller may
    see, comma-separated, for upstreams that can filter by them, and `after` the token the
    previous answer gave for the page after it (the mapping's `next`; "" for the first page),
    for upstreams that page by token instead of by `offset`."""

    top_k: int = placeholder("the page size: the request's `top_k` (default `default_top_k`, "
                             "clamped to `max_top_k`)")
    offset: int = placeholder("the upstream position this call starts at: 0 on the first "
                              "page, then where the cursor left off")
    limit: int = placeholder("how many items this call asks for: `top_k` + 1 (the one more "
                             "says whether a next page exists), fewer when reading on past "
                             "hidden records, at most `max_items`")
    fetch: int = placeholder("`{offset}` + `{limit}`, for an upstream without an offset "
                             "parameter")
    visibility: str = placeholder(VISIBILITY)
    after: str = placeholder("the upstream's own token for the page to read: empty on the "
                             "first page, then the `next` token its previous answer gave (the "
                             "mapping's `next`, a JMESPath expression over the whole answer)")


@dataclass(frozen=True, slots=True)
class TextSearch(_Page):
    """A page of a text search."""

    configured = "aidre.collections.<name>.text_search"
    query: str = placeholder("the request's `query` text")


@dataclass(frozen=True, slots=True)
class VectorSearch(_Page):
    """A page of a vector search: the query vector instead of text."""

    configured = "aidre.collections.<name>.vector_search"
    vector: list[float] = placeholder("the request's `query_vector`, a list of numbers (use "
                                      "it as a whole body string)")


@dataclass(frozen=True, slots=True)
class ChunkRead(Placeholders):
    """One chunk by its item id (the part after `collection:`), for `GET /chunks/{id}` and for
    `record_visibility: lookup: chunk`."""

    configured = "aidre.collections.<name>.chunk"
    id: str = placeholder("the chunk id after `<collection>:`, percent-decoded once "
                          "(`packages:g%2B%2B` gives `g++`)")
    visibility: str = placeholder(VISIBILITY)


@dataclass(frozen=True, slots=True)
class CompiledCollection:
    name: str
    settings: Collection
    text_search: Operation[TextSearch]
    vector_search: Operation[VectorSearch] | None
    chunk: Operation[ChunkRead] | None
    space: EmbeddingSpace | None
    # What `record_visibility: lookup: chunk` remembers (None: nothing, or no lookup).
    visibilities: visibility.Cache | None = None

    @property
    def public(self) -> bool:
        return self.settings.visibility == "public"

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(self.settings.scopes)

    @property
    def returns_vectors(self) -> bool:
        return self.vector_search is not None

    @property
    def visibility(self) -> str:
        return self.settings.visibility

    @property
    def records_carry_visibility(self) -> bool:
        return self.settings.record_visibility is not None


def compile_collections(aidre: Aidre, upstreams: set[str]) -> dict[str, CompiledCollection]:
    """Every collection with its operations compiled; `MappingError` names the bad path."""
    spaces = {space.id: space for space in aidre.embedding_spaces}
    compiled = {}
    for name, collection in aidre.collections.items():
        where = f"aidre.collections.{name}"
        space = None
        if collection.vector_search is not None:
            space = spaces.get(collection.vector_search.embedding_space)
            if space is None:
                raise MappingError(f"{where}.vector_search.embedding_space",
                                   "expected the id of one of aidre.embedding_spaces")
        compiled[name] = CompiledCollection(
            name, collection,
            compile_operation(collection.text_search, f"{where}.text_search", upstreams,
                              TextSearch),
            _optional(collection.vector_search, f"{where}.vector_search", upstreams,
                      VectorSearch),
            _optional(collection.chunk, f"{where}.chunk", upstreams, ChunkRead),
            space, _visibility_cache(collection),
        )
    return compiled


def _visibility_cache(collection: Collection) -> visibility.Cache | None:
    rules = collection.record_visibility
    if rules is None or rules.lookup != "chunk" or collection.chunk is None:
        return None
    return visibility.Cache.of(rules.cache)


def _optional(settings: UpstreamOperation | None, where: str, upstreams: set[str],
              kind: type[K]) -> Operation[K] | None:
    return compile_operation(settings, where, upstreams, kind) if settings is not None else None
