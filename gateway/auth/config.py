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
    timeout: Seconds = Field(
        5,
        description="Longest wait for the JWKS, in seconds; while it is down the cached keys keep "
        "working.",
    )


class Issuer(Strict):
    issuer: str = Field(description="Expected `iss` claim, compared exactly.")
    jwks_uri: Url = Field(
        description="URL of the issuer's JWKS, the keys its tokens are verified with.",
    )
    audiences: list[str] = Field(min_length=1, description="Accepted `aud` values.")
    algorithms: list[Algorithm] = Field(
        ["RS256", "ES256"], min_length=1,
        description="JWS algorithms accepted from this issuer (asymmetric only; none and HMAC "
        "cannot be configured).",
    )
    clock_skew: Annotated[float, Field(ge=0, le=600)] = Field(
        60,
        description="Leeway, in seconds, when checking exp, nbf and iat.",
    )
    jwks_cache: JwksCache = Field(
        JwksCache(),
        description="How long the JWKS is kept and how often an unknown kid may refetch it.",
    )
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
    endpoint: Url = Field(description="The introspection endpoint's URL.")
    client_id: str = Field(
        description="Client id the gateway authenticates to the introspection endpoint with.",
    )
    client_secret: SecretStr = Field(
        description="Client secret the gateway authenticates to the introspection endpoint with.",
    )
    cache_ttl: Annotated[float, Field(gt=0, le=60)] = Field(
        60, description="Positive results are cached for min(token exp, this) seconds."
    )
    negative_cache_ttl: Annotated[float, Field(ge=0, le=300)] = Field(
        30, description="Inactive results are cached this long (0: never), by token hash."
    )
    negative_cache_size: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        10000, description="Most inactive results kept; they never evict active ones."
    )
    timeout: Seconds = Field(
        5,
        description="Longest wait for an introspection answer, in seconds; past it the request is "
        "503 auth_unavailable.",
    )
    token_kind_field: str = Field(
        "pdpp_token_kind",
        description="Member of the introspection answer that holds the token kind (owner or "
        "client).",
    )
    default_token_kind: TokenKindName = Field(
        "client",
        description="Token kind of an answer without that member.",
    )


class ApiKey(Strict):
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] = Field(
        description="Hex SHA-256 of the key; the key itself never appears in config."
    )
    subject: str = Field(description="The subject a request with this key is made as.")
    client_id: str | None = Field(
        None,
        description="The client id a request with this key is made as (rate limits and tiers "
        "count by it).",
    )
    scopes: list[str] = Field([], description="Scopes this key carries.")
    kind: TokenKindName = Field(
        "client",
        description="Token kind this key stands for: `owner` (the subject's own data) or `client` "
        "(an app the subject granted).",
    )
    grant: GrantSpec | None = Field(
        None,
        description="Grant of a client key: stream -> list of fields, or \"*\" for all.",
    )


class ApiKeys(Strict):
    header: HeaderName = Field("X-API-Key", description="Request header holding the API key.")
    keys: list[ApiKey] = Field(
        [],
        description="The accepted keys, by the SHA-256 of each and the identity it stands for.",
    )


Method = Annotated[str, AfterValidator(str.upper)]


class RouteRule(Strict):
    path: PathPrefix = Field(description="Path prefix; the longest matching rule applies.")
    methods: list[Method] | None = Field(None, description="GET also covers HEAD.")
    scopes: list[str] = Field([], description="Every one of these scopes is required.")
    public: bool = Field(False, description="Anonymous callers allowed (a token is still checked).")


class IdentityHeaders(Strict):
    """Headers the gateway sends upstream about the caller; incoming copies are always removed."""

    subject: HeaderName | None = Field(
        "X-Aigw-Subject",
        description="Header carrying the caller's subject (`sub`, or the API key's subject) to "
        "the upstream; null: not sent.",
    )
    client_id: HeaderName | None = Field(
        "X-Aigw-Client-Id",
        description="Header carrying the caller's client id to the upstream; null: not sent.",
    )
    scopes: HeaderName | None = Field(
        "X-Aigw-Scopes",
        description="Header carrying the caller's scopes, space-separated, to the upstream; null: "
        "not sent.",
    )
    token_kind: HeaderName | None = Field(
        "X-Aigw-Token-Kind",
        description="Header carrying the caller's token kind (owner, client, anonymous) to the "
        "upstream; null: not sent.",
    )


