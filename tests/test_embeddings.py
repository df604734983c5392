"""The embedding seam (gateway/embeddings): WordLlama from its wheel, offline; a fake
OpenAI-compatible server over loopback, and malformed answers in memory; the hash test double;
the bounded runner off the event loop; and the config that chooses a provider."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from processes import ROOT, Process, free_port, wait_for_http
from pydantic import TypeAdapter, ValidationError

from gateway.embeddings import EmbeddingError, embedder_for
from gateway.embeddings.base import unit
from gateway.embeddings.config import (
    Bounds,
    EmbedderSettings,
    HashSettings,
    OpenAICompatibleSettings,
    WordLlamaSettings,
)
from gateway.embeddings.hashing import DIM, HashEmbedder, cosine, embed
from gateway.embeddings.openai_compatible import OpenAICompatibleEmbedder
from gateway.embeddings.running import (
    EmbeddingTimeout,
    InputTooLarge,
    Overloaded,
    clip,
    embed_off_loop,
)
from gateway.embeddings.wordllama import CHARS_PER_GROUP
from gateway.surfaces.aidre.config import EmbeddingSpace

SETTINGS: TypeAdapter[Any] = TypeAdapter(EmbedderSettings)
KEY = "test-embeddings-key-5b0c2f9a"


def settings(**values: Any) -> Any:
    return SETTINGS.validate_python(values)


def assert_unit(vector: Sequence[float]) -> None:
    assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-5)


# --------------------------------------------------------------------------- the hash double


def test_the_hash_double_ranks_shared_words_above_none() -> None:
    query = embed("How long until my refund arrives?")
    related = embed("Refunds are issued to your card after we receive the returned item.")
    unrelated = embed("Push notifications must be enabled in your Android phone settings.")
    assert len(query) == DIM
    assert cosine(query, related) > cosine(query, unrelated)
    assert cosine(query, query) == pytest.approx(1.0)


def test_the_hash_double_is_stable_and_gives_zeros_for_wordless_text() -> None:
    assert embed("Reset your password") == embed("Reset your password")
    assert embed("the and of") == [0.0] * DIM
    double = embedder_for(settings(provider="hash"))
    assert isinstance(double, HashEmbedder)
    assert double.embed(["Reset your password", "the"]) == [embed("Reset your password"),
                                                             [0.0] * DIM]


# --------------------------------------------------------------------------- WordLlama


@pytest.fixture(scope="module")
def wordllama() -> Any:
    return embedder_for(settings(provider="wordllama"))


def test_wordllama_loads_from_its_wheel_with_no_network_and_no_cache(tmp_path: Path) -> None:
    """In a process where every connection fails and the home (its download cache) is empty;
    and importing it leaves the process's logging as it was (it calls basicConfig)."""
    script = "\n".join([
        "import logging, socket",
        "def refuse(*args, **kwargs): raise OSError('no network in this test')",
        "socket.socket.connect = refuse",
        "socket.create_connection = refuse",
        "from gateway.embeddings.config import WordLlamaSettings",
        "from gateway.embeddings.wordllama import WordLlamaEmbedder",
        "[vector] = WordLlamaEmbedder(WordLlamaSettings(provider='wordllama')).embed(['refund'])",
        "print(len(vector), len(logging.getLogger().handlers))",
    ])
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"HOME": str(tmp_path), "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "256 0"
    assert not any(tmp_path.iterdir())  # nothing was downloaded or cached


def test_wordllama_gives_unit_vectors_deterministically(wordllama: Any) -> None:
    assert (wordllama.model, wordllama.dimensions) == ("wordllama-l2_supercat", 256)
    assert (wordllama.distance, wordllama.normalized) == ("cosine", True)
    first, second, empty = wordllama.embed(["Reset your password", "Reset your password", ""])
    assert len(first) == 256 and first == second
    assert_unit(first)
    assert empty == [0.0] * 256
    assert wordllama.embed([]) == []


