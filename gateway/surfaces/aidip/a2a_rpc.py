"""A2A's JSON-RPC binding for AIDIP's agents, served by a2a-sdk's JSON-RPC dispatcher.

`POST {base}/agents/{id}/a2a` is that agent; `POST {base}/agents/a2a` is the registry (the
gateway's card). Both are `SurfaceRoute`s: the pipeline admits the caller first
(authentication, the route rules' scopes, rate limits). The body is read within the limit AIDIP
reads invocation bodies with and checked to be JSON (else AIDIP's 413, 415 or 400); a2a-sdk's
`JsonRpcDispatcher` then validates the JSON-RPC request and the A2A params, calls
`AgentRequests` (its `RequestHandler`), and renders results and errors. The SDK's
`DefaultRequestHandler` is not used: it runs each call as a task in background asyncio tasks
and keeps every task (failed ones too) in a store, where a call here is one request-response.

`SendMessage` takes one part: a data part, the AIDIP input, or a text part where the skill
maps text onto a field of its input (text_parts.py; a text part elsewhere is A2A's
ContentTypeNotSupportedError). It serves that input through the AIDIP invoke route (or the
registry search) as an inner request (gateway.inner): that route's admission, schema checks,
policy, breaker, upstream call, decision log and metrics apply as to a direct call. Its output
is answered as a message with one data part; its failures as A2A errors (a2a_errors.py). No
task is ever kept (A2A lets a message be the whole answer), so nothing here grows with the
calls: no task is found by GetTask, CancelTask or SubscribeToTask, ListTasks lists none, and
streaming and push notifications are not offered (the cards say so).

A message (or the request) may name a skill in its metadata, `{"skill": name}`: at an agent,
one of its operations (needed when it has several); at the registry, `agent-search` (the
default) or an agent's id. Every error's data carries a stable `code` and the `request_id`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from functools import partial
from typing import Any

from a2a.helpers import get_data_parts, new_data_message
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import RequestHandler, validate_request_params
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from starlette.requests import Request
from starlette.responses import Response

from gateway import inner
from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.inner import InnerCall
from gateway.surfaces.aidip.a2a import SEARCH_SKILL
from gateway.surfaces.aidip.a2a_errors import (
    answer_error,
    error_data,
    refusal,
    with_error_data,
)
from gateway.surfaces.aidip.catalog import Catalog
from gateway.surfaces.aidip.request import json_bytes
from gateway.surfaces.aidip.text_parts import JSON_MODE, SEARCH_TEXT_FIELD, is_text

log = logging.getLogger("aigw.aidip")
_EXCHANGE = "aigw.exchange"  # the ServerCallContext state entry the handler reads
_OWN_HEADERS = frozenset({b"a2a-version", b"a2a-extensions"})  # A2A's, not the inner call's
_SKILL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")  # agent ids and operation names
_NO_TASK = "No task is kept here: every answer is a message."
_MAX_EXACT = 2**53


@dataclass(slots=True)
class A2ACall:
    """What the endpoint learns from the handler, kept on the exchange (`surface_state`)."""

    refusal: GatewayError | None = None  # to answer over HTTP instead
    answered: bool = False  # SendMessage succeeded: the response is a result


class A2AEndpoint:
    """The routes' endpoint: one dispatcher per config generation, no state per call."""

    def __init__(self, base: str, catalog: Catalog) -> None:
        # It logs request bodies at DEBUG and every client error at WARNING.
        logging.getLogger("a2a").setLevel(logging.ERROR)
        self.dispatcher = JsonRpcDispatcher(AgentRequests(base, catalog), _WithExchange())

    async def __call__(self, exchange: Exchange) -> Response:
        body = await json_bytes(exchange.request, exchange.settings.proxy.max_body_bytes)
        state = A2ACall()
        exchange.surface_state = state
        scope = {**exchange.request.scope, "state": {"exchange": exchange}}
        response = await self.dispatcher.handle_requests(Request(scope, _replay(body)))
        if state.refusal is not None:
            raise state.refusal
        return response if state.answered else with_error_data(response, exchange.request_id)


