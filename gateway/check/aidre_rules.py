"""AIDRE's rules (draft-batum-aidre-00), and what its checks find and collect on the way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.check.common import CORS_SECTION, RATELIMIT_SECTION
from gateway.check.context import Context
from gateway.check.http import Answer
from gateway.check.rules import Spec

MEDIA_TYPE = "application/aidre+json"
# §15.2: what a client sends; `Accept` also takes plain JSON, as §14.1 lets servers answer.
HEADERS = {"Content-Type": MEDIA_TYPE, "Accept": f"{MEDIA_TYPE}, application/json"}

SPEC = Spec("aidre", "AIDRE", "draft-batum-aidre-00")
DISCOVERY = SPEC.must("discovery.status", "§3.1", "GET /.well-known/ai-discovery answers 200")
DISCOVERY_TYPE = SPEC.must("discovery.media_type", "§3.2",
                           "the discovery document is JSON (application/json)")
VERSION = SPEC.must("discovery.version", "§23.1", "the discovery document has a version member")
ENDPOINTS = SPEC.should("discovery.endpoints", "§3.4",
                        "endpoints names search, collections and chunk on this origin")
SPACES = SPEC.must("discovery.embedding_spaces", "§19.1",
                   "each embedding space has id, dimensions and distance")
DISCOVERY_CORS = SPEC.should("discovery.cors", CORS_SECTION,
                             "browser agents may read the discovery document")
COLLECTIONS = SPEC.must("collections.get", "§15.1", "the collections resource answers GET")
COLLECTION_FIELDS = SPEC.should("collections.fields", "§4",
                                "each collection has name, description, visibility, updated_at")
SEARCH = SPEC.must("search.text", "§5.2, §16.1",
                   "a text query answers 200 with a JSON object holding a results array")
SEARCH_TYPE = SPEC.should("search.media_type", "§15.3",
                          "a successful search answers application/aidre+json")
SEARCH_ENVELOPE = SPEC.should("search.envelope", "§16.1",
                              "a search answer has request_id, collection and meta")
TOP_K_LIMIT = SPEC.must("search.top_k_limit", "§18.1",
                        "no more results than top_k asks for")
TOP_K_BOUNDS = SPEC.must("search.top_k_bounds", "§18.1",
                         "top_k 0 and -1 are rejected with a 4xx error")
VECTORS_DEFAULT = SPEC.should("search.no_vectors_by_default", "§7.3, §11.2",
                              "results carry no vectors unless asked")
EXACTLY_ONE = SPEC.should("search.exactly_one", "§5.1",
                          "a request with both or neither of query and query_vector is rejected")
DIMENSION = SPEC.must("search.vector_dimension", "§19.2",
                      "a query_vector of the wrong length answers 422")
VECTOR = SPEC.should("search.vector", "§5.3", "a query_vector of the declared length is served")
UNKNOWN_SPACE = SPEC.should("search.unknown_space", "§17.3",
                            "an unknown embedding_space is rejected with a 4xx error")
UNSUPPORTED_TYPE = SPEC.should("search.media_type_415", "§15.4",
                               "a body sent as text/plain answers 415")
SEARCH_RULES = (SEARCH, SEARCH_TYPE, SEARCH_ENVELOPE, TOP_K_LIMIT, TOP_K_BOUNDS, VECTORS_DEFAULT,
                EXACTLY_ONE, DIMENSION, VECTOR, UNKNOWN_SPACE, UNSUPPORTED_TYPE)
CHUNK = SPEC.must("chunk.get", "§15.1", "a result's chunk answers GET")
CHUNK_404 = SPEC.should("chunk.not_found", "§15.4", "an unknown chunk id answers 404")
ERRORS_JSON = SPEC.must("errors.json", "§10, §17.1", "every error is a JSON object")
ERRORS_ENVELOPE = SPEC.should("errors.envelope", "§17.1, §17.3",
                              "errors carry error (a stable code), message and request_id")
RATELIMIT = SPEC.should("ratelimit.present", "§21.1", "answers expose RateLimit fields")
RATELIMIT_SYNTAX = SPEC.must("ratelimit.syntax", RATELIMIT_SECTION,
                             "RateLimit fields hold non-negative integers")


@dataclass
class Found:
    """What the checks found (the endpoints, a collection, a result) and every answer."""

    discovery: dict[str, Any]
    endpoints: dict[str, str | None]
    collection: str | None = None
    result_id: str | None = None
    answers: list[Answer] = field(default_factory=list)

    async def call(self, context: Context, method: str, target: str, **options: Any) -> Answer:
        headers = {**HEADERS, **options.pop("headers", {})}
        answer = await context.probe.request(method, target, headers=headers, **options)
        self.answers.append(answer)
        return answer