def test_wordllama_in_a_batch_gives_what_it_gives_one_text_at_a_time(wordllama: Any) -> None:
    """Texts are grouped by length and padded; neither changes a text's vector or its place."""
    texts = ["refund", "x " * (CHARS_PER_GROUP // 2 + 10), "Where is my parcel?",
             "The mobile app crashes on launch. " * 40, "", "invoice " * 3]
    together = wordllama.embed(texts)
    for text, vector in zip(texts, together, strict=True):
        assert vector == pytest.approx(wordllama.embed([text])[0], abs=1e-5)


def test_wordllama_relates_texts_that_share_no_word(wordllama: Any) -> None:
    query, related, unrelated = wordllama.embed([
        "smartphone",
        "Download the mobile app from the App Store on iPhone or Google Play on Android.",
        "Invoices are emailed to the billing contact on the first day of each billing cycle."])
    assert cosine(query, related) > cosine(query, unrelated) + 0.1


def test_fewer_wordllama_dimensions_are_the_first_ones(wordllama: Any) -> None:
    small = embedder_for(settings(provider="wordllama", dimensions=64))
    assert small.dimensions == 64
    text = "Printing a prepaid return label"
    assert small.embed([text])[0] == pytest.approx(unit(wordllama.embed([text])[0][:64]),
                                                   abs=1e-5)


# --------------------------------------------------------------------------- OpenAI-compatible


@pytest.fixture(scope="module")
def fake(logs_dir: Path) -> Iterator[str]:
    port = free_port()
    process = Process([sys.executable, str(ROOT / "tests" / "fake_embeddings.py"), str(port),
                       KEY], logs_dir, f"fake-embeddings-{port}")
    url = f"http://127.0.0.1:{port}"
    wait_for_http(url + "/requests", process=process.popen)
    yield url
    process.stop()


def remote(base_url: str, **values: Any) -> OpenAICompatibleEmbedder:
    return OpenAICompatibleEmbedder(settings(**{
        "provider": "openai-compatible", "base_url": base_url, "model": "fake-256",
        "dimensions": 256, "api_key": KEY, **values}))


def test_a_server_embeds_in_batches_and_its_vectors_come_back_in_order_unit_length(fake: str):
    texts = ["refund", "parcel tracking", "password reset", "invoice", "crash on launch"]
    before = len(httpx.get(fake + "/requests").json())
    vectors = remote(fake, batch_size=2).embed(texts)
    assert vectors == [pytest.approx(embed(text)) for text in texts]  # the server sends 3x
    asked = httpx.get(fake + "/requests").json()[before:]
    assert [r["inputs"] for r in asked] == [texts[0:2], texts[2:4], texts[4:]]
    assert {r["model"] for r in asked} == {"fake-256"}


def test_a_refused_key_is_an_error_naming_the_status_not_the_key(fake: str):
    with pytest.raises(EmbeddingError, match="answered HTTP 401") as raised:
        remote(fake, api_key="another-key-9d8e7f6a5b4c").embed(["refund"])
    assert "another-key" not in str(raised.value)


def test_a_server_error_is_reported_without_its_body(fake: str):
    with pytest.raises(EmbeddingError, match="answered HTTP 500") as raised:
        remote(fake, model="broken").embed(["my secret question"])
    assert "secret" not in str(raised.value)


def test_too_few_embeddings_are_an_error(fake: str):
    with pytest.raises(EmbeddingError, match="answered 1 embeddings for 2 texts"):
        remote(fake, model="one-short").embed(["refund", "parcel"])


def test_a_slow_or_missing_server_is_an_error(fake: str):
    with pytest.raises(EmbeddingError, match=r"could not be reached \(ReadTimeout\)"):
        remote(fake, model="slow", read_timeout=0.3).embed(["refund"])
    with pytest.raises(EmbeddingError, match=r"could not be reached \(ConnectError\)"):
        remote(f"http://127.0.0.1:{free_port()}").embed(["refund"])


def _item(index: int, vector: Any) -> dict[str, Any]:
    return {"object": "embedding", "index": index, "embedding": vector}


@pytest.mark.parametrize(("answer", "message"), [
    (b"<html>busy</html>", "not JSON"),
    (orjson.dumps({"data": "nothing"}), "no `data` list"),
    (orjson.dumps({"data": [_item(0, [0.1] * 256)]}), "answered 1 embeddings for 2 texts"),
    (orjson.dumps({"data": [_item(0, [0.1] * 256), _item(1, [0.1] * 255)]}),
     "has 255 numbers, not the 256"),
    (orjson.dumps({"data": [_item(0, [0.1] * 256), _item(1, "AAAA")]}), "base64"),
    (orjson.dumps({"data": [_item(0, [0.1] * 256), _item(1, [True] * 256)]}), "finite"),
    (orjson.dumps({"data": [_item(0, [0.1] * 256), _item(0, [0.1] * 256)]}), "`index`"),
    (orjson.dumps({"data": [_item(0, [0.1] * 256), _item(2, [0.1] * 256)]}), "`index`"),
    (orjson.dumps({"data": [_item(0, [0.1] * 256), [0.1] * 256]}), "not an object"),
    (b'{"data": [{"index": 0, "embedding": [' + b",".join([b"1e999"] * 256) + b"]}, "
     b'{"index": 1, "embedding": [' + b",".join([b"0.1"] * 256) + b"]}]}", "not JSON|finite"),
    (b'{"data": [], "padding": "' + b"x" * 200_000 + b'"}', "larger than"),
])
def test_an_answer_that_is_not_one_embedding_per_text_is_refused(answer: bytes, message: str):
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=answer))
    embedder = OpenAICompatibleEmbedder(settings(
        provider="openai-compatible", base_url="http://embeddings.test", model="m",
        dimensions=256), transport=transport)
    with pytest.raises(EmbeddingError, match=message):
        embedder.embed(["refund", "parcel"])


