"""aigw in front of a third-party API, end to end over real HTTP: client -> `aigw run` on
examples/json-server/aigw.yaml as it is -> json-server 0.17.4 (npm) serving this machine's
Debian packages, maintainers and changelog entries (examples/json-server/dataset.py).

The oracle is json-server itself, asked directly: the gateway must give back what it holds, in
its order. The tests marked xfail(strict) are issue 21's gaps; each flips when its item is fixed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import yaml
from json_server import (
    BINARY,
    EXAMPLE,
    VERSION,
    example_config,
    start_example_gateway,
    start_json_server,
    write_database,
)
from jsonschema import Draft202012Validator
from processes import ROOT, free_port

AIDRE_JSON = "application/aidre+json"
OWNER = {"x-api-key": "example-owner-key"}
APP = {"x-api-key": "example-app-key"}
APP_GRANT = {"packages": {"id", "name", "version", "summary", "updated_at"},
             "changes": {"id", "source", "version", "date"}}
ORDINARY_ID = re.compile(r"[A-Za-z0-9._~-]+")
# Ids from the dataset that no [A-Za-z0-9._~-] pattern admits, one of each kind.
HARD_IDS = [
    ("packages", "g++"),
    ("packages", "libstdc++6"),
    ("changes", "gcc-12/12.2.0-14+deb12u1"),
    ("packages", "synthetic/with-slash"),
    ("packages", "synthetic-100%-percent"),
    ("packages", "synthetic with spaces"),
    ("packages", "synthétique-ünïcode-包"),
    ("packages", "synthetic?query#fragment"),
]


def xfail(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict]]]:
    path = tmp_path_factory.mktemp("json-server") / "db.json"
    return path, write_database(path)


@pytest.fixture(scope="module")
def db(database: tuple[Path, dict[str, list[dict]]]) -> dict[str, dict[str, dict]]:
    """The database as written, each collection by id."""
    return {name: {row["id"]: row for row in rows} for name, rows in database[1].items()}


@pytest.fixture(scope="module")
def upstream(database: tuple[Path, dict], logs_dir: Path) -> Iterator[str]:
    process, url = start_json_server(database[0], logs_dir)
    yield url
    process.stop()


@pytest.fixture(scope="module")
def gateway(upstream: str, logs_dir: Path) -> Iterator[str]:
    process, url = start_example_gateway(upstream, logs_dir)
    yield url
    process.stop()


def present(db: dict[str, dict[str, dict]], collection: str, identifier: str) -> None:
    """The dataset holds `identifier`: a test about it is a test of the gateway, not of data."""
    assert identifier in db[collection], f"{collection}/{identifier} is not in the dataset"


def search(gateway: str, query: str, collection: str = "packages", top_k: int = 10,
           cursor: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"query": query, "collection": collection, "top_k": top_k}
    if cursor is not None:
        body["cursor"] = cursor
    response = httpx.post(gateway + "/search", json=body, timeout=10,
                          headers={"content-type": AIDRE_JSON, "accept": AIDRE_JSON})
    assert response.status_code == 200, response.text
    return response.json()


def upstream_search(upstream: str, query: str, collection: str = "packages") -> list[str]:
    """The ids json-server's full-text search finds, in its order."""
    response = httpx.get(f"{upstream}/{collection}", params={"q": query}, timeout=10)
    return [row["id"] for row in response.json()]


def chunk(gateway: str, collection: str, identifier: str) -> httpx.Response:
    return httpx.get(f"{gateway}/chunks/{collection}:{quote(identifier, safe='')}", timeout=10)


def all_records(gateway: str, stream: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 100}
    while True:
        response = httpx.get(f"{gateway}/v1/streams/{stream}/records", params=params,
                             headers=headers, timeout=30)
        assert response.status_code == 200, response.text
        page = response.json()
        records += page["data"]
        if not page["has_more"]:
            return records
        params["cursor"] = page["next_cursor"]


