"""AIP signing and events wired into real gateways: every signature failure over HTTP, a nonce
replayed across two replicas sharing Redis and across a reload, signed responses, access events
per ok retrieve, posted citation events, and (in processes) no event lost on SIGTERM."""

from __future__ import annotations

import hashlib
import json
import secrets
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from processes import ROOT, Gateway, free_port
from test_aip import aip_config, answer, ask

from gateway.surfaces.aip.events import event_problem
from gateway.surfaces.aip.signing import sign, verify_response

SECRET = b"platform-one-shared-secret-0123456789"
REDIS_URL = "redis://127.0.0.1:6379/15"
API_KEY = "legacy-key-for-the-fallback"


def signing_section(workdir: Path, **changes: Any) -> dict[str, Any]:
    secret_file = workdir / "plat_1.secret"
    secret_file.write_bytes(SECRET + b"\n")
    return {"enabled": True, "sign_responses": True,
            "keys": {"plat_1": {"secret_file": str(secret_file), "platform": "acme-assistant"}},
            **changes}


def config(backend: str, canned: str, workdir: Path, *, signing: dict | None = None,
           events: dict | None = None, aip: dict | None = None, **top: Any) -> dict[str, Any]:
    section: dict[str, Any] = {"events": events or {"file": str(workdir / "events.jsonl")},
                               **(aip or {})}
    if signing is not None:
        section["signing"] = signing
    return aip_config(backend, canned, workdir, aip=section, **top)


def body_bytes(**changes: Any) -> bytes:
    return json.dumps(ask(**changes)).encode()


def post(gateway: Gateway, content: bytes, headers: dict[str, str] | None = None,
         path: str = "/pag/retrieve") -> httpx.Response:
    return httpx.post(gateway.url + path, content=content, timeout=15,
                      headers={"content-type": "application/json", **(headers or {})})


def signed(content: bytes, path: str = "/pag/retrieve", *, secret: bytes = SECRET,
           key_id: str = "plat_1", at: datetime | None = None) -> dict[str, str]:
    return sign(secret, key_id, "POST", path, content, now=at)


def refused(response: httpx.Response, status: int, message: str) -> None:
    """The signing page's minimal failure body, valid as a RetrieveResponse."""
    body = answer(response, status, "error")
    assert body["error"] == {"code": "auth_failed", "message": message}
    assert not any(name.lower().startswith("x-aip-") for name in response.headers)


