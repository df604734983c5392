"""Rules, their outcomes, and one spec's sheet of them.

A rule has a stable id (`aidre.search.top_k_bounds`), a level (MUST or SHOULD, as the spec
words it), the spec section it comes from and a one-line title. A check gives each rule one
outcome: pass, fail or skip (with the reason). A rule checked several times (every error
answer against the envelope) keeps its worst outcome: one failure fails it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MUST, SHOULD = "MUST", "SHOULD"
PASS, FAIL, SKIP = "pass", "fail", "skip"
_RANK = {SKIP: 0, PASS: 1, FAIL: 2}
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
MAX_MESSAGE = 160


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    level: str
    section: str
    title: str

    def passed(self, message: str = "") -> Outcome:
        return Outcome(self, PASS, message)

    def failed(self, message: str) -> Outcome:
        return Outcome(self, FAIL, message)

    def skipped(self, reason: str) -> Outcome:
        return Outcome(self, SKIP, reason)

    def check(self, ok: bool, message: str) -> Outcome:
        return self.passed(message) if ok else self.failed(message)


@dataclass(frozen=True, slots=True)
class Outcome:
    rule: Rule
    result: str
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", clean(self.message))


def clean(text: str) -> str:
    """A message fit for a terminal: a server's words lose control characters and length."""
    text = _UNPRINTABLE.sub(" ", text).strip()
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 1] + "…"


class Spec:
    """One spec's rules, declared once at import, in the order the report lists them."""

    def __init__(self, key: str, title: str, document: str) -> None:
        self.key = key
        self.title = title
        self.document = document
        self.rules: list[Rule] = []

    def must(self, name: str, section: str, title: str) -> Rule:
        return self._add(name, MUST, section, title)

    def should(self, name: str, section: str, title: str) -> Rule:
        return self._add(name, SHOULD, section, title)

    def _add(self, name: str, level: str, section: str, title: str) -> Rule:
        rule = Rule(f"{self.key}.{name}", level, section, title)
        assert rule.id not in {r.id for r in self.rules}, rule.id
        self.rules.append(rule)
        return rule


class Sheet:
    """The outcomes of one spec's check, as they come; every rule left open is skipped."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.served = True
        self.note = ""  # what was checked, or why nothing was: "not served: ..."
        self._outcomes: dict[str, Outcome] = {}

    def add(self, *outcomes: Outcome | None) -> None:
        for outcome in outcomes:
            if outcome is None:
                continue
            held = self._outcomes.get(outcome.rule.id)
            if held is None or _RANK[outcome.result] > _RANK[held.result]:
                self._outcomes[outcome.rule.id] = outcome

    def not_served(self, reason: str) -> None:
        self.served = False
        self.note = f"not served: {reason}"
        self.skip_rest(self.note)

    def skip_rest(self, reason: str) -> None:
        for rule in self.spec.rules:
            if rule.id not in self._outcomes:
                self._outcomes[rule.id] = rule.skipped(reason)

    def outcomes(self) -> list[Outcome]:
        self.skip_rest("not reached")
        return [self._outcomes[rule.id] for rule in self.spec.rules]
