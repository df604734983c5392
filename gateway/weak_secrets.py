"""One warning rule for every secret a loaded config holds, whichever section declares it.

A secret is marked once, by its type: a pydantic `SecretStr` or `SecretBytes` held by any model
of the settings (a field, or a private attribute where a section keeps a secret it read from an
environment variable or a file), plus the password in any URL and the credential-named fields
of a header map marked `CREDENTIAL_HEADERS`. Surface sections registered by plug-ins are fields
of the settings model, so theirs are found the same way. A secret warns when it looks like a
placeholder or is too short or repetitive to be random; its value is never shown.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, SecretBytes, SecretStr

Problem = tuple[str, str]  # (dotted path in the file, message)

# Words of the values people leave in place ("change-me", the demo's own, "example-secret").
# Hex digits cannot spell any of them, so a generated hex secret never matches by chance.
_PLACEHOLDER = re.compile(
    r"change-?me|changeit|example|placeholder|demo|secret|password|passwd", re.IGNORECASE)
MIN_BITS = 80  # estimated; 16 random bytes in hex or base64 estimate above it
_CREDENTIAL_NAME = re.compile(r"auth|key|token|secret|password|credential|cookie", re.IGNORECASE)


class _CredentialHeaders:
    """Marks a header map (name -> value) whose credential-named values are secrets."""


CREDENTIAL_HEADERS = _CredentialHeaders()


def weak_secret_warnings(settings: BaseModel) -> list[Problem]:
    found = []
    for path, what, value in held_secrets(settings):
        reason = weakness(value)
        if reason is not None:
            found.append((path, f"expected {what} to be random ({MIN_BITS} bits or more, e.g. "
                          f"`openssl rand -hex 32`), not {reason}: whoever guesses it holds "
                          "what it protects (the value is not shown)"))
    return found


def weakness(value: str) -> str | None:
    """Why `value` is no random secret, or None when it may be one."""
    if _PLACEHOLDER.search(value):
        return "a placeholder"
    if estimated_bits(value) < MIN_BITS:
        return "a short or repetitive value"
    return None


def estimated_bits(value: str) -> float:
    """Length times the Shannon entropy of the value's own characters: a random string scores
    about what it holds, a short, repetitive or wordy one less."""
    counts = Counter(value)
    size = len(value)
    return -size * sum(n / size * math.log2(n / size) for n in counts.values())


def held_secrets(node: Any, path: str = "") -> Iterator[tuple[str, str, str]]:
    """(dotted path, what it is, value) for every secret under `node`."""
    if isinstance(node, SecretStr | SecretBytes):
        yield path, "the secret", _text(node.get_secret_value())
    elif isinstance(node, BaseModel):
        yield from _model_secrets(node, path)
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from held_secrets(value, _join(path, str(key)))
    elif isinstance(node, list | tuple):
        for index, value in enumerate(node):
            yield from held_secrets(value, f"{path}[{index}]")
    elif isinstance(node, str):
        password = _url_password(node)
        if password:
            yield path, "the password in this URL", password


def _model_secrets(model: BaseModel, path: str) -> Iterator[tuple[str, str, str]]:
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        where = _join(path, field.alias or name)
        if CREDENTIAL_HEADERS in field.metadata and isinstance(value, dict):
            yield from _header_secrets(value, where)
        else:
            yield from held_secrets(value, where)
    for value in (model.__pydantic_private__ or {}).values():
        if isinstance(value, SecretStr | SecretBytes):  # read from elsewhere when loaded
            yield path, "the secret it reads", _text(value.get_secret_value())


def _header_secrets(headers: dict[str, str], path: str) -> Iterator[tuple[str, str, str]]:
    for name, value in headers.items():
        if _CREDENTIAL_NAME.search(name):
            scheme, _, credential = value.strip().partition(" ")
            yield (_join(path, name), f"the credential in {name}",
                   credential.strip() if credential and scheme.isalpha() else value)


def _url_password(value: str) -> str | None:
    if "://" not in value or "@" not in value:
        return None
    try:
        password = urlsplit(value).password
    except ValueError:
        return None
    return unquote(password) if password else None


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
