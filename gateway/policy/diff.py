"""`aigw policy diff OLD NEW`: a policy change read as decisions: which (caller, surface,
resource) cells turn from allow to deny or back, and which fields appear or disappear."""

from __future__ import annotations

from typing import Any

from gateway.policy.bundle import PolicyBundle
from gateway.policy.matrix import Cell, known_scopes, matrix, personas


def diff_lines(old: PolicyBundle, new: PolicyBundle, settings: Any) -> list[str]:
    # The same callers and requests on both sides, so what only one side names is tried on
    # both.
    people = list({p.label: p for bundle in (old, new)
                   for p in personas(bundle, known_scopes(settings))}.values())
    rules = [*old.rules, *new.rules]
    before = _by_key(matrix(old, settings, people, rules))
    after = _by_key(matrix(new, settings, people, rules))
    lines = []
    for key in sorted(before.keys() | after.keys()):
        lines.extend(_changes(key, before.get(key), after.get(key)))
    return lines


def _by_key(cells: list[Cell]) -> dict[tuple[str, ...], Cell]:
    return {(c.surface, c.kind, c.resource, c.detail, c.persona): c for c in cells}


def _changes(key: tuple[str, ...], old: Cell | None, new: Cell | None) -> list[str]:
    surface, kind, resource, detail, persona = key
    where = f"{persona} | {surface} {kind} {resource} {detail}".rstrip()
    old_effect = old.effect if old else "absent"
    new_effect = new.effect if new else "absent"
    lines = []
    if old_effect != new_effect:
        rule = (new.rule if new else None) or "the default"
        lines.append(f"{old_effect} -> {new_effect}: {where} (now decided by {rule})")
    gained = sorted(set(new.visible if new else ()) - set(old.visible if old else ()))
    lost = sorted(set(old.visible if old else ()) - set(new.visible if new else ()))
    if gained:
        lines.append(f"visible +{', +'.join(gained)}: {where}")
    if lost:
        lines.append(f"visible -{', -'.join(lost)}: {where}")
    return lines
