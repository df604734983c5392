"""The error reference: every code the source raises (`raised.scan`), and what each surface
answers for it, found by rendering each one through the surface's own error renderer as the
demo config mounts it (so a change to a surface's code table shows here by itself)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from starlette.requests import Request

from gateway.context import RequestContext
from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.loader import load_config
from gateway.runtime import Generation, Runtime
from gateway.surface import Mount, gateway_error_response
from refgen.markdown import GENERATED, code, table, text
from refgen.raised import KNOWN_INDIRECT, Site, scan

TITLES = {"aidre": "AIDRE", "aip": "AIP", "aidip": "AIDIP (and A2A's HTTP refusals)",
          "pdpp": "PDPP", "mcp": "MCP (before a tool runs)", "aiendpoint": "AI Discovery Endpoint"}
GATEWAY = "The gateway's own dialect"

INTRO = """\
Every failure answers in the error dialect of the surface that owns the path, with a stable
machine-readable code and the request id, never a stack trace, an upstream body or a
credential ([the pipeline](../explanation/pipeline.md)). The gateway and its surfaces raise
the codes in the first table; each surface then renders them in its own vocabulary, as the
tables after it show. A path no surface owns (the passthrough) answers in the gateway's own
dialect: `{"error": {"code", "message", "request_id", "details"?}}`.

The codes are read from the source (`docs/refgen/raised.py` finds every `GatewayError`,
policy `Decision`, AIP `Denial` and `SigningFailure` the package makes) and each surface's
answer by rendering that code through the surface's own error renderer, as `config/demo.yaml`
mounts it. Requests the listener refuses before the app (malformed HTTP, 408, 431) answer in the
gateway's own dialect ([Operations](../how-to/operations.md#listener-limits)).
"""


def page(package: Path, demo_config: Path) -> str:
    sites, unresolved = scan(package)
    unknown = [u.where for u in unresolved if u.where not in KNOWN_INDIRECT]
    if unknown:
        raise ValueError(f"error sites whose code cannot be read: {unknown}; read them in "
                         "docs/refgen/raised.py or list them in KNOWN_INDIRECT")
    out = ["# Error codes\n", GENERATED, INTRO, "## Codes the gateway raises\n",
           _raised_table(sites)]
    generation = Runtime(load_config(demo_config)).current
    own_dialect = [m for m in generation.mounts if m.render_error is gateway_error_response]
    for mount in generation.mounts:
        if mount in own_dialect:
            continue
        out.append(f"## {TITLES.get(mount.name, mount.name.upper())}\n")
        out.append(f"Paths: {', '.join(code(p) for p in _paths(mount))}.\n")
        out.append(_answers_table(mount.render_error, _paths(mount), generation,
                                  [s for s in sites if s.owner in ("core", mount.name)]))
    out.append(f"## {GATEWAY}\n")
    served = [p for m in own_dialect for p in _paths(m)]
    out.append("The passthrough, the gateway's core documents (RFC 9728 metadata, the OpenAPI "
               f"document) and {', '.join(code(p) for p in served)}.\n")
    out.append(_answers_table(gateway_error_response, ["/"], generation,
                              [s for s in sites if s.owner == "core"]))
    return "\n".join(out)


def _raised_table(sites: list[Site]) -> str:
    grouped: dict[tuple[str, int | None, str, str], list[Site]] = defaultdict(list)
    for site in sites:
        grouped[(site.owner, site.status, site.code, site.kind)].append(site)
    rows = []
    for (owner, status, name, kind), found in sorted(grouped.items(), key=_order):
        where = sorted({f"{s.module.removeprefix('gateway.')}" for s in found})
        messages = list(dict.fromkeys(s.message for s in found if s.message))[:3]
        kind_note = {"denial": " (AIP denial)", "signing": " (AIP signature)"}.get(kind, "")
        rows.append((code(name) + kind_note, str(status) if status is not None else "403/429",
                     owner, ", ".join(code(w) for w in where),
                     text(" / ".join(messages))))
    return table(("code", "status", "raised by", "where", "message"), rows)


def _order(item: tuple[tuple[str, int | None, str, str], Any]) -> tuple[Any, ...]:
    (owner, status, name, kind), _ = item
    return (owner != "core", owner, status or 0, name, kind)


def _paths(mount: Mount) -> list[str]:
    found = [getattr(route, "path", None) for route in mount.routes]
    return list(dict.fromkeys([*(p for p in found if p), *mount.documents]))


def _answers_table(render: Callable[[GatewayError, Exchange], Any], paths: list[str],
                   generation: Generation, sites: list[Site]) -> str:
    rows = []
    for (status, name, kind), message in _distinct(sites).items():
        answers: dict[str, list[str]] = defaultdict(list)
        for path in paths:
            error = _error(kind, status, name, message)
            response = render(error, _exchange(path, generation))
            answers[_answer(response.status_code, response.body)].append(path)
        if len(answers) == 1:
            shown = next(iter(answers))
        else:
            shown = "; ".join(f"{', '.join(code(p) for p in where)}: {answer}"
                              for answer, where in answers.items())
        rows.append((code(name), str(status) if status is not None else "403/429", shown))
    return table(("raised as", "status", "answered"), rows)


def _distinct(sites: list[Site]) -> dict[tuple[int | None, str, str], str]:
    found: dict[tuple[int | None, str, str], str] = {}
    for site in sorted(sites, key=lambda s: (s.status or 0, s.code)):
        found.setdefault((site.status, site.code, site.kind), site.message or "…")
    return found


def _error(kind: str, status: int | None, name: str, message: str) -> GatewayError:
    if kind == "denial":
        from gateway.surfaces.aip.policy import Denial
        from gateway.surfaces.aip.signed import Denied
        return Denied(Denial(name, message))
    if kind == "signing":
        from gateway.surfaces.aip.gate import SignatureRefused
        from gateway.surfaces.aip.signing import SigningFailure
        return SignatureRefused(SigningFailure(name, status or 401, message))
    return GatewayError(status or 500, name, message)


def _exchange(path: str, generation: Generation) -> Exchange:
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": [], "scheme": "http", "root_path": "",
             "http_version": "1.1", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    ctx = RequestContext("<request id>", "POST", path, "127.0.0.1", route=path)
    return Exchange(Request(scope), ctx, generation)


def _answer(status: int, body: bytes) -> str:
    """The status and the code a client reads in the body, in the body's own words."""
    try:
        document = json.loads(body)
    except ValueError:
        return f"{status}"
    return f"{status} " + " ".join(_codes(document))


def _codes(document: Any) -> Iterator[str]:
    if not isinstance(document, dict):
        return
    if isinstance(document.get("denial"), dict):
        yield f"`status: denied`, `reason: {document['denial'].get('reason')}`"
        return
    error = document.get("error")
    prefix = "`status: error`, " if document.get("status") == "error" else ""
    if isinstance(error, str):
        yield f"`error: {error}`"
        reason = (document.get("details") or {}).get("reason")
        if reason:
            yield f"(`details.reason: {reason}`)"
    elif isinstance(error, dict):
        number = error.get("code")
        if isinstance(number, int):
            yield f"JSON-RPC `{number}`, `data.code: {(error.get('data') or {}).get('code')}`"
        else:
            yield f"{prefix}`code: {number}`"
            if error.get("type"):
                yield f"(`type: {error['type']}`)"
