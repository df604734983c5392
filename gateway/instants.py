"""ISO 8601 instants from text a client, an upstream or a token sent: one parser, so a grant's
time bounds and the record values they are compared with are read the same way."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def instant(value: Any) -> datetime | None:
    """An ISO 8601 timestamp as an aware datetime (naive ones are UTC); None if not one."""
    if not isinstance(value, str) or not value.isascii():
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
