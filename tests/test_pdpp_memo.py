"""What PDPP remembers of a caller's requests (gateway/surfaces/pdpp/memo.py): only for the
very principal and pipeline it was made for, a page with a next_cursor for a second at most, and
the decisions noted again count as decisions taken."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.context import RequestContext
from gateway.model import Grant, Principal, StreamGrant, TokenKind
from gateway.observability import POLICY_DECISIONS
from gateway.policy.decisions import Again, Noted, log_record, note_again
from gateway.policy.rules import Ask, Outcome
from gateway.surfaces.pdpp import memo as memo_module
from gateway.surfaces.pdpp.memo import CURSOR_REUSE, REMEMBERED, Decided, Memo
from gateway.surfaces.pdpp.projection import Access


def principal(client: str = "app") -> Principal:
    grant = Grant({"articles": StreamGrant(frozenset({"id"}))})
    return Principal("u-1", client, frozenset(), TokenKind.CLIENT, grant)


class Stream:
    name = "articles"


def decided(who: Principal, pipeline: object) -> Decided:
    access = Access(Stream(), frozenset({"id"}))  # type: ignore[arg-type]
    return Decided(who, pipeline, access, Again.of(()))


def test_an_access_is_remembered_for_the_same_principal_object_and_pipeline_only():
    memo, who, pipeline = Memo(), principal(), object()
    memo.keep_access(decided(who, pipeline))
    assert memo.access(who, pipeline, "articles") is not None
    assert memo.access(replace(who), pipeline, "articles") is None  # equal, yet another token's
    assert memo.access(who, object(), "articles") is None  # a reloaded policy's pipeline
    assert memo.access(who, pipeline, "messages") is None


def test_accesses_are_bounded():
    memo, pipeline = Memo(), object()
    callers = [principal(f"app-{i}") for i in range(REMEMBERED + 10)]
    for who in callers:
        memo.keep_access(decided(who, pipeline))
    assert memo.access(callers[0], pipeline, "articles") is None
    assert memo.access(callers[-1], pipeline, "articles") is not None


def test_a_body_with_a_cursor_is_served_again_for_a_second_at_most(monkeypatch):
    memo, who, pipeline = Memo(), principal(), object()
    now = [1000.0]
    monkeypatch.setattr(memo_module.time, "monotonic", lambda: now[0])
    memo.keep_body(who, pipeline, ("q", 1), b"with cursor", cursor=True)
    memo.keep_body(who, pipeline, ("q", 2), b"last page", cursor=False)
    assert memo.body(who, pipeline, ("q", 1)) == b"with cursor"
    assert memo.body(principal(), pipeline, ("q", 1)) is None
    now[0] += CURSOR_REUSE
    assert memo.body(who, pipeline, ("q", 1)) is None
    now[0] += 3600
    assert memo.body(who, pipeline, ("q", 2)) == b"last page"  # until its copy is replaced


@pytest.mark.parametrize("effect", ["allow", "deny"])
def test_decisions_noted_again_are_counted_and_noted(effect):
    ask = Ask("pdpp_field", "articles", principal(), {"field": "id", "grant": "granted"})
    outcome = Outcome(effect, None, "enforce", "no rule selects it: the default")
    counter = POLICY_DECISIONS.labels("default:pdpp_field", effect, "enforce")
    before = counter._value.get()
    ctx = RequestContext("req-1", "GET", "/v1/streams/articles/records", "127.0.0.1")
    decisions = (Noted("pdpp", ask, outcome), Noted("pdpp", ask, outcome, removed=("a.b",)))
    again = Again.of(decisions)
    note_again(ctx, again)
    assert counter._value.get() == before + 2
    assert ctx.decisions == list(decisions) and ctx.decision_id is not None
    first = log_record(ctx, "rev", "hash")
    ctx.decisions.clear()
    note_again(ctx, again)
    assert counter._value.get() == before + 4
    assert log_record(ctx, "rev", "hash")["decisions"] == first["decisions"]
    assert first["decisions"][1]["removed"] == ["a.b"]
