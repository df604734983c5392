"""AIDIP (draft-cui-ai-agent-discovery-invocation-01): the agent registry and invocation.

The registry is where `/.well-known/ai` or the A2A card says (an AIDIP interface), else
`/agents`. Invocation is exercised only with an input the agent's own schema refuses, so no
agent does any work for the checker.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gateway.check.aiendpoint import PATH as AI_PATH
from gateway.check.aiendpoint import document_of
from gateway.check.common import items, json_object, json_value
from gateway.check.context import Context
from gateway.check.http import Answer
from gateway.check.rules import Outcome, Sheet, Spec

__all__ = ["SPEC", "run"]

DEFAULT_REGISTRY = "/agents"
CARD = "/.well-known/agent-card.json"
CORE = ("id", "name", "description", "version", "publisher", "capabilities", "tags",
        "endpoint")  # §3.1
SUMMARY_FIELDS = ("id", "name", "description", "endpoint", "capabilities")  # §4.3.1

SPEC = Spec("aidip", "AIDIP", "draft-cui-ai-agent-discovery-invocation-01")
LIST = SPEC.must("agents.list", "§4.3.1", "GET /agents answers a JSON array of agent summaries")
SUMMARY = SPEC.should("agents.summary", "§4.3.1",
                      "summaries carry id, name, description, endpoint, capabilities")
METADATA = SPEC.must("agents.metadata", "§3.1, §4.3.3",
                     "GET /agents/{id} answers the agent's metadata with the core fields")
IO = SPEC.must("agents.io_schema", "§3.2",
               "the agent describes its inputs and outputs as JSON Schemas")
NOT_FOUND = SPEC.should("agents.not_found", "§4.3.3", "an unknown agent id answers 404")
SEARCH = SPEC.should("agents.search", "§4.3.1, §4.3.2",
                     "POST /agents/search answers a JSON array of at most `top` agents")
INVALID = SPEC.should("invoke.invalid_input", "§5.2",
                      "an input the operation's schema refuses answers 4xx")
ERRORS = SPEC.should("errors.envelope", "§5.2", "errors carry error.code and error.message")


async def run(context: Context, sheet: Sheet) -> None:
    registry, named = await _registry(context)
    calls: list[Answer] = []
    listing = await _get(context, registry, calls)
    agents, problem = json_value(listing) if listing.status == 200 else (None, "")
    if listing.status == 404 or (not named and not isinstance(agents, list)):
        sheet.not_served(f"{listing.describe()} and no AIDIP registry named in {AI_PATH} "
                         f"or {CARD}")
        return
    sheet.note = listing.url
    if not isinstance(agents, list):
        sheet.add(LIST.failed(problem or listing.describe()))
        return
    sheet.add(LIST.passed(f"{len(agents)} agent(s)"), _summaries(agents))
    absent = await _get(context, f"{registry}/aigw-check-absent-agent", calls)
    sheet.add(NOT_FOUND.check(absent.status == 404, absent.describe()))
    search = await context.probe.request("POST", f"{registry}/search",
                                         json_body={"query": "help", "top": 1})
    calls.append(search)
    found = json_value(search)[0] if search.status == 200 else None
    sheet.add(SEARCH.check(isinstance(found, list) and len(found) <= 1,
                           f"{search.describe()}, {len(found) if isinstance(found, list) else 'no'}"
                           " agent(s) for top=1"))
    ids = [a["id"] for a in agents if isinstance(a, dict) and isinstance(a.get("id"), str)]
    if ids:
        await _agent(context, f"{registry}/{quote(ids[0], safe='')}", calls, sheet)
    else:
        sheet.add(METADATA.skipped("no agent listed"))
    sheet.add(*_errors(calls))


async def _registry(context: Context) -> tuple[str, bool]:
    """The registry's URL on this origin, and whether a discovery document named it."""
    ai = document_of(await context.document(AI_PATH)) or {}
    for capability in items(ai.get("capabilities")):
        endpoint = capability.get("endpoint") if isinstance(capability, dict) else None
        if isinstance(endpoint, str) and endpoint.rstrip("/").endswith("/agents") \
                and capability.get("method") == "GET" and context.probe.resolve(endpoint):
            return endpoint.rstrip("/"), True
    card = json_object(await context.document(CARD))[0] or {}
    for interface in items(card.get("supportedInterfaces")):
        if isinstance(interface, dict) and interface.get("protocolBinding") == "AIDIP" \
                and isinstance(interface.get("url"), str) \
                and context.probe.resolve(interface["url"]):
            return interface["url"].rstrip("/"), True
    return DEFAULT_REGISTRY, False


