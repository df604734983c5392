"""Authentication over real HTTP: client -> aigw -> echo upstream, with a real JWKS and
introspection endpoint served by tests/fake_idp.py on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aidre_config import aidre_gateway_config
from idp_helpers import (
    AUDIENCE,
    ISSUER,
    FakeIdp,
    SigningKey,
    hs256_with_public_key,
    running_idp,
    unsigned_token,
)
from inprocess import InProcessGateway
from processes import Gateway

RESOURCE = "https://api.example.com"
METADATA = f"{RESOURCE}/.well-known/oauth-protected-resource"
API_KEY = "legacy-key-0123456789"
K1 = SigningKey.rsa("k1")
K2 = SigningKey.ec("k2")


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeIdp]:
    with running_idp(tmp_path_factory.mktemp("idp")) as started:
        yield started


def auth_config(idp: FakeIdp, echo: str, **auth_overrides: object) -> dict:
    auth = {
        "resource": RESOURCE,
        "issuers": [{
            "issuer": ISSUER, "jwks_uri": idp.url + "/jwks", "audiences": [AUDIENCE],
            "jwks_cache": {"min_ttl": 1, "max_ttl": 600, "refresh_cooldown": 1},
        }],
        "introspection": {"endpoint": idp.url + "/introspect", "client_id": "gw",
                          "client_secret": "gw-secret", "cache_ttl": 30},
        "api_keys": {"header": "X-API-Key", "keys": [{
            "sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "subject": "crm",
            "client_id": "crm", "scopes": ["articles:read"]}]},
        "routes": [
            {"path": "/public", "public": True},
            {"path": "/echo/articles", "scopes": ["articles:read"]},
            {"path": "/echo/messages", "scopes": ["messages:read"]},
        ],
        **auth_overrides,
    }
    return {"upstreams": {"legacy": {"url": echo}}, "default_upstream": "legacy", "auth": auth}


@pytest.fixture(scope="module")
def gateway(idp: FakeIdp, echo: str, tmp_path_factory) -> Iterator[Gateway]:
    idp.publish(K1)
    # Every bad-token case below comes from this one address; the limit has tests of its own.
    config = auth_config(idp, echo, failure_limit={"limit": "1000/minute"})
    started = InProcessGateway(config, tmp_path_factory.mktemp("auth"))
    yield started
    started.stop()


@pytest.fixture
def get(gateway: Gateway):
    def request(path: str, token: str | None = None, headers=None, **kwargs) -> httpx.Response:
        all_headers = list(headers.items() if isinstance(headers, dict) else headers or [])
        if token is not None:
            all_headers.append(("authorization", f"Bearer {token}"))
        return httpx.get(gateway.url + path, headers=all_headers, timeout=10, **kwargs)
    return request


def challenge(response: httpx.Response) -> str:
    return response.headers["www-authenticate"]


def assert_refused(response: httpx.Response, status: int, error: str | None) -> None:
    assert response.status_code == status, response.text
    value = challenge(response)
    assert value.startswith("Bearer ") and f'resource_metadata="{METADATA}"' in value
    if error is None:
        assert "error=" not in value
    else:
        assert f'error="{error}"' in value
    body = response.json()["error"]
    assert body["request_id"] == response.headers["x-request-id"]
    assert "Traceback" not in response.text


BAD_BEARERS = {
    "alg none": (unsigned_token, "invalid_token"),
    "HS256 signed with the RSA public key": (lambda: hs256_with_public_key(K1), "invalid_token"),
    "expired": (lambda: K1.token(exp=int(time.time()) - 120), "invalid_token"),
    "not yet valid": (lambda: K1.token(nbf=int(time.time()) + 600), "invalid_token"),
    "issued in the future": (lambda: K1.token(iat=int(time.time()) + 600), "invalid_token"),
    "wrong issuer": (lambda: K1.token(iss="https://evil.test"), "invalid_token"),
    "wrong audience": (lambda: K1.token(aud="someone-else"), "invalid_token"),
    "unknown kid": (lambda: K1.token(kid="nope"), "invalid_token"),
    "signed by an unpublished key": (lambda: SigningKey.rsa("k1").token(), "invalid_token"),
    "malformed base64": (lambda: "eyJhbGc.not-base64.x", "invalid_token"),
    "10 KB token": (lambda: "a" * 10240, "invalid_token"),
    "not a token68": (lambda: "bad token!", "invalid_request"),
    "unrecognised token kind": (lambda: K1.token(pdpp_token_kind="admin"), "invalid_token"),
    "token kind of the wrong type": (lambda: K1.token(pdpp_token_kind=["owner"]),
                                     "invalid_token"),
    "issuer that is not a string": (lambda: K1.token(iss=["https://idp.test"]), "invalid_token"),
    "exp as a numeric string": (lambda: K1.token(exp=str(int(time.time()) + 600)),
                                "invalid_token"),
    "iat as a boolean": (lambda: K1.token(iat=True), "invalid_token"),
    "details of the wrong shape": (lambda: K1.token(authorization_details=[{"type": ["x"]}],
                                                    pdpp_grant="x"), None),
}


@pytest.mark.parametrize("case", list(BAD_BEARERS))
def test_bad_bearer_tokens_get_401_with_a_challenge(get, case: str):
    make, error = BAD_BEARERS[case]
    response = get("/echo/articles", make())
    if error is None:  # odd but harmless claims: the token is honoured, never a 500
        assert response.status_code == 200
        return
    assert_refused(response, 401, error)


def test_a_token_of_an_unknown_issuer_is_refused_naming_that_issuer(get):
    response = get("/echo/articles", K1.token(iss="https://evil.test"))
    assert_refused(response, 401, "invalid_token")
    message = "The token's issuer 'https://evil.test' is not one this gateway trusts."
    assert response.json()["error"]["message"] == message
    assert f'error_description="{message}"' in challenge(response)


def test_an_unknown_issuer_is_quoted_short_and_in_safe_characters_only(get):
    hostile = 'https://evil.test/"\\\u00e9\x07' + "a" * 200 + "the-rest-of-the-claim"
    response = get("/echo/articles", K1.token(iss=hostile, sub="secret-subject"))
    assert_refused(response, 401, "invalid_token")
    message = response.json()["error"]["message"]
    quoted = message.removeprefix("The token's issuer '").removesuffix(
        "' is not one this gateway trusts.")
    assert quoted.startswith("https://evil.test/????a") and quoted.endswith("...")
    assert len(quoted) == 100 + len("...")
    assert "the-rest" not in message and "secret-subject" not in message
    assert f'error_description="{message}"' in challenge(response)


def test_two_authorization_headers_are_refused(get):
    headers = [("authorization", f"Bearer {K1.token()}"), ("authorization", "Bearer other")]
    assert_refused(get("/echo/articles", headers=headers), 401, "invalid_request")


def test_token_in_query_string_is_refused_by_default(get):
    response = get("/echo/articles", params={"access_token": K1.token()})
    assert_refused(response, 401, "invalid_request")


def test_token_in_query_string_when_config_allows_it(idp, echo, inprocess_factory):
    allowing = inprocess_factory(auth_config(idp, echo, allow_query_token=True))
    token = K1.token()
    response = httpx.get(allowing.url + "/echo/articles",
                         params=[("page", "2"), ("access_token", token), ("q", "x")])
    assert response.status_code == 200
    assert response.json()["query"] == "page=2&q=x"  # the token stays at the gateway


def test_missing_token_gets_a_bare_challenge(get):
    assert_refused(get("/echo/articles"), 401, None)
    assert get("/anything-else").status_code == 401  # unmatched paths fail closed


def test_valid_token_reaches_the_upstream_with_identity_but_without_the_token(get):
    token = K1.token(scope="articles:read extra:scope", pdpp_token_kind="owner")
    response = get("/echo/articles/1", token)
    assert response.status_code == 200
    received = dict(response.json()["headers"])
    assert "authorization" not in received
    assert received["x-aigw-subject"] == "alice"
    assert received["x-aigw-client-id"] == "agent-1"
    assert received["x-aigw-scopes"] == "articles:read extra:scope"
    assert received["x-aigw-token-kind"] == "owner"


def test_spoofed_identity_headers_are_removed(get):
    spoofed = [("x-aigw-subject", "root"), ("X-Aigw-Scopes", "admin"),
               ("x-aigw-token-kind", "owner"), ("X-Aigw_Subject", "root"),
               ("x_aigw_scopes", "admin")]
    anonymous = get("/public/x", headers=spoofed).json()
    assert not [h for h in anonymous["headers"] if h[0].replace("_", "-").startswith("x-aigw-")]
    authenticated = get("/echo/articles", K1.token(), headers=spoofed).json()
    received = [h for h in authenticated["headers"] if h[0].startswith("x-aigw-")]
    assert ["x-aigw-subject", "alice"] in received and ["x-aigw-subject", "root"] not in received
    assert ["x-aigw-scopes", "admin"] not in received


def test_scp_array_is_read_as_scopes(get):
    assert get("/echo/messages", K1.token(scope=None, scp=["messages:read"])).status_code == 200


def test_insufficient_scope_is_403_naming_the_scope(get):
    response = get("/echo/messages", K1.token(scope="articles:read"))
    assert_refused(response, 403, "insufficient_scope")
    assert 'scope="messages:read"' in challenge(response)
    assert response.json()["error"]["code"] == "insufficient_scope"


def test_public_routes_admit_anonymous_callers_but_still_check_tokens(get):
    assert get("/public/page").status_code == 200
    assert_refused(get("/public/page", K1.token(exp=int(time.time()) - 999)), 401,
                   "invalid_token")


def test_api_keys_map_to_a_principal(get):
    response = get("/echo/articles", headers={"x-api-key": API_KEY})
    assert response.status_code == 200
    received = dict(response.json()["headers"])
    assert received["x-aigw-subject"] == "crm" and "x-api-key" not in received
    assert_refused(get("/echo/articles", headers={"x-api-key": "wrong"}), 401, "invalid_token")
    assert get("/echo/messages", headers={"x-api-key": API_KEY}).status_code == 403


def test_bearer_and_api_key_together_are_ambiguous(get):
    response = get("/echo/articles", K1.token(), headers={"x-api-key": API_KEY})
    assert_refused(response, 401, "invalid_request")


def test_opaque_tokens_are_introspected_and_cached_briefly(idp: FakeIdp, get):
    idp.tokens({
        "opaque-active": {"active": True, "sub": "bob", "client_id": "crm", "scope":
                          "articles:read", "exp": int(time.time()) + 600,
                          "pdpp_token_kind": "client"},
        "opaque-revoked": {"active": False},
        "opaque-weird-kind": {"active": True, "sub": "eve", "scope": "articles:read",
                              "pdpp_token_kind": "superuser"},
    })
    before = idp.stats()["introspections"]
    for _ in range(3):
        response = get("/echo/articles", "opaque-active")
        assert response.status_code == 200
    assert dict(response.json()["headers"])["x-aigw-subject"] == "bob"
    assert idp.stats()["introspections"] == before + 1  # cached after the first
    assert_refused(get("/echo/articles", "opaque-revoked"), 401, "invalid_token")
    assert_refused(get("/echo/articles", "opaque-weird-kind"), 401, "invalid_token")
    assert_refused(get("/echo/articles", "never-issued"), 401, "invalid_token")


def test_introspection_outage_fails_closed(idp: FakeIdp, get):
    idp.tokens({"opaque-during-outage": {"active": True, "sub": "bob", "scope": "articles:read"}})
    idp.down(True)
    try:
        response = get("/echo/articles", "opaque-during-outage")
    finally:
        idp.down(False)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "auth_unavailable"


# --- made-up credentials: negative caching and the failure limit --------------------------

def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def made_up(count: int) -> list[str]:
    return [secrets.token_urlsafe(24) for _ in range(count)]


def limited_config(idp: FakeIdp, echo: str, limit: str, **proxy: object) -> dict:
    return {**auth_config(idp, echo, failure_limit={"limit": limit}), "proxy": proxy}


def test_made_up_opaque_tokens_cost_one_introspection_each_and_are_remembered(
    idp: FakeIdp, echo, inprocess_factory
):
    unlimited = inprocess_factory(auth_config(idp, echo))
    tokens = made_up(15)  # and 15 repeats: within the default failure limit
    before = idp.stats()["introspections"]
    for token in tokens:
        assert httpx.get(unlimited.url + "/echo/articles", headers=bearer(token)).status_code \
            == 401
    assert idp.stats()["introspections"] - before == 15
    time.sleep(2.5)  # past the old 2 s; the default negative TTL is 30 s
    for token in tokens:
        assert_refused(httpx.get(unlimited.url + "/echo/articles", headers=bearer(token)), 401,
                       "invalid_token")
    assert idp.stats()["introspections"] - before == 15  # none repeated


def test_the_reviews_sixty_made_up_tokens_cost_at_most_the_default_limit(
    idp: FakeIdp, echo, inprocess_factory
):
    fresh = inprocess_factory(auth_config(idp, echo))
    before = idp.stats()["introspections"]
    with httpx.Client(base_url=fresh.url, timeout=10) as client:
        statuses = [client.get("/echo/articles", headers=bearer(token)).status_code
                    for token in made_up(60)]
    assert statuses == [401] * 30 + [429] * 30  # auth.failure_limit: 30/minute by default
    assert idp.stats()["introspections"] - before == 30


async def test_concurrent_requests_with_one_new_token_share_one_introspection(
    idp: FakeIdp, echo, inprocess_factory
):
    sharing = inprocess_factory(auth_config(idp, echo))
    token = secrets.token_urlsafe(24)
    idp.tokens({token: {"active": True, "sub": "bob", "scope": "articles:read"}})
    before = idp.stats()["introspections"]
    idp.delay(0.5)
    try:
        async with httpx.AsyncClient(base_url=sharing.url, timeout=10) as client:
            responses = await asyncio.gather(*(client.get("/echo/articles", headers=bearer(token))
                                               for _ in range(20)))
    finally:
        idp.delay(0)
    assert {response.status_code for response in responses} == {200}
    assert idp.stats()["introspections"] - before == 1


def test_past_the_failure_limit_an_address_gets_429_without_reaching_the_idp(
    idp: FakeIdp, echo, gateway_factory
):
    limited = gateway_factory(limited_config(idp, echo, "5/minute"))
    known = secrets.token_urlsafe(24)
    idp.tokens({known: {"active": True, "sub": "bob", "scope": "articles:read"}})
    assert httpx.get(limited.url + "/echo/articles", headers=bearer(known)).status_code == 200
    for token in made_up(5):
        assert_refused(httpx.get(limited.url + "/echo/articles", headers=bearer(token)), 401,
                       "invalid_token")
    stats = idp.stats()
    refused = [httpx.get(limited.url + "/echo/articles", headers=headers) for headers in (
        bearer(secrets.token_urlsafe(24)), bearer(K1.token(kid="never-published")),
        bearer(K1.token()), {"x-api-key": API_KEY})]
    assert idp.stats() == stats  # no introspection, no JWKS fetch
    for response in refused:
        assert response.status_code == 429, response.text
        error = response.json()["error"]
        assert error["code"] == "rate_limited" and error["details"] == {"reason": "auth_failures"}
        assert error["request_id"] == response.headers["x-request-id"]
        assert 1 <= int(response.headers["retry-after"]) <= 60
    # a token verified before still works; callers without credentials are not held up
    assert httpx.get(limited.url + "/echo/articles", headers=bearer(known)).status_code == 200
    assert httpx.get(limited.url + "/public/page").status_code == 200
    assert limited.metric("aigw_auth_failures_total", code="rate_limited") == 4


def test_the_failure_limit_counts_the_address_a_trusted_proxy_names(
    idp: FakeIdp, echo, inprocess_factory
):
    limited = inprocess_factory(limited_config(idp, echo, "3/minute",
                                             trusted_proxies=["127.0.0.1"]))

    def attempt(client_ip: str) -> int:
        headers = {**bearer(secrets.token_urlsafe(24)), "x-forwarded-for": client_ip}
        return httpx.get(limited.url + "/echo/articles", headers=headers).status_code

    assert [attempt("203.0.113.7") for _ in range(4)] == [401, 401, 401, 429]
    assert attempt("203.0.113.8") == 401  # another client behind the same proxy
    assert [attempt(f"2001:db8::{n}") for n in range(1, 5)] == [401, 401, 401, 429]  # one /64


async def test_a_concurrent_burst_of_made_up_tokens_costs_at_most_the_limit(
    idp: FakeIdp, echo, inprocess_factory
):
    limited = inprocess_factory(limited_config(idp, echo, "5/minute"))
    before = idp.stats()["introspections"]
    idp.delay(0.5)
    try:
        async with httpx.AsyncClient(base_url=limited.url, timeout=10) as client:
            responses = await asyncio.gather(*(client.get("/echo/articles", headers=bearer(t))
                                               for t in made_up(30)))
    finally:
        idp.delay(0)
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [401] * 5 + [429] * 25
    assert idp.stats()["introspections"] - before == 5


def test_replicas_share_failure_counts_in_the_rate_limit_redis(idp: FakeIdp, echo,
                                                               inprocess_factory):
    config = limited_config(idp, echo, "3/minute")
    config["rate_limits"] = {"storage": "redis://127.0.0.1:6379",
                             "key_prefix": f"aigw-test-{secrets.token_hex(4)}"}
    first, second = inprocess_factory(config), inprocess_factory(config)
    for token in made_up(3):
        assert httpx.get(first.url + "/echo/articles", headers=bearer(token)).status_code == 401
    refused = httpx.get(second.url + "/echo/articles", headers=bearer(secrets.token_urlsafe(24)))
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"


def test_the_failure_limit_answers_in_the_surface_dialect(tmp_path: Path, inprocess_factory):
    config = aidre_gateway_config("http://127.0.0.1:9", tmp_path)
    config["auth"]["failure_limit"] = {"limit": "2/minute"}
    aidre = inprocess_factory(config)
    statuses = [httpx.get(aidre.url + "/collections", headers={"x-api-key": "wrong"})
                for _ in range(3)]
    assert [response.status_code for response in statuses] == [401, 401, 429]
    document = statuses[-1].json()
    assert document["error"] == "rate_limited"  # AIDRE's envelope, not the gateway's
    assert document["request_id"] == statuses[-1].headers["x-request-id"]
    assert "retry-after" in statuses[-1].headers


def test_a_flood_of_unknown_kids_refetches_the_jwks_at_most_once_per_cooldown(
    idp: FakeIdp, echo, inprocess_factory
):
    config = auth_config(idp, echo)
    config["auth"]["issuers"][0]["jwks_cache"] = {"refresh_cooldown": 60}
    fresh = inprocess_factory(config)
    before = idp.stats()["jwks_fetches"]
    for index in range(30):
        bogus = K1.token(kid=f"bogus-{index}")
        assert httpx.get(fresh.url + "/echo/articles",
                         headers={"authorization": f"Bearer {bogus}"}).status_code == 401
    # one fetch to fill the empty cache, one for the first unknown kid, then none in the cooldown
    assert idp.stats()["jwks_fetches"] - before == 2


def test_protected_resource_metadata_is_public_and_cacheable(get):
    response = get("/.well-known/oauth-protected-resource")
    assert response.status_code == 200
    assert response.headers["cache-control"].startswith("public")
    document = response.json()
    assert document == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["articles:read", "messages:read"],
        "authorization_details_types_supported": ["pdpp_grant"],
    }
    again = get("/.well-known/oauth-protected-resource",
                headers={"if-none-match": response.headers["etag"]})
    assert again.status_code == 304


def test_metadata_path_insertion_for_a_resource_with_a_path(idp, echo, inprocess_factory):
    mounted = inprocess_factory(auth_config(idp, echo, resource="https://api.example.com/gw"))
    response = httpx.get(mounted.url + "/.well-known/oauth-protected-resource/gw")
    assert response.status_code == 200 and response.json()["resource"] == \
        "https://api.example.com/gw"
    refused = httpx.get(mounted.url + "/echo/articles")
    expected = 'resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/gw"'
    assert expected in refused.headers["www-authenticate"]


def test_forward_token_and_upstream_credentials(idp, echo, inprocess_factory):
    config = auth_config(idp, echo, forward_token=True)
    forwarding = inprocess_factory(config)
    token = K1.token()
    received = httpx.get(forwarding.url + "/echo/articles",
                         headers={"authorization": f"Bearer {token}"}).json()
    assert dict(received["headers"])["authorization"] == f"Bearer {token}"

    config = auth_config(idp, echo)
    config["upstreams"]["legacy"]["add_headers"] = {"Authorization": "Bearer upstream-secret"}
    credentialed = inprocess_factory(config)
    received = httpx.get(credentialed.url + "/echo/articles",
                         headers={"authorization": f"Bearer {token}"}).json()
    values = [v for k, v in received["headers"] if k == "authorization"]
    assert values == ["Bearer upstream-secret"]


class Caller(threading.Thread):
    """Requests in a loop with whatever token `token` currently holds; records statuses."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__()
        self.url, self.token = url, token
        self.statuses: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self.stop.is_set():
                headers = {"authorization": f"Bearer {self.token}"}
                self.statuses.append(client.get(self.url, headers=headers).status_code)


