"""Upstream operations declared in config: one JSON call (method, path, query, body with
`{placeholders}`) and the JMESPath mapping of its answer onto hits, compiled once at load.
Every retrieval surface maps the legacy API this way; no operation needs Python code."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import quote

from pydantic import Field

from gateway.mapping import HitMapping, MappingError, compile_mapping
from gateway.pipeline import UpstreamCall
from gateway.proxy import ProxyTarget
from gateway.strict import Strict


class UpstreamOperation(Strict):
    """One upstream call. `{placeholders}` in path, query values and body strings are filled
    from the request: query, vector, top_k, offset, limit (how many items this call asks for:
    top_k + 1, to see if more follow), fetch (offset + limit: everything up to the end of the
    page, for upstreams without an offset), id, visibility (the record visibilities the caller
    may see, comma-separated, for upstreams that can filter by them)."""

    upstream: str
    method: Literal["GET", "POST"] = "GET"
    path: Annotated[str, Field(pattern=r"^/")]
    query: dict[str, str] = {}
    body: dict[str, Any] | None = None
    mapping: dict[str, Any] = Field(description="JMESPath mapping onto hits (see mapping.py).")
    max_items: Annotated[int, Field(ge=1)] | None = Field(
        None, description="The most items the upstream answers per call (its page cap). Beyond "
        "it the gateway pages with {offset}, or marks the response meta.truncated.",
    )


_WHOLE = re.compile(r"\{(\w+)\}")
PLACEHOLDERS = frozenset({"query", "vector", "top_k", "offset", "limit", "fetch", "id",
                          "visibility"})


@dataclass(frozen=True, slots=True)
class Operation:
    settings: UpstreamOperation
    mapping: HitMapping
    paginates: bool  # the upstream applies {offset} itself; otherwise the gateway slices

    def call(self, target: ProxyTarget, values: dict[str, Any]) -> UpstreamCall:
        path = _WHOLE.sub(lambda m: quote(str(values[m.group(1)]), safe=""), self.settings.path)
        params = {name: _fill(template, values) for name, template in self.settings.query.items()}
        body = _fill(self.settings.body, values) if self.settings.body is not None else None
        return UpstreamCall(target, self.settings.method, path, self.mapping, params, body)


def compile_operation(settings: UpstreamOperation, where: str, upstreams: set[str],
                      extra: frozenset[str] = frozenset()) -> Operation:
    """One upstream operation checked and compiled; `MappingError` names the bad path.
    `extra` names placeholders a surface fills beyond the common ones."""
    if settings.upstream not in upstreams:
        raise MappingError(f"{where}.upstream",
                           f"expected one of the upstreams ({', '.join(sorted(upstreams))})")
    unknown = _placeholders(settings) - PLACEHOLDERS - extra
    if unknown:
        raise MappingError(where, f"unknown placeholder {{{sorted(unknown)[0]}}}; "
                                  f"known: {', '.join(sorted(PLACEHOLDERS | extra))}")
    return Operation(settings, compile_mapping(settings.mapping, f"{where}.mapping"),
                     "offset" in _placeholders(settings))


def _placeholders(settings: UpstreamOperation) -> set[str]:
    texts = [settings.path, *settings.query.values(), *_strings(settings.body)]
    return {name for text in texts for name in _WHOLE.findall(text)}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _fill(template: Any, values: dict[str, Any]) -> Any:
    """A whole-string placeholder keeps its value's type (a vector stays a list)."""
    if isinstance(template, str):
        whole = _WHOLE.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return _WHOLE.sub(lambda m: str(values[m.group(1)]), template)
    if isinstance(template, dict):
        return {key: _fill(item, values) for key, item in template.items()}
    if isinstance(template, list):
        return [_fill(item, values) for item in template]
    return template
