"""`/.well-known/aip.json` and the capabilities document, generated from the `aip` section and
the policy packs, so the limits a platform reads are the limits the gateway enforces."""

from __future__ import annotations

from datetime import date
from typing import Any

from gateway.endpoints import StaticDocument
from gateway.surfaces.aip.config import Aip
from gateway.surfaces.aip.policy import AipPolicy
from gateway.surfaces.aip.signing_config import Signing

DECLARATION_PATH = "/.well-known/aip.json"
SCHEMA_URL = "https://schemas.agenticintentprotocol.com/aip/0.1/schema.json"


def declaration(aip: Aip, base_url: str, policy: AipPolicy,
                config_date: date | None = None) -> dict[str, Any]:
    """The publisher declaration; it validates against the spec's aip.schema.json."""
    retrieval = aip.retrieval
    limits = policy.limits(retrieval.max_chunks, retrieval.max_tokens)
    compliance: dict[str, Any] = {
        "revocable": aip.compliance.revocable,
        "notice_required": aip.compliance.notice_required,
        "sunset": aip.compliance.sunset.isoformat() if aip.compliance.sunset else None,
        "last_updated": (aip.compliance.last_updated or config_date
                         or date(1970, 1, 1)).isoformat(),
    }
    if aip.compliance.revocation_reason is not None:  # the schema allows no null here
        compliance["revocation_reason"] = aip.compliance.revocation_reason
    base = base_url.rstrip("/")
    endpoints: dict[str, Any] = {
        "capabilities": {"method": "GET", "url": base + aip.capabilities_path},
        "retrieve": {"method": "POST", "url": base + aip.retrieve_path,
                     "capabilities_ref": "retrieval"},
    }
    if aip.event is not None:
        endpoints["event"] = {"method": "POST", "url": base + aip.event.path,
                              "required": aip.event.required}
    document: dict[str, Any] = {
        "$schema": SCHEMA_URL,
        "aip_version": "0.1",
        "publisher": aip.publisher.model_dump(),
        "intent_access": {"enabled": aip.intent_access.enabled,
                          "state": aip.intent_access.state, "mode": "live_only",
                          "training_use": aip.intent_access.training_use,
                          "storage_rights": "none", "cache_policy": "no_store"},
        "editorial_domains": list(aip.editorial_domains),
        "endpoints": endpoints,
        "retrieval": {"supports": retrieval.supports.model_dump(),
                      "max_chunks": limits.max_chunks, "max_tokens": limits.max_tokens},
        "compliance": compliance,
    }
    if aip.signing is not None and aip.signing.enabled:
        document["extensions"] = {"aigw": {"signing": signing_extension(aip.signing)}}
    return document


def signing_extension(signing: Signing) -> dict[str, Any]:
    """How requests are signed here (AIP's authentication-signing scheme); never a key id."""
    return {"scheme": "hmac-sha256", "signature_version": "v1",
            "headers": ["X-AIP-Version", "X-AIP-Key-Id", "X-AIP-Timestamp", "X-AIP-Nonce",
                        "X-AIP-Signature"],
            "versions": list(signing.versions), "required": signing.required,
            "window_seconds": signing.window, "signed_responses": signing.sign_responses}


def capabilities(document: dict[str, Any], encoding: str) -> dict[str, Any]:
    """Static capabilities and limits: the same for every caller, no content inventory."""
    served: dict[str, Any] = {
        "aip_version": "0.1",
        "publisher": {"id": document["publisher"]["id"],
                      "domain": document["publisher"]["domain"]},
        "editorial_domains": document["editorial_domains"],
        "retrieval": {**document["retrieval"], "modes": ["chunks"],
                      "token_counting": {"encoding": encoding,
                                         "fallback": "utf-8 bytes (never undercounts)"}},
        "endpoints": document["endpoints"],
    }
    if "extensions" in document:
        served["extensions"] = document["extensions"]
    return served


def aip_documents(aip: Aip, base_url: str, policy: AipPolicy,
                  config_date: date | None = None) -> dict[str, StaticDocument]:
    document = declaration(aip, base_url, policy, config_date)
    age = aip.declaration_max_age
    return {
        DECLARATION_PATH: StaticDocument("aip", document, max_age=age),
        aip.capabilities_path: StaticDocument(
            "aip", capabilities(document, aip.retrieval.encoding), max_age=age),
    }
