"""What the upstream learns about the caller: identity headers set by the gateway only.

Incoming copies of the identity headers are always removed, so a client cannot spoof them,
and the client's own credential stays at the gateway unless `forward_token` says otherwise.
"""

from __future__ import annotations

from gateway.asgi import RawHeaders
from gateway.auth.config import Auth, IdentityHeaders
from gateway.caching import BoundedCache
from gateway.model import Principal

_REMEMBERED = 4096  # callers whose headers are kept made (the least recently used forgotten)


class IdentityForwarding:
    def __init__(self, auth: Auth | None) -> None:
        names = auth.identity_headers if auth is not None else IdentityHeaders()
        self._names = {field: _encoded(value) for field, value in names.model_dump().items()}
        drop = {name for name in self._names.values() if name is not None}
        if auth is not None and not auth.forward_token:
            drop.add(b"authorization")
            if auth.api_keys is not None:
                drop.add(auth.api_keys.header.lower().encode("latin-1"))
        self.drop = frozenset(drop)
        # A token accepted from ?access_token= must not travel on in the query either.
        query_token = auth is not None and auth.allow_query_token and not auth.forward_token
        self.drop_query = frozenset({b"access_token"}) if query_token else frozenset()
        self._made: BoundedCache[tuple[object, ...], RawHeaders] = BoundedCache(_REMEMBERED)

    def headers(self, principal: Principal) -> RawHeaders:
        """The identity headers for `principal` (shared between requests: copy to change)."""
        if principal.is_anonymous:
            return []
        key = (principal.subject, principal.client_id, principal.scopes, principal.kind)
        found = self._made.get(key)
        if found is None:
            found = self._headers(principal)
            self._made.put(key, found)
        return found

    def _headers(self, principal: Principal) -> RawHeaders:
        values = {
            "subject": principal.subject,
            "client_id": principal.client_id,
            "scopes": " ".join(sorted(principal.scopes)) or None,
            "token_kind": principal.kind.value,
        }
        found: RawHeaders = []
        for field, name in self._names.items():
            value = values.get(field)
            if name is not None and value is not None:
                found.append((name, value.encode("latin-1", "replace")))
        return found


def _encoded(name: str | None) -> bytes | None:
    return name.lower().encode("latin-1") if name is not None else None
