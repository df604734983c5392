"""`aigw demo`: the help-centre backend, the demo token issuer and the gateway, in one process."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from gateway.console import load_or_exit
from gateway.demo.backend import create_app
from gateway.demo.issuer import create_issuer_app
from gateway.demo.keys import load_or_create_key
from gateway.observability import configure_logging
from gateway.private_files import open_private, private_folder
from gateway.server import listener, run
from gateway.settings import Settings

# Each command ends with the status it answers with, so it can be checked as printed.
_BANNER = """\
aigw demo
  gateway   {public}
  admin     {admin}   (/metrics, /healthz, /readyz)
  backend   {backend}   (the "legacy" help-centre API)
  issuer    {issuer}   (demo OAuth token issuer)

The gateway passes every path it does not serve itself to the backend, once auth admits it.
Try:
  curl -s '{public}/api/v1/articles/search?q=refund&limit=3'   # 401: no token
  curl -s -H "Authorization: Bearer $({aigw} token --config {config} --scope articles:read)" \\
       '{public}/api/v1/articles/search?q=refund&limit=3'   # 200
  curl -s -H "Authorization: Bearer $({aigw} token --config {config} --scope articles:read)" \\
       '{public}/api/v1/users/u-001/messages?limit=2'   # 403: needs messages:read
  curl -s -u demo-agent:{agent_secret} -d grant_type=client_credentials '{issuer}/token'   # 200
  curl -s -H 'X-API-Key: demo-legacy-key' '{public}/api/v1/articles/art-0001'   # 200
  curl -s '{public}/.well-known/oauth-protected-resource'   # 200
  curl -s '{public}/.well-known/ai'   # 200

AIDRE: text and vector search over the same legacy API, translated by config/demo.yaml:
  curl -s '{public}/.well-known/ai-discovery'   # 200
  curl -s -X POST '{public}/search' -H 'content-type: application/aidre+json' \\
       -d '{{"query": "refund for a damaged item", "collection": "articles", "top_k": 3}}'   # 200
  curl -s -X POST '{public}/search' -H 'content-type: application/aidre+json' \\
       -d "{{\\"collection\\": \\"articles\\", \\"embedding_space\\": \\"{space}\\", \\
            \\"top_k\\": 3, \\"query_vector\\": $(curl -s -X POST '{public}/api/v1/embed' \\
       -H "Authorization: Bearer $({aigw} token --config {config} --scope articles:read)" \\
       -H 'content-type: application/json' -d '{{"text": "reset my password"}}' \\
       | {python} -c 'import json,sys; print(json.load(sys.stdin)["embedding"])')}}"   # 200
  curl -s '{public}/chunks/articles:art-0001'   # 200
  curl -s '{admin}/readyz'   # 200

PDPP: user u-001's messages and the articles as streams, searched lexically and semantically;
an owner call, a client grant narrowed to message subjects and dates, and a refused field:
  curl -s -H "Authorization: Bearer $({aigw} token --config {config} --sub u-001 --owner)" \
       '{public}/v1/streams/messages/records?limit=2'   # 200
  curl -s -H "Authorization: Bearer $({aigw} token --config {config} --sub u-001 \
       --grant '{{"messages": ["id", "subject", "sent_at"]}}')" \
       '{public}/v1/search?q=refund&limit=3'   # 200
  curl -s -H "Authorization: Bearer $({aigw} token --config {config} --sub u-001 \
       --grant '{{"messages": ["id", "subject", "sent_at"]}}')" \
       '{public}/v1/streams/messages/records?fields=body'   # 403

AIP 0.1: the publisher declaration, then an ok, a denied (out of scope) and an error call:
  curl -s '{public}/.well-known/aip.json'   # 200
  curl -s -X POST '{public}/pag/retrieve' -H 'content-type: application/json' \
       -d '{aip_ok}'   # 200
  curl -s -X POST '{public}/pag/retrieve' -H 'content-type: application/json' \
       -d '{aip_denied}'   # 403
  curl -s -X POST '{public}/pag/retrieve' -H 'content-type: application/json' \
       -d '{aip_error}'   # 400
A signed retrieve (X-AIP-* headers from `aigw aip sign`; the response is signed too), then the
access events it recorded:
  curl -s -X POST '{public}/pag/retrieve' -H 'content-type: application/json' \\
       --data-binary @{aip_body} \\
       -H @<({aigw} aip sign --key-id demo-platform --secret-file {aip_secret} \\
       --body {aip_body})   # 200
  {aigw} aip events --config {config} --limit 3

MCP: the same surfaces as tools for agents (JSON-RPC 2.0 over streamable HTTP at /mcp, and
/mcp/aidre, /mcp/pdpp, ... per surface); tools/list, then a tool call, which goes through the
route it wraps (here AIDRE search):
  curl -s -X POST '{public}/mcp' -H 'content-type: application/json' \
       -H 'accept: application/json, text/event-stream' \
       -d '{{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}'   # 401: no token
  curl -s -X POST '{public}/mcp' -H 'content-type: application/json' \
       -H 'accept: application/json, text/event-stream' \
       -H "Authorization: Bearer $({aigw} token --config {config} --scope articles:read)" \
       -d '{{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {{"name": \
       "aidre_search", "arguments": {{"query": "refund for a damaged item", "top_k": 2}}}}}}' \
       # 200

