"""The PDPP section of config/demo.yaml, API keys for an owner and narrowed clients, and the
PDPP response schemas the tests check answers against."""

from __future__ import annotations

import hashlib
import json
import tempfile
from typing import Any

import jsonschema
import yaml
from processes import ROOT

OWNER_KEY, CLIENT_KEY, SUBJECT_ONLY_KEY = "owner-key-0001", "client-key-0001", "subject-key-001"
SCHEMAS = json.loads((ROOT / "gateway" / "schemas" / "pdpp" / "responses.json").read_text())
RESOURCE = "https://rs.example.com"
# RFC 9728 members the reference schema forbids but the standard defines (README: known
# disagreements): allowed here, while every PDPP member is checked against the schema.
RFC9728 = ("resource", "authorization_servers", "scopes_supported", "bearer_methods_supported",
           "authorization_details_types_supported")


def demo_pdpp(embedder: str = "hash") -> dict[str, Any]:
    """The demo's PDPP section; its semantic search on the hash embedder (whose neighbours
    are words in common, which these tests' expectations are written for) unless `embedder`
    is "wordllama", the demo's own."""
    demo = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
    pdpp = demo["pdpp"]
    pdpp.pop("cursor_secret")
    pdpp.pop("index")  # `config` gives each gateway an index folder of its own
    if embedder != "wordllama":
        pdpp["semantic"]["embedder"] = {"provider": embedder}
    return pdpp


def key(secret: str, subject: str, kind: str, grant: dict | None = None) -> dict[str, Any]:
    entry = {"sha256": hashlib.sha256(secret.encode()).hexdigest(), "subject": subject,
             "client_id": f"app-{secret[:6]}", "kind": kind}
    return {**entry, "grant": grant} if grant is not None else entry


def config(backend: str, pdpp: dict | None = None, **upstreams: str) -> dict[str, Any]:
    """A gateway with the PDPP section (the demo's by default) and its index in a folder of
    its own: no test finds another's index on disk."""
    pdpp = pdpp if pdpp is not None else demo_pdpp()
    pdpp.setdefault("index", {"path": tempfile.mkdtemp(prefix="aigw-pdpp-index-")})
    keys = [
        key(OWNER_KEY, "u-001", "owner"),
        key(CLIENT_KEY, "u-001", "client",
            {"messages": ["id", "subject", "sent_at"], "articles": ["id", "title"]}),
        key(SUBJECT_ONLY_KEY, "u-001", "client", {"messages": ["id", "subject"]}),
    ]
    return {
        "upstreams": {"helpcentre": {"url": backend},
                      **{name: {"url": url} for name, url in upstreams.items()}},
        "auth": {"resource": RESOURCE, "api_keys": {"header": "X-API-Key", "keys": keys}},
        "pdpp": pdpp,
    }


# Members the reference server's schema requires of stream metadata that spec-core §8 does
# not define (its own field and expansion views): not required of aigw.
REFERENCE_ONLY = {"stream_metadata": {"field_capabilities", "expand_capabilities"}}


def check(document: Any, schema: str) -> None:
    rules = json.loads(json.dumps(SCHEMAS[schema]))
    if schema in REFERENCE_ONLY:
        rules["required"] = [r for r in rules["required"] if r not in REFERENCE_ONLY[schema]]
        # The retrieval texts put `query.search` here; the reference schema forbids it.
        rules["properties"]["query"]["properties"]["search"] = {
            "type": "object", "additionalProperties": False,
            "properties": {name: {"type": "array", "items": {"type": "string"}, "minItems": 1}
                           for name in ("lexical_fields", "semantic_fields")}}
    jsonschema.validate(document, rules)


def check_metadata(document: dict[str, Any]) -> None:
    """Each PDPP member against its schema; the RFC 9728 members as RFC 9728 has them."""
    members = SCHEMAS["resource_metadata"]["properties"]
    for name, value in document.items():
        if name not in RFC9728:
            assert name in members, name
            jsonschema.validate(value, members[name])
