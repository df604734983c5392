"""One tool per `/.well-known/ai` capability this gateway serves (the AI Discovery draft's
appendix A.3: a discovery document can generate an MCP server's configuration).

The tool is named by the capability's id (unique in the document) and takes its parameters:
`{name}` segments of the endpoint are filled from the arguments (a trailing one that is
optional and not given is left out), the rest go in the query (GET, DELETE) or the JSON body
(a parameter named `body` is the whole body). A capability served elsewhere (an absolute URL)
has no tool: the gateway only calls its own routes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from gateway.capability import Capability
from gateway.inner import InnerCall
from gateway.surfaces.mcp.params import enforced_input, input_schema
from gateway.surfaces.mcp.tools import Arguments, McpTool, ToolInputError

_SEGMENT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}")
_WRITES = frozenset({"POST", "PUT", "PATCH"})
_READ_ONLY_POSTS = re.compile(r"(^|_)(search|retrieve|query|list|find)(_|$)")
_MAX_PATH_VALUE = 512


def capability_tools(capabilities: Iterable[Capability], exclude_prefix: str) -> list[McpTool]:
    """A tool for each capability served by this gateway, but those under `exclude_prefix` (the
    MCP endpoints themselves)."""
    tools = []
    for capability in capabilities:
        endpoint = capability.endpoint
        if not endpoint.startswith("/") or endpoint == exclude_prefix \
                or endpoint.startswith(exclude_prefix.rstrip("/") + "/"):
            continue
        tools.append(capability_tool(capability))
    return tools


def capability_tool(capability: Capability) -> McpTool:
    path_params = frozenset(_SEGMENT.findall(capability.endpoint))
    enforced = capability.request_schema
    schema = enforced_input(enforced, path_params) if enforced is not None else \
        input_schema(capability.params, path_params)
    method = capability.method
    read_only = method == "GET" or (method == "POST"
                                    and bool(_READ_ONLY_POSTS.search(capability.id)))
    return McpTool(
        name=capability.id, description=capability.description, input_schema=schema,
        method=method, path=capability.endpoint,
        request=_requester(capability, path_params, set(schema.get("required", ()))),
        read_only=read_only, title=capability.id.replace("_", " ").capitalize(),
        surface=capability.id.split("_", 1)[0],
        meta={"returns": capability.returns} if capability.returns else {},
    )


def _requester(capability: Capability, path_params: frozenset[str],
               required: set[str]) -> Any:
    template = _SEGMENT.sub(lambda found: "{" + found.group(1) + "}", capability.endpoint)
    body_param = "body" in capability.params

    def request(arguments: Arguments) -> InnerCall:
        values: dict[str, str] = {}
        path = template
        for name in path_params:
            value = arguments.get(name)
            if value is None and name not in required:
                path = path.replace("/{" + name + "}", "")
                continue
            if not isinstance(value, str | int) or not str(value) \
                    or len(str(value)) > _MAX_PATH_VALUE:
                raise ToolInputError(f"{name} must be a non-empty string of at most "
                                     f"{_MAX_PATH_VALUE} characters.")
            values[name] = str(value)
        rest = {name: value for name, value in arguments.items() if name not in path_params}
        if capability.method in _WRITES:
            body = rest.get("body", {}) if body_param else rest
            return InnerCall(capability.method, path, values, json=body)
        return InnerCall(capability.method, path, values, query=_query(rest))

    return request


def _query(arguments: Arguments) -> dict[str, Any]:
    query: dict[str, Any] = {}
    for name, value in arguments.items():
        if isinstance(value, list) and all(isinstance(item, str | int | float) for item in value):
            query[name] = [str(item) for item in value]
        elif isinstance(value, str | int | float | bool):
            query[name] = value
        else:
            raise ToolInputError(f"{name} must be a string, a number, a boolean or a list of "
                                 "them.")
    return query