def test_jwks_rotation_without_a_failed_request(idp: FakeIdp, echo, inprocess_factory):
    idp.publish(K1)
    rotating = inprocess_factory(auth_config(idp, echo))
    caller = Caller(rotating.url + "/echo/articles", K1.token())
    caller.start()
    try:
        time.sleep(0.5)
        idp.publish(K1, K2, max_age=1)  # new key appears next to the old one
        time.sleep(0.3)
        caller.token = K2.token()  # the IdP starts signing with it: unknown kid, one refetch
        time.sleep(0.5)
        idp.publish(K2, max_age=1)  # old key retired
        time.sleep(1.5)
        caller.token = K2.token()
        time.sleep(0.3)
    finally:
        caller.stop.set()
        caller.join()
    assert len(caller.statuses) > 20 and set(caller.statuses) == {200}
    time.sleep(1.1)
    assert httpx.get(rotating.url + "/echo/articles",
                     headers={"authorization": f"Bearer {K1.token()}"}).status_code == 401
    idp.publish(K1)


def test_jwks_outage_keeps_cached_keys_working_and_is_counted(idp: FakeIdp, echo,
                                                              gateway_factory):
    idp.publish(K1, max_age=1)
    resilient = gateway_factory(auth_config(idp, echo))
    assert httpx.get(resilient.url + "/echo/articles",
                     headers={"authorization": f"Bearer {K1.token()}"}).status_code == 200
    idp.down(True)
    try:
        time.sleep(1.2)  # the cached set is now stale: the next request tries to refresh
        statuses = [httpx.get(resilient.url + "/echo/articles",
                              headers={"authorization": f"Bearer {K1.token()}"}).status_code
                    for _ in range(10)]  # fresh tokens: each one really needs the key
    finally:
        idp.down(False)
    assert set(statuses) == {200}
    assert resilient.metric("aigw_jwks_fetches_total", issuer=ISSUER, result="failure") >= 1
    assert "JWKS fetch failed" in resilient.process.stderr()
