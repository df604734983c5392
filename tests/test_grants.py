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


@pytest.mark.parametrize("details", [
    "not-a-list",
    [{"type": "pdpp_grant", "streams": "messages"}],
    [{"type": "pdpp_grant", "streams": [{"fields": ["id"]}]}],
    [{"type": "pdpp_grant", "streams": [{"name": "m", "fields": [1, 2]}]}],
    [{"type": "pdpp_grant", "streams": [{"name": "m", "time_constraint": {"field": "a"}}]},
     {"type": "pdpp_grant", "streams": [{"name": "m", "time_constraint": {"field": "b"}}]}],
])
def test_malformed_grants_are_refused_not_widened(details):
    with pytest.raises(GrantError):
        grant_from_claims({"authorization_details": details}, ["pdpp_grant"], None)


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
