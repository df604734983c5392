"""The documentation site (mkdocs.yml, docs/): a fresh `mkdocs build --strict` of it, the
reference generated from the code complete (every config and policy property described, every
error code the package raises listed, every placeholder and command-line argument explained),
and its quickstart and config reference rendering in headless Chromium, with screenshots for
review under the build (and under site/_review/ when `make docs` built site/)."""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from docs_site import build, refgen
from processes import ROOT, free_port
from test_policy_report import chromium, headless, png_pixels

from gateway import cli

MATERIAL_INDIGO = (63, 81, 181)  # the header's colour: the theme's CSS was applied
PAGES = ("index.html", "quickstart/index.html", "how-to/existing-api/index.html",
         "how-to/mcp-a2a/index.html", "how-to/aigw-check/index.html",
         "reference/config/index.html", "reference/policy-files/index.html",
         "reference/errors/index.html", "reference/metrics/index.html",
         "reference/cli/index.html", "reference/placeholders/index.html",
         "explanation/pipeline/index.html", "explanation/policy-model/index.html")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = tmp_path_factory.mktemp("docs") / "site"
    result = build(built)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return built


def test_the_site_builds_strict_with_every_page(site: Path):
    for page in PAGES:
        assert (site / page).is_file(), page
    # generated pages exist only in the build, never in docs/
    for generated in refgen("__init__").GENERATED_PAGES:
        assert not (ROOT / "docs" / generated).exists(), generated


def test_every_config_and_policy_property_is_described():
    schema_ref = refgen("schema_ref")
    assert schema_ref.undescribed(cli.config_schema()) == []
    assert schema_ref.undescribed(cli.policy_schema()) == []


def test_the_config_reference_has_a_row_for_every_property(site: Path):
    schema = cli.config_schema()
    properties = sum(len(model.get("properties", {}))
                     for model in [schema, *schema["$defs"].values()])
    page = (site / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    assert page.count('<span id="cfg-') == properties
    for path in ("upstreams.<name>.url", "aidre.collections.<name>.text_search.query",
                 "pdpp.streams.<name>.fields.<name>.path", "auth.api_keys.keys[].sha256"):
        shown = path.replace("<", "&lt;").replace(">", "&gt;")
        assert f"<code>{shown}</code>" in page, path


def test_every_error_code_the_package_raises_is_in_the_reference(site: Path):
    raised = refgen("raised")
    sites, unresolved = raised.scan(ROOT / "gateway")
    assert [u.where for u in unresolved if u.where not in raised.KNOWN_INDIRECT] == []
    # Independently of the scanner: every literal GatewayError(NNN, "code") in the source.
    source = "\n".join(path.read_text(encoding="utf-8")
                       for path in (ROOT / "gateway").rglob("*.py")
                       if not {"check", "demo"} & set(path.relative_to(ROOT).parts))
    literal = set(re.findall(r'GatewayError\(\s*\d{3},\s*"(\w+)"', source))
    scanned = {site.code for site in sites}
    assert literal <= scanned, literal - scanned
    page = (site / "reference" / "errors" / "index.html").read_text(encoding="utf-8")
    missing = sorted(code for code in scanned if f"<code>{code}</code>" not in page)
    assert not missing, missing
    assert len(scanned) > 60


def test_every_placeholder_and_command_line_argument_is_explained():
    assert refgen("placeholders_ref").undocumented() == []
    unexplained = [f"{line} {action.option_strings or action.dest}"
                   for line, _, parser in refgen("cli_ref").commands(cli.build_parser())
                   for action in parser._actions
                   if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
                   and action.help != argparse.SUPPRESS and not action.help]
    assert unexplained == []


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on loopback, as a reader's browser gets it."""
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize(("page", "shot"), [("quickstart/", "quickstart.png"),
                                            ("reference/config/", "config-reference.png")])
def test_the_page_renders_in_a_real_browser(site: Path, served: str, page: str, shot: str):
    browser = chromium()
    dom = headless(browser, "--dump-dom", f"{served}/{page}")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'class="md-nav' in html and "Quickstart" in html and "Config file" in html
    assert "Error codes" in html and "The policy model" in html  # the whole nav, every section
    assert html.count("<pre") >= (5 if page == "quickstart/" else 0)
    assert html.count("<table") >= (0 if page == "quickstart/" else 10)
    assert 'class="md-search' in html  # the search box, which reads the index below
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert any(doc["location"].startswith(page) for doc in index["docs"])
    review = site / "_review"
    review.mkdir(exist_ok=True)
    taken = headless(browser, f"--screenshot={review / shot}", "--window-size=1400,1000",
                     "--hide-scrollbars", f"{served}/{page}")
    assert taken.returncode == 0 and (review / shot).exists(), taken.stderr[-2000:]
    pixels = png_pixels((review / shot).read_bytes())
    indigo = sum(1 for pixel in pixels
                 if all(abs(a - b) <= 4 for a, b in zip(pixel, MATERIAL_INDIGO, strict=True)))
    assert indigo > 20000, indigo  # the header bar, styled
    assert sum(1 for pixel in pixels if max(pixel) < 0x60) > 5000  # words are drawn
    if (ROOT / "site").is_dir():  # `make docs` ran: keep the screenshot beside its build
        (ROOT / "site" / "_review").mkdir(exist_ok=True)
        shutil.copy(review / shot, ROOT / "site" / "_review" / shot)


def test_the_readme_fits_on_a_screen_and_links_into_the_site():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for target in re.findall(r"\]\(([^)#]+)", readme):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
