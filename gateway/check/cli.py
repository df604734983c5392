"""`aigw check URL`: the command line of the conformance checker."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from gateway.check import SPEC_KEYS

DESCRIPTION = """\
Probe an origin (aigw or any other server) for the AI Discovery Endpoint, AIDRE, AIP 0.1,
PDPP, AIDIP, MCP and A2A: find what it serves from the well-known documents, validate each
document against the spec schemas shipped with aigw, and exercise the MUST-level behaviour a
client can see. Prints a table per spec (rule id, MUST/SHOULD, pass/fail/skip, spec section,
message) with a score. Exit status: 0 when no MUST rule fails, 1 when one does, 2 on a usage
error. Only the given origin is ever contacted; credentials are sent nowhere else."""

EPILOG = """\
secrets: --token and --api-key take the value, or @FILE to read it from a file; without the
flag, AIGW_CHECK_TOKEN and AIGW_CHECK_API_KEY are read from the environment.

examples:
  aigw check http://127.0.0.1:8080 --token "$(aigw token -c config/demo.yaml --scope articles:read)"
  aigw check https://api.example.com --only aidre --only pdpp --json > conformance.json
  aigw check http://127.0.0.1:8080 --aip-key demo-platform:.aigw/demo-aip-platform.secret \\
      --aip-platform demo-assistant"""


def add_check_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "check", help="check an origin's conformance to the specs aigw serves",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="the origin to check, e.g. https://api.example.com "
                        "(a path is ignored: the documents live at well-known paths)")
    parser.add_argument("--token", help="bearer token sent as Authorization: Bearer (or @FILE)")
    parser.add_argument("--api-key", help="API key sent in --api-key-header (or @FILE)")
    parser.add_argument("--api-key-header", default="X-API-Key",
                        help="header carrying --api-key (default: X-API-Key)")
    parser.add_argument("--aip-key", metavar="KEY_ID:SECRET_FILE",
                        help="an AIP platform key: its X-AIP-Key-Id and the file holding its "
                        "shared secret; turns on the signed-request checks")
    parser.add_argument("--aip-platform", default="aigw-check", metavar="ID",
                        help="the platform.id the AIP requests declare (the one --aip-key "
                        "speaks for; default: aigw-check)")
    parser.add_argument("--timeout", type=_seconds, default=10.0, metavar="SECONDS",
                        help="seconds allowed for each request, body included (default: 10)")
    parser.add_argument("--only", action="append", metavar="SPEC",
                        help=f"check only this spec (repeat or comma-separate): "
                        f"{', '.join(SPEC_KEYS)}")
    parser.add_argument("--json", action="store_true",
                        help="print the report as one JSON document (for CI)")
    parser.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from gateway.check.context import AipKey
    from gateway.check.http import Credentials
    from gateway.check.report import render_text
    from gateway.check.runner import Options, check

    try:
        url = _origin(args.url)
        only = _only(args.only or [])
        credentials = Credentials(_secret(args.token, "AIGW_CHECK_TOKEN"),
                                  _secret(args.api_key, "AIGW_CHECK_API_KEY"),
                                  args.api_key_header)
        aip_key = AipKey(*_aip_key(args.aip_key), args.aip_platform) if args.aip_key else None
    except ValueError as exc:
        print(f"aigw check: {exc}", file=sys.stderr)
        return 2
    options = Options(credentials, args.timeout, aip_key, only)
    report = asyncio.run(check(url, options))
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        print(render_text(report))
    return report.exit_code


def _origin(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// URL, not {url!r}")
    if parts.username or parts.password:
        raise ValueError("put credentials in --token or --api-key, not in the URL")
    return url


def _only(values: list[str]) -> tuple[str, ...]:
    keys = tuple(key.strip() for value in values for key in value.split(",") if key.strip())
    unknown = [key for key in keys if key not in SPEC_KEYS]
    if unknown:
        raise ValueError(f"--only: unknown spec {unknown[0]!r} (one of {', '.join(SPEC_KEYS)})")
    return keys


def _secret(value: str | None, variable: str) -> str | None:
    if value is None:
        return os.environ.get(variable) or None
    if value.startswith("@"):
        return _read(value[1:]).decode("utf-8", "replace").strip() or None
    return value or None


def _aip_key(value: str) -> tuple[str, bytes]:
    """KEY_ID:SECRET_FILE -> the key id and the secret the file holds."""
    key_id, _, path = value.partition(":")
    if not key_id or not path:
        raise ValueError("--aip-key takes KEY_ID:SECRET_FILE")
    secret = _read(path).removesuffix(b"\n").removesuffix(b"\r")
    if not secret:
        raise ValueError(f"--aip-key: {path} is empty")
    return key_id, secret


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 300:
        raise argparse.ArgumentTypeError(f"expected seconds between 0 and 300, not {text!r}")
    return value
