"""`aigw policy log`: the decision log read by a person, one line per request (its time, caller,
request, effect, deciding rule and why), filtered by rule, caller, effect, time and surface; or
the records kept, as JSON lines for tools.

The records are the lines `gateway.policy.decisions.log_record` makes. They are read one line at
a time, so a log of any size streams through; lines that are not decision records (the access
and gateway log lines a shared stream carries) are skipped and counted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import orjson

from gateway.personal_data import hashed_subject

MAX_LINE = 16 * 1024 * 1024  # bytes: a longer line is skipped, never held whole
_SHORT_HASH = len("sha256:") + 8  # how much of a hashed subject a line shows
_DURATION = re.compile(r"(?:\d+[smhdw])+")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
Record = dict[str, Any]


def parse_since(text: str, now: float | None = None) -> float:
    """`15m`, `2h`, `1d`, `1h30m` (that long before `now`) or an ISO 8601 time (UTC unless it
    names its offset), in seconds since the epoch. Raises ValueError."""
    if _DURATION.fullmatch(text):
        seconds = sum(int(count) * _UNITS[unit] for count, unit in
                      re.findall(r"(\d+)([smhdw])", text))
        return (time.time() if now is None else now) - seconds
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither a duration (15m, 2h, 1d) nor an ISO 8601 time "
                         "(2026-11-23T10:00:00Z)") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


@dataclass
class Filters:
    """Which requests are shown: every filter given must hold. `rule` holds when the rule
    (`default`: no rule) took any of the request's decisions; `effect` and `surface` are the
    deciding decision's; `caller` is the principal's client id, subject (clear, hashed, or
    the start of a hashed one as a line shows it) or kind."""

    rule: str | None = None
    caller: str | None = None
    effect: str | None = None
    since: float | None = None
    surface: str | None = None
    _hashed: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.caller is not None:
            self._hashed = hashed_subject(self.caller)

    def admit(self, record: Record) -> bool:
        return (self.since is None or record["ts"] >= self.since) \
            and (self.effect is None or record.get("effect") == self.effect) \
            and (self.surface is None or record.get("surface") == self.surface) \
            and (self.rule is None or any(_rule(d) == self.rule for d in record["decisions"])) \
            and (self.caller is None or self._is_caller(record["principal"]))

    def _is_caller(self, principal: dict[str, Any]) -> bool:
        wanted, subject = self.caller, principal.get("subject")
        if wanted in (principal.get("kind"), principal.get("client_id")) or \
                (subject is not None and subject in (wanted, self._hashed)):
            return True
        return isinstance(subject, str) and isinstance(wanted, str) and \
            len(wanted) >= _SHORT_HASH and wanted.startswith("sha256:") and \
            subject.startswith(wanted)


def records(stream: IO[bytes]) -> Iterator[tuple[bytes, Record | None]]:
    """Each non-blank line of `stream` with its decision record, or None when it is none."""
    while line := stream.readline(MAX_LINE):
        if len(line) == MAX_LINE and not line.endswith(b"\n"):
            while (rest := stream.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                pass  # the rest of an over-long line, dropped as it is read
            yield b"", None
            continue
        line = line.strip()
        if line:
            try:
                found = orjson.loads(line)
            except orjson.JSONDecodeError:
                found = None
            yield line, found if is_decision(found) else None


def is_decision(value: Any) -> bool:
    """A decision-log record: what the lines below read without a default."""
    return isinstance(value, dict) and value.get("type") == "decision" \
        and isinstance(value.get("ts"), int | float) and not isinstance(value["ts"], bool) \
        and isinstance(value.get("principal"), dict) \
        and isinstance(value.get("decisions"), list) \
        and all(isinstance(entry, dict) for entry in value["decisions"])


def show(stream: IO[bytes], out: IO[bytes], filters: Filters, *, as_json: bool = False,
         verbose: bool = False) -> int:
    """Write the requests `filters` admit, as lines or (`as_json`) as their records' own
    lines; the number of lines skipped (not decision records)."""
    skipped = 0
    for line, record in records(stream):
        if record is None:
            skipped += 1
        elif filters.admit(record):
            text = line if as_json else "\n".join(
                request_lines(record, verbose, filters.rule)).encode()
            out.write(text + b"\n")
    return skipped


def request_lines(record: Record, verbose: bool = False, rule: str | None = None) -> list[str]:
    """The request's line, then (indented) every decision with `verbose`, or else those
    `rule` took besides the deciding one."""
    deciding = _deciding(record)
    head = "  ".join((timestamp(record["ts"]), caller(record["principal"]),
                      _request(deciding), _verdict(deciding)))
    removed = record.get("fields_removed")
    if isinstance(removed, list) and removed:
        head += "  removed: " + ", ".join(_clean(item) for item in removed)
    lines = [head]
    if verbose:
        lines.append(f"    decision {_clean(record.get('decision_id'))} request "
                     f"{_clean(record.get('request_id'))} revision "
                     f"{_clean(record.get('revision'))}")
        lines.extend(_decision_line(entry, attributes=True) for entry in record["decisions"])
    elif rule is not None:
        lines.extend(_decision_line(entry) for entry in record["decisions"]
                     if entry is not deciding and _rule(entry) == rule)
    return lines


def timestamp(ts: float) -> str:
    """ISO 8601 in UTC, to the millisecond."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def caller(principal: dict[str, Any]) -> str:
    """`client partner sub=sha256:1a2b3c4d [articles:read]`: kind, client id, subject (a hash
    shortened), scopes."""
    parts = [_clean(principal.get("kind", "?"))]
    if principal.get("client_id"):
        parts.append(_clean(principal["client_id"]))
    subject = principal.get("subject")
    if isinstance(subject, str):
        shown = subject[:_SHORT_HASH] if subject.startswith("sha256:") else subject
        parts.append("sub=" + _clean(shown))
    scopes = principal.get("scopes")
    if isinstance(scopes, list) and scopes:
        parts.append("[" + " ".join(_clean(scope) for scope in scopes) + "]")
    return " ".join(parts)


