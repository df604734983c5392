"""AIP request signing: every verification failure, the nonce stores (memory and the shared
Redis), secrets from env and files, response signing, and `aigw aip sign` sent with curl."""

from __future__ import annotations

import asyncio
import json
import secrets
import shlex
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest
import redis
from processes import ROOT, free_port
from pydantic import ValidationError

from gateway.surfaces.aip import signing as signing_module
from gateway.surfaces.aip.events import load_schema
from gateway.surfaces.aip.nonces import MemoryNonceStore, RedisNonceStore
from gateway.surfaces.aip.signing import (
    HEADERS,
    SigningFailure,
    VerifiedKey,
    Verifier,
    failure_body,
    sign,
    verify_response,
)
from gateway.surfaces.aip.signing_config import Signing

SECRET = b"s3cret-for-platform-one-0123456789"
OTHER_SECRET = b"another-platform-secret-abcdefgh"
NOW = datetime(2025, 11, 14, 18, 22, 0, tzinfo=UTC)
PATH = "/pag/retrieve"
BODY = b'{"aip_version": "0.1", "request_id": "req_92fA1"}'
REDIS_URL = "redis://127.0.0.1:6379/15"


@pytest.fixture
def secrets_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIP_SECRET_PLAT1", SECRET.decode())
    monkeypatch.setenv("AIP_SECRET_PLAT2", OTHER_SECRET.decode())


def settings(**overrides: object) -> Signing:
    keys = {"plat_1": {"secret_env": "AIP_SECRET_PLAT1"},
            "plat_2": {"secret_env": "AIP_SECRET_PLAT2"}}
    return Signing.model_validate({"enabled": True, "keys": keys, **overrides})


def verifier(**overrides: object) -> Verifier:
    return Verifier(settings(**overrides), MemoryNonceStore(1000))


def signed(at: datetime = NOW, key_id: str = "plat_1", secret: bytes = SECRET,
           **kwargs: object) -> dict[str, str]:
    return sign(secret, key_id, "POST", PATH, BODY, now=at, **kwargs)


async def test_a_signed_request_round_trips(secrets_env):
    result = await verifier().verify("POST", PATH, signed(), BODY, NOW)
    assert isinstance(result, VerifiedKey)
    assert (result.key_id, result.version, result.timestamp) == ("plat_1", "1.0", NOW)


async def test_header_names_are_case_insensitive_as_asgi_delivers_them(secrets_env):
    lowered = {name.lower(): value for name, value in signed().items()}
    assert isinstance(await verifier().verify("POST", PATH, lowered, BODY, NOW), VerifiedKey)


@pytest.mark.parametrize(("method", "path", "body", "secret"), [
    ("POST", PATH, BODY + b" ", SECRET),
    ("POST", PATH + "?x=1", BODY, SECRET),
    ("PUT", PATH, BODY, SECRET),
    ("POST", PATH, BODY, OTHER_SECRET),
], ids=["body", "path", "method", "secret"])
async def test_any_change_to_a_signed_part_is_a_bad_signature(secrets_env, method, path, body,
                                                              secret):
    headers = sign(secret, "plat_1", "POST", PATH, BODY, now=NOW)
    result = await verifier().verify(method, path, headers, body, NOW)
    assert result == SigningFailure("bad_signature", 401, "Invalid signature")


async def test_a_changed_timestamp_or_nonce_breaks_the_signature(secrets_env):
    for header, value in (("X-AIP-Timestamp", "2025-11-14T18:22:01Z"),
                          ("X-AIP-Nonce", "a" * 32)):
        headers = {**signed(), header: value}
        result = await verifier().verify("POST", PATH, headers, BODY, NOW)
        assert isinstance(result, SigningFailure) and result.code == "bad_signature"


