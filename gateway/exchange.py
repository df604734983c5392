"""The exchange: one request as the pipeline and a surface endpoint see it.

The app builds one for every request a surface owns and hands it to the endpoint, to the
pipeline's admission and to the owner's error renderer, so all three read the same request,
context, principal and config generation. A surface that learns something its error answers
need (PDPP's negotiated version, AIP's echoed request id and verifying key) keeps it in
`surface_state`; nothing else about a request travels in the ASGI scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import Request

from gateway.context import RequestContext
from gateway.model import Principal

if TYPE_CHECKING:
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
