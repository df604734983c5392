"""The contract between the core and a spec surface plug-in.

A surface (one package under `gateway/surfaces/`, or a distribution of its own) exposes a
`Surface` object under the `aigw.surfaces` entry-point group. Through it the surface
contributes its config section and an older policy-file section, its load-time checks and
warnings (of the config and of each policy file), its rule kinds, the resources it serves
records from (decided on by the core's resource rule kinds), its `/.well-known/ai`
capabilities, its members of the protected-resource metadata, its OpenAPI fragment, its `aigw`
subcommands, what it keeps in one process's memory, and, for each config generation, a
`Mount`: its routes (`SurfaceRoute`s, admitted by the pipeline as each declares, with the
`Ways` each could serve a caller where the route rules alone do not say), the path prefixes
it owns, its public documents and paths, its error dialect, the resources the policy engine
decides on, the egress rules for URLs its clients register (the runtime builds the client),
and what to close when the generation retires.

The core never imports a surface: it finds them through `gateway.registry`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway import errors
from gateway.asgi import ASGIApp
from gateway.capability import Capability
from gateway.exchange import Exchange
from gateway.lifetimes import Lease, Resources

if TYPE_CHECKING:
    from gateway.pipeline import BodyFirst
    from gateway.policy.bundle import PolicyBundle
    from gateway.policy.config import PolicyPack
    from gateway.policy.kinds import RuleKind
    from gateway.policy.resources import ResourceSpec
    from gateway.policy.rules import Ask
    from gateway.settings import Settings
    from gateway.upstream.egress.config import Egress

Problem = tuple[str, str]  # (dotted path in the file, message)
ErrorRenderer = Callable[[errors.GatewayError, Exchange], Response]
Endpoint = ASGIApp
ExchangeEndpoint = Callable[[Exchange], Awaitable[Response]]


def gateway_error_response(error: errors.GatewayError, exchange: Exchange) -> Response:
    """The gateway's own error dialect, for paths no surface owns."""
    return Response(errors.json_error_body(error, exchange.request_id), error.status,
                    {"cache-control": "no-store", **dict(error.headers)}, "application/json")


class Admission(Enum):
    """What the pipeline does before a surface endpoint runs."""

    REQUIRED = "required"  # authenticate (refusing what the route rules refuse), rate-limit
    OPTIONAL = "optional"  # the same, but an unusable credential makes the caller anonymous
    BODY_FIRST = "body_first"  # the body is read first (a signature may cover it), then the
    #                            caller authenticated and limited (see pipeline.BodyFirst)


@dataclass(frozen=True, slots=True)
class Way:
    """One way a route could serve a caller: the path it would be called at (the route rules
    decide on it; None: the route's own) and the asks the policy engine must all allow."""

    asks: tuple[Ask, ...] = ()
    path: str | None = None


# The ways a route could serve the caller of an exchange, beyond what the route rules say of
# its path: a route whose answer needs the engine's leave for some resource (a stream the grant
# covers, an agent the caller is entitled to, the right to register) yields one per resource;
# a yielded way with no asks needs none. A surface that wraps routes (as an agent protocol's
# tools) offers one to a caller with a way the engine allows; the route decides each call.
Ways = Callable[[Exchange], AsyncGenerator[Way, None]]


class SurfaceRoute(Route):
    """A surface's route: the endpoint takes the request's `Exchange` and returns a response;
    failures are raised and answered once, by the app, in the owner's dialect. `ways` says
    whom it could serve beyond its route rules (None: the route rules alone)."""

    def __init__(self, path: str, endpoint: ExchangeEndpoint, *, methods: list[str],
                 name: str | None = None, admission: Admission = Admission.REQUIRED,
                 body_first: BodyFirst | None = None, ways: Ways | None = None) -> None:
        super().__init__(path, _not_served_directly, methods=methods,
                         name=name or getattr(endpoint, "__name__", None))
        if (admission is Admission.BODY_FIRST) != (body_first is not None):
            raise ValueError("Admission.BODY_FIRST goes with its body_first hooks")
        self.run = endpoint
        self.admission = admission
        self.body_first = body_first
        self.ways = ways


async def _not_served_directly(request: Any) -> Response:
    raise RuntimeError("a SurfaceRoute is served by the gateway app, never as an ASGI route")


@dataclass(frozen=True, slots=True)
class MountContext:
    """What a surface may build its mount from, for one config generation."""

    settings: Settings
    capabilities: tuple[Capability, ...]  # every surface's, in registry order
    modified: date | None = None  # the config file's last change
    policies: tuple[PolicyPack, ...] = ()  # the policy files, validated
    bundle: PolicyBundle | None = None  # every rule, for surfaces that decide themselves
    # Resources that outlive the generation (stores, sinks): acquired here, they are carried
    # over a reload with the same settings and closed once, by the last generation using them.
    shared: Lease = field(default_factory=lambda: Resources().lease())


