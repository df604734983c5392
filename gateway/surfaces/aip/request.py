"""AIP RetrieveRequest bodies, validated against the spec's schema into a small value."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gateway.errors import GatewayError
from gateway.surfaces.aip.names import normal_name

MEDIA_TYPE = "application/json"
# The longest request_id accepted and echoed back; the schema sets none.
MAX_REQUEST_ID = 128
# runtime.query_text, "bounded" says the schema: it reaches upstream URLs, so it has its own
# bound (retrieval.max_query_chars) in place of the one every AIP string has (bounds.py).
QUERY_PATH = ("runtime", "query_text")


@dataclass(frozen=True, slots=True)
class RetrieveRequest:
    request_id: str
    platform_id: str  # as declared, echoed in the access event
    platform: str  # its normal form (names.py): what rules, rate limits and events compare
    domain: str
    subdomain: str | None
    placement: str | None  # normal form, like `uses`
    query_text: str | None
    latency_budget_ms: int | None
    # From the gateway's namespaced extension `extensions.aigw`: what the platform asks for.
    mode: str = "chunks"
    source: str | None = None
    uses: tuple[str, ...] = ()

    @property
    def intent_domains(self) -> tuple[str, ...]:
        return (self.domain,) if self.subdomain is None else (self.domain, self.subdomain)


def invalid(message: str) -> GatewayError:
    return GatewayError(400, "invalid_request", message)


def readable_request_id(body: Any) -> str | None:
    """The body's request_id when there is one to echo, even in an otherwise bad request;
    one too long to accept is echoed cut to its first MAX_REQUEST_ID characters."""
    if isinstance(body, dict):
        value = body.get("request_id")
        if isinstance(value, str) and value and value[:MAX_REQUEST_ID].isprintable():
            return value[:MAX_REQUEST_ID]
    return None


def parse_retrieve(body: Any) -> RetrieveRequest:
    """A valid RetrieveRequest; `invalid_request` names the first offending member. The body's
    shape (depth, string lengths, `QUERY_PATH` included) was bounded when it was parsed."""
    if not _conforms(body):
        _refuse_nonconforming(body)
    if not 0 < len(body["request_id"]) <= MAX_REQUEST_ID:  # one the answer can echo
        raise invalid(f"The request does not match RetrieveRequest at request_id: expected 1 "
                      f"to {MAX_REQUEST_ID} characters.")
    extension = (body.get("extensions") or {}).get("aigw") or {}
    intent, runtime = body["intent"], body["runtime"]
    query, placement = runtime.get("query_text"), body["context"].get("placement")
    return RetrieveRequest(
        request_id=body["request_id"], platform_id=body["platform"]["id"],
        platform=normal_name(body["platform"]["id"]),
        domain=intent["domain"], subdomain=intent.get("subdomain"),
        placement=None if placement is None else normal_name(placement), query_text=query,
        latency_budget_ms=runtime.get("latency_budget_ms"),
        mode=_string(extension, "mode") or "chunks", source=_string(extension, "source"),
        uses=_uses(extension),
    )


def _refuse_nonconforming(body: Any) -> None:
    """`invalid_request` naming the first member the schema refuses, as `jsonschema` says it
    (the fast check refuses a few bodies this one accepts: those go on)."""
    errors = sorted(_validator("retrieve-request").iter_errors(body),
                    key=lambda error: list(error.absolute_path))
    if errors:
        error = errors[0]
        where = "/".join(str(part) for part in error.absolute_path) or "(body)"
        raise invalid(f"The request does not match RetrieveRequest at {where}: "
                      f"{_reason(error)}.")


# The RetrieveRequest schema's one `format`: checked by `jsonschema`'s own checker, as before,
# since jsonschema-rs's date-time differs (it takes leap seconds). A test holds that it is the
# only one.
FORMATTED = (("timestamp",), "date-time")


def _conforms(body: Any) -> bool:
    """Whether the body is a RetrieveRequest, told ~70 times faster than `jsonschema` by
    jsonschema-rs (without formats; `FORMATTED` by `jsonschema`'s checker). Never true where
    `jsonschema` finds a fault (tests/test_aip_request_schema.py compares the two on mutated
    bodies); false for some it accepts (a pattern's `$` before a final newline, which Python's
    `re` lets match), which then go to `jsonschema`."""
    if not _fast_validator().is_valid(body):
        return False
    (name,), _ = FORMATTED
    value = body[name]
    return _formatted(value) if isinstance(value, str) else _checked(value)


@functools.lru_cache(maxsize=1024)
def _formatted(value: str) -> bool:
    """`_checked`, remembered: platforms send the same few timestamps (a second's worth of
    requests) over and over."""
    return _checked(value)


def _checked(value: Any) -> bool:
    _, format_name = FORMATTED
    return bool(_validator("retrieve-request").format_checker.conforms(value, format_name))


@functools.cache
def _fast_validator() -> Any:
    import jsonschema_rs

    return jsonschema_rs.validator_for(_validator("retrieve-request").schema,
                                       validate_formats=False)


@functools.cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    text = (resources.files("gateway") / "schemas" / "aip" / f"{name}.schema.json").read_text(
        "utf-8")
    return Draft202012Validator(json.loads(text),
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def schema_validator(name: str) -> Any:
    """The Draft 2020-12 validator of one of the AIP schemas (aip, retrieve-response, ...)."""
    return _validator(name)


def _reason(error: Any) -> str:
    """The schema's complaint without echoing the caller's value back."""
    if error.validator == "required":
        return error.message.split(" is a required")[0] + " is required"
    if error.validator == "additionalProperties":
        return "unknown member"
    if error.validator in ("type", "const", "enum", "pattern", "format", "minimum", "maximum"):
        return f"expected {error.validator} {error.validator_value!r}"[:200]
    return f"fails {error.validator}"


def _string(extension: Any, name: str) -> str | None:
    value = extension.get(name) if isinstance(extension, dict) else None
    if value is not None and not isinstance(value, str):
        raise invalid(f"extensions.aigw.{name} must be a string.")
    return value


def _uses(extension: Any) -> tuple[str, ...]:
    value = extension.get("use") if isinstance(extension, dict) else None
    if value is None:
        return ()
    if isinstance(value, str):
        return (normal_name(value),)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(normal_name(item) for item in value)
    raise invalid("extensions.aigw.use must be a string or an array of strings.")
