"""PDPP reads with the caller's token: streams, a page of records, the §8 error cases, and
the advertised lexical and semantic searches."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gateway.check import schemas
from gateway.check.common import items, json_object, member
from gateway.check.context import Context
from gateway.check.http import Answer
from gateway.check.pdpp_rules import (
    CLAMP_WARNING,
    CLAMPED,
    INVALID_CURSOR,
    LEXICAL,
    LEXICAL_PARAMETER,
    RECORDS,
    RECORDS_LIMIT,
    SEMANTIC,
    SEMANTIC_VECTOR,
    STREAM_404,
    STREAMS,
    UNAUTHENTICATED,
    UNKNOWN_PARAMETER,
)
from gateway.check.rules import Outcome, Sheet

STREAMS_PATH = "/v1/streams"
LIMIT = 2
MAX_LIMIT = 100  # core §8 List records: "Default 25, max 100"
UNKNOWN = "aigw_check_unknown"


class Reads:
    def __init__(self, context: Context, capabilities: dict[str, Any]) -> None:
        self.context = context
        self.capabilities = capabilities
        self.answers: list[Answer] = []

    async def get(self, target: str, params: dict[str, str] | None = None, *,
                  auth: bool = True) -> Answer:
        answer = await self.context.probe.get(target, params=params, auth=auth,
                                              headers={"Accept": "application/json"})
        self.answers.append(answer)
        return answer

    async def run(self, sheet: Sheet) -> None:
        anonymous = await self.get(STREAMS_PATH, auth=False)
        sheet.add(_unauthenticated(anonymous))
        listing = await self.get(STREAMS_PATH)
        if listing.status in (401, 403):
            sheet.skip_rest(f"{listing.describe()} with the given credentials: pass an owner "
                            "or grant token with --token")
            return
        stream = _first_stream(listing, sheet)
        absent = await self.get(f"{STREAMS_PATH}/aigw-check-absent-stream")
        sheet.add(STREAM_404.check(absent.status in (403, 404), absent.describe()))
        if stream is not None:
            await self._records(f"{STREAMS_PATH}/{quote(stream, safe='')}/records", sheet)
        await self._search("lexical_retrieval", LEXICAL, "lexical_search", LEXICAL_PARAMETER,
                           {UNKNOWN: "1"}, sheet)
        await self._search("semantic_retrieval", SEMANTIC, "semantic_search", SEMANTIC_VECTOR,
                           {"vector": "0.6,0.8"}, sheet)

    async def _records(self, path: str, sheet: Sheet) -> None:
        page = await self.get(path, {"limit": str(LIMIT)})
        document, problem = _valid(page, "record_list")
        sheet.add(RECORDS.check(document is not None, problem or "list envelope"))
        if document is not None:
            count = len(document["data"])
            sheet.add(RECORDS_LIMIT.check(count <= LIMIT, f"{count} for limit={LIMIT}"))
        unknown = await self.get(path, {UNKNOWN: "1"})
        sheet.add(UNKNOWN_PARAMETER.check(unknown.status == 400, unknown.describe()))
        cursor = await self.get(path, {"cursor": "aigw-check-not-a-cursor"})
        code = _code(cursor)
        sheet.add(INVALID_CURSOR.check(cursor.status == 400 and code == "invalid_cursor",
                                       f"{cursor.describe()}, code {code!r}"))
        await self._clamped(path, sheet)

    async def _clamped(self, path: str, sheet: Sheet) -> None:
        page = await self.get(path, {"limit": str(MAX_LIMIT * 10)})
        document, problem = _valid(page, "record_list")
        count = len(document["data"]) if document is not None else 0
        sheet.add(CLAMPED.check(document is not None and count <= MAX_LIMIT,
                                problem or f"{count} record(s) for limit={MAX_LIMIT * 10}"))
        if document is None or count < MAX_LIMIT:
            sheet.add(CLAMP_WARNING.skipped(f"{count} record(s): nothing was clamped"))
            return
        warnings = items(member(document.get("meta")).get("warnings"))
        codes = [w.get("code") for w in warnings if isinstance(w, dict)]
        sheet.add(CLAMP_WARNING.check("limit_clamped" in codes, f"warnings: {codes}"))

    async def _search(self, name: str, rule: Any, schema: str, refusal: Any,
                      unsupported: dict[str, str], sheet: Sheet) -> None:
        advert = self.capabilities.get(name)
        endpoint = advert.get("endpoint") if isinstance(advert, dict) else None
        if not isinstance(advert, dict) or advert.get("supported") is not True \
                or not isinstance(endpoint, str):
            sheet.add(rule.skipped(f"{name} not advertised"),
                      refusal.skipped(f"{name} not advertised"))
            return
        if self.context.probe.resolve(endpoint) is None:
            sheet.add(rule.skipped(f"{endpoint} is on another origin"),
                      refusal.skipped(f"{endpoint} is on another origin"))
            return
        answer = await self.get(endpoint, {"q": "help", "limit": str(LIMIT)})
        sheet.add(_search_results(rule, schema, answer))
        refused = await self.get(endpoint, {"q": "help", **unsupported})
        sheet.add(refusal.check(refused.status == 400, refused.describe()))


def _unauthenticated(answer: Answer) -> Outcome:
    code = (json_object(answer)[0] or {}).get("error")
    kind = code.get("type") if isinstance(code, dict) else None
    return UNAUTHENTICATED.check(answer.status == 401 and kind == "authentication_error",
                                 f"{answer.describe()}, type {kind!r}")


def _first_stream(answer: Answer, sheet: Sheet) -> str | None:
    document, problem = _valid(answer, "stream_list")
    sheet.add(STREAMS.check(document is not None, problem or "list envelope"))
    names = [s["name"] for s in (document or {}).get("data", []) if isinstance(s, dict)
             and isinstance(s.get("name"), str) and s["name"].isprintable()]
    if not names:
        sheet.add(RECORDS.skipped("no stream to read"))
    return names[0] if names else None


def _search_results(rule: Any, schema: str, answer: Answer) -> Outcome:
    document, problem = _valid(answer, schema)
    if document is None:
        return rule.failed(problem)
    modes = {r.get("retrieval_mode") for r in document["data"] if isinstance(r, dict)}
    if schema == "semantic_search" and modes - {"semantic"}:
        return rule.failed(f"retrieval_mode {sorted(map(str, modes))}, not only semantic")
    return rule.passed(f"{len(document['data'])} search_result(s)")


def _valid(answer: Answer, schema: str) -> tuple[dict[str, Any] | None, str]:
    """A 200 answer's document when it validates against the PDPP response schema."""
    if answer.status != 200:
        return None, answer.describe()
    document, problem = json_object(answer)
    if document is None:
        return None, problem
    invalid = schemas.problem(document, schemas.pdpp(schema))
    return (None, f"{answer.describe()}: {invalid}") if invalid else (document, "")


def _code(answer: Answer) -> str | None:
    error = (json_object(answer)[0] or {}).get("error")
    return error.get("code") if isinstance(error, dict) else None
