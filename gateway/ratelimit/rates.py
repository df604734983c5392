"""The rate type of the config: a `limits` rate string such as 100/minute."""

from __future__ import annotations

from typing import Annotated

import limits
from pydantic import AfterValidator


def _rate(value: str) -> str:
    try:
        limits.parse(value)
    except ValueError:
        raise ValueError("expected a rate such as 100/minute or 10 per second") from None
    return value


Rate = Annotated[str, AfterValidator(_rate)]