def retrieve(gateway: str, query: str, platform: str = "assistant",
             status: int = 200) -> dict[str, Any]:
    body = {"aip_version": "0.1", "request_id": "req_js1", "timestamp": "2026-11-23T14:30:00Z",
            "platform": {"id": platform}, "intent": {"domain": "technology.software"},
            "context": {"language": "en-US", "placement": "chat"},
            "runtime": {"session_id": "s1", "turn_index": 0, "query_text": query}}
    response = httpx.post(gateway + "/pag/retrieve", json=body, timeout=10)
    assert response.status_code == status, response.text
    return response.json()


# --------------------------------------------------------------------------- the setup itself


def test_the_makefile_installs_the_version_the_tests_expect():
    makefile = (ROOT / "Makefile").read_text()
    assert f"JSON_SERVER_VERSION := {VERSION}" in makefile
    assert re.search(r"^test: .*\bjson-server\b", makefile, re.MULTILINE)
    version = subprocess.run([str(BINARY), "--version"], capture_output=True, text=True,
                             timeout=30, check=True)
    assert version.stdout.strip() == VERSION


def test_the_example_config_validates_strictly_and_its_policies_pass_their_tests():
    config, policies = str(EXAMPLE / "aigw.yaml"), str(EXAMPLE / "policies")
    for command in (["validate", "--strict", config],
                    ["policy", "test", "-c", config, "--coverage", "100", policies]):
        result = subprocess.run([sys.executable, "-m", "gateway", *command], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr


def test_the_dataset_is_real_text_with_every_kind_of_id(db: dict[str, dict[str, dict]]):
    packages, changes = db["packages"], db["changes"]
    assert len(packages) + len(changes) + len(db["maintainers"]) > 2000
    for collection, identifier in HARD_IDS:
        present(db, collection, identifier)
    assert any("." in key for key in packages) and any("+" in key for key in db["maintainers"])
    assert all("/" in key for key in changes)
    real = [p for p in packages.values() if not p["synthetic"]]
    assert len(real) > 300 and all(p["summary"] for p in real)
    described = [p for p in real if p["description"]]
    assert len(described) > 0.9 * len(real)
    assert any(p["homepage"] is None for p in real)  # fields null in some records
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", c["date"])
               for c in changes.values())


def test_json_server_itself_serves_every_hard_id(upstream: str, db: dict[str, dict[str, dict]]):
    """The upstream is not the problem: percent-encoded once, every id reads back."""
    for collection, identifier in HARD_IDS:
        response = httpx.get(f"{upstream}/{collection}/{quote(identifier, safe='')}")
        assert response.status_code == 200 and response.json()["id"] == identifier


# --------------------------------------------------------------------------- /.well-known/ai


def test_well_known_ai_lists_the_legacy_endpoints_and_the_surfaces(gateway: str):
    response = httpx.get(gateway + "/.well-known/ai")
    assert response.status_code == 200
    document = response.json()
    assert document["service"]["name"] == "Debian package index"
    ids = {capability["id"] for capability in document["capabilities"]}
    assert {"search_packages", "get_package", "aidre_search", "aidre_chunk", "aip_retrieve",
            "aidip_invoke_agent"} <= ids


# --------------------------------------------------------------------------- AIDRE


@pytest.mark.parametrize("query", ["compiler", "library", "c++", "python"])
def test_aidre_search_keeps_json_servers_order_across_pages(gateway: str, upstream: str,
                                                           query: str):
    expected = upstream_search(upstream, query)[:15]
    assert len(expected) == 15
    first = search(gateway, query, top_k=10)
    second = search(gateway, query, top_k=5, cursor=first["meta"]["next_cursor"])
    found = [hit["id"] for hit in first["results"] + second["results"]]
    assert found == [f"packages:{identifier}" for identifier in expected]


def test_aidre_search_maps_the_records_fields(gateway: str, db: dict[str, dict[str, dict]]):
    for hit in search(gateway, "compiler")["results"]:
        record = db["packages"][hit["id"].removeprefix("packages:")]
        assert hit["text"] == record["description"]
        assert hit["source"]["title"] == record["summary"]
        assert hit["source"].get("url") == record["homepage"]
        assert hit["metadata"]["version"] == record["version"]