@pytest.mark.parametrize(("offset", "expected"), [
    (-300, None), (-301, "stale_timestamp"), (300, None), (301, "future_timestamp"),
], ids=["old-at-window", "old-past-window", "future-at-window", "future-past-window"])
async def test_the_timestamp_window_is_inclusive_and_both_ways(secrets_env, offset, expected):
    headers = signed(at=NOW + timedelta(seconds=offset))
    result = await verifier().verify("POST", PATH, headers, BODY, NOW)
    if expected is None:
        assert isinstance(result, VerifiedKey)
    else:
        assert isinstance(result, SigningFailure)
        assert (result.code, result.status) == (expected, 403)


async def test_the_window_is_configurable(secrets_env):
    headers = signed(at=NOW - timedelta(seconds=61))
    result = await verifier(window=60).verify("POST", PATH, headers, BODY, NOW)
    assert isinstance(result, SigningFailure) and result.code == "stale_timestamp"


async def test_a_replayed_nonce_is_refused_per_key(secrets_env):
    check = verifier()
    headers = signed(nonce="n0nce-shared-by-two-keys")
    assert isinstance(await check.verify("POST", PATH, headers, BODY, NOW), VerifiedKey)
    replay = await check.verify("POST", PATH, headers, BODY, NOW + timedelta(seconds=5))
    assert isinstance(replay, SigningFailure)
    assert (replay.code, replay.status, replay.message) == ("replayed_nonce", 403,
                                                            "Nonce already used")
    other_key = signed(key_id="plat_2", secret=OTHER_SECRET, nonce="n0nce-shared-by-two-keys")
    assert isinstance(await check.verify("POST", PATH, other_key, BODY, NOW), VerifiedKey)


async def test_a_request_failing_its_signature_does_not_burn_its_nonce(secrets_env):
    check = verifier()
    headers = signed()
    assert (await check.verify("POST", PATH, headers, BODY + b"x", NOW)).code == "bad_signature"
    assert isinstance(await check.verify("POST", PATH, headers, BODY, NOW), VerifiedKey)


async def test_two_redis_nonce_stores_refuse_each_others_nonces(secrets_env):
    prefix = f"test-aip-nonce-{secrets.token_hex(6)}"
    first = Verifier(settings(), RedisNonceStore(REDIS_URL, prefix, 1.0))
    second = Verifier(settings(), RedisNonceStore(REDIS_URL, prefix, 1.0))
    client = redis.Redis.from_url(REDIS_URL)
    try:
        headers = signed(at=NOW - timedelta(seconds=200))
        assert isinstance(await first.verify("POST", PATH, headers, BODY, NOW), VerifiedKey)
        replay = await second.verify("POST", PATH, headers, BODY, NOW)
        assert isinstance(replay, SigningFailure) and replay.code == "replayed_nonce"
        # Remembered while the timestamp can still pass: 300 s window - 200 s age (+ 1 s).
        [key] = client.keys(f"{prefix}:*")
        assert 100_000 <= client.pttl(key) <= 101_000
        fresh = signed(at=NOW - timedelta(seconds=200))
        assert isinstance(await second.verify("POST", PATH, fresh, BODY, NOW), VerifiedKey)
    finally:
        for key in client.keys(f"{prefix}:*"):
            client.delete(key)
        client.close()
        await first._nonces.aclose()
        await second._nonces.aclose()


async def test_an_unreachable_redis_nonce_store_fails_closed_with_503(secrets_env):
    store = RedisNonceStore(f"redis://127.0.0.1:{free_port()}/0", "aigw:aip-nonce", 0.5)
    result = await Verifier(settings(), store).verify("POST", PATH, signed(), BODY, NOW)
    await store.aclose()
    assert isinstance(result, SigningFailure)
    assert (result.code, result.status) == ("nonce_store_unavailable", 503)
    assert failure_body(result, "req_1", NOW)["error"]["code"] == "service_unavailable"


