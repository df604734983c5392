"""What the gateway relies on in Datasette 0.65.5 as an upstream, pinned against the real server
(tests/datasette.py) over this machine's Debian packages (examples/datasette/build_db.py).

- A table's JSON (`/debian/<table>.json?_shape=objects&_size=N`) pages by keyset: `next` is the
  last row's id, tilde-encoded; `next_url` is the same query with `_next=<next>` added, as an
  absolute URL of the upstream itself. An empty `_next=` is the first page.
- `_search=` with `_searchmode=raw` takes FTS5 syntax, column filters included. Matches come in
  primary-key order, not by relevance, and page with `next` like any other rows.
- A single row reads back by any id at `/<db>/<table>/<tilde-encoded id>.json`, or at
  `/<db>/<table>.json?id__exact=<percent-encoded id>`; not at a percent-encoded row path.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from datasette import DATABASE, VERSION, build_db_module, tilde_encode, write_database
from processes import ROOT

Records = dict[str, list[dict[str, Any]]]
# Ids no [A-Za-z0-9_-] pattern admits, one of each kind; the data has `~` in change ids too.
HARD_IDS = [
    ("packages", "g++"),
    ("packages", "libstdc++6"),
    ("packages", "gir1.2-glib-2.0"),
    ("changes", "gcc-12/12.2.0-14+deb12u1"),
    ("packages", "synthetic/with-slash"),
    ("packages", "synthetic-100%-percent"),
    ("packages", "synthetic with spaces"),
    ("packages", "synthétique-ünïcode-包"),
    ("packages", "synthetic?query#fragment"),
]
TABLE_KEYS = {"database", "table", "is_view", "human_description_en", "rows", "truncated",
              "filtered_table_rows_count", "expanded_columns", "expandable_columns", "columns",
              "primary_keys", "units", "query", "facet_results", "suggested_facets", "next",
              "next_url", "private", "allow_execute_sql", "query_ms"}
ROW_KEYS = {"database", "table", "rows", "columns", "primary_keys", "primary_key_values",
            "units", "query_ms"}


@pytest.fixture(scope="module")
def records(datasette_db: tuple[Any, Records]) -> Records:
    return datasette_db[1]


@pytest.fixture(scope="module")
def hard_ids(records: Records) -> list[tuple[str, str]]:
    """HARD_IDS, a change id with `~` and a maintainer id with `+`, each in the data."""
    tilde = next(row["id"] for row in records["changes"] if "~" in row["id"])
    plus = next(row["id"] for row in records["maintainers"] if "+" in row["id"])
    found = [*HARD_IDS, ("changes", tilde), ("maintainers", plus)]
    for table, identifier in found:
        assert any(row["id"] == identifier for row in records[table]), (table, identifier)
    return found


def stored(record: dict[str, Any]) -> dict[str, Any]:
    """A record as Datasette gives it back: lists as JSON text, booleans as 0/1."""
    return {key: build_db_module().cell(value) for key, value in record.items()}


def table_json(upstream: str, table: str, **params: Any) -> dict[str, Any]:
    response = httpx.get(f"{upstream}/{DATABASE}/{table}.json",
                         params={"_shape": "objects", **params}, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def all_pages(upstream: str, table: str, **params: Any) -> list[dict[str, Any]]:
    """Every row, following `next_url` from the first page to the one without `next`."""
    page = table_json(upstream, table, **params)
    rows = page["rows"]
    while page["next"] is not None:
        response = httpx.get(page["next_url"], timeout=10)
        assert response.status_code == 200, response.text
        page = response.json()
        rows += page["rows"]
    assert page["next_url"] is None
    return rows


def words(text: str | None) -> set[str]:
    """The tokens SQLite's unicode61 tokenizer makes of ASCII text: alphanumeric runs, folded."""
    return set(re.findall(r"[^\W_]+", (text or "").lower()))


def search(upstream: str, query: str, table: str = "packages", **params: Any) -> list[str]:
    page = table_json(upstream, table, _search=query, _searchmode="raw", _size="max", **params)
    assert page["next"] is None
    return [row["id"] for row in page["rows"]]


# --------------------------------------------------------------------------- the setup itself


def test_the_makefile_installs_the_version_the_tests_run(datasette: str):
    makefile = (ROOT / "Makefile").read_text()
    assert f"DATASETTE_VERSION := {VERSION}" in makefile
    assert re.search(r"^test: .*\bdatasette\b", makefile, re.MULTILINE)
    versions = httpx.get(f"{datasette}/-/versions.json").json()
    assert versions["datasette"]["version"] == VERSION
    assert "FTS5" in versions["sqlite"]["fts_versions"]


