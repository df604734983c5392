"""aigw in front of a second third-party API, end to end over real HTTP: client -> `aigw run`
on examples/datasette/aigw.yaml as it is -> Datasette 0.65.5 (tests/datasette.py) serving this
machine's Debian packages (examples/datasette/build_db.py).

The oracle is Datasette itself, asked directly: the gateway must give back what its search
finds, in its order, each row once, by Datasette's own keyset tokens. What the gateway sent
Datasette is read from Datasette's access log (uvicorn's, in the harness's logs directory).
Every answer of the gateway is checked, as it arrives, for Datasette's address: Datasette puts
it in each page's `next_url`, and no surface may pass it on.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest
from datasette import DATABASE, EXAMPLE, tilde_encode
from jsonschema import Draft202012Validator
from processes import ROOT, Process, free_port, wait_for_http

AIDRE_JSON = {"content-type": "application/aidre+json", "accept": "application/aidre+json"}
OWNER = {"x-api-key": "example-owner-key"}
APP = {"x-api-key": "example-app-key"}
APP_MATCHABLE = {"name", "summary"}  # the app's grant, less what is not a lexical field
SYNTHETIC_IDS = {"synthetic/with-slash", "synthetic-100%-percent", "synthetic with spaces",
                 "synthétique-ünïcode-包", "synthetic?query#fragment"}
Records = dict[str, dict[str, Any]]
Requests = list[dict[str, list[str]]]  # what Datasette received: each request's query


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def packages(datasette_db: tuple[Path, dict[str, list[dict[str, Any]]]]) -> Records:
    """The packages Datasette serves, by id."""
    return {row["id"]: row for row in datasette_db[1]["packages"]}


class DatasetteLog:
    """Datasette's access log: the requests it received since a mark."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size

    def since(self, mark: int) -> Requests:
        """The query of each request for the packages table since `mark`, in order."""
        with self.path.open("rb") as log:
            log.seek(mark)
            text = log.read().decode("utf-8", "replace")
        targets = re.findall(rf'"GET (/{DATABASE}/packages\.json\S*) HTTP/1\.1"', text)
        return [parse_qs(urlsplit(target).query, keep_blank_values=True) for target in targets]


@pytest.fixture(scope="module")
def datasette_log(datasette: str, logs_dir: Path) -> DatasetteLog:
    """The log tests/datasette.py has Datasette write (uvicorn logs each request to stdout)."""
    path = logs_dir / f"datasette-{urlsplit(datasette).port}.out"
    if not path.exists():
        pytest.skip(f"Datasette's access log is not at {path}")
    return DatasetteLog(path)


@pytest.fixture(scope="module")
def gateway(datasette: str, logs_dir: Path) -> Iterator[httpx.Client]:
    """`aigw run` on examples/datasette/aigw.yaml as it is, in front of `datasette`: a client
    of it that fails any answer carrying Datasette's address (host:port)."""
    port, admin_port = free_port(), free_port()
    env = {"AIGW_PORT": str(port), "AIGW_ADMIN_PORT": str(admin_port), "DATASETTE_URL": datasette,
           # every test of the module shares the gateway: no 429 between them
           "EXAMPLE_RATE_LIMIT": "100000/minute", "EXAMPLE_BURST_LIMIT": "10000/second"}
    process = Process([sys.executable, "-m", "gateway", "run", "--config",
                       str(EXAMPLE / "aigw.yaml")], logs_dir, f"gateway-datasette-{port}", env=env)
    try:
        wait_for_http(f"http://127.0.0.1:{admin_port}/healthz", process=process.popen)
    except (RuntimeError, TimeoutError):
        process.stop()
        raise
    origin = urlsplit(datasette).netloc

    def without_datasettes_address(response: httpx.Response) -> None:
        response.read()
        where = f"{response.request.method} {response.request.url}"
        assert origin not in response.text, where
        assert origin not in str(response.headers), where

    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30,
                      event_hooks={"response": [without_datasettes_address]}) as client:
        yield client
    process.stop()


# --------------------------------------------------------------------------- helpers


