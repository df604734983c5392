"""What a caller may see of each stream, decided in this one place for records, search
results and snippets: which streams, which fields (the grant's plus schema-required ones),
which records (the grant's time window and `resources`, and the record visibilities the caller
sees), and which fields a search may match.

The grant is read here; which streams and fields it lets the caller read are decisions of the
policy stage (the `pdpp_stream` and `pdpp_field` kinds of policy_rules.py), and so are the
record visibilities it sees (the core's `record_visibility` rules, which name a resource and
hold on every surface serving it: AIDRE's `articles` collection and PDPP's `articles` stream
alike), all asked through the pipeline and noted in the decision log. A record the caller may
not see is not there for it: never listed, searched, counted or snipped, and 404 when asked for
by key, as a record that does not exist.

Everything a response carries is derived from `Access.view`: the record cut down to what the
caller may read. Sorting, cursors, `emitted_at`, filters, snippets and counts all work on that
view, so a value of an ungranted field cannot reach a caller through any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from gateway.errors import GatewayError
from gateway.instants import instant
from gateway.model import Principal, TokenKind
from gateway.policy.resources import visibility_of
from gateway.policy.rules import Ask
from gateway.surfaces.pdpp.policy_rules import (
    GRANTED,
    NO_GRANT,
    NOT_GRANTED,
    OWNER,
    REQUIRED,
    field_ask,
    field_removed,
    readable,
    stream_ask,
)
from gateway.surfaces.pdpp.streams import CompiledStream, Record


class Readable(Mapping[str, Any]):
    """A record's data as a caller may read it: the other fields are not there at all.
    A read-through view, so cutting down every record of a stream costs next to nothing."""

    __slots__ = ("_data", "_fields")

    def __init__(self, data: Mapping[str, Any], fields: frozenset[str]) -> None:
        self._data, self._fields = data, fields

    def __getitem__(self, name: str) -> Any:
        if name not in self._fields:
            raise KeyError(name)
        return self._data[name]

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._data if name in self._fields)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True, slots=True)
class Access:
    """One stream as one caller may read it."""

    stream: CompiledStream
    fields: frozenset[str]  # the effective projection
    time_field: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    resources: frozenset[str] | None = None  # the only record keys it may read; None: all
    visibilities: frozenset[str] | None = None  # the record visibilities it sees; None: all

    def permits_key(self, key: str) -> bool:
        return self.resources is None or key in self.resources

    def admits(self, record: Record) -> bool:
        """Among the grant's records, of a visibility the caller sees, and inside the grant's
        time window (a record without a readable time is outside)."""
        if not self.permits_key(record.key):
            return False
        if self.visibilities is not None and \
                visibility_of(self.stream, record.visibility) not in self.visibilities:
            return False
        if self.time_field is None:
            return True
        moment = instant(record.data.get(self.time_field))
        if moment is None:
            return False
        return (self.since is None or moment >= self.since) and \
            (self.until is None or moment < self.until)

    def view(self, record: Record) -> Record | None:
        """The record as this caller may see it (only readable fields); None if not at all."""
        if not self.admits(record):
            return None
        if self.fields.issuperset(record.data):
            return record
        return Record(record.key, Readable(record.data, self.fields), record.visibility)

    def visible(self, records: Iterable[Record]) -> list[Record]:
        if self.whole:  # asked once, not once a record
            return list(records)
        return [view for record in records if (view := self.view(record)) is not None]

    @property
    def whole(self) -> bool:
        """Every record as it is: no record list, no visibility hidden, no time window, and
        every field of the stream's schema readable (`view` would return each record itself)."""
        return self.resources is None and self.visibilities is None \
            and self.time_field is None and self.fields.issuperset(self.stream.settings.fields)

    @property
    def shape(self) -> Hashable:
        """All that `view`, `project`, `matchable` and `snippet` depend on, its stream aside:
        what is remembered of a copy of the stream for one caller is given to another of the
        same shape."""
        return (self.fields, self.time_field, self.since, self.until, self.resources,
                self.visibilities)

    def project(self, record: Record, wanted: frozenset[str] | None = None) -> dict[str, Any]:
        shown = self.fields if wanted is None else wanted & self.fields
        return {name: value for name, value in record.data.items() if name in shown}

    def emitted_at(self, record: Record, fallback: str) -> str:
        """The record's `emitted_at` field only if the caller may read it; else `fallback`
        (when the gateway read the record), which says nothing about any field."""
        name = self.stream.emitted_field
        value = record.data.get(name) if name in self.fields else None
        return value if isinstance(value, str) and value else fallback

    @property
    def order_field(self) -> str | None:
        """The field records are sorted and paged by, when the caller may read it; else
        none (records then go by primary key alone)."""
        name = self.stream.settings.cursor_field
        return name if name in self.fields else None

    def names_only(self, keys: Collection[str]) -> bool:
        """The grant lists its records and every one of them is among `keys`."""
        return self.resources is not None and all(key in keys for key in self.resources)

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


class Permitted(Protocol):
    """The policy stage for this request (`Pipeline.permitted` with its exchange): whether the
    rules allow each ask, each noted in the decision log, a denied one with `removes(ask)`."""

    def __call__(self, asks: Sequence[Ask],
                 removes: Callable[[Ask], tuple[str, ...]] | None = None) -> list[bool]: ...


