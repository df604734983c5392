"""Config models of the `auth` and `demo` sections."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, SecretStr

from gateway.ratelimit.rates import Rate
from gateway.strict import Strict

Seconds = Annotated[float, Field(gt=0, le=86400 * 7)]
TokenKindName = Literal["owner", "client"]
Algorithm = Literal[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"
]


def _absolute_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected an absolute http:// or https:// URL")
    return value


def _path_prefix(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError("expected a path starting with /")
    return value


Url = Annotated[str, AfterValidator(_absolute_url)]
PathPrefix = Annotated[str, AfterValidator(_path_prefix)]
HeaderName = Annotated[str, Field(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")]
# A grant as config writes it: stream (or collection) name -> readable fields, or "*" for all.
GrantSpec = dict[str, list[str] | Literal["*"]]


class JwksCache(Strict):
    min_ttl: Seconds = Field(60, description="Floor on the JWKS response's Cache-Control max-age.")
    max_ttl: Seconds = Field(86400, description="Ceiling on the JWKS cache lifetime.")
    refresh_cooldown: Seconds = Field(
        10, description="Least time between two refetches caused by unknown key ids."
    )
    timeout: Seconds = 5


class Issuer(Strict):
    issuer: str = Field(description="Expected `iss` claim, compared exactly.")
    jwks_uri: Url
    audiences: list[str] = Field(min_length=1, description="Accepted `aud` values.")
    algorithms: list[Algorithm] = Field(["RS256", "ES256"], min_length=1)
    clock_skew: Annotated[float, Field(ge=0, le=600)] = 60
    jwks_cache: JwksCache = JwksCache()
    token_kind_claim: str | None = Field(
        "pdpp_token_kind", description="Claim naming the token kind (owner or client)."
    )
    default_token_kind: TokenKindName = Field(
        "client", description="Kind of tokens that carry no token-kind claim."
    )
    grant_claim: str | None = Field(
        "pdpp_grant",
        description="Claim carrying a grant: streams and the fields readable in each.",
    )
    token_url: Url | None = Field(
        None, description="The issuer's token endpoint (RFC 6749 §3.2): agent cards name it in "
        "an OAuth 2.0 client-credentials flow with the scopes a call needs; without it they "
        "name a bearer scheme.",
    )


class Introspection(Strict):
    endpoint: Url
    client_id: str
    client_secret: SecretStr
    cache_ttl: Annotated[float, Field(gt=0, le=60)] = Field(
        60, description="Positive results are cached for min(token exp, this) seconds."
    )
    negative_cache_ttl: Annotated[float, Field(ge=0, le=300)] = Field(
        30, description="Inactive results are cached this long (0: never), by token hash."
    )
    negative_cache_size: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        10000, description="Most inactive results kept; they never evict active ones."
    )
    timeout: Seconds = 5
    token_kind_field: str = "pdpp_token_kind"
    default_token_kind: TokenKindName = "client"


class ApiKey(Strict):
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] = Field(
        description="Hex SHA-256 of the key; the key itself never appears in config."
    )
    subject: str
    client_id: str | None = None
    scopes: list[str] = []
    kind: TokenKindName = "client"
    grant: GrantSpec | None = None


class ApiKeys(Strict):
    header: HeaderName = "X-API-Key"
    keys: list[ApiKey] = []


Method = Annotated[str, AfterValidator(str.upper)]


class RouteRule(Strict):
    path: PathPrefix = Field(description="Path prefix; the longest matching rule applies.")
    methods: list[Method] | None = Field(None, description="GET also covers HEAD.")
    scopes: list[str] = Field([], description="Every one of these scopes is required.")
    public: bool = Field(False, description="Anonymous callers allowed (a token is still checked).")


class IdentityHeaders(Strict):
    """Headers the gateway sends upstream about the caller; incoming copies are always removed."""

    subject: HeaderName | None = "X-Aigw-Subject"
    client_id: HeaderName | None = "X-Aigw-Client-Id"
    scopes: HeaderName | None = "X-Aigw-Scopes"
    token_kind: HeaderName | None = "X-Aigw-Token-Kind"


class FailureLimit(Strict):
    """Failed authentications counted per client address (an IPv6 address by its /64)."""

    limit: Rate = Field(
        "30/minute", description="Failures allowed per address in the window; past it, a "
        "credential from that address that is not already verified is refused with 429 before "
        "any JWKS or introspection work.",
    )


class Auth(Strict):
    resource: Url | None = Field(None, description="Resource identifier; default public_base_url.")
    realm: str = "aigw"
    issuers: list[Issuer] = []
    introspection: Introspection | None = None
    api_keys: ApiKeys | None = None
    authorization_details_types: list[str] = Field(
        ["pdpp_grant"], description="RFC 9396 detail types read as grants."
    )
    scope_grants: dict[str, GrantSpec] = Field(
        {}, description="Grants implied by scopes, for IdPs that cannot issue rich claims."
    )
    routes: list[RouteRule] = []
    default_access: Literal["authenticated", "public"] = Field(
        "authenticated", description="Access for paths no route rule matches (fail closed)."
    )
    allow_query_token: bool = Field(False, description="Accept ?access_token= (RFC 6750 §2.3).")
    forward_token: bool = Field(False, description="Pass the client's credential upstream.")
    identity_headers: IdentityHeaders = IdentityHeaders()
    max_token_bytes: Annotated[int, Field(ge=256, le=65536)] = 8192
    verified_cache_size: Annotated[int, Field(ge=0, le=1_000_000)] = 10000
    failure_limit: FailureLimit | None = Field(
        FailureLimit(), description="Counted in rate_limits.storage when that is Redis, else in "
        "process memory; null turns it off.",
    )


class DemoClient(Strict):
    secret: SecretStr
    subject: str | None = Field(None, description="The tokens' `sub` (default: the client id).")
    scopes: list[str] = []
    kind: TokenKindName = "client"
    grant: GrantSpec | None = None
    token_format: Literal["jwt", "opaque"] = "jwt"


class DemoIssuer(Strict):
    url: Url = Field(description="Issuer identifier and base URL of the demo token issuer.")
    port: Annotated[int, Field(ge=1, le=65535)] = 8082
    key_file: str = Field(description="Private JWK of the issuer, created on first use.")
    audience: str = "aigw-demo"
    ttl: Annotated[int, Field(ge=60, le=86400)] = 3600
    clients: dict[str, DemoClient] = {}


class Demo(Strict):
    issuer: DemoIssuer | None = None
