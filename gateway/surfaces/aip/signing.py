"""AIP message signing: the canonical string, `sign` for clients, `Verifier` for the gateway.

The scheme is the one in AIP's authentication-signing page: five `X-AIP-*` headers and
`v1=base64(HMAC-SHA256(secret, canonical string))`, where the canonical string is method (or a
response's status), path, hex SHA-256 of the body, timestamp and nonce, joined by newlines.
The path is the request target as sent, without scheme or host, including any query string.

Verification follows the page's order (version, key, signature, timestamp, nonce) after a
presence and syntax check, so a nonce is only ever stored for an authentic request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.surfaces.aip.nonces import NonceStore, NonceStoreUnavailable
from gateway.surfaces.aip.signing_config import Signing

VERSION = "X-AIP-Version"
KEY_ID = "X-AIP-Key-Id"
TIMESTAMP = "X-AIP-Timestamp"
NONCE = "X-AIP-Nonce"
SIGNATURE = "X-AIP-Signature"
HEADERS = (VERSION, KEY_ID, TIMESTAMP, NONCE, SIGNATURE)
AIP_VERSION = "0.1"  # what the 0.1 schemas require in bodies
_LOWER_HEADERS = {header.lower(): header for header in HEADERS}

_RFC3339 = re.compile(
    r"^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d{1,9})?([Zz]|[+-]\d\d:\d\d)$"
)
_NONCE = re.compile(r"^[A-Za-z0-9+/=_-]{16,256}$")
_SIGNATURE = re.compile(r"^v1=([A-Za-z0-9+/]{43}=)$")  # 32 bytes of HMAC-SHA256, base64


@dataclass(frozen=True, slots=True)
class VerifiedKey:
    key_id: str
    version: str
    timestamp: datetime
    nonce: str
    platform: str = ""  # the platform the key speaks for, normal form (Signing.platform)


@dataclass(frozen=True, slots=True)
class SigningFailure:
    code: str  # stable: one per failure case, for logs, metrics and tests
    status: int
    message: str  # safe to show: names at most a header, never a value

    @property
    def body_code(self) -> str:
        return "service_unavailable" if self.status == 503 else "auth_failed"


def _failure(code: str, message: str, status: int = 401) -> SigningFailure:
    return SigningFailure(code, status, message)


UNSIGNED = _failure("unsigned", "Request is not signed")
UNSUPPORTED_VERSION = _failure("unsupported_version", f"Unsupported {VERSION}")
UNKNOWN_KEY = _failure("unknown_key", f"Unknown {KEY_ID}")
BAD_SIGNATURE = _failure("bad_signature", "Invalid signature")
STALE_TIMESTAMP = _failure("stale_timestamp", "Timestamp is too old", 403)
FUTURE_TIMESTAMP = _failure("future_timestamp", "Timestamp is in the future", 403)
REPLAYED_NONCE = _failure("replayed_nonce", "Nonce already used", 403)
STORE_UNAVAILABLE = _failure("nonce_store_unavailable",
                             "Signature checks are unavailable; retry later", 503)


def missing(header: str) -> SigningFailure:
    return _failure("missing_header", f"Missing {header} header")


def malformed(header: str) -> SigningFailure:
    return _failure("malformed_header", f"Malformed {header} header")


def repeated(header: str) -> SigningFailure:
    return _failure("repeated_header", f"Repeated {header} header")


def canonical_string(method: str, path: str, body: bytes, timestamp: str, nonce: str) -> bytes:
    """`method` is a request's method, or a response's status code for response signing."""
    digest = hashlib.sha256(body).hexdigest()
    return "\n".join((method, path, digest, timestamp, nonce)).encode()


def signature(secret: bytes, canonical: bytes) -> str:
    mac = hmac.new(secret, canonical, hashlib.sha256).digest()
    return "v1=" + base64.b64encode(mac).decode()


def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sign(
    secret: bytes, key_id: str, method: str, path: str, body: bytes = b"", *,
    version: str = "1.0", now: datetime | None = None, nonce: str | None = None,
) -> dict[str, str]:
    """The five X-AIP-* headers for a request (the client helper; `aigw aip sign` prints it)."""
    timestamp = format_timestamp(now or datetime.now(UTC))
    nonce = nonce or secrets.token_urlsafe(24)
    canonical = canonical_string(method.upper(), path, body, timestamp, nonce)
    return {VERSION: version, KEY_ID: key_id, TIMESTAMP: timestamp, NONCE: nonce,
            SIGNATURE: signature(secret, canonical)}


def sign_response(
    secret: bytes, key_id: str, status: int, path: str, body: bytes, *,
    version: str = "1.0", now: datetime | None = None,
) -> dict[str, str]:
    """Response signing: the status code takes the method's place; the path is the request's."""
    return sign(secret, key_id, str(status), path, body, version=version, now=now)


class Verifier:
    """Checks signed requests against one config generation's keys and a nonce store."""

    def __init__(self, signing: Signing, nonces: NonceStore) -> None:
        self._signing = signing
        self._nonces = nonces

    async def verify(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes,
        now: datetime | None = None,
    ) -> VerifiedKey | SigningFailure:
        now = now or datetime.now(UTC)
        checked = check(self._signing, method, path, headers, body, now)
        if isinstance(checked, SigningFailure):
            return checked
        # Until the timestamp leaves the window, plus a second so the edge never reopens.
        remember = checked.timestamp + timedelta(seconds=self._signing.window + 1) - now
        try:
            fresh = await self._nonces.add(checked.key_id, checked.nonce,
                                           remember.total_seconds())
        except NonceStoreUnavailable:
            return STORE_UNAVAILABLE
        return checked if fresh else REPLAYED_NONCE

    def response_headers(
        self, verified: VerifiedKey, status: int, path: str, body: bytes,
    ) -> dict[str, str]:
        """Headers signing a response, or none when `sign_responses` is off."""
        secret = self._signing.secret(verified.key_id)
        if not self._signing.sign_responses or secret is None:
            return {}
        return sign_response(secret, verified.key_id, status, path, body,
                             version=verified.version)


