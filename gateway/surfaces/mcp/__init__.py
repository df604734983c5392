"""MCP (Model Context Protocol, streamable HTTP): tools generated from the config, served on
the official SDK, each call through the pipeline of the surface route it wraps."""

from __future__ import annotations

from typing import Any

from gateway.capability import Capability
from gateway.settings import Settings
from gateway.surface import Mount, MountContext, Surface
from gateway.surfaces.mcp.config import Mcp


class McpPlugin(Surface):
    name = "mcp"
    config_key = "mcp"
    config_model = Mcp
    config_description = ("MCP endpoints (streamable HTTP) with tools generated from the "
                          "config: every tool call goes through the route it wraps.")

    def capabilities(self, settings: Settings) -> list[Capability]:
        mcp: Mcp | None = self.section(settings)
        if mcp is None or not mcp.enabled:
            return []
        return [Capability(
            id="mcp", endpoint=mcp.path, method="POST",
            description="MCP endpoint (streamable HTTP, JSON-RPC 2.0): these capabilities as "
                        "tools, under the same policy.",
            params={"body": "JSON-RPC 2.0 request, required — initialize, tools/list, "
                            "tools/call"},
            returns="JSON-RPC 2.0 response; tools/call: content[], structuredContent")]

    def mount(self, context: MountContext) -> Mount | None:
        mcp: Mcp | None = self.section(context.settings)
        if mcp is None or not mcp.enabled:
            return None
        from gateway.surfaces.mcp.endpoints import mcp_mount

        return mcp_mount(self.name, mcp, context)

    def openapi(self, settings: Settings) -> dict[str, Any]:
        return {}


SURFACE = McpPlugin()
