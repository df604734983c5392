"""What every AIP endpoint behind the signature gate shares: its admission hooks (the pipeline
reads the body first, so a signature can cover it), the request's `AipAnswer` (the request id
an answer echoes, the key that verified the request) and one error renderer, so a refused
signature gets the spec's minimal `auth_failed` body, a denial its `denied` envelope, any other
failure status `error`, and every answer to a verified request is signed (when
`sign_responses` is set), failures included."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import GatewayError
from gateway.exchange import Exchange
from gateway.model import Principal
from gateway.surfaces.aip import render
from gateway.surfaces.aip.gate import Gate, SignatureRefused, key_principal
from gateway.surfaces.aip.policy import Denial
from gateway.surfaces.aip.request import RetrieveRequest
from gateway.surfaces.aip.signing import VerifiedKey

# Refusals by the pipeline's stages that a RetrieveResponse gives as `denied`, with the
# message the platform reads (None: the error's own, the deciding rule's message).
_DENIALS = {"rate_limited": "Too many requests; retry later.", "policy_violation": None}


@dataclass(slots=True)
class AipAnswer:
    """What AIP's answers to one request need: kept as the exchange's `surface_state`."""

    gate: Gate
    request_id: str  # the body's request_id once readable (answers echo it), else the gateway's
    verified: VerifiedKey | None = None
    # A retrieve body as admission read it (for the rate-limit key), or why it cannot be.
    retrieve: RetrieveRequest | None = None
    problem: GatewayError | None = None


class Denied(GatewayError):
    """A refusal to this caller: AIP's `denied` envelope (429 or 403), not an `error`."""

    def __init__(self, denial: Denial, headers: tuple[tuple[str, str], ...] = ()) -> None:
        status = 429 if denial.reason == "rate_limited" else 403
        super().__init__(status, denial.reason, denial.message, headers=headers)
        self.denial = denial


class SignedAdmission:
    """The pipeline's body-first hooks (`pipeline.BodyFirst`) of an endpoint behind the gate:
    the body, bounded, is read before anyone is authenticated when signing is on; a verified
    key is the caller, else the pipeline authenticates it."""

    def __init__(self, gate: Gate, max_bytes: int) -> None:
        self.gate = gate
        self.max_bytes = max_bytes

    @property
    def reads_body_first(self) -> bool:
        return self.gate.reads_body_first

    def body_limit(self, exchange: Exchange) -> int:
        return min(exchange.settings.proxy.max_body_bytes, self.max_bytes)

    async def verify(self, exchange: Exchange, body: bytes) -> Principal | None:
        verified = await self.gate.verify(exchange.request, body)
        if verified is None:
            return None
        answer_of(exchange, self.gate).verified = verified
        return key_principal(verified)

    def learn_limit_key(self, exchange: Exchange) -> None:
        """Nothing in the body keys the limit here; the answer is made ready all the same."""
        answer_of(exchange, self.gate)


def answer_of(exchange: Exchange, gate: Gate) -> AipAnswer:
    """The request's `AipAnswer`, made on first use."""
    if not isinstance(exchange.surface_state, AipAnswer):
        exchange.surface_state = AipAnswer(gate, exchange.request_id)
    return exchange.surface_state


@dataclass(frozen=True, slots=True)
class AipErrors:
    """Every failure of an AIP path, in AIP's envelopes; signed like any answer to a verified
    request. On the retrieve path, the pipeline's rate limit and policy refusals are denials."""

    retrieve_path: str

    def __call__(self, error: GatewayError, exchange: Exchange) -> Response:
        answer = exchange.surface_state if isinstance(exchange.surface_state, AipAnswer) \
            else None
        request_id = answer.request_id if answer is not None else exchange.request_id
        if isinstance(error, SignatureRefused):
            return render.signing_failure(exchange.request_id, error.failure)
        denial = self._denial(error, exchange)
        if denial is not None:
            response = render.denied(request_id, denial, dict(error.headers))
        else:
            response = render.error(request_id, error)
        if answer is None:
            return response
        return answer.gate.sign(answer.verified, exchange.request.scope, response)

    def _denial(self, error: GatewayError, exchange: Exchange) -> Denial | None:
        if isinstance(error, Denied):
            return error.denial
        if error.code in _DENIALS and exchange.ctx.route == self.retrieve_path:
            return Denial(error.code, _DENIALS[error.code] or error.message)
        return None


def content_type(request: Request) -> str:
    return request.headers.get("content-type", "")
