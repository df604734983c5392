"""The demo OAuth issuer (over real HTTP), its key file, `aigw token`, and tests/fake_idp.py."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import jwt
import pytest
import yaml
from processes import ROOT, Process, free_port, wait_for_http

import gateway.demo.issuer as issuer_module
from gateway.auth.config import DemoIssuer
from gateway.demo.issuer import create_issuer_app
from gateway.demo.keys import load_or_create_key, public_jwks
from gateway.demo.token_command import add_token_parser
from gateway.demo.tokens import mint_token

AUDIENCE = "aigw-demo"
CLIENTS = {
    "agent": {"secret": "s3cret", "scopes": ["articles:read", "messages:read"]},
    "owner-app": {"secret": "s3cret2", "scopes": ["articles:read"], "kind": "owner"},
    "legacy": {"secret": "s3cret3", "scopes": ["articles:read"], "token_format": "opaque",
               "grant": {"articles": ["id", "title"]}},
    "grantee": {"secret": "s3cret4", "scopes": ["messages:read"],
                "grant": {"messages": ["id", "subject"], "articles": "*"}},
    "odd": {"secret": "p+a/ss:w%20rd", "scopes": ["articles:read"]},
    "signin": {"secret": "s3cret5", "scopes": ["articles:read"], "subject": "u-002",
               "redirect_uris": ["http://127.0.0.1:9/cb"]},
}
GRANT_DETAILS = [{"type": "pdpp_grant", "streams": [
    {"name": "messages", "fields": ["id", "subject"]}, {"name": "articles", "fields": "*"}]}]


@dataclass
class Issuer:
    url: str
    config: Path
    key_file: Path
    process: Process


def issuer_config(folder: Path, port: int) -> Path:
    config = {
        "upstreams": {"legacy": {"url": "http://127.0.0.1:9"}},
        "demo": {"issuer": {"url": f"http://127.0.0.1:{port}", "port": port,
                            "key_file": "keys/issuer.jwk.json", "audience": AUDIENCE,
                            "clients": CLIENTS}},
    }
    path = folder / "gateway.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory, logs_dir: Path) -> Iterator[Issuer]:
    port = free_port()
    config = issuer_config(tmp_path_factory.mktemp("issuer"), port)
    process = Process([sys.executable, "-m", "gateway.demo.issuer", "--config", str(config)],
                      logs_dir, f"issuer-{port}")
    url = f"http://127.0.0.1:{port}"
    wait_for_http(url + "/.well-known/jwks.json", process=process.popen)
    yield Issuer(url, config, config.parent / "keys" / "issuer.jwk.json", process)
    process.stop()


def get_token(issuer: Issuer, client: str, **form: str) -> httpx.Response:
    form.setdefault("grant_type", "client_credentials")
    auth = (client, CLIENTS[client]["secret"])
    return httpx.post(issuer.url + "/token", data=form, auth=auth)


def access_token(issuer: Issuer, client: str, **form: str) -> str:
    response = get_token(issuer, client, **form)
    assert response.status_code == 200, response.text
    return response.json()["access_token"]


def verify(issuer: Issuer, token: str) -> dict[str, Any]:
    """The token's claims, verified with pyjwt against the JWKS the issuer serves."""
    return verify_for(issuer, token, AUDIENCE)


def verify_for(issuer: Issuer, token: str, audience: str) -> dict[str, Any]:
    keys = jwt.PyJWKSet.from_dict(httpx.get(issuer.url + "/.well-known/jwks.json").json())
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(key for key in keys.keys if key.key_id == kid)
    return jwt.decode(token, key.key, algorithms=["RS256"], audience=audience,
                      issuer=issuer.url, options={"require": ["exp", "iat", "nbf", "jti"]})


def introspect(issuer: Issuer, token: str, auth: tuple[str, str] | None = ("agent", "s3cret"),
               ) -> httpx.Response:
    return httpx.post(issuer.url + "/introspect", data={"token": token}, auth=auth)


