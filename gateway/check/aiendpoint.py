"""The AI Discovery Endpoint (draft-aiendpoint-ai-discovery-00): `/.well-known/ai`."""

from __future__ import annotations

from collections import Counter
from typing import Any

from gateway.check import schemas
from gateway.check.common import cors, json_object
from gateway.check.context import Context
from gateway.check.http import Answer
from gateway.check.rules import Outcome, Sheet, Spec

PATH = "/.well-known/ai"
ALIAS = "/ai"
SIZE_SHOULD = 64 * 1024  # §4.5

SPEC = Spec("aiendpoint", "AI Discovery Endpoint", "draft-aiendpoint-ai-discovery-00")
STATUS = SPEC.must("status", "§2.2", "GET /.well-known/ai answers 200 without credentials")
MEDIA_TYPE = SPEC.must("media_type", "§2.3", "served as application/json")
CHARSET = SPEC.should("charset", "§2.3", "Content-Type names charset=utf-8")
JSON = SPEC.must("json", "§2.4, §3", "the body is one UTF-8 JSON object")
SCHEMA = SPEC.must("schema", "§3, App. B", "the document validates against the JSON Schema")
IDS = SPEC.must("capability_ids", "§3.3", "capability ids are unique within the service")
ALIAS_SAME = SPEC.must("alias", "§2.1", "/ai, when served, is identical to /.well-known/ai")
SIZE = SPEC.should("size", "§4.5", "the document is at most 64 KB")
CACHE = SPEC.should("caching", "§4.2", "Cache-Control is set")
CORS = SPEC.should("cors", "Fetch §3.2 (CORS)", "browser agents may read the document")


async def run(context: Context, sheet: Sheet) -> None:
    answer = await context.document(PATH)
    if answer.status == 404:
        sheet.not_served(f"{answer.describe()}")
        return
    if answer.status in (401, 403):
        sheet.add(STATUS.failed(f"{answer.describe()}: §2.2 forbids requiring authentication"))
        return
    if answer.status != 200:
        sheet.add(STATUS.failed(f"{answer.describe()}"))
        return
    sheet.note = answer.url
    sheet.add(STATUS.passed("200 without credentials"), *_headers(answer), cors(CORS, answer))
    document, problem = json_object(answer)
    sheet.add(JSON.check(document is not None, problem or f"{len(answer.body)} bytes"))
    if document is None:
        return
    sheet.add(_schema(document), _unique_ids(document))
    sheet.add(await _alias(context, document))


def _headers(answer: Answer) -> list[Outcome]:
    content_type = answer.headers.get("content-type", "")
    return [
        MEDIA_TYPE.check(answer.media_type == "application/json",
                         f"Content-Type: {content_type or '(none)'}"),
        CHARSET.check("charset=utf-8" in content_type.lower().replace(" ", ""),
                      f"Content-Type: {content_type or '(none)'}"),
        SIZE.check(len(answer.body) <= SIZE_SHOULD, f"{len(answer.body)} bytes"),
        CACHE.check("cache-control" in answer.headers,
                    f"Cache-Control: {answer.headers.get('cache-control', '(none)')}"),
    ]


def _schema(document: dict[str, Any]) -> Outcome:
    problem = schemas.problem(document, schemas.aiendpoint())
    return SCHEMA.check(problem is None, problem or "valid")


def _unique_ids(document: dict[str, Any]) -> Outcome:
    capabilities = document.get("capabilities")
    if not isinstance(capabilities, list):
        return IDS.skipped("no capabilities array")
    ids = Counter(c.get("id") for c in capabilities if isinstance(c, dict))
    repeated = sorted(str(i) for i, n in ids.items() if n > 1)
    return IDS.check(not repeated, f"repeated: {', '.join(repeated)}" if repeated
                     else f"{len(ids)} capabilities")


async def _alias(context: Context, document: dict[str, Any]) -> Outcome:
    alias = await context.document(ALIAS)
    if alias.status != 200:
        return ALIAS_SAME.skipped(f"alias not served ({alias.describe()})")
    copy, problem = json_object(alias)
    if copy is None:
        return ALIAS_SAME.failed(problem)
    return ALIAS_SAME.check(copy == document, "identical" if copy == document
                            else "/ai differs from /.well-known/ai")


def document_of(answer: Answer) -> dict[str, Any] | None:
    """The parsed `/.well-known/ai` document, when it is one (for the MCP and AIDIP checks)."""
    if answer.status != 200:
        return None
    return json_object(answer)[0]
