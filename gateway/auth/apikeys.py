"""API keys for legacy clients: only their SHA-256 digests live in config."""

from __future__ import annotations

import hashlib

from gateway.auth.config import ApiKeys
from gateway.auth.grants import grant_from_spec
from gateway.model import Principal, TokenKind


class ApiKeyStore:
    def __init__(self, settings: ApiKeys) -> None:
        self.header = settings.header.lower().encode("latin-1")
        self._principals = {
            bytes.fromhex(key.sha256): Principal(
                subject=key.subject,
                client_id=key.client_id,
                scopes=frozenset(key.scopes),
                kind=TokenKind(key.kind),
                grant=grant_from_spec(key.grant) if key.grant is not None else None,
            )
            for key in settings.keys
        }

    def principal(self, key: str) -> Principal | None:
        # Looked up by digest: a guess's timing says nothing about how close it came.
        return self._principals.get(hashlib.sha256(key.encode()).digest())
