"""Grants from what a token carries: RFC 9396 authorization details, a grant claim, or
scopes the config maps to grants.

Every token grant (a JWT's or an introspection answer's) is read here into the neutral
`Grant`: a versioned object whose `streams` list, for each stream, the readable `fields` (or
"*"), and optionally a `time_constraint` (`field`, `since`, `until`) and the only records it
covers (`resources`). A grant the gateway could not enforce exactly is refused (`GrantError`:
401 `invalid_token`), never read as a wider one: a stream without `fields`, a
`time_constraint` without its `field` or without a bound, a stream named twice, or a member it
does not know. What a grant lets a caller read is decided by the surfaces that serve streams.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from gateway.auth.config import GrantSpec
from gateway.instants import instant
from gateway.model import Grant, StreamGrant

GRANT_VERSION = "0.1.0"
_STREAM_MEMBERS = frozenset({"name", "instance_ids", "fields", "time_constraint", "resources"})
_WINDOW_MEMBERS = frozenset({"field", "since", "until"})
# Grant members the gateway enforces: what may be read, the grant's own expiry and the
# format's version. The others are evidence and declarations for the authorization server and
# the client (who, why, for how long); `type` is RFC 9396's. Any other member is refused, not
# ignored.
_ENFORCED = frozenset({"streams", "expires_at", "version"})
_DECLARED = frozenset({"type", "grant_id", "issued_at", "subject", "client", "source",
                       "source_declaration", "purpose_code", "purpose_description",
                       "access_mode", "retention", "selection_preset", "client_claims"})
_ACCESS_MODES = frozenset({"single_use", "continuous"})


class GrantError(ValueError):
    """A grant is present but malformed: the token must not be honoured.

    Messages are fixed text: they are shown in `WWW-Authenticate`, so never echo the token."""


def grant_from_spec(spec: GrantSpec) -> Grant:
    """A grant written in config: stream -> field list, or "*" for every field."""
    return Grant({name: StreamGrant(None if fields == "*" else frozenset(fields))
                  for name, fields in spec.items()})


def grant_from_claims(
    claims: Mapping[str, Any], detail_types: Iterable[str], grant_claim: str | None
) -> Grant | None:
    """The grant a token carries, from `authorization_details` or the grant claim."""
    details = claims.get("authorization_details")
    if details is not None:
        if not isinstance(details, list):
            raise GrantError("authorization_details must be a list.")
        wanted = set(detail_types)
        matching = [d for d in details
                    if isinstance(d, dict) and isinstance(d.get("type"), str)
                    and d["type"] in wanted]
        if matching:
            return merge([grant_from_detail(d) for d in matching])
    if grant_claim and isinstance(claims.get(grant_claim), dict):
        return grant_from_detail(claims[grant_claim])
    return None


def grant_from_detail(detail: Mapping[str, Any]) -> Grant:
    """One grant object (an RFC 9396 detail or the grant claim), refused unless exact."""
    if not set(detail) <= _ENFORCED | _DECLARED:
        raise GrantError("The grant carries a member the gateway cannot enforce.")
    if detail.get("version", GRANT_VERSION) != GRANT_VERSION:
        raise GrantError("The grant's schema version is not supported.")
    if detail.get("access_mode", "continuous") not in _ACCESS_MODES:
        raise GrantError("The grant's access_mode is not known.")
    grant_id = detail.get("grant_id")
    if grant_id is not None and not isinstance(grant_id, str):
        raise GrantError("The grant's grant_id must be a string.")
    expires_at = detail.get("expires_at")
    if expires_at is not None and instant(expires_at) is None:
        raise GrantError("The grant's expires_at must be an ISO 8601 instant.")
    return Grant(_streams(detail.get("streams")), grant_id, expires_at)


def _streams(streams: Any) -> dict[str, StreamGrant]:
    """The grant's `streams` array: [{name, fields, time_constraint?, resources?}, ...]."""
    if not isinstance(streams, list):
        raise GrantError("The grant's streams must be a list.")
    found: dict[str, StreamGrant] = {}
    for entry in streams:
        name, stream = _stream(entry)
        if name in found:  # a stream name is unique within a grant
            raise GrantError("The grant names one stream twice.")
        found[name] = stream
    return found


