"""The demo issuer's RSA signing key: a private JWK file, created on first use with mode 0600."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from authlib.deprecate import AuthlibDeprecationWarning

from gateway.generated_secrets import create_once
from gateway.private_files import tighten

with warnings.catch_warnings():  # authlib.jose is deprecated in favour of joserfc, still works
    warnings.simplefilter("ignore", AuthlibDeprecationWarning)
    from authlib.jose import JsonWebKey, Key


def load_or_create_key(path: Path) -> Key:
    """The private key stored at `path`; a new RSA-2048 key is stored there first if none is.

    The `kid` is the key's RFC 7638 thumbprint. Two processes racing to create the file end up
    with the same key: the file appears atomically and an existing one is never replaced.
    """
    if not path.exists():
        _create(path)
    tighten(path)  # as an older version may have left it
    data = json.loads(path.read_text(encoding="utf-8"))
    key = JsonWebKey.import_key(data)
    if key.kty != "RSA" or key.public_only:
        raise ValueError(f"{path}: expected a private RSA JWK")
    thumbprint = key.thumbprint()
    return key if key.kid == thumbprint else JsonWebKey.import_key({**data, "kid": thumbprint})


def public_jwks(key: Key) -> dict[str, Any]:
    """The JWK Set publishing the public half of `key` for RS256 signatures."""
    public = key.as_dict(is_private=False, kid=key.thumbprint(), alg="RS256", use="sig")
    return {"keys": [public]}


def _create(path: Path) -> None:
    key = JsonWebKey.generate_key("RSA", 2048, is_private=True)
    create_once(path, json.dumps(key.as_dict(is_private=True, kid=key.thumbprint())))
