"""The AIDIP routes: the registry (§4), invocation (§5), the schema, A2A cards and A2A's
JSON-RPC binding (a2a_rpc.py).

The pipeline admits every caller (authentication, route scopes, rate limits) before a handler
runs; failures raised here are answered by the app in AIDIP's dialect (render.py).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Callable
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.handles import Calls
from gateway.model import Principal
from gateway.surface import SurfaceRoute, Way, Ways
from gateway.surfaces.aidip import metadata
from gateway.surfaces.aidip.a2a import Cards
from gateway.surfaces.aidip.a2a_rpc import A2AEndpoint
from gateway.surfaces.aidip.breaker import Breakers
from gateway.surfaces.aidip.catalog import Agent, Catalog, Operation, Permitted, from_record
from gateway.surfaces.aidip.invoke import Invoker, check_inputs
from gateway.surfaces.aidip.owners import RECORD_FORMAT, owner_of
from gateway.surfaces.aidip.policy_rules import registration_ask
from gateway.surfaces.aidip.render import fields_message, invalid_input, json_response
from gateway.surfaces.aidip.request import (
    filters_from,
    filters_from_query,
    json_body,
    query_from,
    top_from,
)
from gateway.surfaces.aidip.search import Filters, ranked
from gateway.surfaces.aidip.sending import DEFAULT_METHOD
from gateway.surfaces.aidip.store import Created
from gateway.surfaces.aidip.urls import url_fields
from gateway.upstream.egress.urls import url_problem

_RESERVED_IDS = frozenset({"search", "a2a"})  # POST /agents/search, /agents/a2a
_SEARCH_FIELDS = frozenset({"query", "filters", "top"})
_WRITE_ATTEMPTS = 3  # compare-and-set retries when a concurrent write changed the agent


class AidipService:
    """One config generation's registry, bound into its routes."""

    def __init__(self, catalog: Catalog, breakers: Breakers, cards: Cards) -> None:
        self.catalog = catalog
        self.settings = catalog.settings
        self.breakers = breakers
        self.cards = cards
        self.a2a = A2AEndpoint(f"{self.settings.base_path}/agents", catalog)

    def routes(self) -> list[SurfaceRoute]:
        base = f"{self.settings.base_path}/agents"
        return [
            SurfaceRoute("/.well-known/agent-card.json", self.gateway_card, methods=["GET"],
                         name="aidip.card"),
            # where A2A clients before 0.3 look for the card
            SurfaceRoute("/.well-known/agent.json", self.gateway_card, methods=["GET"],
                         name="aidip.card_legacy"),
            SurfaceRoute(f"{base}/schema.json", self.schema, methods=["GET"],
                         name="aidip.schema"),
            SurfaceRoute(base, self.list_agents, methods=["GET"], name="aidip.list"),
            SurfaceRoute(base, self.register, methods=["POST"], name="aidip.register",
                         ways=self._registering),
            SurfaceRoute(f"{base}/search", self.search, methods=["POST"], name="aidip.search"),
            SurfaceRoute(f"{base}/a2a", self.a2a, methods=["POST"], name="aidip.a2a"),
            SurfaceRoute(f"{base}/{{id}}", self.read, methods=["GET"], name="aidip.read",
                         ways=self._entitled(lambda agent: [f"{base}/{agent.id}"])),
            SurfaceRoute(f"{base}/{{id}}", self.update, methods=["PUT"], name="aidip.update",
                         ways=self._changing(registering=True)),
            SurfaceRoute(f"{base}/{{id}}", self.delete, methods=["DELETE"],
                         name="aidip.delete", ways=self._changing(registering=False)),
            SurfaceRoute(f"{base}/{{id}}/agent-card.json", self.agent_card, methods=["GET"],
                         name="aidip.agent_card"),
            SurfaceRoute(f"{base}/{{id}}/a2a", self.a2a, methods=["POST"],
                         name="aidip.a2a_agent"),
            SurfaceRoute(f"{base}/{{id}}/invoke", self.invoke, methods=["POST"],
                         name="aidip.invoke",
                         ways=self._entitled(lambda agent: [f"{base}/{agent.id}/invoke"])),
            SurfaceRoute(f"{base}/{{id}}/invoke/{{operation}}", self.invoke, methods=["POST"],
                         name="aidip.invoke_operation", ways=self._entitled(
                             lambda agent: [f"{base}/{agent.id}/invoke/{name}"
                                            for name in agent.operations])),
        ]

    # ------------------------------------------------------------------ whom routes serve

    def _entitled(self, paths: Callable[[Agent], list[str]]) -> Ways:
        """Reading or invoking an agent serves a caller entitled to one (`Catalog.needs`),
        at one of its paths the route rules admit."""

        async def ways(exchange: Exchange) -> AsyncGenerator[Way, None]:
            principal = exchange.principal
            async for agent in self.catalog.every():
                asks = self.catalog.needs(agent, principal)
                if asks is not None:
                    for path in paths(agent):
                        yield Way(asks, path)

        return ways

    async def _registering(self, exchange: Exchange) -> AsyncGenerator[Way, None]:
        """Registering serves a caller who can own an agent, with the rules' leave."""
        if _owner_name(exchange.principal) is not None:
            yield Way((registration_ask(exchange.principal),))

    def _changing(self, *, registering: bool) -> Ways:
        """Updating (`registering`) or deleting serves a caller who may change an agent (its
        owner, or the admin scope); updating also needs the leave to register."""
        base = f"{self.settings.base_path}/agents"

        async def ways(exchange: Exchange) -> AsyncGenerator[Way, None]:
            principal = exchange.principal
            if registering and _owner_name(principal) is None:
                return
            asks = (registration_ask(principal),) if registering else ()
            async for agent in self.catalog.every():
                if self.catalog.may_change(agent, principal):
                    yield Way(asks, f"{base}/{agent.id}")

        return ways

    # ------------------------------------------------------------------ discovery

    async def schema(self, exchange: Exchange) -> Response:
        return json_response(metadata.AGENT_SCHEMA, headers={"cache-control": "public, "
                                                             "max-age=3600"})

    async def list_agents(self, exchange: Exchange) -> Response:
        request = exchange.request
        top = top_from(request.query_params.get("top"), self.settings)
        agents = await self._matching(exchange, filters_from_query(request))
        return json_response([self.catalog.summary(agent) for agent in agents[:top]])

    async def search(self, exchange: Exchange) -> Response:
        request = exchange.request
        body = await json_body(request, 64 * 1024)
        if not isinstance(body, dict):
            raise invalid_input("The search body must be a JSON object.")
        unknown = sorted(set(body) - _SEARCH_FIELDS)
        if unknown:
            raise invalid_input(f"Unknown field '{unknown[0]}'.",
                                [{"field": name, "problem": "unknown field"} for name in unknown])
        top = top_from(body.get("top"), self.settings)
        query = query_from(body.get("query"))
        agents = await self._matching(exchange, filters_from(body.get("filters")))
        if query is None:
            return json_response([self.catalog.summary(agent) for agent in agents[:top]])
        return json_response([{**self.catalog.summary(agent), "score": score}
                              for agent, score in ranked(agents, query)[:top]])

    async def read(self, exchange: Exchange) -> Response:
        ctx, request = exchange.ctx, exchange.request
        agent = await self._find(exchange, request.path_params["id"])
        return json_response(self.catalog.public(agent, ctx.principal))

    async def gateway_card(self, exchange: Exchange) -> Response:
        ctx = exchange.ctx
        agents = await self.catalog.visible(ctx.principal, _permitted(exchange))
        return json_response(self.cards.gateway(agents),
                             headers={"cache-control": "private, max-age=60"})

    async def agent_card(self, exchange: Exchange) -> Response:
        agent = await self._find(exchange, exchange.request.path_params["id"])
        return json_response(self.cards.agent(agent))

    # ------------------------------------------------------------------ registration

    async def register(self, exchange: Exchange) -> Response:
        ctx, request = exchange.ctx, exchange.request
        owner = self._registrant(exchange)
        body = await json_body(request, self.settings.registry.max_metadata_bytes)
        agent_id = body.get("id") if isinstance(body, dict) else None
        record = await self._record(exchange, body, agent_id or str(uuid.uuid4()), owner)
        agent_id = record["metadata"]["id"]
        for _ in range(_WRITE_ATTEMPTS):
            existing = await self.catalog.lookup(agent_id)
            if existing is None:
                created = await self.catalog.store.create(
                    agent_id, record, self.settings.registry.max_agents)
                if created is Created.FULL:
                    raise GatewayError(409, "Conflict", "The registry is full.")
                if created is Created.CREATED:
                    return self._written(record, ctx.principal, 201)
            elif not self.catalog.may_change(existing, ctx.principal):
                # The same answer whether or not the caller may see the agent (README).
                raise GatewayError(409, "Conflict", "The id is taken; register under another.")
            elif written := await self._replace(existing, record):
                return self._written(written, ctx.principal, 200)
        raise _changed_meanwhile()

    async def update(self, exchange: Exchange) -> Response:
        ctx, request = exchange.ctx, exchange.request
        self._registrant(exchange)
        agent = await self._changeable(exchange, request.path_params["id"])
        body = await json_body(request, self.settings.registry.max_metadata_bytes)
        if isinstance(body, dict) and body.get("id", agent.id) != agent.id:
            raise invalid_input("Field 'id' differs from the agent in the path.",
                                [{"field": "id", "problem": "differs from the path"}])
        record = await self._record(exchange, body, agent.id, "")
        for _ in range(_WRITE_ATTEMPTS):
            if written := await self._replace(agent, record):
                return self._written(written, ctx.principal, 200)
            agent = await self._changeable(exchange, agent.id)
        raise _changed_meanwhile()

    async def delete(self, exchange: Exchange) -> Response:
        request = exchange.request
        agent = await self._changeable(exchange, request.path_params["id"])
        for _ in range(_WRITE_ATTEMPTS):
            if await self.catalog.store.delete(agent.id, agent.stamp or b""):
                self.breakers.forget(agent.id)
                return Response(status_code=204)
            agent = await self._changeable(exchange, agent.id)
        raise _changed_meanwhile()

    async def _changeable(self, exchange: Exchange, agent_id: str) -> Agent:
        """The agent as stored now, when this caller may change it (404, else 403)."""
        agent = await self._find(exchange, agent_id)
        if not self.catalog.may_change(agent, exchange.principal):
            raise GatewayError(403, "forbidden", "You may not change this agent.")
        return agent

    async def _replace(self, agent: Agent, record: dict[str, Any]) -> dict[str, Any] | None:
        """The record written over `agent`, keeping its owner; None when it changed meanwhile."""
        written = {**record, "owner": agent.owner}
        replaced = await self.catalog.store.replace(agent.id, written, agent.stamp or b"")
        return written if replaced else None

    def _registrant(self, exchange: Exchange) -> str:
        """The caller's owner name, when the `agent_registration` rules let it register."""
        principal = exchange.principal
        owner = _owner_name(principal)
        if owner is None:
            raise GatewayError(401, "missing_credentials", "Registering agents needs a token.",
                               headers=(("www-authenticate", "Bearer"),))
        if not exchange.pipeline.permitted(exchange, [registration_ask(principal)])[0]:
            scope = self.settings.register_scope
            raise GatewayError(403, "insufficient_scope", "This caller may not register "
                               f"agents (that needs the {scope} scope).", {"scope": scope})
        return owner

    async def _record(self, exchange: Exchange, body: Any, agent_id: str,
                      owner: str) -> dict[str, Any]:
        """The record to store, or `InvalidInput` naming every invalid field."""
        found = await metadata.problems(body)
        if isinstance(body, dict):
            found += _url_problems(body, exchange.pipeline.calls(exchange))
            if agent_id in _RESERVED_IDS:
                found.append({"field": "id", "problem": "reserved"})
        if found:
            raise invalid_input(fields_message(found), found)
        document = metadata.normalized(body)
        # How the gateway calls the agent stays inside, beside the metadata clients see.
        default_endpoint = document.pop("endpoint")
        default_method = document.pop(metadata.METHOD_FIELD, DEFAULT_METHOD)
        endpoints, methods, operations = {}, {}, []
        for operation in document["operations"]:
            operation = dict(operation)
            endpoints[operation["name"]] = operation.pop("endpoint", default_endpoint)
            methods[operation["name"]] = operation.pop(metadata.METHOD_FIELD, default_method)
            operations.append(operation)
        stored = {**document, "id": agent_id, "operations": operations}
        return {"metadata": stored, "owner": owner, "format": RECORD_FORMAT,
                "endpoints": endpoints, "methods": methods}

    def _written(self, record: dict[str, Any], principal: Principal, status: int) -> Response:
        agent = from_record(record)
        headers = {"location": self.catalog.invoke_url(agent.id).rsplit("/invoke", 1)[0]}
        return json_response(self.catalog.public(agent, principal), status, headers)

    # ------------------------------------------------------------------ invocation

    async def invoke(self, exchange: Exchange) -> Response:
        ctx, request = exchange.ctx, exchange.request
        agent = await self._find(exchange, request.path_params["id"])
        operation = _operation(agent, request.path_params.get("operation"))
        generation = exchange.generation
        body = await json_body(request, generation.settings.proxy.max_body_bytes)
        items = await check_inputs(operation, body, self.settings.max_batch)
        invoker = Invoker(exchange.pipeline.calls(exchange))
        requests = invoker.prepare(operation, items, batch=isinstance(body, list))
        outputs = await invoker.run(agent, operation, requests, ctx,
                                    self.breakers.for_agent(agent.id),
                                    _credentials(request, generation.settings))
        return json_response(outputs if isinstance(body, list) else outputs[0])

    async def _find(self, exchange: Exchange, agent_id: str) -> Agent:
        return await self.catalog.find(agent_id, exchange.principal, _permitted(exchange))

    async def _matching(self, exchange: Exchange, filters: Filters) -> list[Agent]:
        visible = await self.catalog.visible(exchange.principal, _permitted(exchange))
        return [agent for agent in visible if filters.match(agent)]


