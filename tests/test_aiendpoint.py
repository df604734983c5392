"""The AI Discovery Endpoint (draft-aiendpoint-00): the document the gateway builds from config,
served over real HTTP, checked against the spec's JSON Schema, and the configs refused at load."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from inprocess import InProcessGateway
from jsonschema import Draft202012Validator
from processes import ROOT, Gateway

from gateway.capability import Capability
from gateway.loader import load_config
from gateway.registry import settings_model
from gateway.surfaces.aiendpoint.document import ai_endpoint_problems, build_ai_document

SCHEMA = ROOT / "gateway" / "schemas" / "aiendpoint.schema.json"
EXAMPLES = ROOT / "tests" / "spec_examples" / "aiendpoint"
SHARED = ROOT.parent / "shared" / "specs" / "aiendpoint"
SECRET = "introspection-secret-7c41f0"
SERVICE = {"name": "Acme", "description": "Search and read Acme's help-centre articles.",
           "category": ["search", "data"], "docs": "https://acme.example/docs/agents"}
CAPABILITIES = [
    {"id": "search_articles", "description": "Search articles by keyword",
     "endpoint": "/api/articles/search",
     "params": {"q": "string, required — keyword", "limit": "integer, optional, default 10"},
     "returns": "items[] {id, title, url}"},
    {"id": "classify_text", "description": "Classify a support request",
     "endpoint": "/api/tasks/classify", "method": "POST",
     "params": {"text": "string, required — request text"}, "returns": "category, confidence"},
]


def validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(SCHEMA.read_text()),
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def config(upstream: str = "http://127.0.0.1:9", **sections: Any) -> dict[str, Any]:
    return {"upstreams": {"legacy": {"url": upstream}}, "service": SERVICE,
            "ai_endpoint": {"capabilities": CAPABILITIES}, **sections}


def document(**sections: Any) -> dict[str, Any]:
    settings = settings_model().model_validate(config(**sections))
    return build_ai_document(settings, config_date=date(2026, 3, 10))


def problems(**sections: Any) -> list[tuple[str, str]]:
    return ai_endpoint_problems(settings_model().model_validate(config(**sections)))


# --- the spec's schema and examples -------------------------------------------------------

@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("example-*.json")), ids=lambda p: p.name)
def test_the_spec_examples_validate_against_the_shipped_schema(example: Path):
    validator().validate(json.loads(example.read_text()))


def test_the_shipped_schema_and_examples_are_copies_of_the_spec_files():
    if not SHARED.is_dir():
        pytest.skip("../shared/specs/aiendpoint is not present")
    assert SCHEMA.read_bytes() == (SHARED / "schema.json").read_bytes(), \
        "gateway/schemas/aiendpoint.schema.json drifted from ../shared/specs/aiendpoint"
    for example in EXAMPLES.glob("example-*.json"):
        assert example.read_bytes() == (SHARED / example.name).read_bytes(), example.name


def test_the_demo_document_validates_and_has_no_problems():
    loaded = load_config(ROOT / "config" / "demo.yaml", env={})
    built = build_ai_document(loaded.settings, config_date=loaded.modified)
    validator().validate(built)
    assert [c["id"] for c in built["capabilities"]] == \
        ["search_articles", "get_article", "classify_text"]
    assert built["meta"]["last_updated"] == loaded.modified.isoformat()
    assert ai_endpoint_problems(loaded.settings) == []


# --- what the builder derives from config ------------------------------------------------

def test_the_document_carries_service_capabilities_and_token_hints():
    built = document(ai_endpoint={"capabilities": CAPABILITIES,
                                  "token_hints": {"field_filtering": True}})
    validator().validate(built)
    assert built["aiendpoint"] == "1.0"
    assert built["service"] == {"name": "Acme", "description": SERVICE["description"],
                                "category": ["search", "data"], "language": ["en"]}
    assert built["capabilities"][0] == {**CAPABILITIES[0], "method": "GET"}
    assert built["capabilities"][1]["method"] == "POST"
    assert built["token_hints"] == {"compact_mode": False, "field_filtering": True,
                                    "delta_support": False}


INTROSPECTION = {"endpoint": "https://idp.example/introspect", "client_id": "gw",
                 "client_secret": SECRET}
ISSUER = {"issuer": "https://idp.example", "jwks_uri": "https://idp.example/jwks",
          "audiences": ["api"]}
API_KEYS = {"header": "X-Legacy-Key", "keys": [{"sha256": "a" * 64, "subject": "crm"}]}
AUTH_CASES = {
    "no auth section": (None, {"type": "none"}),
    "JWT issuers": ({"issuers": [ISSUER], "api_keys": API_KEYS}, {"type": "oauth2"}),
    "introspection": ({"introspection": INTROSPECTION, "api_keys": API_KEYS}, {"type": "bearer"}),
    "API keys only": ({"api_keys": API_KEYS}, {"type": "apikey", "header": "X-Legacy-Key"}),
}


@pytest.mark.parametrize("case", list(AUTH_CASES))
def test_auth_follows_the_auth_section(case: str):
    auth, expected = AUTH_CASES[case]
    sections = {} if auth is None else {"auth": {"resource": "https://api.example", **auth}}
    built = document(**sections)
    assert built["auth"] == {**expected, "docs": SERVICE["docs"]}
    assert SECRET not in json.dumps(built) and "a" * 64 not in json.dumps(built)


def test_auth_docs_are_left_out_without_service_docs():
    service = {key: value for key, value in SERVICE.items() if key != "docs"}
    assert document(service=service)["auth"] == {"type": "none"}


def rule(name: str, limit: str, paths: list[str], **extra: Any) -> dict[str, Any]:
    return {"name": name, "paths": paths, "limit": limit, **extra}


RATE_CASES = {
    "120/minute": ([rule("api", "120/minute", ["/api"])], 120),
    "10/second": ([rule("api", "10/second", ["/api"])], 600),
    "1000/hour rounds down": ([rule("api", "1000/hour", ["/api"])], 16),
    "5/day is at least 1": ([rule("api", "5/day", ["/api"])], 1),
    "the most restrictive rule wins": (
        [rule("api", "120/minute", ["/api"]), rule("tasks", "30/minute", ["/api/tasks"])], 30),
    "a stricter burst wins": ([rule("api", "6000/hour", ["/api"], burst="1/second")], 60),
    "rules not covering a capability are ignored": (
        [rule("api", "120/minute", ["/api"]), rule("other", "1/minute", ["/other"]),
         rule("deletes", "1/minute", ["/api"], methods=["DELETE"])], 120),
}


@pytest.mark.parametrize("case", list(RATE_CASES))
def test_requests_per_minute_follows_the_rules(case: str):
    rules, expected = RATE_CASES[case]
    built = document(rate_limits={"rules": rules})
    assert built["rate_limits"] == {"requests_per_minute": expected}
    validator().validate(built)


def test_uncovered_capabilities_omit_rate_limits():
    assert "rate_limits" not in document(rate_limits={"rules": [rule("x", "1/minute", ["/x"])]})
    assert "rate_limits" not in document()


def tiered(**tier: str) -> dict[str, Any]:
    return {"rules": [rule("api", "120/minute", ["/api"],
                           tiers=[{"limit": "10/second", **tier}])]}


def keyed(client_id: str, scopes: list[str] = ()) -> dict[str, Any]:
    key = {"sha256": "b" * 64, "subject": "s", "client_id": client_id, "scopes": list(scopes)}
    return {"resource": "https://api.example", "api_keys": {"keys": [key]}}


DEMO_ISSUER = {"issuer": {"url": "https://idp.example", "key_file": "k.json",
                          "clients": {"agent": {"secret": "x", "scopes": ["read"]}}}}
TIER_CASES = {  # tier conditions, auth section, demo section -> advertised?
    "an API key carries the tier's client id": ({"client_id": "agent"}, keyed("agent"), None,
                                                True),
    "no credential carries that client id": ({"client_id": "agent"}, keyed("crm"), None, False),
    "no auth: every caller is anonymous": ({"client_id": "agent"}, None, None, False),
    "an API key has the tier's scope": ({"scope": "bulk"}, keyed("crm", ["bulk"]), None, True),
    "an outside issuer may issue any client id": (
        {"client_id": "agent"}, {"resource": "https://api.example", "issuers": [ISSUER]}, None,
        True),
    "an issuer without a kind claim issues one kind": (
        {"token_kind": "owner"}, {"resource": "https://api.example",
                                  "issuers": [{**ISSUER, "token_kind_claim": None}]}, None,
        False),
    "the demo issuer issues only its clients": (
        {"client_id": "ghost"}, {"resource": "https://api.example", "issuers": [ISSUER]},
        DEMO_ISSUER, False),
    "a demo client reaches it": ({"client_id": "agent", "scope": "read"},
                                 {"resource": "https://api.example", "issuers": [ISSUER]},
                                 DEMO_ISSUER, True),
}


@pytest.mark.parametrize("case", list(TIER_CASES))
def test_agent_tier_available_only_when_a_caller_can_reach_the_tier(case: str):
    tier, auth, demo, expected = TIER_CASES[case]
    sections: dict[str, Any] = {"rate_limits": tiered(**tier)}
    if auth is not None:
        sections["auth"] = auth
    if demo is not None:
        sections["demo"] = demo
    built = document(**sections)
    validator().validate(built)
    assert built["rate_limits"].get("agent_tier_available", False) is expected


def test_a_tier_lower_than_the_default_is_no_agent_tier():
    lower = {"rules": [rule("api", "120/minute", ["/api"],
                            tiers=[{"client_id": "agent", "limit": "60/minute"}])]}
    built = document(rate_limits=lower, auth=keyed("agent"))
    assert "agent_tier_available" not in built["rate_limits"]


def test_absolute_endpoints_on_the_public_base_url_are_counted_and_others_are_not():
    capabilities = [{**CAPABILITIES[0], "endpoint": "https://api.example/api/articles/search"}]
    limits = {"rules": [rule("api", "60/minute", ["/api"])]}
    on_base = document(public_base_url="https://api.example", rate_limits=limits,
                       ai_endpoint={"capabilities": capabilities})
    elsewhere = document(public_base_url="https://other.example", rate_limits=limits,
                         ai_endpoint={"capabilities": capabilities})
    assert on_base["rate_limits"]["requests_per_minute"] == 60
    assert "rate_limits" not in elsewhere


def test_meta_takes_last_updated_status_and_changelog_from_service():
    assert document()["meta"] == {"last_updated": "2026-03-10"}
    service = {**SERVICE, "last_updated": "2026-01-02T03:04:05Z",
               "status": "https://status.acme.example", "changelog": "https://acme.example/log"}
    assert document(service=service)["meta"] == {
        "last_updated": "2026-01-02T03:04:05Z", "status": "https://status.acme.example",
        "changelog": "https://acme.example/log"}
    settings = settings_model().model_validate(config())
    assert "meta" not in build_ai_document(settings)


def test_the_gateway_capabilities_follow_the_configured_ones_and_may_not_share_an_id():
    own = Capability(id="search_articles", description="AIDRE search", endpoint="/search",
                     method="POST")
    settings = settings_model().model_validate(config())
    built = build_ai_document(settings, extra_capabilities=[own])
    assert [c["endpoint"] for c in built["capabilities"]] == \
        ["/api/articles/search", "/api/tasks/classify", "/search"]
    [(path, message)] = ai_endpoint_problems(settings, extra_capabilities=[own])
    assert path == "ai_endpoint.capabilities[0].id" and "gateway's own" in message


# --- problems found at load ----------------------------------------------------------------

def with_endpoint(endpoint: str) -> dict[str, Any]:
    return {"capabilities": [{**CAPABILITIES[0], "endpoint": endpoint}]}


@pytest.mark.parametrize("endpoint", [
    "/metrics", "/healthz", "/readyz/", "http://127.0.0.1:9090/anything",
    "http://localhost:9090/metrics", "https://api.example/readyz", "http://api.example:9090/x",
])
def test_admin_endpoints_are_refused(endpoint: str):
    [(path, message)] = problems(public_base_url="https://api.example",
                                 ai_endpoint=with_endpoint(endpoint))
    assert path == "ai_endpoint.capabilities[0].endpoint"
    assert "must never be advertised" in message


@pytest.mark.parametrize("endpoint", [
    "/metricsfoo", "https://other.example:9090/x", "http://127.0.0.1:8080/api/x",
])
def test_endpoints_that_only_look_like_admin_ones_are_accepted(endpoint: str):
    assert problems(ai_endpoint=with_endpoint(endpoint)) == []


def test_any_host_on_the_admin_port_is_refused_when_admin_listens_everywhere():
    [(path, _)] = problems(admin={"host": "0.0.0.0", "port": 9100},
                           ai_endpoint=with_endpoint("https://gw.example:9100/x"))
    assert path == "ai_endpoint.capabilities[0].endpoint"


def test_a_document_over_64_kb_is_refused():
    many = [{**CAPABILITIES[0], "id": f"search_{index}", "description": "d" * 200}
            for index in range(300)]
    [(path, message)] = problems(ai_endpoint={"capabilities": many})
    assert path == "ai_endpoint.capabilities" and "64 KB" in message


def test_the_schema_check_catches_what_the_models_let_through():
    [(path, message)] = problems(service={**SERVICE, "category": ["data", "data"]})
    assert path == "service.category" and "schema" in message


def test_no_capabilities_and_a_disabled_section():
    [(path, _)] = problems(ai_endpoint={"capabilities": []})
    assert path == "ai_endpoint.capabilities"
    disabled = config(ai_endpoint={"enabled": False, "capabilities": []})
    del disabled["service"]
    assert ai_endpoint_problems(settings_model().model_validate(disabled)) == []


def aigw_validate(tmp_path: Path, document: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    return subprocess.run([sys.executable, "-m", "gateway", "validate", str(path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def changed_capability(**change: str) -> dict[str, Any]:
    return config(ai_endpoint={"capabilities": [{**CAPABILITIES[0], **change}]})


def without_service() -> dict[str, Any]:
    document = config()
    del document["service"]
    return document


REFUSED = {
    "bad id": (changed_capability(id="Search-Articles"), "ai_endpoint.capabilities[0].id",
               "expected a snake_case id"),
    "201-character description": (changed_capability(description="d" * 201),
                                  "ai_endpoint.capabilities[0].description",
                                  "expected 1 to 200 characters, got 201"),
    "/metrics endpoint": (changed_capability(endpoint="/metrics"),
                          "ai_endpoint.capabilities[0].endpoint", "admin paths"),
    "relative endpoint without /": (changed_capability(endpoint="api/search"),
                                    "ai_endpoint.capabilities[0].endpoint",
                                    "expected a path starting with /"),
    "duplicate id": (config(ai_endpoint={"capabilities": [CAPABILITIES[0], CAPABILITIES[0]]}),
                     "ai_endpoint.capabilities[1].id", "expected a unique id"),
    "missing service": (without_service(), "service", "expected a service section"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_aigw_validate_refuses_configs_that_would_serve_an_invalid_document(
    tmp_path: Path, case: str
):
    document, dotted, fragment = REFUSED[case]
    result = aigw_validate(tmp_path, document)
    assert result.returncode == 1
    assert f"{tmp_path / 'gateway.yaml'}: {dotted}: " in result.stderr
    assert fragment in result.stderr and "Traceback" not in result.stderr


# --- served over real HTTP -------------------------------------------------------------------

@pytest.fixture(scope="module")
def gateway(echo: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """Every other path needs a token, and a rule even claims /.well-known and /ai."""
    auth = {"resource": "https://api.example", "introspection": INTROSPECTION,
            "routes": [{"path": "/.well-known", "scopes": ["admin"]},
                       {"path": "/ai", "scopes": ["admin"]}]}
    limits = {"rules": [rule("api", "120/minute", ["/api"])]}
    started = InProcessGateway({**config(echo, auth=auth, rate_limits=limits),
                                "default_upstream": "legacy"},
                               tmp_path_factory.mktemp("aiendpoint"))
    yield started
    started.stop()


def test_served_without_a_token_while_everything_else_needs_one(gateway: Gateway):
    assert httpx.get(gateway.url + "/api/articles/search?q=x").status_code == 401
    response = httpx.get(gateway.url + "/.well-known/ai")
    assert response.status_code == 200
    served = response.json()
    validator().validate(served)
    assert served["auth"] == {"type": "bearer", "docs": SERVICE["docs"]}
    assert served["rate_limits"] == {"requests_per_minute": 120}
    modified = datetime.fromtimestamp(gateway.config_path.stat().st_mtime, UTC)
    assert served["meta"]["last_updated"] == modified.date().isoformat()


def test_never_a_secret_and_within_64_kb(gateway: Gateway):
    body = httpx.get(gateway.url + "/.well-known/ai").content
    assert SECRET.encode() not in body and b"introspect" not in body
    assert len(body) <= 64 * 1024


def test_media_type_caching_and_conditional_requests(gateway: Gateway):
    response = httpx.get(gateway.url + "/.well-known/ai")
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.headers["cache-control"] == "public, max-age=86400"
    etag = response.headers["etag"]
    again = httpx.get(gateway.url + "/.well-known/ai", headers={"if-none-match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    other = httpx.get(gateway.url + "/.well-known/ai", headers={"if-none-match": '"other"'})
    assert other.status_code == 200 and other.content == response.content


def test_the_alias_serves_identical_bytes(gateway: Gateway):
    well_known = httpx.get(gateway.url + "/.well-known/ai")
    alias = httpx.get(gateway.url + "/ai")
    assert alias.status_code == 200 and alias.content == well_known.content
    assert alias.headers["etag"] == well_known.headers["etag"]


@pytest.mark.parametrize("default_upstream", [True, False], ids=["proxied", "not found"])
def test_without_the_alias_ai_is_an_ordinary_path(echo: str, inprocess_factory,
                                                  default_upstream: bool):
    settings = config(echo, ai_endpoint={"capabilities": CAPABILITIES, "alias": False,
                                         "max_age": 60})
    if default_upstream:
        settings["default_upstream"] = "legacy"
    started = inprocess_factory(settings)
    well_known = httpx.get(started.url + "/.well-known/ai")
    assert well_known.headers["cache-control"] == "public, max-age=60"
    assert well_known.json()["auth"] == {"type": "none", "docs": SERVICE["docs"]}
    alias = httpx.get(started.url + "/ai")
    if default_upstream:
        assert alias.status_code == 200 and alias.json()["raw_path"] == "/ai"
    else:
        assert alias.status_code == 404
