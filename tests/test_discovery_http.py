"""Discovery documents over real HTTP: caching (ETag, `If-None-Match: *`, Vary), CORS for
browser agents, bad credentials ignored where none is needed, and absolute URLs that follow
the scheme a trusted proxy reports."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from aidre_config import aidre_gateway_config
from inprocess import InProcessGateway
from processes import Gateway

SERVICE = {"name": "Acme", "description": "Acme help centre.",
           "docs": "https://acme.example/docs/agents"}
DOCUMENTS = ["/.well-known/ai", "/ai", "/.well-known/ai-discovery",
             "/.well-known/oauth-protected-resource"]
PREFLIGHT = {"origin": "https://agent.example", "access-control-request-method": "GET",
             "access-control-request-headers": "authorization"}


@pytest.fixture(scope="module")
def gateway(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("discovery")
    started = InProcessGateway(aidre_gateway_config(backend, workdir, service=SERVICE,
                                                    ai_endpoint={"capabilities": []}), workdir)
    yield started
    started.stop()


# --------------------------------------------------------------------------- credentials


@pytest.mark.parametrize("headers", [{"x-api-key": "no-such-key"},
                                     {"authorization": "Bearer expired.or.forged"},
                                     {"authorization": "Bearer"}])
def test_a_bad_credential_on_public_discovery_is_ignored_not_401(gateway: Gateway,
                                                                 headers: dict):
    response = httpx.get(gateway.url + "/.well-known/ai-discovery", headers=headers)
    assert response.status_code == 200, response.text
    assert [c["name"] for c in response.json()["collections"]] == ["articles"]
    assert response.headers["cache-control"].startswith("public")
    # A valid credential still personalises it; elsewhere a bad one is still refused.
    staff = httpx.get(gateway.url + "/.well-known/ai-discovery",
                      headers={"x-api-key": "staff-key"})
    assert [c["name"] for c in staff.json()["collections"]] == ["articles", "staff"]
    assert httpx.get(gateway.url + "/collections", headers=headers).status_code == 401


# --------------------------------------------------------------------------- caching


def test_if_none_match_star_is_304_for_aidre_discovery(gateway: Gateway):
    response = httpx.get(gateway.url + "/.well-known/ai-discovery",
                         headers={"if-none-match": "*"})
    assert response.status_code == 304 and response.content == b""
    assert response.headers["etag"]


def test_if_none_match_star_is_304_for_a_chunk_that_exists_only(gateway: Gateway):
    existing = httpx.get(gateway.url + "/chunks/articles:art-0001",
                         headers={"if-none-match": "*"})
    assert existing.status_code == 304 and existing.headers["etag"]
    missing = httpx.get(gateway.url + "/chunks/articles:art-9999",
                        headers={"if-none-match": "*"})
    assert missing.status_code == 404


@pytest.mark.parametrize("path", ["/collections", "/.well-known/ai-discovery"])
def test_responses_that_depend_on_the_credential_vary_on_it(gateway: Gateway, path: str):
    anonymous = httpx.get(gateway.url + path)
    vary = {v.strip().lower() for v in anonymous.headers["vary"].split(",")}
    assert {"authorization", "x-api-key"} <= vary
    assert anonymous.headers["cache-control"].startswith("public")
    keyed = httpx.get(gateway.url + path, headers={"x-api-key": "staff-key"})
    assert keyed.headers["cache-control"].startswith("private")
    assert "authorization" in keyed.headers["vary"].lower()


# --------------------------------------------------------------------------- CORS


@pytest.mark.parametrize("path", DOCUMENTS)
def test_discovery_documents_are_readable_from_any_origin_by_default(gateway: Gateway,
                                                                     path: str):
    response = httpx.get(gateway.url + path, headers={"origin": "https://agent.example"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert "etag" in response.headers["access-control-expose-headers"].lower()
    # Paths that are no discovery document are left to their owner.
    other = httpx.get(gateway.url + "/collections", headers={"origin": "https://x.example"})
    assert "access-control-allow-origin" not in other.headers
    assert httpx.options(gateway.url + "/collections", headers=PREFLIGHT).status_code == 405


@pytest.mark.parametrize("path", DOCUMENTS)
def test_preflight_on_discovery_documents_is_204(gateway: Gateway, path: str):
    response = httpx.options(gateway.url + path, headers=PREFLIGHT)
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["access-control-allow-methods"] == "GET, HEAD"
    assert "authorization" in response.headers["access-control-allow-headers"].lower()
    assert int(response.headers["access-control-max-age"]) > 0
    # An OPTIONS that is no preflight is still the document's JSON 405.
    plain = httpx.options(gateway.url + path)
    assert plain.status_code == 405 and "GET" in plain.headers["allow"]
    assert plain.headers["x-request-id"] in plain.text


def test_a_list_of_origins_echoes_the_matching_one(backend, inprocess_factory, tmp_path):
    config = aidre_gateway_config(backend, tmp_path, service=SERVICE,
                                  ai_endpoint={"capabilities": []},
                                  discovery={"cors_origins": ["https://agent.example"]})
    listed = inprocess_factory(config)
    for path in ("/.well-known/ai", "/.well-known/ai-discovery"):
        allowed = httpx.get(listed.url + path, headers={"origin": "https://agent.example"})
        assert allowed.headers["access-control-allow-origin"] == "https://agent.example"
        assert "origin" in allowed.headers.get_list("vary") or \
            "origin" in allowed.headers["vary"].lower()
        other = httpx.get(listed.url + path, headers={"origin": "https://evil.example"})
        assert other.status_code == 200
        assert "access-control-allow-origin" not in other.headers
    refused = httpx.options(listed.url + "/.well-known/ai",
                            headers={**PREFLIGHT, "origin": "https://evil.example"})
    assert "access-control-allow-methods" not in refused.headers
    assert "access-control-allow-origin" not in refused.headers


# --------------------------------------------------------------------------- HTTPS awareness


def test_without_public_base_url_urls_follow_a_trusted_proxy(backend, inprocess_factory,
                                                             tmp_path):
    config = aidre_gateway_config(backend, tmp_path, proxy={"trusted_proxies": ["127.0.0.1"]})
    del config["public_base_url"]
    config["auth"]["resource"] = "https://ai.example.com"
    behind = inprocess_factory(config)
    forwarded = {"x-forwarded-proto": "https", "x-forwarded-host": "ai.example.org"}
    document = httpx.get(behind.url + "/.well-known/ai-discovery", headers=forwarded).json()
    assert document["endpoints"]["search"] == "https://ai.example.org/search"
    assert document["endpoints"]["chunk"] == "https://ai.example.org/chunks/{id}"
    direct = httpx.get(behind.url + "/.well-known/ai-discovery").json()
    assert direct["endpoints"]["search"] == f"{behind.url}/search"


def test_the_nearest_trusted_hops_forwarded_values_win_and_caches_key_on_them(
        backend, inprocess_factory, tmp_path):
    config = aidre_gateway_config(backend, tmp_path, proxy={"trusted_proxies": ["127.0.0.1"]})
    del config["public_base_url"]
    config["auth"]["resource"] = "https://ai.example.com"
    behind = inprocess_factory(config)
    # A CDN that appends passes the client's own (spoofed) values on in front of its own.
    for forwarded in ([("x-forwarded-host", "evil.example, ai.example.org"),
                       ("x-forwarded-proto", "http, https")],
                      [("x-forwarded-host", "evil.example"), ("x-forwarded-host", "ai.example.org"),
                       ("x-forwarded-proto", "http"), ("x-forwarded-proto", "https")]):
        response = httpx.get(behind.url + "/.well-known/ai-discovery", headers=forwarded)
        assert response.json()["endpoints"]["search"] == "https://ai.example.org/search"
        varied = {name.strip().lower() for name in response.headers["vary"].split(",")}
        assert {"host", "x-forwarded-host", "x-forwarded-proto", "authorization"} <= varied


def test_forwarded_fields_from_an_untrusted_peer_are_ignored(backend, inprocess_factory,
                                                             tmp_path):
    config = aidre_gateway_config(backend, tmp_path)
    del config["public_base_url"]
    config["auth"]["resource"] = "https://ai.example.com"
    direct = inprocess_factory(config)
    forged = {"x-forwarded-proto": "https", "x-forwarded-host": "evil.example",
              "host": "bad host/x"}
    document = httpx.get(direct.url + "/.well-known/ai-discovery", headers=forged).json()
    assert document["endpoints"]["search"] == f"{direct.url}/search"


# --------------------------------------------------------------------------- /.well-known/ai

COMPACT = re.compile(r"^(string|integer|number|boolean|array), (required|optional)(, [^—]+)?"
                     r"( — .+)?$")


def test_the_ai_document_describes_aidre_search_in_the_compact_pattern(gateway: Gateway):
    document = httpx.get(gateway.url + "/.well-known/ai").json()
    search = next(c for c in document["capabilities"] if c["id"] == "aidre_search")
    assert {"query", "query_vector", "embedding_space", "collection", "top_k"} <= \
        set(search["params"])
    for name, description in search["params"].items():
        assert COMPACT.match(description), (name, description)
    assert "wordllama-l2_supercat-256" in search["params"]["embedding_space"]
    assert "staff" not in str(search)  # a private collection is not named in public
    chunk = next(c for c in document["capabilities"] if c["id"] == "aidre_chunk")
    assert chunk["endpoint"] == "/chunks/{id}"
