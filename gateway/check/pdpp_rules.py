"""PDPP's rules: core v0.1 §8 (the resource server) and the lexical and semantic retrieval
extensions (`pdpp/lexical-retrieval.md`, `pdpp/semantic-retrieval-current.md`)."""

from __future__ import annotations

from gateway.check.common import CORS_SECTION
from gateway.check.rules import Spec

SPEC = Spec("pdpp", "PDPP", "PDPP core v0.1, lexical and semantic retrieval")
METADATA = SPEC.must("metadata.status", "RFC 9728 §3; lexical-retrieval",
                     "resource metadata answers 200 JSON without a token")
RESOURCE = SPEC.must("metadata.resource", "RFC 9728 §3.3",
                     "metadata's resource is the origin it was fetched from")
METADATA_SCHEMA = SPEC.must("metadata.schema", "reference OpenAPI",
                            "PDPP members validate against the reference schema")
LEXICAL_AD = SPEC.must("metadata.lexical", "lexical-retrieval: advertisement",
                       "a supported lexical_retrieval names endpoint, cross_stream, snippets, "
                       "default_limit, max_limit")
SEMANTIC_AD = SPEC.must("metadata.semantic", "semantic-retrieval: advertisement",
                        "a supported semantic_retrieval names its keys, stability experimental, "
                        "query_input text, index_state")
METADATA_CORS = SPEC.should("metadata.cors", CORS_SECTION,
                            "browser agents may read the resource metadata")
UNAUTHENTICATED = SPEC.must("errors.unauthenticated", "core §8 Errors",
                            "a request without a token answers 401 authentication_error")
STREAMS = SPEC.must("streams.list", "core §8 List streams",
                    "GET /v1/streams answers a list envelope of streams")
STREAM_404 = SPEC.must("streams.not_found", "core §8 Errors",
                       "an unknown stream answers 404 not_found (403 outside a grant)")
RECORDS = SPEC.must("records.list", "core §8 List records",
                    "records answer the list envelope (object, data, has_more)")
RECORDS_LIMIT = SPEC.must("records.limit", "core §8 List records",
                          "a page holds at most limit records")
UNKNOWN_PARAMETER = SPEC.must("records.unknown_parameter", "core §8 List records",
                              "an unknown query parameter answers 400")
CLAMPED = SPEC.must("records.limit_clamped", "core §8 List records",
                    "a limit over 100 answers 200 with at most 100 records")
CLAMP_WARNING = SPEC.should("records.limit_warning", "core §8 Non-fatal warnings",
                            "that page carries meta.warnings limit_clamped")
INVALID_CURSOR = SPEC.must("records.invalid_cursor", "core §8 Errors",
                           "a malformed cursor answers 400 invalid_cursor")
LEXICAL = SPEC.must("search.lexical", "lexical-retrieval: results",
                    "the advertised lexical endpoint answers search_result entries")
LEXICAL_PARAMETER = SPEC.must("search.lexical_unknown_parameter", "lexical-retrieval: ranking",
                              "an unsupported search parameter answers 400")
SEMANTIC = SPEC.must("search.semantic", "semantic-retrieval: results",
                     "the advertised semantic endpoint answers retrieval_mode semantic results")
SEMANTIC_VECTOR = SPEC.must("search.semantic_no_vector", "semantic-retrieval: text only",
                            "a raw vector parameter answers 400")
ERRORS = SPEC.must("errors.envelope", "core §8 Errors",
                   "every non-2xx answer is the PdppError envelope")
REQUEST_ID = SPEC.should("headers.request_id", "core §8 API versioning",
                         "answers carry a Request-Id header")
VERSION = SPEC.should("headers.version", "core §8 API versioning",
                      "answers carry the PDPP-Version selected")
