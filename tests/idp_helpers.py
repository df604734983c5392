"""Keys and tokens for the auth tests, and a client for tests/fake_idp.py's admin API."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://idp.test"
AUDIENCE = "aigw-test"


@dataclass
class SigningKey:
    kid: str
    private: Any
    algorithm: str

    @classmethod
    def rsa(cls, kid: str) -> SigningKey:
        return cls(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256")

    @classmethod
    def ec(cls, kid: str) -> SigningKey:
        return cls(kid, ec.generate_private_key(ec.SECP256R1()), "ES256")

    def public_jwk(self) -> dict[str, Any]:
        algorithm = jwt.get_algorithm_by_name(self.algorithm)
        jwk = algorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**jwk, "kid": self.kid, "use": "sig", "alg": self.algorithm}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def token(self, **overrides: Any) -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "client_id": "agent-1",
                  "scope": "articles:read", "iat": now, "nbf": now, "exp": now + 300,
                  "jti": secrets.token_hex(8)}
        headers = {"kid": overrides.pop("kid", self.kid)}
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        # Signed as raw JWS, so claims pyjwt would refuse to encode (a list as iss) can be sent.
        payload = json.dumps(claims).encode()
        return jwt.api_jws.encode(payload, self.private, algorithm=self.algorithm,
                                  headers={**headers, "typ": "JWT"})


def hs256_with_public_key(key: SigningKey) -> str:
    """The classic confusion attack: HMAC-sign with the RSA public key as the secret."""
    now = int(time.time())
    header = {"alg": "HS256", "typ": "JWT", "kid": key.kid}
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": now + 300, "iat": now}
    signing_input = f"{_b64(json.dumps(header))}.{_b64(json.dumps(claims))}"
    signature = hmac.new(key.public_pem(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def unsigned_token() -> str:
    now = int(time.time())
    header = _b64(json.dumps({"alg": "none", "typ": "JWT"}))
    claims = _b64(json.dumps({"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory",
                              "exp": now + 300}))
    return f"{header}.{claims}."


def _b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class FakeIdp:
    def __init__(self, url: str) -> None:
        self.url = url

    def publish(self, *keys: SigningKey, max_age: int = 300) -> None:
        body = {"keys": [key.public_jwk() for key in keys], "max_age": max_age}
        httpx.post(self.url + "/admin/jwks", json=body).raise_for_status()

    def down(self, down: bool) -> None:
        httpx.post(self.url + "/admin/down", json={"down": down}).raise_for_status()

    def delay(self, seconds: float) -> None:
        httpx.post(self.url + "/admin/delay", json={"seconds": seconds}).raise_for_status()

    def tokens(self, table: dict[str, dict[str, Any]]) -> None:
        httpx.post(self.url + "/admin/tokens", json=table).raise_for_status()

    def reset(self) -> None:
        httpx.post(self.url + "/admin/reset").raise_for_status()

    def stats(self) -> dict[str, int]:
        return httpx.get(self.url + "/admin/stats").json()


@contextlib.contextmanager
def running_idp(logs: Path) -> Iterator[FakeIdp]:
    """tests/fake_idp.py on a free loopback port (introspection client gw / gw-secret),
    answering; stopped afterwards."""
    from processes import ROOT, Process, free_port, wait_for_http

    port = free_port()
    process = Process([sys.executable, str(ROOT / "tests" / "fake_idp.py"), str(port), "gw",
                       "gw-secret"], logs, "idp")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/admin/stats", process=process.popen)
        yield FakeIdp(url)
    finally:
        process.stop()
