"""Config models of the `rate_limits` section."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from gateway.auth.config import Method, PathPrefix, TokenKindName
from gateway.ratelimit.rates import Rate
from gateway.redis_url import check
from gateway.strict import Strict

_SCHEMES = ("memory", "redis", "rediss", "redis+unix", "redis+cluster", "redis+sentinel")
KeyName = Literal["client", "subject", "client_id", "address", "platform"]
# Keys read from what the request declares rather than who the caller is: a caller renews
# them at will, so a limit keyed on one alone never bounds that caller (`aigw validate` warns).
SELF_DECLARED_KEYS: frozenset[str] = frozenset({"platform"})


def _storage(value: str) -> str:
    if urlsplit(value).scheme == "memory":
        return value
    if urlsplit(value).scheme not in _SCHEMES:
        raise ValueError(f"expected a storage URL with a scheme among {', '.join(_SCHEMES)}")
    return check(value)


class Tier(Strict):
    """A different limit for callers that match every condition given."""

    scope: str | None = Field(None, description="The tier applies to callers with this scope.")
    client_id: str | None = Field(None, description="The tier applies to this client id.")
    token_kind: TokenKindName | None = Field(
        None,
        description="The tier applies to callers of this token kind.",
    )
    limit: Rate = Field(description="The tier's limit, e.g. 600/minute.")
    burst: Rate | None = Field(None, description="The tier's short-window limit, e.g. 50/second.")


class Rule(Strict):
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,62}$")] = Field(
        description="The rule's name, in metrics, logs and the RateLimit-Policy field.",
    )
    paths: list[PathPrefix] = Field(["/"], description="Path prefixes the rule counts.")
    methods: list[Method] | None = Field(None, description="GET also covers HEAD.")
    key: KeyName = Field(
        "client",
        description="Whom to count: client (client id, else subject, else address), subject, "
        "client_id, address, or platform (the platform id a request declares, where a surface "
        "reads one, within an authenticated caller's client key; self-declared, so pair it with "
        "a rule keyed on the caller). Anonymous callers are always counted by address alone.",
    )
    limit: Rate = Field(description="How many requests per window, e.g. 120/minute.")
    burst: Rate | None = Field(None, description="A second, short-window limit, e.g. 20/second.")
    tiers: list[Tier] = Field([], description="First matching tier replaces limit and burst.")
    on_store_error: Literal["allow", "deny"] = Field(
        "deny", description="When the store fails: let requests through, or refuse them (503)."
    )


class Headers(Strict):
    legacy: bool = Field(
        True, description="RateLimit-Limit, -Remaining, -Reset (the draft's earlier fields)."
    )
    ietf: bool = Field(True, description="RateLimit and RateLimit-Policy (IETF draft).")


class RateLimits(Strict):
    storage: Annotated[str, AfterValidator(_storage)] = Field(
        "memory://", description="memory:// (one process) or a Redis URL shared by replicas: "
        "redis://, rediss://, redis+unix://, redis+cluster://host:port[,host:port] or "
        "redis+sentinel://host:port[,host:port]/service.",
    )
    strategy: Literal["moving-window", "sliding-window-counter", "fixed-window"] = Field(
        "sliding-window-counter",
        description="Counting strategy of the `limits` library; with Redis, "
        "`sliding-window-counter` is counted in one round trip per limit.",
    )
    key_prefix: str = Field("aigw", description="Prefix of the counters' keys in the store.")
    store_timeout: Annotated[float, Field(gt=0, le=10)] = Field(
        0.5, description="Socket timeout for the Redis store, in seconds."
    )
    headers: Headers = Field(
        Headers(),
        description="Which rate-limit response fields are sent (the RateLimit-* triple, the IETF "
        "draft's RateLimit-Policy / RateLimit).",
    )
    rules: list[Rule] = Field(
        [],
        description="The rules, each counting the requests under its path prefixes.",
    )