def test_the_database_is_deterministic_and_its_search_indexes_are_found(
        datasette: str, datasette_db: tuple[Any, Records], tmp_path):
    again, _ = write_database(tmp_path)
    assert again.read_bytes() == datasette_db[0].read_bytes()
    tables = {t["name"]: t for t in httpx.get(f"{datasette}/{DATABASE}.json").json()["tables"]}
    assert tables["packages"]["fts_table"] == "packages_fts"
    assert tables["changes"]["fts_table"] == "changes_fts"


# --------------------------------------------------------------------------- keyset paging


@pytest.mark.parametrize("table", ["packages", "changes"])
def test_next_tokens_read_every_row_once_in_id_order(datasette: str, records: Records,
                                                     table: str):
    rows = all_pages(datasette, table, _size=100)
    assert rows == [stored(record) for record in records[table]]


def test_a_page_and_its_next_token(datasette: str, records: Records):
    page = table_json(datasette, "packages", _size=3)
    assert set(page) == TABLE_KEYS
    assert page["rows"] == [stored(r) for r in records["packages"][:3]]
    assert page["next"] == tilde_encode(page["rows"][-1]["id"])
    assert page["next_url"] == (f"{datasette}/{DATABASE}/packages.json?_shape=objects&_size=3"
                                f"&_next={page['next']}")  # absolute: the upstream's own URL
    assert page["filtered_table_rows_count"] == len(records["packages"])


def test_next_after_every_kind_of_id(datasette: str, records: Records,
                                     hard_ids: list[tuple[str, str]]):
    """The token is the id tilde-encoded (`+` for a space); read raw or percent-decoded from
    `next_url`, it positions after that id."""
    for table, identifier in hard_ids:
        ids = [row["id"] for row in records[table]]
        page = table_json(datasette, table, id__gte=identifier, _size=1)
        assert [row["id"] for row in page["rows"]] == [identifier]
        assert page["next"] == tilde_encode(identifier)
        successor = ids[ids.index(identifier) + 1:][:1]
        for following in (httpx.get(page["next_url"]).json(),
                          table_json(datasette, table, _next=page["next"], _size=1)):
            assert [row["id"] for row in following["rows"]] == successor


def test_the_last_page_has_no_next_even_when_it_is_full(datasette: str, records: Records):
    count = len(records["packages"])
    assert table_json(datasette, "packages", _size=count)["next"] is None
    short = table_json(datasette, "packages", _size=count - 1)
    assert short["next"] is not None
    assert len(table_json(datasette, "packages", _size=count - 1, _next=short["next"])["rows"]) \
        == 1


def test_an_empty_next_is_the_first_page(datasette: str):
    first = table_json(datasette, "packages", _size=5)
    empty = table_json(datasette, "packages", _size=5, _next="")
    assert empty["rows"] == first["rows"] and empty["next"] == first["next"]
    # not checked either: any value is a position, one past the last id is an empty page
    assert table_json(datasette, "packages", _size=5, _next="zzzz")["rows"] == []


def test_page_sizes(datasette: str):
    assert len(table_json(datasette, "changes", _size="max")["rows"]) == 1000
    too_big = httpx.get(f"{datasette}/{DATABASE}/changes.json", params={"_size": 1001})
    assert too_big.status_code == 400
    assert too_big.json() == {"ok": False, "error": "_size must be <= 1000", "status": 400,
                              "title": None}


# --------------------------------------------------------------------------- FTS5 search


@pytest.mark.parametrize(("columns", "word"),
                         [(("summary",), "compiler"), (("name", "summary"), "gcc")])
def test_a_column_filter_matches_only_those_columns(datasette: str, records: Records,
                                                    columns: tuple[str, ...], word: str):
    expected = [r["id"] for r in records["packages"]
                if any(word in words(r[column]) for column in columns)]
    only_described = {r["id"] for r in records["packages"] if word in words(r["description"])
                      and not any(word in words(r[column]) for column in columns)}
    found = search(datasette, f'{{{" ".join(columns)}}} : ("{word}")')
    assert found == expected and len(found) >= 5
    assert only_described and not only_described & set(found)
    assert only_described <= set(search(datasette, f'"{word}"'))  # unrestricted: found


def test_without_raw_mode_fts5_syntax_is_searched_as_words(datasette: str):
    escaped = table_json(datasette, "packages", _search='{summary} : ("compiler")')
    assert escaped["rows"] == []


