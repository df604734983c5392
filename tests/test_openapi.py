"""The gateway's own OpenAPI document: valid 3.1, complete, true to the config and to the wire."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pdpp_config
import pytest
import schemathesis
from aidip_config import aidip_gateway_config
from aidre_config import aidre_gateway_config, collection
from hypothesis import HealthCheck, given, settings
from inprocess import InProcessGateway
from openapi_spec_validator import validate
from processes import Gateway
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gateway import registry
from gateway.loader import load_config
from gateway.surface import MountContext

OPENAPI = "/.well-known/aigw/openapi.json"
SERVICE = {"name": "Acme Help Centre", "description": "Help-centre articles for agents."}
AI_ENDPOINT = {"capabilities": [{"id": "search_articles", "description": "Search articles",
                                 "endpoint": "/api/v1/articles/search", "method": "GET"}]}


def full_config(backend: str, workdir, **aidre) -> dict:
    return aidre_gateway_config(backend, workdir, aidre=aidre or None, service=SERVICE,
                                ai_endpoint=AI_ENDPOINT)


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("openapi")
    started = InProcessGateway(full_config(backend, workdir), workdir)
    yield started
    started.stop()


def served(gateway: Gateway) -> dict:
    response = httpx.get(gateway.url + OPENAPI)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def test_the_served_document_is_valid_openapi_3_1(gateway: Gateway):
    document = served(gateway)
    assert document["openapi"] == "3.1.0"
    validate(document)  # raises on any violation of the OpenAPI 3.1 schema
    assert document["info"]["title"] == "Acme Help Centre (aigw)"


def test_it_is_public_cacheable_and_refuses_other_methods(backend, inprocess_factory, tmp_path):
    config = full_config(backend, tmp_path)
    config["auth"]["default_access"] = "authenticated"
    gateway = inprocess_factory(config)
    first = httpx.get(gateway.url + OPENAPI)
    assert first.status_code == 200 and first.headers["etag"]
    again = httpx.get(gateway.url + OPENAPI, headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304
    refused = httpx.post(gateway.url + OPENAPI)
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"
    assert refused.json()["error"]["code"] == "method_not_allowed"


def test_every_route_and_document_a_surface_serves_is_described(gateway: Gateway):
    paths = served(gateway)["paths"]
    settings = load_config(gateway.config_path).settings
    context = MountContext(settings, registry.capabilities(settings))
    served_routes = set()
    for surface in registry.surfaces():
        mount = surface.mount(context)
        if mount is None:
            continue
        served_routes |= {(path, "get") for path in mount.documents}
        for route in mount.routes:
            template = route.path.replace(":path}", "}")
            served_routes |= {(template, method.lower()) for method in route.methods - {"HEAD"}}
    assert len(served_routes) >= 6
    for path, method in served_routes:
        assert method in paths.get(path, {}), f"{method.upper()} {path} is not described"
    assert "get" in paths["/.well-known/oauth-protected-resource"]


def test_paths_follow_the_base_path_and_private_collections_stay_unnamed(backend, tmp_path):
    from gateway.discovery import core_documents

    config = full_config(backend, tmp_path, base_path="/aidre/v1")
    config["aidre"]["collections"]["secret_plans"] = collection(
        visibility="private", scopes=["staff:read"], description="Board-only plans.")
    path = tmp_path / "gw.yaml"
    import yaml

    path.write_text(yaml.safe_dump(config))
    body = core_documents(load_config(path).settings)[OPENAPI].body
    paths = httpx.Response(200, content=body).json()["paths"]
    assert {"/aidre/v1/search", "/aidre/v1/collections", "/aidre/v1/chunks/{id}",
            "/.well-known/ai-discovery"} <= set(paths)
    assert "/search" not in paths and "/collections" not in paths
    assert b"secret_plans" not in body and b"Board-only" not in body


def test_security_schemes_follow_the_auth_config(gateway: Gateway):
    document = served(gateway)
    assert document["components"]["securitySchemes"] == {
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}
    # default_access is public in this config: credentials are optional but honoured
    assert document["paths"]["/search"]["post"]["security"] == [{}, {"apiKey": []}]
    assert document["paths"][OPENAPI]["get"]["security"] == []
    assert "sha256" not in str(document)


def test_scoped_routes_require_their_scopes(backend, inprocess_factory, tmp_path):
    config = full_config(backend, tmp_path)
    config["auth"]["routes"] = [{"path": "/chunks", "scopes": ["chunks:read"]}]
    config["auth"]["default_access"] = "authenticated"
    document = served(inprocess_factory(config))
    assert document["paths"]["/chunks/{id}"]["get"]["security"] == [{"apiKey": ["chunks:read"]}]
    assert document["paths"]["/collections"]["get"]["security"] == [{"apiKey": []}]
    discovery = document["paths"]["/.well-known/ai-discovery"]["get"]["security"]
    assert discovery == [{}, {"apiKey": []}]  # discovery stays public


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@pytest.mark.parametrize("key", [None, "vector-key", "staff-key"])
def test_real_responses_match_the_declared_schemas(gateway: Gateway, key: str | None):
    """Schemathesis generates requests from the served document; every answer must conform."""
    schema = schemathesis.openapi.from_url(gateway.url + OPENAPI)
    headers = {"x-api-key": key} if key else {}
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {operation.label for operation in operations}
    assert {"POST /search", "GET /chunks/{id}", "GET /collections", "GET /.well-known/ai"} <= labels
    for operation in operations:
        @settings(max_examples=8, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            response = case.call(base_url=gateway.url, headers=headers, timeout=10)
            case.validate_response(response, checks=CHECKS)

        check()


def aip_section(workdir) -> dict:
    (workdir / "aip.secret").write_text("an-aip-platform-secret-0123456789")
    search = {"upstream": "helpcentre", "path": "/api/v1/articles/search",
              "query": {"q": "{query}", "limit": "{limit}"},
              "mapping": {"items": "items", "id": "id", "text": "snippet",
                          "fields": {"title": "title", "url": "url"}}}
    return {"publisher": {"id": "acme-help", "name": "Acme Help Centre",
                          "domain": "help.example.com"},
            "editorial_domains": ["support"], "sources": {"help": {"search": search}},
            "event": {"path": "/pag/events"},
            "events": {"file": str(workdir / "events.jsonl")},
            "signing": {"enabled": True, "required": False,
                        "keys": {"plat_1": {"secret_file": str(workdir / "aip.secret")}}}}


def test_aip_answers_match_the_declared_schemas(backend, inprocess_factory, tmp_path):
    config = full_config(backend, tmp_path)
    config["aip"] = aip_section(tmp_path)
    gateway = inprocess_factory(config)
    document = served(gateway)
    validate(document)
    assert {"/.well-known/aip.json", "/.well-known/aip/capabilities", "/pag/retrieve",
            "/pag/events"} <= set(document["paths"])
    retrieve = document["paths"]["/pag/retrieve"]["post"]
    assert {p["name"] for p in retrieve["parameters"]} >= {"X-AIP-Signature", "X-AIP-Nonce"}
    schema = schemathesis.openapi.from_url(gateway.url + OPENAPI)
    operations = [result.ok() for result in schema.get_all_operations()]
    aip = [op for op in operations if "aip" in op.label or "/pag/" in op.label]
    assert len(aip) == 4
    for operation in aip:
        @settings(max_examples=8, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            response = case.call(base_url=gateway.url, timeout=10)
            case.validate_response(response, checks=CHECKS)

        check()


def aidip_pdpp_config(backend: str, echo: str) -> dict:
    """AIDIP's test registry and the demo's PDPP streams behind one gateway, with PDPP keys."""
    config = aidip_gateway_config(backend, echo)
    config["auth"]["resource"] = pdpp_config.RESOURCE
    config["auth"]["api_keys"]["keys"] += [
        pdpp_config.key(pdpp_config.OWNER_KEY, "u-001", "owner"),
        pdpp_config.key(pdpp_config.CLIENT_KEY, "u-001", "client",
                        {"messages": ["id", "subject", "sent_at"], "articles": ["id", "title"]})]
    config["pdpp"] = pdpp_config.demo_pdpp()
    return config


@pytest.fixture(scope="module")
def aidip_pdpp(backend: str, echo: str,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("openapi-aidip-pdpp")
    started = InProcessGateway(aidip_pdpp_config(backend, echo), workdir)
    yield started
    started.stop()


def test_every_aidip_and_pdpp_route_is_described_with_its_error_object(aidip_pdpp: Gateway):
    document = served(aidip_pdpp)
    validate(document)
    paths = document["paths"]
    settings = load_config(aidip_pdpp.config_path).settings
    context = MountContext(settings, registry.capabilities(settings))
    for name in ("aidip", "pdpp"):
        [surface] = [s for s in registry.surfaces() if s.name == name]
        mount = surface.mount(context)
        assert mount is not None
        for route in mount.routes:
            template = route.path.replace(":path}", "}")
            for method in route.methods - {"HEAD"}:
                operation = paths[template][method.lower()]
                declared = {p["name"] for p in operation.get("parameters", [])
                            if p["in"] == "path"}
                assert declared == set(route.param_convertors), (method, template)
                errors = {s for s in operation["responses"] if s >= "400"}
                assert errors, (method, template)
                error = "AidipError" if name == "aidip" else "PdppError"
                for status in errors:
                    schema = operation["responses"][status]["content"]["application/json"]
                    assert schema["schema"] == {"$ref": f"#/components/schemas/{error}"}
    assert paths["/agents"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AidipAgentMetadata"}
    records = paths["/v1/streams/{stream}/records"]["get"]["responses"]["200"]
    assert records["content"]["application/json"]["schema"]["$ref"].endswith("PdppRecordList")


@pytest.mark.parametrize("key", [None, "alice-key", pdpp_config.OWNER_KEY,
                                 pdpp_config.CLIENT_KEY])
def test_aidip_and_pdpp_answers_match_the_declared_schemas(aidip_pdpp: Gateway, key: str | None):
    schema = schemathesis.openapi.from_url(aidip_pdpp.url + OPENAPI)
    headers = {"x-api-key": key} if key else {}
    operations = [result.ok() for result in schema.get_all_operations()]
    ours = [op for op in operations if "/agent" in op.label or "/v1/" in op.label]
    assert len(ours) == 20
    for operation in ours:
        @settings(max_examples=4, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            response = case.call(base_url=aidip_pdpp.url, headers=headers, timeout=10)
            case.validate_response(response, checks=CHECKS)

        check()