async def _get(context: Context, target: str, calls: list[Answer]) -> Answer:
    answer = await context.probe.get(target, headers={"Accept": "application/json"})
    calls.append(answer)
    return answer


def _summaries(agents: list[Any]) -> Outcome:
    lacking = sorted({k for a in agents for k in SUMMARY_FIELDS
                      if not isinstance(a, dict) or k not in a})
    return SUMMARY.check(not lacking, f"missing: {', '.join(lacking)}" if lacking
                         else "all summary fields")


async def _agent(context: Context, url: str, calls: list[Answer], sheet: Sheet) -> None:
    answer = await _get(context, url, calls)
    metadata, problem = json_object(answer) if answer.status == 200 \
        else (None, answer.describe())
    if metadata is None:
        sheet.add(METADATA.failed(problem))
        return
    lacking = [k for k in CORE if k not in metadata]
    sheet.add(METADATA.check(not lacking, f"missing: {', '.join(lacking)}" if lacking
                             else "core fields present"))
    operations = _operations(metadata)
    sheet.add(IO.check(bool(operations) and all(_described(o) for o in operations),
                       f"{len(operations)} operation(s) with inputs and outputs"
                       if operations and all(_described(o) for o in operations)
                       else "no operation with object inputs and outputs schemas"))
    await _invalid_input(context, metadata, operations, calls, sheet)


def _operations(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """§3.2: the operations array, or the single implied one of top-level inputs/outputs."""
    operations = metadata.get("operations")
    if isinstance(operations, list):
        return [o for o in operations if isinstance(o, dict)]
    if "inputs" in metadata or "outputs" in metadata:
        return [metadata]
    return []


def _described(operation: dict[str, Any]) -> bool:
    return isinstance(operation.get("inputs"), dict) and isinstance(operation.get("outputs"),
                                                                    dict)


async def _invalid_input(context: Context, metadata: dict[str, Any],
                         operations: list[dict[str, Any]], calls: list[Answer],
                         sheet: Sheet) -> None:
    """POST `{}` to an operation whose inputs require a field: it must be refused."""
    for operation in operations:
        inputs = operation.get("inputs")
        required = inputs.get("required") if isinstance(inputs, dict) else None
        endpoint = operation.get("endpoint") if operation is not metadata else None
        if not isinstance(endpoint, str) and len(operations) == 1:
            endpoint = metadata.get("endpoint")
        if isinstance(required, list) and required and isinstance(endpoint, str) \
                and context.probe.resolve(endpoint):
            answer = await context.probe.request("POST", endpoint, json_body={})
            calls.append(answer)
            sheet.add(INVALID.check(400 <= answer.status < 500,
                                    f"{{}} without {str(required[0])[:40]!r}: {answer.describe()}"))
            return
    sheet.add(INVALID.skipped("no operation on this origin with a required input"))


def _errors(calls: list[Answer]) -> list[Outcome]:
    errors = [a for a in calls if a.status >= 400]
    outcomes = []
    for answer in errors:
        error = (json_object(answer)[0] or {}).get("error")
        ok = isinstance(error, dict) and isinstance(error.get("code"), str) \
            and isinstance(error.get("message"), str)
        outcomes.append(ERRORS.check(ok, "error.code and error.message" if ok
                                     else f"{answer.describe()}: no error.code/message"))
    return outcomes or [ERRORS.skipped("no error answers collected")]
