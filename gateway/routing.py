"""Which surface owns a request path.

A path under a prefix a surface owns is answered by that surface, its 404 and 405 included,
and never falls through to the passthrough; documents are owned at their exact paths.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gateway.paths import CONTROL_CHARACTERS as _CONTROL
from gateway.paths import matches_prefix
from gateway.surface import Endpoint, Mount


@dataclass(frozen=True, slots=True)
class Document:
    endpoint: Endpoint
    owner: Mount | None  # None: a core document, answered in the gateway's dialect


class PathOwners:
    def __init__(self, mounts: Iterable[Mount],
                 core_documents: Mapping[str, Endpoint] = {}) -> None:
        self.documents: dict[str, Document] = {
            path: Document(endpoint, None) for path, endpoint in core_documents.items()}
        # Candidate prefixes by first segment, longest first, so a lookup tries only a few.
        self._by_segment: dict[str, list[tuple[str, Mount]]] = {}
        for mount in mounts:
            for path, endpoint in mount.documents.items():
                self.documents[path] = Document(endpoint, mount)
            for prefix in mount.prefixes:
                self._by_segment.setdefault(_first_segment(prefix), []).append((prefix, mount))
        for candidates in self._by_segment.values():
            candidates.sort(key=lambda candidate: len(candidate[0]), reverse=True)

    def owner(self, path: str) -> Mount | None:
        """The mount whose prefix covers `path`, or None for the passthrough.

        A control character ends the path here, so "/chunks%0A" is refused by the owner of
        "/chunks", in its dialect, rather than treated as a path of its own.
        """
        path = _CONTROL.split(path, 1)[0]
        for candidates in (self._by_segment.get(_first_segment(path), ()),
                           self._by_segment.get("", ())):
            for prefix, mount in candidates:
                if matches_prefix(prefix, path):
                    return mount
        return None


    def owns(self, path: str) -> bool:
        """Whether a document or a surface answers `path` (else the passthrough does)."""
        return path in self.documents or self.owner(path) is not None


def _first_segment(path: str) -> str:
    """"/chunks/x" -> "chunks"; "/chunks;p" -> "chunks"; "/" -> "" (a prefix owning everything)."""
    return path[1:].split("/", 1)[0].split(";", 1)[0]