async def test_the_memory_store_forgets_after_the_ttl_and_refuses_when_full():
    clock = [1000.0]
    store = MemoryNonceStore(100, clock=lambda: clock[0])
    assert await store.add("k", "n1", 10)
    assert not await store.add("k", "n1", 10)
    clock[0] += 10
    assert await store.add("k", "n1", 10)  # expired, so a new use
    for index in range(99):
        assert await store.add("k", f"fill-{index}", 10)
    with pytest.raises(signing_module.NonceStoreUnavailable):
        await store.add("k", "one-too-many", 10)
    clock[0] += 10
    assert await store.add("k", "one-too-many", 10)
    assert len(store) == 1


async def test_a_replay_at_the_window_edge_is_still_refused(secrets_env):
    check = verifier()
    headers = signed(at=NOW - timedelta(seconds=300))
    assert isinstance(await check.verify("POST", PATH, headers, BODY, NOW), VerifiedKey)
    replay = await check.verify("POST", PATH, headers, BODY, NOW)
    assert isinstance(replay, SigningFailure) and replay.code == "replayed_nonce"


async def test_a_full_memory_store_refuses_requests_with_503(secrets_env):
    check = Verifier(settings(max_memory_nonces=100), MemoryNonceStore(1))
    assert isinstance(await check.verify("POST", PATH, signed(), BODY, NOW), VerifiedKey)
    result = await check.verify("POST", PATH, signed(), BODY, NOW)
    assert isinstance(result, SigningFailure) and result.status == 503


async def test_an_unknown_key_is_refused(secrets_env):
    headers = signed(key_id="plat_unknown")
    result = await verifier().verify("POST", PATH, headers, BODY, NOW)
    assert result == SigningFailure("unknown_key", 401, "Unknown X-AIP-Key-Id")


@pytest.mark.parametrize("header", HEADERS)
async def test_each_missing_header_is_named(secrets_env, header):
    headers = {name: value for name, value in signed().items() if name != header}
    result = await verifier().verify("POST", PATH, headers, BODY, NOW)
    assert result == SigningFailure("missing_header", 401, f"Missing {header} header")


async def test_an_unsigned_request_is_refused(secrets_env):
    result = await verifier().verify("POST", PATH, {"content-type": "application/json"}, BODY,
                                     NOW)
    assert isinstance(result, SigningFailure) and (result.code, result.status) == ("unsigned", 401)
    assert not signing_module.is_signed({"content-type": "application/json"})
    assert signing_module.is_signed({"x-aip-key-id": "plat_1"})


@pytest.mark.parametrize(("accepted", "sent", "ok"), [
    (["0.1", "1.0"], "1.0", True), (["0.1", "1.0"], "0.1", True), (["0.1", "1.0"], "2.0", False),
    (["1.0"], "0.1", False),
])
async def test_only_the_declared_versions_are_accepted(secrets_env, accepted, sent, ok):
    result = await verifier(versions=accepted).verify("POST", PATH, signed(version=sent), BODY,
                                                      NOW)
    if ok:
        assert isinstance(result, VerifiedKey) and result.version == sent
    else:
        assert result == SigningFailure("unsupported_version", 401, "Unsupported X-AIP-Version")


@pytest.mark.parametrize(("header", "value"), [
    ("X-AIP-Signature", "v2=AAAA"),
    ("X-AIP-Signature", "v1=not base64 at all"),
    ("X-AIP-Timestamp", "1731608520"),
    ("X-AIP-Timestamp", "2025-11-14 18:22:00"),
    ("X-AIP-Timestamp", "2025-11-14T18:22:00"),
    ("X-AIP-Nonce", "short"),
    ("X-AIP-Nonce", "has spaces and : colons in it"),
])
async def test_malformed_headers_are_refused_by_name(secrets_env, header, value):
    result = await verifier().verify("POST", PATH, {**signed(), header: value}, BODY, NOW)
    assert result == SigningFailure("malformed_header", 401, f"Malformed {header} header")