def check_grant(principal: Principal, streams: Mapping[str, CompiledStream]) -> None:
    """Refuse a client's grant that cannot be enforced here: expired (checked on every
    request: a principal may be cached past its grant's expiry), or with a time constraint on
    no field of its stream or with an unreadable bound."""
    grant = principal.grant
    if principal.kind is not TokenKind.CLIENT or grant is None:
        return
    _check_expiry(grant.expires_at)
    for name, stream_grant in grant.streams.items():
        stream = streams.get(name)
        if stream is None:
            continue
        if stream_grant.time_field is not None \
                and stream_grant.time_field not in stream.settings.fields:
            raise GatewayError(403, "grant_invalid",
                               "The grant's time constraint names no field of its stream.")
        for bound in (stream_grant.since, stream_grant.until):
            _bound(bound)


def stream_coverage(principal: Principal, name: str) -> str:
    """What the token's grant says of a stream (see policy_rules)."""
    if is_owner(principal):
        return OWNER
    grant = principal.grant
    if principal.kind is not TokenKind.CLIENT or grant is None:
        return NO_GRANT
    return GRANTED if name in grant.streams else NOT_GRANTED


def field_coverage(principal: Principal, stream: CompiledStream, field: str) -> str:
    """What the token's grant says of a field of a stream it covers."""
    if is_owner(principal):
        return OWNER
    if field in stream.required:
        return REQUIRED
    grant = principal.grant
    granted = grant.for_stream(stream.name) if grant is not None else None
    if granted is None:
        return NOT_GRANTED
    return GRANTED if granted.fields is None or field in granted.fields else NOT_GRANTED


def listing_order(principal: Principal, streams: Mapping[str, CompiledStream]) -> list[str]:
    """The streams in the order a caller is shown them: an owner the config's, a client its
    grant's, then the streams its grant does not name."""
    grant = principal.grant
    if is_owner(principal) or grant is None:
        return list(streams)
    named = [name for name in grant.streams if name in streams]
    return named + [name for name in streams if name not in grant.streams]


def readable_stream_ask(principal: Principal, name: str) -> Ask:
    return stream_ask(principal, name, stream_coverage(principal, name))


class Visible(Protocol):
    """The policy stage for this request (`Pipeline.record_visibilities` with its exchange):
    the record visibilities the caller sees in a stream (None: every record's), each decision
    noted."""

    def __call__(self, name: str, resource: CompiledStream) -> frozenset[str] | None: ...


class Grantee:
    """One request's token as PDPP reads it: what its grant covers, with the policy's
    decisions on each stream and field (a policy can narrow the grant, never widen it) and on
    the visibilities of each stream's records."""

    def __init__(self, principal: Principal, streams: Mapping[str, CompiledStream],
                 permitted: Permitted, visible: Visible) -> None:
        check_grant(principal, streams)
        self.principal, self.streams, self.permitted = principal, streams, permitted
        self.visible = visible

    def every(self) -> dict[str, Access]:
        """Every stream the caller may read, with what it may see of it."""
        names = self._readable(listing_order(self.principal, self.streams))
        return {name: self._access(self.streams[name]) for name in names}

    def stream(self, name: str, param: str | None = None) -> Access:
        """One stream's access (see `readable_stream`)."""
        return self._access(self.readable_stream(name, param))

    def readable_stream(self, name: str, param: str | None = None) -> CompiledStream:
        """A stream the caller may read; 403 for a client outside its grant, 404 for an
        owner's typo (a stream the policy denies is answered alike)."""
        if name in self.streams and self._readable([name]):
            return self.streams[name]
        if is_owner(self.principal):
            raise GatewayError(404, "not_found", "No such stream.", _param(param))
        raise GatewayError(403, "grant_stream_not_allowed",
                           "The grant does not include this stream.", _param(param))

    def _readable(self, names: list[str]) -> list[str]:
        # Rules never select what the grant leaves out (policy_rules.py); `_allowed` holds the
        # grant as the bound all the same, whatever policy stage the pipeline runs.
        asks = [readable_stream_ask(self.principal, name) for name in names]
        return [ask.resource for ask in _allowed(asks, self.permitted(asks))]

    def _access(self, stream: CompiledStream) -> Access:
        asks = [field_ask(self.principal, stream.name, name,
                          field_coverage(self.principal, stream, name))
                for name in stream.settings.fields]
        shown = frozenset(ask.attributes["field"]
                          for ask in _allowed(asks, self.permitted(asks, field_removed)))
        visibilities = _access_visibilities(stream, self.visible(stream.name, stream))
        grant = self.principal.grant
        granted = grant.for_stream(stream.name) \
            if grant is not None and not is_owner(self.principal) else None
        if granted is None:
            return Access(stream, shown, visibilities=visibilities)
        return Access(stream, shown, granted.time_field, _bound(granted.since),
                      _bound(granted.until), granted.resources, visibilities)


def _access_visibilities(stream: CompiledStream,
                         seen: frozenset[str] | None) -> frozenset[str] | None:
    """`Access.visibilities`: None when the caller sees every record (none carries a
    visibility of its own and it sees the stream's), else the visibilities it sees."""
    if seen is None or (not stream.records_carry_visibility and stream.visibility in seen):
        return None
    return seen


def _allowed(asks: list[Ask], permitted: list[bool]) -> list[Ask]:
    return [ask for ask, allowed in zip(asks, permitted, strict=True)
            if allowed and readable(ask.attributes["grant"])]


def _check_expiry(expires_at: str | None) -> None:
    if expires_at is None:
        return
    moment = instant(expires_at)
    if moment is None or moment <= datetime.now(UTC):
        raise GatewayError(403, "grant_expired", "The grant has expired.")


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


def _bound(value: str | None) -> datetime | None:
    if value is None:
        return None
    moment = instant(value)
    if moment is None:  # an unreadable bound must not widen the window
        raise GatewayError(403, "grant_invalid", "The grant's time constraint is malformed.")
    return moment


def _param(param: str | None) -> dict[str, Any]:
    return {"param": param} if param else {}
