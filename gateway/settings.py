"""Typed configuration models of the core. Loading and interpolation live in `loader.py`;
each spec surface adds its own section (see `gateway.registry.settings_model`)."""

from __future__ import annotations

from ipaddress import ip_network
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
    model_validator,
)

from gateway.auth.config import Auth, Demo, HeaderName
from gateway.personal_data import SubjectRule
from gateway.ratelimit.config import RateLimits
from gateway.service import Service
from gateway.strict import Strict
from gateway.weak_secrets import CREDENTIAL_HEADERS

Port = Annotated[int, Field(ge=0, le=65535)]
Seconds = Annotated[float, Field(gt=0, le=3600)]


def _network(value: str) -> str:
    try:
        return str(ip_network(value, strict=False))
    except ValueError:
        raise ValueError("expected an IP address or CIDR range") from None


Network = Annotated[str, AfterValidator(_network)]
Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]


class Listener(Strict):
    """Where a listener binds, and the limits every connection to it lives under (read at start)."""

    host: str = Field("127.0.0.1", description="Address the listener binds.")
    port: Port = Field(8080, description="Port the listener binds.")
    max_headers: Annotated[int, Field(ge=1, le=10000)] = Field(
        100, description="Most header fields in one request; more are answered 431."
    )
    max_header_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = Field(
        60 * 1024,
        description="Most bytes of request target plus header names and values; more is 431.",
    )
    header_timeout: Seconds = Field(
        10.0, description="Longest time to receive a request's head, from its first byte "
                          "(from the connection's start for its first request)."
    )
    keep_alive_timeout: Seconds = Field(
        15.0, description="How long an idle keep-alive connection is held between requests."
    )
    body_idle_timeout: Seconds = Field(
        15.0, description="Longest wait for the next chunk of a request body; later is 408."
    )
    body_timeout: Seconds = Field(
        60.0, description="Longest time to read a whole request body, from its first read; "
                          "later is 408."
    )


class AdminListener(Listener):
    port: Port = Field(9090, description="Port the admin listener binds.")


class Timeouts(Strict):
    connect: Seconds = Field(
        5.0,
        description="Longest wait for a pooled connection plus the TCP and TLS handshake, in "
        "seconds.",
    )
    read: Seconds = Field(
        30.0, description="Longest wait for the response head (from the request's end, any "
                          "1xx interim responses included) or for a body chunk."
    )