def test_aidre_chunks_of_ordinary_ids(gateway: str, db: dict[str, dict[str, dict]]):
    for collection, field in (("packages", "description"), ("changes", "text")):
        ordinary = [key for key in db[collection] if ORDINARY_ID.fullmatch(key)][:10]
        assert ordinary or collection == "changes"  # every change id has a slash
        for identifier in ordinary:
            response = chunk(gateway, collection, identifier)
            assert response.status_code == 200, (identifier, response.text)
            assert response.json()["text"] == db[collection][identifier][field]


def test_aidre_unknown_ids_are_404(gateway: str):
    assert chunk(gateway, "packages", "no-such-package").status_code == 404


@pytest.mark.parametrize(("collection", "identifier"), HARD_IDS)
def test_aidre_chunks_of_every_kind_of_id(gateway: str, db: dict[str, dict[str, dict]],
                                          collection: str, identifier: str):
    present(db, collection, identifier)
    response = chunk(gateway, collection, identifier)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == f"{collection}:{identifier}"


def test_aidre_every_search_hit_is_fetchable(gateway: str):
    hits = search(gateway, "GNU C++")["results"] + search(gateway, "security", "changes")["results"]
    assert len(hits) >= 5
    unreachable = [hit["id"] for hit in hits
                   if httpx.get(f"{gateway}/chunks/{quote(hit['id'], safe=':')}").status_code
                   != 200]
    assert unreachable == []


# --------------------------------------------------------------------------- PDPP


def test_pdpp_lists_every_record_of_json_server(gateway: str, db: dict[str, dict[str, dict]]):
    for stream in ("packages", "changes"):
        records = all_records(gateway, stream, OWNER)
        assert sorted(r["id"] for r in records) == sorted(db[stream])
        for record in records[:50]:
            row = db[stream][record["id"]]
            assert {k: v for k, v in record["data"].items() if k in row} == \
                {k: row[k] for k in record["data"] if k in row}


def test_pdpp_a_grant_hides_the_fields_it_does_not_name(gateway: str):
    for stream, granted in APP_GRANT.items():
        owner = httpx.get(f"{gateway}/v1/streams/{stream}/records?limit=20", headers=OWNER)
        app = httpx.get(f"{gateway}/v1/streams/{stream}/records?limit=20", headers=APP)
        assert owner.status_code == app.status_code == 200
        assert any(set(r["data"]) - granted for r in owner.json()["data"])
        assert all(set(r["data"]) <= granted for r in app.json()["data"])
    hidden = httpx.get(f"{gateway}/v1/streams/packages/records/adduser", headers=APP).json()
    assert "description" not in hidden["data"] and "homepage" not in hidden["data"]


def test_pdpp_a_grant_narrows_what_a_search_may_match(gateway: str,
                                                     db: dict[str, dict[str, dict]]):
    """"useradd" is in adduser's description, which the app may not read, not in its summary."""
    assert "useradd" in db["packages"]["adduser"]["description"]
    assert "useradd" not in db["packages"]["adduser"]["summary"]

    def matches(headers: dict[str, str]) -> dict[str, list[str]]:
        response = httpx.get(f"{gateway}/v1/search", params={"q": "useradd",
                             "streams": "packages"}, headers=headers)
        assert response.status_code == 200, response.text
        return {r["record_key"]: r["matched_fields"] for r in response.json()["data"]}

    assert "description" in matches(OWNER)["adduser"]
    app = matches(APP)
    assert "adduser" not in app
    assert all(set(fields) <= APP_GRANT["packages"] for fields in app.values())


@pytest.mark.parametrize(("collection", "identifier"),
                         HARD_IDS)
def test_pdpp_reads_every_kind_of_id_percent_encoded(gateway: str,
                                                    db: dict[str, dict[str, dict]],
                                                    collection: str, identifier: str):
    present(db, collection, identifier)
    response = httpx.get(f"{gateway}/v1/streams/{collection}/records/"
                         f"{quote(identifier, safe='')}", headers=OWNER)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == identifier


def test_pdpp_every_record_url_a_search_gives_is_fetchable(gateway: str):
    results = httpx.get(f"{gateway}/v1/search?q=security&streams=changes", headers=OWNER)
    urls = [result["record_url"] for result in results.json()["data"]]
    assert urls
    assert [url for url in urls if httpx.get(gateway + url, headers=OWNER).status_code != 200] \
        == []


