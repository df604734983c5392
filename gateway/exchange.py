"""The exchange: one request as the pipeline, a surface endpoint and its error renderer see it.

The app builds one for every request to a path with an owner (a public document or a surface's
routes). gateway.dispatch admits the caller as the route declares (a body-first route's body
is read, and kept here, before the caller is), then hands the exchange to the matching
`SurfaceRoute` endpoint (which may pass it to `Pipeline.retrieve` or `Pipeline.listing`) and,
on failure, to the owner's error renderer: all of them read the same request, context,
principal and config generation. A surface that learns something its error answers need (a
request id to echo, the key that verified a signature) keeps it in `surface_state`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request

from gateway.context import RequestContext
from gateway.model import Principal

if TYPE_CHECKING:
    from gateway.inner import Serve
    from gateway.pipeline import Pipeline
    from gateway.runtime import Generation
    from gateway.settings import Settings


@dataclass(slots=True, eq=False)
class Exchange:
    request: Request
    ctx: RequestContext
    generation: Generation  # the config this request started with, whatever reloads follow
    surface_state: object | None = None  # the owning surface's own notes for its answers
    body: bytes | None = None  # read by admission, for routes whose signature covers it
    serve_inner: Serve | None = None  # how the app serves this caller's inner requests

    @property
    def principal(self) -> Principal:
        return self.ctx.principal

    @property
    def request_id(self) -> str:
        return self.ctx.request_id

    @property
    def settings(self) -> Settings:
        return self.generation.settings

    @property
    def pipeline(self) -> Pipeline:
        return self.generation.pipeline
