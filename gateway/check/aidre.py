"""AIDRE (draft-batum-aidre-00): the discovery document, collections, search and chunks.

The search checks live in `aidre_search`; this module finds the endpoints, checks the
documents, and judges every error answer the checks collected against §10 and §17.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gateway.check import aidre_search
from gateway.check.aidre_rules import (
    CHUNK,
    CHUNK_404,
    COLLECTION_FIELDS,
    COLLECTIONS,
    DISCOVERY,
    DISCOVERY_CORS,
    DISCOVERY_TYPE,
    ENDPOINTS,
    ERRORS_ENVELOPE,
    ERRORS_JSON,
    HEADERS,
    RATELIMIT,
    RATELIMIT_SYNTAX,
    SPACES,
    SPEC,
    VERSION,
    Found,
)
from gateway.check.common import answered, cors, json_object, ratelimit_fields
from gateway.check.context import Context
from gateway.check.http import Answer
from gateway.check.rules import Outcome, Sheet

__all__ = ["SPEC", "run"]

PATH = "/.well-known/ai-discovery"
DEFAULTS = {"search": "/search", "collections": "/collections", "chunk": "/chunks/{id}"}
ABSENT_ID = "aigw-check-absent-chunk-0"


async def run(context: Context, sheet: Sheet) -> None:
    discovery = await _discovery(context, sheet)
    if discovery is None:
        return
    found = Found(discovery, _endpoints(context, discovery, sheet))
    sheet.add(_spaces(discovery))
    await _collections(context, found, sheet)
    await aidre_search.run(context, found, sheet)
    await _chunks(context, found, sheet)
    sheet.add(*_errors(found.answers))
    sheet.add(*ratelimit_fields(RATELIMIT, RATELIMIT_SYNTAX,
                                [a for a in found.answers if a.status]))


async def _discovery(context: Context, sheet: Sheet) -> dict[str, Any] | None:
    answer = await context.document(PATH)
    if answer.status == 404:
        sheet.not_served(answer.describe())
        return None
    sheet.add(cors(DISCOVERY_CORS, answer))
    if answer.status in (401, 403) and context.probe.credentials.given:
        answer = await context.probe.get(PATH, headers={"Accept": HEADERS["Accept"]})
    if answer.status != 200:
        sheet.add(DISCOVERY.failed(answered(answer) or answer.describe()))
        return None
    sheet.note = answer.url
    sheet.add(DISCOVERY.passed("200"), DISCOVERY_TYPE.check(
        answer.is_json_type(), f"Content-Type: {answer.headers.get('content-type', '(none)')}"))
    document, problem = json_object(answer)
    if document is None:
        sheet.add(VERSION.failed(problem))
        return None
    sheet.add(VERSION.check("version" in document, f"version: {document.get('version')!r}"))
    return document


def _endpoints(context: Context, discovery: dict[str, Any], sheet: Sheet
               ) -> dict[str, str | None]:
    """Each endpoint's URL on this origin (None when the document puts it elsewhere); the
    conventional paths where the document names none."""
    named = discovery.get("endpoints")
    named = named if isinstance(named, dict) else {}
    endpoints, missing, elsewhere = {}, [], []
    for name, default in DEFAULTS.items():
        value = named.get(name)
        if not isinstance(value, str) or not value:
            missing.append(name)
            value = default
        endpoints[name] = context.probe.resolve(value)
        if endpoints[name] is None:
            elsewhere.append(name)
    problems = [f"missing: {', '.join(missing)} (using {', '.join(DEFAULTS[m] for m in missing)})"
                ] if missing else []
    problems += [f"on another origin, not checked: {', '.join(elsewhere)}"] if elsewhere else []
    sheet.add(ENDPOINTS.check(not problems, "; ".join(problems) or "all three on this origin"))
    return endpoints


def _spaces(discovery: dict[str, Any]) -> Outcome:
    spaces = discovery.get("embedding_spaces")
    if spaces is None:
        return SPACES.skipped("no embedding_spaces advertised")
    if not isinstance(spaces, list):
        return SPACES.failed("embedding_spaces is not an array")
    for space in spaces:
        if not isinstance(space, dict):
            return SPACES.failed("an embedding space is not an object")
        lacking = [k for k in ("id", "dimensions", "distance") if k not in space]
        if lacking or not _positive(space.get("dimensions")):
            return SPACES.failed(f"space {str(space.get('id'))[:60]!r}: "
                                 + (f"missing {', '.join(lacking)}" if lacking
                                    else "dimensions is not a positive integer"))
    return SPACES.passed(f"{len(spaces)} space(s)")


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


async def _collections(context: Context, found: Found, sheet: Sheet) -> None:
    url = found.endpoints["collections"]
    if url is None:
        sheet.add(COLLECTIONS.skipped("collections endpoint on another origin"))
        return
    answer = await found.call(context, "GET", url)
    document, problem = json_object(answer) if answer.status == 200 else (None, "")
    sheet.add(COLLECTIONS.check(document is not None, problem or answer.describe()))
    listed = (document or {}).get("collections")
    if not isinstance(listed, list):
        listed = found.discovery.get("collections")
    if not isinstance(listed, list) or not listed:
        sheet.add(COLLECTION_FIELDS.skipped("no collections listed"))
        return
    entries = [c for c in listed if isinstance(c, dict)]
    lacking = sorted({k for c in entries for k in ("name", "description", "visibility",
                                                    "updated_at") if k not in c})
    sheet.add(COLLECTION_FIELDS.check(
        len(entries) == len(listed) and not lacking,
        f"missing: {', '.join(lacking)}" if lacking else f"{len(entries)} collection(s)"))
    names = [c["name"] for c in entries if isinstance(c.get("name"), str)]
    found.collection = names[0] if names else None


async def _chunks(context: Context, found: Found, sheet: Sheet) -> None:
    template = found.endpoints["chunk"]
    if template is None or "{id}" not in template:
        sheet.add(CHUNK.skipped("no chunk endpoint template with {id} on this origin"),
                  CHUNK_404.skipped("no chunk endpoint template"))
        return
    if found.result_id is None:
        sheet.add(CHUNK.skipped("no search result to dereference"))
    else:
        answer = await found.call(context, "GET", _chunk_url(template, found.result_id))
        document, problem = json_object(answer) if answer.status == 200 else (None, "")
        sheet.add(CHUNK.check(document is not None, problem or answer.describe()))
    absent = await found.call(context, "GET", _chunk_url(template, ABSENT_ID))
    sheet.add(CHUNK_404.check(absent.status == 404, absent.describe()))


def _chunk_url(template: str, chunk_id: str) -> str:
    return template.replace("{id}", quote(chunk_id, safe=":@"))


def _errors(answers: list[Answer]) -> list[Outcome]:
    errors = [a for a in answers if a.status >= 400]
    if not errors:
        reason = "no error answers collected"
        return [ERRORS_JSON.skipped(reason), ERRORS_ENVELOPE.skipped(reason)]
    outcomes = []
    for answer in errors:
        document, problem = json_object(answer)
        outcomes.append(ERRORS_JSON.check(document is not None, problem or "JSON objects"))
        if document is not None:
            outcomes.append(_envelope(answer, document))
    return outcomes


def _envelope(answer: Answer, document: dict[str, Any]) -> Outcome:
    code = document.get("error")
    lacking = [k for k in ("message", "request_id") if not isinstance(document.get(k), str)]
    if not isinstance(code, str) or not code:
        return ERRORS_ENVELOPE.failed(f"{answer.describe()}: error is not a string code")
    if lacking:
        return ERRORS_ENVELOPE.failed(f"{answer.describe()}: missing {', '.join(lacking)}")
    return ERRORS_ENVELOPE.passed("error, message and request_id on every error")