def _deciding(record: Record) -> Record:
    """The entry of the deciding decision (as `log_record` picks it: the first denial, else the
    last), or the record's own fields when its entries do not hold it."""
    entries = record["decisions"]
    found = next((d for d in entries if d.get("effect") == "deny"), entries[-1]) \
        if entries else record
    keys = ("surface", "kind", "resource", "rule", "effect")
    return found if all(found.get(key) == record.get(key) for key in keys) else record


def _decision_line(entry: Record, attributes: bool = False) -> str:
    line = f"    {_request(entry, attributes)}  {_verdict(entry)}"
    if isinstance(entry.get("removed"), list) and entry["removed"]:
        line += "  removed: " + ", ".join(_clean(item) for item in entry["removed"])
    return line


def _request(entry: Record, attributes: bool = False) -> str:
    """`gateway route GET /api/v1/users`: surface, kind, method (when asked with one), resource
    and, with `attributes`, the others."""
    given = entry.get("attributes")
    given = given if isinstance(given, dict) else {}
    parts = [_clean(entry.get("surface", "?")), _clean(entry.get("kind", "?"))]
    if "method" in given:
        parts.append(_clean(given["method"]))
    parts.append(_clean(entry.get("resource", "?")))
    if attributes:
        parts += [f"{_clean(key)}={_clean(value)}" for key, value in given.items()
                  if key != "method"]
    return " ".join(parts)


def _verdict(entry: Record) -> str:
    """`deny by legacy-users (insufficient_scope)`, with the mode when not enforced and what a
    shadow rule would have decided otherwise."""
    verdict = f"{_clean(entry.get('effect', '?'))} by {_clean(_rule(entry))}"
    if entry.get("why"):
        verdict += f" ({_clean(entry['why'])})"
    if entry.get("mode", "enforce") != "enforce":
        verdict += f" [{_clean(entry['mode'])}]"
    shadow = entry.get("shadow")
    if isinstance(shadow, dict) and shadow.get("differs"):
        verdict += f"  shadow: {_clean(shadow.get('rule'))} would {_clean(shadow.get('effect'))}"
    return verdict


def _rule(entry: Record) -> str:
    return entry.get("rule") or "default"


def _clean(value: Any) -> str:
    """A value as text a terminal shows as it is: control characters (a client's path may
    carry any) escaped, lists joined by commas."""
    text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else
                   f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" for c in text)