def rfc7638_thumbprint(jwk: dict[str, Any]) -> str:
    canonical = json.dumps({k: jwk[k] for k in ("e", "kty", "n")}, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_metadata_and_jwks(issuer: Issuer) -> None:
    meta = httpx.get(issuer.url + "/.well-known/oauth-authorization-server").json()
    assert meta["issuer"] == issuer.url
    assert meta["token_endpoint"] == issuer.url + "/token"
    assert meta["introspection_endpoint"] == issuer.url + "/introspect"
    assert meta["grant_types_supported"] == ["client_credentials", "authorization_code"]
    assert meta["authorization_endpoint"] == issuer.url + "/authorize"
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["token_endpoint_auth_methods_supported"] == ["client_secret_basic",
                                                             "client_secret_post"]
    assert meta["scopes_supported"] == ["articles:read", "messages:read"]
    response = httpx.get(meta["jwks_uri"])
    assert response.headers["cache-control"] == "public, max-age=300"
    [key] = response.json()["keys"]
    assert key["alg"] == "RS256" and key["use"] == "sig" and key["kty"] == "RSA"
    assert "d" not in key and "p" not in key
    assert key["kid"] == rfc7638_thumbprint(key)


def test_client_credentials_with_basic_auth_issues_a_verifiable_jwt(issuer: Issuer) -> None:
    response = get_token(issuer, "agent")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["pragma"] == "no-cache"
    body = response.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600
    assert body["scope"] == "articles:read messages:read"
    claims = verify(issuer, body["access_token"])
    assert claims["iss"] == issuer.url and claims["aud"] == AUDIENCE
    assert claims["sub"] == claims["client_id"] == "agent"
    assert claims["scope"] == "articles:read messages:read"
    assert claims["pdpp_token_kind"] == "client"
    assert claims["exp"] - claims["iat"] == 3600
    assert "authorization_details" not in claims


def test_form_auth_and_a_narrower_scope(issuer: Issuer) -> None:
    form = {"grant_type": "client_credentials", "client_id": "owner-app",
            "client_secret": "s3cret2", "scope": "articles:read"}
    response = httpx.post(issuer.url + "/token", data=form)
    assert response.status_code == 200
    claims = verify(issuer, response.json()["access_token"])
    assert claims["sub"] == "owner-app" and claims["pdpp_token_kind"] == "owner"
    narrow = verify(issuer, access_token(issuer, "agent", scope="messages:read"))
    assert narrow["scope"] == "messages:read"


def test_basic_credentials_are_compared_as_sent(issuer: Issuer) -> None:
    assert verify(issuer, access_token(issuer, "odd"))["sub"] == "odd"
    decoded = httpx.post(issuer.url + "/token", data={"grant_type": "client_credentials"},
                         auth=("odd", "p a/ss:w rd"))
    assert decoded.status_code == 401


def test_a_client_grant_becomes_authorization_details(issuer: Issuer) -> None:
    claims = verify(issuer, access_token(issuer, "grantee"))
    assert claims["authorization_details"] == GRANT_DETAILS


@pytest.mark.parametrize(("client", "secret", "form", "status", "error"), [
    ("agent", "wrong", {}, 401, "invalid_client"),
    ("nobody", "s3cret", {}, 401, "invalid_client"),
    ("agent", "s3cret", {"scope": "articles:read admin"}, 400, "invalid_scope"),
    ("owner-app", "s3cret2", {"scope": "messages:read"}, 400, "invalid_scope"),
    ("agent", "s3cret", {"grant_type": "password"}, 400, "unsupported_grant_type"),
    ("agent", "s3cret", {"grant_type": ""}, 400, "unsupported_grant_type"),
])
def test_token_errors(issuer: Issuer, client: str, secret: str, form: dict[str, str],
                      status: int, error: str) -> None:
    data = {"grant_type": "client_credentials", **form}
    response = httpx.post(issuer.url + "/token", data=data, auth=(client, secret))
    assert response.status_code == status
    assert response.json()["error"] == error and response.json()["error_description"]
    assert response.headers["cache-control"] == "no-store"
    if status == 401:
        assert response.headers["www-authenticate"] == 'Basic realm="aigw-demo"'


VERIFIER = "v" * 64
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(
    b"=").decode()
SIGN_IN = {"response_type": "code", "client_id": "signin", "redirect_uri": "http://127.0.0.1:9/cb",
           "state": "st-1", "code_challenge": CHALLENGE, "code_challenge_method": "S256"}


def authorized(issuer: Issuer, **changes: str) -> dict[str, str]:
    """What /authorize redirected to the client with."""
    answer = httpx.get(issuer.url + "/authorize", params={**SIGN_IN, **changes})
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert location.startswith(SIGN_IN["redirect_uri"] + "?")
    return dict(parse_qsl(urlsplit(location).query))


def redeemed(issuer: Issuer, code: str, **changes: str) -> httpx.Response:
    form = {"grant_type": "authorization_code", "code": code, "code_verifier": VERIFIER,
            "redirect_uri": SIGN_IN["redirect_uri"], **changes}
    return httpx.post(issuer.url + "/token", data=form, auth=("signin", "s3cret5"))


def test_the_authorization_code_grant_with_pkce_and_a_resource(issuer: Issuer) -> None:
    sent = authorized(issuer, resource="https://api.example.com/mcp",
                      scope="articles:read messages:read")
    assert sent["state"] == "st-1" and sent["iss"] == issuer.url
    answer = redeemed(issuer, sent["code"])
    assert answer.status_code == 200, answer.text
    assert answer.json()["scope"] == "articles:read"  # the requested scopes it has
    claims = verify_for(issuer, answer.json()["access_token"], "https://api.example.com/mcp")
    assert claims["sub"] == "u-002" and claims["client_id"] == "signin"
    again = redeemed(issuer, sent["code"])  # a code is good once
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    plain = redeemed(issuer, authorized(issuer)["code"])
    assert verify(issuer, plain.json()["access_token"])["aud"] == AUDIENCE


@pytest.mark.parametrize(("changes", "error"), [
    ({"code_verifier": "w" * 64}, "invalid_grant"),
    ({"redirect_uri": "http://127.0.0.1:9/other"}, "invalid_grant"),
    ({"resource": "https://other.example.com/"}, "invalid_target"),
])
def test_a_code_exchange_must_match_its_authorization(issuer: Issuer, changes: dict[str, str],
                                                      error: str) -> None:
    code = authorized(issuer, resource="https://api.example.com/mcp")["code"]
    answer = redeemed(issuer, code, **changes)
    assert answer.status_code == 400 and answer.json()["error"] == error


@pytest.mark.parametrize(("changes", "error"), [
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"code_challenge": "short"}, "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
    ({"resource": "https://api.example.com/mcp#frag"}, "invalid_target"),
    ({"resource": "/mcp"}, "invalid_target"),
    ({"scope": "admin"}, "invalid_scope"),
])
def test_authorization_errors_are_redirected(issuer: Issuer, changes: dict[str, str],
                                             error: str) -> None:
    sent = authorized(issuer, **changes)
    assert sent["error"] == error and sent["state"] == "st-1" and "code" not in sent


