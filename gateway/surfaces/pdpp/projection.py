"""What a caller may see of each stream, decided in this one place for records, search
results and snippets: which streams, which fields (the grant's plus schema-required ones),
which records (the grant's time window), and which fields a search may match."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gateway.errors import GatewayError
from gateway.model import Principal, TokenKind
from gateway.surfaces.pdpp.streams import CompiledStream, Record


@dataclass(frozen=True, slots=True)
class Access:
    """One stream as one caller may read it."""

    stream: CompiledStream
    fields: frozenset[str]  # the effective projection
    time_field: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def admits(self, record: Record) -> bool:
        """Inside the grant's time window (a record without a readable time is outside)."""
        if self.time_field is None:
            return True
        moment = instant(record.data.get(self.time_field))
        if moment is None:
            return False
        return (self.since is None or moment >= self.since) and \
            (self.until is None or moment < self.until)

    def project(self, record: Record, wanted: frozenset[str] | None = None) -> dict[str, Any]:
        shown = self.fields if wanted is None else wanted & self.fields
        return {name: value for name, value in record.data.items() if name in shown}

    def matchable(self, kind: str) -> tuple[str, ...]:
        """The fields a search of this kind may match: declared AND readable."""
        return tuple(f for f in self.stream.declared(kind) if f in self.fields)

    def snippet(self, record: Record, field: str, text: str, kind: str) -> dict[str, str] | None:
        """A snippet only if its text is verbatim in a matchable field of this record."""
        value = record.data.get(field)
        if field not in self.matchable(kind) or not isinstance(value, str) \
                or not text or text not in value:
            return None
        return {"field": field, "text": text}


def is_owner(principal: Principal) -> bool:
    return principal.kind is TokenKind.OWNER


def caller_access(principal: Principal,
                  streams: Mapping[str, CompiledStream]) -> dict[str, Access]:
    """Every stream the caller may read, with what it may see of it."""
    if is_owner(principal):
        return {name: Access(s, frozenset(s.settings.fields)) for name, s in streams.items()}
    grant = principal.grant
    if principal.kind is not TokenKind.CLIENT or grant is None:
        return {}
    found = {}
    for name, stream_grant in grant.streams.items():
        stream = streams.get(name)
        if stream is None:
            continue
        schema = frozenset(stream.settings.fields)
        granted = schema if stream_grant.fields is None else stream_grant.fields & schema
        found[name] = Access(stream, granted | stream.required, stream_grant.time_field,
                             _bound(stream_grant.since), _bound(stream_grant.until))
    return found


def stream_access(principal: Principal, streams: Mapping[str, CompiledStream],
                  name: str, param: str | None = None) -> Access:
    """One stream's access; 403 for a client outside its grant, 404 for an owner's typo."""
    access = caller_access(principal, streams).get(name)
    if access is not None:
        return access
    if is_owner(principal):
        raise GatewayError(404, "not_found", "No such stream.", _param(param))
    raise GatewayError(403, "grant_stream_not_allowed",
                       "The grant does not include this stream.", _param(param))


def narrowed(access: Access, requested: str | None) -> frozenset[str] | None:
    """The `fields=` sparse fieldset: schema fields inside the projection, plus required."""
    if requested is None:
        return None
    names = [name.strip() for name in requested.split(",") if name.strip()]
    if not names:
        raise GatewayError(400, "invalid_request", "fields names no field.", _param("fields"))
    for name in names:
        if name not in access.stream.settings.fields:
            raise GatewayError(400, "unknown_field", f"No field {name!r} in this stream.",
                               _param("fields"))
        if name not in access.fields:
            raise GatewayError(403, "field_not_granted",
                               f"The grant does not include field {name!r}.", _param("fields"))
    return frozenset(names) | access.stream.required | {access.stream.settings.primary_key}


def instant(value: Any) -> datetime | None:
    """An ISO 8601 timestamp as an aware datetime (naive ones are UTC); None if not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _bound(value: str | None) -> datetime | None:
    if value is None:
        return None
    moment = instant(value)
    if moment is None:  # an unreadable bound must not widen the window
        raise GatewayError(403, "grant_invalid", "The grant's time constraint is malformed.")
    return moment


def _param(param: str | None) -> dict[str, Any]:
    return {"param": param} if param else {}
