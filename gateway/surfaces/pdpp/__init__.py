"""PDPP resource server (spec-core §8, lexical and semantic retrieval) over the legacy API:
streams and records mapped by config, grants enforced in one place (projection.py) with the
policy's decisions on each stream and field (policy_rules.py) and on the visibility of its
records (the core's `record_visibility` rules: each stream is a resource), search."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from gateway.capability import Capability
from gateway.mapping import MappingError
from gateway.settings import Settings
from gateway.surface import Mount, MountContext, Problem, Storage, Surface
from gateway.surfaces.pdpp.config import Pdpp
from gateway.upstream_urls import url_field_warnings

if TYPE_CHECKING:
    from gateway.policy.config import PolicyPack
    from gateway.policy.kinds import RuleKind
    from gateway.policy.resources import ResourceSpec
    from gateway.surfaces.pdpp.store import Store


class PdppPlugin(Surface):
    name = "pdpp"
    config_key = "pdpp"
    config_model = Pdpp
    config_description = "PDPP resource server: streams, records, lexical and semantic search."

    def resource_metadata(self, settings: Settings) -> dict[str, Any]:
        pdpp = self._enabled(settings)
        if pdpp is None:
            return {}
        from gateway.surfaces.pdpp.metadata import resource_members

        return resource_members(pdpp)

    def openapi(self, settings: Settings) -> dict[str, Any]:
        pdpp = self._enabled(settings)
        if pdpp is None:
            return {}
        from gateway.surfaces.pdpp.openapi import pdpp_openapi

        return pdpp_openapi(pdpp)

    def problems(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        pdpp = self.section(settings)
        if pdpp is None:
            return []
        from gateway.surfaces.pdpp.streams import compile_streams

        try:
            compile_streams(pdpp, set(settings.upstreams))
        except MappingError as exc:
            return [(exc.path, str(exc).removeprefix(f"{exc.path}: "))]
        return []

    def notes(self, settings: Settings) -> list[Problem]:
        """Where each stream is searched: by its upstream, or in the gateway's own index (which
        engine, and whether one index serves every caller or each subject has one)."""
        pdpp = self._enabled(settings)
        if pdpp is None:
            return []
        from gateway.surfaces.pdpp.streams import compile_streams

        index = pdpp.index
        engine = f"sqlite files under {index.path}" if index.engine == "sqlite" \
            else "the shared PostgreSQL database (one replica refreshes at a time)"
        found = []
        for name, stream in compile_streams(pdpp, set(settings.upstreams)).items():
            searched = "lexical search by the upstream (no index of its own); " \
                if stream.lexical_op is not None else ""
            scope = "one per token subject (its records name {subject} or records_scope " \
                "says so)" if stream.per_subject else "one for every caller (read without " \
                "the caller's identity)"
            found.append((f"pdpp.streams.{name}", f"{searched}records kept and indexed in "
                          f"{engine}, {scope}, within {index.max_bytes} bytes"))
        return found

    def warnings(self, settings: Settings, capabilities: tuple[Capability, ...]) -> list[Problem]:
        pdpp = self._enabled(settings)
        if pdpp is None:
            return []
        from gateway.surfaces.pdpp.streams import searchable

        found = []
        if pdpp.cursor_secret is None:
            found.append(("pdpp.cursor_secret", "unset: cursors are signed with a key derived "
                          "from this section; set a secret when replicas share traffic"))
        for name, stream in pdpp.streams.items():
            found += url_field_warnings(settings, f"pdpp.streams.{name}.fields",
                                        {field: spec.path for field, spec in stream.fields.items()})
            for kind in ("lexical_fields", "semantic_fields"):
                declared = getattr(stream.search, kind)
                for field in sorted(set(declared) - set(searchable(stream, declared))):
                    found.append((f"pdpp.streams.{name}.search.{kind}", f"{field!r} is not a "
                                  "top-level string field of the stream; it is not declared"))
        return found

    def policy_rules(self) -> list[RuleKind]:
        from gateway.surfaces.pdpp.policy_rules import PDPP_KINDS

        return PDPP_KINDS

    def policy_resources(self, settings: Settings) -> dict[str, ResourceSpec]:
        from gateway.surfaces.pdpp.policy_rules import stream_resources

        return stream_resources(self.section(settings))

    def policy_problems(self, settings: Settings, pack: PolicyPack) -> list[Problem]:
        from gateway.surfaces.pdpp.policy_rules import rule_problems

        return rule_problems(self.section(settings), list(pack.rules))

    def mount(self, context: MountContext) -> Mount | None:
        pdpp = self._enabled(context.settings)
        if pdpp is None:
            return None
        from gateway.settings_key import secret_key, settings_key
        from gateway.surfaces.pdpp.handlers import PdppService
        from gateway.surfaces.pdpp.metadata import semantic_served
        from gateway.surfaces.pdpp.store import Store
        from gateway.surfaces.pdpp.streams import compile_streams

        streams = compile_streams(pdpp, set(context.settings.upstreams))
        # The records kept of the upstream outlive a reload that changes neither the streams
        # nor where they are read from (a reload is no reason to read every stream again).
        upstreams = json.dumps({name: str(u.url) for name, u in context.settings.upstreams.items()},
                               sort_keys=True)
        # Secrets count by their value: a reload that rotates the index's DSN gets a new store.
        store_key = ("pdpp-store", settings_key(pdpp, exclude={"cursor_secret"}),
                     secret_key(upstreams))
        store = context.shared.acquire(
            store_key, lambda: Store(pdpp.refresh_seconds, pdpp.index, upstreams,
                                     pdpp.semantic.embedder if semantic_served(pdpp)
                                     and pdpp.semantic is not None else None))
        service = PdppService(pdpp, streams, cursor_key(pdpp), store)
        return Mount(self.name, service.routes(), render_error=service.render_error,
                     prefixes=(f"{pdpp.base_path}/v1/streams", f"{pdpp.base_path}/v1/search"),
                     storage=_storage(pdpp, store))

    def _enabled(self, settings: Settings) -> Pdpp | None:
        pdpp = self.section(settings)
        return pdpp if pdpp is not None and pdpp.enabled else None


def _storage(pdpp: Pdpp, store: Store) -> dict[str, Storage]:
    """The shared index's engine, for /readyz (a local one is the gateway's own disk)."""
    if pdpp.index.engine != "postgres":
        return {}
    return {"pdpp.index": Storage(store.index_up, pdpp.index.required_for_ready)}


def cursor_key(pdpp: Pdpp) -> bytes:
    """The configured secret; else one derived from the section, the same on every replica
    that runs this config (never a per-process key: cursors must survive restarts)."""
    if pdpp.cursor_secret is not None:
        return pdpp.cursor_secret.get_secret_value().encode()
    return hashlib.sha256(b"aigw-pdpp-cursor\0" + pdpp.model_dump_json().encode()).digest()


SURFACE = PdppPlugin()