@pytest.mark.parametrize("header", HEADERS)
@pytest.mark.parametrize("order", ["bogus-first", "valid-first", "same-twice"])
async def test_a_repeated_signing_header_is_refused_whatever_its_copies_hold(secrets_env,
                                                                           header, order):
    from starlette.datastructures import Headers

    valid = signed()
    copies = {"bogus-first": ["bogus-value-0123456789", valid[header]],
              "valid-first": [valid[header], "bogus-value-0123456789"],
              "same-twice": [valid[header]] * 2}[order]
    raw = [(name.lower().encode(), value.encode()) for name, value in valid.items()
           if name != header] + [(header.lower().encode(), copy.encode()) for copy in copies]
    check = verifier()
    result = await check.verify("POST", PATH, Headers(raw=raw), BODY, NOW)
    assert result == SigningFailure("repeated_header", 401, f"Repeated {header} header")
    assert isinstance(await check.verify("POST", PATH, valid, BODY, NOW), VerifiedKey)


async def test_a_signature_proves_its_keys_platform(secrets_env):
    result = await verifier().verify("POST", PATH, signed(), BODY, NOW)
    assert isinstance(result, VerifiedKey) and result.platform == "plat_1"  # by default
    keys = {"plat_1": {"secret_env": "AIP_SECRET_PLAT1", "platform": " Acme-Assistant "}}
    named = Verifier(Signing.model_validate({"enabled": True, "keys": keys}),
                     MemoryNonceStore(10))
    result = await named.verify("POST", PATH, signed(), BODY, NOW)
    assert isinstance(result, VerifiedKey) and result.platform == "acme-assistant"


async def test_the_signature_is_compared_in_constant_time(secrets_env, monkeypatch):
    calls = []
    real = signing_module.hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(signing_module.hmac, "compare_digest", recording)
    headers = signed()
    assert isinstance(await verifier().verify("POST", PATH, headers, BODY, NOW), VerifiedKey)
    assert calls == [(headers["X-AIP-Signature"].encode(),) * 2]


def test_the_failure_body_is_minimal_and_a_valid_retrieve_response():
    failure = SigningFailure("bad_signature", 401, "Invalid signature")
    body = failure_body(failure, "req_92fA1", NOW)
    jsonschema.validate(body, load_schema("retrieve-response.schema.json"))
    assert body == {"aip_version": "0.1", "request_id": "req_92fA1",
                    "timestamp": "2025-11-14T18:22:00Z", "status": "error",
                    "error": {"code": "auth_failed", "message": "Invalid signature"}}


async def test_responses_are_signed_with_the_requests_key_when_configured(secrets_env):
    check = verifier(sign_responses=True)
    verified = await check.verify("POST", PATH, signed(version="0.1"), BODY, NOW)
    assert isinstance(verified, VerifiedKey)
    response = b'{"status": "ok"}'
    headers = check.response_headers(verified, 200, PATH, response)
    assert headers["X-AIP-Key-Id"] == "plat_1" and headers["X-AIP-Version"] == "0.1"
    assert verify_response(SECRET, 200, PATH, headers, response) is None
    assert verify_response(SECRET, 200, PATH, headers, response + b" ").code == "bad_signature"
    assert verify_response(SECRET, 403, PATH, headers, response).code == "bad_signature"
    assert verifier().response_headers(verified, 200, PATH, response) == {}


