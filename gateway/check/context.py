"""What every spec's check is handed: the probe, the options, and the discovery documents
fetched once (without credentials, as an agent meeting the origin would)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.check.http import ORIGIN_HEADER, Answer, Probe


@dataclass(frozen=True, slots=True)
class AipKey:
    """An AIP platform key: its `X-AIP-Key-Id` and the shared secret it signs with."""

    key_id: str
    secret: bytes = field(repr=False)
    platform: str = "aigw-check"  # the platform.id the key speaks for


@dataclass
class Context:
    probe: Probe
    aip_key: AipKey | None = None
    _documents: dict[str, Answer] = field(default_factory=dict)

    async def document(self, path: str) -> Answer:
        """A well-known document, fetched once, anonymously, from a (claimed) browser
        origin, so the same answer shows its CORS fields."""
        if path not in self._documents:
            self._documents[path] = await self.probe.get(
                path, auth=False, headers={"Origin": ORIGIN_HEADER, "Accept": "application/json"})
        return self._documents[path]
