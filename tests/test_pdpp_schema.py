"""A PDPP stream's advertised schema (nullable types, formats) and the records sent under it:
an upstream that breaks the schema never makes the gateway break it (gateway/surfaces/pdpp/
conform.py). The same over a real third-party API: tests/test_json_server.py."""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import jmespath
import pytest
from inprocess import memory_gateway
from jsonschema import Draft202012Validator
from pdpp_config import OWNER_KEY, config
from processes import ROOT
from prometheus_client import REGISTRY
from pydantic import ValidationError

from gateway.mapping import Expression, MappingError
from gateway.surfaces.pdpp.config import FieldSpec, Pdpp
from gateway.surfaces.pdpp.conform import FORMATS, Tally, compile_rule, conform, schema_of
from gateway.surfaces.pdpp.streams import compile_streams
from gateway.upstream.memory import Reply, UpstreamRequest

OWNER = {"X-API-Key": OWNER_KEY}
FIELDS: dict[str, Any] = {
    "id": {"path": "id", "required": True},
    "title": {"path": "title", "required": True},
    "homepage": {"path": "homepage", "format": "uri", "nullable": True},
    "updated_at": {"path": "updated_at", "format": "date-time", "nullable": True},
    "size": {"path": "size", "type": "integer"},
    "owner_email": {"path": "owner_email", "format": "email"},
}
GOOD = {"id": "a", "title": "A", "homepage": "https://a.example/x?y=1", "size": 3,
        "updated_at": "2026-11-19T21:02:23Z", "owner_email": "ann@a.example"}
ITEMS = [
    GOOD,
    {"id": "b", "title": "B", "homepage": None, "updated_at": None, "size": None},
    {"id": "c", "title": "C", "homepage": "not a uri", "updated_at": "yesterday",
     "size": "three", "owner_email": "secret-value-c"},
    {"id": "d", "title": None},           # a required field null: the record is skipped
    {"id": "e", "title": 5},              # a required field of another type: skipped
    {"id": True, "title": "F"},           # a key of another type: skipped
    {"id": "g", "title": "G", "size": 2.0, "updated_at": "2026-11-19T21:02:23.5+01:00"},
]


def pdpp(fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"streams": {"items": {
        "connector_id": "c", "primary_key": "id", "cursor_field": "id",
        "fields": fields if fields is not None else FIELDS,
        "records": {"upstream": "helpcentre", "path": "/items", "mapping": {"id": "id"}}}}}


def items(request: UpstreamRequest) -> Reply:
    return Reply.json(ITEMS)


def violations(field: str, action: str) -> float:
    labels = {"surface": "pdpp", "collection": "items", "field": field, "action": action}
    return REGISTRY.get_sample_value("aigw_schema_violations_total", labels) or 0.0


# --------------------------------------------------------------------------- the schema


def test_nullable_fields_are_type_arrays_and_formats_are_emitted():
    assert schema_of(FieldSpec(path="x")) == {"type": "string"}
    assert schema_of(FieldSpec(path="x", nullable=True)) == {"type": ["string", "null"]}
    assert schema_of(FieldSpec(path="x", type="integer", nullable=True)) == \
        {"type": ["integer", "null"]}
    assert schema_of(FieldSpec(path="x", format="uri", nullable=True)) == \
        {"type": ["string", "null"], "format": "uri"}
    stream = compile_streams(Pdpp.model_validate(pdpp()), {"helpcentre"})["items"]
    schema = stream.schema()
    Draft202012Validator.check_schema(schema)
    assert schema["required"] == ["id", "title"]
    assert schema["properties"]["updated_at"] == {"type": ["string", "null"],
                                                  "format": "date-time"}


@pytest.mark.parametrize("spec", [
    {"path": "x", "type": "integer", "format": "date-time"},
    {"path": "x", "format": "ipv4"},
    {"path": "x", "nullable": "sometimes"},
])
def test_formats_are_an_allow_list_for_strings_only(spec: dict[str, Any]):
    with pytest.raises(ValidationError):
        FieldSpec.model_validate(spec)


def test_the_primary_key_cannot_be_nullable():
    fields = {**FIELDS, "id": {"path": "id", "nullable": True}}
    with pytest.raises(MappingError, match="nullable"):
        compile_streams(Pdpp.model_validate(pdpp(fields)), {"helpcentre"})


# --------------------------------------------------------------------------- the checks


FORMAT_CASES = {
    "date-time": (["2026-11-19T21:02:23Z", "2026-11-19t21:02:23.123456+01:00"],
                  ["2026-11-19", "2026-11-19T21:02Z", "2026-13-19T21:02:23Z",
                   "2026-11-19T21:02:23", "yesterday", "2026-11-19 21:02:23Z"]),
    "date": (["2026-02-28", "2024-02-29"], ["2026-02-29", "2026-2-28", "20260228", "x"]),
    "uri": (["https://nginx.org", "http://a.example/p?q=1#f", "mailto:x@y.z", "urn:isbn:1",
             "https://[::1]:8080/", "https://a.example/%C3%A9"],
            ["nginx.org", "/relative", "https://a.example/a b", "https://a.example/é",
             "https://a.example/%zz", "https://[::1/", ""]),
    "email": (["ann@a.example"], ["ann", "ann@", "@a.example", "a b@c.d"]),
    "uuid": (["0b8e0f3c-1c2d-4e5f-8a9b-0c1d2e3f4a5b"],
             ["0b8e0f3c1c2d4e5f8a9b0c1d2e3f4a5b", "0b8e0f3c-1c2d-4e5f-8a9b-0c1d2e3f4a5"]),
}


