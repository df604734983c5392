"""PDPP's rule kinds: which streams a token reads (`pdpp_stream`) and which fields of a
stream it is shown (`pdpp_field`); and its streams as resources the core's `record_visibility`
rules decide on (who sees a stream's records of each visibility: gateway.policy.resources).

The grant in the token is the source of truth. Every decision carries what the grant says
(`grant`: `owner` for an owner token, `granted`, `required` for a schema-required field of a
granted stream, `not_granted`, or `no_grant` for a client token without one) and each kind's
default follows it. Rules select only what the grant already allows to an owner or a client
(`owner`, `granted`), so a policy file can take a stream or a field away from some callers but
never add one, and never a schema-required field (a record always carries those).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gateway.model import Principal, TokenKind
from gateway.policy.kinds import RuleKind, Sample
from gateway.policy.resources import ResourceSpec
from gateway.policy.rules import Ask, Effect, Rule
from gateway.settings import Settings
from gateway.surfaces.pdpp.config import Pdpp, Stream

STREAM_KIND, FIELD_KIND = "pdpp_stream", "pdpp_field"
OWNER, GRANTED, REQUIRED, NOT_GRANTED, NO_GRANT = (
    "owner", "granted", "required", "not_granted", "no_grant")
_READABLE = frozenset({OWNER, GRANTED, REQUIRED})  # what the grant lets the token read
_NARROWABLE = frozenset({OWNER, GRANTED})  # what a rule may take away


def readable(coverage: str) -> bool:
    """Whether the grant alone lets the token read it (no rule can go beyond this)."""
    return coverage in _READABLE


class StreamRead(Rule):
    """Who reads a stream, among the tokens whose grant covers it (an owner token covers
    every stream)."""

    kind: Literal["pdpp_stream"] = Field(
        description="`pdpp_stream`: which streams a token reads, within its grant.",
    )
    streams: list[str] | None = Field(None, description="Stream names; none: every stream.")

    def selects(self, ask: Ask) -> bool:
        return ask.attributes.get("grant") in _NARROWABLE \
            and (self.streams is None or ask.resource in self.streams)


class FieldExposure(Rule):
    """Who is shown a field of a stream, among the tokens whose grant covers it; a field a
    rule denies is left out of records, search matches, snippets, filters and ordering."""

    kind: Literal["pdpp_field"] = Field(
        description="`pdpp_field`: which fields of a stream a token is shown, within its grant.",
    )
    streams: list[str] | None = Field(None, description="Stream names; none: every stream.")
    fields: list[str] | None = Field(
        None, description="Field names; none: every field (schema-required ones are never "
                          "taken away).")

    def selects(self, ask: Ask) -> bool:
        return ask.attributes.get("grant") in _NARROWABLE \
            and (self.streams is None or ask.resource in self.streams) \
            and (self.fields is None or ask.attributes.get("field") in self.fields)


def stream_ask(principal: Principal, name: str, coverage: str) -> Ask:
    grant_id = principal.grant.grant_id if principal.grant is not None else None
    attributes = {"grant": coverage, **({"grant_id": grant_id} if grant_id else {})}
    return Ask(STREAM_KIND, name, principal, attributes)


def field_ask(principal: Principal, stream: str, field: str, coverage: str) -> Ask:
    return Ask(FIELD_KIND, stream, principal, {"field": field, "grant": coverage})


def field_removed(ask: Ask) -> tuple[str, ...]:
    """What a denied field decision takes out of the answer, as the decision log names it."""
    return (f"{ask.resource}.{ask.attributes.get('field')}",)


def _grant_default(ask: Ask) -> Effect:
    """The grant decides: an owner reads every stream and field of its own, a client what its
    grant names and the schema requires; a token without a kind reads nothing."""
    if ask.principal.is_anonymous:
        return "deny"
    return "allow" if readable(str(ask.attributes.get("grant"))) else "deny"


def _section(settings: Settings) -> Pdpp | None:
    return getattr(settings, "pdpp", None)


def _streams(settings: Settings) -> dict[str, Stream]:
    pdpp = _section(settings)
    return dict(pdpp.streams) if pdpp is not None else {}


def _stream_names(settings: Settings) -> list[str]:
    return sorted(_streams(settings))


def _assumed(settings: Settings, ask: Ask) -> dict[str, Any]:
    """What a fixture or `aigw policy explain` need not spell: the token's grant covers what
    is asked (rules only narrow that), a required field is required."""
    kind = ask.principal.kind
    coverage = OWNER if kind is TokenKind.OWNER else GRANTED if kind is TokenKind.CLIENT \
        else NO_GRANT
    stream = _streams(settings).get(ask.resource)
    field = stream.fields.get(str(ask.attributes.get("field"))) if stream else None
    if ask.kind == FIELD_KIND and coverage != NO_GRANT and field is not None and field.required:
        coverage = REQUIRED
    return {"grant": coverage}


def _stream_samples(settings: Settings, rules: list[Rule]) -> list[Sample]:
    """Every stream the config serves, as a token whose grant covers it."""
    return [(name, {"grant": GRANTED}) for name in _stream_names(settings)]


def _field_samples(settings: Settings, rules: list[Rule]) -> list[Sample]:
    """The fields the rules select among those the config serves (not the required ones)."""
    streams = _streams(settings)
    found = []
    for rule in rules:
        if not isinstance(rule, FieldExposure):
            continue
        for name in rule.streams or sorted(streams):
            stream = streams.get(name)
            for field in (rule.fields or list(stream.fields)) if stream else ():
                spec = stream.fields.get(field) if stream else None
                if spec is not None and not spec.required:
                    found.append((name, {"field": field, "grant": GRANTED}))
    return found


def _shown_fields(settings: Settings, bundle: Any, ask: Ask) -> list[str]:
    """What a reader of the stream is shown of each record: the fields the field rules leave
    it (the grant itself may name fewer)."""
    stream = _streams(settings).get(ask.resource)
    if stream is None:
        return []
    coverage = str(ask.attributes.get("grant", GRANTED))
    shown = []
    for name, spec in stream.fields.items():
        field_coverage = REQUIRED if spec.required else coverage
        if bundle.decide(field_ask(ask.principal, ask.resource, name,
                                   field_coverage)).effect == "allow":
            shown.append(name)
    return shown


PDPP_KINDS = [
    RuleKind(STREAM_KIND, "pdpp", StreamRead,
             "which streams a token reads, within its grant (default: what the grant names; "
             "owners: every stream)", default=_grant_default, resources=_stream_names,
             samples=_stream_samples, projection=_shown_fields, context=_assumed),
    RuleKind(FIELD_KIND, "pdpp", FieldExposure,
             "which fields of a stream a token is shown, within its grant (default: what the "
             "grant names and the schema requires; owners: every field)",
             default=_grant_default, resources=_stream_names, samples=_field_samples,
             context=_assumed),
]


def rule_problems(pdpp: Pdpp | None, rules: list[Any]) -> list[tuple[str, str]]:
    """(dotted path in the policy file, message) for PDPP rules naming a stream the config does
    not serve, or a field that is not one of the stream's or that the schema requires."""
    streams = dict(pdpp.streams) if pdpp is not None else {}
    expected = f"expected one of the PDPP streams ({', '.join(sorted(streams)) or 'none'})"
    problems = []
    for index, rule in enumerate(rules):
        if not isinstance(rule, StreamRead | FieldExposure):
            continue
        for position, name in enumerate(rule.streams or ()):
            if name not in streams:
                problems.append((f"rules[{index}].streams[{position}]", expected))
        if isinstance(rule, FieldExposure):
            problems.extend(_field_problems(rule, index, streams))
    return problems


def _field_problems(rule: FieldExposure, index: int,
                    streams: dict[str, Stream]) -> list[tuple[str, str]]:
    named = [streams[name] for name in rule.streams or streams if name in streams]
    problems = []
    for position, field in enumerate(rule.fields or ()):
        where = f"rules[{index}].fields[{position}]"
        specs = [stream.fields[field] for stream in named if field in stream.fields]
        if not specs:
            problems.append((where, "expected a field of the streams the rule names"))
        elif all(spec.required for spec in specs):
            problems.append((where, "a schema-required field is always shown: no rule "
                                    "takes it away"))
    return problems


def stream_resources(pdpp: Pdpp | None) -> dict[str, ResourceSpec]:
    """Every stream, its records seen as its `visibility` and `record_visibility` say. Who
    reads a stream is the grant's to say (`pdpp_stream`), not `collection_read` rules'."""
    if pdpp is None:
        return {}
    return {name: ResourceSpec(
        where=f"pdpp.streams.{name}", surface="pdpp", visibility=stream.visibility,
        record_scopes={value: tuple(scopes) for value, scopes in rules.scopes.items()}
        if (rules := stream.record_visibility) is not None else None,
        parts=tuple(stream.fields), read_rules=False) for name, stream in pdpp.streams.items()}
