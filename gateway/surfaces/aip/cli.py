"""`aigw aip sign` (signed-request headers or a ready curl command) and `aigw aip events`."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.loader import ConfigIssue, _read_yaml
from gateway.surfaces.aip.events import EventSinkUnavailable, create_sink
from gateway.surfaces.aip.signing import sign
from gateway.surfaces.aip.signing_config import Events


def add_aip_parser(commands: argparse._SubParsersAction) -> None:
    aip = commands.add_parser("aip", help="Agentic Intent Protocol tools: sign, events")
    tools = aip.add_subparsers(dest="aip_command", required=True)

    signer = tools.add_parser(
        "sign", help="print X-AIP-* headers (or a curl command) for a signed request",
        description="Sign one request the way the gateway verifies it. The secret is read from "
        "an environment variable or a file, never from the command line.",
    )
    signer.add_argument("--key-id", required=True, help="X-AIP-Key-Id")
    secret = signer.add_mutually_exclusive_group(required=True)
    secret.add_argument("--secret-env", metavar="VAR", help="variable holding the secret")
    secret.add_argument("--secret-file", metavar="FILE", help="file holding the secret")
    signer.add_argument("--method", default="POST", help="request method (default: POST)")
    signer.add_argument("--path", default="/pag/retrieve", help="request path (and query)")
    signer.add_argument("--body", metavar="FILE", help="request body file, - for stdin")
    signer.add_argument("--version", default="1.0", help="X-AIP-Version (default: 1.0)")
    signer.add_argument("--url", help="gateway base URL: print a curl command instead")
    signer.set_defaults(handler=cmd_sign)

    events = tools.add_parser("events", help="print stored AIP events, oldest first, one a line")
    events.add_argument("--config", "-c", required=True,
                        help="the config whose aip.events sink to read")
    events.add_argument("--limit", type=int, help="only the newest N events")
    events.set_defaults(handler=cmd_events)


def cmd_sign(args: argparse.Namespace) -> int:
    try:
        secret = _secret(args.secret_env, args.secret_file)
        body = _body(args.body)
    except ValueError as exc:
        print(f"aigw aip sign: {exc}", file=sys.stderr)
        return 2
    headers = sign(secret, args.key_id, args.method, args.path, body, version=args.version)
    if args.url:
        print(curl_command(args.url, args.method, args.path, headers, args.body))
    else:
        print("\n".join(f"{name}: {value}" for name, value in headers.items()))
    return 0


def curl_command(base_url: str, method: str, path: str, headers: dict[str, str],
                 body_file: str | None) -> str:
    """A copy-paste curl command sending the signed request (also for the demo banner)."""
    parts = ["curl", "-sS", "-X", method.upper(), base_url.rstrip("/") + path]
    if body_file:
        parts += ["-H", "Content-Type: application/json", "--data-binary", "@" + body_file]
    for name, value in headers.items():
        parts += ["-H", f"{name}: {value}"]
    return " ".join(shlex.quote(part) for part in parts)


def _secret(env: str | None, file: str | None) -> bytes:
    if env is not None:
        value = os.environ.get(env)
        if not value:
            raise ValueError(f"environment variable {env} is not set")
        return value.encode()
    try:
        return Path(str(file)).read_bytes().removesuffix(b"\n").removesuffix(b"\r")
    except OSError as exc:
        raise ValueError(f"cannot read {file}: {exc.strerror}") from None


def _body(name: str | None) -> bytes:
    if not name:
        return b""
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {name}: {exc.strerror}") from None


def cmd_events(args: argparse.Namespace) -> int:
    events = _events_config(args.config)
    if events is None:
        return 1
    try:
        stored = asyncio.run(_read(events, args.limit))
    except (EventSinkUnavailable, OSError, ValueError) as exc:
        print(f"aigw aip events: cannot read events: {type(exc).__name__}", file=sys.stderr)
        return 1
    for event in stored:
        print(json.dumps(event, sort_keys=True))
    return 0


async def _read(events: Events, limit: int | None) -> list[dict[str, Any]]:
    sink = create_sink(events)
    try:
        return await sink.read(limit)
    finally:
        await sink.aclose()


def _events_config(path: str) -> Events | None:
    """Only the `aip.events` section: reading events needs no signing secrets in the env."""
    issues: list[ConfigIssue] = []
    raw = _read_yaml(Path(path), os.environ, issues)
    aip = (raw or {}).get("aip") or {}
    section = (aip.get("events") or {}) if isinstance(aip, dict) else aip
    try:
        return Events.model_validate(section) if not issues else None
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in ("aip", "events", *error["loc"]))
            issues.append(ConfigIssue(path, where, error["msg"].removeprefix("Value error, ")))
        return None
    finally:
        for issue in issues:
            print(issue, file=sys.stderr)
