"""RateLimit header fields of the limit closest to exhaustion: the older
RateLimit-Limit / -Remaining / -Reset triple, and the IETF draft's structured fields
(draft-ietf-httpapi-ratelimit-headers-10: `RateLimit-Policy: "name";q=100;w=60` and
`RateLimit: "name";r=42;t=17`). An upstream's stricter triple is kept instead of ours; its
structured-field members stay, with ours appended."""

from __future__ import annotations

import functools

from gateway.asgi import RawHeaders
from gateway.integers import ascii_int
from gateway.ratelimit.config import Headers
from gateway.ratelimit.limiter import Quota

_LEGACY = (b"ratelimit-limit", b"ratelimit-remaining", b"ratelimit-reset")
_IETF = (b"ratelimit", b"ratelimit-policy")


def closest(quotas: list[Quota]) -> Quota:
    """The limit closest to exhaustion: fewest requests left, then the longest wait."""
    if len(quotas) == 1:
        return quotas[0]
    return min(quotas, key=lambda quota: (quota.remaining, -quota.reset))


def with_rate_limit_fields(headers: RawHeaders, quotas: list[Quota], wanted: Headers) -> RawHeaders:
    """The response headers with ours added, keeping the upstream's where they are stricter."""
    nearest = closest(quotas)
    out = list(headers)
    if not any(name[:9].lower() == b"ratelimit" for name, _ in headers):
        # The upstream sent none of these fields (the usual case): ours are simply added.
        if wanted.legacy:
            out += [(b"ratelimit-limit", b"%d" % nearest.limit),
                    (b"ratelimit-remaining", b"%d" % nearest.remaining),
                    (b"ratelimit-reset", b"%d" % nearest.reset)]
        if wanted.ietf:
            out += [(b"ratelimit-policy", _policies(quotas)), (b"ratelimit", _current(nearest))]
        return out
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
            (b"ratelimit-limit", b"%d" % nearest.limit),
            (b"ratelimit-remaining", b"%d" % nearest.remaining),
            (b"ratelimit-reset", b"%d" % nearest.reset)]


def _merge_ietf(headers: RawHeaders, quotas: list[Quota], nearest: Quota) -> RawHeaders:
    """Structured-field lists: the upstream's members stay and ours are appended."""
    existing = {name: [v for k, v in headers if k.lower() == name] for name in _IETF}
    kept = [(k, v) for k, v in headers if k.lower() not in _IETF]
    return [*kept,
            (b"ratelimit-policy", b", ".join([*existing[b"ratelimit-policy"],
                                              _policies(quotas)])),
            (b"ratelimit", b", ".join([*existing[b"ratelimit"], _current(nearest)]))]


def _policies(quotas: list[Quota]) -> bytes:
    return b", ".join([_policy(q.policy, q.limit, q.window) for q in quotas])


@functools.lru_cache(maxsize=1024)
def _policy(name: str, limit: int, window: int) -> bytes:
    """One RateLimit-Policy member (the same for every request a rule counts)."""
    return f'"{name}";q={limit};w={window}'.encode()


def _current(nearest: Quota) -> bytes:
    return f'"{nearest.policy}";r={nearest.remaining};t={nearest.reset}'.encode()


def _int_field(headers: RawHeaders, name: bytes) -> int | None:
    for key, value in headers:
        if key.lower() == name:
            return ascii_int(value)
    return None