Check the whole deployment against the five specs, MCP and A2A, a table per spec with a score
(`--json` for CI; exit 1 on any MUST failure):
  AIGW_CHECK_TOKEN=$({aigw} token --config {config} --owner --sub u-001 \
       --scope 'articles:read messages:read tasks:run') \
  {aigw} check {public} --aip-key demo-platform:{aip_secret} --aip-platform demo-assistant

Ctrl-C stops everything.
"""


def _aip_request(domain: str, query: str) -> str:
    return json.dumps({
        "aip_version": "0.1", "request_id": f"demo-{domain}", "timestamp": "2026-01-15T14:30:00Z",
        "platform": {"id": "demo-assistant"}, "intent": {"domain": domain},
        "context": {"language": "en-US", "placement": "conversation"},
        "runtime": {"session_id": "demo", "turn_index": 0, "query_text": query},
    })


def run_demo(config_path: str, backend_port: int, ports: dict[str, str] | None = None) -> int:
    """Serve the demo; `ports` (AIGW_PORT, AIGW_ADMIN_PORT, AIGW_ISSUER_PORT) override the
    environment the config reads, and the printed commands carry them."""
    os.environ.update(ports or {})
    os.environ.setdefault("AIGW_DEMO_BACKEND", f"http://127.0.0.1:{backend_port}")
    state = Path(config_path).resolve().parent.parent / ".aigw"  # beside the issuer's key
    os.environ.setdefault("AIGW_DEMO_EVENTS", str(state / "aip-events.jsonl"))
    private_folder(state)
    aip_body = state / "demo-aip-request.json"
    descriptor = open_private(aip_body, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(_aip_request("support.returns", "how do I return an item"))
    loaded = load_or_exit(config_path)
    settings = loaded.settings
    configure_logging(settings.logging.level)
    taken = _taken_ports(settings, backend_port)
    if taken:
        print("aigw demo: " + "; ".join(taken) + ". Stop what uses it, or choose another "
              "port (make demo PORT=… ADMIN_PORT=… ISSUER_PORT=… BACKEND_PORT=…).",
              file=sys.stderr)
        return 2
    companions = [listener(create_app(), "127.0.0.1", backend_port)]
    issuer_url = "(none configured)"
    if settings.demo is not None and settings.demo.issuer is not None:
        issuer = settings.demo.issuer
        key = load_or_create_key(loaded.path.parent / issuer.key_file)
        companions.append(listener(create_issuer_app(issuer, key), "127.0.0.1", issuer.port))
        issuer_url = issuer.url
    print(_BANNER.format(
        public=f"http://{settings.listen.host}:{settings.listen.port}",
        admin=f"http://{settings.admin.host}:{settings.admin.port}",
        backend=os.environ["AIGW_DEMO_BACKEND"], issuer=issuer_url,
        aigw=_aigw_command(ports or {}), config=Path(config_path).resolve(), python=sys.executable,
        aip_ok=_aip_request("support.billing", "refund for a damaged item"),
        aip_denied=_aip_request("finance.markets", "best index funds"),
        aip_error=json.dumps({"aip_version": "0.1", "request_id": "demo-error"}),
        aip_body=aip_body, aip_secret=_aip_secret_file(settings),
        agent_secret=_client_secret(settings, "demo-agent"), space=_embedding_space(settings),
    ), flush=True)
    run(loaded, companions=companions)
    return 0


def _taken_ports(settings: Settings, backend_port: int) -> list[str]:
    """Each port the demo listens on that something else holds, said with its flag; checked
    before the banner, so a taken port is one clear line rather than a traceback."""
    wanted = [("gateway", settings.listen.host, settings.listen.port, "--port"),
              ("admin", settings.admin.host, settings.admin.port, "--admin-port"),
              ("backend", "127.0.0.1", backend_port, "--backend-port")]
    if settings.demo is not None and settings.demo.issuer is not None:
        wanted.append(("issuer", "127.0.0.1", settings.demo.issuer.port, "--issuer-port"))
    return [f"the {name} port {host}:{port} is taken ({flag})"
            for name, host, port, flag in wanted if not _free(host, port)]


def _free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _client_secret(settings: Settings, client_id: str) -> str:
    """A demo client's secret (generated on this machine), for the printed commands."""
    issuer = settings.demo.issuer if settings.demo is not None else None
    client = issuer.clients.get(client_id) if issuer is not None else None
    return client.secret.get_secret_value() if client is not None else "SECRET"


def _embedding_space(settings: Settings) -> str:
    """The id of the demo's (first) AIDRE embedding space, for the printed vector search."""
    spaces = getattr(getattr(settings, "aidre", None), "embedding_spaces", None)
    return spaces[0].id if spaces else "SPACE"


def _aip_secret_file(settings: Settings) -> str:
    """Where the demo platform's AIP signing secret is kept (generated on this machine)."""
    signing = getattr(getattr(settings, "aip", None), "signing", None)
    key = signing.keys.get("demo-platform") if signing is not None else None
    return str(key.secret_file) if key is not None and key.secret_file else "SECRET_FILE"


def _aigw_command(ports: dict[str, str]) -> str:
    """The aigw next to this Python, so the printed commands work without activating the venv,
    with the ports the demo was given (its `token` reads the issuer's URL from the config)."""
    beside = Path(sys.executable).parent / "aigw"
    command = str(beside) if beside.exists() else "aigw"
    issuer = os.environ.get("AIGW_ISSUER_PORT")
    return f"AIGW_ISSUER_PORT={issuer} {command}" if issuer else command