class Upstream(Strict):
    url: str = Field(description="Base URL, http or https; request paths are appended to its path.")
    transport: Literal["httptools", "aiohttp", "httpx"] = Field(
        "httptools",
        description="HTTP client behind the transport seam: aigw's own HTTP/1.1 client on "
        "httptools (default, picked by bench/), aiohttp or httpx.",
    )
    timeout: Timeouts = Field(
        Timeouts(),
        description="Connect and read timeouts of calls to this upstream.",
    )
    max_connections: Annotated[int, Field(ge=1, le=10000)] = Field(
        256,
        description="Most connections open to this upstream at once; idle ones are reused.",
    )
    max_response_headers: Annotated[int, Field(ge=1, le=10000)] = Field(
        100, description="Most header fields in one response head, its trailers counted in; "
                         "more is a 502 and nothing of it is relayed."
    )
    max_response_header_bytes: Annotated[int, Field(ge=1024, le=1024 * 1024)] = Field(
        60 * 1024, description="Most bytes of header names and values in one response head, "
                               "its trailers counted in; more is a 502."
    )
    preserve_host: bool = Field(False, description="Send the client's Host instead of the URL's.")
    add_headers: Annotated[dict[HeaderName, str], CREDENTIAL_HEADERS] = Field(
        {}, description="Sent on every upstream request, e.g. the gateway's own credentials."
    )
    rewrite_redirects: bool = Field(
        True,
        description="Rewrite this upstream's own URLs in Location, Content-Location, Refresh "
        "and Link to the public origin (public_base_url, else the scheme and Host the client "
        "used), replacing the URL's path prefix as nginx's `proxy_redirect default` does; "
        "other origins and relative URLs pass unchanged.",
    )
    rewrite_body_urls: bool = Field(
        False,
        description="Also rewrite this upstream's URLs in passthrough JSON bodies "
        "(application/json, */*+json) as in Location: its URL prefix, wherever a JSON string "
        "holds it, becomes the public origin. The gateway then asks this upstream for "
        "uncompressed bodies (Accept-Encoding: identity); an encoded, partial (206) or larger "
        "than rewrite_body_max_bytes body passes unchanged, counted in "
        "aigw_body_url_rewrites_total.",
    )
    rewrite_body_max_bytes: Annotated[int, Field(ge=1, le=64 * 1024 * 1024)] = Field(
        1024 * 1024, description="Largest JSON body rewrite_body_urls reads whole to rewrite; "
        "larger ones stream through unchanged.",
    )
    health_path: str | None = Field(
        None, description="Path probed by /readyz; without it readiness is a TCP connect."
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("expected an absolute http:// or https:// URL")
        if parts.query or parts.fragment:
            raise ValueError("expected a URL without query or fragment")
        return value.rstrip("/")


class Proxy(Strict):
    max_body_bytes: Annotated[int, Field(ge=0)] = Field(
        10 * 1024 * 1024,
        description="Largest request body accepted (declared or streamed); larger is 413 "
        "request_too_large.",
    )
    buffer_bytes: Annotated[int, Field(ge=0, le=16 * 1024 * 1024)] = Field(
        64 * 1024, description="Bodies up to this size are buffered; larger ones are streamed."
    )
    trusted_proxies: list[Network] = Field(
        default_factory=list,
        description="Addresses or CIDR ranges of proxies whose X-Forwarded-*, Forwarded, "
                    "client-IP (X-Real-IP, True-Client-IP, X-Client-IP, CF-Connecting-IP) and "
                    "X-Request-Id headers are kept.",
    )
    via: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")] = Field(
        "aigw",
        description="The name the gateway adds to Via.",
    )


def _origin(value: str) -> str:
    if value == "*":
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path \
            or parts.query or parts.fragment or parts.username:
        raise ValueError("expected * or an origin such as https://agent.example (scheme, host "
                         "and port only)")
    return value


Origin = Annotated[str, AfterValidator(_origin)]


class Discovery(Strict):
    """How browsers may read the public discovery documents (CORS)."""

    cors_origins: list[Origin] = Field(
        ["*"], description="Origins allowed to read the discovery documents: * for any, or a "
        "list of origins (the matching one is echoed, with Vary: Origin); [] for no CORS.",
    )
    cors_max_age: Annotated[int, Field(ge=0, le=86400)] = Field(
        86400, description="Access-Control-Max-Age of a preflight answer, in seconds."
    )

    @field_validator("cors_origins")
    @classmethod
    def _star_alone(cls, value: list[str]) -> list[str]:
        if "*" in value and len(value) > 1:
            raise ValueError("expected either * alone or a list of origins")
        return value


class Logging(Strict):
    level: Literal["debug", "info", "warning", "error"] = Field(
        "info",
        description="Lowest level of the gateway's own log lines (JSON on stderr).",
    )
    access_log: bool = Field(
        True,
        description="Write one JSON line per request on stdout (no query string, headers or "
        "bodies).",
    )
    subjects: SubjectRule = Field(
        "hash",
        description="How a caller's subject (who the token or key speaks for) appears in every "
        "log the gateway writes, the access log and the decision log alike: `hash` (`sha256:` "
        "and 32 hex digits of its SHA-256), `clear` (as is) or `omit` (left out).",
    )


