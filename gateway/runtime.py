"""A `Generation` is everything built from one loaded config; `Runtime` swaps them on reload.

A generation holds the upstream clients and proxy targets, every enabled surface's mount, the
owners of paths (gateway.routing), the CORS of public paths, identity forwarding and the
pipeline. Requests hold the generation they started with, so a reload never changes a request
midway; a replaced generation is closed once its last request has finished. Resources that
outlive a generation (upstream clients, the rate-limit counter, the failed-authentication
store, surfaces' egress clients, stores and sinks) are leased from `Runtime.shared`
(gateway.lifetimes): those whose settings did not change are carried over to the new
generation, and each is closed exactly once, by the last generation using it. The runtime
also keeps the decision log, replaced when a reload changes its settings.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gateway import observability, registry
from gateway.auth.forwarding import IdentityForwarding
from gateway.body_urls import JsonBodyUrls
from gateway.cors import DocumentCors
from gateway.discovery import core_documents
from gateway.gctune import refreeze
from gateway.headers import parse_networks
from gateway.lifetimes import Lease, Resources
from gateway.loader import LoadedConfig
from gateway.pipeline import Pipeline
from gateway.policy.decisionlog import DecisionLog
from gateway.proxy import ProxyOptions, ProxyTarget
from gateway.redirects import UpstreamOrigin
from gateway.routing import PathOwners
from gateway.settings import Settings, Upstream
from gateway.settings_key import secret_key, settings_key
from gateway.surface import Mount, MountContext
from gateway.upstream import Transport, TransportFactory, create_transport
from gateway.upstream_urls import UpstreamUrls

if TYPE_CHECKING:
    from gateway.upstream.egress.client import EgressClient

log = logging.getLogger("aigw.runtime")


class Generation:
    def __init__(self, number: int, loaded: LoadedConfig, lease: Lease,
                 connect: TransportFactory) -> None:
        settings = loaded.settings
        self.number = number
        self.loaded = loaded
        self.settings = settings
        self.lease = lease  # every shared resource this generation uses, released on retiring
        self.transports = {name: lease.acquire(("upstream", name, settings_key(up)),
                                               partial(connect, name, up))
                           for name, up in settings.upstreams.items()}
        self.targets = {name: _target(name, up, self.transports[name])
                        for name, up in settings.upstreams.items()}
        self.default_target = (self.targets[settings.default_upstream]
                               if settings.default_upstream else None)
        self.proxy_options = ProxyOptions(
            settings.proxy.max_body_bytes, settings.proxy.buffer_bytes, settings.proxy.via,
            settings.public_base_url,
        )
        self.trusted_networks = parse_networks(settings.proxy.trusted_proxies)
        self.mounts = _mount_surfaces(loaded, lease)
        own_resources = [path for mount in self.mounts for path in mount.own_resources]
        audiences = {path: accepted for mount in self.mounts
                     for path, accepted in mount.resource_audiences.items()}
        self.owners = PathOwners(self.mounts,
                                 core_documents(settings, loaded.bundle, own_resources))
        self.resources = {name: resource for mount in self.mounts
                          for name, resource in mount.resources.items()}
        # Discovery stays public whatever the route rules say.
        public = frozenset(self.owners.documents).union(
            *(mount.public_paths for mount in self.mounts))
        self.cors_paths = public
        api_keys = settings.auth.api_keys if settings.auth else None
        self.cors = DocumentCors(settings.discovery, api_keys.header if api_keys else None)
        self.identity = IdentityForwarding(settings.auth)
        self.pipeline = Pipeline.from_config(loaded, public, _counter(loaded, lease),
                                             self.resources, _failure_store(loaded, lease),
                                             self.targets, egress=_egress(self.mounts, lease),
                                             urls=_upstream_urls(settings, self.owners),
                                             own_resources=own_resources,
                                             resource_audiences=audiences)
        self.revision = loaded.bundle.revision if loaded.bundle is not None else "none"
        self.active = 0
        self.retired = False
        self._drained = asyncio.Event()

    def enter(self) -> None:
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        if self.retired and self.active == 0:
            self._drained.set()

    async def aclose(self) -> None:
        """Close what this generation owns, then give back what it shares (the last
        generation holding a shared resource closes it)."""
        await self.pipeline.aclose()
        for mount in self.mounts:
            await mount.aclose()
        await self.lease.release()

    async def drained(self) -> None:
        self.retired = True
        if self.active == 0:
            return
        await self._drained.wait()


class Runtime:
    """Holds the serving generation; `swap` replaces it atomically for new requests."""

    def __init__(self, loaded: LoadedConfig, transports: TransportFactory | None = None) -> None:
        """`transports` builds each upstream's client from its name and settings (default: the
        configured HTTP client; tests pass `gateway.upstream.memory.MemoryUpstreams`)."""
        self._connect = transports or _network_transport
        self.shared = Resources()
        self.current = Generation(1, loaded, self.shared.lease(), self._connect)
        self.decision_log = _decision_log(loaded)
        _show_revision(self.current)
        self.draining = False
        self._live: list[Generation] = [self.current]  # serving, or still finishing requests
        self._retiring: set[asyncio.Task[None]] = set()
        observability.CONFIG_GENERATION.set(1)
        observability.derive_in_flight(lambda: self.in_flight)

    @property
    def in_flight(self) -> int:
        """Requests being handled now, by every generation still serving one."""
        return sum(generation.active for generation in self._live)

    def swap(self, loaded: LoadedConfig) -> Generation:
        old = self.current
        new = Generation(old.number + 1, loaded, self.shared.lease(), self._connect)
        if (loaded.settings.decision_log, loaded.settings.log_subjects) \
                != (old.settings.decision_log, old.settings.log_subjects):
            self._close_later(self.decision_log)
            self.decision_log = _decision_log(loaded)
        self.current = new
        _show_revision(new)
        self._live.append(new)
        observability.CONFIG_GENERATION.set(new.number)
        task = asyncio.ensure_future(self._retire(old))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
        return new

    def _close_later(self, decision_log: DecisionLog) -> None:
        task = asyncio.ensure_future(decision_log.aclose())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def _retire(self, old: Generation) -> None:
        """Once `old` has no request left, close it (and what no live generation still uses)."""
        await old.drained()
        self._live.remove(old)
        await old.aclose()
        log.info("config generation retired", extra={"fields": {"generation": old.number}})
        refreeze()

    async def aclose(self) -> None:
        """Close everything once in-flight requests are done."""
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)
        await self.current.aclose()
        await self.decision_log.aclose()


def _network_transport(name: str, upstream: Upstream) -> Transport:
    return create_transport(upstream)


def _decision_log(loaded: LoadedConfig) -> DecisionLog:
    return DecisionLog(loaded.settings.decision_log, loaded.path.parent,
                       loaded.settings.log_subjects)


def _show_revision(generation: Generation) -> None:
    """The serving policy revision on /metrics (one series at a time)."""
    observability.POLICY_REVISION.clear()
    observability.POLICY_REVISION.labels(generation.revision).set(1)


def _counter(loaded: LoadedConfig, lease: Lease) -> Any:
    """The rate-limit counter, shared across reloads so no count is lost on a config change."""
    limits = loaded.settings.rate_limits
    if limits is None:
        return None
    from gateway.ratelimit.stores import create_counter

    args = (limits.strategy, limits.storage, limits.key_prefix, limits.store_timeout,
            limits.sync, limits.sync_interval, limits.local_share)
    key = ("rate_limits", secret_key(limits.storage), *args[2:], limits.strategy)
    return lease.acquire(key, lambda: create_counter(*args))


def _failure_store(loaded: LoadedConfig, lease: Lease) -> Any:
    """Where failed authentications are counted: the rate-limit store's URL, else process
    memory; shared across reloads like the rate-limit counter."""
    auth, limits = loaded.settings.auth, loaded.settings.rate_limits
    if auth is None or auth.failure_limit is None:
        return None
    from gateway.ratelimit.counters import close_limits_storage, limits_storage

    args = ("memory://", "", 0.0) if limits is None else \
        (limits.storage, limits.key_prefix, limits.store_timeout)
    key = ("auth_failures", secret_key(args[0]), *args[1:])
    return lease.acquire(key, lambda: limits_storage(*args), close_limits_storage)


def _egress(mounts: list[Mount], lease: Lease) -> dict[str, EgressClient]:
    """For each surface with egress rules, the client its clients' registered URLs are called
    through, shared across reloads with the same rules (its connections too)."""
    if all(mount.egress is None for mount in mounts):
        return {}
    from gateway.upstream.egress.client import EgressClient

    return {mount.name: lease.acquire(("egress", mount.name, settings_key(rules)),
                                      partial(EgressClient, rules))
            for mount in mounts if (rules := mount.egress) is not None}


def _mount_surfaces(loaded: LoadedConfig, lease: Lease) -> list[Mount]:
    """Every installed surface the config enables, built for this generation."""
    settings = loaded.settings
    pack_model = registry.policy_pack_model()
    packs = tuple(pack_model.model_validate(pack) for pack in loaded.policies.values())
    context = MountContext(settings, registry.capabilities(settings), loaded.modified, packs,
                           loaded.bundle, lease)
    return [mount for surface in registry.surfaces()
            if (mount := surface.mount(context)) is not None]


def _target(name: str, upstream: Upstream, transport: Transport) -> ProxyTarget:
    added = {k.lower(): v for k, v in upstream.add_headers.items()}
    origin = UpstreamOrigin.from_url(upstream.url)
    body_urls = None
    if upstream.rewrite_body_urls:
        body_urls = JsonBodyUrls.of(name, origin, upstream.rewrite_body_max_bytes)
        added.setdefault("accept-encoding", "identity")  # an encoded body cannot be rewritten
    extra = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in added.items())
    redirects = origin if upstream.rewrite_redirects else None
    return ProxyTarget(name, upstream.url, _host_field(upstream.url), upstream.preserve_host,
                       transport, extra, redirects, body_urls)


def _upstream_urls(settings: Settings, owners: PathOwners) -> UpstreamUrls:
    return UpstreamUrls({name: up.url for name, up in settings.upstreams.items()},
                        settings.public_base_url, settings.default_upstream, owners.owns)


def _host_field(url: str) -> bytes:
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host.encode("idna").decode("ascii")
    default_port = 443 if parts.scheme == "https" else 80
    return (host if parts.port in (None, default_port) else f"{host}:{parts.port}").encode()
