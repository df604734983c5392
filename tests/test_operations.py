"""Every kind of upstream operation a surface declares, table-driven: each placeholder the kind
allows at load is filled by the call, and any other is refused at load, naming the ones the
kind fills. So `aigw validate` checks exactly what a call fills, and no call meets a KeyError."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import typing
from typing import Any
from urllib.parse import quote

import pytest

import gateway.surfaces
from gateway.mapping import MappingError
from gateway.operations import Placeholders, UpstreamOperation, compile_operation
from gateway.proxy import ProxyTarget


def declared_kinds() -> list[type[Placeholders]]:
    """Every Placeholders subclass the gateway's surface modules define (each one imported)."""
    for module in pkgutil.walk_packages(gateway.surfaces.__path__, "gateway.surfaces."):
        importlib.import_module(module.name)
    found, pending = [], list(Placeholders.__subclasses__())
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        # dataclass(slots=True) replaces a class: keep the one its module defines
        if getattr(sys.modules[kind.__module__], kind.__qualname__, None) is kind \
                and kind.__module__.startswith("gateway."):
            found.append(kind)
    return sorted(found, key=lambda kind: f"{kind.__module__}.{kind.__qualname__}")


KINDS = declared_kinds()
NO_TRANSPORT: Any = None  # calls are only built here, never sent
TARGET = ProxyTarget("up", "http://up.invalid", b"up.invalid", False, NO_TRANSPORT)


def sample(kind: type[Placeholders]) -> Placeholders:
    """An instance of the kind whose every value is distinct and of its field's type."""
    values: dict[str, Any] = {}
    hints = typing.get_type_hints(kind)
    for index, name in enumerate(kind.names()):
        hint = hints[name]
        if hint is int:
            values[name] = 1000 + index
        elif hint is str:
            values[name] = f"{name}-value"
        elif typing.get_origin(hint) is list and typing.get_args(hint) == (float,):
            values[name] = [0.5, float(index)]
        elif typing.get_origin(hint) is list and typing.get_args(hint) == (str,):
            values[name] = [f"{name}-a", f"{name}-b"]
        else:
            raise AssertionError(f"{kind.__name__}.{name}: add a sample for {hint}")
    return kind(**values)


def using(names: frozenset[str] | set[str]) -> UpstreamOperation:
    """An operation naming each placeholder in its path, a query value and its body (and, when
    it pages by {after}, mapping the token that fills it)."""
    ordered = sorted(names)
    return UpstreamOperation(
        upstream="up", method="POST", path="/x/" + "/".join(f"{{{n}}}" for n in ordered),
        query={n: f"{{{n}}}" for n in ordered} | {"both": "-".join(f"{{{n}}}" for n in ordered)},
        body={"whole": {n: f"{{{n}}}" for n in ordered}, "list": [f"{{{n}}}" for n in ordered]},
        mapping={"id": "id", **({"next": "next"} if "after" in names else {})}, max_items=None)


def name_sets(kind: type[Placeholders]) -> list[frozenset[str]]:
    """The kind's placeholders as operations may name them: one pages by {offset} or by
    {after}, never both."""
    names = kind.names()
    if {"offset", "after"} <= names:
        return [names - {"after"}, names - {"offset"}]
    return [names]


def test_every_surface_declares_its_kinds():
    names = {kind.__name__ for kind in KINDS}
    assert {"TextSearch", "VectorSearch", "ChunkRead", "SourceSearch", "ArticleRead",
            "RecordPage", "RecordRead", "FieldSearch"} <= names


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_every_placeholder_a_kind_allows_is_filled_by_the_call(kind: type[Placeholders]):
    assert kind.names(), "a kind fills at least one placeholder"
    for names in name_sets(kind):
        operation = compile_operation(using(names), "op", {"up"}, kind)
        values = {n: v for n, v in sample(kind).values().items() if n in names}
        call = operation.call(TARGET, sample(kind))
        ordered = sorted(names)
        assert call.path == "/x/" + "/".join(quote(str(values[n]), safe="") for n in ordered)
        assert call.params == {**values, "both": "-".join(str(values[n]) for n in ordered)}
        assert call.json == {"whole": values, "list": [values[n] for n in ordered]}


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
def test_a_placeholder_the_kind_does_not_fill_is_refused_naming_those_it_does(
        kind: type[Placeholders]):
    others = {n for other in KINDS for n in other.names()} - kind.names() | {"nonsense"}
    for name in others:
        with pytest.raises(MappingError) as refused:
            compile_operation(using({name}), "aip.sources.x.search", {"up"}, kind)
        filled = ", ".join(f"{{{n}}}" for n in sorted(kind.names()))
        assert str(refused.value) == (f"aip.sources.x.search: unknown placeholder {{{name}}}; "
                                      f"this operation fills {filled}")


def test_a_call_takes_only_its_own_kinds_values():
    first, second = KINDS[0], next(k for k in KINDS if k.names() != KINDS[0].names())
    operation = compile_operation(using(name_sets(first)[0]), "op", {"up"}, first)
    with pytest.raises(TypeError, match=f"expected {first.__name__} values"):
        operation.call(TARGET, sample(second))  # type: ignore[arg-type]


def test_an_operation_pages_by_offset_or_by_the_token_its_mapping_reads():
    from gateway.surfaces.aidre.collections import TextSearch
    from gateway.surfaces.pdpp.streams import RecordPage

    def compiled(names: set[str], mapping: dict[str, str], kind: Any = TextSearch) -> Any:
        settings = using(names).model_copy(update={"mapping": {"id": "id", **mapping}})
        return compile_operation(settings, "op", {"up"}, kind)

    assert compiled({"query", "offset"}, {}).pages_by == "offset"
    assert compiled({"query", "after"}, {"next": "meta.next"}).pages_by == "after"
    assert compiled({"query"}, {}).pages_by is None
    with pytest.raises(MappingError, match=r"pages by \{offset\} or by \{after\}, not both"):
        compiled({"query", "offset", "after"}, {"next": "next"})
    with pytest.raises(MappingError, match=r"op.mapping.next: \{after\} sends the token"):
        compiled({"query", "after"}, {})
    with pytest.raises(MappingError, match=r"op\.mapping\.next: the token is only sent back"):
        compiled({"query", "offset"}, {"next": "next"})
    # PDPP's records fill {after} with the last record's key when no token is mapped
    assert compiled({"subject", "after"}, {}, RecordPage).pages_by == "after"


@pytest.mark.parametrize("document,token", [
    ({"next": "abc"}, "abc"), ({"next": 7}, "7"), ({"next": None}, None), ({"next": ""}, None),
    ({}, None), ([], None)])
def test_the_next_token_is_read_from_the_whole_answer(document, token):
    from gateway.mapping import compile_mapping

    assert compile_mapping({"id": "id", "next": "next"}).next_token(document) == token


@pytest.mark.parametrize("value,says", [
    (True, "a string or an integer"), ({"a": 1}, "a string or an integer"),
    ("x" * 2049, "at most 2048 characters")])
def test_a_next_token_of_another_kind_or_too_long_fails_the_answer(value, says):
    from gateway.mapping import UpstreamValueError, compile_mapping

    with pytest.raises(UpstreamValueError) as failed:
        compile_mapping({"id": "id", "next": "next"}).next_token({"next": value})
    assert failed.value.slot == "next" and failed.value.expected == says
