"""Config models of the `aip` section: the publisher declaration and the sources it serves."""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from gateway.operations import UpstreamOperation
from gateway.policy.resources import RecordScopes
from gateway.record_cache import RecordCacheSettings
from gateway.strict import Strict
from gateway.surfaces.aip.signing_config import Events, KeyPrefix, Signing, store_url

# The spec's dot-hierarchy: `finance` covers `finance.markets`.
Domain = Annotated[str, Field(pattern=r"^[a-z0-9]+(\.[a-z0-9-]+)*$", max_length=200)]
SourceName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]
Path = Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._~-]+)+$")]
Encoding = Literal["cl100k_base", "o200k_base"]


class Publisher(Strict):
    id: Annotated[str, Field(pattern=r"^[a-z0-9_-]{2,64}$")] = Field(
        description="The publisher's id (event posts must name it).",
    )
    name: Annotated[str, Field(min_length=1, max_length=128)] = Field(
        description="The publisher's name, as citations say it.",
    )
    domain: Annotated[str, Field(
        max_length=253, pattern=r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                                r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")] = Field(
        description="The publisher's domain name.",
    )


class IntentAccess(Strict):
    """`mode: live_only`, `storage_rights: none` and `cache_policy: no_store` are fixed by 0.1."""

    enabled: bool = Field(True, description="Master switch; false denies every retrieve.")
    state: Literal["active", "paused", "disabled"] = Field(
        "active",
        description="`paused` or `disabled` denies every retrieve access_disabled.",
    )
    training_use: bool = Field(
        False,
        description="The content may be used to train models (aip.json says so).",
    )


class Supports(Strict):
    chunks: bool = Field(True, description="Answers carry chunks of text.")
    citations: bool = Field(True, description="Answers cite each chunk's source.")
    full_article: bool = Field(
        False, description="False: articles are split into chunks and never returned whole."
    )


class Retrieval(Strict):
    supports: Supports = Field(Supports(), description="What a retrieve may return.")
    max_chunks: Annotated[int, Field(ge=1, le=1000)] = Field(
        5,
        description="Most chunks in one answer (policy limits may lower it).",
    )
    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        800,
        description="Most tokens, summed over the chunks of one answer (policy limits may lower "
        "it).",
    )
    chunk_tokens: Annotated[int, Field(ge=8, le=100_000)] = Field(
        200, description="Largest chunk an article is split into, in tokens."
    )
    encoding: Encoding = Field(
        "cl100k_base", description="BPE encoding token counts use (bpe-openai, offline)."
    )
    max_query_chars: Annotated[int, Field(ge=1, le=100_000)] = Field(
        1024, description="Longest runtime.query_text accepted (it is sent to the upstream "
        "search); a longer one is refused invalid_request before any upstream call.",
    )


class Compliance(Strict):
    revocable: bool = Field(
        True,
        description="Access can be revoked (aip.json's compliance.revocable).",
    )
    notice_required: bool = Field(
        False,
        description="Platforms must show a notice (aip.json's compliance.notice_required).",
    )
    revocation_reason: Literal["legal", "policy", "technical"] | None = Field(
        None,
        description="Why access was revoked, when it is; left out of aip.json when unset.",
    )
    sunset: date | None = Field(None, description="Access ends after this date (UTC).")
    last_updated: date | None = Field(
        None, description="Default: the date this config file last changed."
    )


class EventEndpoint(Strict):
    """`POST` citation events here; they are kept in the `aip.events` sink. An event must cite
    a request_id answered `ok` to the same platform within `retention`, and is stored once per
    platform and event_id."""

    path: Path = Field(
        description="Path of the citation-event endpoint (advertised as endpoints.event).",
    )
    required: bool = Field(False, description="Advertised: platforms must post events.")
    max_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = Field(
        64 * 1024, description="Largest event body accepted, in bytes; a larger one is refused "
        "413 request_too_large before it is parsed.",
    )
    retention: Annotated[int, Field(ge=60, le=30 * 86400)] = Field(
        86400, description="Seconds after an ok retrieve during which events may cite its "
        "request_id; event ids are remembered as long, so a duplicate is caught all that time.",
    )
    store: Annotated[str, AfterValidator(store_url)] | None = Field(
        None, description="Where issued request ids and stored event ids are kept: memory:// "
        "(one process) or a Redis URL shared by replicas. Default: signing.nonce_store when "
        "signing is enabled, else memory://.",
    )
    key_prefix: KeyPrefix = Field(
        "aigw:aip-ledger",
        description="Prefix of the Redis keys of issued request ids and event ids.",
    )
    store_timeout: Annotated[float, Field(gt=0, le=10)] = Field(
        0.5, description="Socket timeout for a Redis store, in seconds.",
    )
    max_memory_entries: Annotated[int, Field(ge=100, le=10_000_000)] = Field(
        200_000, description="Bound of the memory store; when full, the entry closest to "
        "expiry is dropped (an old request_id then cannot be cited).",
    )


