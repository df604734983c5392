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
    """Ready when a config serves, the process is not draining, and every upstream answers."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._checked_at = 0.0
        self._upstreams: dict[str, bool] = {}
        self._lock = asyncio.Lock()

    async def upstreams(self) -> dict[str, bool]:
        async with self._lock:  # one probe round at a time, however often /readyz is polled
            if time.monotonic() - self._checked_at > _PROBE_CACHE_SECONDS:
                transports = self.runtime.current.transports
                results = await asyncio.gather(*(t.probe() for t in transports.values()))
                self._upstreams = dict(zip(transports, results, strict=True))
                self._checked_at = time.monotonic()
            return self._upstreams


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
        upstreams = await readiness.upstreams()
        ready = not runtime.draining and all(upstreams.values())
        body = {
            "status": "ready" if ready else "not_ready",
            "draining": runtime.draining,
            "config_generation": runtime.current.number,
            "upstreams": {name: "up" if ok else "down" for name, ok in upstreams.items()},
        }
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
