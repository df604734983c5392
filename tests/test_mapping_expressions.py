"""Mapping expressions are evaluated as JMESPath evaluates them: `Expression.search` (one
shared interpreter, bare field names looked up directly) agrees with `jmespath.search` on every
kind of expression a mapping may hold and every kind of JSON value an upstream may send."""

from __future__ import annotations

from typing import Any

import jmespath
import pytest

from gateway.mapping import Expression

EXPRESSIONS = [
    "id", '"from"', "a.b", "a.b.c", "items[0]", "items[*].id", "items[?score > `0.5`].id",
    "a || b", "length(items)", "to_string(id)", "join(',', tags)", "{x: a, y: b}", "[a, b]",
    "items[].tags[]", "a.b | [0]", "@", "`1`", "missing", "a.missing.deeper", "!flag",
]
DOCUMENTS: list[Any] = [
    {"id": "art-1", "from": "x@example.org", "a": {"b": {"c": 3}}, "b": 2, "flag": False,
     "tags": ["t1", "t2"],
     "items": [{"id": 1, "score": 0.9, "tags": ["u"]}, {"id": 2, "score": 0.1, "tags": []}]},
    {"id": None, "a": None, "items": []},
    {"a": {"b": [1, 2]}, "items": None},
    ["id", "a"], "id", 7, 1.5, True, None, {},
]


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_an_expression_agrees_with_jmespath_on_every_kind_of_value(expression: str):
    compiled = Expression(jmespath.compile(expression))
    for document in DOCUMENTS:
        try:
            expected: Any = ("value", jmespath.search(expression, document))
        except jmespath.exceptions.JMESPathError as exc:
            expected = ("error", type(exc))
        try:
            found: Any = ("value", compiled.search(document))
        except jmespath.exceptions.JMESPathError as exc:
            found = ("error", type(exc))
        assert found == expected, (expression, document)


def test_an_expression_is_evaluated_again_for_each_value():
    compiled = Expression(jmespath.compile("items[*].id"))
    assert compiled.search({"items": [{"id": 1}]}) == [1]
    assert compiled.search({"items": [{"id": 2}, {"id": 3}]}) == [2, 3]


def test_hits_without_vectors_neither_read_nor_check_the_vector_slot():
    from gateway.mapping import UpstreamValueError, compile_mapping

    mapping = compile_mapping({"items": "items", "id": "id", "vector": "embedding"})
    good = {"items": [{"id": "a", "embedding": [0.5, 1]}]}
    bad = {"items": [{"id": "a", "embedding": ["not", "numbers"]}]}
    assert mapping.hits(good)[0].vector == [0.5, 1]
    assert mapping.hits(good, vectors=False)[0].vector is None
    assert mapping.hits(bad, vectors=False)[0].vector is None  # never handed to anyone
    with pytest.raises(UpstreamValueError):
        mapping.hits(bad)


def test_a_narrowed_query_keeps_every_other_field():
    """`Query.narrowed` lists the fields itself: one added to Query must be added there."""
    import dataclasses

    from gateway.model import Query
    from gateway.policy.rules import Ask

    query = Query(text="t", vector=(1.0,), embedding_space="s", top_k=3, cursor="c",
                  collection="col", filters={"a": 1}, fields=frozenset({"ids"}),
                  strict_fields=True, asks=(Ask("k", "r", None),),  # type: ignore[arg-type]
                  visible_records=frozenset({"x"}))
    assert {f.name for f in dataclasses.fields(Query)} == {
        "text", "vector", "embedding_space", "top_k", "cursor", "collection", "filters",
        "fields", "strict_fields", "asks", "visible_records"}
    narrowed = query.narrowed(frozenset({"text"}), frozenset({"public"}), {"b": 2})
    assert narrowed == dataclasses.replace(query, fields=frozenset({"text"}),
                                           visible_records=frozenset({"public"}),
                                           filters={"b": 2})