@pytest.mark.parametrize("name", sorted(FORMAT_CASES))
def test_each_format_check_accepts_only_its_format(name: str):
    valid, invalid = FORMAT_CASES[name]
    assert [v for v in valid if not FORMATS[name](v)] == []
    assert [v for v in invalid if FORMATS[name](v)] == []
    # what the gateway accepts, a JSON Schema validator with format checking accepts too
    checker = Draft202012Validator.FORMAT_CHECKER
    assert [v for v in valid if not checker.conforms(v, name)] == []


def test_conform_keeps_what_the_schema_admits_and_tallies_the_rest():
    stream = compile_streams(Pdpp.model_validate(pdpp()), {"helpcentre"})["items"]
    tally: Tally = Counter()
    kept = [data for item in ITEMS if (data := conform(stream.rules, item, tally)) is not None]
    assert [d["id"] for d in kept] == ["a", "b", "c", "g"]
    assert kept[0] == GOOD
    assert kept[1] == {"id": "b", "title": "B", "homepage": None, "updated_at": None}
    assert kept[2] == {"id": "c", "title": "C"}
    assert kept[3]["size"] == 2.0
    assert dict(tally) == {
        ("homepage", "field_omitted"): 1, ("updated_at", "field_omitted"): 1,
        ("size", "field_omitted"): 1, ("owner_email", "field_omitted"): 1,
        ("title", "record_skipped"): 2, ("id", "record_skipped"): 1}


def test_a_number_is_finite_and_a_boolean_is_no_integer():
    number = compile_rule("n", FieldSpec(path="n", type="number"),
                          Expression(jmespath.compile("n")), False)
    integer = compile_rule("i", FieldSpec(path="i", type="integer"),
                           Expression(jmespath.compile("i")), False)
    assert [number.accepts(v) for v in (1, 1.5, float("nan"), float("inf"), True, "1")] == \
        [True, True, False, False, False, False]
    assert [integer.accepts(v) for v in (1, 1.0, 1.5, True, "1")] == \
        [True, True, False, False, False]


def test_mapping_records_leaves_nothing_for_the_cycle_collector():
    """A refresh maps every record again in a background thread: garbage in reference cycles
    (JMESPath's per-call interpreter) would make collections that stop the event loop too.
    Counted in a process of its own: other tests' threads make garbage of their own."""
    run = subprocess.run([sys.executable, "-c", "import test_pdpp_schema as t; "
                          "print(t.cyclic_garbage_of_mapping())"],
                         capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "0"


def cyclic_garbage_of_mapping() -> int:
    """How many objects the cycle collector finds after mapping a page of records."""
    [stream] = compile_streams(Pdpp.model_validate(pdpp()), {"helpcentre"}).values()
    nested = compile_rule("k", FieldSpec(path="meta.k", type="integer"),
                          Expression(jmespath.compile("meta.k")), False)
    page = [{**item, "meta": {"k": i}} for i, item in enumerate(ITEMS * 50)]
    gc.collect()
    gc.disable()
    try:
        mapped = [conform((*stream.rules, nested), item, Counter()) for item in page]
        found = gc.collect()
    finally:
        gc.enable()
    assert mapped[7] is not None and mapped[7]["k"] == 7  # GOOD again, the nested path read
    return found


# --------------------------------------------------------------------------- over HTTP


async def test_every_record_sent_is_valid_against_the_advertised_schema(
        tmp_path: Path, caplog: pytest.LogCaptureFixture):
    before = {(f, a): violations(f, a) for f, a in [("title", "record_skipped"),
                                                    ("owner_email", "field_omitted")]}
    caplog.set_level(logging.WARNING, "aigw.pdpp")
    async with memory_gateway(config("http://legacy.test", pdpp()), tmp_path,
                              {"helpcentre": items}) as gateway:
        schema = (await gateway.client.get("/v1/streams/items", headers=OWNER)).json()["schema"]
        listed = (await gateway.client.get("/v1/streams/items/records", headers=OWNER)).json()
        one = await gateway.client.get("/v1/streams/items/records/c", headers=OWNER)
        skipped = await gateway.client.get("/v1/streams/items/records/d", headers=OWNER)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    assert sorted(r["id"] for r in listed["data"]) == ["a", "b", "c", "g"]
    assert [r["id"] for r in listed["data"] if not validator.is_valid(r["data"])] == []
    assert one.json()["data"] == {"id": "c", "title": "C"}
    assert skipped.status_code == 404
    assert violations("title", "record_skipped") - before["title", "record_skipped"] >= 2
    assert violations("owner_email", "field_omitted") - before["owner_email", "field_omitted"] >= 1
    logged = caplog.text
    assert "owner_email" in logged and "record skipped" in logged
    assert "secret-value-c" not in logged and "three" not in logged  # never a value