class Tracing(Strict):
    """OpenTelemetry traces over OTLP/HTTP (read at start). A field left out falls back to the
    standard OTEL_* environment variable named in its description, then to the default."""

    enabled: bool | None = Field(
        None, description="Export traces. Unset: on when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or "
        "OTEL_EXPORTER_OTLP_ENDPOINT is set; OTEL_SDK_DISABLED=true or "
        "OTEL_TRACES_EXPORTER=none turn it off either way.",
    )
    endpoint: str | None = Field(
        None, description="OTLP/HTTP traces URL, e.g. http://collector:4318/v1/traces. Unset: "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, else "
        "http://localhost:4318/v1/traces.",
    )
    headers: Annotated[dict[HeaderName, str], CREDENTIAL_HEADERS] = Field(
        {}, description="Sent with every export, e.g. the collector's credentials (use "
        "${VAR}). Empty: OTEL_EXPORTER_OTLP_TRACES_HEADERS or OTEL_EXPORTER_OTLP_HEADERS.",
    )
    service_name: str | None = Field(
        None, description="service.name of the spans. Unset: OTEL_SERVICE_NAME, else aigw.",
    )
    sample_ratio: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None, description="Share of new traces recorded; a continued trace follows its "
        "caller's sampled flag (parent-based). Unset: OTEL_TRACES_SAMPLER(_ARG), else 1.0.",
    )
    accept_context: Literal["trusted", "all", "none"] = Field(
        "trusted", description="Whose traceparent/tracestate continue a trace: callers in "
        "proxy.trusted_proxies, all callers, or none. Others start a new trace.",
    )
    baggage: bool = Field(
        False, description="Pass W3C baggage from callers whose context is accepted to the "
        "upstreams; off: baggage is dropped.",
    )
    max_queue_size: Annotated[int, Field(ge=1, le=1_000_000)] | None = Field(
        None, description="Ended spans waiting for export; past it spans are dropped and "
        "counted. Unset: OTEL_BSP_MAX_QUEUE_SIZE, else 2048.",
    )
    max_export_batch_size: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        None, description="Spans per export. Unset: OTEL_BSP_MAX_EXPORT_BATCH_SIZE, else 512.",
    )
    schedule_delay: Annotated[float, Field(gt=0, le=3600)] | None = Field(
        None, description="Seconds between exports. Unset: OTEL_BSP_SCHEDULE_DELAY (ms), "
        "else 5.",
    )
    timeout: Seconds | None = Field(
        None, description="Longest time one export (with its retries) may take. Unset: "
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else 10.",
    )

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("expected an absolute http:// or https:// URL")
        return value

    @model_validator(mode="after")
    def _batch_fits_queue(self) -> Tracing:
        if self.max_queue_size and (self.max_export_batch_size or 0) > self.max_queue_size:
            raise ValueError("max_export_batch_size must not exceed max_queue_size")
        return self


class DecisionLog(Strict):
    """Where policy decisions are written, one JSON line per request that took any."""

    sink: Literal["stderr", "stdout", "file", "redis", "none"] = Field(
        "stderr",
        description="Where decision-log lines go: stderr (the default: apart from the access "
        "log on stdout, and no file to fill a disk), stdout (beside the access log), a file "
        "(`path`), a Redis stream (`redis_url`), or none.",
    )
    path: str | None = Field(
        None, description="The file lines are appended to (sink: file), relative to the config "
        "file. A missing folder is made readable by its owner only (0700), a new file likewise "
        "(0600); existing ones keep their modes.")
    redis_url: str | None = Field(None, description="redis:// URL of the stream (sink: redis).")
    stream: str = Field("aigw:decisions", description="Redis stream key (XADD).")
    stream_max_len: Annotated[int, Field(ge=100)] = Field(
        100_000, description="The stream is trimmed to about this many entries.")
    sample: Annotated[float, Field(ge=0, le=1)] = Field(
        1.0, description="Share of all-allow requests logged; denials and shadow rules that "
                         "would have decided otherwise are always logged.")
    subjects: SubjectRule | None = Field(
        None, description="Deprecated: set `logging.subjects`, which applies to every log. "
                          "Where only this is set, it is read as `logging.subjects`.",
        json_schema_extra={"deprecated": True})
    queue_size: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        10_000, description="Lines waiting for the sink; past it lines are dropped and counted "
                            "(aigw_policy_decision_log_dropped_total), never waited for.")

    @model_validator(mode="after")
    def _sink_has_its_target(self) -> DecisionLog:
        if self.sink == "file" and not self.path:
            raise ValueError("sink file needs a path")
        if self.sink == "redis" and not self.redis_url:
            raise ValueError("sink redis needs a redis_url")
        return self


