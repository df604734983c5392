"""PDPP: the resource-server metadata (RFC 9728 plus PDPP's members and `capabilities`),
then the reads in `pdpp_reads`, then every error answer against the PdppError envelope."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gateway.check import pdpp_reads, schemas
from gateway.check.common import cors, json_object
from gateway.check.context import Context
from gateway.check.http import Answer, origin_of
from gateway.check.pdpp_rules import (
    ERRORS,
    LEXICAL_AD,
    METADATA,
    METADATA_CORS,
    METADATA_SCHEMA,
    REQUEST_ID,
    RESOURCE,
    SEMANTIC_AD,
    SPEC,
    VERSION,
)
from gateway.check.rules import Outcome, Sheet

__all__ = ["SPEC", "run"]

PATH = "/.well-known/oauth-protected-resource"
# RFC 9728 §2's members: the reference server's schema forbids some of them, RFC 9728 wins
# (specs README, known disagreements), so only the other members meet that schema.
RFC9728 = frozenset({
    "resource", "authorization_servers", "jwks_uri", "scopes_supported",
    "bearer_methods_supported", "resource_signing_alg_values_supported", "resource_name",
    "resource_documentation", "resource_policy_uri", "resource_tos_uri",
    "tls_client_certificate_bound_access_tokens", "authorization_details_types_supported",
    "dpop_signing_alg_values_supported", "dpop_bound_access_tokens_required", "signed_metadata",
})
LEXICAL_KEYS = ("supported", "endpoint", "cross_stream", "snippets", "default_limit",
                "max_limit")
SEMANTIC_KEYS = ("supported", "stability", "endpoint", "cross_stream", "query_input",
                 "snippets", "lexical_blending", "model", "dimensions", "distance_metric",
                 "default_limit", "max_limit", "index_state")


async def run(context: Context, sheet: Sheet) -> None:
    answer = await context.document(PATH)
    metadata = json_object(answer)[0] if answer.status == 200 else None
    capabilities = _capabilities(metadata)
    if not _speaks_pdpp(metadata):
        streams = await context.probe.get(pdpp_reads.STREAMS_PATH)
        listing = json_object(streams)[0] if streams.status == 200 else None
        if (listing or {}).get("object") != "list":
            sheet.not_served(f"no PDPP members in {PATH} ({answer.describe()}) and "
                             f"{streams.describe()}")
            return
    sheet.note = answer.url if metadata is not None else ""
    sheet.add(*_metadata(context, answer, metadata))
    reads = pdpp_reads.Reads(context, capabilities)
    await reads.run(sheet)
    sheet.add(*_errors(reads.answers), *_headers(reads.answers))


def _speaks_pdpp(metadata: dict[str, Any] | None) -> bool:
    return metadata is not None and (
        any(name.startswith("pdpp_") for name in metadata) or bool(_capabilities(metadata)))


def _capabilities(metadata: dict[str, Any] | None) -> dict[str, Any]:
    capabilities = (metadata or {}).get("capabilities")
    return capabilities if isinstance(capabilities, dict) else {}


def _metadata(context: Context, answer: Answer, metadata: dict[str, Any] | None
              ) -> list[Outcome]:
    if metadata is None:
        return [METADATA.failed(json_object(answer)[1] or answer.describe())]
    resource = metadata.get("resource")
    same = isinstance(resource, str) and origin_of(resource) == context.probe.origin \
        and urlsplit(resource).path in ("", "/")
    outcomes = [METADATA.passed("200 without a token"), cors(METADATA_CORS, answer),
                RESOURCE.check(same, f"resource {str(resource)[:80]!r}")]
    members = schemas.pdpp("resource_metadata")["properties"]
    for name, value in metadata.items():
        if name not in RFC9728 and name in members:
            problem = schemas.problem(value, members[name])
            outcomes.append(METADATA_SCHEMA.check(problem is None, f"{name}: {problem}"
                                                  if problem else "PDPP members valid"))
    capabilities = _capabilities(metadata)
    outcomes += [_advert(LEXICAL_AD, capabilities.get("lexical_retrieval"), LEXICAL_KEYS, {}),
                 _advert(SEMANTIC_AD, capabilities.get("semantic_retrieval"), SEMANTIC_KEYS,
                         {"stability": ("experimental",), "query_input": ("text",),
                          "index_state": ("built", "building", "stale")})]
    return outcomes


def _advert(rule: Any, advert: Any, keys: tuple[str, ...],
            values: dict[str, tuple[str, ...]]) -> Outcome:
    if not isinstance(advert, dict) or advert.get("supported") is not True:
        return rule.skipped("not advertised as supported")
    lacking = [key for key in keys if key not in advert]
    if lacking:
        return rule.failed(f"missing {', '.join(lacking)}")
    wrong = [f"{key} {advert[key]!r}" for key, allowed in values.items()
             if advert[key] not in allowed]
    return rule.check(not wrong, ", ".join(wrong) if wrong else "complete")


def _errors(answers: list[Answer]) -> list[Outcome]:
    errors = [a for a in answers if a.status >= 400]
    if not errors:
        return [ERRORS.skipped("no error answers collected")]
    schema = schemas.pdpp("error")
    outcomes = []
    for answer in errors:
        document, problem = json_object(answer)
        if document is not None:
            invalid = schemas.problem(document, schema)
            problem = f"{answer.describe()}: {invalid}" if invalid else ""
        outcomes.append(ERRORS.check(not problem, problem or f"{len(errors)} error answers"))
    return outcomes


def _headers(answers: list[Answer]) -> list[Outcome]:
    answered = [a for a in answers if a.status]
    if not answered:
        return []
    lacking_id = [a for a in answered if "request-id" not in a.headers]
    lacking_version = [a for a in answered if "pdpp-version" not in a.headers]
    return [REQUEST_ID.check(not lacking_id, f"{lacking_id[0].describe()}: no Request-Id"
                             if lacking_id else "on every answer"),
            VERSION.check(not lacking_version, f"{lacking_version[0].describe()}: "
                          "no PDPP-Version" if lacking_version else "on every answer")]