def _url_problems(body: dict[str, Any], calls: Calls) -> list[dict[str, str]]:
    """Every URL the metadata holds passes one strict rule; endpoints the egress rules too."""
    found = []
    for field, url in url_fields(metadata.AGENT_SCHEMA, body):
        problem = url_problem(url)
        if problem is None and field.rsplit(".", 1)[-1] == "endpoint":
            problem = calls.registered_url_problem(url)
        if problem is not None:
            found.append({"field": field, "problem": problem})
    return found


def _owner_name(principal: Principal) -> str | None:
    """The name an agent this caller registers is owned under; None for an anonymous caller
    or one with neither a subject nor a client id."""
    return None if principal.is_anonymous else owner_of(principal)


def _permitted(exchange: Exchange) -> Permitted:
    """The pipeline's policy stage for this request's `agent_access` asks."""
    return partial(exchange.pipeline.permitted, exchange)


def _changed_meanwhile() -> GatewayError:
    return GatewayError(409, "Conflict", "The agent changed while this request ran; try again.")


def _operation(agent: Agent, name: str | None) -> Operation:
    if name is None:
        if len(agent.operations) == 1:
            return next(iter(agent.operations.values()))
        raise invalid_input("This agent has several operations: name one in the path, "
                            ".../invoke/{operation}.",
                            [{"field": "operation", "problem": "required field is missing"}])
    if name not in agent.operations:
        raise GatewayError(404, "not_found", "This agent has no such operation.")
    return agent.operations[name]


def _credentials(request: Request, settings: Any) -> list[tuple[bytes, bytes]]:
    """The caller's credential headers, for operations configured to forward them."""
    names = {b"authorization"}
    if settings.auth is not None and settings.auth.api_keys is not None:
        names.add(settings.auth.api_keys.header.lower().encode("latin-1"))
    return [(name, value) for name, value in request.scope["headers"] if name in names]

