"""The rule semantics stated in the README (deny overrides, first allow, allow-lists, kind
defaults, most specific route), and rules of each surface deciding real requests."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml
from aidip_config import aidip_gateway_config, registration
from aidre_config import aidre_gateway_config
from processes import Gateway
from test_aidre import search

from gateway import registry
from gateway.model import Principal, TokenKind
from gateway.policy.bundle import PolicyBundle
from gateway.policy.rules import Ask

PARTNER = Principal("p", "partner", frozenset({"vectors:read"}), TokenKind.CLIENT)
BOT = Principal("b", "bot", frozenset({"vectors:read"}), TokenKind.CLIENT)


def bundle(*rules: dict) -> PolicyBundle:
    model = registry.rule_model()
    return PolicyBundle(tuple(model.validate_python({"description": "d", **r}) for r in rules),
                        registry.rule_kinds())


def vectors(rule_id: str, **extra: object) -> dict:
    return {"id": rule_id, "kind": "vector_return", "collection": "articles", **extra}


def test_deny_overrides_an_earlier_allow():
    rules = bundle(vectors("partners", when={"scopes": ["vectors:read"]}),
                   vectors("no-bots", effect="deny", when={"clients": ["bot"]}))
    assert rules.decide(Ask("vector_return", "articles", BOT)).rule == "no-bots"
    assert rules.decide(Ask("vector_return", "articles", BOT)).effect == "deny"
    assert rules.decide(Ask("vector_return", "articles", PARTNER)).effect == "allow"


def test_an_allow_listed_resource_denies_whoever_no_rule_admits():
    rules = bundle(vectors("partners", when={"clients": ["partner"]}))
    outcome = rules.decide(Ask("vector_return", "articles", BOT))
    assert (outcome.effect, outcome.rule) == ("deny", "partners")
    assert "client is not listed" in outcome.why


def test_a_resource_no_rule_selects_gets_the_kind_default():
    rules = bundle({"id": "scrapers", "kind": "aip_retrieve", "effect": "deny",
                    "platforms": ["scraper-bot"]})
    ordinary = rules.decide(Ask("aip_retrieve", "retrieve", Principal(),
                                {"platform": "assistant", "placement": "chat", "uses": ()}))
    assert (ordinary.effect, ordinary.rule) == ("allow", None)  # aip_retrieve: allow
    unruled = rules.decide(Ask("vector_return", "staff", PARTNER))
    assert (unruled.effect, unruled.rule) == ("deny", None)  # vector_return: deny


def test_an_outcome_is_remembered_per_principal_and_ask_and_never_crosses_callers():
    rules = bundle(vectors("partners", when={"clients": ["partner"]}))
    first = rules.decide(Ask("vector_return", "articles", PARTNER))
    assert rules.decide(Ask("vector_return", "articles", PARTNER)) is first  # from memory
    # An equal but distinct principal, another caller, another resource: decided afresh.
    twin = Principal("p", "partner", frozenset({"vectors:read"}), TokenKind.CLIENT)
    assert rules.decide(Ask("vector_return", "articles", twin)).effect == "allow"
    assert rules.decide(Ask("vector_return", "articles", BOT)).effect == "deny"
    assert rules.decide(Ask("vector_return", "staff", PARTNER)).rule is None
    # An unhashable attribute is decided every time, all the same.
    listed = Ask("aip_retrieve", "retrieve", PARTNER, {"platform": "x", "uses": ["training"]})
    assert rules.decide(listed).effect == "allow"


def test_remembered_outcomes_are_bounded(monkeypatch: pytest.MonkeyPatch):
    from gateway.policy import bundle as bundle_module

    monkeypatch.setattr(bundle_module, "DECISIONS_KEPT", 8)
    rules = bundle(vectors("partners", when={"clients": ["partner"]}))
    busy = Ask("vector_return", "articles", PARTNER)
    remembered = rules.decide(busy)
    for index in range(50):
        outcome = rules.decide(Ask("aip_retrieve", "retrieve", PARTNER, {"platform": f"p{index}"}))
        assert outcome.effect == "allow"
        assert rules.decide(busy) is remembered  # a caller varying its asks never pushes it out
    assert len(rules._decided) <= 8


def test_the_most_specific_route_decides_and_shadow_rules_change_nothing():
    rules = bundle({"id": "api", "kind": "route", "path": "/api", "public": True},
                   {"id": "users", "kind": "route", "path": "/api/users",
                    "when": {"scopes": ["users:read"]}},
                   {"id": "users-trial", "kind": "route", "path": "/api/users/me",
                    "public": True, "mode": "shadow"})
    ask = Ask("route", "/api/users/me", Principal(), {"method": "GET"})
    assert (rules.decide(ask).effect, rules.decide(ask).rule) == ("deny", "users")
    shadow = rules.shadow(ask)
    assert shadow is not None and (shadow.effect, shadow.rule) == ("allow", "users-trial")
    assert rules.decide(Ask("route", "/api/x", Principal(), {"method": "GET"})).rule == "api"


def test_a_collection_read_deny_in_a_policy_file_hides_the_collection(
    backend, inprocess_factory, tmp_path: Path
):
    config = aidre_gateway_config(backend, tmp_path)
    (tmp_path / "policies" / "freeze.yaml").write_text(yaml.safe_dump({"rules": [{
        "id": "no-articles-for-reader", "kind": "collection_read", "collection": "articles",
        "effect": "deny", "when": {"clients": ["reader"]},
        "description": "The reader client is suspended."}]}))
    gateway = inprocess_factory(config)
    body = {"query": "refund", "collection": "articles"}
    refused = search(gateway, body, key="reader-key")
    assert refused.status_code == 404 and refused.json()["error"] == "not_found"
    assert search(gateway, body, key="vector-key").status_code == 200
    listed = httpx.get(gateway.url + "/collections", headers={"x-api-key": "reader-key"})
    assert "articles" not in [c["name"] for c in listed.json()["collections"]]


@pytest.fixture
def aidip_policies(tmp_path: Path) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "agents.yaml").write_text(yaml.safe_dump({"rules": [{
        "id": "no-classifier-for-bob", "kind": "agent_access", "agent": "classifier",
        "effect": "deny", "when": {"clients": ["bob-app"]},
        "description": "Bob's client may not use the classifier."}]}))
    return folder


def test_an_agent_access_rule_hides_an_agent_from_one_client(
    backend, echo, inprocess_factory, aidip_policies: Path
):
    gateway: Gateway = inprocess_factory(aidip_gateway_config(backend, echo,
                                                            policies=str(aidip_policies)))
    headers = {"x-api-key": "bob-key"}
    assert httpx.get(gateway.url + "/agents/classifier", headers=headers).status_code == 404
    listed = httpx.get(gateway.url + "/agents", headers=headers).json()
    assert "classifier" not in {agent["id"] for agent in listed}
    other = httpx.get(gateway.url + "/agents/classifier", headers={"x-api-key": "alice-key"})
    assert other.status_code == 200


def test_an_agent_registration_rule_refuses_a_client_the_scope_would_let_register(
    backend, echo, inprocess_factory, tmp_path: Path
):
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "registry.yaml").write_text(yaml.safe_dump({"rules": [{
        "id": "no-registering-for-bob", "kind": "agent_registration", "effect": "deny",
        "when": {"clients": ["bob-app"]}, "description": "Bob's client registers nothing."}]}))
    gateway: Gateway = inprocess_factory(aidip_gateway_config(backend, echo,
                                                            policies=str(folder)))
    body = registration(echo + "/echo/registry")
    refused = httpx.post(gateway.url + "/agents", json=body, headers={"x-api-key": "bob-key"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "Forbidden"
    allowed = httpx.post(gateway.url + "/agents", json=body, headers={"x-api-key": "alice-key"})
    assert allowed.status_code == 201, allowed.text


def test_config_entitlements_are_rules_the_tool_can_see(backend, echo, tmp_path: Path):
    from gateway.loader import load_config

    config = tmp_path / "gw.yaml"
    config.write_text(yaml.safe_dump(aidip_gateway_config(backend, echo)))
    loaded = load_config(config, env={})
    assert loaded.bundle is not None
    rule = loaded.bundle.rule("config:aidip.agents.partner-only.clients")
    assert rule is not None and rule.when.clients == ["partner"]
    registering = loaded.bundle.rule("config:aidip.register_scope")
    assert registering is not None and registering.when.scopes == ["agents:register"]


def test_the_policy_stage_notes_the_same_decisions_when_it_answers_from_memory(
        monkeypatch: pytest.MonkeyPatch):
    from gateway.context import RequestContext
    from gateway.model import Query
    from gateway.policy.engine import PolicyEngine

    class Source:
        public, scopes, returns_vectors = True, frozenset(), False
        visibility, records_carry_visibility = "public", True

    rules = bundle({"id": "internal", "kind": "record_visibility", "collection": "articles",
                    "visibility": "internal", "when": {"scopes": ["vectors:read"]}},
                   {"id": "no-bots", "kind": "aip_retrieve", "effect": "deny",
                    "platforms": ["bot"]},
                   {"id": "read", "kind": "collection_read", "collection": "articles"})
    engine = PolicyEngine({"articles": Source()}, rules)

    def decided(principal: Principal, platform: str) -> tuple[object, list[tuple]]:
        ctx = RequestContext("r", "POST", "/", "127.0.0.1", principal=principal, surface="aip")
        ask = Ask("aip_retrieve", "retrieve", principal, {"platform": platform})
        found = engine.before(ctx, Query(collection="articles", asks=(ask,)))
        return found, [(d.ask.kind, d.ask.resource, d.outcome.effect, d.outcome.rule)
                       for d in ctx.decisions]

    first, noted = decided(PARTNER, "assistant")
    taken = []
    decide = PolicyEngine._decide_before
    monkeypatch.setattr(PolicyEngine, "_decide_before",
                        lambda self, ctx, query: taken.append(query) or decide(self, ctx, query))
    again, noted_again = decided(PARTNER, "assistant")  # from memory
    assert noted_again == noted and len(noted) == 4
    assert taken == []  # nothing was decided again
    assert again.visible_records == first.visible_records == frozenset({"public", "internal"})
    stranger = Principal("s", "stranger", frozenset(), TokenKind.CLIENT)
    assert decided(stranger, "assistant")[0].visible_records == frozenset({"public"})
    assert decided(PARTNER, "bot")[0].outcome.value == "deny"  # a denial is never remembered
    assert decided(PARTNER, "bot")[0].outcome.value == "deny"


def test_a_name_several_surfaces_serve_is_one_resource_they_must_agree_on():
    from gateway.policy.resources import ResourceSpec, shared_name_problems

    collection = ResourceSpec("aidre.collections.articles", "aidre")
    stream = ResourceSpec("pdpp.streams.articles", "pdpp", read_rules=False)
    assert shared_name_problems({"articles": [stream, collection]}) == []
    # Two whose readers collection_read rules decide: one's config reads would open the other.
    source = ResourceSpec("aip.sources.articles", "aip")
    [(where, message)] = shared_name_problems({"articles": [stream, collection, source]})
    assert where == "aip.sources.articles" and "aidre.collections.articles" in message
    internal = ResourceSpec("pdpp.streams.articles", "pdpp", "internal", read_rules=False)
    [(where, message)] = shared_name_problems({"articles": [collection, internal]})
    assert where == "pdpp.streams.articles.visibility" and "one visibility" in message


def test_a_surface_judges_its_records_by_the_engines_visibilities():
    """`record_visibilities` for a resource a surface serves itself: the same decisions a
    retrieval of the same name takes, noted; `visibility_of` the same fail-closed rule."""
    from gateway.context import RequestContext
    from gateway.policy.engine import PolicyEngine
    from gateway.policy.resources import visibility_of

    class Stream:
        public, scopes, returns_vectors = False, frozenset(), False
        visibility, records_carry_visibility = "public", True

    rules = bundle({"id": "internal", "kind": "record_visibility", "collection": "articles",
                    "visibility": "internal", "when": {"scopes": ["vectors:read"]}})
    engine = PolicyEngine({}, rules)  # the stream is none of the retrieval resources
    ctx = RequestContext("r", "GET", "/", "127.0.0.1", principal=PARTNER, surface="pdpp")
    assert engine.record_visibilities(ctx, "articles", Stream()) == {"public", "internal"}
    assert [(d.ask.attributes["visibility"], d.outcome.rule) for d in ctx.decisions] == \
        [("internal", "internal"), ("public", None)]
    stranger = Principal("s", "stranger", frozenset(), TokenKind.CLIENT)
    assert engine.visibilities(stranger, "articles", resource=Stream()) == {"public"}
    assert [visibility_of(Stream(), v) for v in ("internal", None, 3)] == ["internal", None, None]
    Stream.records_carry_visibility = False
    assert visibility_of(Stream(), None) == "public"


def test_lint_warns_on_a_deny_for_everyone_over_public_routes_and_not_on_a_narrow_one():
    from gateway.loader import load_config
    from gateway.policy.lint import lint

    settings = load_config("config/demo.yaml", env={}).settings
    raw = ({"id": "health", "kind": "route", "path": "/api/v1/health", "public": True,
            "methods": ["GET"]},
           {"id": "close-api", "kind": "route", "path": "/api", "effect": "deny"},
           {"id": "close-for-bot", "kind": "route", "path": "/api", "effect": "deny",
            "when": {"clients": ["bot"]}},
           {"id": "close-posts", "kind": "route", "path": "/api/v1", "effect": "deny",
            "methods": ["POST"]})
    rules = bundle(*raw)
    rules = PolicyBundle(rules.rules, rules.kinds, files={r["id"]: "routes" for r in raw})
    wide = [f for f in lint(rules, settings) if "where public rules live" in f.message]
    assert [(f.level, f.rule) for f in wide] == [("warning", "close-api")]
    assert "health" in wide[0].message
    health = Ask("route", "/api/v1/health", Principal(), {"method": "GET"})
    assert (rules.decide(health).effect, rules.decide(health).rule) == ("deny", "close-api")
