"""Config of an embedder: which provider (`provider`, the discriminator), its own settings, and
the bounds every call to it lives under. What it advertises (`spec`: model, dimensions,
distance, normalization) is known from the config alone, without loading a model or calling a
server, so discovery documents never wait on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, SecretStr

from gateway.embeddings.base import Distance
from gateway.embeddings.hashing import DIM, SPACE_ID
from gateway.strict import Strict

Seconds = Annotated[float, Field(gt=0, le=600)]


@dataclass(frozen=True, slots=True)
class EmbedderSpec:
    """What a space of this embedder's vectors is, as a discovery document says it."""

    model: str
    dimensions: int
    provider: str | None
    distance: Distance = "cosine"
    normalized: bool = True


class Bounds(Strict):
    """What one call may ask and how long it may take (`gateway.embeddings.running`)."""

    max_texts: Annotated[int, Field(ge=1, le=4096)] = Field(
        256, description="Most texts one call embeds; a caller with more sends them in turns.")
    max_chars: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        8192, description="Most characters of one text. A longer one is refused, never cut "
        "silently: a caller that cuts it says so.")
    queue_timeout: Seconds = Field(
        5, description="Longest a call waits for an embedding thread; then it is refused as "
        "overloaded, so waiting work never piles up past this.")
    timeout: Seconds = Field(
        60, description="Longest a call takes once a thread has it (a call not done within "
        "queue_timeout + timeout is abandoned).")


class WordLlamaSettings(Bounds):
    """WordLlama's `l2_supercat`, whose weights ship inside the `wordllama` wheel: runs on the
    CPU, offline, loaded once per process on first use (~0.5 s; ~60 MB of memory)."""

    provider: Literal["wordllama"] = Field(
        description="`wordllama`: WordLlama's l2_supercat, whose weights ship in the wordllama "
        "wheel (offline, on the CPU).",
    )
    dimensions: Literal[64, 128, 256] = Field(
        256, description="The first 64 or 128 of the model's 256 dimensions are an embedding "
        "of their own (Matryoshka); fewer are faster to compare, a little less precise.")

    @property
    def spec(self) -> EmbedderSpec:
        return EmbedderSpec("wordllama-l2_supercat", self.dimensions, "wordllama")


def _server_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected an absolute http:// or https:// URL")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError("expected a URL without credentials, query or fragment")
    return value.rstrip("/")


class OpenAICompatibleSettings(Bounds):
    """A server speaking OpenAI's embeddings API (`POST /v1/embeddings`), as vLLM, TEI, Ollama
    and hosted services do. Its vectors are scaled to unit length here, whatever it sends."""

    provider: Literal["openai-compatible"] = Field(
        description="`openai-compatible`: a server speaking OpenAI's embeddings API (POST "
        "{base_url}/v1/embeddings: vLLM, TEI, Ollama...).",
    )
    base_url: Annotated[str, AfterValidator(_server_url)] = Field(
        description="The server's root: requests go to {base_url}/v1/embeddings.")
    model: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        description="Sent as `model`, and advertised.")
    dimensions: Annotated[int, Field(ge=1, le=8192)] = Field(
        description="The length of the model's vectors; an answer of another length is an "
        "error.")
    api_key: SecretStr | None = Field(
        None, description="Sent as `Authorization: Bearer`. Write `${ENV_VAR}` here rather "
        "than the key itself.")
    batch_size: Annotated[int, Field(ge=1, le=2048)] = Field(
        64, description="Most texts sent in one request.")
    connect_timeout: Seconds = Field(
        5,
        description="Longest wait to connect to the embeddings server, in seconds.",
    )
    read_timeout: Seconds = Field(
        30, description="Longest wait for the server to answer one request.")

    @property
    def spec(self) -> EmbedderSpec:
        return EmbedderSpec(self.model, self.dimensions, None)


class HashSettings(Bounds):
    """The feature-hashing test double (`gateway.embeddings.hashing`): no model of meaning."""

    provider: Literal["hash"] = Field(
        description="`hash`: the feature-hashing test double (vectors without meaning, for "
        "tests).",
    )

    @property
    def spec(self) -> EmbedderSpec:
        return EmbedderSpec(SPACE_ID, DIM, "aigw")


EmbedderSettings = Annotated[
    WordLlamaSettings | OpenAICompatibleSettings | HashSettings,
    Field(discriminator="provider"),
]
