"""A path under a prefix a spec surface owns is answered by that surface, in its dialect, and
never reaches the passthrough: an upstream that counts what it receives proves that no
encoding slips a request past the route's authentication."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import httpx
import pytest
from aidre_config import aidre_gateway_config
from inprocess import InProcessGateway
from processes import Gateway, start_echo

SURFACE_PREFIXES = ["/chunks", "/search", "/collections", "/.well-known/ai-discovery"]
# Each stands for a family: control characters, a trailing newline, encoded and overlong dots,
# `;` parameters, doubled slashes, extra segments.
SUFFIXES = [
    "/x%0Ay", "/articles:art-0001%0A", "%0A", "/x%00", "/x%7F", "/x%1F", "/%2e%2e/x",
    "/%2E%2E", "/%C0%AE%C0%AE/x", "/%c0%af", ";x", "/x;y", ";a=b/x", "//x", "/x//y", "/x",
    "/articles:art-0001/extra", "%09", "/x%20y",
]


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process, url = start_echo(tmp_path_factory.mktemp("recorder"), "recorder")
    yield url
    process.stop()


@pytest.fixture(scope="module")
def gateway(backend: str, recorder: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """AIDRE over the demo backend; everything else passes through to the recorder, which
    needs authentication; the AIDRE prefixes are public for AIDRE's own handlers."""
    workdir = tmp_path_factory.mktemp("ownership")
    config = aidre_gateway_config(backend, workdir)
    config["upstreams"]["recorder"] = {"url": recorder}
    config["default_upstream"] = "recorder"
    config["auth"]["default_access"] = "authenticated"
    config["auth"]["routes"] = [{"path": prefix, "public": True}
                                for prefix in ["/chunks", "/search", "/collections"]]
    config["service"] = {"name": "Ownership test", "description": "Paths and owners."}
    config["ai_endpoint"] = {}
    started = InProcessGateway(config, workdir)
    yield started
    started.stop()


def _recorded(recorder: str) -> int:
    return httpx.get(recorder + "/count").json()["others"]


def _raw(gateway: Gateway, method: str, path: str,
         headers: dict[str, str] | None = None) -> tuple[int, dict, http.client.HTTPResponse]:
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    try:  # byte for byte: httpx would normalise the path before sending it
        connection.request(method, path, body=b"{}" if method == "POST" else None,
                           headers={"content-type": "application/json", **(headers or {})})
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    return response.status, json.loads(body) if body else {}, response


def test_the_recorder_counts_what_passes_through(gateway: Gateway, recorder: str):
    before = _recorded(recorder)
    assert httpx.get(gateway.url + "/api/anything").status_code == 401
    assert _recorded(recorder) == before
    allowed = httpx.get(gateway.url + "/api/anything", headers={"x-api-key": "reader-key"})
    assert allowed.status_code == 200 and allowed.json()["upstream"] == "recorder"
    assert _recorded(recorder) == before + 1


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("prefix", SURFACE_PREFIXES)
def test_no_encoding_under_a_surface_prefix_reaches_the_passthrough(
        gateway: Gateway, recorder: str, prefix: str, method: str):
    before = _recorded(recorder)
    for suffix in SUFFIXES:
        status, body, _ = _raw(gateway, method, prefix + suffix)
        assert status in (400, 404, 405), (prefix + suffix, status, body)
        # AIDRE's dialect (§17): a string code, a message and the request id
        assert isinstance(body["error"], str) and body["request_id"], (prefix + suffix, body)
    assert _recorded(recorder) == before


@pytest.mark.parametrize("path", ["/chunks/x%0Ay", "/chunks/articles:art-0001%0A",
                                  "/search%00", "/collections%7F"])
def test_control_characters_are_refused_before_routing(gateway: Gateway, path: str):
    status, body, _ = _raw(gateway, "GET", path)
    assert status == 400
    assert (body["error"], body["details"]["reason"]) == ("invalid_request", "invalid_path")


def test_a_trailing_newline_never_names_a_real_chunk(gateway: Gateway):
    assert _raw(gateway, "GET", "/chunks/articles:art-0001")[0] == 200
    status, body, _ = _raw(gateway, "GET", "/chunks/articles:art-0001%0A")
    assert status == 400 and "text" not in body


@pytest.mark.parametrize("path", ["/CHUNKS/x%0Ay", "/Search", "/chunksx/y", "/collections-x"])
def test_paths_outside_the_prefixes_need_the_passthrough_auth(gateway: Gateway, recorder: str,
                                                               path: str):
    before = _recorded(recorder)
    status, body, _ = _raw(gateway, "GET", path)
    assert status in (400, 401)
    assert body["error"]["code"] in ("invalid_path", "missing_credentials")  # gateway dialect
    assert _recorded(recorder) == before


def test_unmatched_paths_and_methods_get_the_owners_404_and_405(gateway: Gateway):
    status, body, _ = _raw(gateway, "GET", "/chunks")
    assert (status, body["error"]) == (404, "not_found")
    status, body, response = _raw(gateway, "GET", "/search")
    assert (status, body["error"]) == (405, "invalid_request")
    assert response.getheader("allow") == "POST"


@pytest.mark.parametrize("path", ["/.well-known/ai", "/ai",
                                  "/.well-known/oauth-protected-resource"])
def test_a_405_on_a_document_has_a_json_body_and_allow(gateway: Gateway, path: str):
    status, body, response = _raw(gateway, "POST", path)
    assert status == 405
    assert response.getheader("allow") == "GET, HEAD"
    assert body["error"]["code"] == "method_not_allowed" and body["error"]["request_id"]


def test_invalid_path_on_a_passthrough_path_keeps_the_gateway_dialect(gateway: Gateway):
    status, body, _ = _raw(gateway, "GET", "/api/x%0A")
    assert status == 400 and body["error"]["code"] == "invalid_path"

