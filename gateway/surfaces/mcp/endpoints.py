"""Which MCP endpoints a config gets, and which tools each one has.

The naming rule, so that no two tools of an endpoint share a name:
- `<path>` (default `/mcp`) has every surface's tools. A tool that wraps a `/.well-known/ai`
  capability is named by the capability's id (unique in that document: `aidre_search`,
  `aip_retrieve`, `aidip_invoke_agent`, ...); a tool no capability lists is named
  `<surface>_<tool>` (`pdpp_query_records`, `pdpp_search`, `pdpp_fetch`).
- `<path>/<surface>` (with `per_surface`) has one surface's tools under the names that
  surface's own clients expect: `<path>/aidre` the retrieval-connector pair `search` and
  `fetch`; `<path>/pdpp` the PDPP reference server's `query_records`, `search` and `fetch`;
  the others their capabilities' tools.
Each endpoint is an OAuth protected resource of its own (RFC 9728 metadata at
`/.well-known/oauth-protected-resource<endpoint path>`).
"""

from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit

from gateway.auth.metadata import own_resource, resource_identifier
from gateway.capability import Capability
from gateway.settings import Settings
from gateway.surface import Mount, MountContext, SurfaceRoute
from gateway.surfaces.mcp.capabilities import capability_tools
from gateway.surfaces.mcp.config import Mcp
from gateway.surfaces.mcp.connectors import aidre_tools
from gateway.surfaces.mcp.pdpp_tools import pdpp_tools
from gateway.surfaces.mcp.render import render_error
from gateway.surfaces.mcp.server import McpEndpoint
from gateway.surfaces.mcp.tools import McpTool
from gateway.surfaces.mcp.transport import TransportRules

# Stateless, with nothing to push: no GET event stream, no session to DELETE (both 405, as
# the streamable-HTTP transport allows), so no request outlives its answer.
_METHODS = ["POST"]


def listed_capabilities(context: MountContext) -> list[Capability]:
    """Every capability the `/.well-known/ai` document lists: those the config declares in
    its `ai_endpoint` section, and every surface's."""
    section = getattr(context.settings, "ai_endpoint", None)
    declared = list(section.capabilities) if section is not None and section.enabled else []
    return list({c.id: c for c in [*declared, *context.capabilities]}.values())


def endpoint_tools(mcp: Mcp, context: MountContext) -> dict[str, list[McpTool]]:
    """The tools of each endpoint, by path."""
    settings = context.settings
    by_capability = capability_tools(listed_capabilities(context), mcp.path)
    pdpp = pdpp_tools(getattr(settings, "pdpp", None), settings.public_base_url)
    endpoints = {mcp.path: by_capability + [
        dataclasses.replace(tool, name=f"pdpp_{tool.name}") for tool in pdpp]}
    if mcp.per_surface:
        own = {"aidre": aidre_tools(context.capabilities), "pdpp": pdpp}
        for tool in by_capability:
            own.setdefault(tool.surface, [])
            if tool.surface not in ("aidre", "pdpp"):
                own[tool.surface].append(tool)
        endpoints.update({f"{mcp.path}/{surface}": tools
                          for surface, tools in own.items() if tools})
    return endpoints


def mcp_mount(name: str, mcp: Mcp, context: MountContext) -> Mount:
    settings = context.settings
    hosts, origins = list(mcp.allowed_hosts), []
    if settings.public_base_url:
        public = urlsplit(settings.public_base_url)
        hosts.append(public.netloc)
        origins.append(f"{public.scheme}://{public.netloc}")
    rules = TransportRules(tuple(hosts), tuple(origins), mcp.max_body_bytes)
    routes = []
    served = []
    for path, tools in endpoint_tools(mcp, context).items():
        endpoint = McpEndpoint(
            (settings.service.name if settings.service else "aigw") + path,
            tools, rules=rules, instructions=mcp.instructions)
        routes.append(SurfaceRoute(path, endpoint.endpoint, methods=_METHODS,
                                   name=f"mcp{path.replace('/', '.')}"))
        served.append(endpoint)

    async def close() -> None:
        for endpoint in served:
            await endpoint.aclose()

    own = tuple(route.path for route in routes)
    return Mount(name, routes, render_error=render_error, prefixes=(mcp.path,),
                 own_resources=own, resource_audiences=_audiences(mcp, settings, own),
                 on_close=close)


def _audiences(mcp: Mcp, settings: Settings, paths: tuple[str, ...]
               ) -> dict[str, tuple[str, ...]]:
    """Each endpoint's accepted token audiences: its resource URL, as its metadata names it
    (RFC 9728 §3.1: the gateway's origin and the endpoint's path), and `mcp.audiences`."""
    if settings.auth is None:
        return {}
    resource = resource_identifier(settings.auth, settings.public_base_url)
    return {path: (*([own_resource(resource, path)] if mcp.resource_audience else []),
                   *mcp.audiences) for path in paths}
