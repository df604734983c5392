"""The admin listener: /metrics, /healthz, /readyz and the /policy access report, apart from
public traffic."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time

from prometheus_client import REGISTRY, CollectorRegistry, multiprocess
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from gateway.loader import policies_folder
from gateway.policy.report import facts, markdown_report
from gateway.policy.report_html import html_report
from gateway.runtime import Runtime

_PROBE_CACHE_SECONDS = 1.0


class Readiness:
    """Ready when a config serves, the process is not draining, every upstream answers, and
    every storage engine a surface requires for readiness is reachable (the others are
    reported, not required: a pod may stay in rotation without them)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._checked_at = 0.0
        self._upstreams: dict[str, bool] = {}
        self._storage: dict[str, bool] = {}
        self._required: set[str] = set()
        self._lock = asyncio.Lock()

    async def probe(self) -> tuple[dict[str, bool], dict[str, bool]]:
        """Upstreams and storage engines: name -> up."""
        async with self._lock:  # one probe round at a time, however often /readyz is polled
            if time.monotonic() - self._checked_at > _PROBE_CACHE_SECONDS:
                transports = self.runtime.current.transports
                storage = {name: kept for mount in self.runtime.current.mounts
                           for name, kept in mount.storage.items()}
                results = await asyncio.gather(*(t.probe() for t in transports.values()))
                self._upstreams = dict(zip(transports, results, strict=True))
                reached = await asyncio.gather(*(kept.check() for kept in storage.values()))
                self._storage = dict(zip(storage, reached, strict=True))
                self._required = {name for name, kept in storage.items()
                                  if kept.required_for_ready}
                self._checked_at = time.monotonic()
            return self._upstreams, self._storage

    def required(self, storage: dict[str, bool]) -> bool:
        return all(up for name, up in storage.items() if name in self._required)


def _registry() -> CollectorRegistry:
    """This process's metrics, or under `--workers` every worker's, summed from their files."""
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return registry


def create_admin_app(runtime: Runtime) -> Starlette:
    readiness = Readiness(runtime)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        upstreams, storage = await readiness.probe()
        ready = not runtime.draining and all(upstreams.values()) and readiness.required(storage)
        body: dict[str, object] = {
            "status": "ready" if ready else "not_ready",
            "draining": runtime.draining,
            "config_generation": runtime.current.number,
            "upstreams": {name: "up" if ok else "down" for name, ok in upstreams.items()},
        }
        if storage:
            body["storage"] = {name: "up" if ok else "down" for name, ok in storage.items()}
        return JSONResponse(body, status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        # OpenMetrics (with exemplars) when the scraper asks for it, else the text format.
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(_registry()), headers={"content-type": content_type})

    async def policy(request: Request) -> Response:
        """Who can see what under the serving policies (?format=markdown for Markdown)."""
        generation = runtime.current
        bundle, settings = generation.loaded.bundle, generation.settings
        if bundle is None:
            return JSONResponse({"error": "no_policies"}, status_code=404)
        headers = {"cache-control": "no-store", "x-aigw-policy-revision": bundle.revision}
        about = facts(generation.loaded, policies_folder(generation.loaded))
        # Every cell is a decision: hundreds of them, in a worker thread (the loop serves
        # traffic), by a copy of the bundle whose memo no request shares.
        own = dataclasses.replace(bundle)
        if request.query_params.get("format") == "markdown":
            text = await asyncio.to_thread(markdown_report, own, settings, about)
            return PlainTextResponse(text, headers=headers,
                                     media_type="text/markdown; charset=utf-8")
        page = await asyncio.to_thread(html_report, own, settings, about)
        return HTMLResponse(page, headers=headers)

    return Starlette(routes=[
        Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics),
        Route("/policy", policy),
    ])