def datasette_search(datasette: str, query: str) -> list[str]:
    """The ids Datasette's `_search` finds, in its order: its pages followed by `next`."""
    ids: list[str] = []
    token = ""
    while token is not None:
        response = httpx.get(f"{datasette}/{DATABASE}/packages.json", timeout=10, params={
            "_search": query, "_size": 100, "_next": token, "_shape": "objects"})
        assert response.status_code == 200, response.text
        page = response.json()
        ids += [row["id"] for row in page["rows"]]
        token = page["next"]
    return ids


def search_pages(gateway: httpx.Client, query: str, top_k: int,
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """Every hit of an AIDRE search, page after page by `next_cursor`; and the cursors."""
    hits: list[dict[str, Any]] = []
    cursors: list[str] = []
    body: dict[str, Any] = {"query": query, "collection": "packages", "top_k": top_k}
    for _ in range(200):
        response = gateway.post("/search", json=body, headers=AIDRE_JSON)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["results"]) <= top_k
        hits += page["results"]
        cursor = page["meta"].get("next_cursor")
        if cursor is None:
            return hits, cursors
        assert len(page["results"]) == top_k  # a page before the last is full
        cursors.append(cursor)
        body["cursor"] = cursor
    raise AssertionError("paging did not end: the same page again and again?")


def chunk(gateway: httpx.Client, identifier: str) -> httpx.Response:
    return gateway.get(f"/chunks/packages:{quote(identifier, safe='')}")


def sealed(cursors: list[str], packages: Records) -> list[str]:
    """The Datasette tokens (an id tilde-encoded: any token it may give for this table) that
    show in a cursor, as it is or base64url-decoded. Tokens under 6 characters are left out:
    they could show in the cursor's 60-odd random bytes by chance."""
    tokens = {token for token in map(tilde_encode, packages) if len(token) >= 6}
    shown = []
    for cursor in cursors:
        decoded = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        shown += [token for token in tokens if token in cursor or token.encode() in decoded]
    return shown


def all_records(gateway: httpx.Client, headers: dict[str, str],
                ) -> tuple[list[dict[str, Any]], list[str]]:
    """Every record of the packages stream, page after page; and the cursors."""
    records: list[dict[str, Any]] = []
    cursors: list[str] = []
    params: dict[str, Any] = {"limit": 100}
    for _ in range(100):
        response = gateway.get("/v1/streams/packages/records", params=params, headers=headers)
        assert response.status_code == 200, response.text
        page = response.json()
        records += page["data"]
        if not page["has_more"]:
            return records, cursors
        cursors.append(page["next_cursor"])
        params["cursor"] = page["next_cursor"]
    raise AssertionError("paging did not end")


