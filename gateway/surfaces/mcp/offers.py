"""Which tools a caller is offered: those whose route the route rules let it use and, where
the route's own surface says its answers need the policy engine's leave for some resource
(`SurfaceRoute.ways`: a stream the grant covers, an agent the caller is entitled to, the right
to register agents), one way to use it that the engine allows.

The route rules are asked through `Pipeline.admits` and the asks through
`Pipeline.permitted` (so each decision is noted in the decision log of the MCP request),
never read here. Everything is decided for the one caller of the request and kept for that
request alone: the bundle remembers outcomes per principal, and here each route and ask is
decided once per request however many tools share it. What a way cannot tell without a
call's arguments (which agent, which stream) the route itself decides when the tool is
called.
"""

from __future__ import annotations

import re
from contextlib import aclosing
from typing import Any

from gateway.dispatch import surface_route
from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.policy.rules import Ask
from gateway.surface import Way, Ways
from gateway.surfaces.mcp.tools import McpTool

_SEGMENT = re.compile(r"\{[^}]*\}")


def any_path(tool: McpTool) -> str:
    """A path the tool's route serves: its template with a placeholder in every segment."""
    return _SEGMENT.sub("_", tool.path)


def route_ways(exchange: Exchange, tool: McpTool) -> Ways | None:
    """The ways of the surface route a tool's calls are served by; None where the route rules
    alone decide (a route declaring none, a passthrough path)."""
    path = any_path(tool)
    owner = exchange.generation.owners.owner(path)
    route = surface_route(owner, tool.method, path) if owner is not None else None
    return route.ways if route is not None else None


class Offers:
    """One request's decisions on its tools, for its caller."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self._routes: dict[tuple[str, str], bool] = {}
        self._asks: dict[Any, bool] = {}

    async def offered(self, tool: McpTool, ways: Ways | None) -> bool:
        """Whether `tools/list` shows the tool (a way that cannot be read hides it)."""
        return self.admits(tool.method, any_path(tool)) and (
            ways is None or await self.some_way(tool.method, ways, unreadable=False))

    async def some_way(self, method: str, ways: Ways, *, unreadable: bool) -> bool:
        """Whether the engine allows one of the ways; `unreadable` when what they are read
        from failed (a registry that cannot be reached, say)."""
        try:
            async with aclosing(ways(self.exchange)) as found:
                async for way in found:
                    if self._allows(method, way):
                        return True
        except GatewayError:
            return unreadable
        return False

    def admits(self, method: str, path: str) -> bool:
        key = (method, path)
        if key not in self._routes:
            self._routes[key] = self.exchange.pipeline.admits(self.exchange, method, path)
        return self._routes[key]

    def _allows(self, method: str, way: Way) -> bool:
        if way.path is not None and not self.admits(method, way.path):
            return False
        return all(self._allowed(ask) for ask in way.asks)

    def _allowed(self, ask: Ask) -> bool:
        key = _key(ask)
        found = self._asks.get(key) if key is not None else None
        if found is None:
            found = self.exchange.pipeline.permitted(self.exchange, [ask])[0]
            if key is not None:
                self._asks[key] = found
        return found


def _key(ask: Ask) -> tuple[Any, ...] | None:
    """What an ask of this request's caller is decided on; None when it cannot be a key."""
    key = (ask.kind, ask.resource, tuple(ask.attributes.items()))
    try:
        hash(key)
    except TypeError:
        return None
    return key