class FailureLimit(Strict):
    """Failed authentications counted per client address (an IPv6 address by its /64)."""

    limit: Rate = Field(
        "30/minute", description="Failures allowed per address in the window; past it, a "
        "credential from that address that is not already verified is refused with 429 before "
        "any JWKS or introspection work.",
    )


class Auth(Strict):
    resource: Url | None = Field(None, description="Resource identifier; default public_base_url.")
    realm: str = Field("aigw", description="The realm named in WWW-Authenticate challenges.")
    issuers: list[Issuer] = Field(
        [],
        description="JWT issuers whose bearer tokens are accepted, each verified against its "
        "JWKS.",
    )
    introspection: Introspection | None = Field(
        None,
        description="RFC 7662 introspection endpoint for opaque tokens (tokens that are not JWTs "
        "of a configured issuer).",
    )
    api_keys: ApiKeys | None = Field(
        None,
        description="API keys accepted in a header; the config holds only their SHA-256 digests.",
    )
    authorization_details_types: list[str] = Field(
        ["pdpp_grant"], description="RFC 9396 detail types read as grants."
    )
    scope_grants: dict[str, GrantSpec] = Field(
        {}, description="Grants implied by scopes, for IdPs that cannot issue rich claims."
    )
    routes: list[RouteRule] = Field(
        [],
        description="Route access rules written in the config (prefer `route` rules in the policy "
        "files): each path prefix's scopes, or public; read as policy rules with ids "
        "config:auth.routes[i].",
    )
    default_access: Literal["authenticated", "public"] = Field(
        "authenticated", description="Access for paths no route rule matches (fail closed)."
    )
    allow_query_token: bool = Field(False, description="Accept ?access_token= (RFC 6750 §2.3).")
    forward_token: bool = Field(False, description="Pass the client's credential upstream.")
    identity_headers: IdentityHeaders = Field(
        IdentityHeaders(),
        description="Headers that tell the upstream who the caller is; incoming copies are always "
        "removed.",
    )
    max_token_bytes: Annotated[int, Field(ge=256, le=65536)] = Field(
        8192,
        description="Longest bearer token or API key accepted; longer is 401 invalid_token, never "
        "parsed.",
    )
    verified_cache_size: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        10000,
        description="Verified tokens kept (by their SHA-256, until they expire) so a busy client "
        "costs one verification; 0 turns the cache off.",
    )
    failure_limit: FailureLimit | None = Field(
        FailureLimit(), description="Counted in rate_limits.storage when that is Redis, else in "
        "process memory; null turns it off.",
    )


class DemoClient(Strict):
    secret: SecretStr = Field(
        description="The client's secret for the client-credentials grant (HTTP Basic at /token).",
    )
    subject: str | None = Field(None, description="The tokens' `sub` (default: the client id).")
    scopes: list[str] = Field([], description="Scopes written into the client's tokens.")
    kind: TokenKindName = Field(
        "client",
        description="Token kind written into its tokens (`owner` or `client`).",
    )
    grant: GrantSpec | None = Field(
        None,
        description="Grant written into its tokens: stream -> list of fields, or \"*\" for all.",
    )
    token_format: Literal["jwt", "opaque"] = Field(
        "jwt",
        description="`jwt`: a signed JWT; `opaque`: a random token the gateway checks by "
        "introspection.",
    )
    redirect_uris: list[Url] = Field(
        [], max_length=16,
        description="Redirect URIs of a client that signs in with the authorization-code grant "
        "and PKCE (an agent platform's client, say); its codes are approved at once, for "
        "`subject`, as the demo has no users to ask.",
    )


class DemoIssuer(Strict):
    url: Url = Field(description="Issuer identifier and base URL of the demo token issuer.")
    port: Annotated[int, Field(ge=1, le=65535)] = Field(
        8082,
        description="Port the demo issuer listens on (127.0.0.1).",
    )
    key_file: str = Field(description="Private JWK of the issuer, created on first use.")
    audience: str = Field(
        "aigw-demo",
        description="The `aud` of the tokens it signs (list it in an issuer's `audiences`).",
    )
    ttl: Annotated[int, Field(ge=60, le=86400)] = Field(
        3600,
        description="Lifetime of the tokens it issues, in seconds.",
    )
    clients: dict[str, DemoClient] = Field(
        {},
        description="Its clients by client id: each a secret, scopes, a token kind and a grant.",
    )


class Demo(Strict):
    issuer: DemoIssuer | None = Field(
        None,
        description="The demo's own OAuth token issuer (`aigw demo`): a client-credentials token "
        "endpoint, its JWKS and an introspection endpoint, for trying the gateway by hand. Never "
        "for production.",
    )
