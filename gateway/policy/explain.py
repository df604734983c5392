"""`aigw policy explain`: for one request, every rule consulted, the one that decided and why,
and what the caller gets to see; or the same for a decision found in the decision log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gateway.loader import LoadedConfig
from gateway.model import Principal
from gateway.policy.bundle import PolicyBundle
from gateway.policy.fixtures import PrincipalSpec, ask_of
from gateway.policy.logview import records
from gateway.policy.matrix import detail, outcome_line
from gateway.policy.rules import Ask


def parse_pairs(text: str) -> dict[str, Any]:
    """"kind=client scopes=a,b" -> {"kind": "client", "scopes": ["a", "b"]}."""
    found: dict[str, Any] = {}
    for pair in text.split():
        key, _, value = pair.partition("=")
        found[key] = value.split(",") if key in ("scopes", "uses") else value
    return found


def explain_request(loaded: LoadedConfig, request: str, principal: str) -> list[str] | None:
    assert loaded.bundle is not None
    try:
        spec = PrincipalSpec.model_validate(parse_pairs(principal))
    except ValueError as exc:
        print(f"--principal: {exc}", file=sys.stderr)
        return None
    ask = ask_of(parse_pairs(request), spec.principal())
    if ask.kind not in loaded.bundle.kinds:
        print(f"--request: kind must be one of {', '.join(sorted(loaded.bundle.kinds))}",
              file=sys.stderr)
        return None
    return explain(loaded.bundle, loaded.settings, ask)


def explain(bundle: PolicyBundle, settings: Any, ask: Ask) -> list[str]:
    kind = bundle.kinds[ask.kind]
    ask = kind.with_context(settings, ask)
    principal = ask.principal
    lines = [f"request: {ask.kind} {ask.resource} {detail(ask)}".rstrip(),
             f"principal: {principal.kind.value} scopes=[{' '.join(sorted(principal.scopes))}]"
             f" client_id={principal.client_id or '-'}",
             f"policy revision: {bundle.revision}", "rules consulted (file order):"]
    outcome, shadow = bundle.decide(ask), bundle.shadow(ask)
    consulted = {c.rule: c for c in (shadow or outcome).consulted}
    for rule in bundle.rules:
        if rule.kind != ask.kind:
            continue
        seen = consulted.get(rule.id)
        state = seen.why if seen is not None else "selects it, but a more specific rule " \
            "decides" if rule.selects(ask) else "does not select this resource"
        lines.append(f"  {rule.id} [{rule.effect}, {rule.mode}]: {state}")
    lines.append(f"decision: {outcome_line(outcome)}")
    if shadow is not None and shadow.mode == "shadow":
        lines.append(f"shadow: would be {outcome_line(shadow)}")
    if kind.projection is not None and outcome.effect == "allow":
        lines.append("visible: " + ", ".join(kind.projection(settings, bundle, ask)))
    return lines


def explain_logged(loaded: LoadedConfig, log: Path, decision_id: str) -> list[str] | None:
    """Each decision of a logged request, explained with the policies now loaded."""
    record = _find(log, decision_id)
    if record is None:
        print(f"no decision {decision_id} in {log}", file=sys.stderr)
        return None
    assert loaded.bundle is not None
    lines = [f"decision {decision_id} (request {record.get('request_id')}), logged with "
             f"revision {record.get('revision')}"]
    if record.get("revision") != loaded.bundle.revision:
        lines.append(f"note: the policies now loaded are revision {loaded.bundle.revision}")
    view = record.get("principal", {})
    spec = PrincipalSpec(kind=view.get("kind", "anonymous"), scopes=view.get("scopes", []),
                         client_id=view.get("client_id"))
    for entry in record.get("decisions", []):
        lines.append("")
        lines.extend(_explain_entry(loaded, entry, spec.principal()))
    return lines


def _explain_entry(loaded: LoadedConfig, entry: dict[str, Any], principal: Principal) -> list[str]:
    """One logged decision explained now, with a `differs:` line when the policies loaded
    decide it otherwise than the gateway did (another revision, or a bug: both are news)."""
    assert loaded.bundle is not None
    request = {"kind": entry["kind"], "resource": entry["resource"],
               **entry.get("attributes", {})}
    logged = f"{entry['effect']} by {entry.get('rule') or 'the default'}"
    lines = [f"logged: {logged}"]
    ask = ask_of(request, principal)
    if ask.kind not in loaded.bundle.kinds:
        return [*lines, f"differs: kind {ask.kind} is not one the policies now loaded know"]
    lines.extend(explain(loaded.bundle, loaded.settings, ask))
    kind = loaded.bundle.kinds[ask.kind]
    now = loaded.bundle.decide(kind.with_context(loaded.settings, ask))
    if (now.effect, now.rule) != (entry["effect"], entry.get("rule")):
        lines.append(f"differs: logged {logged}; the policies now loaded decide "
                     f"{now.effect} by {now.rule or 'the default'}")
    return lines


def differs(lines: list[str]) -> bool:
    return any(line.startswith("differs: ") for line in lines)


def _find(log: Path, decision_id: str) -> dict[str, Any] | None:
    """The record of `decision_id`, read a line at a time (a decision log can be large)."""
    try:
        with log.open("rb") as stream:
            return next((record for _, record in records(stream)
                         if record is not None and record.get("decision_id") == decision_id),
                        None)
    except OSError:
        return None
