"""Collections compiled from config: which upstream call answers a text search, a vector
search or a chunk read, and how its JSON maps onto hits. No collection needs Python code."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from gateway.mapping import HitMapping, MappingError, compile_mapping
from gateway.pipeline import UpstreamCall
from gateway.proxy import ProxyTarget
from gateway.surfaces.aidre.config import Aidre, Collection, EmbeddingSpace, UpstreamOperation

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


@dataclass(frozen=True, slots=True)
class CompiledCollection:
    name: str
    settings: Collection
    text_search: Operation
    vector_search: Operation | None
    chunk: Operation | None
    space: EmbeddingSpace | None

    @property
    def public(self) -> bool:
        return self.settings.visibility == "public"

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(self.settings.scopes)

    @property
    def returns_vectors(self) -> bool:
        return self.vector_search is not None

    @property
    def visibility(self) -> str:
        return self.settings.visibility

    @property
    def record_visibility(self) -> dict[str, frozenset[str]] | None:
        rules = self.settings.record_visibility
        if rules is None:
            return None
        return {value: frozenset(scopes) for value, scopes in rules.scopes.items()}


def compile_collections(aidre: Aidre, upstreams: set[str]) -> dict[str, CompiledCollection]:
    """Every collection with its operations compiled; `MappingError` names the bad path."""
    spaces = {space.id: space for space in aidre.embedding_spaces}
    compiled = {}
    for name, collection in aidre.collections.items():
        where = f"aidre.collections.{name}"
        space = None
        if collection.vector_search is not None:
            space = spaces.get(collection.vector_search.embedding_space)
            if space is None:
                raise MappingError(f"{where}.vector_search.embedding_space",
                                   "expected the id of one of aidre.embedding_spaces")
        compiled[name] = CompiledCollection(
            name, collection,
            _operation(collection.text_search, f"{where}.text_search", upstreams),
            _optional(collection.vector_search, f"{where}.vector_search", upstreams),
            _optional(collection.chunk, f"{where}.chunk", upstreams),
            space,
        )
    return compiled


def _optional(settings: UpstreamOperation | None, where: str,
              upstreams: set[str]) -> Operation | None:
    return _operation(settings, where, upstreams) if settings is not None else None


def _operation(settings: UpstreamOperation, where: str, upstreams: set[str]) -> Operation:
    if settings.upstream not in upstreams:
        raise MappingError(f"{where}.upstream",
                           f"expected one of the upstreams ({', '.join(sorted(upstreams))})")
    unknown = _placeholders(settings) - PLACEHOLDERS
    if unknown:
        raise MappingError(where, f"unknown placeholder {{{sorted(unknown)[0]}}}; "
                                  f"known: {', '.join(sorted(PLACEHOLDERS))}")
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
