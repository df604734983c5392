"""Upstream operations declared in config: one JSON call (method, path, query, body with
`{placeholders}`) and the JMESPath mapping of its answer onto hits, compiled once at load.
Every retrieval surface maps the legacy API this way; no operation needs Python code.

Each operation has a kind, declared by the surface that calls it: a `Placeholders` dataclass
whose fields are exactly the placeholders that kind of call fills (a search its query and page,
a read by id its id). Loading refuses any other placeholder, naming those the kind fills, and a
call is made with an instance of that kind, so every placeholder a config names is filled.

An operation pages the upstream by `{offset}` (a position) or by `{after}` (the token its
previous answer gave, as the mapping's `next` reads it; "" for the first page), never both."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar
from urllib.parse import quote

from pydantic import Field

from gateway.mapping import HitMapping, MappingError, compile_mapping
from gateway.proxy import ProxyTarget
from gateway.strict import Strict


class UpstreamOperation(Strict):
    """One upstream call. `{placeholders}` in path, query values and body strings are filled
    from the request; which ones depends on the operation (a search fills its query and page, a
    read by id its id: see each section), and any other is refused at load. A placeholder that
    is a whole string keeps its value's type (a vector stays a list of numbers)."""

    upstream: str = Field(description="The upstream to call (a name from `upstreams`).")
    method: Literal["GET", "POST"] = Field("GET", description="HTTP method of the call.")
    path: Annotated[str, Field(pattern=r"^/")] = Field(
        description="Path on the upstream, appended to its URL's path; `{placeholders}` are "
        "filled percent-encoded as one segment each.",
    )
    query: dict[str, str] = Field(
        {},
        description="Query parameters: name -> value, with `{placeholders}` (a list value repeats "
        "the parameter).",
    )
    body: dict[str, Any] | None = Field(
        None,
        description="JSON body of a POST call; a string that is one whole `{placeholder}` keeps "
        "its value's JSON type.",
    )
    mapping: dict[str, Any] = Field(
        description="JMESPath mapping onto hits (see mapping.py): `items`, `id`, `text`, "
        "`score`, `vector`, `fields`, `metadata`, and `next` (the upstream's token for the next "
        "page, read from the whole answer and sent back as {after}).")
    max_items: Annotated[int, Field(ge=1)] | None = Field(
        None, description="The most items the upstream answers per call (its page cap). Beyond "
        "it the gateway pages with {offset} or {after}, or marks the response meta.truncated.",
    )


_WHOLE = re.compile(r"\{(\w+)\}")
K = TypeVar("K", bound="Placeholders")


def placeholder(doc: str) -> Any:
    """A placeholder of a kind: a dataclass field and what it holds, for the reference
    (docs/refgen lists each kind's placeholders from these)."""
    return field(metadata={"doc": doc})


