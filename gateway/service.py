"""The `service` section: who runs this API, shared by every discovery document."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gateway.auth.config import Url
from gateway.strict import Strict

Category = Literal[
    "productivity", "ecommerce", "finance", "news", "weather", "maps", "search", "data",
    "communication", "calendar", "storage", "media", "health", "education", "travel", "food",
    "government", "developer",
]


class Organization(Strict):
    name: Annotated[str, Field(min_length=1, max_length=200)]
    url: Url | None = None
    contact: str | None = None


class Service(Strict):
    name: Annotated[str, Field(min_length=1, max_length=100)]
    description: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        description="One sentence, for machines: what the service does."
    )
    category: list[Category] = []
    language: list[Annotated[str, Field(pattern=r"^[a-z]{2}(-[A-Z]{2})?$")]] = ["en"]
    organization: Organization | None = None
    docs: Url | None = None
    status: Url | None = None
    changelog: Url | None = None
    last_updated: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?$")] \
        | None = Field(None, description="Date the API last changed; default: the config's date.")
