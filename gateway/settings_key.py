"""The key a shared resource is kept under, from the settings it is built from.

A resource outlives a reload when its key is unchanged (gateway.lifetimes), so the key must
change whenever any setting it is built from does, secrets included. A JSON dump masks every
`SecretStr` as `**********`, which would keep a store on its old password after a reload that
rotates it; here a secret counts by its value, and the whole is hashed so that no secret is
kept in the clear in a key.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from pydantic import BaseModel, SecretBytes, SecretStr


def settings_key(model: BaseModel, exclude: set[str] | None = None) -> str:
    """A digest of every field of `model` (but `exclude`), secrets by their value."""
    data = model.model_dump(exclude=exclude)  # python mode: secrets stay Secret* objects
    dumped = orjson.dumps(data, default=_plain,
                          option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(dumped).hexdigest()


def secret_key(value: str) -> str:
    """A digest of a setting that may carry a credential (a URL with a password)."""
    return hashlib.sha256(value.encode()).hexdigest()


def _plain(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, SecretBytes):
        return value.get_secret_value().hex()
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return str(value)
