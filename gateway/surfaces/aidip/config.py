"""Config models of the `aidip` section: configured agents, the registry store, and the egress
rules registered agents are called under (gateway.upstream.egress.config)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from gateway.strict import Strict
from gateway.upstream.egress.config import Egress

AgentId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")]
OperationName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
Seconds = Annotated[float, Field(gt=0, le=600)]


def _redis_url(value: str) -> str:
    from gateway.redis_url import check

    return check(value)


class ConfiguredOperation(Strict):
    """One operation of a configured agent: a call to a legacy endpoint of an upstream."""

    name: OperationName
    description: Annotated[str, Field(min_length=1, max_length=1000)]
    upstream: str
    method: Literal["GET", "POST", "PUT"] = Field(
        "POST", description="POST or PUT send the input as the JSON body; GET sends no body: "
        "each input field becomes a query parameter (percent-encoded; strings, numbers and "
        "booleans only, null fields left out).")
    path: Annotated[str, Field(pattern=r"^/")] = Field(
        description="`{field}` is filled with that input field's value as one percent-encoded "
        "path segment (the field must be required and a string, number or boolean).")
    inputs: dict[str, Any] = Field(
        description="JSON Schema of the input: the request body (POST, PUT) or the query "
        "parameters (GET: an object whose properties are strings, numbers, integers or "
        "booleans).")
    outputs: dict[str, Any] = Field(description="JSON Schema of the answer; checked.")
    examples: list[dict[str, Any]] = []
    idempotent: bool = Field(False, description="Retried once after a failure when true.")
    batch: bool = Field(False, description="Accept a JSON array of inputs (one call each).")
    forward_token: bool = Field(False, description="Pass the caller's Authorization upstream.")


class ConfiguredAgent(Strict):
    """A legacy endpoint (or several) offered as an agent; read-only through the API."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    description: Annotated[str, Field(min_length=1, max_length=2000)]
    version: str = "1.0.0"
    publisher: str | None = None
    capabilities: list[str] = Field(min_length=1)
    tags: list[str] = []
    supported_languages: list[str] = []
    status: Literal["active", "inactive", "deprecated"] = "active"
    clients: list[str] | None = Field(
        None, description="Client ids entitled to see and invoke it; none means every caller."
    )
    timeout: Seconds = Field(30, description="Longest wait for one upstream answer.")
    operations: list[ConfiguredOperation] = Field(min_length=1)


class Registry(Strict):
    redis_url: Annotated[str, AfterValidator(_redis_url)] | None = Field(
        None, description="Registrations live here, shared by replicas; without it, in memory. "
        "redis://, rediss://, unix://, redis+cluster://host:port[,host:port] or "
        "redis+sentinel://host:port[,host:port]/service.",
    )
    key_prefix: Annotated[str, Field(min_length=1, max_length=100)] = "aigw:aidip:"
    timeout: Annotated[float, Field(gt=0, le=10)] = 1.0
    max_agents: Annotated[int, Field(ge=1, le=100_000)] = 1000
    max_metadata_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = 64 * 1024


class Breaker(Strict):
    failures: Annotated[int, Field(ge=1, le=1000)] = Field(
        5, description="Consecutive failures that open an agent's circuit."
    )
    open_seconds: Seconds = Field(30, description="How long an open circuit refuses calls.")


class Aidip(Strict):
    enabled: bool = True
    base_path: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._~-]+)*$")] = Field(
        "", description="Prefix of /agents."
    )
    register_scope: str = Field("agents:register", description="Needed to register or update.")
    admin_scope: str = Field("agents:admin", description="May change or delete any agent.")
    default_top: Annotated[int, Field(ge=1, le=1000)] = 10
    max_top: Annotated[int, Field(ge=1, le=1000)] = 100
    max_batch: Annotated[int, Field(ge=1, le=1000)] = 20
    agents: dict[AgentId, ConfiguredAgent] = {}
    registry: Registry = Registry()
    egress: Egress = Egress()
    breaker: Breaker = Breaker()