def stored(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def signing_gateway(inprocess_factory, backend: str, canned: str, tmp_path: Path) -> Gateway:
    return inprocess_factory(config(backend, canned, tmp_path, signing=signing_section(tmp_path)))


# --------------------------------------------------------------------------- signing


def test_a_signed_retrieve_is_answered_and_its_response_signed(signing_gateway: Gateway):
    content = body_bytes()
    response = post(signing_gateway, content, signed(content))
    body = answer(response, 200, "ok")
    assert body["content"]["chunks"]
    assert verify_response(SECRET, 200, "/pag/retrieve", response.headers,
                           response.content) is None
    declared = httpx.get(signing_gateway.url + "/.well-known/aip.json").json()
    assert declared["extensions"]["aigw"]["signing"]["required"] is True
    assert declared["extensions"]["aigw"]["signing"]["versions"] == ["0.1", "1.0"]


def test_every_signature_failure_is_refused_before_any_upstream_call(signing_gateway: Gateway):
    content = body_bytes()
    refused(post(signing_gateway, content), 401, "Request is not signed")
    refused(post(signing_gateway, content, signed(content, secret=b"x" * 32)), 401,
            "Invalid signature")
    refused(post(signing_gateway, content + b" ", signed(content)), 401, "Invalid signature")
    refused(post(signing_gateway, content, signed(content, key_id="plat_9")), 401,
            "Unknown X-AIP-Key-Id")
    old = datetime.now(UTC) - timedelta(seconds=301)
    refused(post(signing_gateway, content, signed(content, at=old)), 403, "Timestamp is too old")
    for header in ("X-AIP-Version", "X-AIP-Nonce", "X-AIP-Signature"):
        headers = signed(content)
        del headers[header]
        refused(post(signing_gateway, content, headers), 401, f"Missing {header} header")
    headers = signed(content)
    assert post(signing_gateway, content, headers).status_code == 200
    refused(post(signing_gateway, content, headers), 403, "Nonce already used")
    assert len(stored(Path(signing_gateway.config["aip"]["events"]["file"]))) == 1


def test_a_nonce_used_on_one_process_is_refused_by_another_sharing_redis(
        inprocess_factory, backend: str, canned: str, tmp_path: Path):
    prefix = f"test-aip-wiring-{secrets.token_hex(6)}"
    section = signing_section(tmp_path, nonce_store=REDIS_URL, nonce_key_prefix=prefix)
    first = inprocess_factory(config(backend, canned, tmp_path, signing=section))
    second = inprocess_factory(config(backend, canned, tmp_path, signing=section))
    client = redis.Redis.from_url(REDIS_URL)
    try:
        content = body_bytes()
        headers = signed(content)
        answer(post(first, content, headers), 200, "ok")
        refused(post(second, content, headers), 403, "Nonce already used")
        fresh = signed(content)
        answer(post(second, content, fresh), 200, "ok")
        refused(post(first, content, fresh), 403, "Nonce already used")
    finally:
        for key in client.keys(f"{prefix}:*"):
            client.delete(key)
        client.close()


def test_a_nonce_seen_before_a_reload_is_refused_after_it(signing_gateway: Gateway):
    content = body_bytes()
    headers = signed(content)
    answer(post(signing_gateway, content, headers), 200, "ok")
    changed = json.loads(json.dumps(signing_gateway.config))
    changed["aip"]["retrieval"]["max_chunks"] = 3
    signing_gateway.write_config(changed)
    deadline = time.monotonic() + 10
    while httpx.get(signing_gateway.url + "/.well-known/aip.json").json()[
            "retrieval"]["max_chunks"] != 3:
        assert time.monotonic() < deadline, "the config was not reloaded"
        time.sleep(0.1)
    refused(post(signing_gateway, content, headers), 403, "Nonce already used")


def test_optional_signing_lets_unsigned_calls_fall_back_to_the_auth_section(
        inprocess_factory, backend: str, canned: str, tmp_path: Path):
    auth = {"api_keys": {"header": "X-API-Key", "keys": [{
                "sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "subject": "crm",
                "client_id": "crm", "scopes": ["aip"]}]},
            "routes": [{"path": "/pag/retrieve", "scopes": ["aip"]}]}
    gateway = inprocess_factory(config(backend, canned, tmp_path, auth=auth,
                                     signing=signing_section(tmp_path, required=False)))
    content = body_bytes()
    assert answer(post(gateway, content), 401, "error")["error"]["code"] == "auth_failed"
    answer(post(gateway, content, {"x-api-key": API_KEY}), 200, "ok")
    answer(post(gateway, content, signed(content)), 200, "ok")  # the signature authenticates
    # A request that tries to sign is held to its signature, whatever else it carries.
    refused(post(gateway, content, {**signed(content, secret=b"y" * 32), "x-api-key": API_KEY}),
            401, "Invalid signature")


def test_the_pipelines_refusals_of_a_signed_retrieve_are_aip_envelopes_signed(
        inprocess_factory, backend: str, canned: str, tmp_path: Path):
    """The policy stage's denial and the rate limit's 429 are `denied` answers, signed with the
    request's key; a bad signature is the signing page's minimal body, unsigned."""
    limits = {"storage": "memory://", "rules": [
        {"name": "aip", "paths": ["/pag/retrieve"], "key": "platform", "limit": "2/minute"}]}
    gateway = inprocess_factory(config(backend, canned, tmp_path,
                                       signing=signing_section(tmp_path), rate_limits=limits))

    def send(**changes: Any) -> httpx.Response:
        content = body_bytes(**changes)
        response = post(gateway, content, signed(content))
        assert verify_response(SECRET, response.status_code, "/pag/retrieve", response.headers,
                               response.content) is None
        return response

    policy = answer(send(extensions={"aigw": {"use": "training"}}), 403, "denied")
    assert policy["denial"] == {"reason": "policy_violation",
                                "message": "The declared use of the content is not permitted."}
    answer(send(), 200, "ok")
    limited = send()
    body = answer(limited, 429, "denied")
    assert body["denial"]["reason"] == "rate_limited" and body["request_id"] == "req_92fA1"
    assert int(limited.headers["retry-after"]) >= 1
    content = body_bytes()
    refused(post(gateway, content, signed(content, secret=b"x" * 32)), 401, "Invalid signature")


# --------------------------------------------------------------------------- events


def citation(request_id: str = "req_92fA1", **changes: Any) -> dict[str, Any]:
    event = {"aip_version": "0.1", "event_id": f"evt_{secrets.token_hex(4)}",
             "event_type": "citation", "timestamp": "2026-01-15T14:30:05Z",
             "request_id": request_id,
             "publisher": {"id": "acme-help", "domain": "help.example.com"},
             "platform": {"id": "acme-assistant"},
             "citation": {"source_url": "https://help.example.com/a/1", "chunk_ids": ["a#0"],
                          "display_surface": "footnote"}}
    return {**event, **changes}


def test_each_ok_retrieve_stores_a_valid_access_event(inprocess_factory, backend: str,
                                                      canned: str, tmp_path: Path):
    gateway = inprocess_factory(config(backend, canned, tmp_path))
    body = answer(post(gateway, body_bytes(request_id="req_ok")), 200, "ok")
    answer(post(gateway, body_bytes(domain="weather.today")), 403, "denied")
    events = stored(tmp_path / "events.jsonl")
    assert [e["request_id"] for e in events] == ["req_ok"]  # a denial is no access
    [event] = events
    assert event_problem(event) is None
    chunks = body["content"]["chunks"]
    assert event["access"] == {"chunks_returned": len(chunks), "retrieval_mode": "chunks",
                               "token_count": sum(c["token_count"] for c in chunks)}
    assert event["platform"] == {"id": "acme-assistant"}
    assert event["publisher"] == {"id": "acme-help", "domain": "help.example.com"}


def test_posted_citation_events_are_validated_signed_and_stored(signing_gateway: Gateway,
                                                                tmp_path: Path):
    asked = body_bytes()  # the request the events cite
    answer(post(signing_gateway, asked, signed(asked)), 200, "ok")
    good = json.dumps(citation()).encode()
    response = post(signing_gateway, good, signed(good, "/pag/events"), "/pag/events")
    assert response.status_code == 202, response.text
    assert response.json()["event_id"] == json.loads(good)["event_id"]
    assert verify_response(SECRET, 202, "/pag/events", response.headers,
                           response.content) is None
    refused(post(signing_gateway, good, path="/pag/events"), 401, "Request is not signed")
    cases = {
        "citation.source_url": citation(citation={"source_url": "not a url"}),
        "platform": {k: v for k, v in citation().items() if k != "platform"},
        "event_type": citation(event_type="access"),
        "publisher.id": citation(publisher={"id": "someone-else", "domain": "x.example"}),
        "citation.price": citation(citation={"source_url": "https://a.example/", "price": 1}),
    }
    for field, event in cases.items():
        content = json.dumps(event).encode()
        response = post(signing_gateway, content, signed(content, "/pag/events"), "/pag/events")
        body = answer(response, 422, "error")
        assert body["error"]["code"] == "invalid_event"
        assert body["error"]["message"].startswith(field + ":"), (field, body)
    kept = stored(tmp_path / "events.jsonl")
    assert [e["event_type"] for e in kept] == ["access", "citation"]
    printed = subprocess.run(
        [sys.executable, "-m", "gateway", "aip", "events", "--config",
         str(signing_gateway.config_path)], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert printed.returncode == 0, printed.stderr
    assert [json.loads(line) for line in printed.stdout.splitlines()] == kept


def test_sigterm_right_after_ok_retrieves_loses_no_event(gateway_factory, backend: str,
                                                         canned: str, tmp_path: Path):
    gateway = gateway_factory(config(backend, canned, tmp_path))
    ids = [f"req_term_{n}" for n in range(20)]
    for request_id in ids:
        answer(post(gateway, body_bytes(request_id=request_id)), 200, "ok")
    gateway.process.signal(signal.SIGTERM)
    assert gateway.process.popen.wait(15) == 0
    assert [e["request_id"] for e in stored(tmp_path / "events.jsonl")] == ids


def test_events_go_to_a_redis_stream_and_an_outage_withholds_the_content(
        inprocess_factory, backend: str, canned: str, tmp_path: Path):
    stream = f"test-aip-wiring-events-{secrets.token_hex(6)}"
    gateway = inprocess_factory(config(backend, canned, tmp_path,
                                     events={"redis_url": REDIS_URL, "stream": stream}))
    client = redis.Redis.from_url(REDIS_URL)
    try:
        answer(post(gateway, body_bytes(request_id="req_stream")), 200, "ok")
        [(_, fields)] = client.xrange(stream)
        assert json.loads(fields[b"event"])["request_id"] == "req_stream"
    finally:
        client.delete(stream)
        client.close()
    down = {"redis_url": f"redis://127.0.0.1:{free_port()}/0", "store_timeout": 0.5}
    (tmp_path / "down").mkdir()
    broken = inprocess_factory(config(backend, canned, tmp_path / "down", events=down))
    body = answer(post(broken, body_bytes()), 503, "error")
    assert body["error"] == {"code": "unavailable", "message": "Temporary failure; retry later."}


# --------------------------------------------------------------------------- event abuse


def post_event(gateway: Gateway, event: dict[str, Any] | bytes,
               headers: dict[str, str] | None = None) -> httpx.Response:
    content = event if isinstance(event, bytes) else json.dumps(event).encode()
    return post(gateway, content, headers, "/pag/events")


def issue(gateway: Gateway, request_id: str, platform: str = "acme-assistant") -> None:
    """An ok retrieve: the request id the events may then cite, for that platform."""
    answer(post(gateway, body_bytes(request_id=request_id, platform={"id": platform})), 200,
           "ok")


def citations(path: Path) -> list[dict[str, Any]]:
    return [e for e in stored(path) if e["event_type"] == "citation"]


@pytest.fixture
def open_gateway(inprocess_factory, backend: str, canned: str, tmp_path: Path) -> Gateway:
    """Anonymous retrieves and events, as in the demo."""
    return inprocess_factory(config(backend, canned, tmp_path))


def test_an_event_over_the_size_cap_is_refused_before_it_is_read(open_gateway: Gateway,
                                                                 tmp_path: Path):
    issue(open_gateway, "req_big")
    big = citation("req_big", extensions={"pad": ["x" * 1000] * 900})  # ~900 KB
    response = post_event(open_gateway, big)
    body = answer(response, 413, "error")
    assert body["error"] == {"code": "request_too_large",
                             "message": "Request body exceeds 65536 bytes."}
    fits = citation("req_big", extensions={"pad": ["x" * 1000] * 60})  # ~60 KB
    assert post_event(open_gateway, fits).status_code == 202
    assert len(citations(tmp_path / "events.jsonl")) == 1


def test_a_repeated_event_id_is_stored_once(open_gateway: Gateway, tmp_path: Path):
    issue(open_gateway, "req_dup")
    event = citation("req_dup")
    first, again = post_event(open_gateway, event), post_event(open_gateway, event)
    # A retry of the same event (its answer lost, say) gets the same answer, and no 2nd copy.
    assert first.status_code == again.status_code == 202
    assert first.json()["event_id"] == again.json()["event_id"] == event["event_id"]
    other = citation("req_dup", event_id=event["event_id"],
                     citation={"source_url": "https://help.example.com/a/2"})
    body = answer(post_event(open_gateway, other), 409, "error")
    assert body["error"]["code"] == "duplicate_event"
    assert body["error"]["message"].startswith("event_id:")
    assert citations(tmp_path / "events.jsonl") == [event]


def test_an_event_must_cite_a_request_answered_to_its_platform(open_gateway: Gateway,
                                                               tmp_path: Path):
    issue(open_gateway, "req_mine", platform="acme-assistant")
    for event in (citation("req_never_issued"),
                  citation("req_mine", platform={"id": "another-platform"})):
        body = answer(post_event(open_gateway, event), 422, "error")
        assert body["error"]["code"] == "invalid_event"
        assert body["error"]["message"].startswith("request_id:")
    denied = body_bytes(request_id="req_denied", domain="weather.today")
    answer(post(open_gateway, denied), 403, "denied")  # nothing was served: nothing to cite
    assert post_event(open_gateway, citation("req_denied")).status_code == 422
    # The platform's name compares in its normal form, as the rules do.
    assert post_event(open_gateway, citation("req_mine", platform={"id": "Acme-Assistant "})
                      ).status_code == 202
    assert [e["request_id"] for e in citations(tmp_path / "events.jsonl")] == ["req_mine"]


def test_a_signed_event_must_name_the_signers_platform(signing_gateway: Gateway,
                                                       tmp_path: Path):
    asked = body_bytes(request_id="req_signed")
    answer(post(signing_gateway, asked, signed(asked)), 200, "ok")
    for event in (citation("req_signed", platform={"id": "another-platform"}),):
        content = json.dumps(event).encode()
        response = post_event(signing_gateway, content, signed(content, "/pag/events"))
        body = answer(response, 403, "error")
        assert body["error"] == {"code": "auth_failed", "message":
                                 "platform.id is not the platform of the signing key."}
    other = body_bytes(request_id="req_other", platform={"id": "another-platform"})
    body = answer(post(signing_gateway, other, signed(other)), 403, "error")  # retrieve too
    assert body["error"]["code"] == "auth_failed"
    assert citations(tmp_path / "events.jsonl") == []


def test_deeply_nested_event_extensions_are_invalid_requests(open_gateway: Gateway):
    issue(open_gateway, "req_deep")
    extensions: dict[str, Any] = {}
    for _ in range(260):
        extensions = {"x": extensions}
    body = answer(post_event(open_gateway, citation("req_deep", extensions=extensions)), 400,
                  "error")
    assert body["error"] == {"code": "invalid_request", "message":
                             "The request body at extensions is nested deeper than 32 levels."}
    assert body["request_id"] == "req_deep"


def test_a_repeated_signing_header_is_refused(signing_gateway: Gateway):
    content = body_bytes()
    headers = signed(content)
    bogus = "v1=" + "A" * 43 + "="
    sent = [("content-type", "application/json"),
            *((name, value) for name, value in headers.items() if name != "X-AIP-Signature"),
            ("X-AIP-Signature", bogus), ("X-AIP-Signature", headers["X-AIP-Signature"])]
    response = httpx.post(signing_gateway.url + "/pag/retrieve", content=content, headers=sent,
                          timeout=15)
    refused(response, 401, "Repeated X-AIP-Signature header")
    answer(post(signing_gateway, content, headers), 200, "ok")  # its nonce was not spent


def test_issued_ids_and_event_ids_are_shared_by_replicas_and_kept_over_reloads(
        inprocess_factory, backend: str, canned: str, tmp_path: Path):
    prefix = f"test-aip-ledger-{secrets.token_hex(6)}"
    # The ledger follows the signing nonce store when it names none of its own.
    section = signing_section(tmp_path, required=False, nonce_store=REDIS_URL,
                              nonce_key_prefix=prefix)
    first = inprocess_factory(config(backend, canned, tmp_path, signing=section,
                                   aip={"event": {"path": "/pag/events",
                                                  "key_prefix": prefix}}))
    second = inprocess_factory(config(backend, canned, tmp_path, signing=section,
                                    aip={"event": {"path": "/pag/events",
                                                   "key_prefix": prefix}}))
    client = redis.Redis.from_url(REDIS_URL)
    try:
        issue(first, "req_shared")
        event = citation("req_shared")
        assert post_event(second, event).status_code == 202  # answered by the other replica
        assert post_event(first, event).status_code == 202  # the retry: not stored again
        conflict = {**event, "citation": {"source_url": "https://help.example.com/a/9"}}
        assert post_event(first, conflict).status_code == 409
        changed = json.loads(json.dumps(first.config))
        changed["aip"]["retrieval"]["max_chunks"] = 3
        first.write_config(changed)
        deadline = time.monotonic() + 10
        while httpx.get(first.url + "/.well-known/aip.json").json()[
                "retrieval"]["max_chunks"] != 3:
            assert time.monotonic() < deadline, "the config was not reloaded"
            time.sleep(0.1)
        assert post_event(first, conflict).status_code == 409  # remembered over the reload
        later = citation("req_shared")
        assert post_event(first, later).status_code == 202
        assert [e["event_id"] for e in citations(tmp_path / "events.jsonl")] == [
            event["event_id"], later["event_id"]]
        ttls = [client.pttl(key) for key in client.keys(f"{prefix}:issued:*")]
        assert len(ttls) == 1 and 86_000_000 < ttls[0] <= 86_400_000
    finally:
        for key in client.keys(f"{prefix}:*"):
            client.delete(key)
        client.close()


def test_rotation_and_sigterm_lose_no_event(gateway_factory, backend: str, canned: str,
                                            tmp_path: Path):
    events = {"file": str(tmp_path / "events.jsonl"), "max_file_bytes": 2048,
              "keep_files": 50}
    gateway = gateway_factory(config(backend, canned, tmp_path, events=events))
    ids = [f"req_rotate_{n}" for n in range(30)]
    for request_id in ids:
        answer(post(gateway, body_bytes(request_id=request_id)), 200, "ok")
    gateway.process.signal(signal.SIGTERM)
    assert gateway.process.popen.wait(15) == 0
    rotated = [f for f in tmp_path.glob("events.jsonl.*") if f.suffix[1:].isdigit()]
    files = [*sorted(rotated, key=lambda f: -int(f.suffix[1:])), tmp_path / "events.jsonl"]
    assert len(files) > 3 and all(f.stat().st_size <= 2048 for f in files)
    assert [e["request_id"] for f in files for e in stored(f)] == ids
