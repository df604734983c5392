"""The policy bundle: every rule one config generation decides with, and its revision.

Rules come from the policy files (`rules:` first, then older keys a kind still reads), then
from the config file (`config:` ids). A rule naming no owner has its file's. The revision is
a digest of the policy files' bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import TypeAdapter

from gateway.caching import BoundedCache
from gateway.policy.kinds import RawRule, RuleKind
from gateway.policy.rules import Ask, Outcome, Rule, evaluate

if TYPE_CHECKING:
    from gateway.model import Principal
    from gateway.settings import Settings

# Outcomes a bundle remembers (see `PolicyBundle._evaluate`), the least recently used dropped:
# callers who vary what they ask (platform names, say) cannot grow it without end.
DECISIONS_KEPT: Final = 1024


@dataclass(frozen=True, slots=True)
class PolicyBundle:
    rules: tuple[Rule, ...]
    kinds: Mapping[str, RuleKind]
    revision: str = "none"
    files: Mapping[str, str] = field(default_factory=dict)  # rule id -> policy file stem
    # (kind, with shadow rules) -> rules, built once: decisions are on the request path.
    _index: dict[tuple[str, bool], list[Rule]] = field(init=False, repr=False, compare=False)
    _decided: BoundedCache[tuple[Any, ...], tuple[Principal, Outcome]] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[tuple[str, bool], list[Rule]] = {}
        for rule in self.rules:
            index.setdefault((rule.kind, True), []).append(rule)
            if rule.mode == "enforce":
                index.setdefault((rule.kind, False), []).append(rule)
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_decided", BoundedCache(DECISIONS_KEPT))

    def of_kind(self, kind: str, *, shadow: bool = False) -> list[Rule]:
        """Enforced rules of a kind; with `shadow`, the shadow rules too."""
        return list(self._index.get((kind, shadow), ()))

    def has_shadow(self, kind: str) -> bool:
        return len(self._index.get((kind, True), ())) != len(self._index.get((kind, False), ()))

    def rule(self, rule_id: str) -> Rule | None:
        return next((rule for rule in self.rules if rule.id == rule_id), None)

    def decide(self, ask: Ask) -> Outcome:
        return self._evaluate(ask, shadow=False)

    def shadow(self, ask: Ask) -> Outcome | None:
        """What the decision would be with the shadow rules enforced; None without any."""
        if not self.has_shadow(ask.kind):
            return None
        return self._evaluate(ask, shadow=True)

    def _evaluate(self, ask: Ask, *, shadow: bool) -> Outcome:
        """The rules' outcome, remembered: it depends on nothing but the ask (its kind,
        resource, principal and attributes) and this bundle's rules, which never change, so the
        same caller asking the same again (every request of a busy client) is answered from
        memory. The principal is taken by identity (the auth cache hands a client the same one
        each time; a grant makes it unhashable): the entry holds it, so no other principal can
        take its id while the entry lasts. An ask with an unhashable attribute is decided each
        time."""
        key = (id(ask.principal), ask.kind, ask.resource, tuple(ask.attributes.items()), shadow)
        try:
            found = self._decided.get(key)
        except TypeError:  # unhashable: decide it every time
            return self._decide(ask, shadow)
        if found is not None and found[0] is ask.principal:
            return found[1]
        outcome = self._decide(ask, shadow)
        self._decided.put(key, (ask.principal, outcome))
        return outcome

    def _decide(self, ask: Ask, shadow: bool) -> Outcome:
        kind = self.kinds[ask.kind]
        return evaluate(self._index.get((ask.kind, shadow), []), ask, kind.default_for(ask),
                        most_specific=kind.most_specific)


def raw_rules(document: Mapping[str, Any], stem: str,
              kinds: Iterable[RuleKind]) -> list[RawRule]:
    """A policy file's rules, older keys translated; a rule naming no owner has the file's
    (`owner:` at the top), so reports say who answers for each rule. An owner decides nothing."""
    found = list(document.get("rules") or [])
    for kind in kinds:
        if kind.legacy is not None:
            found.extend(kind.legacy(dict(document), stem))
    owner = document.get("owner")
    return [{**raw, "owner": owner} if owner and raw.get("owner") is None else raw
            for raw in found]


def build_bundle(settings: Settings, policies: Mapping[str, Mapping[str, Any]],
                 kinds: Mapping[str, RuleKind], model: TypeAdapter[Any],
                 revision: str = "none") -> PolicyBundle:
    """The bundle of already validated policy documents (file stem -> document); `model`
    validates one rule of any kind (gateway.registry.rule_model)."""
    rules: list[Rule] = []
    files: dict[str, str] = {}
    for stem, document in policies.items():
        for raw in raw_rules(document, stem, kinds.values()):
            rule = model.validate_python(raw)
            rules.append(rule)
            files[rule.id] = stem
    for kind in kinds.values():
        if kind.from_config is not None:
            rules.extend(model.validate_python(raw) for raw in kind.from_config(settings))
    return PolicyBundle(tuple(rules), kinds, revision, files)


def revision_of(files: Iterable[Path]) -> str:
    """A short digest of the policy files (names and bytes), for logs, /metrics and reports."""
    digest = hashlib.sha256()
    for file in sorted(files, key=lambda f: f.name):
        digest.update(file.name.encode() + b"\0")
        try:
            digest.update(file.read_bytes())
        except OSError:
            digest.update(b"\0missing")
    return digest.hexdigest()[:16]