@dataclass(frozen=True, slots=True)
class Placeholders:
    """The values one kind of upstream operation fills its `{placeholders}` with, one field per
    placeholder (declared with `placeholder(doc)`). A surface declares a subclass for each kind
    of operation it calls, with `configured` naming where such operations are in the config."""

    # Whether `{after}` has a meaning of its own without the mapping's `next` (the surface
    # fills it with something else then); otherwise `{after}` needs `next`.
    after_without_next: ClassVar[bool] = False
    configured: ClassVar[str] = ""  # its config path, "<section>.<name>.<operation>"

    @classmethod
    def names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))

    def values(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    """One JSON call to an upstream, and how its answer maps onto hits."""

    target: ProxyTarget
    method: str
    path: str
    mapping: HitMapping
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None


# What fills one part of an operation (its path, a query value, its body) from a kind's values.
Fill = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Operation(Generic[K]):
    settings: UpstreamOperation
    mapping: HitMapping
    kind: type[K]
    # How the upstream pages: from {offset}, or {after} its last answer's `next` token;
    # None: it answers from the top every time, and the gateway slices.
    pages_by: Literal["offset", "after"] | None
    placeholders: frozenset[str]  # those the operation names
    # The path, query and body templates, compiled once (see `_compile_value`).
    fill_path: Fill = field(repr=False)
    fill_query: dict[str, Fill] = field(repr=False)
    fill_body: Fill | None = field(repr=False)

    def call(self, target: ProxyTarget, values: K) -> UpstreamCall:
        """The call with every placeholder filled: `values` is this operation's kind, whose
        fields cover every placeholder it was compiled with."""
        if type(values) is not self.kind:
            raise TypeError(f"expected {self.kind.__name__} values, not {type(values).__name__}")
        params = {name: fill(values) for name, fill in self.fill_query.items()}
        body = self.fill_body(values) if self.fill_body is not None else None
        return UpstreamCall(target, self.settings.method, self.fill_path(values), self.mapping,
                            params, body)


def compile_operation(settings: UpstreamOperation, where: str, upstreams: set[str],
                      kind: type[K]) -> Operation[K]:
    """One upstream operation of `kind` checked and compiled; `MappingError` names the bad
    path, and a placeholder `kind` does not fill along with those it does."""
    if settings.upstream not in upstreams:
        raise MappingError(f"{where}.upstream",
                           f"expected one of the upstreams ({', '.join(sorted(upstreams))})")
    used = _placeholders(settings)
    unknown = used - kind.names()
    if unknown:
        filled = ", ".join(f"{{{name}}}" for name in sorted(kind.names()))
        raise MappingError(where, f"unknown placeholder {{{sorted(unknown)[0]}}}; this "
                                  f"operation fills {filled}")
    mapping = compile_mapping(settings.mapping, f"{where}.mapping")
    return Operation(
        settings, mapping, kind, _pages_by(used, mapping, kind, where), frozenset(used),
        fill_path=_compile_text(settings.path, _path_segment),
        fill_query={name: _compile_value(template) for name, template in settings.query.items()},
        fill_body=_compile_value(settings.body) if settings.body is not None else None,
    )


def _pages_by(used: set[str], mapping: HitMapping, kind: type[Placeholders],
              where: str) -> Literal["offset", "after"] | None:
    if "offset" in used and "after" in used:
        raise MappingError(where, "an operation pages by {offset} or by {after}, not both")
    if "after" in used and mapping.next is None and not kind.after_without_next:
        raise MappingError(f"{where}.mapping.next", "{after} sends the token the previous "
                           "answer gave: map it with `next` (a JMESPath expression)")
    if mapping.next is not None and "after" not in used:
        raise MappingError(f"{where}.mapping.next", "the token is only sent back by an "
                           "operation that names {after}")
    if "after" in used:
        return "after"
    return "offset" if "offset" in used else None


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


def _path_segment(value: Any) -> str:
    return quote(str(value), safe="")


def _compile_value(template: Any) -> Fill:
    """What fills a query value or a body: a string that is one whole placeholder keeps its
    value's type (a vector stays a list), placeholders inside a string are replaced by their
    values' text, and dicts and lists are filled item by item."""
    if isinstance(template, str):
        whole = _WHOLE.fullmatch(template)
        return attrgetter(whole.group(1)) if whole else _compile_text(template, str)
    if isinstance(template, dict):
        items = [(key, _compile_value(item)) for key, item in template.items()]
        return lambda values: {key: fill(values) for key, fill in items}
    if isinstance(template, list):
        fills = [_compile_value(item) for item in template]
        return lambda values: [fill(values) for fill in fills]
    return lambda _values: template


def _compile_text(template: str, render: Callable[[Any], str]) -> Fill:
    """What fills a string's placeholders with `render(value)`, the text between them kept."""
    pieces = _WHOLE.split(template)  # text, name, text, name, ..., text
    texts, names = pieces[0::2], pieces[1::2]
    if not names:
        return lambda _values: template
    fills = [(attrgetter(name), text) for name, text in zip(names, texts[1:], strict=True)]
    first = texts[0]

    def fill(values: Any) -> str:
        parts = [first]
        for value_of, text in fills:
            parts += (render(value_of(values)), text)
        return "".join(parts)

    return fill