class AgentRequests(RequestHandler):
    """The A2A methods, for an agent (`id` in the path) or for the registry."""

    def __init__(self, base: str, catalog: Catalog) -> None:
        self.base = base  # "{base_path}/agents"
        self.catalog = catalog

    @validate_request_params
    async def on_message_send(self, params: SendMessageRequest,
                              context: ServerCallContext) -> Task | Message:
        exchange: Exchange = context.state[_EXCHANGE]
        try:
            return await self._send(params, exchange)
        except A2AError:
            raise
        except Exception:  # the SDK would answer its text: log it, answer a generic error
            log.exception("A2A call failed", extra={"fields": {
                "request_id": exchange.request_id}})
            raise InternalError("The request could not be served.",
                                error_data("InternalError", exchange.request_id)) from None

    async def _send(self, params: SendMessageRequest, exchange: Exchange) -> Message:
        request_id = exchange.request_id
        if params.message.task_id:
            raise TaskNotFoundError(_NO_TASK, error_data("NotFound", request_id))
        agent_id, skill = exchange.request.path_params.get("id"), _skill(params, request_id)
        part = _one_part(params.message, request_id)
        body = _data_input(part, request_id) if part.HasField("data") \
            else await self._text_input(part, agent_id, skill, exchange)
        call = self._call(agent_id, skill, body)
        try:
            answer = await inner.call(exchange, call, own_headers=_OWN_HEADERS)
        except GatewayError as error:
            raise InternalError(error.message, error_data(error.code, request_id)) from None
        state = exchange.surface_state
        assert isinstance(state, A2ACall)
        if not answer.ok:
            state.refusal = refusal(answer)
            raise answer_error(answer, request_id)
        output = answer.json()
        if output is None:
            raise InternalError("The agent's answer could not be read.",
                                error_data("InternalError", request_id))
        state.answered = True
        return _reply(params.message, output)

    async def _text_input(self, part: Part, agent_id: str | None, skill: str | None,
                          exchange: Exchange) -> dict[str, str]:
        """A text part as the input: `{field: text}` where the operation maps text
        (text_parts.py); else A2A's ContentTypeNotSupportedError."""
        field = None
        if part.HasField("text") and is_text(part.media_type):
            field = await self._text_field(agent_id, skill, exchange)
        if field is None:
            raise ContentTypeNotSupportedError(
                "This skill takes its input as one data part (application/json), not "
                f"{part.media_type[:64] or part.WhichOneof('content') or 'this part'}.",
                error_data("ContentTypeNotSupported", exchange.request_id,
                           accepted=[JSON_MODE]))
        return {field: part.text}

    async def _text_field(self, agent_id: str | None, skill: str | None,
                          exchange: Exchange) -> str | None:
        """The field a text part fills at the skill called, for a caller who may see its
        agent (else not found, as the invocation itself would answer)."""
        if agent_id is None:
            if skill is None or skill == SEARCH_SKILL:
                return SEARCH_TEXT_FIELD
            agent_id, skill = skill, None
        request_id = exchange.request_id
        try:
            agent = await self.catalog.find(agent_id, exchange.principal,
                                            partial(exchange.pipeline.permitted, exchange))
        except GatewayError as error:
            raise TaskNotFoundError(error.message, error_data("NotFound", request_id)) from None
        if skill is None and len(agent.operations) != 1:
            raise InvalidParamsError(
                "This agent has several operations: name one as the message's skill.",
                error_data("InvalidInput", request_id, errors=[
                    {"field": "metadata.skill", "message": "required field is missing"}]))
        operation = next(iter(agent.operations.values())) if skill is None \
            else agent.operations.get(skill)
        if operation is None:
            raise TaskNotFoundError("This agent has no such operation.",
                                    error_data("NotFound", request_id))
        return operation.text_field

    def _call(self, agent_id: str | None, skill: str | None, body: Any) -> InnerCall:
        if agent_id is None:
            if skill is None or skill == SEARCH_SKILL:
                return InnerCall("POST", f"{self.base}/search", json=body)
            agent_id, skill = skill, None
        if skill is None:
            return InnerCall("POST", f"{self.base}/{{id}}/invoke", {"id": agent_id}, json=body)
        return InnerCall("POST", f"{self.base}/{{id}}/invoke/{{operation}}",
                         {"id": agent_id, "operation": skill}, json=body)

    async def on_get_task(self, params: GetTaskRequest,
                          context: ServerCallContext) -> Task | None:
        raise TaskNotFoundError(_NO_TASK, _data(context, "NotFound"))

    async def on_list_tasks(self, params: ListTasksRequest,
                            context: ServerCallContext) -> ListTasksResponse:
        return ListTasksResponse()

    async def on_cancel_task(self, params: CancelTaskRequest,
                             context: ServerCallContext) -> Task | None:
        raise TaskNotFoundError(_NO_TASK, _data(context, "NotFound"))

    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncGenerator[Event]:
        raise UnsupportedOperationError("Streaming is not offered: use SendMessage.",
                                        _data(context, "Unsupported"))
        yield  # an async generator, as the interface declares

    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Event]:
        raise TaskNotFoundError(_NO_TASK, _data(context, "NotFound"))
        yield

    async def on_create_task_push_notification_config(
            self, params: TaskPushNotificationConfig,
            context: ServerCallContext) -> TaskPushNotificationConfig:
        raise _no_push(context)

    async def on_get_task_push_notification_config(
            self, params: GetTaskPushNotificationConfigRequest,
            context: ServerCallContext) -> TaskPushNotificationConfig:
        raise _no_push(context)

    async def on_list_task_push_notification_configs(
            self, params: ListTaskPushNotificationConfigsRequest,
            context: ServerCallContext) -> ListTaskPushNotificationConfigsResponse:
        raise _no_push(context)

    async def on_delete_task_push_notification_config(
            self, params: DeleteTaskPushNotificationConfigRequest,
            context: ServerCallContext) -> None:
        raise _no_push(context)

    async def on_get_extended_agent_card(self, params: GetExtendedAgentCardRequest,
                                         context: ServerCallContext) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError(
            "The public card is the whole card.", _data(context, "Unsupported"))


