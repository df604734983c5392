"""`make fuzz`: generated requests against the demo, and the counts that must stay at zero.

Starts the demo (backend, token issuer, gateway: config/demo.yaml plus one private collection,
so the visibility oracle has something to guard) with a recording proxy between the gateway
and the backend. Sends schemathesis cases built from the OpenAPI document the gateway serves,
as every caller, then hypothesis-built raw requests over a plain socket, then the attack
classes of bench/fuzz_attacks.py (callers with unenforceable PDPP grants among them) and of
bench/fuzz_bounds.py (costly search queries, MCP tool arguments of wrong types), all while
threads hold MCP event streams open. Prints the counts of bench/fuzz_oracles.py and the event
loop's lag over the run, writes them to bench/results/fuzz-<UTC date>.txt, and exits 1
when any count but the first is not zero, the lag p99 reaches 50 ms or one tick was held
over 100 ms.

Usage: .venv/bin/python bench/fuzz.py [--schema-examples N] [--raw-examples N]
(generation is derandomized: the same code and config send the same requests)
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import schemathesis
import yaml
from fuzz_attacks import BAD_GRANTS, attack_requests
from fuzz_bounds import MCP_HEADERS, MCP_PATHS, StreamHolders, argument_requests, search_requests
from fuzz_oracles import COUNTS, Caller, Exchange, Oracles
from fuzz_raw import RawRequest, raw_requests, send
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from prom_histogram import Histogram, parse_histogram

from gateway.demo.keys import load_or_create_key
from gateway.demo.tokens import mint_token, sign_claims, token_claims
from gateway.loader import load_config

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
UNREACHED = "1000000/minute"
AIP_SECRET = REPO / ".aigw" / "demo-aip-platform.secret"  # made on the demo's first load
OPENAPI = "/.well-known/aigw/openapi.json"
LAG = "aigw_event_loop_lag_seconds"
MAX_LAG_P99 = 0.050
MAX_LAG = 0.1  # no one tick may be held longer: a bucket bound of the lag histogram
PDPP_GRANT = [{"type": "pdpp_grant", "streams": [
    {"name": "messages", "fields": ["id", "subject", "body", "sent_at"]}]}]
PRIVATE = {"description": "Staff-only escalation notes (fuzz).", "visibility": "private",
           "scopes": ["staff:read"]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"a process exited ({proc.returncode}) before {url} answered")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer within {timeout} s")


def fuzz_config(workdir: Path) -> Path:
    """config/demo.yaml with absolute paths and one private collection over the same API."""
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    config["policies"] = str(REPO / "policies")
    config["demo"]["issuer"]["key_file"] = str(REPO / ".aigw" / "demo-issuer.jwk.json")
    config["aip"]["signing"]["keys"]["demo-platform"]["secret_file"] = \
        "${generated_secret_file:" + str(AIP_SECRET) + "}"
    articles = config["aidre"]["collections"]["articles"]
    config["aidre"]["collections"]["staff_notes"] = {
        **PRIVATE, "text_search": articles["text_search"], "chunk": articles["chunk"]}
    config["aip"]["events"] = {"file": str(workdir / "aip-events.jsonl")}
    _unthrottled(config)
    config["logging"] = {"level": "warning", "access_log": False}
    path = workdir / "fuzz.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _unthrottled(config: dict) -> None:
    """Every rate-limit rule (and the failed-authentication limit) still runs, with quotas no
    run reaches: a 429 answers before the code under test, so it would hide what it guards."""
    for rule in config["rate_limits"]["rules"]:
        rule["limit"] = UNREACHED
        rule.pop("burst", None)
        for tier in rule.get("tiers") or ():
            tier["limit"] = UNREACHED
            tier.pop("burst", None)
    config["auth"]["failure_limit"] = {"limit": UNREACHED}


@contextmanager
def demo(workdir: Path) -> Iterator[tuple[str, Path, Path]]:
    """Backend, issuer and gateway (one `aigw demo` process) and the recorder in between."""
    ports = {name: free_port() for name in ("gateway", "admin", "issuer", "backend", "recorder")}
    os.environ.update({
        "AIGW_PORT": str(ports["gateway"]), "AIGW_ADMIN_PORT": str(ports["admin"]),
        "AIGW_ISSUER_PORT": str(ports["issuer"]),
        "AIGW_DEMO_BACKEND": f"http://127.0.0.1:{ports['recorder']}"})
    config, record = fuzz_config(workdir), workdir / "upstream.jsonl"
    record.touch()
    logs = (workdir / "demo.log").open("wb")
    recorder = subprocess.Popen(
        [sys.executable, str(BENCH / "recorder.py"), str(ports["recorder"]),
         f"http://127.0.0.1:{ports['backend']}", str(record)], stdout=logs, stderr=logs)
    gateway = subprocess.Popen(
        [sys.executable, "-m", "gateway", "demo", "--config", str(config),
         "--backend-port", str(ports["backend"])], stdout=logs, stderr=logs, cwd=REPO)
    try:
        url = f"http://127.0.0.1:{ports['gateway']}"
        wait_for(f"http://127.0.0.1:{ports['backend']}/api/v1/health", gateway)
        wait_for(f"http://127.0.0.1:{ports['recorder']}/api/v1/health", recorder)
        wait_for(f"http://127.0.0.1:{ports['admin']}/healthz", gateway)
        yield url, config, record
    finally:
        for proc in (gateway, recorder):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        logs.close()


def callers(config: Path) -> list[Caller]:
    settings = load_config(config).settings
    issuer = settings.demo.issuer
    key = load_or_create_key(Path(issuer.key_file))

    def jwt(subject: str, scopes: list[str]) -> Caller:
        token = mint_token(key, issuer=issuer.url, audience=issuer.audience, subject=subject,
                           client_id=subject, scopes=scopes, kind="client", grant=None, ttl=3600)
        return Caller(subject, {"Authorization": f"Bearer {token}"}, subject, frozenset(scopes))

    def bad_grant(name: str) -> Caller:
        claims = token_claims(issuer=issuer.url, audience=issuer.audience, subject=name,
                              client_id=name, scopes=["messages:read"], kind="client",
                              grant=None, ttl=3600)
        claims["authorization_details"] = BAD_GRANTS[name]
        token = sign_claims(key, claims)
        return Caller(name, {"Authorization": f"Bearer {token}"}, name,
                      frozenset({"messages:read"}), refused_grant=True)

    def pdpp(name: str, kind: str, grant: list[dict] | None) -> Caller:
        claims = token_claims(issuer=issuer.url, audience=issuer.audience, subject="u-001",
                              client_id=name, scopes=["messages:read"], kind=kind, grant=None,
                              ttl=3600)
        if grant is not None:
            claims["authorization_details"] = grant
        return Caller(name, {"Authorization": f"Bearer {sign_claims(key, claims)}"}, "u-001",
                      frozenset({"messages:read"}))

    return [
        Caller("anonymous", {}),
        pdpp("pdpp-owner", "owner", None),
        pdpp("pdpp-client", "client", PDPP_GRANT),
        Caller("bad-token", {"Authorization": "Bearer not-a-token"}),
        Caller("api-key", {"X-API-Key": "demo-legacy-key"}, "legacy-reporting",
               frozenset({"articles:read"})),
        jwt("demo-agent", ["articles:read", "messages:read", "tasks:run", "agents:register"]),
        jwt("vector-partner", ["vectors:read"]),
        jwt("staff", ["staff:read", "articles:read"]),
        *(bad_grant(name) for name in BAD_GRANTS),
    ]


def run_schemathesis(url: str, people: list[Caller], examples: int, record: Callable) -> None:
    """Each generated case is sent once as every caller."""
    schema = schemathesis.openapi.from_url(url + OPENAPI)
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation, mode in itertools.product(
            operations, (schemathesis.GenerationMode.POSITIVE,
                         schemathesis.GenerationMode.NEGATIVE)):
        _run_cases(url, operation, mode, people, examples, record)


def _run_cases(url: str, operation: schemathesis.APIOperation, mode: schemathesis.GenerationMode,
               people: list[Caller], examples: int, record: Callable) -> None:
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(mode))
    def call(case: schemathesis.Case) -> None:
        for caller in people:
            request_id = record.next_id()
            response = case.call(base_url=url, timeout=30,
                                 headers={**caller.headers, "X-Request-Id": request_id})
            sent = (response.request.url or "").encode() + _bytes(response.request.body)
            # The gateway keeps a client's id only from a trusted proxy: follow the one it used.
            headers = {k.lower(): v[0] for k, v in response.headers.items()}
            request_id = headers.get("x-request-id", request_id)
            record(Exchange(caller, case.method.upper(), response.request.path_url, request_id,
                            sent, response.status_code, headers,
                            response.content))

    with suppress(Unsatisfiable):  # negative mode: nothing to negate without inputs
        call()


def run_raw(port: int, people: list[Caller], examples: int, record: Callable,
            requests: st.SearchStrategy[RawRequest] | None = None) -> None:
    """Each generated request is sent once as every caller."""
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(request=requests if requests is not None else raw_requests())
    def call(request: RawRequest) -> None:
        for caller in people:
            request_id = record.next_id()
            try:
                status, headers, body = send(port, request, {**caller.headers,
                                                             "X-Request-Id": request_id})
            except (ConnectionError, TimeoutError, ValueError):  # counted: no answer at all
                status, headers, body = 0, {}, b""
            request_id = headers.get("x-request-id", request_id)
            record(Exchange(caller, request.method, request.target, request_id,
                            request.target.encode("latin-1") + request.body, status, headers,
                            body, request.must_refuse))

    call()


class Recorder:
    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self.streams_held = 0
        self._ids = itertools.count(1)

    def next_id(self) -> str:
        return f"fuzz-{next(self._ids)}"

    def __call__(self, exchange: Exchange) -> None:
        self.exchanges.append(exchange)


def _bytes(body: object) -> bytes:
    if body is None:
        return b""
    return body if isinstance(body, bytes) else str(body).encode()


def report(oracles: Oracles, started: float, lag: Histogram | None) -> str:
    counts = oracles.findings.counts
    lines = [f"aigw make fuzz, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
             f"{time.monotonic() - started:.0f} s", ""]
    labels = {"requests_sent": "requests sent", "server_errors": "5xx responses (or no answer)",
              "outside_envelope": "responses outside their surface's envelope",
              "not_for_caller": "responses with a field or record the caller may not see",
              "unauthenticated_upstream": "unauthenticated requests that reached the upstream",
              "accepted_attacks": "attack requests the gateway honoured"}
    lines += [f"{labels[name]:<58} {counts[name]:>7}" for name in COUNTS]
    lines += [f"{'event streams still open after 5 s':<58} {counts['streams_held']:>7}"]
    if lag is not None:
        lines += [f"{'event-loop lag p99 over the run (ms, must be < 50)':<58} "
                  f"{lag.quantile(0.99) * 1000:>7.1f}",
                  f"{'event-loop ticks held over 100 ms':<58} {lag.above(MAX_LAG):>7.0f}",
                  f"(event-loop lag: {lag.total:.0f} ticks, mean {lag.mean() * 1000:.2f} ms, "
                  f"largest in ({lag.largest()[0]}, {lag.largest()[1]}] s)"]
    lines += [f"(refused by the listener before any app ran, in the gateway's dialect: "
              f"{counts['server_rejected']}; upstream requests recorded: "
              f"{counts['upstream_seen']}; statuses: {dict(sorted(oracles.statuses.items()))})"]
    for kind, examples in oracles.findings.examples.items():
        lines += ["", f"{kind}, first {len(examples)}:", *(f"  {e}" for e in examples)]
    return "\n".join(lines) + "\n"


def loop_lag(admin: str) -> Histogram:
    found = parse_histogram(httpx.get(admin + "/metrics", timeout=30).text, LAG)
    if found is None:
        raise SystemExit(f"the gateway's /metrics has no {LAG}")
    return found


def mcp_tools(url: str, people: list[Caller]) -> dict[str, list[dict]]:
    """Each MCP endpoint's tools, as any of `people` is offered them."""
    found: dict[str, dict[str, dict]] = {}
    for path, caller in itertools.product(MCP_PATHS, people):
        answer = httpx.post(url + path, headers={**caller.headers, **dict(MCP_HEADERS)},
                            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
        if answer.status_code == 200:
            for tool in answer.json()["result"]["tools"]:
                found.setdefault(path, {})[tool["name"]] = tool
    return {path: list(tools.values()) for path, tools in found.items()}


def send_all(url: str, port: int, people: list[Caller], opts: argparse.Namespace,
             recorder: Recorder) -> None:
    started = time.monotonic()
    run_schemathesis(url, people, opts.schema_examples, recorder)
    print(f"schemathesis: {len(recorder.exchanges)} requests, "
          f"{time.monotonic() - started:.0f} s", flush=True)
    run_raw(port, people, opts.raw_examples, recorder)
    run_raw(port, people, opts.attack_examples, recorder, attack_requests(AIP_SECRET))
    run_raw(port, people, opts.search_examples, recorder, search_requests())
    tools = mcp_tools(url, people)
    run_raw(port, people, opts.argument_examples, recorder, argument_requests(tools))
    print(f"all: {len(recorder.exchanges)} requests, {time.monotonic() - started:.0f} s",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema-examples", type=int, default=150,
                        help="cases per operation and mode (positive, negative), each sent as "
                             "every caller")
    parser.add_argument("--raw-examples", type=int, default=1500,
                        help="raw requests, each sent as every caller")
    parser.add_argument("--attack-examples", type=int, default=400,
                        help="requests of the review's attack classes (bench/fuzz_attacks.py), "
                             "each sent as every caller")
    parser.add_argument("--search-examples", type=int, default=150,
                        help="long and many-term search queries (bench/fuzz_bounds.py), each "
                             "sent as every caller")
    parser.add_argument("--argument-examples", type=int, default=300,
                        help="MCP tool calls with an argument of a wrong JSON type, each sent as "
                             "every caller")
    opts = parser.parse_args(argv)
    started = time.monotonic()
    recorder = Recorder()
    with tempfile.TemporaryDirectory(prefix="aigw-fuzz-") as tmp, demo(Path(tmp)) as (
            url, config, record):
        people = callers(config)
        admin = f"http://127.0.0.1:{os.environ['AIGW_ADMIN_PORT']}"
        port = int(url.rsplit(":", 1)[1])
        lag_before = loop_lag(admin)
        with StreamHolders(port, people, recorder, recorder.next_id) as holders:
            send_all(url, port, people, opts, recorder)
        recorder.streams_held = holders.held
        lag = loop_lag(admin).minus(lag_before)
        time.sleep(0.5)  # the recorder's last lines
        openapi = httpx.get(url + OPENAPI).json()
        oracles = Oracles(load_config(config), openapi)
        entries = [json.loads(line) for line in record.read_text().splitlines()]
    upstream_ids = {entry["request_id"] for entry in entries if entry.get("request_id")}
    for exchange in recorder.exchanges:
        oracles.check(exchange, upstream_ids)
    for entry in entries:
        oracles.check_upstream(entry)
    oracles.findings.counts["streams_held"] = recorder.streams_held
    text = report(oracles, started, lag)
    print(text)
    results = BENCH / "results"
    results.mkdir(exist_ok=True)
    (results / f"fuzz-{dt.datetime.now(dt.UTC):%Y-%m-%d}.txt").write_text(text)
    counts = oracles.findings.counts
    failed = any(counts[name] for name in (*COUNTS[1:], "streams_held"))
    return 1 if failed or lag.quantile(0.99) >= MAX_LAG_P99 or lag.above(MAX_LAG) else 0


if __name__ == "__main__":
    sys.exit(main())
