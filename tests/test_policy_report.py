"""The access report: Markdown and HTML from `aigw policy report` of the demo config, the admin
`/policy` page of a running gateway, and the report as a real headless Chromium renders it on
a screen 800 px wide and prints it on A4 (screenshots kept under pytest's base temporary
directory, in report-screenshots/, their paths printed)."""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import httpx
import pytest
from aidre_config import aidre_gateway_config
from processes import ROOT

from gateway.loader import load_config
from gateway.policy.matrix import known_scopes, personas
from gateway.policy.report import CALLERS_PER_TABLE, gateway_version

ALLOW_RGB = (0xE3, 0xF4, 0xE6)  # td.allow and td.deny backgrounds in gateway/policy/report_html.py
DENY_RGB = (0xFB, 0xE5, 0xE5)
# The demo's, in the report's order: "aidre, pdpp" holds what both serve (the articles' records)
SURFACES = ["aidip", "aidre", "aidre, pdpp", "aip", "pdpp", "gateway"]


def demo_callers() -> list[str]:
    loaded = load_config(ROOT / "config" / "demo.yaml")
    return [persona.label for persona in personas(loaded.bundle, known_scopes(loaded.settings))]


def tables_per_surface() -> int:
    """The demo's callers split into tables of at most CALLERS_PER_TABLE columns."""
    return -(-len(demo_callers()) // CALLERS_PER_TABLE)
A4_POINTS = (595.0, 842.0)
VIEWPORT = 800


def aigw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_the_markdown_report_says_who_sees_what():
    result = aigw("policy", "report", "--format", "markdown")
    assert result.returncode == 0, result.stderr
    text, lines = result.stdout, result.stdout.splitlines()
    assert re.search(r"^- Generated: `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`$", text, re.M)
    assert f"- Config file: `{ROOT / 'config' / 'demo.yaml'}`" in lines
    assert f"- Policies: `{ROOT / 'policies'}`" in lines
    assert re.search(r"^- Policy revision: `[0-9a-f]{16}`$", text, re.M)
    assert f"- aigw version: `{gateway_version()}`" in lines
    assert "- **anonymous**: a caller without a token" in lines
    assert "- **client**: a client token with no scope" in lines
    assert "- **client articles:read**: a client token with exactly these scopes: " \
        "articles:read" in lines
    assert [line[3:] for line in lines if line.startswith("## ")] == \
        ["How to read it", *SURFACES, "Rules"]
    tables = markdown_tables(lines)
    assert len(tables) == len(SURFACES) * tables_per_surface() > len(SURFACES)
    for caption, header, _ in tables:
        assert 2 <= len(header) <= CALLERS_PER_TABLE + 1
        # the row header, repeated
        assert header[0] == caption.rsplit(", callers", 1)[0] + " · kind · resource"
    by_caller = cells_of(tables, "vector_return · `articles`")
    assert by_caller["anonymous"].startswith("**DENY**")
    assert by_caller["client vectors:read"].startswith("**ALLOW** (articles-vectors-for-partners)")
    reads = cells_of(tables, "collection_read · `articles`")["client (every scope)"]
    assert "records:internal" in reads and "vectors" in reads
    invoke = cells_of(tables, "route · `/agents/classifier/invoke` method=POST")
    assert invoke["anonymous"] == "**DENY 401** (aidip-invoke-classifier)"
    assert invoke["client"] == "**DENY 403** (aidip-invoke-classifier)"
    assert invoke["client tasks:run"] == "**ALLOW** (aidip-invoke-classifier)"
    for path in ("`/pag/retrieve` method=POST", "`/search` method=POST"):
        assert cells_of(tables, "route · " + path)["anonymous"].startswith("**ALLOW**")
    assert "| `aip-deny-scrapers` | aip_retrieve | deny | enforce | compliance@acme.example | " \
        "aip |" in text


def markdown_tables(lines: list[str]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(caption, header cells, rows of cells) of each access table: a bold caption line, then
    the table."""
    found = []
    for index, line in enumerate(lines):
        if line.startswith("**") and ", " in line and lines[index + 2].startswith("| "):
            table = []
            for row in lines[index + 2:]:
                if not row.startswith("|"):
                    break
                table.append([cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]])
            found.append((line.strip("*"), table[0], table[2:]))
    return found


def cells_of(tables: list[tuple[str, list[str], list[list[str]]]], row: str) -> dict[str, str]:
    """Each caller's cell in the row labelled `row`, across the tables its callers are in."""
    found = {}
    for _, header, rows in tables:
        for cells in rows:
            if cells[0] == row:
                found.update(zip(header[1:], cells[1:], strict=True))
    assert len(found) == len(demo_callers()), (row, found)
    return found


def test_the_html_report_is_written_to_a_file(tmp_path: Path):
    out = tmp_path / "access.html"
    assert aigw("policy", "report", "-o", str(out)).returncode == 0
    page = out.read_text()
    assert page.startswith("<!doctype html>")
    assert f"<code id='config'>{ROOT / 'config' / 'demo.yaml'}</code>" in page
    assert f"<code id='version'>{gateway_version()}</code>" in page
    assert re.search(r"<code id='generated'>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</code>", page)
    assert re.findall(r"<section class='surface' id='surface-([a-z-]+)'>", page) == \
        [surface.replace(", ", "-") for surface in SURFACES]
    assert page.count("<table class='access'") == len(SURFACES) * tables_per_surface()
    assert page.count("<thead>") == page.count("<table")  # a header row on every table
    assert "@page { size: A4;" in page and "@media print" in page
    assert "<td class='deny' title='aip-deny-scrapers'><span class='effect'>DENY</span>" in page
    assert "<td>compliance<wbr>@acme.<wbr>example</td>" in page  # the rules' owner


def test_a_policy_file_owner_reaches_its_rules_and_decides_nothing(tmp_path: Path):
    from gateway.loader import load_config
    from gateway.model import Principal
    from gateway.policy.rules import Ask

    folder = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", folder)
    routes = folder / "routes.yaml"
    text = routes.read_text()
    routes.write_text(text.replace("{id: legacy-tasks, kind: route,",
                                   "{id: legacy-tasks, kind: route, owner: tasks-team,"))
    loaded = load_config(ROOT / "config/demo.yaml", policies_dir=folder)
    shipped = load_config(ROOT / "config/demo.yaml")
    assert loaded.bundle is not None and shipped.bundle is not None
    owners = {rule.id: rule.owner for rule in loaded.bundle.rules}
    assert owners["legacy-articles"] == "compliance@acme.example"  # the file's
    assert owners["legacy-tasks"] == "tasks-team"  # its own
    assert owners["config:aidre.collections.articles"] is None  # the config file names none
    for rule in shipped.bundle.rules:
        ask = Ask("route", getattr(rule, "path", "/"), Principal(), {"method": "GET"})
        assert loaded.bundle.decide(ask) == shipped.bundle.decide(ask)


def test_route_rules_are_tried_with_the_methods_served_under_their_path():
    from gateway import registry
    from gateway.loader import load_config
    from gateway.policy.kinds import serves_under
    from gateway.policy.matrix import asks, personas

    assert serves_under("/agents/{id}/invoke/{operation}", "/agents/classifier/invoke")
    assert not serves_under("/agents/{id}", "/agents/classifier/invoke")
    assert not serves_under("/agents/{id}/a2a", "/agents/classifier/invoke")
    loaded = load_config(ROOT / "config/demo.yaml")
    assert loaded.bundle is not None
    anyone = personas(loaded.bundle)[0]
    tried = {(ask.resource, ask.attributes["method"])
             for ask in asks(loaded.bundle, loaded.settings, anyone) if ask.kind == "route"}
    for served_by_post in ("/agents/classifier/invoke", "/pag/retrieve", "/search"):
        assert (served_by_post, "POST") in tried and (served_by_post, "GET") not in tried
    assert ("/collections", "GET") in tried
    assert ("/api/v1/articles", "GET") in tried  # passthrough: no surface says, so GET
    route = registry.rule_kinds()["route"]
    assert route.surface_for(loaded.settings, "/agents/classifier/invoke") == "aidip"
    assert route.surface_for(loaded.settings, "/search") == "aidre"
    assert route.surface_for(loaded.settings, "/api/v1/users") == "gateway"


@pytest.fixture(scope="module")
def admin(backend: str, tmp_path_factory: pytest.TempPathFactory):
    from inprocess import InProcessGateway

    workdir = tmp_path_factory.mktemp("report")
    gateway = InProcessGateway(aidre_gateway_config(backend, workdir), workdir)
    yield gateway
    gateway.stop()


def test_the_admin_listener_serves_the_report_of_the_serving_policies(admin):
    response = httpx.get(admin.admin_url + "/policy")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    revision = response.headers["x-aigw-policy-revision"]
    assert f"<code id='revision'>{revision}</code>" in response.text
    assert admin.metric("aigw_policy_bundle_info", revision=revision) == 1.0
    markdown = httpx.get(admin.admin_url + "/policy", params={"format": "markdown"})
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert "vector-return.vector_return[0]" in markdown.text
    assert httpx.get(admin.url + "/policy").status_code != 200  # never on the public port


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        subprocess.run(["make", "chromium"], cwd=ROOT, capture_output=True, timeout=900)
        found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Chromium is not installed and could not be installed")
    return found


def headless(browser: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=120)


def test_the_admin_page_renders_in_a_real_browser(admin):
    dom = headless(chromium(), "--dump-dom", admin.admin_url + "/policy")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1>Who can see what</h1>" in dom.stdout
    assert dom.stdout.count('<td class="allow"') > 5 and dom.stdout.count('<td class="deny"') > 5


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo-report") / "access.html"
    result = aigw("policy", "report", "-c", "config/demo.yaml", "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stable folder for the screenshots, under pytest's base temporary directory."""
    folder = tmp_path_factory.getbasetemp() / "report-screenshots"
    folder.mkdir(exist_ok=True)
    return folder


# Run at the end of the page: what the browser laid out, written into the DOM for --dump-dom.
MEASURE = """<script>
const measured = {viewport: innerWidth, width: document.documentElement.scrollWidth,
  height: document.documentElement.scrollHeight,
  tables: [...document.querySelectorAll('table')].map(table => ({
    caption: table.caption ? table.caption.textContent : table.id,
    right: Math.ceil(table.getBoundingClientRect().right), scroll: table.scrollWidth,
    client: table.clientWidth}))};
const out = document.createElement('pre');
out.id = 'measured';
out.textContent = JSON.stringify(measured);
document.body.append(out);
</script>"""


def test_the_report_fits_a_screen_800_px_wide(demo_report: Path, screenshots: Path,
                                              capsys: pytest.CaptureFixture[str]):
    browser = chromium()
    page = demo_report.with_name("measured.html")
    page.write_text(demo_report.read_text().replace("</body>", MEASURE + "</body>"))
    dom = headless(browser, f"--window-size={VIEWPORT},1000", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = json.loads(html.unescape(re.search(r'<pre id="measured">(.*?)</pre>', dom.stdout)[1]))
    assert found["viewport"] == VIEWPORT
    assert found["width"] <= VIEWPORT, found  # no horizontal scroll
    assert len(found["tables"]) == len(SURFACES) * tables_per_surface() + 1  # rules last
    for table in found["tables"]:
        assert table["right"] <= VIEWPORT and table["scroll"] <= table["client"], table
    shot = screenshots / "report-800.png"
    taken = headless(browser, f"--screenshot={shot}", f"--window-size={VIEWPORT},"
                     f"{found['height']}", "--hide-scrollbars", demo_report.as_uri())
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    with capsys.disabled():
        print(f"\nthe report at {VIEWPORT} px: {shot}")
    data = shot.read_bytes()
    assert png_size(data) == (VIEWPORT, found["height"])
    pixels = png_pixels(data, rows=1800)  # the facts, the legend and the first tables
    # Allowed and denied cells are painted in their colours, each over a real area.
    assert pixels.count(ALLOW_RGB) > 2000 and pixels.count(DENY_RGB) > 2000
    text = sum(1 for pixel in pixels if max(pixel) < 0x60)  # dark: the words are drawn
    assert text > 5000, text


def test_the_report_prints_on_a4(demo_report: Path, screenshots: Path,
                                 capsys: pytest.CaptureFixture[str]):
    browser, rasterise = chromium(), pdftoppm()
    pdf = screenshots / "report-print.pdf"
    printed = headless(browser, "--no-pdf-header-footer", f"--print-to-pdf={pdf}",
                       demo_report.as_uri())
    assert printed.returncode == 0 and pdf.exists(), printed.stderr[-2000:]
    boxes = re.findall(rb"/MediaBox \[0 0 ([\d.]+) ([\d.]+)\]", pdf.read_bytes())
    assert len(boxes) > 2
    for box in boxes:
        assert all(abs(float(side) - a4) < 1.5 for side, a4 in zip(box, A4_POINTS, strict=True))
    for old in screenshots.glob("report-print-*.png"):
        old.unlink()
    run([rasterise, "-png", "-r", "72", str(pdf), str(screenshots / "report-print")])
    pages = sorted(screenshots.glob("report-print-*.png"))
    assert len(pages) == len(boxes)
    with capsys.disabled():
        print(f"\nthe report printed on A4: {pdf}, its pages {pages[0]} to {pages[-1].name}")
    data = pages[1].read_bytes()  # the first page of tables only
    assert png_size(data) == (595, 842)
    pixels = png_pixels(data)
    assert pixels.count(ALLOW_RGB) > 2000 and pixels.count(DENY_RGB) > 1000  # printed tints
    assert sum(1 for pixel in pixels if max(pixel) < 0x60) > 3000
    # Nothing runs into the right margin (12 mm, 34 pt) of any page: tables wrap instead.
    strips = screenshots / "margins"
    strips.mkdir(exist_ok=True)
    run([rasterise, "-png", "-r", "72", "-x", "571", "-y", "0", "-W", "24", "-H", "842",
         str(pdf), str(strips / "right")])
    for strip in sorted(strips.glob("right-*.png")):
        assert set(png_pixels(strip.read_bytes())) == {(255, 255, 255)}, strip


def run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def pdftoppm() -> str:
    """poppler's pdftoppm, which draws each printed page as a PNG (`make chromium`)."""
    found = shutil.which("pdftoppm")
    if found is None:
        subprocess.run(["make", "chromium"], cwd=ROOT, capture_output=True, timeout=900)
        found = shutil.which("pdftoppm")
    if found is None:
        pytest.skip("pdftoppm (poppler-utils) is not installed and could not be installed")
    return found


def png_size(data: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def png_pixels(data: bytes, rows: int | None = None) -> list[tuple[int, int, int]]:
    """RGB triples of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium and pdftoppm
    write): of its first `rows` rows, or all (decoding is slow in Python: keep them few)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = {}, 8
    idat = b""
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if kind == b"IDAT":
            idat += body
        else:
            chunks[kind] = body
        offset += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and colour in (2, 6)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    previous = bytearray(stride)
    pixels = []
    for row in range(min(height, rows if rows is not None else height)):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        _unfilter(kind, line, previous, channels)
        pixels.extend(tuple(line[i:i + 3]) for i in range(0, stride, channels))
        previous = line
    return pixels


def _unfilter(kind: int, line: bytearray, previous: bytearray, bpp: int) -> None:
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = previous[i]
        corner = previous[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            estimate = left + up - corner
            pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
            best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            line[i] = (line[i] + best) & 0xFF


def test_the_admin_page_is_rendered_off_the_event_loop(admin, monkeypatch: pytest.MonkeyPatch):
    """Hundreds of decisions per page: never on the loop that serves the gateway's traffic."""
    import asyncio

    from gateway import admin as admin_module

    on_loop: list[bool] = []

    def watched(render):
        def run(*args):
            try:
                asyncio.get_running_loop()
                on_loop.append(True)
            except RuntimeError:
                on_loop.append(False)
            return render(*args)
        return run

    monkeypatch.setattr(admin_module, "html_report", watched(admin_module.html_report))
    monkeypatch.setattr(admin_module, "markdown_report", watched(admin_module.markdown_report))
    assert httpx.get(admin.admin_url + "/policy").status_code == 200
    assert httpx.get(admin.admin_url + "/policy", params={"format": "markdown"}).status_code \
        == 200
    assert on_loop == [False, False]