def test_secrets_come_from_env_or_file_and_a_missing_one_is_named(tmp_path, monkeypatch):
    secret_file = tmp_path / "plat.secret"
    secret_file.write_bytes(SECRET + b"\n")
    monkeypatch.setenv("AIP_SECRET_PLAT1", SECRET.decode())
    loaded = Signing.model_validate({"enabled": True, "keys": {
        "env_key": {"secret_env": "AIP_SECRET_PLAT1"},
        "file_key": {"secret_file": str(secret_file)}}})
    assert loaded.secret("env_key") == loaded.secret("file_key") == SECRET
    assert SECRET.decode() not in repr(loaded)
    cases = [
        ({"secret_env": "AIP_SECRET_NOT_SET"},
         "environment variable AIP_SECRET_NOT_SET is not set"),
        ({"secret_file": str(tmp_path / "absent")}, f"cannot read secret file {tmp_path}/absent"),
        ({"secret_env": "AIP_SECRET_PLAT1", "secret_file": str(secret_file)},
         "expected exactly one of secret_env or secret_file"),
        ({"secret": SECRET.decode()}, "Extra inputs are not permitted"),
    ]
    for key, message in cases:
        with pytest.raises(ValidationError) as caught:
            Signing.model_validate({"enabled": True, "keys": {"plat_1": key}})
        assert message in str(caught.value)
        assert "keys.plat_1" in str(caught.value).replace("\n", ".").replace(" ", "")


def test_short_secrets_and_enabled_signing_without_keys_are_config_errors(monkeypatch):
    monkeypatch.setenv("AIP_SHORT", "tooshort")
    with pytest.raises(ValidationError, match="AIP_SHORT is shorter than 16 bytes") as caught:
        Signing.model_validate({"keys": {"k": {"secret_env": "AIP_SHORT"}}})
    assert "tooshort" not in str(caught.value)
    with pytest.raises(ValidationError, match="at least one key when signing is enabled"):
        Signing.model_validate({"enabled": True})
    assert Signing().enabled is False and Signing().window == 300


def test_aigw_aip_sign_prints_headers_the_verifier_accepts(tmp_path, secrets_env):
    body = tmp_path / "request.json"
    body.write_bytes(BODY)
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "aip", "sign", "--key-id", "plat_1",
         "--secret-env", "AIP_SECRET_PLAT1", "--path", PATH, "--body", str(body)],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    headers = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert set(headers) == set(HEADERS)
    assert SECRET.decode() not in result.stdout
    now = datetime.fromisoformat(headers["X-AIP-Timestamp"].replace("Z", "+00:00"))
    verified = asyncio.run(verifier().verify("POST", PATH, headers, BODY, now))
    assert isinstance(verified, VerifiedKey)


async def test_the_printed_curl_command_sends_a_verifiable_request(tmp_path, secrets_env, echo):
    body = tmp_path / "request.json"
    body.write_bytes(BODY)
    path = "/echo/pag/retrieve"
    printed = subprocess.run(
        [sys.executable, "-m", "gateway", "aip", "sign", "--key-id", "plat_1",
         "--secret-env", "AIP_SECRET_PLAT1", "--path", path, "--body", str(body),
         "--url", echo], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    received = json.loads(subprocess.run(shlex.split(printed.stdout), capture_output=True,
                                         timeout=30, check=True).stdout)
    assert received["raw_path"] == path and received["method"] == "POST"
    headers = dict(received["headers"])
    now = datetime.fromisoformat(headers["x-aip-timestamp"].replace("Z", "+00:00"))
    result = await verifier().verify(received["method"], received["raw_path"], headers, BODY, now)
    assert isinstance(result, VerifiedKey)


def test_aigw_aip_sign_refuses_an_unset_secret_variable():
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "aip", "sign", "--key-id", "plat_1",
         "--secret-env", "AIP_SECRET_SURELY_UNSET"], capture_output=True, text=True, cwd=ROOT,
        timeout=60)
    assert result.returncode == 2
    assert "environment variable AIP_SECRET_SURELY_UNSET is not set" in result.stderr


def test_the_packaged_aip_schemas_match_the_spec_copies():
    specs = Path("/work/shared/specs/aip")
    if not specs.is_dir():
        pytest.skip("the shared spec folder is not on this machine")
    packaged = ROOT / "gateway" / "schemas" / "aip"
    names = sorted(p.name for p in specs.glob("*.schema.json"))
    assert names == sorted(p.name for p in packaged.glob("*.schema.json"))
    for name in names:
        assert (packaged / name).read_bytes() == (specs / name).read_bytes(), name
