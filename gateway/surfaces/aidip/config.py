"""Config models of the `aidip` section: configured agents, the registry store, and the egress
rules registered agents are called under (gateway.upstream.egress.config)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from gateway.strict import Strict
from gateway.surfaces.aidip.text_parts import text_input_problem
from gateway.upstream.egress.config import Egress

AgentId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")]
OperationName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
Seconds = Annotated[float, Field(gt=0, le=600)]


def _redis_url(value: str) -> str:
    from gateway.redis_url import check

    return check(value)


class ConfiguredOperation(Strict):
    """One operation of a configured agent: a call to a legacy endpoint of an upstream."""

    name: OperationName = Field(
        description="The operation's name: POST /agents/{id}/invoke/{name}.",
    )
    description: Annotated[str, Field(min_length=1, max_length=1000)] = Field(
        description="What the operation does, as the agent's metadata shows it.",
    )
    upstream: str = Field(description="The upstream the operation calls (a name from `upstreams`).")
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
    examples: list[dict[str, Any]] = Field(
        [],
        description="Example inputs (and outputs), shown in the agent's metadata.",
    )
    idempotent: bool = Field(False, description="Retried once after a failure when true.")
    batch: bool = Field(False, description="Accept a JSON array of inputs (one call each).")
    forward_token: bool = Field(False, description="Pass the caller's Authorization upstream.")
    text_input: str | None = Field(
        None, description="The input field an A2A text part fills: a string property of "
        "`inputs`, and the only required one. Without it, a text part fills the one required "
        "property where `inputs` has exactly one and it is a string; other operations take "
        "data parts only (the agent card's `inputModes` say which).")

    @model_validator(mode="after")
    def _text_input_fits(self) -> ConfiguredOperation:
        if self.text_input is not None:
            problem = text_input_problem(self.inputs, self.text_input)
            if problem is not None:
                raise ValueError(f"text_input: {problem}")
        return self


class ConfiguredAgent(Strict):
    """A legacy endpoint (or several) offered as an agent; read-only through the API."""

    name: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        description="The agent's name, as listings show it.",
    )
    description: Annotated[str, Field(min_length=1, max_length=2000)] = Field(
        description="What the agent does; free-text search ranks agents by it.",
    )
    version: str = Field("1.0.0", description="The agent's version, as its metadata shows it.")
    publisher: str | None = Field(
        None,
        description="Who publishes the agent (a filter matches it exactly).",
    )
    capabilities: list[str] = Field(
        min_length=1,
        description="What the agent can do (at least one); filters match agents that have every "
        "listed value.",
    )
    tags: list[str] = Field(
        [],
        description="Free tags; filters match agents that have every listed tag.",
    )
    supported_languages: list[str] = Field(
        [],
        description="Languages the agent handles; none: language-agnostic (passes every language "
        "filter).",
    )
    status: Literal["active", "inactive", "deprecated"] = Field(
        "active",
        description="`inactive` agents answer 503 AgentUnavailable; `deprecated` ones still "
        "serve.",
    )
    clients: list[str] | None = Field(
        None, description="Client ids entitled to see and invoke it; none means every caller."
    )
    timeout: Seconds = Field(30, description="Longest wait for one upstream answer.")
    operations: list[ConfiguredOperation] = Field(
        min_length=1,
        description="The agent's operations, each an upstream call with JSON Schema inputs and "
        "outputs.",
    )


class Registry(Strict):
    redis_url: Annotated[str, AfterValidator(_redis_url)] | None = Field(
        None, description="Registrations live here, shared by replicas; without it, in memory. "
        "redis://, rediss://, unix://, redis+cluster://host:port[,host:port] or "
        "redis+sentinel://host:port[,host:port]/service.",
    )
    key_prefix: Annotated[str, Field(min_length=1, max_length=100)] = Field(
        "aigw:aidip:",
        description="Prefix of the registry's Redis keys.",
    )
    timeout: Annotated[float, Field(gt=0, le=10)] = Field(
        1.0,
        description="Longest wait for Redis, in seconds; past it the request is 503 "
        "RegistryUnavailable.",
    )
    max_agents: Annotated[int, Field(ge=1, le=100_000)] = Field(
        1000,
        description="Most registered agents; registering past it is 409 Conflict.",
    )
    max_metadata_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = Field(
        64 * 1024,
        description="Largest registration body accepted.",
    )


class Breaker(Strict):
    failures: Annotated[int, Field(ge=1, le=1000)] = Field(
        5, description="Consecutive failures that open an agent's circuit."
    )
    open_seconds: Seconds = Field(30, description="How long an open circuit refuses calls.")


class Aidip(Strict):
    enabled: bool = Field(True, description="Serve the section (false: keep it, serve nothing).")
    base_path: Annotated[str, Field(pattern=r"^(/[A-Za-z0-9._~-]+)*$")] = Field(
        "", description="Prefix of /agents."
    )
    register_scope: str = Field("agents:register", description="Needed to register or update.")
    admin_scope: str = Field("agents:admin", description="May change or delete any agent.")
    default_top: Annotated[int, Field(ge=1, le=1000)] = Field(
        10,
        description="Agents a listing or search answers when `top` is not given.",
    )
    max_top: Annotated[int, Field(ge=1, le=1000)] = Field(
        100,
        description="Most agents a listing or search answers.",
    )
    max_batch: Annotated[int, Field(ge=1, le=1000)] = Field(
        20,
        description="Most inputs in one batch invocation (operations with `batch: true`).",
    )
    agents: dict[AgentId, ConfiguredAgent] = Field(
        {},
        description="Agents made of upstream calls, by id: legacy endpoints wrapped as agents.",
    )
    registry: Registry = Field(
        Registry(),
        description="Where registered agents are stored (Redis, shared by replicas, or process "
        "memory).",
    )
    egress: Egress = Field(
        Egress(),
        description="Where registered agents' endpoints may be, and how they are called (SSRF "
        "rules).",
    )
    breaker: Breaker = Field(
        Breaker(),
        description="The circuit breaker of each agent: consecutive failures that open it, and "
        "for how long.",
    )
