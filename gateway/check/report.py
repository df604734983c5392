"""The report: a table per spec with its score, or one JSON document for CI.

A spec's score is out of 100 over the rules it checked (skips do not count): a MUST weighs
three times a SHOULD, the way a required failure costs more than a recommended one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.check.rules import FAIL, MUST, PASS, SKIP, Outcome, Sheet

_WEIGHT = {MUST: 3, "SHOULD": 1}


@dataclass(frozen=True, slots=True)
class SpecReport:
    key: str
    title: str
    document: str
    served: bool
    note: str
    outcomes: tuple[Outcome, ...]

    @classmethod
    def of(cls, sheet: Sheet) -> SpecReport:
        spec = sheet.spec
        return cls(spec.key, spec.title, spec.document, sheet.served, sheet.note,
                   tuple(sheet.outcomes()))

    def count(self, result: str, level: str | None = None) -> int:
        return sum(1 for o in self.outcomes
                   if o.result == result and (level is None or o.rule.level == level))

    @property
    def score(self) -> int | None:
        judged = [o for o in self.outcomes if o.result != SKIP]
        if not judged:
            return None
        total = sum(_WEIGHT[o.rule.level] for o in judged)
        earned = sum(_WEIGHT[o.rule.level] for o in judged if o.result == PASS)
        return round(100 * earned / total)


@dataclass(frozen=True, slots=True)
class Report:
    target: str
    specs: tuple[SpecReport, ...]

    def failures(self, level: str) -> list[Outcome]:
        return [o for spec in self.specs for o in spec.outcomes
                if o.result == FAIL and o.rule.level == level]

    @property
    def exit_code(self) -> int:
        return 1 if self.failures(MUST) else 0

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "exit_code": self.exit_code,
            "must_failures": [o.rule.id for o in self.failures(MUST)],
            "should_failures": [o.rule.id for o in self.failures("SHOULD")],
            "specs": [{
                "spec": spec.key, "title": spec.title, "document": spec.document,
                "served": spec.served, "note": spec.note, "score": spec.score,
                "rules": [{"id": o.rule.id, "level": o.rule.level, "section": o.rule.section,
                           "title": o.rule.title, "result": o.result, "message": o.message}
                          for o in spec.outcomes],
            } for spec in self.specs],
        }


def render_text(report: Report) -> str:
    lines = [f"aigw check {report.target}", ""]
    width = max((len(o.rule.id) for s in report.specs for o in s.outcomes), default=20)
    for spec in report.specs:
        lines += _spec_lines(spec, width)
    must, should = report.failures(MUST), report.failures("SHOULD")
    lines.append(f"{len(must)} MUST failure(s), {len(should)} SHOULD failure(s): "
                 f"exit {report.exit_code}")
    return "\n".join(lines)


def _spec_lines(spec: SpecReport, width: int) -> list[str]:
    heading = f"{spec.title} ({spec.document})"
    lines = [heading + (f": {spec.note}" if spec.note else "")]
    if not spec.served:
        return [*lines, ""]
    for o in spec.outcomes:
        lines.append(f"  {o.result:<4}  {o.rule.level:<6}  {o.rule.id:<{width}}  "
                     f"{o.message}  [{o.rule.section}]")
    score = spec.score
    lines.append(
        f"  score {'-' if score is None else score}/100: MUST {_tally(spec, MUST)}, "
        f"SHOULD {_tally(spec, 'SHOULD')}, {spec.count(SKIP)} skipped")
    return [*lines, ""]


def _tally(spec: SpecReport, level: str) -> str:
    passed, failed = spec.count(PASS, level), spec.count(FAIL, level)
    return f"{passed}/{passed + failed} passed"