def test_pdpp_every_record_is_valid_against_its_streams_schema(
        inprocess_factory, upstream: str, db: dict[str, dict[str, dict]], tmp_path: Path):
    config = example_config(upstream, tmp_path)
    for rule in config["rate_limits"]["rules"]:  # every page of every stream: 44 requests at once
        rule.update(limit="100000/minute", burst="100000/second")
    gateway = inprocess_factory(config).url
    invalid: dict[str, list[str]] = {}
    for stream in ("packages", "changes"):
        schema = httpx.get(f"{gateway}/v1/streams/{stream}", headers=OWNER).json()["schema"]
        Draft202012Validator.check_schema(schema)
        validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        records = all_records(gateway, stream, OWNER)
        assert {r["id"] for r in records} == set(db[stream])  # every record, none left out
        for record in records:
            if not validator.is_valid(record["data"]):
                invalid.setdefault(stream, []).append(record["id"])
    assert invalid == {}


def test_pdpp_nulls_of_json_server_are_nulls_its_schema_admits(gateway: str,
                                                              db: dict[str, dict[str, dict]]):
    schema = httpx.get(f"{gateway}/v1/streams/packages", headers=OWNER).json()["schema"]
    assert schema["properties"]["homepage"] == {"type": ["string", "null"], "format": "uri"}
    assert schema["properties"]["updated_at"] == {"type": ["string", "null"],
                                                  "format": "date-time"}
    present(db, "packages", "g++")
    assert db["packages"]["g++"]["homepage"] is None
    record = httpx.get(f"{gateway}/v1/streams/packages/records/g%2B%2B", headers=OWNER).json()
    assert record["data"]["homepage"] is None, record


# --------------------------------------------------------------------------- AIP


def test_aip_retrieve_ok_cites_the_packages_it_quotes(gateway: str,
                                                     db: dict[str, dict[str, dict]]):
    answer = retrieve(gateway, "compiler")
    assert answer["status"] == "ok", answer
    chunks = answer["content"]["chunks"]
    assert chunks
    for piece in chunks:
        package = db["packages"][piece["id"].rsplit("#", 1)[0]]
        assert piece["text"] in package["description"]
        assert piece["text"] != package["description"]  # never the whole description
    cited = {chunk_id for citation in answer["citations"] for chunk_id in citation["chunk_ids"]}
    assert cited == {piece["id"] for piece in chunks}


def test_aip_retrieve_denied_by_policy(gateway: str):
    answer = retrieve(gateway, "compiler", platform="scraper-bot", status=403)
    assert answer["status"] == "denied"
    assert answer["denial"]["reason"] == "policy_violation"
    assert "content" not in answer


def test_aip_retrieve_error_when_json_server_is_gone(inprocess_factory, tmp_path: Path):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens once the probe is closed
    gateway = inprocess_factory(example_config(closed, tmp_path))
    answer = retrieve(gateway.url, "compiler", status=502)
    assert answer["status"] == "error", answer
    assert answer["error"]["code"] == "upstream_unavailable"
    assert closed.split("//")[1] not in str(answer)


# --------------------------------------------------------------------------- AIDIP


def test_aidip_invokes_a_post_operation_of_json_server(gateway: str, upstream: str):
    note = {"package_id": "g++", "text": "The default C++ compiler of Debian."}
    response = httpx.post(f"{gateway}/agents/notes/invoke/add_note", json=note, headers=OWNER)
    assert response.status_code == 200, response.text
    stored = response.json()
    assert {k: stored[k] for k in note} == note and stored["id"] is not None
    assert httpx.get(f"{upstream}/notes/{stored['id']}").json() == stored  # really stored
    refused = httpx.post(f"{gateway}/agents/notes/invoke/add_note", json=note)
    assert refused.status_code == 401


@pytest.mark.parametrize("identifier", [identifier for collection, identifier in HARD_IDS
                                        if collection == "packages"])
