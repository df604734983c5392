"""Config models of the AIP `signing` and `events` parts.

Signing secrets never sit in the config body: each key names an environment variable or a file,
read when the config is loaded (and again on every reload, which is how a secret rotates). A
missing variable or file is a config error that names it, never the secret.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    SecretBytes,
    model_validator,
)

from gateway.redis_url import check as check_redis_url
from gateway.strict import Strict
from gateway.surfaces.aip.names import normal_name

MIN_SECRET_BYTES = 16

KeyId = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,128}$")]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
Version = Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)*$")]
KeyPrefix = Annotated[str, Field(pattern=r"^[A-Za-z0-9:_{}.-]{1,64}$")]


def store_url(value: str) -> str:
    """memory://, or any Redis URL `gateway.redis_url` reaches (cluster and sentinel too)."""
    return value if urlsplit(value).scheme == "memory" else check_redis_url(value)


class SigningKey(Strict):
    """Where one key's shared secret is read from; exactly one of the two."""

    secret_env: EnvName | None = Field(None, description="Environment variable holding it.")
    secret_file: str | None = Field(
        None, description="File holding it (one trailing newline is ignored); a relative path "
        "is resolved from the gateway's working directory.",
    )
    platform: Annotated[str, Field(min_length=1, max_length=256)] | None = Field(
        None, description="The platform.id this key speaks for (default: the key id): a "
        "signed retrieve or event declaring another platform is refused.",
    )
    _secret: SecretBytes = PrivateAttr(SecretBytes(b""))

    @model_validator(mode="after")
    def _resolve(self) -> SigningKey:
        if (self.secret_env is None) == (self.secret_file is None):
            raise ValueError("expected exactly one of secret_env or secret_file")
        secret = _read_env(self.secret_env) if self.secret_env else _read_file(self.secret_file)
        if len(secret) < MIN_SECRET_BYTES:
            source = self.secret_env or self.secret_file
            raise ValueError(f"the secret in {source} is shorter than {MIN_SECRET_BYTES} bytes")
        self._secret = SecretBytes(secret)
        return self

    @property
    def secret(self) -> bytes:
        return self._secret.get_secret_value()


def _read_env(name: str) -> bytes:
    value = os.environ.get(name)
    if not value:
        raise ValueError(f"environment variable {name} is not set")
    return value.encode()


def _read_file(name: str | None) -> bytes:
    try:
        data = Path(str(name)).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read secret file {name}: {exc.strerror or exc}") from None
    return data.removesuffix(b"\n").removesuffix(b"\r")


class Signing(Strict):
    """HMAC-SHA256 message signing as AIP's authentication-signing page describes it."""

    enabled: bool = Field(False, description="Verify X-AIP-* signatures on AIP requests.")
    required: bool = Field(
        True, description="Refuse unsigned requests. False lets them on to the other "
        "authentication (e.g. OAuth); a signed request is verified either way.",
    )
    versions: list[Version] = Field(
        ["0.1", "1.0"], min_length=1,
        description="Accepted X-AIP-Version values: the signing page says 1.0, the 0.1 "
        "schemas say 0.1; both name the same v1 HMAC scheme.",
    )
    keys: dict[KeyId, SigningKey] = Field(
        {}, description="X-AIP-Key-Id -> where its shared secret is read from.",
    )
    window: Annotated[float, Field(gt=0, le=3600)] = Field(
        300, description="Accepted distance, in seconds, between X-AIP-Timestamp and now.",
    )
    nonce_store: Annotated[str, AfterValidator(store_url)] = Field(
        "memory://", description="memory:// (one process) or a Redis URL shared by replicas "
        "(redis://, rediss://, redis+cluster://, redis+sentinel://).",
    )
    nonce_key_prefix: KeyPrefix = Field(
        "aigw:aip-nonce",
        description="Prefix of the nonce store's Redis keys.",
    )
    nonce_store_timeout: Annotated[float, Field(gt=0, le=10)] = Field(
        0.5, description="Socket timeout for the Redis nonce store, in seconds.",
    )
    max_memory_nonces: Annotated[int, Field(ge=100, le=10_000_000)] = Field(
        100_000, description="Bound of the in-memory store; when full, requests are refused.",
    )
    sign_responses: bool = Field(
        False, description="Sign responses with the key that signed the request.",
    )

    @model_validator(mode="after")
    def _keys_when_enabled(self) -> Signing:
        if self.enabled and not self.keys:
            raise ValueError("expected at least one key when signing is enabled")
        return self

    def secret(self, key_id: str) -> bytes | None:
        key = self.keys.get(key_id)
        return key.secret if key is not None else None

    def platform(self, key_id: str) -> str:
        """The platform a signature by this key proves, in its normal form (names.py)."""
        key = self.keys.get(key_id)
        return normal_name(key.platform if key is not None and key.platform else key_id)


class Events(Strict):
    """Where access and citation events are kept: a Redis stream, else a JSON-lines file."""

    redis_url: Annotated[str, AfterValidator(check_redis_url)] | None = Field(
        None, description="Keep events in a Redis stream (any Redis URL: one server, cluster "
        "or sentinel); without it, in `file`.",
    )
    stream: Annotated[str, Field(min_length=1, max_length=256)] = Field(
        "aigw:aip:events",
        description="Redis stream events are added to (XADD), with `redis_url`.",
    )
    max_len: Annotated[int, Field(ge=1000)] = Field(
        1_000_000, description="Approximate stream length kept (XADD MAXLEN ~).",
    )
    store_timeout: Annotated[float, Field(gt=0, le=10)] = Field(
        0.5,
        description="Longest wait to store an event, in seconds; past it the retrieve or post "
        "fails closed (503).",
    )
    file: str = Field(
        "aip-events.jsonl", description="JSON-lines file, relative to the working directory.",
    )
    max_file_bytes: Annotated[int, Field(ge=1024)] = Field(
        64 * 1024 * 1024, description="The file is rotated before it grows past this size "
        "(file.1 is the newest rotated file, file.2 the one before, ...).",
    )
    keep_files: Annotated[int, Field(ge=1, le=1000)] = Field(
        5, description="Rotated files kept beside the current one; the oldest beyond this "
        "number is deleted when the file rotates.",
    )
    queue_size: Annotated[int, Field(ge=1, le=100_000)] = Field(
        1000, description="Events waiting for the file writer; a full queue makes callers wait.",
    )