@pytest.mark.parametrize("changes", [{"client_id": "agent"}, {"client_id": "nobody"},
                                     {"redirect_uri": "https://evil.example.com/cb"}])
def test_an_unregistered_redirect_is_never_followed(issuer: Issuer,
                                                    changes: dict[str, str]) -> None:
    answer = httpx.get(issuer.url + "/authorize", params={**SIGN_IN, **changes})
    assert answer.status_code == 400 and "location" not in answer.headers
    assert answer.json()["error"] == "invalid_request"


def test_token_requests_need_a_form_body_and_client_auth(issuer: Issuer) -> None:
    no_auth = httpx.post(issuer.url + "/token", data={"grant_type": "client_credentials"})
    assert no_auth.status_code == 401 and no_auth.json()["error"] == "invalid_client"
    as_json = httpx.post(issuer.url + "/token", json={"grant_type": "client_credentials"},
                         auth=("agent", "s3cret"))
    assert as_json.status_code == 400 and as_json.json()["error"] == "invalid_request"


def test_introspection_of_a_jwt(issuer: Issuer) -> None:
    token = access_token(issuer, "grantee")
    response = introspect(issuer, token, auth=("owner-app", "s3cret2"))
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    answer = response.json()
    claims = verify(issuer, token)
    assert answer == {
        "active": True, "token_type": "Bearer", "scope": "messages:read",
        "client_id": "grantee", "sub": "grantee", "subject_id": "grantee",
        "exp": claims["exp"], "iat": claims["iat"], "iss": issuer.url, "aud": AUDIENCE,
        "pdpp_token_kind": "client", "authorization_details": GRANT_DETAILS,
    }


def test_introspection_of_an_opaque_token(issuer: Issuer) -> None:
    response = get_token(issuer, "legacy")
    token = response.json()["access_token"]
    assert "." not in token and len(token) >= 43
    assert response.json()["scope"] == "articles:read"
    answer = introspect(issuer, token).json()
    assert answer["active"] is True
    assert answer["client_id"] == answer["sub"] == answer["subject_id"] == "legacy"
    assert answer["scope"] == "articles:read" and answer["iss"] == issuer.url
    assert answer["exp"] - answer["iat"] == 3600
    assert answer["authorization_details"] == [{"type": "pdpp_grant", "streams": [
        {"name": "articles", "fields": ["id", "title"]}]}]


