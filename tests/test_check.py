"""`aigw check URL` over real HTTP: the demo passes it; a conformant origin that is not aigw
passes it; an origin breaking one MUST fails it, naming that rule; a hostile origin gets
nothing it should not (no request to another origin, no unbounded read, no endless wait)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest
from check_origin import API_KEY, BROKEN, TOKEN
from processes import ROOT, Process, counting_http_server, free_port, wait_for_http

from gateway.check import SPEC_KEYS, aip
from gateway.check.bounded import BoundedTransport, TooLarge, Unreadable
from gateway.check.http import MAX_BYTES, new_client
from gateway.check.runner import CHECKS
from gateway.cli import main

SERVED_BY_THE_DEMO = {"aiendpoint", "aidre", "aip", "pdpp", "aidip", "a2a"}


@pytest.fixture(scope="module")
def origins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """tests/check_origin.py once per case: {case: origin URL}."""
    logs = tmp_path_factory.mktemp("check-origins")
    ports = logs / "ports.json"
    process = Process([sys.executable, str(ROOT / "tests" / "check_servers.py"), str(ports)],
                      logs, "check-servers")
    deadline = time.monotonic() + 20
    while not ports.exists() and time.monotonic() < deadline:
        assert process.popen.poll() is None, process.stderr()
        time.sleep(0.05)
    yield {case: f"http://127.0.0.1:{port}" for case, port in json.loads(ports.read_text()).items()}
    process.stop()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`aigw demo` (backend, token issuer, gateway on config/demo.yaml) from a fresh copy of
    the shipped config and policies, with its state and index in a folder of its own."""
    root = tmp_path_factory.mktemp("check-demo")
    shutil.copytree(ROOT / "config", root / "config")
    shutil.copytree(ROOT / "policies", root / "policies")
    port, admin, issuer = free_port(), free_port(), free_port()
    env = {name: value for name, value in os.environ.items() if not name.startswith("AIGW_")}
    env |= {"PYTHONUNBUFFERED": "1", "AIGW_INDEX_DIR": str(root / "index"),
            "AIGW_ISSUER_PORT": str(issuer)}
    config = root / "config" / "demo.yaml"
    with (root / "demo.out").open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "demo", "--config", str(config), "--port",
             str(port), "--admin-port", str(admin), "--issuer-port", str(issuer),
             "--backend-port", str(free_port())],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for_http(f"http://127.0.0.1:{admin}/readyz", timeout=30, process=process)
            yield {"url": f"http://127.0.0.1:{port}", "config": config, "env": env,
                   "state": root / ".aigw"}
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def aigw(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def check(capsys: pytest.CaptureFixture, url: str, *args: str) -> tuple[int, dict[str, Any]]:
    """`aigw check URL --json ARGS` in this process (the CLI's own entry point)."""
    capsys.readouterr()
    code = main(["check", url, "--json", "--timeout", "5", *args])
    return code, json.loads(capsys.readouterr().out)


def test_the_demo_passes(demo: dict[str, Any]):
    token = aigw("token", "--config", str(demo["config"]), "--sub", "u-001", "--owner",
                 "--scope", "articles:read messages:read tasks:run", env=demo["env"])
    assert token.returncode == 0, token.stderr
    secret = demo["state"] / "demo-aip-platform.secret"
    result = aigw("check", demo["url"], "--json", "--token", token.stdout.strip(),
                  "--aip-key", f"demo-platform:{secret}", "--aip-platform", "demo-assistant",
                  env=demo["env"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert [spec["spec"] for spec in report["specs"]] == list(SPEC_KEYS)
    served = {spec["spec"] for spec in report["specs"] if spec["served"]}
    assert served >= SERVED_BY_THE_DEMO
    assert report["exit_code"] == 0 and report["must_failures"] == []
    signing = {rule["id"]: rule["result"] for spec in report["specs"]
               for rule in spec["rules"] if rule["id"].startswith("aip.signing.")}
    assert set(signing.values()) == {"pass"}, signing
    assert token.stdout.strip() not in result.stdout + result.stderr
    print("SHOULD failures against the demo:", report["should_failures"])


def test_a_conformant_origin_that_is_not_aigw_passes_every_spec(origins: dict[str, str]):
    result = aigw("check", origins["good"], "--token", TOKEN)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    text = result.stdout
    assert "0 MUST failure(s), 0 SHOULD failure(s): exit 0" in text
    for spec, _ in CHECKS:
        assert f"{spec.title} ({spec.document}): http://" in text
    assert " fail " not in text
    assert "pass  MUST    mcp.initialize" in text and "pass  MUST    mcp.tools.list" in text


@pytest.mark.parametrize(("case", "rule"), sorted(BROKEN.items()))
def test_an_origin_breaking_one_must_fails_naming_it(
        capsys: pytest.CaptureFixture, origins: dict[str, str], case: str, rule: str):
    code, report = check(capsys, origins[case], "--token", TOKEN)
    assert code == 1 and report["exit_code"] == 1
    assert report["must_failures"] == [rule]
    [failed] = [r for s in report["specs"] for r in s["rules"] if r["result"] == "fail"
                and r["level"] == "MUST"]
    assert failed["section"] and failed["message"]


def test_discovery_without_cors_fails_the_should_rules_only(capsys: pytest.CaptureFixture,
                                                             origins: dict[str, str]):
    code, report = check(capsys, origins["no_cors"], "--token", TOKEN)
    assert code == 0 and report["must_failures"] == []
    assert set(report["should_failures"]) == {
        "aiendpoint.cors", "aidre.discovery.cors", "aip.policy.cors", "pdpp.metadata.cors",
        "a2a.card.cors"}


def test_without_credentials_the_token_checks_are_skipped_not_failed(
        capsys: pytest.CaptureFixture, origins: dict[str, str]):
    code, report = check(capsys, origins["good"], "--only", "pdpp,mcp")
    assert code == 0 and report["must_failures"] == []
    skipped = {r["id"]: r["message"] for s in report["specs"] for r in s["rules"]
               if r["result"] == "skip"}
    assert "pass an owner or grant token" in skipped["pdpp.records.list"]
    assert "pass --token" in skipped["mcp.initialize"]
    assert "mcp.auth.challenge" not in skipped  # that one needs no token


def test_an_api_key_goes_in_the_header_named(capsys: pytest.CaptureFixture,
                                             origins: dict[str, str]):
    code, report = check(capsys, origins["good"], "--only", "pdpp", "--api-key", API_KEY,
                         "--api-key-header", "X-Fixture-Key")
    assert code == 0
    results = {r["id"]: r["result"] for r in report["specs"][0]["rules"]}
    assert results["pdpp.records.list"] == results["pdpp.search.lexical"] == "pass"


def test_a_silent_origin_serves_nothing_and_fails_nothing(capsys: pytest.CaptureFixture):
    with counting_http_server(b"{}", "application/json") as (url, _):
        pass  # closed: nothing listens there any more
    code, report = check(capsys, url, "--only", "aiendpoint")
    assert code == 1 and report["must_failures"] == ["aiendpoint.status"]
    [rule] = [r for r in report["specs"][0]["rules"] if r["id"] == "aiendpoint.status"]
    assert "connection" in rule["message"]


class _Hostile(BaseHTTPRequestHandler):
    """/.well-known/ai redirects to another origin; /ai is larger than the checker reads."""

    elsewhere = ""

    def do_GET(self) -> None:
        if self.path == "/.well-known/ai":
            self.send_response(302)
            self.send_header("Location", self.elsewhere + "/.well-known/ai")
            self.end_headers()
        elif self.path == "/.well-known/ai-discovery":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"version": "' + b"x" * (MAX_BYTES + 10) + b'"}')
        elif self.path == "/.well-known/aip.json":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{")
            self.wfile.flush()
            time.sleep(3)  # never finishes within --timeout
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def hostile(elsewhere: str) -> Iterator[str]:
    handler = type("Handler", (_Hostile,), {"elsewhere": elsewhere})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_hostile_origin_gets_no_request_elsewhere_no_unbounded_read_no_endless_wait(
        capsys: pytest.CaptureFixture):
    with counting_http_server(b"{}", "application/json") as (elsewhere, hits), \
            hostile(elsewhere.replace("127.0.0.1", "localhost")) as url:
        started = time.monotonic()
        code = main(["check", url, "--json", "--timeout", "1", "--token", "secret",
                     "--only", "aiendpoint,aidre,aip"])
        report = json.loads(capsys.readouterr().out)
        assert time.monotonic() - started < 10
    assert hits == []  # the redirect to another origin was not followed
    rules = {r["id"]: r["message"] for s in report["specs"] for r in s["rules"]}
    assert "redirect to another origin" in rules["aiendpoint.status"]
    assert f"body larger than {MAX_BYTES} bytes" in rules["aidre.discovery.version"]
    assert "no answer within 1 s" in rules["aip.policy.status"]
    assert code == 1


def test_an_mcp_answer_of_a_gigabyte_is_read_to_the_bound_only(
        origins: dict[str, str], tmp_path: Path):
    """The MCP step reads through the SDK's client: its answers go through the same bound
    as the checker's own, so 1 GiB of JSON ends the step at 2 MiB, with a clear failure, and
    the process stays small (its peak resident size since exec: tests/peak_memory.py)."""
    started = time.monotonic()
    with (tmp_path / "out").open("w+") as out, (tmp_path / "err").open("w+") as err:
        peak = tmp_path / "peak"
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "peak_memory.py"), str(peak), "check",
             origins["mcp_huge_answer"], "--json", "--only", "mcp", "--token", TOKEN,
             "--timeout", "20"], cwd=ROOT, stdout=out, stderr=err)
        code = process.wait(120)
        peak_kib = int(peak.read_text())
        out.seek(0), err.seek(0)
        report, errors = json.loads(out.read()), err.read()
    rules = {r["id"]: (r["result"], r["message"]) for s in report["specs"] for r in s["rules"]}
    assert peak_kib < 300 * 1024, f"peak RSS {peak_kib // 1024} MiB"
    assert rules["mcp.initialize"] == ("fail", "answer larger than 2 MiB"), errors[-2000:]
    assert code == 1
    assert time.monotonic() - started < 60  # the stream was not read to its end


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_the_bound_holds_after_decoding_and_a_small_answer_still_decodes(coding: str):
    def packed(size: int) -> bytes:
        packer = zlib.compressobj(wbits=31 if coding == "gzip" else 15)
        return packer.compress(b"0" * size) + packer.flush()

    bomb = packed(64 * MAX_BYTES)  # a few hundred KiB that decode to 128 MiB
    assert len(bomb) < MAX_BYTES // 4
    for body, expected in ((packed(1000), b"0" * 1000), (bomb, None)):
        answer = httpx2.MockTransport(lambda _, body=body: httpx2.Response(
            200, content=_streamed(body), headers={"Content-Encoding": coding}))
        bound = BoundedTransport(answer)
        async with new_client(5, transport=bound) as client:
            if expected is not None:
                assert (await client.get("http://origin.test/")).content == expected
                continue
            with pytest.raises(TooLarge):
                await client.get("http://origin.test/")
            assert bound.exceeded


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_bytes_after_a_compressed_answer_are_not_kept(coding: str):
    """zlib keeps whatever follows the end of a stream (unused_data), and the decoded size of
    those bytes is 0: the answer is refused as soon as they come, not read to its end."""
    packer = zlib.compressobj(wbits=31 if coding == "gzip" else 15)
    sent = 0

    async def junk_after_the_stream() -> AsyncIterator[bytes]:
        nonlocal sent
        yield packer.compress(b"{}") + packer.flush()
        for _ in range(16 * 1024):  # 1 GiB, made as it is read
            sent += 65536
            yield b"j" * 65536

    answer = httpx2.MockTransport(lambda _: httpx2.Response(
        200, content=junk_after_the_stream(), headers={"Content-Encoding": coding}))
    async with new_client(5, transport=BoundedTransport(answer)) as client:
        with pytest.raises(Unreadable):
            await client.get("http://origin.test/")
    assert sent <= 65536


