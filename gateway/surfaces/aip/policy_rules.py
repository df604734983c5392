"""AIP's rule kinds: which platforms, placements and declared uses may retrieve
(`aip_retrieve`, denials answered as `policy_violation`), and limits (`aip_limit`); and its
sources as the resources the core's rule kinds decide on (who reads a source, who sees its
hits of each visibility: gateway.policy.resources)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from gateway.policy.kinds import RawRule, RuleKind, Sample
from gateway.policy.resources import ResourceSpec
from gateway.policy.rules import Ask, Rule
from gateway.settings import Settings
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.names import normal_names

# What a reader of a source gets of each hit: its text in chunks, its title and URL in citations.
SOURCE_PARTS = ("text", "title", "url")


class AipRetrieve(Rule):
    """Selects retrieve requests by platform, placement and declared use; every selector
    given must hold. Names compare in one normal form (case, width and whitespace folded)."""

    kind: Literal["aip_retrieve"] = Field(
        description="`aip_retrieve`: which platforms, placements and uses may retrieve.",
    )
    platforms: list[str] | None = Field(None, description="platform.id values.")
    placements: list[str] | None = Field(None, description="context.placement values.")
    placements_except: list[str] | None = Field(
        None, description="Any placement but these (for an allow-list of placements).")
    uses: list[str] | None = Field(None, description="Any of these uses in extensions.aigw.use.")
    message: str | None = Field(None, description="The denial's message to the platform.")

    @field_validator("platforms", "placements", "placements_except", "uses")
    @classmethod
    def _normal(cls, values: list[str] | None) -> list[str] | None:
        # Requests carry these names in the same normal form (request.parse_retrieve).
        return normal_names(values)

    def selects(self, ask: Ask) -> bool:
        found = ask.attributes
        return all((
            self.platforms is None or found.get("platform") in self.platforms,
            self.placements is None or found.get("placement") in self.placements,
            self.placements_except is None or found.get("placement") not in self.placements_except,
            self.uses is None or bool(set(found.get("uses", ())) & set(self.uses)),
        ))


class AipLimit(Rule):
    """Caps on what one retrieve returns; the strictest of the declaration and every rule."""

    kind: Literal["aip_limit"] = Field(
        description="`aip_limit`: tighter limits on every retrieve (the strictest applies).",
    )
    effect: Literal["allow"] = Field(
        "allow",
        description="Always allow: a limit narrows what is served, it refuses nothing.",
    )
    max_chunks: int | None = Field(None, ge=1, description="Most chunks in one answer.")
    max_tokens: int | None = Field(
        None, ge=1,
        description="Most tokens, summed over the chunks of one answer.",
    )


def _legacy(document: dict[str, Any], stem: str) -> list[RawRule]:
    """The older `aip:` key as rules, in the order its checks ran."""
    rules = document.get("aip")
    if not rules:
        return []
    found: list[RawRule] = []
    base = {"kind": "aip_retrieve", "effect": "deny"}
    if rules.get("denied_platforms"):
        found.append({**base, "id": f"{stem}.aip.denied_platforms",
                      "description": "aip.denied_platforms",
                      "platforms": rules["denied_platforms"],
                      "message": "This platform may not retrieve from this publisher."})
    if rules.get("allowed_placements") is not None:
        found.append({**base, "id": f"{stem}.aip.allowed_placements",
                      "description": "aip.allowed_placements",
                      "placements_except": rules["allowed_placements"],
                      "message": "Content may not be used in this placement."})
    if rules.get("forbidden_uses"):
        found.append({**base, "id": f"{stem}.aip.forbidden_uses",
                      "description": "aip.forbidden_uses", "uses": rules["forbidden_uses"],
                      "message": "The declared use of the content is not permitted."})
    if rules.get("max_chunks") or rules.get("max_tokens"):
        found.append({"kind": "aip_limit", "id": f"{stem}.aip.limits",
                      "description": "aip.max_chunks / aip.max_tokens",
                      "max_chunks": rules.get("max_chunks"),
                      "max_tokens": rules.get("max_tokens")})
    return found


def _retrieve_samples(settings: Settings, rules: list[Rule]) -> list[Sample]:
    """The platforms, placements and uses the rules name, each beside ordinary values."""
    retrieve = [rule for rule in rules if isinstance(rule, AipRetrieve)]
    platforms = {"any-platform", *(p for r in retrieve for p in r.platforms or ())}
    placements = {"chat", *(p for r in retrieve for p in (r.placements or ()))}
    placements |= {p for r in retrieve for p in (r.placements_except or ())} | {"other"}
    uses: list[tuple[str, ...]] = [(), *((u,) for r in retrieve for u in r.uses or ())]
    samples = [("retrieve", {"platform": p, "placement": "chat", "uses": ()})
               for p in sorted(platforms)]
    samples += [("retrieve", {"platform": "any-platform", "placement": p, "uses": ()})
                for p in sorted(placements)]
    samples += [("retrieve", {"platform": "any-platform", "placement": "chat", "uses": u})
                for u in dict.fromkeys(uses)]
    return samples


def _limits(settings: Settings, bundle: Any, ask: Ask) -> list[str]:
    rules = bundle.of_kind("aip_limit")
    chunks = [r.max_chunks for r in rules if r.max_chunks]
    tokens = [r.max_tokens for r in rules if r.max_tokens]
    return [*([f"max_chunks={min(chunks)}"] if chunks else []),
            *([f"max_tokens={min(tokens)}"] if tokens else [])]


AIP_KINDS = [
    RuleKind("aip_retrieve", "aip", AipRetrieve,
             "which platforms, placements and uses may retrieve (default: allowed)",
             default="allow", legacy=_legacy, samples=_retrieve_samples, projection=_limits),
    RuleKind("aip_limit", "aip", AipLimit,
             "max_chunks / max_tokens per retrieve (the strictest applies)", default="allow",
             samples=lambda settings, rules: [("retrieve", {})], projection=_limits),
]


def source_resources(aip: Aip | None) -> dict[str, ResourceSpec]:
    """Every source: public (a caller the gateway admits may retrieve), its hits seen as its
    `record_visibility` says."""
    if aip is None:
        return {}
    return {name: ResourceSpec(
        where=f"aip.sources.{name}", surface="aip",
        record_scopes={value: tuple(scopes) for value, scopes in rules.scopes.items()}
        if (rules := source.record_visibility) is not None else None,
        parts=SOURCE_PARTS) for name, source in aip.sources.items()}
