"""What every AIP endpoint behind the signature gate shares: a refused signature is answered
with the spec's minimal `auth_failed` body, and any other answer to a verified request is
signed (when `sign_responses` is set)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.bodies import read_capped
from gateway.context import RequestContext
from gateway.surfaces.aip import render
from gateway.surfaces.aip.gate import Gate, SignatureRefused
from gateway.surfaces.aip.signing import VerifiedKey


class SignedEndpoint:
    gate: Gate

    async def handle(self, request: Request) -> Response:
        ctx, generation = request.scope["aigw"]
        verified = None
        try:
            response, verified = await self._handle(request, ctx, generation)
        except SignatureRefused as refused:
            ctx.error_code = refused.failure.code
            return render.signing_failure(ctx.request_id, refused.failure)
        return self.gate.sign(verified, request.scope, response)

    async def _admitted_body(self, request: Request, ctx: RequestContext,
                             generation: Any) -> tuple[bytes, VerifiedKey | None]:
        """The body and the key that signed it, once the caller is admitted. With signing on,
        the body is read first (the signature covers it); otherwise after authentication."""
        limit = self._body_limit(generation.settings.proxy.max_body_bytes)
        raw = await read_capped(request, limit) if self.gate.reads_body_first else None
        verified = await self.gate.admit(request, raw or b"", generation.pipeline, ctx)
        if raw is None:
            raw = await read_capped(request, limit)
        return raw, verified

    def _body_limit(self, proxy_limit: int) -> int:
        """The largest body this endpoint reads (an endpoint may hold its bodies tighter)."""
        return proxy_limit

    async def _handle(self, request: Request, ctx: RequestContext,
                      generation: Any) -> tuple[Response, VerifiedKey | None]:
        """The answer and the key that verified the request (None: not signed)."""
        raise NotImplementedError
