"""AIP 0.1: the publisher declaration (`/.well-known/aip.json`) and RetrieveResponse's
ok, denied and error answers; the signed-request checks are in `aip_signed`.

Sections name the AIP documents (their pages have headings, not numbers): `aip.json` is the
publisher declaration page, RetrieveResponse and RetrieveRequest their schema pages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from gateway.check import aip_signed, schemas
from gateway.check.aip_rules import (
    CITATIONS,
    DENIED,
    ENDPOINT,
    ERROR,
    LIMITS,
    MEDIA,
    POLICY,
    POLICY_CORS,
    POLICY_SCHEMA,
    POLICY_TYPE,
    REQUEST_ID,
    RESPONSE,
    SPEC,
    STATUS_MEMBERS,
)
from gateway.check.aip_signed import refused
from gateway.check.aip_signing import sign
from gateway.check.common import cors, items, json_object, member
from gateway.check.context import Context
from gateway.check.http import Answer
from gateway.check.rules import Outcome, Sheet

__all__ = ["SPEC", "run"]

PATH = "/.well-known/aip.json"
DEFAULT_RETRIEVE = "/pag/retrieve"
OUT_OF_SCOPE = "aigwcheck.out-of-scope"  # no publisher's editorial domain
PLATFORM = "aigw-check"  # platform.id, unless --aip-platform names the key's


@dataclass(frozen=True, slots=True)
class Sent:
    """A retrieve request as it went, to replay it byte for byte."""

    body: bytes
    headers: dict[str, str]
    answer: Answer


class Retriever:
    """POSTs RetrieveRequests to the retrieve endpoint, signed when the checker has a key."""

    def __init__(self, context: Context, url: str) -> None:
        self.context, self.url = context, url
        parts = urlsplit(url)
        self.path = parts.path + (f"?{parts.query}" if parts.query else "")

    async def post(self, request: dict[str, Any]) -> Sent:
        body = json.dumps(request).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.context.aip_key
        if key is not None:
            headers.update(sign(key.secret, key.key_id, "POST", self.path, body))
        return await self.send(body, headers)

    async def send(self, body: bytes, headers: dict[str, str]) -> Sent:
        answer = await self.context.probe.request("POST", self.url, content=body,
                                                  headers=headers)
        return Sent(body, headers, answer)


async def run(context: Context, sheet: Sheet) -> None:
    policy = await _policy(context, sheet)
    if policy is None:
        return
    url = _retrieve_url(context, policy, sheet)
    if url is None:
        sheet.skip_rest("the retrieve endpoint is on another origin: not checked")
        return
    retriever = Retriever(context, url)
    domains = items(policy.get("editorial_domains")) or ["general"]
    platform = context.aip_key.platform if context.aip_key else PLATFORM
    ok = await retriever.post(request(str(domains[0]), "aigw-check-ok", platform))
    if refused(ok.answer) and context.aip_key is None:
        sheet.skip_rest(f"{ok.answer.describe()}: the publisher requires signed requests "
                        "or credentials (pass --aip-key or --token)")
        return
    denied = await retriever.post(request(OUT_OF_SCOPE, "aigw-check-denied", platform))
    error = await retriever.post({"aip_version": "0.1", "request_id": "aigw-check-error"})
    sheet.add(*_judge_ok(ok.answer, policy), *_judge_denied(denied.answer),
              *_judge_error(error.answer))
    for sent in (ok, denied, error):
        sheet.add(MEDIA.check(sent.answer.media_type == "application/json",
                              f"{sent.answer.describe()}: {sent.answer.media_type or 'none'}"))
    await aip_signed.run(retriever, ok, sheet)


def request(domain: str, request_id: str, platform: str = PLATFORM) -> dict[str, Any]:
    """A RetrieveRequest valid against retrieve-request.schema.json."""
    return {
        "aip_version": "0.1", "request_id": request_id,
        "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "platform": {"id": platform, "software": "aigw check"},
        "intent": {"domain": domain},
        "context": {"language": "en-US", "placement": "conversation"},
        "runtime": {"session_id": "aigw-check", "turn_index": 0, "query_text": "help"},
    }


async def _policy(context: Context, sheet: Sheet) -> dict[str, Any] | None:
    answer = await context.document(PATH)
    if answer.status == 404:
        sheet.not_served(answer.describe())
        return None
    if answer.status != 200:
        sheet.add(POLICY.failed(answer.describe()))
        return None
    sheet.note = answer.url
    document, problem = json_object(answer)
    sheet.add(POLICY.check(document is not None, problem or "200"),
              POLICY_TYPE.check(answer.media_type == "application/json",
                                f"Content-Type: {answer.headers.get('content-type')}"),
              cors(POLICY_CORS, answer))
    if document is None:
        return None
    invalid = schemas.problem(document, schemas.aip("aip"))
    sheet.add(POLICY_SCHEMA.check(invalid is None, invalid or "valid"))
    return document


def _retrieve_url(context: Context, policy: dict[str, Any], sheet: Sheet) -> str | None:
    named = member(member(policy.get("endpoints")).get("retrieve")).get("url")
    if not isinstance(named, str):
        sheet.add(ENDPOINT.failed(f"no endpoints.retrieve.url: using {DEFAULT_RETRIEVE}"))
        return context.probe.resolve(DEFAULT_RETRIEVE)
    url = context.probe.resolve(named)
    sheet.add(ENDPOINT.check(url is not None, named if url else f"{named}: another origin"))
    return url


def _response(answer: Answer) -> tuple[dict[str, Any] | None, str]:
    """The RetrieveResponse, or None and why it is not one."""
    document, problem = json_object(answer)
    if document is None:
        return None, problem
    invalid = schemas.problem(document, schemas.aip("retrieve-response"))
    return (None, f"{answer.describe()}: {invalid}") if invalid else (document, "")


def _judge_ok(answer: Answer, policy: dict[str, Any]) -> list[Outcome]:
    document, problem = _response(answer)
    if document is None:
        return [RESPONSE.failed(problem)]
    status = document.get("status")
    code = (document.get("error") or {}).get("code")
    outcomes = [RESPONSE.check(status in ("ok", "denied"), f"status {status!r}"
                               + (f" ({code})" if code else "") + " for an in-scope intent"),
                REQUEST_ID.check(document.get("request_id") == "aigw-check-ok",
                                 f"request_id {document.get('request_id')!r}"),
                _members(document)]
    if status != "ok":
        reason = f"status {status!r}: no content to check"
        return [*outcomes, LIMITS.skipped(reason), CITATIONS.skipped(reason)]
    return [*outcomes, _limits(document, policy), _citations(document)]


def _members(document: dict[str, Any]) -> Outcome:
    status = document.get("status")
    wanted = {"ok": "content", "denied": "denial", "error": "error"}.get(str(status))
    if "content" in document and "denial" in document:
        return STATUS_MEMBERS.failed("content and denial in one response")
    if wanted is None or not isinstance(document.get(wanted), dict):
        return STATUS_MEMBERS.failed(f"status {status!r} without its {wanted} member")
    if status != "ok" and "content" in document:
        return STATUS_MEMBERS.failed(f"status {status!r} with content")
    return STATUS_MEMBERS.passed("each status carries its member")


def _limits(document: dict[str, Any], policy: dict[str, Any]) -> Outcome:
    chunks = document.get("content", {}).get("chunks", [])
    retrieval = member(policy.get("retrieval"))
    max_chunks, max_tokens = retrieval.get("max_chunks"), retrieval.get("max_tokens")
    tokens = sum(c.get("token_count", 0) for c in chunks if isinstance(c, dict)
                 and isinstance(c.get("token_count"), int))
    if isinstance(max_chunks, int) and len(chunks) > max_chunks:
        return LIMITS.failed(f"{len(chunks)} chunks over max_chunks {max_chunks}")
    if isinstance(max_tokens, int) and tokens > max_tokens:
        return LIMITS.failed(f"{tokens} tokens over max_tokens {max_tokens}")
    return LIMITS.passed(f"{len(chunks)} chunk(s), {tokens} token(s) within "
                         f"{max_chunks}/{max_tokens}")


def _citations(document: dict[str, Any]) -> Outcome:
    returned = {c.get("id") for c in document.get("content", {}).get("chunks", [])
                if isinstance(c, dict)}
    cited = {i for c in document.get("citations") or [] if isinstance(c, dict)
             for i in c.get("chunk_ids") or []}
    stray = sorted(str(i) for i in cited - returned)
    return CITATIONS.check(not stray, f"cite chunks not returned: {', '.join(stray)[:80]}"
                           if stray else f"{len(cited)} cited chunk(s), all returned")


def _judge_denied(answer: Answer) -> list[Outcome]:
    document, problem = _response(answer)
    if document is None:
        return [DENIED.failed(problem)]
    reason = (document.get("denial") or {}).get("reason")
    return [DENIED.check(document.get("status") == "denied",
                         f"status {document.get('status')!r}, reason {reason!r}"),
            _members(document)]


def _judge_error(answer: Answer) -> list[Outcome]:
    document, problem = _response(answer)
    if document is None:
        return [ERROR.failed(problem)]
    code = (document.get("error") or {}).get("code")
    return [ERROR.check(document.get("status") == "error",
                        f"status {document.get('status')!r}, code {code!r}"),
            _members(document)]