def test_the_request_is_the_openai_one_with_the_key_as_bearer():
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        texts = orjson.loads(request.content)["input"]
        return httpx.Response(200, json={"data": [_item(i, [1.0, 0.0]) for i in range(len(texts))]})

    embedder = OpenAICompatibleEmbedder(settings(
        provider="openai-compatible", base_url="https://models.test/serving/", model="bge-small",
        dimensions=2, api_key=KEY), transport=httpx.MockTransport(answer))
    assert embedder.embed(["a", "b"]) == [[1.0, 0.0], [1.0, 0.0]]
    [request] = seen
    assert (request.method, str(request.url)) == ("POST", "https://models.test/serving/v1/embeddings")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert orjson.loads(request.content) == {"model": "bge-small", "input": ["a", "b"]}


# --------------------------------------------------------------------------- off the loop


class Recording:
    """An embedder that says which thread ran it, and can be held until released."""

    model, dimensions, distance, normalized = "recording", 2, "cosine", True

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.release = threading.Event()
        self.release.set()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread().name)
        self.release.wait(10)
        return [[1.0, 0.0] for _ in texts]


async def test_embedding_runs_in_an_embedding_thread():
    recording = Recording()
    assert await embed_off_loop(recording, ["a", "b"], Bounds()) == [[1.0, 0.0]] * 2
    assert recording.threads[0].startswith("aigw-embed")
    assert await embed_off_loop(recording, [], Bounds()) == []


async def test_inputs_past_the_bounds_are_refused_before_any_embedding():
    recording = Recording()
    bounds = Bounds(max_texts=2, max_chars=10)
    with pytest.raises(InputTooLarge, match="3 texts"):
        await embed_off_loop(recording, ["a", "b", "c"], bounds)
    with pytest.raises(InputTooLarge, match="11 characters"):
        await embed_off_loop(recording, ["a", "x" * 11], bounds)
    assert recording.threads == []
    assert clip("x" * 11, bounds) == ("x" * 10, True)
    assert clip("short", bounds) == ("short", False)


async def test_work_no_thread_takes_in_time_is_refused_as_overloaded():
    held = Recording()
    held.release.clear()
    busy = [asyncio.ensure_future(embed_off_loop(held, ["a"], Bounds())) for _ in range(2)]
    try:
        await asyncio.sleep(0.1)  # both embedding threads hold one
        with pytest.raises(Overloaded):
            await embed_off_loop(Recording(), ["b"], Bounds(queue_timeout=0.05))
    finally:
        held.release.set()
    assert await asyncio.gather(*busy) == [[[1.0, 0.0]]] * 2


