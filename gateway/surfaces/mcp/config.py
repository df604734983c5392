"""The `mcp` config section: where the MCP endpoints are served and how much they accept."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gateway.strict import Strict


class Mcp(Strict):
    enabled: bool = Field(True, description="Serve the MCP endpoints.")
    path: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._~-]+)+$")] = Field(
        "/mcp", description="Path of the MCP endpoint with every surface's tools; each surface "
        "with tools also has its own endpoint at `<path>/<surface>` (see `per_surface`).")
    per_surface: bool = Field(
        True, description="Also serve one endpoint per surface (`<path>/aidre`, `<path>/pdpp`, "
        "...), whose tools keep the unprefixed names that surface's own clients expect "
        "(`search`, `fetch`, `query_records`).")
    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, le=16 * 1024 * 1024,
        description="Largest JSON-RPC request body accepted, in bytes (413 beyond).")
    allowed_hosts: list[Annotated[str, Field(max_length=255)]] = Field(
        [], max_length=64,
        description="Host header values accepted besides the host of `public_base_url` "
        "(DNS-rebinding protection of the MCP transport; with neither, no Host is checked).")
    instructions: Annotated[str, Field(max_length=2000)] | None = Field(
        None, description="Text the server gives MCP clients at initialization.")
    resource_audience: bool = Field(
        True, description="Accept a token whose `aud` is an endpoint's own resource URL (the "
        "`resource` its protected-resource metadata names, which MCP clients ask their "
        "authorization server for: RFC 8707) on that endpoint and nowhere else: not on the "
        "other MCP endpoints, nor on any other route. Tokens for an issuer's `audiences` are "
        "accepted everywhere, as before.")
    audiences: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        [], max_length=32,
        description="Further `aud` values accepted on the MCP endpoints and nowhere else "
        "(the endpoint's URL as a proxy in front of the gateway names it, say).")