class Source(Strict):
    """Where answers come from: a search, and optionally the full article of each hit."""

    description: Annotated[str, Field(max_length=500)] = Field(
        "",
        description="What the source holds.",
    )
    domains: list[Domain] = Field(
        [], description="Intent domains this source answers; empty: every editorial domain."
    )
    search: UpstreamOperation = Field(
        description="Placeholders: {query}, {limit} and {top_k} (the hits this call asks for), "
        "{offset} or {after} (where the page starts: 0 and \"\" at first; {after} is the "
        "token the previous answer gave, read by the mapping's `next`) and {fetch} "
        "(offset + limit). A search that pages is read on while hidden hits or its max_items "
        "leave fewer hits than wanted, at most 5 pages.")
    article: UpstreamOperation | None = Field(
        None, description="Reads one hit's whole text ({id}); it is split into chunks."
    )
    article_cache: RecordCacheSettings = Field(
        default_factory=lambda: RecordCacheSettings(max_bytes=16 * 1024 * 1024),
        description="Articles `article` read, remembered per hit and caller while the search "
        "hit's updated_at / content_hash equal the article's (an article changed upstream is "
        "read again; a hit without either is always read). One changed upstream without "
        "either changing is served as it was for up to `ttl` seconds.")
    search_texts: Literal["articles", "excerpts"] = Field(
        "articles", description="Without `article`: whether search texts are whole articles "
        "(split, never returned whole unless full_article) or excerpts (returned as they are).",
    )
    record_visibility: RecordScopes | None = Field(
        None, description="Per-hit visibility (mapped as `metadata.visibility` by the search or "
        "the article mapping), checked for the caller before any text is cut into chunks; "
        "`record_visibility` rules in policies/ naming the source decide too. Without it a hit "
        "is public unless its mapping gives another visibility, which only such rules show.",
    )


class Aip(Strict):
    enabled: bool = Field(True, description="Serve the section (false: keep it, serve nothing).")
    retrieve_path: Path = Field("/pag/retrieve", description="Path of the retrieve endpoint.")
    retrieve_max_bytes: Annotated[int, Field(ge=4096, le=16 * 1024 * 1024)] = Field(
        256 * 1024, description="Largest retrieve body accepted, in bytes (a RetrieveRequest is "
        "small); a larger one is refused 413 request_too_large before it is parsed.",
    )
    capabilities_path: Path = Field(
        "/.well-known/aip/capabilities",
        description="Path of the capabilities document.",
    )
    declaration_max_age: Annotated[int, Field(ge=0, le=86400)] = Field(
        3600,
        description="Cache-Control max-age of aip.json, in seconds.",
    )
    publisher: Publisher = Field(
        description="Who publishes the content (aip.json's publisher; citations name it).",
    )
    intent_access: IntentAccess = Field(
        IntentAccess(),
        description="Whether AI access is on, and for which uses.",
    )
    editorial_domains: list[Domain] = Field(
        min_length=1,
        description="Intent domains the publisher answers (`finance` covers `finance.markets`); "
        "others are denied out_of_scope.",
    )
    retrieval: Retrieval = Field(
        Retrieval(),
        description="What a retrieve may return: chunks, citations, full articles, and the "
        "limits.",
    )
    compliance: Compliance = Field(Compliance(), description="aip.json's compliance statements.")
    event: EventEndpoint | None = Field(
        None, description="The citation-event endpoint, advertised as endpoints.event; needs "
        "`events` (the sink).",
    )
    events: Events | None = Field(
        None, description="Keep an access event per ok retrieve and the posted citation "
        "events; without it no event is recorded.",
    )
    signing: Signing | None = Field(
        None, description="X-AIP-* request signing (HMAC-SHA256 per key), on retrieve and "
        "the event endpoint.",
    )
    sources: dict[SourceName, Source] = Field(
        min_length=1,
        description="The sources retrieves read, by name: an upstream search and an article read "
        "each.",
    )

    def ledger_store(self) -> str:
        """The store of issued request ids and event ids (EventEndpoint.store)."""
        if self.event is not None and self.event.store is not None:
            return self.event.store
        if self.signing is not None and self.signing.enabled:
            return self.signing.nonce_store
        return "memory://"