def test_introspection_of_tokens_that_are_not_active(issuer: Issuer) -> None:
    own_key = load_or_create_key(issuer.key_file)
    other_key = load_or_create_key(issuer.key_file.parent.parent / "other.jwk.json")
    options: dict[str, Any] = {"issuer": issuer.url, "audience": AUDIENCE, "subject": "x",
                               "client_id": None, "scopes": [], "kind": "client",
                               "grant": None}
    expired = mint_token(own_key, ttl=-30, **options)
    foreign = mint_token(other_key, ttl=300, **options)
    wrong_issuer = mint_token(own_key, ttl=300, **{**options, "issuer": "http://elsewhere"})
    for token in (expired, foreign, wrong_issuer, "garbage", "a.b.c", "eyJhbGciOi.e30.", ""):
        response = introspect(issuer, token)
        assert response.status_code == 200 and response.json() == {"active": False}, token
    assert introspect(issuer, mint_token(own_key, ttl=300, **options)).json()["active"]


def test_introspection_requires_client_auth(issuer: Issuer) -> None:
    token = access_token(issuer, "agent")
    for auth in (None, ("agent", "nope")):
        response = introspect(issuer, token, auth=auth)
        assert response.status_code == 401 and response.json()["error"] == "invalid_client"
    missing = httpx.post(issuer.url + "/introspect", data={}, auth=("agent", "s3cret"))
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"


def test_issuer_logs_hold_no_tokens_or_secrets(issuer: Issuer) -> None:
    tokens = [access_token(issuer, "agent"), access_token(issuer, "legacy")]
    logs = issuer.process.stdout() + issuer.process.stderr()
    assert "POST /token" in logs
    for secret in [*tokens, *(client["secret"] for client in CLIENTS.values())]:
        assert secret not in logs


async def test_opaque_tokens_expire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = DemoIssuer.model_validate({"url": "http://issuer.test", "key_file": "unused",
                                          "clients": {"legacy": CLIENTS["legacy"]}})
    app = create_issuer_app(settings, load_or_create_key(tmp_path / "key.json"))
    transport = httpx.ASGITransport(app=app)
    auth = ("legacy", "s3cret3")
    async with httpx.AsyncClient(transport=transport, base_url="http://issuer.test") as client:
        issued = await client.post("/token", data={"grant_type": "client_credentials"}, auth=auth)
        form = {"token": issued.json()["access_token"]}
        assert (await client.post("/introspect", data=form, auth=auth)).json()["active"]
        later = issuer_module.time.time() + settings.ttl + 1
        monkeypatch.setattr(issuer_module, "time", SimpleNamespace(time=lambda: later))
        answer = await client.post("/introspect", data=form, auth=auth)
    assert answer.json() == {"active": False}


def test_key_file_is_created_private_once_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "issuer.jwk.json"
    key = load_or_create_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text())
    assert "d" in stored and stored["kid"] == key.kid == rfc7638_thumbprint(stored)
    assert load_or_create_key(path).kid == key.kid
    assert path.read_text() == json.dumps(stored)
    assert [p.name for p in path.parent.iterdir()] == ["issuer.jwk.json"]
    [public] = public_jwks(key)["keys"]
    assert public["kid"] == key.kid and "d" not in public


def test_the_running_issuer_keeps_its_key_private(issuer: Issuer) -> None:
    assert stat.S_IMODE(issuer.key_file.stat().st_mode) == 0o600
    served = httpx.get(issuer.url + "/.well-known/jwks.json").json()["keys"][0]["kid"]
    assert served == json.loads(issuer.key_file.read_text())["kid"]


def test_a_public_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "public.json"
    path.write_text(json.dumps(public_jwks(load_or_create_key(tmp_path / "k.json"))["keys"][0]))
    with pytest.raises(ValueError, match="private RSA JWK"):
        load_or_create_key(path)


def run_token_command(*options: str) -> int:
    parser = argparse.ArgumentParser(prog="aigw")
    add_token_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["token", *options])
    return args.handler(args)


