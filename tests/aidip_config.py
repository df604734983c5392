"""A gateway config with AIDIP over the demo backend and the echo upstream, for the AIDIP tests."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlsplit

KEYS = {  # API key -> (subject, client id, scopes)
    "alice-key": ("alice", "alice-app", ["agents:register"]),
    "bob-key": ("bob", "bob-app", ["agents:register"]),
    "admin-key": ("root", "ops", ["agents:admin"]),
    "partner-key": ("pat", "partner", []),
    "reader-key": ("reader", "reader-app", []),
}
SECRET_HEADER = "X-Upstream-Secret"
SECRET = "configured-upstream-secret"

OBJECT = {"type": "object"}
TEXT_IN = {"type": "object", "required": ["text"],
           "properties": {"text": {"type": "string", "minLength": 1}}}


def echo_operation(name: str, path: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"Echo operation {name}.", "upstream": "echo",
            "path": path, "inputs": TEXT_IN,
            "outputs": {"type": "object", "required": ["upstream"]}, **extra}


def agent(name: str, description: str, capabilities: list[str], operations: list[dict],
          **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": description, "capabilities": capabilities,
            "operations": operations, **extra}


def registration(endpoint: str, **extra: Any) -> dict[str, Any]:
    """Metadata a client registers: the draft's example, pointed at `endpoint`."""
    return {
        "name": "Chinese-English Translator",
        "description": "Translates text between Chinese and English with high accuracy.",
        "version": "1.2.0", "publisher": "ExampleAI Inc.", "capabilities": ["translation"],
        "tags": ["nlp", "chinese", "english"], "endpoint": endpoint,
        "supported_languages": ["en", "zh"], "status": "active",
        "operations": [{"name": "translateText", "description": "Translates text.",
                        "inputs": TEXT_IN, "outputs": {"type": "object"},
                        "examples": [{"input": {"text": "你好"}, "output": {"upstream": "x"}}]}],
        **extra,
    }


def aidip_gateway_config(backend: str, echo: str, *, aidip: dict | None = None,
                         **top: Any) -> dict[str, Any]:
    keys = [{"sha256": hashlib.sha256(key.encode()).hexdigest(), "subject": subject,
             "client_id": client, "scopes": scopes}
            for key, (subject, client, scopes) in KEYS.items()]
    echo_port = urlsplit(echo).port
    section = {
        "agents": {
            "classifier": agent(
                "Support request classifier",
                "Classifies a customer support request into a help-centre category.",
                ["classification"],
                [{"name": "classify", "description": "Category of a support request.",
                  "upstream": "helpcentre", "path": "/api/v1/tasks/classify",
                  "inputs": TEXT_IN,
                  "outputs": {"type": "object", "required": ["category", "confidence"]},
                  "batch": True}],
                tags=["support", "nlp"], supported_languages=["en"]),
            "echoer": agent(
                "Echo", "Repeats requests back.", ["testing"],
                [echo_operation("echo", "/echo/run"),
                 echo_operation("strict", "/echo/strict",
                                outputs={"type": "object", "required": ["translated"]}),
                 echo_operation("broken", "/status/500"),
                 echo_operation("notjson", "/text"),
                 echo_operation("slow", "/slow?seconds=5"),
                 echo_operation("flaky", "/status/502"),
                 echo_operation("flaky-idempotent", "/status/502", idempotent=True),
                 echo_operation("forward", "/echo/fwd", forward_token=True)],
                timeout=1),
            "partner-only": agent("Partner tool", "Only for the partner client.",
                                  ["classification"],
                                  [echo_operation("echo", "/echo/partner")],
                                  clients=["partner"]),
        },
        "egress": {"origins": [{"scheme": "http", "host": "127.0.0.1", "ports": [echo_port]},
                               {"scheme": "http", "host": "agent.test", "ports": [echo_port]}],
                   "allow_networks": ["127.0.0.1/32"],
                   "hosts": {"agent.test": ["127.0.0.1"]}},
        "breaker": {"failures": 100, "open_seconds": 60},
        **(aidip or {}),
    }
    return {
        "public_base_url": "https://gw.example.com",
        "upstreams": {"helpcentre": {"url": backend},
                      "echo": {"url": echo, "add_headers": {SECRET_HEADER: SECRET}}},
        "auth": {"default_access": "public", "api_keys": {"keys": keys}},
        "rate_limits": {"storage": "memory://",
                        "rules": [{"name": "agents", "paths": ["/agents"],
                                   "limit": "10000/minute"}]},
        "service": {"name": "Agent test gateway", "description": "Agents for the tests.",
                    "organization": {"name": "Example Org", "url": "https://org.example.com"}},
        "ai_endpoint": {},
        "aidip": section,
        **top,
    }
