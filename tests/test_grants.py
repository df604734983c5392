"""Grants and principals from verified claims (unit tests: no I/O)."""

from __future__ import annotations

import pytest

from gateway.auth.grants import GrantError, grant_from_claims, grant_from_scopes
from gateway.auth.principals import ClaimsError, principal_from_claims
from gateway.model import StreamGrant, TokenKind

DETAIL = {
    "type": "pdpp_grant",
    "grant_id": "grt_1",
    "streams": [
        {"name": "messages", "fields": ["id", "subject"],
         "time_constraint": {"field": "sent_at", "since": "2025-01-01T00:00:00Z"}},
        {"name": "articles", "fields": "*"},
    ],
}


def principal(claims: dict, **overrides):
    options = {"kind_claim": "pdpp_token_kind", "default_kind": "client",
               "grant_claim": "pdpp_grant", "detail_types": ["pdpp_grant"],
               "scope_grants": {"articles:read": {"articles": ["id", "title"]}}}
    return principal_from_claims(claims, **{**options, **overrides})


def test_rfc9396_details_become_the_grant_with_fields_and_time_window():
    grant = principal({"sub": "u1", "authorization_details": [DETAIL]}).grant
    assert grant.grant_id == "grt_1"
    assert grant.for_stream("messages") == StreamGrant(
        frozenset({"id", "subject"}), "sent_at", "2025-01-01T00:00:00Z", None)
    assert grant.for_stream("articles").fields is None  # "*": every field
    assert grant.for_stream("billing") is None


def test_details_of_other_types_are_ignored_and_scopes_then_decide():
    claims = {"scope": "articles:read", "authorization_details": [{"type": "payment"}]}
    grant = principal(claims).grant
    assert grant.for_stream("articles").fields == {"id", "title"}


def test_a_pdpp_grant_claim_is_read_when_there_are_no_details():
    grant = principal({"pdpp_grant": {"grant_id": "g", "streams": DETAIL["streams"]}}).grant
    assert set(grant.streams) == {"messages", "articles"}


def test_no_grant_at_all_when_nothing_grants_anything():
    assert principal({"scope": "other"}).grant is None


def test_scope_grants_of_several_scopes_add_up():
    grant = grant_from_scopes({"a", "b"}, {"a": {"s": ["x"]}, "b": {"s": ["y"], "t": "*"}})
    assert grant.for_stream("s").fields == {"x", "y"}
    assert grant.for_stream("t").fields is None


def detail(*streams: dict, **members) -> dict:
    return {"type": "pdpp_grant", "streams": list(streams), **members}


MESSAGES = {"name": "messages", "fields": ["id", "subject"]}
WINDOW = {"field": "sent_at", "since": "2024-01-01T00:00:00Z"}