def test_token_command_defaults(issuer: Issuer, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_token_command("--config", str(issuer.config)) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    claims = verify(issuer, out.strip())
    assert claims["sub"] == "demo-user" and claims["client_id"] == "demo-cli"
    assert claims["scope"] == "" and claims["pdpp_token_kind"] == "client"
    assert claims["exp"] - claims["iat"] == 3600
    assert "authorization_details" not in claims


def test_token_command_options(issuer: Issuer, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    grant_file = tmp_path / "grant.json"
    grant_file.write_text('{"messages": ["id", "subject"], "articles": "*"}')
    code = run_token_command("--config", str(issuer.config), "--sub", "alice", "--client-id",
                             "cli", "--scope", "articles:read messages:read", "--owner",
                             "--grant", f"@{grant_file}", "--ttl", "120")
    assert code == 0
    claims = verify(issuer, capsys.readouterr().out.strip())
    assert claims["sub"] == "alice" and claims["client_id"] == "cli"
    assert claims["scope"] == "articles:read messages:read"
    assert claims["pdpp_token_kind"] == "owner"
    assert claims["authorization_details"] == GRANT_DETAILS
    assert claims["exp"] - claims["iat"] == 120
    run_token_command("--config", str(issuer.config), "--grant", '{"articles": ["id"]}')
    inline = verify(issuer, capsys.readouterr().out.strip())
    assert inline["authorization_details"][0]["streams"] == [{"name": "articles",
                                                              "fields": ["id"]}]


@pytest.mark.parametrize("grant", ['{"articles": ', '["articles"]', '{"articles": "all"}',
                                   '{"articles": [1]}', "@/nonexistent/grant.json"])
def test_token_command_bad_grant(issuer: Issuer, grant: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert run_token_command("--config", str(issuer.config), "--grant", grant) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("--grant: ")


def test_without_demo_issuer_both_commands_exit_1(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "plain.yaml"
    config.write_text(yaml.safe_dump({"upstreams": {"legacy": {"url": "http://127.0.0.1:9"}}}))
    with pytest.raises(SystemExit) as exited:
        run_token_command("--config", str(config))
    assert exited.value.code == 1 and "demo.issuer" in capsys.readouterr().err
    result = subprocess.run([sys.executable, "-m", "gateway.demo.issuer", "--config", str(config)],
                            cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and "demo.issuer" in result.stderr


@pytest.fixture(scope="module")
def fake_idp(logs_dir: Path) -> Iterator[str]:
    port = free_port()
    process = Process([sys.executable, str(ROOT / "tests" / "fake_idp.py"), str(port), "gw",
                       "gw-secret"], logs_dir, f"fake-idp-{port}")
    url = f"http://127.0.0.1:{port}"
    wait_for_http(url + "/admin/stats", process=process.popen)
    yield url
    process.stop()


def test_fake_idp_admin_endpoints(fake_idp: str, tmp_path: Path) -> None:
    httpx.post(fake_idp + "/admin/reset")
    initial = httpx.get(fake_idp + "/jwks")
    assert initial.json() == {"keys": []} and initial.headers["cache-control"] == "max-age=300"
    jwks = public_jwks(load_or_create_key(tmp_path / "k.json"))
    httpx.post(fake_idp + "/admin/jwks", json={**jwks, "max_age": 7})
    served = httpx.get(fake_idp + "/jwks")
    assert served.json() == jwks and served.headers["cache-control"] == "max-age=7"
    httpx.post(fake_idp + "/admin/tokens", json={"tok-1": {"active": True, "sub": "u1"}})
    httpx.post(fake_idp + "/admin/tokens", json={"tok-2": {"active": True, "sub": "u2"}})
    url, auth = fake_idp + "/introspect", ("gw", "gw-secret")
    assert httpx.post(url, data={"token": "tok-1"}, auth=auth).json()["sub"] == "u1"
    assert httpx.post(url, data={"token": "tok-2"}, auth=auth).json()["sub"] == "u2"
    assert httpx.post(url, data={"token": "nope"}, auth=auth).json() == {"active": False}
    assert httpx.post(url, data={"token": "tok-1"}, auth=("gw", "bad")).status_code == 401
    httpx.post(fake_idp + "/admin/down", json={"down": True})
    assert httpx.get(fake_idp + "/jwks").status_code == 503
    assert httpx.post(url, data={"token": "tok-1"}, auth=auth).status_code == 503
    httpx.post(fake_idp + "/admin/down", json={"down": False})
    assert httpx.get(fake_idp + "/jwks").status_code == 200
    stats = httpx.get(fake_idp + "/admin/stats").json()
    assert stats == {"jwks_fetches": 4, "introspections": 5}
    httpx.post(fake_idp + "/admin/reset")
    assert httpx.get(fake_idp + "/admin/stats").json() == {"jwks_fetches": 0,
                                                           "introspections": 0}
    assert httpx.get(fake_idp + "/jwks").json() == {"keys": []}
