"""Invoking an agent through the gateway (AIDIP §5).

Inputs are checked against the operation's `inputs` schema before any upstream call, outputs
against `outputs` after it. Both kinds of agent are called through what the pipeline hands
this request (`pipeline.Calls`): configured agents as a configured upstream (with its
`add_headers` credentials and the caller's identity, as every upstream call); registered
agents only through the locked-down egress client (gateway.upstream.egress), with nothing but
the input and a request id. The input travels as the operation's method says (`sending`: a
JSON body, or a query for a GET), every request of a batch made and its URL length checked
before any is sent. Every upstream failure becomes one of the error objects of §5.2 with a
generic message. A call is retried once only when the operation is declared idempotent.

Each agent has a circuit breaker, and only the agent's own failures count against it: a 5xx,
a timeout, a connection that fails. A 4xx is the agent refusing this caller's input (§5.2's
client error): it is answered as the same kind of client error, without the agent's body, and
leaves the breaker as it was, so no caller can open an agent's circuit for everyone with
inputs the agent rejects. Neither do answers the gateway cannot use (a redirect, non-JSON, an
output that fails `outputs`), a refused destination, or a caller that goes away mid-call.

Schema checks run in a schema thread within a budget (`gateway.untrusted_schema`): an input
too big or too costly to check is 400 `InvalidInput`, never a blocked event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import orjson

from gateway.asgi import RawHeaders
from gateway.context import RequestContext
from gateway.errors import GatewayError
from gateway.handles import Calls
from gateway.surfaces.aidip.breaker import Breaker
from gateway.surfaces.aidip.catalog import Agent, Operation
from gateway.surfaces.aidip.metadata import schema_problems
from gateway.surfaces.aidip.render import fields_message, invalid_input
from gateway.surfaces.aidip.sending import Outgoing, outgoing
from gateway.untrusted_schema import SchemaRefused, Unverifiable
from gateway.upstream import UpstreamError
from gateway.upstream.egress.client import Answer, EgressFailed, EgressRefused
from gateway.upstream_call import MAX_UPSTREAM_URL_BYTES, AnswerTooLarge

log = logging.getLogger("aigw.aidip")
_RETRIABLE_STATUSES = (502, 503, 504)
_MAX_CONFIGURED_ANSWER = 16 * 1024 * 1024


class AgentFailure(Exception):
    """The agent did not produce a usable answer; `kind` says how (for the log and metrics)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind

    @property
    def agent_at_fault(self) -> bool:
        """Whether this says the agent is unhealthy: what its circuit breaker counts."""
        return self.kind in ("timeout", "connect") or self.kind.startswith("status_5")

    def error(self) -> GatewayError:
        if self.kind == "timeout":
            return GatewayError(504, "AgentTimeout", "The agent did not answer in time.")
        if self.kind in ("connect", "status_503", "inactive"):
            return GatewayError(503, "AgentUnavailable", "The agent is unavailable; try later.")
        if self.kind == "refused":
            return GatewayError(502, "EndpointRefused",
                                "The agent's endpoint is not an allowed destination.")
        return GatewayError(502, "AgentError",
                            "The agent encountered an unexpected error while processing "
                            "the request.")


# The agent's 4xx, as the client error the caller gets: (status, code, message). A 401 or 403
# is about the gateway's call, never the caller's gateway credential, so it is a 403 here.
_REFUSALS = {
    400: (400, "InvalidInput", "The agent refused the input."),
    401: (403, "Forbidden", "The agent refused this call."),
    403: (403, "Forbidden", "The agent refused this call."),
    404: (404, "NotFound", "The agent found nothing the input refers to."),
    409: (409, "Conflict", "The agent reported a conflict with the input."),
    410: (404, "NotFound", "The agent found nothing the input refers to."),
    413: (413, "PayloadTooLarge", "The input is too large for the agent."),
    422: (422, "InvalidInput", "The agent refused the input."),
    429: (429, "RateLimited", "The agent is limiting calls; try later."),
}
_OTHER_REFUSAL = (400, "InvalidInput", "The agent refused the request.")


