"""AIP signing and events wired into real gateway processes: every signature failure over HTTP,
a nonce replayed across two processes sharing Redis and across a reload, signed responses,
access events per ok retrieve, posted citation events, and no event lost on SIGTERM."""

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
    return {"enabled": True, "keys": {"plat_1": {"secret_file": str(secret_file)}},
            "sign_responses": True, **changes}


def config(backend: str, canned: str, workdir: Path, *, signing: dict | None = None,
           events: dict | None = None, **top: Any) -> dict[str, Any]:
    section: dict[str, Any] = {"events": events or {"file": str(workdir / "events.jsonl")}}
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
def signing_gateway(gateway_factory, backend: str, canned: str, tmp_path: Path) -> Gateway:
    return gateway_factory(config(backend, canned, tmp_path, signing=signing_section(tmp_path)))


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
        gateway_factory, backend: str, canned: str, tmp_path: Path):
    prefix = f"test-aip-wiring-{secrets.token_hex(6)}"
    section = signing_section(tmp_path, nonce_store=REDIS_URL, nonce_key_prefix=prefix)
    first = gateway_factory(config(backend, canned, tmp_path, signing=section))
    second = gateway_factory(config(backend, canned, tmp_path, signing=section))
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
        gateway_factory, backend: str, canned: str, tmp_path: Path):
    auth = {"api_keys": {"header": "X-API-Key", "keys": [{
                "sha256": hashlib.sha256(API_KEY.encode()).hexdigest(), "subject": "crm",
                "client_id": "crm", "scopes": ["aip"]}]},
            "routes": [{"path": "/pag/retrieve", "scopes": ["aip"]}]}
    gateway = gateway_factory(config(backend, canned, tmp_path, auth=auth,
                                     signing=signing_section(tmp_path, required=False)))
    content = body_bytes()
    assert answer(post(gateway, content), 401, "error")["error"]["code"] == "auth_failed"
    answer(post(gateway, content, {"x-api-key": API_KEY}), 200, "ok")
    answer(post(gateway, content, signed(content)), 200, "ok")  # the signature authenticates
    # A request that tries to sign is held to its signature, whatever else it carries.
    refused(post(gateway, content, {**signed(content, secret=b"y" * 32), "x-api-key": API_KEY}),
            401, "Invalid signature")


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


def test_each_ok_retrieve_stores_a_valid_access_event(gateway_factory, backend: str,
                                                      canned: str, tmp_path: Path):
    gateway = gateway_factory(config(backend, canned, tmp_path))
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
    assert [e["event_type"] for e in kept] == ["citation"]
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
        gateway_factory, backend: str, canned: str, tmp_path: Path):
    stream = f"test-aip-wiring-events-{secrets.token_hex(6)}"
    gateway = gateway_factory(config(backend, canned, tmp_path,
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
    broken = gateway_factory(config(backend, canned, tmp_path / "down", events=down))
    body = answer(post(broken, body_bytes()), 503, "error")
    assert body["error"] == {"code": "unavailable", "message": "Temporary failure; retry later."}
