"""The AI Discovery Endpoint's part of the gateway's OpenAPI document: `/.well-known/ai` (and
its `/ai` alias), described with the spec's own JSON Schema."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from gateway.openapi import document_operation, ref
from gateway.surfaces.aiendpoint.config import AiEndpoint
from gateway.surfaces.aiendpoint.document import ALIAS, CONTENT_TYPE, WELL_KNOWN


def ai_endpoint_openapi(section: AiEndpoint) -> dict[str, Any]:
    operation = document_operation("AI Discovery Document (draft-aiendpoint-00)",
                                   ref("AiEndpointDocument"), CONTENT_TYPE, "aiendpoint")
    paths = {WELL_KNOWN: {"get": operation}}
    if section.alias:
        paths[ALIAS] = {"get": {**operation, "summary": "The same document at /ai"}}
    return {"paths": paths, "components": {"schemas": {"AiEndpointDocument": _schema()}}}


def _schema() -> dict[str, Any]:
    text = (resources.files("gateway") / "schemas" / "aiendpoint.schema.json").read_text("utf-8")
    schema = json.loads(text)
    for key in ("$schema", "$id"):  # the component lives in this document, not at their URL
        schema.pop(key, None)
    return schema