class _WithExchange(DefaultServerCallContextBuilder):
    """The SDK's call context, with the request's exchange for the handler."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[_EXCHANGE] = request.state.exchange
        return context


def _one_part(message: Message, request_id: str) -> Part:
    if len(message.parts) != 1:
        raise InvalidParamsError(
            "Send the agent's input as the message's one part: a data part, or text where "
            "the skill takes text.",
            error_data("InvalidInput", request_id, errors=[
                {"field": "message.parts", "message": "expected exactly one part"}]))
    return message.parts[0]


def _data_input(part: Part, request_id: str) -> Any:
    """The AIDIP input of a data part (numbers that are whole again)."""
    if part.data.WhichOneof("kind") in (None, "null_value"):
        raise InvalidParamsError(
            "The data part holds no input.",
            error_data("InvalidInput", request_id, errors=[
                {"field": "message.parts", "message": "expected a JSON value, not null"}]))
    return _whole_numbers(get_data_parts([part])[0])


def _whole_numbers(value: Any) -> Any:
    """A2A carries JSON numbers as doubles: 5 arrives as 5.0, which an `integer` schema or the
    agent may refuse. Whole ones become integers again (as their JSON had them)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_EXACT:
        return int(value)
    if isinstance(value, dict):
        return {name: _whole_numbers(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def _skill(params: SendMessageRequest, request_id: str) -> str | None:
    for metadata in (params.message.metadata, params.metadata):
        if "skill" not in metadata.fields:
            continue
        value = metadata.fields["skill"]
        if value.WhichOneof("kind") != "string_value" or not _SKILL.match(value.string_value):
            raise InvalidParamsError("Metadata 'skill' must name one of the card's skills.",
                                     error_data("InvalidInput", request_id, errors=[
                                         {"field": "metadata.skill",
                                          "message": "expected a skill id"}]))
        return value.string_value
    return None


def _reply(request: Message, output: Any) -> Message:
    return new_data_message(output, "application/json", context_id=request.context_id or None)


def _data(context: ServerCallContext, code: str) -> dict[str, Any]:
    exchange: Exchange = context.state[_EXCHANGE]
    return error_data(code, exchange.request_id)


def _no_push(context: ServerCallContext) -> PushNotificationNotSupportedError:
    return PushNotificationNotSupportedError("Push notifications are not offered.",
                                             _data(context, "Unsupported"))


def _replay(body: bytes) -> Any:
    """The receive channel of the SDK's request: the body, read once here, bounded."""
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    return receive

