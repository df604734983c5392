"""Checks more than one spec makes: CORS on a discovery document, RateLimit fields, and
reading a JSON object out of an answer."""

from __future__ import annotations

import re
from typing import Any

from gateway.check.http import ORIGIN_HEADER, Answer, NotJson
from gateway.check.rules import Outcome, Rule

# CORS is no spec's MUST: the discovery documents are meant for agents, some of which run in a
# browser, and a browser hides a cross-origin answer that lacks this field (Fetch, "CORS
# protocol"). The rules that use this section are SHOULDs.
CORS_SECTION = "Fetch §3.2 (CORS)"
# The RateLimit fields: the older triple (AIDRE §21.2's examples) and the structured pair.
RATELIMIT_SECTION = "draft-ietf-httpapi-ratelimit-headers"
_TRIPLE = ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset")
_PARAMETER = re.compile(r"^\s*([a-z][a-z0-9_.*-]*)\s*=\s*(.*?)\s*$")


def cors(rule: Rule, answer: Answer) -> Outcome:
    """Whether a browser agent on another origin may read the answer."""
    if answer.status != 200:
        return rule.skipped(f"{answer.describe()}: no document to check")
    allowed = answer.headers.get("access-control-allow-origin", "").strip()
    if allowed in ("*", ORIGIN_HEADER):
        return rule.passed(f"Access-Control-Allow-Origin: {allowed}")
    if not allowed:
        return rule.failed("no Access-Control-Allow-Origin: browser agents cannot read it")
    return rule.failed(f"Access-Control-Allow-Origin {allowed!r} excludes other origins")


def ratelimit_fields(present: Rule, syntax: Rule, answers: list[Answer]) -> list[Outcome]:
    """Whether answers carry RateLimit fields, and whether those they carry are well-formed."""
    carrying = [a for a in answers if _has_fields(a)]
    if not carrying:
        checked = ", ".join(a.describe() for a in answers[:3]) or "no answers"
        reason = "no RateLimit fields on " + checked
        return [present.failed(reason), syntax.skipped(reason)]
    problems = [f"{a.describe()}: {p}" for a in carrying if (p := _field_problem(a))]
    shown = ", ".join(sorted({_field_names(a) for a in carrying}))
    return [present.passed(f"{len(carrying)} of {len(answers)} answers carry {shown}"),
            syntax.check(not problems, problems[0] if problems else "values are well-formed")]


def _has_fields(answer: Answer) -> bool:
    return any(name in answer.headers for name in (*_TRIPLE, "ratelimit", "ratelimit-policy"))


def _field_names(answer: Answer) -> str:
    return "RateLimit-Limit/-Remaining/-Reset" if "ratelimit-limit" in answer.headers \
        else "RateLimit/RateLimit-Policy"


def _field_problem(answer: Answer) -> str | None:
    for name in _TRIPLE:
        value = answer.headers.get(name)
        if value is not None and not value.strip().isdigit():
            return f"{name} is {value[:40]!r}, not a non-negative integer"
    for name in ("ratelimit", "ratelimit-policy"):
        value = answer.headers.get(name)
        if value is not None and (problem := _structured_problem(value)):
            return f"{name}: {problem}"
    return None


def _structured_problem(value: str) -> str | None:
    """The parameters the fields define (q, w, r, t, pk is bytes) are non-negative integers."""
    for item in value.split(","):
        name, *parameters = item.split(";")
        if not name.strip():
            return "an item has no policy name"
        for parameter in parameters:
            match = _PARAMETER.match(parameter)
            if match is None:
                return f"malformed parameter {parameter.strip()[:30]!r}"
            key, number = match.groups()
            if key in ("q", "w", "r", "t") and not number.isdigit():
                return f"{key}={number[:20]} is not a non-negative integer"
    return None


def json_object(answer: Answer) -> tuple[dict[str, Any] | None, str]:
    """The answer's JSON object, or None and why not."""
    try:
        return answer.json_object(), ""
    except NotJson as exc:
        return None, f"{answer.describe()}: {exc}"


def json_value(answer: Answer) -> tuple[Any, str]:
    try:
        return answer.json(), ""
    except NotJson as exc:
        return None, f"{answer.describe()}: {exc}"


def items(value: Any) -> list[Any]:
    """A member that should be an array, as one (empty when a document gives anything else)."""
    return value if isinstance(value, list) else []


def member(value: Any) -> dict[str, Any]:
    """A member that should be an object, as one (empty when it is anything else)."""
    return value if isinstance(value, dict) else {}


def answered(answer: Answer) -> str | None:
    """None when a response arrived, else the reason none did."""
    return None if answer.status else f"{answer.describe()}"