def test_fts5_syntax_errors_are_400_and_doubled_quotes_escape(datasette: str):
    response = httpx.get(f"{datasette}/{DATABASE}/packages.json",
                         params={"_search": '{summary} : ("compiler', "_searchmode": "raw"})
    assert response.status_code == 400
    body = response.json()  # "error" is SQLite's message: "unterminated string" here
    assert body["ok"] is False and body["title"] == "Invalid SQL" and body["error"]
    assert search(datasette, '{summary} : ("compiler""")') == \
        search(datasette, '{summary} : ("compiler")')


def test_search_results_come_in_id_order_not_by_rank(datasette: str, records: Records):
    found = search(datasette, '"compiler"')
    assert found == sorted(found)
    assert [r["id"] for r in records["packages"] if r["id"] in found] == found
    ranked = httpx.get(f"{datasette}/{DATABASE}/packages.json",
                       params={"_search": "compiler", "_sort": "rank"})
    assert ranked.status_code == 500  # sic: a sort column that does not exist is a 500
    assert ranked.json()["error"] == "Cannot sort table by rank"


def test_search_pages_with_next_and_keeps_the_search_in_next_url(datasette: str):
    query = '{summary description} : ("library")'
    everything = search(datasette, query)
    first = table_json(datasette, "packages", _search=query, _searchmode="raw", _size=10)
    assert first["filtered_table_rows_count"] == len(everything) > 20
    assert "_search=" in first["next_url"] and "_searchmode=raw" in first["next_url"]
    paged = all_pages(datasette, "packages", _search=query, _searchmode="raw", _size=10)
    assert [row["id"] for row in paged] == everything


def test_changes_search_by_source_column(datasette: str, records: Records):
    expected = [r["id"] for r in records["changes"] if r["source"] == "gcc-12"]
    found = search(datasette, '{source} : ("gcc" + "12")', "changes")
    assert expected and set(expected) <= set(found)
    assert all({"gcc", "12"} <= words(r["source"]) for r in records["changes"]
               if r["id"] in found)


# --------------------------------------------------------------------------- single rows


def test_a_row_reads_back_at_its_tilde_encoded_path(datasette: str, records: Records,
                                                   hard_ids: list[tuple[str, str]]):
    by_id = {table: {r["id"]: r for r in rows} for table, rows in records.items()}
    for table, identifier in hard_ids:
        response = httpx.get(f"{datasette}/{DATABASE}/{table}/{tilde_encode(identifier)}.json",
                             params={"_shape": "objects"})
        assert response.status_code == 200, (identifier, response.text)
        body = response.json()
        assert set(body) == ROW_KEYS and body["primary_key_values"] == [identifier]
        assert body["rows"] == [stored(by_id[table][identifier])]


def test_a_percent_encoded_row_path_is_redirected_to_a_wrong_one(
        datasette: str, hard_ids: list[tuple[str, str]]):
    """Datasette answers a 404 path with `%` by a redirect that tilde-encodes it whole, `.json`
    included: `g%2B%2B.json` -> `g~2B~2B~2Ejson`, the HTML page of a row that is not there."""
    for table, identifier in hard_ids:
        if quote(identifier, safe="") == identifier:
            continue  # gir1.2-glib-2.0: nothing to encode
        path = f"/{DATABASE}/{table}/{quote(identifier, safe='')}.json"
        response = httpx.get(datasette + path)
        assert response.status_code == 302, identifier
        assert response.headers["location"].endswith("~2Ejson")
        assert httpx.get(datasette + path, follow_redirects=True).status_code == 404


def test_a_row_reads_back_by_a_percent_encoded_query(datasette: str,
                                                     hard_ids: list[tuple[str, str]]):
    """`+` must be sent as %2B: the query string is form-decoded, `+` is a space."""
    for table, identifier in hard_ids:
        url = f"{datasette}/{DATABASE}/{table}.json?_shape=objects&id__exact="
        page = httpx.get(url + quote(identifier, safe="")).json()
        assert [row["id"] for row in page["rows"]] == [identifier] and page["next"] is None
    plus = httpx.get(f"{datasette}/{DATABASE}/packages.json?_shape=objects&id__exact=g++")
    assert plus.json()["rows"] == []


def test_an_unknown_row(datasette: str):
    response = httpx.get(f"{datasette}/{DATABASE}/packages/no-such-package.json")
    assert response.status_code == 404
    assert response.json() == {"ok": False, "error": "Record not found", "status": 404,
                               "title": None}
    assert table_json(datasette, "packages", id__exact="no-such-package")["rows"] == []
