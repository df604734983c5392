"""Grants from what a token carries: RFC 9396 details, a PDPP grant claim, or mapped scopes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gateway.auth.config import GrantSpec
from gateway.model import Grant, StreamGrant


class GrantError(ValueError):
    """A grant is present but malformed: the token must not be honoured."""


def grant_from_spec(spec: GrantSpec) -> Grant:
    """A grant written in config: stream -> field list, or "*" for every field."""
    return Grant({name: StreamGrant(None if fields == "*" else frozenset(fields))
                  for name, fields in spec.items()})


def grant_from_streams(streams: Any, grant_id: str | None = None) -> Grant:
    """A PDPP-style `streams` array: [{name, fields, time_constraint?}, ...]."""
    if not isinstance(streams, list):
        raise GrantError("grant streams must be a list")
    result: dict[str, StreamGrant] = {}
    for entry in streams:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise GrantError("every grant stream needs a name")
        result[entry["name"]] = _stream_grant(entry)
    return Grant(result, grant_id)


def _stream_grant(entry: Mapping[str, Any]) -> StreamGrant:
    fields = entry.get("fields", "*")
    if fields != "*" and not (isinstance(fields, list)
                              and all(isinstance(f, str) for f in fields)):
        raise GrantError('grant fields must be a list of names or "*"')
    constraint = entry.get("time_constraint") or {}
    if not isinstance(constraint, dict) or not all(
            isinstance(constraint.get(k), str | None) for k in ("field", "since", "until")):
        raise GrantError("time_constraint must be an object of strings")
    return StreamGrant(
        None if fields == "*" else frozenset(fields),
        constraint.get("field"), constraint.get("since"), constraint.get("until"),
    )


def grant_from_claims(
    claims: Mapping[str, Any], detail_types: Iterable[str], grant_claim: str | None
) -> Grant | None:
    """The grant a token carries, from `authorization_details` or the grant claim."""
    details = claims.get("authorization_details")
    if details is not None:
        if not isinstance(details, list):
            raise GrantError("authorization_details must be a list")
        wanted = set(detail_types)
        matching = [d for d in details
                    if isinstance(d, dict) and isinstance(d.get("type"), str)
                    and d["type"] in wanted]
        if matching:
            return merge([grant_from_streams(d.get("streams"), d.get("grant_id"))
                          for d in matching])
    if grant_claim and isinstance(claims.get(grant_claim), dict):
        grant = claims[grant_claim]
        return grant_from_streams(grant.get("streams"), grant.get("grant_id"))
    return None


def grant_from_scopes(scopes: Iterable[str], scope_grants: Mapping[str, GrantSpec]) -> Grant | None:
    grants = [grant_from_spec(scope_grants[s]) for s in sorted(scopes) if s in scope_grants]
    return merge(grants) if grants else None


def merge(grants: list[Grant]) -> Grant:
    """The union of several grants (fields of a stream granted twice are added up)."""
    streams: dict[str, StreamGrant] = {}
    for grant in grants:
        for name, stream in grant.streams.items():
            streams[name] = _union(streams[name], stream) if name in streams else stream
    ids = {g.grant_id for g in grants if g.grant_id}
    return Grant(streams, ids.pop() if len(ids) == 1 else None)


def _union(a: StreamGrant, b: StreamGrant) -> StreamGrant:
    if (a.time_field, a.since, a.until) != (b.time_field, b.since, b.until):
        # Two windows for one stream have no single-window union: refuse rather than widen.
        raise GrantError("one stream is granted twice with different time constraints")
    fields = None if a.fields is None or b.fields is None else a.fields | b.fields
    return StreamGrant(fields, a.time_field, a.since, a.until)
