"""Who may call AIP's POST endpoints: a verified X-AIP-* signature, else the pipeline's auth.

With signing enabled and `required`, every request must be signed; with `required: false` a
signed request is verified all the same and an unsigned one goes on to the OAuth / API-key
authentication of the `auth` section. A verified request's principal is its signing key.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from gateway.asgi import Scope
from gateway.errors import GatewayError
from gateway.model import Principal, TokenKind
from gateway.surfaces.aip.nonces import NonceStore
from gateway.surfaces.aip.signing import SigningFailure, VerifiedKey, Verifier, is_signed
from gateway.surfaces.aip.signing_config import Signing


class SignatureRefused(GatewayError):
    """A signature the gate refuses, answered with the signing page's minimal body."""

    def __init__(self, failure: SigningFailure) -> None:
        super().__init__(failure.status, failure.code, failure.message)
        self.failure = failure


def check_platform(verified: VerifiedKey | None, platform: str) -> None:
    """A signed request speaks for its key's platform only (`platform` in its normal form);
    an unsigned one is held to what it declares elsewhere (rate limits, issued request ids)."""
    if verified is not None and verified.platform != platform:
        raise GatewayError(403, "platform_mismatch",
                           "platform.id is not the platform of the signing key.")


def key_principal(verified: VerifiedKey) -> Principal:
    """Who a verified request speaks as: its signing key, a client."""
    return Principal(subject=verified.key_id, client_id=verified.key_id, kind=TokenKind.CLIENT)


def request_target(scope: Scope) -> str:
    """The path and query as sent, which the canonical string covers."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else scope["path"]
    query = scope.get("query_string", b"")
    return f"{path}?{query.decode('latin-1')}" if query else path


class Gate:
    def __init__(self, signing: Signing | None, nonces: NonceStore | None) -> None:
        self._signing: Signing | None = None
        self._verifier: Verifier | None = None
        if signing is not None and signing.enabled and nonces is not None:
            self._signing = signing
            self._verifier = Verifier(signing, nonces)

    @property
    def reads_body_first(self) -> bool:
        """Signing covers the body, so it is read before anyone is authenticated."""
        return self._verifier is not None

    async def verify(self, request: Request, body: bytes) -> VerifiedKey | None:
        """The key that signed the request; None when no signature is checked here (signing
        off, or an unsigned request where signatures are not required), so the pipeline
        authenticates the caller instead. Raises `SignatureRefused` for a failed check."""
        signing, verifier = self._signing, self._verifier
        if signing is None or verifier is None or not (
                signing.required or is_signed(request.headers)):
            return None
        outcome = await verifier.verify(request.method, request_target(request.scope),
                                        request.headers, body)
        if isinstance(outcome, SigningFailure):
            raise SignatureRefused(outcome)
        return outcome

    def sign(self, verified: VerifiedKey | None, scope: Scope,
             response: Response) -> Response:
        """Sign the response with the request's key when `sign_responses` is on."""
        if verified is not None and self._verifier is not None:
            response.headers.update(self._verifier.response_headers(
                verified, response.status_code, request_target(scope), bytes(response.body)))
        return response
