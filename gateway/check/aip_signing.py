"""AIP message signing as a platform does it (AIP docs, "Authentication & Signing"), written
from the page rather than imported from the gateway's surface: the checker is a client.

Canonical string: method (a response's status code instead), request path with its query,
hex SHA-256 of the body, timestamp, nonce, joined by newlines; the signature is
`v1=` + base64(HMAC-SHA256(secret, canonical string)).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime

VERSION = "X-AIP-Version"
KEY_ID = "X-AIP-Key-Id"
TIMESTAMP = "X-AIP-Timestamp"
NONCE = "X-AIP-Nonce"
SIGNATURE = "X-AIP-Signature"
SIGNING_VERSION = "1.0"  # the page's X-AIP-Version (the 0.1 schemas' bodies say "0.1")
WINDOW = 300  # seconds a timestamp stays valid either way (the page's default)


def canonical(method: str, path: str, body: bytes, timestamp: str, nonce: str) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return "\n".join((method, path, digest, timestamp, nonce)).encode()


def signature(secret: bytes, text: bytes) -> str:
    return "v1=" + base64.b64encode(hmac.new(secret, text, hashlib.sha256).digest()).decode()


def sign(secret: bytes, key_id: str, method: str, path: str, body: bytes) -> dict[str, str]:
    """The five X-AIP-* headers of a signed request."""
    timestamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    nonce = secrets.token_urlsafe(24)
    return {VERSION: SIGNING_VERSION, KEY_ID: key_id, TIMESTAMP: timestamp, NONCE: nonce,
            SIGNATURE: signature(secret, canonical(method.upper(), path, body, timestamp,
                                                   nonce))}


def response_problem(secret: bytes, status: int, path: str, headers: Mapping[str, str],
                     body: bytes) -> str | None:
    """None when a signed response verifies, else what is wrong with it."""
    values = {name: headers.get(name, "") for name in (TIMESTAMP, NONCE, SIGNATURE)}
    missing = [name for name, value in values.items() if not value]
    if missing:
        return f"missing {', '.join(missing)}"
    expected = signature(secret, canonical(str(status), path, body, values[TIMESTAMP],
                                           values[NONCE]))
    if not hmac.compare_digest(expected.encode(), values[SIGNATURE].encode()):
        return "the response signature does not verify with the key"
    try:
        moment = datetime.fromisoformat(values[TIMESTAMP].replace("Z", "+00:00"))
        age = abs((datetime.now(UTC) - moment).total_seconds())
    except (ValueError, TypeError):
        return f"malformed {TIMESTAMP}"
    return None if age <= WINDOW else f"{TIMESTAMP} is {age:.0f} s off"
