"""Tokens for the MCP resource (RFC 8707): an MCP client asks its authorization server for a
token to the resource `/.well-known/oauth-protected-resource/mcp` names, and the gateway
accepts it there, and only there. Shown with the official MCP SDK client doing the whole
OAuth flow (metadata discovery, authorization code with PKCE, `resource`) against the demo
issuer, all of them processes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import jwt
import pytest
import yaml
from idp_helpers import AUDIENCE, running_idp
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from processes import Gateway, Process, free_port, wait_for_http
from test_mcp import KEY, demo_config, policies

CALLBACK = "http://127.0.0.1:9/callback"  # never reached: the test reads the redirect
APP = {"secret": "mcp-app-secret", "subject": "u-001", "redirect_uris": [CALLBACK],
       "scopes": ["articles:read", "messages:read", "tasks:run"]}
SCOPES = ["articles:read", "messages:read"]
HEADERS = {"accept": "application/json, text/event-stream"}


@dataclass
class Deployment:
    gateway: Gateway
    issuer_port: int  # the demo issuer's, which the gateway trusts (started by `demo_issuer`)


@pytest.fixture(scope="module")
def deployment(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The demo config's gateway (its own URL as public_base_url), trusting the test IdP
    (tokens of any audience are minted there) and the demo issuer."""
    workdir = tmp_path_factory.mktemp("mcp-oauth")
    issuer_port = free_port()
    with running_idp(workdir) as idp:
        idp.publish(KEY)
        config = demo_config(backend, idp.url, policies(workdir))
        issuer = f"http://127.0.0.1:{issuer_port}"
        config["auth"]["issuers"].append({"issuer": issuer, "audiences": ["aigw-demo"],
                                          "jwks_uri": issuer + "/.well-known/jwks.json"})
        gateway = Gateway(config, workdir, public=True)
        yield Deployment(gateway, issuer_port)
        gateway.stop()


