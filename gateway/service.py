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
    name: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        description="The organization's name.",
    )
    url: Url | None = Field(None, description="The organization's web site.")
    contact: str | None = Field(None, description="A contact address for the service.")


class Service(Strict):
    name: Annotated[str, Field(min_length=1, max_length=100)] = Field(
        description="The service's name, as /.well-known/ai says it.",
    )
    description: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        description="One sentence, for machines: what the service does."
    )
    category: list[Category] = Field(
        [],
        description="Categories of the service, in the discovery document's vocabulary.",
    )
    language: list[Annotated[str, Field(pattern=r"^[a-z]{2}(-[A-Z]{2})?$")]] = Field(
        ["en"],
        description="Languages the service answers in (ISO 639-1, optionally with a region: en, "
        "en-GB).",
    )
    organization: Organization | None = Field(None, description="Who runs the service.")
    docs: Url | None = Field(
        None,
        description="Documentation for agents' developers, including how to get credentials "
        "(/.well-known/ai's auth.docs).",
    )
    status: Url | None = Field(None, description="Status page URL (/.well-known/ai's meta.status).")
    changelog: Url | None = Field(
        None,
        description="Changelog URL (/.well-known/ai's meta.changelog).",
    )
    last_updated: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?$")] \
        | None = Field(None, description="Date the API last changed; default: the config's date.")