async def test_embedding_past_its_timeout_is_abandoned():
    held = Recording()
    held.release.clear()
    try:
        with pytest.raises(EmbeddingTimeout):
            await embed_off_loop(held, ["a"], Bounds(queue_timeout=0.05, timeout=0.1))
    finally:
        held.release.set()


# --------------------------------------------------------------------------- config


def test_the_provider_chooses_the_settings_model():
    assert isinstance(settings(provider="wordllama"), WordLlamaSettings)
    assert isinstance(settings(provider="hash"), HashSettings)
    remote_settings = settings(provider="openai-compatible", base_url="http://127.0.0.1:8000/",
                               model="bge-small-en", dimensions=384)
    assert isinstance(remote_settings, OpenAICompatibleSettings)
    assert remote_settings.base_url == "http://127.0.0.1:8000"
    assert embedder_for(remote_settings) is embedder_for(remote_settings.model_copy())


@pytest.mark.parametrize(("values", "message"), [
    ({"provider": "sentence-transformers"}, "does not match any of the expected tags"),
    ({"provider": "wordllama", "dimensions": 100}, "64, 128 or 256"),
    ({"provider": "wordllama", "weights": "l3"}, "Extra inputs are not permitted"),
    ({"provider": "openai-compatible", "base_url": "http://x.test", "model": "m"},
     "dimensions"),
    ({"provider": "openai-compatible", "base_url": "ftp://x.test", "model": "m",
      "dimensions": 8}, "http:// or https://"),
    ({"provider": "openai-compatible", "base_url": "https://user:pw@x.test", "model": "m",
      "dimensions": 8}, "without credentials"),
])
def test_a_bad_embedder_config_is_refused(values: dict[str, Any], message: str):
    with pytest.raises(ValidationError, match=message):
        settings(**values)


def test_a_space_with_an_embedder_advertises_what_the_embedder_gives():
    space = EmbeddingSpace.model_validate({
        "id": "small", "embedder": {"provider": "wordllama", "dimensions": 128},
        "revision": "2"})
    assert space.advertised() == {
        "id": "small", "dimensions": 128, "distance": "cosine", "normalized": True,
        "provider": "wordllama", "model": "wordllama-l2_supercat", "revision": "2"}
    served = EmbeddingSpace.model_validate({
        "id": "served", "provider": "BAAI", "embedder": {
            "provider": "openai-compatible", "base_url": "http://127.0.0.1:8000",
            "model": "bge-small-en-v1.5", "dimensions": 384, "api_key": KEY}})
    assert served.advertised() == {
        "id": "served", "dimensions": 384, "distance": "cosine", "normalized": True,
        "provider": "BAAI", "model": "bge-small-en-v1.5"}
    assert KEY not in str(served.advertised())


@pytest.mark.parametrize(("values", "message"), [
    ({"dimensions": 512}, "dimensions 512 is not the embedder's \\(256\\)"),
    ({"distance": "dot"}, "distance 'dot' is not the embedder's"),
    ({"model": "other"}, "model 'other' is not the embedder's"),
])
def test_a_space_cannot_say_otherwise_than_its_embedder(values: dict[str, Any], message: str):
    with pytest.raises(ValidationError, match=message):
        EmbeddingSpace.model_validate({"id": "s", "embedder": {"provider": "wordllama"},
                                       **values})
    same = EmbeddingSpace.model_validate({"id": "s", "embedder": {"provider": "wordllama"},
                                          "dimensions": 256, "distance": "cosine"})
    assert same.dimensions == 256


def test_a_space_without_an_embedder_says_its_dimensions_and_distance():
    with pytest.raises(ValidationError, match="dimensions"):
        EmbeddingSpace.model_validate({"id": "s", "distance": "cosine"})
    space = EmbeddingSpace.model_validate({"id": "s", "dimensions": 3, "distance": "dot"})
    assert space.advertised() == {"id": "s", "dimensions": 3, "distance": "dot"}
