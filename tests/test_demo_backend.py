"""Behaviour of the demo help-centre backend that the gateway demo relies on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from demo_vectors import embed
from starlette.applications import Starlette

from gateway.demo.backend import create_app
from gateway.demo.data import generate
from gateway.embeddings.hashing import HashEmbedder
from gateway.embeddings.hashing import embed as hash_embed

DIM = 256

API = "/api/v1"


@pytest.fixture(scope="module")
def app() -> Starlette:
    return create_app()


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://backend") as client:
        yield client


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["code"] == code
    assert body["message"]


async def test_health_reports_article_count(client: httpx.AsyncClient) -> None:
    response = await client.get(f"{API}/health")
    assert response.json() == {"status": "ok", "articles": 300}


async def test_keyword_search_ranks_refund_articles_first(client: httpx.AsyncClient) -> None:
    response = await client.get(f"{API}/articles/search", params={"q": "refund", "limit": 5})
    body = response.json()
    assert body["query"] == "refund"
    assert body["total"] >= 5
    assert [item["category"] for item in body["items"]] == ["returns"] * 5
    scores = [item["score"] for item in body["items"]]
    assert scores == sorted(scores, reverse=True)
    first = body["items"][0]
    keys = {"id", "title", "snippet", "category", "tags", "url", "updated_at", "score"}
    assert set(first) == keys
    assert "refund" in first["snippet"].lower()


async def test_keyword_search_filters_and_pages(client: httpx.AsyncClient) -> None:
    params = {"q": "email", "category": "account", "limit": 3}
    first = (await client.get(f"{API}/articles/search", params=params)).json()
    second = (await client.get(f"{API}/articles/search", params={**params, "offset": 3})).json()
    assert {item["category"] for item in first["items"] + second["items"]} == {"account"}
    assert not {i["id"] for i in first["items"]} & {i["id"] for i in second["items"]}
    capped = (await client.get(f"{API}/articles/search", params={"q": "data", "limit": 500})).json()
    assert capped["total"] > 100
    assert len(capped["items"]) == 100


async def test_vector_search_finds_password_articles_and_leaks_embeddings(
    client: httpx.AsyncClient,
) -> None:
    payload = {"vector": embed("reset my password"), "k": 5}
    response = await client.post(f"{API}/articles/vector-search", json=payload)
    items = response.json()["items"]
    assert len(items) == 5
    for item in items:
        article = (await client.get(f"{API}/articles/{item['id']}")).json()
        assert article["category"] == "login"
        assert len(item["embedding"]) == DIM
    assert set(items[0]) == {"id", "title", "snippet", "url", "updated_at", "score", "embedding"}


async def test_embed_endpoint_matches_library(client: httpx.AsyncClient) -> None:
    response = await client.post(f"{API}/embed", json={"text": "track my parcel"})
    assert response.json() == {
        "model": "wordllama-l2_supercat",
        "dimensions": DIM,
        "embedding": embed("track my parcel"),
    }


async def test_another_embedder_makes_the_backend_s_vectors() -> None:
    app = create_app(n_articles=30, embedder=HashEmbedder())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://backend") as client:
        response = await client.post(f"{API}/embed", json={"text": "track my parcel"})
        assert response.json()["model"] == "demo-hash-256"
        payload = {"vector": hash_embed("track my parcel"), "k": 1}
        [hit] = (await client.post(f"{API}/articles/vector-search", json=payload)).json()["items"]
    article = app.state.centre.by_id[hit["id"]]
    assert hit["embedding"] == hash_embed(f"{article['title']}\n{article['body']}")


async def test_article_read_and_missing_article(client: httpx.AsyncClient) -> None:
    article = (await client.get(f"{API}/articles/art-0001")).json()
    assert article["id"] == "art-0001"
    assert article["url"].startswith("https://help.example.com/articles/")
    assert article["visibility"] in {"public", "internal"}
    assert article["content_hash"].startswith("sha256:") and len(article["content_hash"]) == 71
    assert_error(await client.get(f"{API}/articles/art-9999"), 404, "NOT_FOUND")


async def test_article_listing_filters_by_update_time(client: httpx.AsyncClient) -> None:
    since = "2025-01-01T00:00:00Z"
    params = {"per_page": 100, "updated_since": since}
    body = (await client.get(f"{API}/articles", params=params)).json()
    assert 0 < body["total"] < 300
    assert all(item["updated_at"] >= since for item in body["items"])
    # Summaries say who an article is for, as the article itself does.
    assert {item["visibility"] for item in body["items"]} == {"public", "internal"}
    assert_error(
        await client.get(f"{API}/articles", params={"updated_since": "yesterday"}), 400, "BAD_PARAM"
    )


async def test_message_cursor_walks_every_message_once(client: httpx.AsyncClient) -> None:
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 4, **({"cursor": cursor} if cursor else {})}
        page = (await client.get(f"{API}/users/u-003/messages", params=params)).json()
        seen += [message["id"] for message in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    everything = (await client.get(f"{API}/users/u-003/messages", params={"limit": 100})).json()
    assert seen == [message["id"] for message in everything["items"]]
    assert len(seen) == len(set(seen)) >= 10
    one = (await client.get(f"{API}/users/u-003/messages/{seen[0]}")).json()
    assert one == everything["items"][0]


async def test_unknown_users_and_messages_are_404(client: httpx.AsyncClient) -> None:
    assert_error(await client.get(f"{API}/users/u-999/messages"), 404, "NOT_FOUND")
    assert_error(await client.get(f"{API}/users/u-001/messages/msg-999-001"), 404, "NOT_FOUND")
    bad_cursor = await client.get(f"{API}/users/u-001/messages", params={"cursor": "nope"})
    assert_error(bad_cursor, 400, "BAD_CURSOR")


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        ("GET", "/articles/search", {}, 400, "BAD_QUERY"),
        ("GET", "/articles/search", {"params": {"q": "   "}}, 400, "BAD_QUERY"),
        ("GET", "/articles/search", {"params": {"q": "x", "limit": "ten"}}, 400, "BAD_PARAM"),
        ("POST", "/articles/vector-search", {"json": {"vector": [0.1] * 3}}, 422, "BAD_VECTOR"),
        ("POST", "/articles/vector-search", {"json": {"vector": ["a"] * DIM}}, 422, "BAD_VECTOR"),
        ("POST", "/articles/vector-search", {"content": b"{not json"}, 400, "BAD_JSON"),
        ("POST", "/embed", {"json": {"text": ""}}, 400, "BAD_TEXT"),
        ("POST", "/tasks/summarize", {"json": {}}, 400, "BAD_TEXT"),
        ("POST", "/tasks/summarize", {"json": {"article_id": "art-9999"}}, 404, "NOT_FOUND"),
        ("POST", "/tasks/classify", {"json": ["text"]}, 400, "BAD_JSON"),
        ("GET", "/tasks/classify", {}, 405, "METHOD_NOT_ALLOWED"),
        ("GET", "/no/such/route", {}, 404, "NOT_FOUND"),
    ],
)
async def test_bad_requests_get_json_errors(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    code: str,
) -> None:
    assert_error(await client.request(method, f"{API}{path}", **kwargs), status, code)


async def test_same_seed_gives_same_data() -> None:
    assert generate(seed=7) == generate(seed=7)
    assert generate(seed=7).articles != generate(seed=8).articles
    responses = []
    for _ in range(2):
        transport = httpx.ASGITransport(app=create_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://backend") as client:
            article = await client.get(f"{API}/articles/art-0042")
            messages = await client.get(f"{API}/users/u-007/messages")
            responses.append((article.content, messages.content))
    assert responses[0] == responses[1]


async def test_summarize_article_and_text(client: httpx.AsyncClient) -> None:
    article = (await client.get(f"{API}/articles/art-0001")).json()
    response = await client.post(f"{API}/tasks/summarize", json={"article_id": "art-0001"})
    body = response.json()
    assert body["source_id"] == "art-0001"
    assert 0 < len(body["summary"]) < len(article["body"])
    text = "Refunds take five days. Cats are nice. Your refund goes to your original card."
    body = (await client.post(f"{API}/tasks/summarize", json={"text": text})).json()
    assert body == {
        "summary": "Refunds take five days. Your refund goes to your original card.",
        "source_id": None,
    }


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("I was charged twice on my credit card this month", "billing"),
        ("I forgot my password and cannot log in", "login"),
        ("The app crashes every time I open it on my iPhone", "mobile"),
        ("Please delete all personal data you hold about me", "privacy"),
    ],
)
async def test_classify_picks_plausible_category(
    client: httpx.AsyncClient, text: str, category: str
) -> None:
    body = (await client.post(f"{API}/tasks/classify", json={"text": text})).json()
    assert body["category"] == category
    assert 0 < body["confidence"] <= 1
    assert len(body["neighbours"]) == 7
