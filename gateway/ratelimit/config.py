"""Config models of the `rate_limits` section."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator

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
    sync: Literal["exact", "batched"] = Field(
        "exact", description="How a Redis store's sliding-window counts are kept. exact: every "
        "hit is counted in Redis before it is answered (the hits of one event-loop turn in one "
        "round trip). batched: a busy key is answered in this process and kept in step with "
        "Redis every sync_interval, giving up exactness: with N processes (replicas times "
        "workers) sharing the store a key may be admitted up to (N - 1) x its local allowance "
        "(the limit times local_share, at least 1) beyond its limit per window, other "
        "processes' hits are seen up to sync_interval late, and a store failure is noticed "
        "within sync_interval (then on_store_error decides, as in exact mode). Needs a Redis "
        "storage and the sliding-window-counter strategy.",
    )
    sync_interval: Annotated[float, Field(gt=0, le=10)] = Field(
        0.05, description="sync: batched: seconds between two round trips that send this "
        "process's hits to Redis and read every busy key's counts back.",
    )
    local_share: Annotated[float, Field(gt=0, le=1)] = Field(
        0.01, description="sync: batched: the share of a limit one process may admit between "
        "two syncs (its local allowance, at least 1 hit); half way it starts a sync and at the "
        "allowance a request waits for one.",
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

    @model_validator(mode="after")
    def _batched_needs_redis(self) -> RateLimits:
        if self.sync == "batched" and (urlsplit(self.storage).scheme == "memory"
                                       or self.strategy != "sliding-window-counter"):
            raise ValueError("sync batched needs a Redis storage and the sliding-window-counter "
                             "strategy")
        return self