@pytest.fixture(scope="module")
def demo_issuer(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[str]:
    """`aigw demo`'s issuer, with a client that signs in (authorization code and PKCE)."""
    port = deployment.issuer_port
    folder = tmp_path_factory.mktemp("demo-issuer")
    config = {**deployment.gateway.config, "demo": {"issuer": {
        "url": f"http://127.0.0.1:{port}", "port": port, "key_file": "issuer.jwk",
        "audience": "aigw-demo", "clients": {"mcp-app": APP}}}}
    path = folder / "issuer.yaml"
    path.write_text(yaml.safe_dump(config))
    process = Process([sys.executable, "-m", "gateway.demo.issuer", "--config", str(path)],
                      folder, f"issuer-{port}")
    url = f"http://127.0.0.1:{port}"
    wait_for_http(url + "/.well-known/jwks.json", process=process.popen)
    yield url
    process.stop()


def minted(audience: str | list[str]) -> str:
    return KEY.token(aud=audience, scope=" ".join(SCOPES), sub="u-001", client_id="mcp-app")


def rpc(url: str, token: str, method: str = "tools/list",
        params: dict[str, Any] | None = None) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    return httpx.post(url, json=body, headers={**HEADERS, "authorization": f"Bearer {token}"})


def refused_as_not_ours(answer: httpx.Response) -> bool:
    return answer.status_code == 401 and \
        "The token is not meant for this resource." in answer.headers["www-authenticate"]


def aidre_search(url: str, token: str) -> httpx.Response:
    return httpx.post(url + "/search", json={"query": "password"},
                      headers={"authorization": f"Bearer {token}"})


def test_a_token_for_the_mcp_resource_is_good_there_and_only_there(deployment):
    url = deployment.gateway.url
    metadata = httpx.get(url + "/.well-known/oauth-protected-resource/mcp").json()
    assert metadata["resource"] == url + "/mcp"
    for_mcp = minted(metadata["resource"])
    listed = rpc(url + "/mcp", for_mcp)
    assert listed.status_code == 200, listed.text
    assert "aidre_search" in {tool["name"] for tool in listed.json()["result"]["tools"]}
    # A tool call's inner request (to /search) is made for the MCP resource's caller.
    called = rpc(url + "/mcp", for_mcp, "tools/call",
                 {"name": "aidre_search", "arguments": {"query": "reset my password"}})
    assert called.status_code == 200 and not called.json()["result"].get("isError"), called.text
    # Everywhere else it is no key: the surfaces, the legacy API, the other MCP endpoints.
    assert refused_as_not_ours(aidre_search(url, for_mcp))
    assert refused_as_not_ours(httpx.get(url + "/api/v1/articles",
                                         headers={"authorization": f"Bearer {for_mcp}"}))
    assert refused_as_not_ours(rpc(url + "/mcp/pdpp", for_mcp))
    for_pdpp = minted(url + "/mcp/pdpp")
    records = rpc(url + "/mcp/pdpp", for_pdpp, "tools/call",
                  {"name": "query_records", "arguments": {"stream": "messages", "limit": 2}})
    assert records.status_code == 200 and not records.json()["result"].get("isError"), \
        records.text
    assert refused_as_not_ours(rpc(url + "/mcp", for_pdpp))
    # Tokens for the issuer's audience are good everywhere, as before.
    for audience in (AUDIENCE, [url + "/mcp", AUDIENCE]):
        general = minted(audience)
        assert aidre_search(url, general).status_code == 200
        assert rpc(url + "/mcp", general).status_code == 200
    assert aidre_search(url, minted("https://elsewhere.example/mcp")
                        ).status_code == 401


class _Storage:
    """The SDK's token storage, holding the client the demo issuer has registered."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client = OAuthClientInformationFull(
            client_id="mcp-app", client_secret=APP["secret"], redirect_uris=[CALLBACK],
            token_endpoint_auth_method="client_secret_post",
            grant_types=["authorization_code"])

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class _Browser:
    """Stands in for the user's browser: follows the authorization URL, and hands the SDK
    the code and state the issuer redirected to the callback with."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        async with httpx.AsyncClient() as http:
            answer = await http.get(authorization_url, follow_redirects=False)
        assert answer.status_code == 302, answer.text
        location = answer.headers["location"]
        assert location.startswith(CALLBACK + "?")
        sent = {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}
        assert "error" not in sent, sent
        self.result = AuthorizationCodeResult(code=sent["code"], state=sent.get("state"),
                                              iss=sent.get("iss"))
        self.asked = parse_qs(urlsplit(authorization_url).query)

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def test_the_sdk_client_signs_in_at_the_demo_issuer_and_calls_tools(deployment, demo_issuer):
    url = deployment.gateway.url + "/mcp"
    storage, browser = _Storage(), _Browser()
    provider = OAuthClientProvider(
        server_url=url, storage=storage, redirect_handler=browser.redirect,
        callback_handler=browser.callback,
        client_metadata=OAuthClientMetadata(redirect_uris=[CALLBACK],
                                            grant_types=["authorization_code"],
                                            token_endpoint_auth_method="client_secret_post"))

    async def session() -> tuple[set[str], Any]:
        async with httpx2.AsyncClient(auth=provider, timeout=30) as http, \
                Client(streamable_http_client(url, http_client=http)) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            return tools, await client.call_tool("aidre_search", {"query": "reset my password"})

    tools, found = asyncio.run(session())
    assert {"aidre_search", "pdpp_query_records"} <= tools
    assert not found.is_error, found.content
    assert found.structured_content["results"]
    # The SDK asked for the MCP resource (RFC 8707), and the token is for it alone.
    assert browser.asked["resource"] == [url] and browser.asked["code_challenge_method"] == ["S256"]
    assert storage.tokens is not None
    token = storage.tokens.access_token
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["aud"] == url and claims["sub"] == "u-001"
    assert set(claims["scope"].split()) <= set(APP["scopes"])
    assert refused_as_not_ours(aidre_search(deployment.gateway.url, token))


def test_the_mcp_resource_audiences_are_configurable(deployment):
    gateway, url = deployment.gateway, deployment.gateway.url
    for_mcp = minted(url + "/mcp")
    proxied = minted("https://mcp.example.com/mcp")
    assert rpc(url + "/mcp", proxied).status_code == 401
    original = gateway.config
    gateway.write_config({**original, "mcp": {**original["mcp"], "resource_audience": False,
                                              "audiences": ["https://mcp.example.com/mcp"]}})
    try:
        deadline = time.monotonic() + 60
        while rpc(url + "/mcp", for_mcp).status_code != 401:  # until the reload took
            assert time.monotonic() < deadline, "the config was not reloaded"
            time.sleep(0.1)
        assert rpc(url + "/mcp", proxied).status_code == 200
        assert rpc(url + "/mcp/pdpp", proxied).status_code == 200
        assert refused_as_not_ours(aidre_search(url, proxied))
    finally:
        gateway.write_config(original)
        deadline = time.monotonic() + 60
        while rpc(url + "/mcp", for_mcp).status_code != 200:
            assert time.monotonic() < deadline, "the config was not reloaded back"
            time.sleep(0.1)




def test_a_token_shown_at_another_resource_is_no_failed_authentication(deployment):
    """Refused, but not counted against the address (past auth.failure_limit, 30 a minute,
    a new token from it would be 429), and on a public document read as no credential."""
    url = deployment.gateway.url
    for_mcp = minted(url + "/mcp")
    for _ in range(35):
        assert refused_as_not_ours(aidre_search(url, for_mcp))
    assert httpx.get(url + "/.well-known/ai",
                     headers={"authorization": f"Bearer {for_mcp}"}).status_code == 200
    fresh = minted(AUDIENCE)  # not verified before: it goes through the failure limit
    assert aidre_search(url, fresh).status_code == 200


def test_where_a_token_may_be_used_follows_its_audiences():
    from gateway.auth.audiences import ResourceAudiences

    own = ResourceAudiences({"/mcp": ["https://gw.example/mcp", "https://proxy.example/mcp"],
                             "/mcp/pdpp": ["https://gw.example/mcp/pdpp"]})
    issuer = ["aigw"]
    mcp_only = own.limit("https://gw.example/mcp", issuer)
    assert mcp_only == frozenset({"/mcp"})
    assert own.admits(mcp_only, "/mcp") and not own.admits(mcp_only, "/mcp/pdpp")
    assert not own.admits(mcp_only, "/search") and not own.admits(mcp_only, "/mcpx")
    assert own.limit(["https://gw.example/mcp", "aigw"], issuer) is None  # good everywhere
    assert own.limit(["https://gw.example/mcp", "other"], issuer) == frozenset({"/mcp"})
    both = own.limit(["https://proxy.example/mcp", "https://gw.example/mcp/pdpp"], issuer)
    assert own.admits(both, "/mcp") and own.admits(both, "/mcp/pdpp")
    # Introspected tokens (no configured audience): only one meant for own resources alone
    # is limited; without an aud, or with another one, it is good everywhere as before.
    assert own.limit(None, None) is None and own.limit(["other"], None) is None
    assert own.limit(["https://gw.example/mcp", "other"], None) is None
    assert own.limit(["https://gw.example/mcp"], None) == frozenset({"/mcp"})
    assert ResourceAudiences().admits(None, "/anything")
    # An own resource's URL also listed among an issuer's audiences: good everywhere.
    assert own.limit(["https://gw.example/mcp"], [*issuer, "https://gw.example/mcp"]) is None
