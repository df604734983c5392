"""What every AIP endpoint behind the signature gate shares: the request's `AipAnswer` (the
request id an answer echoes, the key that verified the request) and one error renderer, so a
refused signature gets the spec's minimal `auth_failed` body, a denial its `denied` envelope,
any other failure status `error`, and every answer to a verified request is signed (when
`sign_responses` is set), failures included."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from gateway.bodies import read_capped
from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.surfaces.aip import render
from gateway.surfaces.aip.gate import Gate, SignatureRefused
from gateway.surfaces.aip.policy import Denial
from gateway.surfaces.aip.signing import VerifiedKey


@dataclass(slots=True)
class AipAnswer:
    """What AIP's answers to one request need: kept as the exchange's `surface_state`."""

    gate: Gate
    request_id: str  # the body's request_id once readable (answers echo it), else the gateway's
    verified: VerifiedKey | None = None


class Denied(GatewayError):
    """A refusal to this caller: AIP's `denied` envelope (429 or 403), not an `error`."""

    def __init__(self, denial: Denial, headers: tuple[tuple[str, str], ...] = ()) -> None:
        status = 429 if denial.reason == "rate_limited" else 403
        super().__init__(status, denial.reason, denial.message, headers=headers)
        self.denial = denial


def render_error(error: GatewayError, exchange: Exchange) -> Response:
    """Every failure of an AIP path, in AIP's envelopes; signed like any answer to a verified
    request."""
    answer = exchange.surface_state if isinstance(exchange.surface_state, AipAnswer) else None
    request_id = answer.request_id if answer is not None else exchange.request_id
    if isinstance(error, SignatureRefused):
        return render.signing_failure(exchange.request_id, error.failure)
    if isinstance(error, Denied):
        response = render.denied(request_id, error.denial, dict(error.headers))
    else:
        response = render.error(request_id, error)
    if answer is None:
        return response
    return answer.gate.sign(answer.verified, exchange.request.scope, response)


class SignedEndpoint:
    gate: Gate

    async def handle(self, exchange: Exchange) -> Response:
        answer = AipAnswer(self.gate, exchange.request_id)
        exchange.surface_state = answer
        response = await self._handle(exchange, answer)
        return self.gate.sign(answer.verified, exchange.request.scope, response)

    async def _admitted_body(self, exchange: Exchange, answer: AipAnswer) -> bytes:
        """The body, once the caller is admitted (`answer.verified`: the key that signed it).
        With signing on, the body is read first (the signature covers it); otherwise after
        authentication."""
        request = exchange.request
        limit = self._body_limit(exchange.settings.proxy.max_body_bytes)
        raw = await read_capped(request, limit) if self.gate.reads_body_first else None
        answer.verified = await self.gate.admit(request, raw or b"", exchange.pipeline,
                                                exchange.ctx)
        if raw is None:
            raw = await read_capped(request, limit)
        return raw

    def _body_limit(self, proxy_limit: int) -> int:
        """The largest body this endpoint reads (an endpoint may hold its bodies tighter)."""
        return proxy_limit

    async def _handle(self, exchange: Exchange, answer: AipAnswer) -> Response:
        """The answer to an admitted request; failures raise."""
        raise NotImplementedError


def content_type(request: Request) -> str:
    return request.headers.get("content-type", "")