class AgentRefusal(Exception):
    """The agent answered 4xx: the caller's error, which says nothing about the agent's health."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status

    def error(self) -> GatewayError:
        return GatewayError(*_REFUSALS.get(self.status, _OTHER_REFUSAL))


async def check_inputs(operation: Operation, body: Any, max_batch: int) -> list[Any]:
    """The inputs to send, one per call; `InvalidInput` naming each bad field."""
    if isinstance(body, list):
        if not operation.batch:
            raise invalid_input("This operation does not accept a batch (a JSON array).")
        if not 1 <= len(body) <= max_batch:
            raise invalid_input(f"Send 1 to {max_batch} inputs in a batch.")
        items = body
    else:
        items = [body]
    try:
        checked = await schema_problems(items, operation.inputs)
    except Unverifiable as exc:
        raise invalid_input(f"The input cannot be checked: {exc.problem}.",
                            [{"field": "(body)", "problem": exc.problem}]) from None
    except SchemaRefused as exc:  # stored before the gateway refused such schemas
        log.warning("inputs schema refused", extra={"fields": {"problem": str(exc)}})
        raise AgentFailure("invalid_schema").error() from None
    found = []
    for index, problems in enumerate(checked):
        for problem in problems:
            field = problem["field"]
            if isinstance(body, list):
                field = f"[{index}]" + ("" if field == "(body)" else f".{field}")
            found.append({**problem, "field": field})
    if found:
        raise invalid_input(fields_message(found), found)
    return items


class Invoker:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls  # the upstream calls the pipeline allows this request

    def prepare(self, operation: Operation, items: list[Any], batch: bool) -> list[Outgoing]:
        """The request for each input (`sending`), all made before any is sent:
        `InvalidInput` naming the field a request cannot carry, or the input whose URL would
        be longer than upstream servers accept."""
        prepared = []
        for index, item in enumerate(items):
            at = f"[{index}]" if batch else ""
            request = outgoing(operation, item, at)
            if self.calls.url_too_long(request.target, operation.upstream):
                raise invalid_input(
                    f"The input is too long for the agent's URL (at most "
                    f"{MAX_UPSTREAM_URL_BYTES} bytes): send shorter values.",
                    [{"field": at or "(body)", "problem": "too long for a URL"}])
            prepared.append(request)
        return prepared

    async def run(self, agent: Agent, operation: Operation, requests: list[Outgoing],
                  ctx: RequestContext, breaker: Breaker,
                  credentials: RawHeaders) -> Any:
        """The outputs (a list for a batch), or a `GatewayError` in AIDIP's vocabulary."""
        if agent.status == "inactive":
            raise AgentFailure("inactive").error()
        wait = breaker.retry_after()
        if wait is not None:
            raise GatewayError(503, "AgentUnavailable",
                               "The agent is failing; calls are paused for a while.",
                               {"retry_after": wait}, (("retry-after", str(wait)),))
        outputs = []
        try:
            for request in requests:
                outputs.append(await self._one(agent, operation, request, ctx, credentials))
        except AgentRefusal as refusal:
            breaker.release()  # the caller's error: no breaker failure, no upstream error
            raise refusal.error() from None
        except AgentFailure as failure:
            if failure.agent_at_fault:
                breaker.failure()
            else:
                breaker.release()
            ctx.upstream_error = failure.kind
            log.warning("agent call failed", extra={"fields": {
                "request_id": ctx.request_id, "agent": agent.id, "kind": failure.kind}})
            raise failure.error() from None
        except BaseException:
            breaker.release()  # e.g. the caller went away: a half-open trial may run again
            raise
        breaker.success()
        return outputs

    async def _one(self, agent: Agent, operation: Operation, request: Outgoing,
                   ctx: RequestContext, credentials: RawHeaders) -> Any:
        attempts = 2 if operation.idempotent else 1
        for attempt in range(attempts):
            try:
                answer = await self._call(agent, operation, request, ctx, credentials)
                if answer.status in _RETRIABLE_STATUSES and attempt + 1 < attempts:
                    continue
                # a configured upstream's URLs are the gateway's business; a registered
                # agent's answer is its own
                scrub = self.calls.without_upstream_urls if operation.upstream else None
                return await _output(answer, operation, scrub)
            except AgentFailure as failure:
                if failure.kind not in ("connect", "timeout") or attempt + 1 == attempts:
                    raise
        raise AgentFailure("unreachable")  # pragma: no cover -- the loop always returns

    async def _call(self, agent: Agent, operation: Operation, request: Outgoing,
                    ctx: RequestContext, credentials: RawHeaders) -> Answer:
        if operation.url is not None:
            return await self._registered(operation.method, request, ctx)
        return await self._configured(agent, operation, request, ctx, credentials)

    async def _registered(self, method: str, request: Outgoing, ctx: RequestContext) -> Answer:
        ctx.upstream = "registered-agent"
        headers = {"accept": "application/json", "x-request-id": ctx.request_id,
                   "via": "1.1 aigw"}
        if request.body is not None:
            headers["content-type"] = "application/json"
        try:
            return await self.calls.call_registered(method, request.target, request.body,
                                                    headers)
        except EgressRefused:
            raise AgentFailure("refused") from None
        except EgressFailed as exc:
            raise AgentFailure(exc.kind) from None

    async def _configured(self, agent: Agent, operation: Operation, request: Outgoing,
                          ctx: RequestContext, credentials: RawHeaders) -> Answer:
        assert operation.upstream is not None  # a configured agent's operation names it
        forwarded = credentials if operation.forward_token else []
        try:
            async with asyncio.timeout(agent.timeout):
                sent = await self.calls.send(operation.upstream, operation.method,
                                             request.target, request.body, headers=forwarded,
                                             max_bytes=_MAX_CONFIGURED_ANSWER)
        except TimeoutError:
            raise AgentFailure("timeout") from None
        except AnswerTooLarge:
            raise AgentFailure("too_large") from None
        except UpstreamError as exc:
            raise AgentFailure("timeout" if exc.kind == "timeout" else "connect") from None
        return Answer(sent.status, sent.content_type, sent.body)


async def _output(answer: Answer, operation: Operation,
                  scrub: Callable[[Any, bytes], Any] | None = None) -> Any:
    """The answer's JSON document, checked against the operation's outputs schema after
    `scrub` (what upstream URLs in it become), or an `AgentFailure`/`AgentRefusal`."""
    if answer.status == 503:
        raise AgentFailure("status_503")
    if 400 <= answer.status < 500:
        raise AgentRefusal(answer.status)
    if answer.status >= 300 or answer.status < 200:
        raise AgentFailure(f"status_{answer.status}")
    if "json" not in answer.content_type.lower():
        raise AgentFailure("not_json")
    try:
        document = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        raise AgentFailure("not_json") from None
    if scrub is not None:
        document = scrub(document, answer.body)
    try:
        problems = await schema_problems([document], operation.outputs)
    except (Unverifiable, SchemaRefused):
        raise AgentFailure("invalid_output") from None
    if problems[0]:
        raise AgentFailure("invalid_output")
    return document