def _stream(entry: Any) -> tuple[str, StreamGrant]:
    if not isinstance(entry, dict) or not _is_name(entry.get("name")):
        raise GrantError("Every grant stream needs a name.")
    if not set(entry) <= _STREAM_MEMBERS:
        raise GrantError("A grant stream carries a constraint the gateway cannot enforce.")
    if "fields" not in entry:
        raise GrantError("Every grant stream must list its fields.")
    if "instance_ids" in entry:
        _names(entry["instance_ids"], "instance_ids")
    resources = _names(entry["resources"], "resources") if "resources" in entry else None
    time_field, since, until = _window(entry["time_constraint"]) if "time_constraint" in entry \
        else (None, None, None)
    return entry["name"], StreamGrant(_fields(entry["fields"]), time_field, since, until,
                                      resources)


def _fields(value: Any) -> frozenset[str] | None:
    if value == "*":  # an explicit "every field", as the demo issuer writes it (README)
        return None
    return _names(value, "fields")


def _names(value: Any, member: str) -> frozenset[str]:
    """A non-empty list of unique non-empty strings, as every list of a grant is."""
    if not (isinstance(value, list) and value and all(_is_name(v) for v in value)
            and len(set(value)) == len(value)):
        raise GrantError(f"The grant's {member} must be a non-empty list of unique strings.")
    return frozenset(value)


def _window(value: Any) -> tuple[str, str | None, str | None]:
    """`{field, since?, until?}`: the field and at least one ISO 8601 bound."""
    if not isinstance(value, dict) or not set(value) <= _WINDOW_MEMBERS \
            or not _is_name(value.get("field")):
        raise GrantError("A time_constraint must name its field.")
    bounds = {k: value[k] for k in ("since", "until") if k in value}
    if not bounds:
        raise GrantError("A time_constraint needs since or until.")
    if any(instant(bound) is None for bound in bounds.values()):
        raise GrantError("A time_constraint bound must be an ISO 8601 instant.")
    return value["field"], bounds.get("since"), bounds.get("until")


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def grant_from_scopes(scopes: Iterable[str], scope_grants: Mapping[str, GrantSpec]) -> Grant | None:
    grants = [grant_from_spec(scope_grants[s]) for s in sorted(scopes) if s in scope_grants]
    return merge(grants) if grants else None


def merge(grants: list[Grant]) -> Grant:
    """The union of several grants, where one exists: a stream granted twice adds up its
    fields or its records, never both; the earliest expiry holds for the whole."""
    streams: dict[str, StreamGrant] = {}
    for grant in grants:
        for name, stream in grant.streams.items():
            streams[name] = _union(streams[name], stream) if name in streams else stream
    ids = {g.grant_id for g in grants if g.grant_id}
    expiries = [g.expires_at for g in grants if g.expires_at is not None]
    return Grant(streams, ids.pop() if len(ids) == 1 else None,
                 min(expiries, key=_expiry) if expiries else None)


def _expiry(expires_at: str) -> datetime:
    moment = instant(expires_at)
    if moment is None:  # grant_from_detail checks it; a grant made elsewhere may not have been
        raise GrantError("The grant's expires_at must be an ISO 8601 instant.")
    return moment


def _union(a: StreamGrant, b: StreamGrant) -> StreamGrant:
    if (a.time_field, a.since, a.until) != (b.time_field, b.since, b.until):
        # Two windows for one stream have no single-window union: refuse rather than widen.
        raise GrantError("One stream is granted twice with different time constraints.")
    if a.resources != b.resources and a.fields != b.fields:
        # Fields A of records R and fields B of records S is no one (fields, records) pair.
        raise GrantError("One stream is granted twice with different fields and records.")
    fields = None if a.fields is None or b.fields is None else a.fields | b.fields
    resources = None if a.resources is None or b.resources is None \
        else a.resources | b.resources
    return StreamGrant(fields, a.time_field, a.since, a.until, resources)
