"""The JWKS cache under concurrency: requests arriving while the first fetch is under way."""

from __future__ import annotations

import asyncio

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.auth.config import Issuer
from gateway.auth.jwks import JwksCache


async def test_requests_during_the_first_jwks_fetch_wait_for_it_instead_of_failing():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    document = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}
    fetches = []

    async def slow_jwks(request: httpx.Request) -> httpx.Response:
        fetches.append(request.url)
        await asyncio.sleep(0.2)  # a new config generation's first fetch, under load
        return httpx.Response(200, json=document)

    issuer = Issuer.model_validate({"issuer": "https://idp.test", "audiences": ["a"],
                                    "jwks_uri": "https://idp.test/jwks"})
    async with httpx.AsyncClient(transport=httpx.MockTransport(slow_jwks)) as http:
        cache = JwksCache(issuer, http)
        keys = await asyncio.gather(*(cache.key("k1") for _ in range(20)))
    assert all(found is not None for found in keys)
    assert len(fetches) <= 2