def check(
    signing: Signing, method: str, path: str, headers: Mapping[str, str], body: bytes,
    now: datetime,
) -> VerifiedKey | SigningFailure:
    """Every check except the nonce's single use, which needs the store."""
    values = _read_headers(headers)
    if isinstance(values, SigningFailure):
        return values
    version, key_id, timestamp, nonce, given = values
    if version not in signing.versions:
        return UNSUPPORTED_VERSION
    secret = signing.secret(key_id)
    if secret is None:
        return UNKNOWN_KEY
    moment = _syntax(timestamp, nonce, given)
    if isinstance(moment, SigningFailure):
        return moment
    expected = signature(secret, canonical_string(method.upper(), path, body, timestamp, nonce))
    if not hmac.compare_digest(expected.encode(), given.encode()):
        return BAD_SIGNATURE
    age = (now - moment).total_seconds()
    if age > signing.window:
        return STALE_TIMESTAMP
    if -age > signing.window:
        return FUTURE_TIMESTAMP
    return VerifiedKey(key_id, version, moment, nonce, signing.platform(key_id))


def verify_response(
    secret: bytes, status: int, path: str, headers: Mapping[str, str], body: bytes, *,
    window: float = 300, now: datetime | None = None,
) -> SigningFailure | None:
    """For platforms: check a signed response (signature and timestamp); None when valid."""
    values = _read_headers(headers)
    if isinstance(values, SigningFailure):
        return values
    _, _, timestamp, nonce, given = values
    moment = _syntax(timestamp, nonce, given)
    if isinstance(moment, SigningFailure):
        return moment
    expected = signature(secret, canonical_string(str(status), path, body, timestamp, nonce))
    if not hmac.compare_digest(expected.encode(), given.encode()):
        return BAD_SIGNATURE
    if abs(((now or datetime.now(UTC)) - moment).total_seconds()) > window:
        return STALE_TIMESTAMP
    return None


def is_signed(headers: Mapping[str, str]) -> bool:
    """Whether a request carries any signing header (when signing is optional)."""
    present = {name.lower() for name in headers}
    return any(header.lower() in present for header in HEADERS)


def failure_body(failure: SigningFailure, request_id: str,
                 now: datetime | None = None) -> dict[str, Any]:
    """The minimal failure body, as a RetrieveResponse with status error (valid against 0.1)."""
    return {"aip_version": AIP_VERSION, "request_id": request_id,
            "timestamp": format_timestamp(now or datetime.now(UTC)), "status": "error",
            "error": {"code": failure.body_code, "message": failure.message}}


def _read_headers(headers: Mapping[str, str]) -> tuple[str, ...] | SigningFailure:
    """The five values; a header sent twice is refused, whatever either copy holds (a proxy
    or framework keeping the other copy would see a different request)."""
    lowered: dict[str, str] = {}
    for name, value in headers.items():  # Starlette's Headers yields every copy
        name = name.lower()
        if name in lowered and name in _LOWER_HEADERS:
            return repeated(_LOWER_HEADERS[name])
        lowered[name] = value
    values = tuple(lowered.get(header.lower(), "").strip() for header in HEADERS)
    if not any(values):
        return UNSIGNED
    for header, value in zip(HEADERS, values, strict=True):
        if not value:
            return missing(header)
    return values


def _syntax(timestamp: str, nonce: str, given: str) -> datetime | SigningFailure:
    if not _SIGNATURE.match(given):
        return malformed(SIGNATURE)
    try:
        base64.b64decode(given[3:], validate=True)
    except binascii.Error:
        return malformed(SIGNATURE)
    if not _NONCE.match(nonce):
        return malformed(NONCE)
    if not _RFC3339.match(timestamp):
        return malformed(TIMESTAMP)
    try:
        return datetime.fromisoformat(timestamp.upper())
    except ValueError:
        return malformed(TIMESTAMP)
