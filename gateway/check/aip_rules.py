"""AIP 0.1's rules: the publisher declaration, RetrieveResponse, and message signing."""

from __future__ import annotations

from gateway.check.common import CORS_SECTION
from gateway.check.rules import Spec

SPEC = Spec("aip", "AIP", "Agentic Intent Protocol 0.1")
POLICY = SPEC.must("policy.status", "aip.json",
                   "GET /.well-known/aip.json answers 200 with a JSON object")
POLICY_TYPE = SPEC.should("policy.media_type", "aip.json", "aip.json is application/json")
POLICY_SCHEMA = SPEC.must("policy.schema", "aip.schema.json",
                          "aip.json validates against the 0.1 schema")
POLICY_CORS = SPEC.should("policy.cors", CORS_SECTION, "browser agents may read aip.json")
ENDPOINT = SPEC.should("policy.retrieve_endpoint", "aip.json endpoints",
                       "endpoints.retrieve names the retrieve URL on this origin")
RESPONSE = SPEC.must("retrieve.ok", "RetrieveResponse",
                     "an in-scope request answers a valid RetrieveResponse (ok or denied)")
REQUEST_ID = SPEC.must("retrieve.request_id", "RetrieveResponse",
                       "request_id echoes the request's")
STATUS_MEMBERS = SPEC.must("retrieve.status_members", "RetrieveResponse status handling",
                           "ok carries content, denied a denial, error an error; "
                           "never content with a denial")
LIMITS = SPEC.must("retrieve.limits", "RetrieveResponse content rules",
                   "chunks respect aip.json's max_chunks and max_tokens")
CITATIONS = SPEC.must("retrieve.citations", "RetrieveResponse citation rules",
                      "citations reference returned chunks only")
DENIED = SPEC.must("retrieve.denied", "RetrieveRequest evaluation; RetrieveResponse",
                   "an intent outside editorial_domains is denied, in a valid response")
ERROR = SPEC.must("retrieve.error", "RetrieveResponse status handling",
                  "a request missing required fields answers status error, valid")
MEDIA = SPEC.should("retrieve.media_type", "RetrieveResponse", "answers are application/json")
SIGNED = SPEC.must("signing.accepted", "Signing: publisher verification",
                   "a correctly signed request is accepted")
TAMPERED = SPEC.must("signing.tampered", "Signing: publisher verification",
                     "a signature that does not match the body is rejected (401/403)")
REPLAY = SPEC.must("signing.replay", "Signing: publisher verification",
                   "a replayed nonce is rejected (401/403)")
RESPONSE_SIGNATURE = SPEC.must("signing.response", "Signing: signing responses",
                               "a signed response verifies with the key")