def test_aidip_invokes_a_get_operation_of_json_server(gateway: str,
                                                     db: dict[str, dict[str, dict]],
                                                     identifier: str):
    present(db, "packages", identifier)
    package = db["packages"][identifier]
    response = httpx.post(f"{gateway}/agents/packages/invoke/get", json={"id": identifier},
                          headers=OWNER)
    assert response.status_code == 200, response.text
    assert response.json() == package  # json-server's record, read with GET /packages/{id}
    found = httpx.post(f"{gateway}/agents/packages/invoke/find",
                       json={"name": package["name"]}, headers=OWNER)
    assert found.status_code == 200, found.text
    assert [row["id"] for row in found.json()] == \
        [key for key, row in db["packages"].items() if row["name"] == package["name"]]


def test_aidip_get_operations_of_json_server_refuse_what_they_cannot_send(gateway: str,
                                                                          db: dict):
    section = db["packages"]["g++"]["section"]
    found = httpx.post(f"{gateway}/agents/packages/invoke/find", json={"section": section},
                       headers=OWNER)
    assert sorted(row["id"] for row in found.json()) == \
        sorted(key for key, row in db["packages"].items() if row["section"] == section)
    missing = httpx.post(f"{gateway}/agents/packages/invoke/get", json={"id": "no-such"},
                         headers=OWNER)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NotFound"
    for body in ({"id": ".."}, {"id": ["g++"]}, {"id": "x" * 257}, {"name": "g++", "x": 1}):
        refused = httpx.post(f"{gateway}/agents/packages/invoke/get", json=body, headers=OWNER)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "InvalidInput"
    assert httpx.post(f"{gateway}/agents/packages/invoke/get", json={"id": "g++"},
                      headers=APP).status_code == 403  # needs packages:read


# --------------------------------------------------------------------------- upstream URLs


def test_no_surface_answer_carries_json_servers_address(gateway: str, upstream: str):
    origin = upstream.split("//")[1]
    answers = [
        httpx.get(gateway + "/.well-known/ai"),
        httpx.get(gateway + "/.well-known/ai-discovery"),
        httpx.post(gateway + "/search", json={"query": "compiler"},
                   headers={"content-type": AIDRE_JSON}),
        chunk(gateway, "packages", "cmake"),
        httpx.get(gateway + "/v1/streams/packages/records?limit=5", headers=OWNER),
        httpx.get(gateway + "/v1/search?q=compiler&streams=packages", headers=OWNER),
        httpx.get(gateway + "/agents/notes"),
        httpx.get(gateway + "/packages?_page=2&_limit=2", headers=OWNER),  # json-server's Link
    ]
    for response in answers:
        assert response.status_code == 200, (response.request.url, response.text)
        assert origin not in response.text, response.request.url
        assert origin not in str(response.headers), response.request.url


def add_notes(upstream: str, *notes: dict[str, Any]) -> None:
    """Notes stored in json-server through its own API (POST /notes keeps a given id)."""
    for note in notes:
        httpx.post(f"{upstream}/notes", json=note, timeout=10).raise_for_status()


def test_passthrough_can_rewrite_json_servers_address_in_bodies(inprocess_factory,
                                                                upstream: str, tmp_path: Path):
    config = example_config(upstream, tmp_path)
    config["upstreams"]["debian"]["rewrite_body_urls"] = True
    public = config["public_base_url"]
    link = {"id": "self-link", "package_id": "g++", "href": f"{upstream}/packages/g%2B%2B"}
    # a list of them over 1 KiB: json-server gzips that for a client that accepts gzip
    listed = [{"id": f"listed-{n}", "package_id": "listed", "text": "x" * 300,
               "href": f"{upstream}/notes/listed-{n}"} for n in range(5)]
    add_notes(upstream, link, *listed)
    assert httpx.get(f"{upstream}/notes?package_id=listed",
                     headers={"accept-encoding": "gzip"}).headers["content-encoding"] == "gzip"
    gateway = inprocess_factory(config)
    response = httpx.get(f"{gateway.url}/notes/self-link", headers=OWNER)
    assert response.status_code == 200, response.text
    assert response.json()["href"] == f"{public}/packages/g%2B%2B"
    follow = httpx.get(gateway.url + response.json()["href"].removeprefix(public),
                       headers=OWNER)
    assert follow.json()["id"] == "g++"  # the rewritten URL is one the gateway serves
    many = httpx.get(f"{gateway.url}/notes?package_id=listed", headers=OWNER)  # gzip accepted
    assert [note["href"] for note in many.json()] == \
        [f"{public}/notes/listed-{n}" for n in range(5)]
    assert upstream.split("//")[1] not in many.text


