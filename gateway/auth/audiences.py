"""Token audiences accepted at one resource of the gateway's own and nowhere else.

A path prefix that is a protected resource of its own (an agent protocol's endpoint, whose RFC
9728 metadata names it as the `resource`) is what its clients ask their authorization server
for a token to (RFC 8707 `resource`), so such a token's `aud` is that URL. It is accepted there
(and by the inner requests a call there makes on its caller's behalf), and refused everywhere
else: a token meant for one resource is no key to the others. A token that also names one of
its issuer's `audiences` is good everywhere, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gateway.paths import longest_prefix

# Where a token is limited to: the own-resource path prefixes it may be presented at; None
# when it is not limited.
Limit = frozenset[str] | None


class ResourceAudiences:
    def __init__(self, by_path: Mapping[str, Iterable[str]] | None = None) -> None:
        self._paths = tuple(by_path or {})
        self._by_audience: dict[str, set[str]] = {}
        for path, audiences in (by_path or {}).items():
            for audience in audiences:
                self._by_audience.setdefault(audience, set()).add(path)

    @property
    def audiences(self) -> list[str]:
        """Every audience some own resource accepts (for the token check itself)."""
        return sorted(self._by_audience)

    def limit(self, claim: Any, general: Iterable[str] | None) -> Limit:
        """Where a token whose `aud` claim is `claim` may be used. `general` are the audiences
        good everywhere (an issuer's); None (introspection, where no audience is configured)
        takes any audience that is not an own resource's as good everywhere."""
        named = _audiences(claim)
        own = named & self._by_audience.keys()
        if not own:
            return None
        # Good everywhere: named for the gateway as a whole (also where an operator lists an
        # own resource's URL among an issuer's audiences), or, without configured audiences,
        # named for anything besides own resources.
        everywhere = named & set(general) if general is not None else named - own
        if everywhere:
            return None
        return frozenset(path for audience in own for path in self._by_audience[audience])

    def admits(self, limit: Limit, path: str) -> bool:
        """Whether a token limited to `limit` may be presented for `path`: the own resource
        `path` falls under (the longest prefix, as its metadata URL is found) is one of them."""
        if limit is None:
            return True
        owning = longest_prefix(self._paths, path)
        return owning is not None and owning in limit


def _audiences(claim: Any) -> set[str]:
    if isinstance(claim, str):
        return {claim}
    if isinstance(claim, list):
        return {value for value in claim if isinstance(value, str)}
    return set()
