"""Semantic search on the demo finds articles by meaning: for each query below, no article of
the demo shares a word with it (as written, or as the backend's lexical search stems it), so
AIDRE's text search finds nothing, while its vector search over the backend's WordLlama vectors
returns articles of the topic the query is about."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from aidre_config import SPACE
from demo_vectors import embed
from inprocess import InProcessGateway
from processes import Gateway
from test_aidre import search
from test_aidre_records import ARTICLES_KEY, demo_aidre_config

from gateway.demo.data import generate
from gateway.embeddings.hashing import tokenize

PAIRS = [  # (query, the category of the articles it means): one for each of the demo's topics
    ("overcharged", "billing"),
    ("forgotten passcode", "login"),
    ("courier", "shipping"),
    ("unwanted purchase", "returns"),
    ("programmatic", "api"),
    ("confidentiality", "privacy"),
    ("teammates", "account"),
    ("smartphone", "mobile"),
]
TOP_K = 3


def words(text: str) -> set[str]:
    """The words of `text` as written (lowercased) and as the lexical search stems them."""
    return set(re.findall(r"\w+", text.lower())) | set(tokenize(text))


ARTICLES = generate(n_articles=300, seed=7).articles
ARTICLE_WORDS = [words(f"{a['title']}\n{a['body']}") for a in ARTICLES]
CATEGORY = {f"articles:{a['id']}": a["category"] for a in ARTICLES}


@pytest.fixture(scope="module")
def demo(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("meaning")
    started = InProcessGateway(demo_aidre_config(backend, workdir), workdir)
    yield started
    started.stop()


@pytest.mark.parametrize(("query", "category"), PAIRS)
def test_vector_search_finds_by_meaning_what_text_search_cannot(demo: Gateway, query: str,
                                                                category: str):
    assert not any(words(query) & article for article in ARTICLE_WORDS)
    body = {"collection": "articles", "top_k": TOP_K}
    lexical = search(demo, {**body, "query": query}, key=ARTICLES_KEY)
    assert lexical.status_code == 200 and lexical.json()["results"] == []
    semantic = search(demo, {**body, "query_vector": embed(query),
                             "embedding_space": SPACE["id"]}, key=ARTICLES_KEY)
    found = [CATEGORY[r["id"]] for r in semantic.json()["results"]]
    assert found == [category] * TOP_K, semantic.json()


def test_the_advertised_space_is_the_one_the_backend_embeds_in(demo: Gateway, backend: str):
    [space] = httpx.get(demo.url + "/.well-known/ai-discovery").json()["embedding_spaces"]
    answer = httpx.post(backend + "/api/v1/embed", json={"text": "courier"}).json()
    assert (space["model"], space["dimensions"]) == (answer["model"], answer["dimensions"])
    assert answer["embedding"] == pytest.approx(embed("courier"))


@pytest.fixture(scope="module")
def pdpp_demo(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    from pdpp_config import config, demo_pdpp

    workdir = tmp_path_factory.mktemp("pdpp-meaning")
    started = InProcessGateway(config(backend, demo_pdpp("wordllama")), workdir)
    yield started
    started.stop()


# PDPP's demo stream embeds article titles only (a few words each, which say less than a whole
# article): the pairs whose topic a title names.
TITLE_PAIRS = [pair for pair in PAIRS if pair[1] in {"billing", "login", "shipping", "privacy",
                                                      "mobile"}]


@pytest.mark.parametrize(("query", "category"), TITLE_PAIRS)
def test_pdpp_semantic_search_finds_titles_by_meaning(pdpp_demo: Gateway, query: str,
                                                      category: str):
    """The demo's PDPP `articles` stream, its titles embedded by WordLlama in the gateway's
    own index: lexical search finds nothing, semantic search titles of the topic."""
    from pdpp_config import OWNER_KEY

    headers = {"X-API-Key": OWNER_KEY}
    params = {"q": query, "streams[]": "articles", "limit": TOP_K}
    lexical = httpx.get(pdpp_demo.url + "/v1/search", params=params, headers=headers, timeout=30)
    assert lexical.status_code == 200 and lexical.json()["data"] == []
    semantic = httpx.get(pdpp_demo.url + "/v1/search/semantic", params=params, headers=headers,
                         timeout=30)
    assert semantic.status_code == 200, semantic.text
    found = [f"articles:{hit['record_key']}" for hit in semantic.json()["data"]]
    assert found and all(CATEGORY[key] == category for key in found), (query, found)