def test_passthrough_bodies_pass_as_sent_without_the_option(gateway: str, upstream: str):
    add_notes(upstream, {"id": "raw-link", "package_id": "cmake",
                         "href": f"{upstream}/packages/cmake"})
    response = httpx.get(f"{gateway}/notes/raw-link", headers=OWNER)
    assert response.status_code == 200, response.text
    assert response.json()["href"] == f"{upstream}/packages/cmake"  # the upstream's body


def notes_surfaces(config: dict[str, Any]) -> dict[str, Any]:
    """The example with json-server's notes as an AIDRE collection and a PDPP stream, their
    `href` (a URL) mapped."""
    hits = {"id": "id", "text": "text", "fields": {"title": "package_id", "url": "href"}}
    config["aidre"]["collections"]["notes"] = {
        "description": "Notes about packages.",
        "text_search": {"upstream": "debian", "path": "/notes", "mapping": hits,
                        "query": {"q": "{query}", "_start": "{offset}", "_limit": "{limit}"}},
        "chunk": {"upstream": "debian", "path": "/notes/{id}", "mapping": hits}}
    config["pdpp"]["streams"]["notes"] = {
        "connector_id": "json-server-notes", "primary_key": "id", "cursor_field": "id",
        "fields": {"id": {"path": "id", "required": True}, "text": {"path": "text"},
                   "href": {"path": "href"}},
        "records": {"upstream": "debian", "path": "/notes", "mapping": {"id": "id"},
                    "query": {"_start": "{offset}", "_limit": "{limit}"}},
        "record": {"upstream": "debian", "path": "/notes/{id}", "mapping": {"id": "id"}}}
    return config


def test_surfaces_give_json_servers_urls_public_or_not_at_all(inprocess_factory,
                                                              upstream: str, tmp_path: Path):
    text = "surface-url-note"
    add_notes(upstream,
              {"id": "url-served", "text": text, "href": f"{upstream}/packages/g%2B%2B"},
              {"id": "url-owned", "text": text, "href": f"{upstream}/search?q=x"},
              {"id": "url-public", "text": text, "href": "https://packages.debian.org/g++"})
    config = notes_surfaces(example_config(upstream, tmp_path))
    public = config["public_base_url"]
    gateway = inprocess_factory(config)
    expected = {"url-served": f"{public}/packages/g%2B%2B", "url-owned": None,
                "url-public": "https://packages.debian.org/g++"}
    hits = search(gateway.url, text, "notes")["results"]
    assert {hit["id"]: hit.get("source", {}).get("url") for hit in hits} == \
        {f"notes:{key}": url for key, url in expected.items()}
    for key, url in expected.items():
        assert chunk(gateway.url, "notes", key).json().get("source", {}).get("url") == url
        record = httpx.get(f"{gateway.url}/v1/streams/notes/records/{key}", headers=OWNER)
        assert record.status_code == 200, record.text
        assert record.json()["data"].get("href") == url
    assert upstream.split("//")[1] not in str(hits)


def test_validate_warns_of_a_url_field_it_could_not_rewrite(upstream: str, tmp_path: Path):
    config = notes_surfaces(example_config(upstream, tmp_path))
    for needs_a_public_url in ("public_base_url", "aip", "aidip"):
        del config[needs_a_public_url]
    config["auth"]["resource"] = "https://packages.example.com"
    config["policies"] = None  # the example's policies name AIP and AIDIP
    path = tmp_path / "aigw.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    result = subprocess.run([sys.executable, "-m", "gateway", "validate", "--strict", str(path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    for where in ("aidre.collections.notes.text_search.mapping.fields.url",
                  "aidre.collections.notes.chunk.mapping.fields.url",
                  "pdpp.streams.notes.fields.href"):
        assert re.search(f"{re.escape(where)}: '(url|href)' looks like a URL: without "
                         "public_base_url", output), output
