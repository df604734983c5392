"""What PDPP's remembered pages and its cursors are keyed by: a page by everything its records
depend on (the stream's copy, the grant shape, position, filters, size, fields), a cursor by who
asks under which grant."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from typing import Any

import orjson

from gateway.model import Principal
from gateway.surfaces.pdpp import filters
from gateway.surfaces.pdpp.projection import Access


def page_key(serial: int, access: Access, field: str | None, order: str,
              position: list[Any] | None, found_filters: list[filters.Filter], limit: int,
              wanted: frozenset[str] | None) -> Hashable | None:
    """What a page of records depends on: the copy of the stream, the grant shape (all that
    `Access.view` and `project` read), where it starts, its filters, its size and the fields
    asked for. None when the position holds a value that cannot key (a list, say): that page
    is not remembered."""
    key = (serial, access.shape, field, order,
           tuple(position) if position is not None else None, tuple(found_filters), limit,
           wanted)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def grant_digest(principal: Principal) -> str:
    """Who is asking and under which grant: a cursor only continues for the same."""
    grant = principal.grant
    streams = sorted((name, sorted(g.fields) if g.fields is not None else "*", g.time_field,
                      g.since, g.until, sorted(g.resources) if g.resources is not None else "*")
                     for name, g in (grant.streams.items() if grant else ()))
    identity = [principal.kind, principal.subject, principal.client_id,
                grant.grant_id if grant else None, grant.expires_at if grant else None, streams]
    return hashlib.sha256(orjson.dumps(identity)).hexdigest()[:32]
