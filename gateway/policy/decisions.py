"""Decisions taken for one request: noted on its context, counted, and turned into the
decision-log line (gateway.policy.decisionlog) once the request is over."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.context import RequestContext
from gateway.observability import POLICY_DECISIONS
from gateway.personal_data import SubjectRule, logged_subject
from gateway.policy.rules import Ask, Outcome

HEADER = b"x-aigw-decision-id"


@dataclass(frozen=True, slots=True)
class Noted:
    surface: str
    ask: Ask
    outcome: Outcome
    shadow: Outcome | None = None
    removed: tuple[str, ...] = ()  # result parts or fields taken out (projection)
    # Its decision-log entry, made the first time a line shows it: a remembered decision
    # (`Again`) is shown by many lines. Never changed once made; serialized only.
    entry: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def shadow_differs(self) -> bool:
        return self.shadow is not None and (self.shadow.effect, self.shadow.rule) != (
            self.outcome.effect, self.outcome.rule)


def note(ctx: RequestContext | None, surface: str, ask: Ask, outcome: Outcome,
         shadow: Outcome | None = None, removed: tuple[str, ...] = ()) -> None:
    """Count a decision and, with a request, note it for the decision log."""
    _count(ask, outcome, shadow)
    if ctx is None:
        return
    _identify(ctx)
    ctx.decisions.append(Noted(surface, ask, outcome, shadow, removed))


@dataclass(frozen=True, slots=True)
class Again:
    """Decisions taken for an earlier request, remembered to be noted again (`note_again`),
    with the counters they count in and how many of them each counts."""

    decisions: tuple[Noted, ...]
    counts: tuple[tuple[Any, int], ...]
    denied: int

    @classmethod
    def of(cls, decisions: Sequence[Noted]) -> Again:
        counts: dict[Any, int] = {}
        for decided in decisions:
            for counter in _counters(decided.ask, decided.outcome, decided.shadow):
                counts[counter] = counts.get(counter, 0) + 1
        denied = sum(1 for decided in decisions if decided.outcome.effect != "allow")
        return cls(tuple(decisions), tuple(counts.items()), denied)


def note_again(ctx: RequestContext, again: Again) -> None:
    """Decisions taken for an earlier request of the same caller under the same rules,
    counted and noted for this one as `note` would have (the decision log reads the same)."""
    for counter, times in again.counts:
        counter.inc(times)
    if again.decisions:
        _identify(ctx)
        ctx.decisions.extend(again.decisions)


def _count(ask: Ask, outcome: Outcome, shadow: Outcome | None) -> None:
    for counter in _counters(ask, outcome, shadow):
        counter.inc()


def _counters(ask: Ask, outcome: Outcome, shadow: Outcome | None) -> list[Any]:
    found = [_counter(_label(outcome, ask), outcome.effect, "enforce")]
    if shadow is not None and shadow.mode == "shadow":
        found.append(_counter(_label(shadow, ask), shadow.effect, "shadow"))
    return found


def _identify(ctx: RequestContext) -> None:
    if ctx.decision_id is None:
        # A label like the request id, not a secret: the seeded PRNG (no system call).
        ctx.decision_id = f"{random.getrandbits(128):032x}"


@functools.lru_cache(maxsize=4096)
def _counter(rule: str, effect: str, mode: str) -> Any:
    """The counter of one (rule, effect, mode): a request may take dozens of decisions, and
    finding a labelled child costs more than counting in it."""
    return POLICY_DECISIONS.labels(rule, effect, mode)


def _label(outcome: Outcome, ask: Ask) -> str:
    return outcome.rule or f"default:{ask.kind}"


def log_record(ctx: RequestContext, revision: str, subjects: SubjectRule) -> dict[str, Any]:
    """The decision-log line of a request: the deciding decision first, then all of them."""
    decisions = ctx.decisions
    final = decisions[0] if len(decisions) == 1 else \
        next((d for d in decisions if d.outcome.effect == "deny"), decisions[-1])
    record = {
        "type": "decision", "ts": time.time(), "decision_id": ctx.decision_id,
        "request_id": ctx.request_id, "revision": revision, "surface": final.surface,
        "kind": final.ask.kind, "resource": final.ask.resource,
        "rule": final.outcome.rule, "effect": final.outcome.effect, "mode": final.outcome.mode,
        "principal": principal_view(final.ask.principal, subjects),
        "fields_removed": sorted({f for d in decisions for f in d.removed}),
        "decisions": [_entry(d) for d in decisions],
    }
    if ctx.parent is not None:  # an inner request: the request (a tool call, say) it served
        record["parent_request_id"] = ctx.parent
    return record


def _entry(decision: Noted) -> dict[str, Any]:
    if decision.entry is None:
        object.__setattr__(decision, "entry", _made_entry(decision))
    assert decision.entry is not None
    return decision.entry


def _made_entry(decision: Noted) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "surface": decision.surface, "kind": decision.ask.kind,
        "resource": decision.ask.resource, "rule": decision.outcome.rule,
        "effect": decision.outcome.effect, "mode": decision.outcome.mode,
        "why": decision.outcome.why,
    }
    attributes = {k: list(v) if isinstance(v, tuple) else v
                  for k, v in decision.ask.attributes.items() if isinstance(v, str | tuple)}
    if attributes:
        entry["attributes"] = attributes
    if decision.removed:
        entry["removed"] = list(decision.removed)
    if decision.shadow is not None and decision.shadow.mode == "shadow":
        entry["shadow"] = {"rule": decision.shadow.rule, "effect": decision.shadow.effect,
                           "differs": decision.shadow_differs}
    return entry


def principal_view(principal: Any, subjects: SubjectRule) -> dict[str, Any]:
    """Who asked, without secrets: the subject as `logging.subjects` says (hashed by default)."""
    return dict(_view(principal.kind.value, principal.scopes, principal.client_id,
                      principal.subject, subjects))


@functools.lru_cache(maxsize=4096)
def _view(kind: str, scopes: frozenset[str], client_id: str | None, subject: str | None,
          subjects: SubjectRule) -> tuple[tuple[str, Any], ...]:
    """A busy caller's view is made once (its subject's hash, its sorted scopes), not per line."""
    view: dict[str, Any] = {"kind": kind, "scopes": tuple(sorted(scopes)), "client_id": client_id}
    shown = logged_subject(subject, subjects)
    if shown is not None:
        view["subject"] = shown
    return tuple(view.items())
