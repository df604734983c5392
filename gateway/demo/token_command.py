"""`aigw token`: mint an access token signed by the demo issuer's key, for trying the gateway."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from gateway.auth.config import GrantSpec
from gateway.demo.issuer import load_issuer
from gateway.demo.tokens import mint_token

_GRANT = TypeAdapter(GrantSpec)


def add_token_parser(commands: argparse._SubParsersAction) -> None:
    token = commands.add_parser(
        "token", help="print a JWT signed by the demo issuer (config demo.issuer)",
        description="Mint an RS256 access token with the demo issuer's key and print it.",
    )
    token.add_argument("--config", "-c", required=True,
                       help="the config whose demo issuer signs the token")
    token.add_argument("--sub", default="demo-user", help="subject (default: demo-user)")
    token.add_argument("--client-id", default="demo-cli", help="client_id (default: demo-cli)")
    token.add_argument("--scope", default="", help='space-separated scopes, e.g. "a b"')
    token.add_argument("--grant", help='JSON object stream -> [fields] or "*", or @file with it')
    token.add_argument("--owner", action="store_true", help="an owner token (default: client)")
    token.add_argument("--ttl", type=_seconds, help="lifetime in seconds (default: config)")
    token.set_defaults(handler=cmd_token)


def cmd_token(args: argparse.Namespace) -> int:
    try:
        grant = _grant(args.grant) if args.grant is not None else None
    except ValueError as exc:
        print(f"--grant: {exc}", file=sys.stderr)
        return 2
    settings, key = load_issuer(args.config)
    print(mint_token(
        key, issuer=settings.url, audience=settings.audience, subject=args.sub,
        client_id=args.client_id or None, scopes=args.scope.split(),
        kind="owner" if args.owner else "client", grant=grant,
        ttl=args.ttl if args.ttl is not None else settings.ttl,
    ))
    return 0


def _grant(value: str) -> GrantSpec:
    """A grant from JSON text, or from the file named after an @."""
    if value.startswith("@"):
        try:
            value = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read {value[1:]}: {exc.strerror}") from None
    try:
        return _GRANT.validate_python(json.loads(value))
    except (json.JSONDecodeError, ValidationError):
        raise ValueError('expected a JSON object of stream -> list of fields or "*"') from None


def _seconds(text: str) -> int:
    value = int(text) if text.isdigit() else 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value
