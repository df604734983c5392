"""The JSON-RPC errors a tool call answers with itself, in the MCP endpoints' dialect (the
gateway's stable code and the request id in `data`, as render.py's): arguments that do not
match the tool's input schema, and a failure nobody foresaw, which the caller learns nothing
about but the request id (the log has the rest, without the arguments)."""

from __future__ import annotations

import logging
import traceback

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from gateway.surfaces.mcp.arguments import Problem

log = logging.getLogger("aigw.mcp")


def invalid_arguments(tool: str, problem: Problem, request_id: str) -> MCPError:
    data = {"code": "invalid_arguments", "argument": problem.path,
            "constraint": problem.constraint, "request_id": request_id}
    return MCPError(INVALID_PARAMS, f"Invalid arguments for {tool}: {problem.message()}", data)


def unexpected(tool: str, exc: Exception, request_id: str) -> MCPError:
    """Logged by the exception's type and where it was raised: its text may quote the
    arguments, so neither it nor they are written."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    log.error("tool call failed", extra={"fields": {
        "tool": tool, "request_id": request_id, "error": type(exc).__name__, "at": where}})
    return MCPError(INTERNAL_ERROR, "The tool call failed inside the gateway.",
                    {"code": "internal_error", "request_id": request_id})