@dataclass(frozen=True, slots=True)
class Storage:
    """A storage engine a surface serves from: `check()` says whether it is reachable."""

    check: Callable[[], Awaitable[bool]]
    required_for_ready: bool = False


@dataclass(slots=True)
class Mount:
    """One surface as served by one config generation."""

    name: str
    routes: Sequence[BaseRoute] = field(default_factory=list)
    documents: dict[str, Endpoint] = field(default_factory=dict)  # exact paths, public
    public_paths: frozenset[str] = frozenset()  # route paths served without a token
    render_error: ErrorRenderer = gateway_error_response
    resources: Mapping[str, Any] = field(default_factory=dict)  # for the policy engine
    prefixes: tuple[str, ...] = ()  # owned path prefixes; default: derived from the routes
    on_close: Callable[[], Awaitable[None]] | None = None
    # Rules for calls to URLs its clients registered: the runtime builds the locked-down
    # client (gateway.upstream.egress) and the pipeline hands it to requests (`calls`).
    egress: Egress | None = None
    # Path prefixes that are OAuth protected resources of their own (an agent protocol's endpoint,
    # the resource its clients ask tokens for): the core serves each one's RFC 9728 metadata at
    # the well-known path with the prefix appended, and its 401s point there.
    own_resources: tuple[str, ...] = ()
    # For such a resource, the token audiences accepted there and nowhere else (its own URL,
    # RFC 8707, as its metadata names it): gateway.auth.audiences.
    resource_audiences: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Storage the surface serves from, for /readyz: name -> an awaitable check (short, never
    # on the loop's own time) and whether readiness requires it.
    storage: Mapping[str, Storage] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.prefixes:
            self.prefixes = tuple(dict.fromkeys(
                owned_prefix(route.path) for route in self.routes if isinstance(route, Route)))

    async def aclose(self) -> None:
        if self.on_close is not None:
            await self.on_close()


def owned_prefix(route_path: str) -> str:
    """The literal part of a route path: "/chunks/{id:path}" owns "/chunks"."""
    literal = route_path.split("{", 1)[0]
    return literal.rstrip("/") or "/"


class Surface:
    """Base of a surface plug-in; override what the surface contributes."""

    name: str = ""
    config_key: str | None = None  # its section in the config file
    config_model: type[BaseModel] | None = None
    config_description: str = ""
    # An older section of a policy file that this surface's rule kinds still read (their
    # `RuleKind.legacy`): validated with `policy_model`, beside `rules:`.
    policy_key: str | None = None
    policy_model: type[BaseModel] | None = None
    policy_description: str = ""

    def section(self, settings: Settings) -> Any:
        """This surface's config section, or None when the config has none."""
        return getattr(settings, self.config_key, None) if self.config_key else None

    def capabilities(self, settings: Settings) -> list[Capability]:
        """Entries for the `/.well-known/ai` document."""
        return []

    def resource_metadata(self, settings: Settings) -> dict[str, Any]:
        """Members this surface adds to the RFC 9728 protected-resource metadata document.

        Public and global: nothing caller-specific. Objects under one member name (such as
        `capabilities`) are merged across surfaces; the core's standard members win.
        """
        return {}

    def problems(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        """Load-time checks of the config beyond its schema."""
        return []

    def notes(self, settings: Settings) -> list[Problem]:
        """What `aigw validate` explains of a choice the config makes (not a problem): each
        as (config path, what it means)."""
        return []

    def warnings(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        """What in a valid config works against the specs (e.g. an endpoint no rate limit
        counts); `aigw validate --strict` refuses such a config."""
        return []

    def policy_problems(self, settings: Settings, pack: PolicyPack) -> list[Problem]:
        """Checks of a policy file's rules that name this surface's resources."""
        return []

    def policy_rules(self) -> list[RuleKind]:
        """The rule kinds this surface decides with (gateway.policy.kinds)."""
        return []

    def policy_resources(self, settings: Settings) -> dict[str, ResourceSpec]:
        """The resources it serves records from, as the config describes them: the core's
        resource rule kinds (gateway.policy.resources) decide on them."""
        return {}

    def process_local_state(self, settings: Settings) -> list[str]:
        """Config parts whose state this surface keeps in one process's memory (a registry, a
        nonce store): `aigw run --workers` refuses them unless told to allow it."""
        return []

    def add_commands(self, commands: Any) -> None:
        """Add this surface's `aigw` subcommands to the argparse subparsers `commands`."""

    def mount(self, context: MountContext) -> Mount | None:
        """The surface for one generation, or None when the config does not enable it."""
        return None

    def openapi(self, settings: Settings) -> dict[str, Any]:
        """An OpenAPI 3.1 fragment (`paths`, `components.schemas`) of what `mount` serves.

        Empty when the config does not enable the surface. An operation without `security`
        gets the requirement the `auth.routes` rules give its path; `[{}]` marks one public
        whatever the rules say, with the credentials it honours added (see gateway.openapi).
        """
        return {}
