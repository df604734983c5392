"""`aigw policy test`: decision fixtures (`*.test.yaml`) beside the policies, run against the
same bundle the gateway decides with, and the rules no fixture exercises.

A case names a principal, a request (a rule kind, a resource and its attributes) and what
is expected: the effect, the deciding rule (`default` when none) and, for kinds with a
projection, the visible fields.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from gateway.model import Principal, TokenKind
from gateway.policy.bundle import PolicyBundle
from gateway.policy.rules import Ask, Effect, KindName
from gateway.strict import Strict


class PrincipalSpec(Strict):
    kind: KindName = "client"
    scopes: list[str] = []
    client_id: str | None = None
    subject: str | None = "fixture"

    def principal(self) -> Principal:
        if self.kind == "anonymous":
            return Principal()
        return Principal(self.subject, self.client_id, frozenset(self.scopes),
                         TokenKind(self.kind))


class Expect(Strict):
    effect: Effect
    rule: str | None = Field(None, description="The deciding rule id; `default` for none.")
    visible: list[str] | None = None


class Case(Strict):
    name: str
    principal: PrincipalSpec = PrincipalSpec()
    request: dict[str, Any] = Field(description="kind, resource and the kind's attributes.")
    expect: Expect


class FixtureFile(Strict):
    description: str | None = None
    cases: list[Case] = Field(min_length=1)


@dataclass(slots=True)
class Result:
    file: str
    case: str
    diff: list[str] = field(default_factory=list)  # empty: passed


@dataclass(slots=True)
class Run:
    results: list[Result] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    exercised: set[str] = field(default_factory=set)
    uncovered: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(result.diff for result in self.results)


def fixture_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.test.yaml")) + sorted(folder.glob("*.test.yml"))


def ask_of(request: dict[str, Any], principal: Principal) -> Ask:
    attributes = {k: tuple(v) if isinstance(v, list) else v
                  for k, v in request.items() if k not in ("kind", "resource")}
    return Ask(str(request.get("kind")), str(request.get("resource", "")), principal, attributes)


def run_fixtures(bundle: PolicyBundle, settings: Any, folder: Path) -> Run:
    run = Run()
    for path in fixture_files(folder):
        try:
            fixtures = FixtureFile.model_validate(yaml.safe_load(path.read_text()))
        except (yaml.YAMLError, ValidationError) as exc:
            run.errors.append(f"{path.name}: not a fixture file: {_first_line(exc)}")
            continue
        for case in fixtures.cases:
            run.results.append(_run_case(bundle, settings, path.name, case, run.exercised))
    run.uncovered = [rule.id for rule in bundle.rules
                     if rule.id in bundle.files and rule.id not in run.exercised]
    return run


def _run_case(bundle: PolicyBundle, settings: Any, file: str, case: Case,
              exercised: set[str]) -> Result:
    ask = ask_of(case.request, case.principal.principal())
    if ask.kind not in bundle.kinds:
        return Result(file, case.name, [f"unknown rule kind {ask.kind!r}; known: "
                                        + ", ".join(sorted(bundle.kinds))])
    ask = bundle.kinds[ask.kind].with_context(settings, ask)
    outcome, shadow = bundle.decide(ask), bundle.shadow(ask)
    exercised.update(o.rule for o in (outcome, shadow) if o is not None and o.rule)
    got: dict[str, Any] = {"effect": outcome.effect, "rule": outcome.rule or "default"}
    wanted = case.expect.model_dump(exclude_none=True)
    if case.expect.visible is not None:
        projection = bundle.kinds[ask.kind].projection
        got["visible"] = sorted(projection(settings, bundle, ask)) \
            if projection is not None and outcome.effect == "allow" else []
        wanted["visible"] = sorted(case.expect.visible)
    got = {key: got[key] for key in wanted}
    if got == wanted:
        return Result(file, case.name)
    diff = difflib.unified_diff(_lines(wanted), _lines(got), "expected", "decided", lineterm="")
    return Result(file, case.name, [*diff, f"  why: {outcome.why}"])


def report_lines(run: Run, total_rules: int) -> list[str]:
    lines = [*(f"ERROR {error}" for error in run.errors)]
    for result in run.results:
        lines.append(f"{'FAIL' if result.diff else 'PASS'} {result.file}: {result.case}")
        lines.extend("    " + line for line in result.diff)
    passed = sum(1 for result in run.results if not result.diff)
    covered = total_rules - len(run.uncovered)
    percent = 100 if total_rules == 0 else round(100 * covered / total_rules)
    lines.append(f"{passed}/{len(run.results)} cases passed; rule coverage {percent}% "
                 f"({covered}/{total_rules} rules decide at least one case)")
    lines.extend(f"  not exercised: {rule}" for rule in run.uncovered)
    return lines


def _lines(values: dict[str, Any]) -> list[str]:
    return [f"{key}: {value}" for key, value in sorted(values.items())]


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