class Reload(Strict):
    watch: bool = Field(True, description="Poll the config and policy files for changes.")
    interval: Seconds = Field(
        1.0,
        description="How often the config and policy files are checked for changes, in seconds "
        "(polling, so Kubernetes ConfigMap swaps are seen).",
    )


class Shutdown(Strict):
    grace: Seconds = Field(30.0, description="Longest wait for in-flight requests on shutdown.")


class Interpreter(Strict):
    switch_interval: float = Field(
        0.005, gt=0, le=0.1,
        description="Longest time, in seconds, a thread running Python keeps the interpreter "
        "while another waits for it (`sys.setswitchinterval`; 0.005 is Python's own). The "
        "event loop that serves every request is one such thread: while a worker thread runs "
        "Python (an index refresh, a big listing), each return of the loop from waiting for "
        "the network may wait this long. Lower (0.001) shortens request tails when worker "
        "threads are busy with Python, at the cost of more handoffs between busy threads "
        "(measured: within the noise of a few percent of CPU per request). Read at start.",
    )


class Settings(Strict):
    version: Literal[1] = Field(1, description="Version of this config format: 1.")
    listen: Listener = Field(
        Listener(),
        description="The public listener: where clients call the gateway, and the limits every "
        "connection lives under.",
    )
    admin: AdminListener = Field(
        AdminListener(),
        description="The admin listener: /metrics, /healthz, /readyz and /policy, on its own "
        "port.",
    )
    public_base_url: str | None = Field(
        None,
        description="The gateway's public URL (scheme, host, port, path): discovery documents, "
        "RFC 9728 metadata and rewritten upstream URLs are written with it. Needed by auth and "
        "by surfaces that publish absolute URLs.",
    )
    policies: str | None = Field(
        None, description="Folder of policy YAML files, relative to this config file."
    )
    upstreams: dict[Name, Upstream] = Field(
        min_length=1,
        description="The APIs behind the gateway, by name.",
    )
    default_upstream: Name | None = Field(
        None, description="Upstream for every path no surface serves; none means 404."
    )
    proxy: Proxy = Field(
        Proxy(),
        description="How requests pass through: body limits, trusted proxies, Via.",
    )
    discovery: Discovery = Field(
        Discovery(),
        description="How browsers may read the public discovery documents (CORS).",
    )
    logging: Logging = Field(Logging(), description="Log level and the access log.")
    tracing: Tracing = Field(
        Tracing(),
        description="OpenTelemetry traces over OTLP/HTTP (off by default).",
    )
    decision_log: DecisionLog = Field(
        DecisionLog(),
        description="Where policy decisions are logged, one JSON line per request.",
    )
    reload: Reload = Field(
        Reload(),
        description="Reloading the config and policies when their files change.",
    )
    shutdown: Shutdown = Field(Shutdown(), description="Draining on SIGTERM.")
    interpreter: Interpreter = Field(
        Interpreter(),
        description="How the event loop shares Python's interpreter with the gateway's worker "
        "threads.",
    )
    auth: Auth | None = Field(None, description="Without it, callers are not authenticated.")
    rate_limits: RateLimits | None = Field(None, description="Without it, nothing is limited.")
    service: Service | None = Field(None, description="Who runs this API, for discovery.")
    demo: Demo | None = Field(
        None,
        description="The demo's token issuer (`aigw demo`, `aigw token`).",
    )

    @model_validator(mode="after")
    def _one_rule_for_subjects(self) -> Settings:
        old = self.decision_log.subjects
        if old is not None and "subjects" in self.logging.model_fields_set \
                and old != self.logging.subjects:
            raise ValueError("decision_log.subjects (deprecated) and logging.subjects differ: "
                             "set logging.subjects only, it applies to every log")
        return self

    @property
    def log_subjects(self) -> SubjectRule:
        """How every log shows a subject: `logging.subjects`, or the deprecated
        `decision_log.subjects` where only that is set."""
        old = self.decision_log.subjects
        if old is None or "subjects" in self.logging.model_fields_set:
            return self.logging.subjects
        return old