def pdpp_search(gateway: httpx.Client, q: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    response = gateway.get("/v1/search", params={"q": q, "streams": "packages", "limit": 100},
                           headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["has_more"] is False
    return response.json()["data"]


def words(text: str | None) -> set[str]:
    """The tokens SQLite's unicode61 tokenizer makes of ASCII text: alphanumeric runs, folded."""
    return set(re.findall(r"[^\W_]+", (text or "").lower()))


def flat(text: str) -> str:
    """`text` with every run of white space one space: AIP joins a chunk's sentences so."""
    return " ".join(text.split())


def retrieve(gateway: httpx.Client, query: str) -> dict[str, Any]:
    body = {"aip_version": "0.1", "request_id": f"req_ds_{query}",
            "timestamp": "2026-11-23T14:30:00Z", "platform": {"id": "assistant"},
            "intent": {"domain": "technology.software"},
            "context": {"language": "en-US", "placement": "chat"},
            "runtime": {"session_id": "s1", "turn_index": 0, "query_text": query}}
    response = gateway.post("/pag/retrieve", json=body)
    assert response.status_code == 200, response.text
    return response.json()


# --------------------------------------------------------------------------- the config


def test_the_example_config_validates_strictly():
    result = subprocess.run([sys.executable, "-m", "gateway", "validate", "--strict",
                             str(EXAMPLE / "aigw.yaml")], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- AIDRE


@pytest.mark.parametrize(("query", "top_k"), [("compiler", 4), ("library", 10),
                                              ("Synthetic", 2)])
def test_aidre_pages_through_every_hit_of_datasettes_search_in_its_order(
        gateway: httpx.Client, datasette: str, packages: Records, query: str, top_k: int):
    expected = datasette_search(datasette, query)
    assert len(expected) > 2 * top_k  # at least three pages
    hits, cursors = search_pages(gateway, query, top_k)
    assert [hit["id"] for hit in hits] == [f"packages:{key}" for key in expected]
    assert sealed(cursors, packages) == []
    for hit in hits:
        row = packages[hit["id"].removeprefix("packages:")]
        assert (hit.get("text") or "") == (row["description"] or "")
        assert hit["source"]["title"] == row["summary"]
        assert hit["metadata"]["version"] == row["version"]


def test_aidre_pages_by_datasettes_tokens_not_from_the_top(
        gateway: httpx.Client, packages: Records, datasette_log: DatasetteLog):
    top_k = 10
    mark = datasette_log.mark()
    cursors = search_pages(gateway, "library", top_k)[1]
    assert len(cursors) > 20
    sent = datasette_log.since(mark)
    assert all(request["_search"] == ["library"] for request in sent)
    from_the_top = [request for request in sent if request["_next"] == [""]]
    assert len(from_the_top) <= 2
    assert max(int(request["_size"][0]) for request in sent) <= 2 * (top_k + 1)
    assert sealed(cursors, packages) == []  # the tokens it now holds, sealed


def test_every_hit_is_fetchable_as_a_chunk_by_its_percent_encoded_id(
        gateway: httpx.Client, packages: Records):
    """Each hard id (the synthetic ones, `g++`, `libstdc++6`) is found, then read back."""
    hits = search_pages(gateway, "compiler", 50)[0] + search_pages(gateway, "Synthetic", 50)[0]
    found = {hit["id"].removeprefix("packages:") for hit in hits}
    assert SYNTHETIC_IDS | {"g++", "libstdc++6"} <= found
    for identifier in found:
        response = chunk(gateway, identifier)
        assert response.status_code == 200, (identifier, response.text)
        assert response.json()["id"] == f"packages:{identifier}"
        assert response.json()["text"] == (packages[identifier]["description"] or "")
    assert chunk(gateway, "no-such-package").status_code == 404


# --------------------------------------------------------------------------- AIP


def test_aip_retrieve_quotes_datasettes_hits_in_its_search_order(
        gateway: httpx.Client, datasette: str, packages: Records, datasette_log: DatasetteLog):
    mark = datasette_log.mark()
    answer = retrieve(gateway, "data")
    assert datasette_log.since(mark) == [{"_search": ["data"], "_size": ["5"], "_next": [""],
                                          "_shape": ["objects"]}]  # one page was enough
    assert answer["status"] == "ok", answer
    chunks = answer["content"]["chunks"]
    rows = list(dict.fromkeys(piece["id"].rsplit("#", 1)[0] for piece in chunks))
    assert len(rows) >= 3
    first = datasette_search(datasette, "data")[:answer["limits_applied"]["max_chunks"]]
    assert [row for row in first if row in rows] == rows  # Datasette's order, its first hits
    for piece in chunks:  # a part of the description, never all of it (spaces as cut)
        description = flat(packages[piece["id"].rsplit("#", 1)[0]]["description"])
        assert flat(piece["text"]) in description and flat(piece["text"]) != description


# --------------------------------------------------------------------------- PDPP


@pytest.fixture(scope="module")
def described_only(packages: Records) -> tuple[str, set[str], set[str]]:
    """A word, the packages with it in name or summary, and those with it in description
    only: the app may match the first, never the second."""
    word = "compiler"
    titled = {key for key, row in packages.items()
              if word in words(row["name"]) | words(row["summary"])}
    described = {key for key, row in packages.items()
                 if word in words(row["description"])} - titled
    assert len(titled) >= 5 and len(described) >= 5
    return word, titled, described


def test_pdpp_search_matches_only_the_fields_a_grant_names(
        gateway: httpx.Client, described_only: tuple[str, set[str], set[str]]):
    word, titled, described = described_only
    owner = {hit["record_key"]: hit for hit in pdpp_search(gateway, word, OWNER)}
    app = {hit["record_key"]: hit for hit in pdpp_search(gateway, word, APP)}
    assert set(owner) == titled | described
    assert all("description" in owner[key]["matched_fields"] for key in described)
    assert set(app) == titled
    for hit in app.values():
        assert set(hit["matched_fields"]) <= APP_MATCHABLE, hit
        assert hit.get("snippet", {}).get("field", "summary") in APP_MATCHABLE, hit


def test_pdpp_search_sends_datasette_only_the_granted_columns(
        gateway: httpx.Client, datasette_log: DatasetteLog,
        described_only: tuple[str, set[str], set[str]]):
    """Datasette is asked with an FTS5 column filter naming only the fields the caller may
    match, and is the only thing asked: no records list is read for a search."""
    word = described_only[0]
    for headers, columns in ((APP, "name summary"), (OWNER, "name summary description")):
        mark = datasette_log.mark()
        pdpp_search(gateway, word, headers)
        sent = datasette_log.since(mark)
        assert len(sent) == 1, sent
        assert sent[0]["_search"] == [f'{{{columns}}} : ("{word}")']
        assert sent[0]["_searchmode"] == ["raw"]


def test_pdpp_lists_every_package_once_each_valid_against_the_streams_schema(
        gateway: httpx.Client, datasette: str, packages: Records, datasette_log: DatasetteLog):
    schema = gateway.get("/v1/streams/packages", headers=OWNER).json()["schema"]
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    mark = datasette_log.mark()
    records, cursors = all_records(gateway, OWNER)
    assert sorted(record["id"] for record in records) == sorted(packages)  # each once
    assert [record["id"] for record in records if not validator.is_valid(record["data"])] == []
    for record in records:
        row = packages[record["id"]]
        assert record["data"] == {field: row[field] for field in record["data"]}
    assert sealed(cursors, packages) == []
    # read by Datasette's tokens (page_size 500), unless this gateway had read it before
    sent = [request["_next"] for request in datasette_log.since(mark)]
    first = httpx.get(f"{datasette}/{DATABASE}/packages.json", params={"_size": 500}).json()
    assert sent in ([], [[""], [first["next"]]])


def test_pdpp_a_grant_hides_description_in_records(gateway: httpx.Client):
    owner = gateway.get("/v1/streams/packages/records", params={"limit": 20}, headers=OWNER)
    app = gateway.get("/v1/streams/packages/records", params={"limit": 20}, headers=APP)
    assert any("description" in record["data"] for record in owner.json()["data"])
    assert all(set(record["data"]) <= {"id", "name", "version", "summary", "updated_at"}
               for record in app.json()["data"])


# --------------------------------------------------------------------------- upstream URLs


def test_no_answer_carries_datasettes_address_though_datasettes_own_do(
        gateway: httpx.Client, datasette: str):
    """The `gateway` client fails any answer with Datasette's host:port (every test above);
    Datasette puts it in its pages' `next_url`, for each of the reads the surfaces make."""
    origin = urlsplit(datasette).netloc
    reads: list[dict[str, Any]] = [{"_search": "compiler", "_size": 4},
                                   {"_size": 500, "_nocount": 1}]
    for params in reads:
        page = httpx.get(f"{datasette}/{DATABASE}/packages.json",
                         params={**params, "_shape": "objects"}).json()
        assert page["next_url"].startswith(f"http://{origin}/")
    answers = [
        gateway.get("/.well-known/ai-discovery"),
        gateway.get("/.well-known/aip.json"),
        gateway.post("/search", json={"query": "compiler", "top_k": 3}, headers=AIDRE_JSON),
        chunk(gateway, "g++"),
        gateway.get("/v1/streams/packages/records", params={"limit": 5}, headers=OWNER),
        gateway.get("/v1/streams/packages/records/g%2B%2B", headers=OWNER),
        gateway.get("/v1/search", params={"q": "compiler"}, headers=APP),
    ]
    assert [answer.status_code for answer in answers] == [200] * len(answers)
    assert retrieve(gateway, "compiler")["status"] == "ok"