MALFORMED = {
    "details not a list": "not-a-list",
    "streams not a list": [{"type": "pdpp_grant", "streams": "messages"}],
    "stream without a name": [detail({"fields": ["id"]})],
    "fields not names": [detail({"name": "m", "fields": [1, 2]})],
    "stream without fields": [detail({"name": "messages"})],
    "fields null": [detail({"name": "messages", "fields": None})],
    "fields empty": [detail({"name": "messages", "fields": []})],
    "fields repeated": [detail({"name": "messages", "fields": ["id", "id"]})],
    "time_constraint without field": [detail({**MESSAGES, "time_constraint": {
        "since": "2024-01-01T00:00:00Z"}})],
    "time_constraint without a bound": [detail({**MESSAGES, "time_constraint": {
        "field": "sent_at"}})],
    "time_constraint empty": [detail({**MESSAGES, "time_constraint": {}})],
    "time_constraint null": [detail({**MESSAGES, "time_constraint": None})],
    "time_constraint bound unreadable": [detail({**MESSAGES, "time_constraint": {
        "field": "sent_at", "since": "last tuesday"}})],
    "time_constraint bound null": [detail({**MESSAGES, "time_constraint": {
        "field": "sent_at", "since": None, "until": "2025-01-01T00:00:00Z"}})],
    "time_constraint of an unknown kind": [detail({**MESSAGES, "time_constraint": {
        **WINDOW, "timezone": "Europe/Paris"}})],
    "same stream twice in one grant": [detail(
        {**MESSAGES, "time_constraint": WINDOW}, {"name": "messages", "fields": ["body"]})],
    "same stream twice with different windows across details": [
        detail({**MESSAGES, "time_constraint": WINDOW}),
        detail({**MESSAGES, "time_constraint": {**WINDOW, "since": "2020-01-01T00:00:00Z"}})],
    "same stream with a window and without across details": [
        detail({**MESSAGES, "time_constraint": WINDOW}), detail(MESSAGES)],
    "same stream, other fields of other records across details": [
        detail({**MESSAGES, "resources": ["m1"]}),
        detail({"name": "messages", "fields": ["id", "body"], "resources": ["m2"]})],
    "unknown stream constraint": [detail({**MESSAGES, "row_filter": "read = true"})],
    "request-only time_range in a grant": [detail({**MESSAGES, "time_range": {
        "since": "2024-01-01T00:00:00Z"}})],
    "view in a grant": [detail({"name": "messages", "fields": ["id"], "view": "basic"})],
    "resources empty": [detail({**MESSAGES, "resources": []})],
    "resources not strings": [detail({**MESSAGES, "resources": [1]})],
    "instance_ids not strings": [detail({**MESSAGES, "instance_ids": [""]})],
    "unknown grant member": [detail(MESSAGES, locations=["https://elsewhere.example"])],
    "unsupported grant version": [detail(MESSAGES, version="1.0.0")],
    "unknown access mode": [detail(MESSAGES, access_mode="forever")],
    "grant id not a string": [detail(MESSAGES, grant_id=7)],
    "expiry unreadable": [detail(MESSAGES, expires_at="soon")],
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_grants_are_refused_not_widened(case):
    with pytest.raises(GrantError):
        grant_from_claims({"authorization_details": MALFORMED[case]}, ["pdpp_grant"], None)


@pytest.mark.parametrize("case", ["stream without fields", "time_constraint without field",
                                  "same stream twice in one grant", "unknown stream constraint"])
def test_the_grant_claim_is_read_by_the_same_rules(case):
    claim = {k: v for k, v in MALFORMED[case][0].items() if k != "type"}
    with pytest.raises(GrantError):
        grant_from_claims({"pdpp_grant": claim}, ["pdpp_grant"], "pdpp_grant")


def test_a_spec_core_grant_with_every_member_is_read():
    grant = grant_from_claims({"authorization_details": [detail(
        {"name": "messages", "instance_ids": ["helpcentre"], "fields": ["id", "subject"],
         "time_constraint": {"field": "sent_at", "until": "2025-01-01T00:00:00Z"},
         "resources": ["msg-001-001", "msg-001-002"]},
        version="0.1.0", grant_id="grt_1", issued_at="2026-04-06T15:00:00Z",
        subject={"id": "u-001"}, client={"client_id": "app"},
        source={"kind": "connector", "id": "https://example.com/helpcentre"},
        source_declaration={"version": "1"}, purpose_code="https://pdpp.dev/purpose/x",
        access_mode="single_use", retention={"max_duration": "P1Y", "on_expiry": "delete"},
        expires_at="2030-01-01T00:00:00Z")]}, ["pdpp_grant"], None)
    assert grant.grant_id == "grt_1" and grant.expires_at == "2030-01-01T00:00:00Z"
    assert grant.for_stream("messages") == StreamGrant(
        frozenset({"id", "subject"}), "sent_at", None, "2025-01-01T00:00:00Z",
        frozenset({"msg-001-001", "msg-001-002"}))


def test_one_stream_across_details_adds_up_fields_or_records_never_both():
    def merged(*details: dict) -> StreamGrant:
        grant = grant_from_claims({"authorization_details": list(details)}, ["pdpp_grant"], None)
        return grant.for_stream("messages")

    same_records = merged(detail({**MESSAGES, "resources": ["m1"]}),
                          detail({"name": "messages", "fields": ["body"], "resources": ["m1"]}))
    assert same_records.fields == {"id", "subject", "body"}
    assert same_records.resources == {"m1"}
    same_fields = merged(detail({**MESSAGES, "resources": ["m1"]}),
                         detail({**MESSAGES, "resources": ["m2"]}))
    assert same_fields.resources == {"m1", "m2"} and same_fields.fields == {"id", "subject"}
    assert merged(detail({**MESSAGES, "resources": ["m1"]}), detail(MESSAGES)).resources is None


def test_scopes_from_scope_string_or_scp_array_and_kind_from_its_claim():
    owner = principal({"scp": ["a", "b"], "pdpp_token_kind": "owner", "azp": "app"})
    assert owner.scopes == {"a", "b"} and owner.kind is TokenKind.OWNER
    assert owner.client_id == "app"
    client = principal({"scope": "a  b"})
    assert client.scopes == {"a", "b"} and client.kind is TokenKind.CLIENT


@pytest.mark.parametrize("claims", [{"pdpp_token_kind": "admin"}, {"scope": 42}])
def test_unusable_claims_are_refused(claims):
    with pytest.raises(ClaimsError):
        principal(claims)


def test_route_rules_match_segments_and_let_get_cover_head():
    from gateway.auth.config import Auth
    from gateway.auth.routes import RouteTable

    auth = Auth.model_validate({"resource": "https://x", "routes": [
        {"path": "/admin", "methods": ["get"], "scopes": ["admin"]},
        {"path": "/public", "public": True}]})
    table = RouteTable(auth)
    for path in ("/admin", "/admin/x", "/admin;jsessionid=1"):
        assert table.access(path, "GET").scopes == {"admin"}, path
        assert table.access(path, "HEAD").scopes == {"admin"}, path
    assert table.access("/administrator", "GET").public is False  # default: authenticated
    assert table.access("/administrator", "GET").scopes == frozenset()
    assert table.access("/admin/x", "POST").scopes == frozenset()