async def _streamed(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 65536):
        yield body[start:start + 65536]


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture):
    assert main(["check", "http://127.0.0.1:9", "--only", "soap"]) == 2
    assert main(["check", "ftp://example.com"]) == 2
    assert main(["check", "http://user:pw@example.com"]) == 2
    assert main(["check", "http://127.0.0.1:9", "--aip-key", "no-file-named"]) == 2
    assert "--only" in capsys.readouterr().err


def test_help_names_every_option_and_spec(capsys: pytest.CaptureFixture):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = capsys.readouterr().out
    for word in ("--token", "--api-key", "--api-key-header", "--aip-key", "--timeout",
                 "--only", "--json", "Exit status", *SPEC_KEYS):
        assert word in text


def test_rules_have_stable_ids_levels_and_sections():
    ids = [rule.id for spec, _ in CHECKS for rule in spec.rules]
    assert len(ids) == len(set(ids))
    for spec, _ in CHECKS:
        for rule in spec.rules:
            assert rule.id.startswith(f"{spec.key}.") and rule.level in ("MUST", "SHOULD")
            assert rule.section and rule.title


def test_the_retrieve_request_the_checker_sends_is_valid():
    schema = json.loads((ROOT / "gateway/schemas/aip/retrieve-request.schema.json").read_text())
    jsonschema.validate(aip.request("support", "r-1"), schema)
    jsonschema.validate(aip.request(aip.OUT_OF_SCOPE, "r-2", "demo-assistant"), schema)
