"""RateLimit header fields of the limit closest to exhaustion: the older
RateLimit-Limit / -Remaining / -Reset triple, and the IETF draft's structured fields
(draft-ietf-httpapi-ratelimit-headers-10: `RateLimit-Policy: "name";q=100;w=60` and
`RateLimit: "name";r=42;t=17`). An upstream's stricter triple is kept instead of ours; its
structured-field members stay, with ours appended."""

from __future__ import annotations

from gateway.asgi import RawHeaders
from gateway.integers import ascii_int
from gateway.ratelimit.config import Headers
from gateway.ratelimit.limiter import Quota

_LEGACY = (b"ratelimit-limit", b"ratelimit-remaining", b"ratelimit-reset")
_IETF = (b"ratelimit", b"ratelimit-policy")


def closest(quotas: list[Quota]) -> Quota:
    """The limit closest to exhaustion: fewest requests left, then the longest wait."""
    return min(quotas, key=lambda quota: (quota.remaining, -quota.reset))


def with_rate_limit_fields(headers: RawHeaders, quotas: list[Quota], wanted: Headers) -> RawHeaders:
    """The response headers with ours added, keeping the upstream's where they are stricter."""
    nearest = closest(quotas)
    out = list(headers)
    if wanted.legacy:
        out = _merge_legacy(out, nearest)
    if wanted.ietf:
        out = _merge_ietf(out, quotas, nearest)
    return out


def _merge_legacy(headers: RawHeaders, nearest: Quota) -> RawHeaders:
    upstream_remaining = _int_field(headers, b"ratelimit-remaining")
    if upstream_remaining is not None and upstream_remaining <= nearest.remaining:
        return headers  # the upstream's own triple is the stricter one: leave it alone
    kept = [(k, v) for k, v in headers if k.lower() not in _LEGACY]
    return [*kept,
            (b"ratelimit-limit", str(nearest.limit).encode()),
            (b"ratelimit-remaining", str(nearest.remaining).encode()),
            (b"ratelimit-reset", str(nearest.reset).encode())]


def _merge_ietf(headers: RawHeaders, quotas: list[Quota], nearest: Quota) -> RawHeaders:
    """Structured-field lists: the upstream's members stay and ours are appended."""
    existing = {name: [v for k, v in headers if k.lower() == name] for name in _IETF}
    kept = [(k, v) for k, v in headers if k.lower() not in _IETF]
    policies = ", ".join(f'"{q.policy}";q={q.limit};w={q.window}' for q in quotas).encode()
    current = f'"{nearest.policy}";r={nearest.remaining};t={nearest.reset}'.encode()
    return [*kept,
            (b"ratelimit-policy", b", ".join([*existing[b"ratelimit-policy"], policies])),
            (b"ratelimit", b", ".join([*existing[b"ratelimit"], current]))]


def _int_field(headers: RawHeaders, name: bytes) -> int | None:
    for key, value in headers:
        if key.lower() == name:
            return ascii_int(value)
    return None
