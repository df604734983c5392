"""The access report: Markdown and HTML from `aigw policy report`, the admin `/policy` page of
a running gateway, and that page as a real headless Chromium renders it."""

from __future__ import annotations

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

ALLOW_RGB = (0xE3, 0xF4, 0xE6)  # td.allow and td.deny backgrounds in gateway/policy/report.py
DENY_RGB = (0xFB, 0xE5, 0xE5)


def aigw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_the_markdown_report_says_who_sees_what():
    result = aigw("policy", "report", "--format", "markdown")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| surface"))
    assert "| anonymous |" in header and "client vectors:read" in header
    vectors = next(line for line in lines if "vector_return · `articles`" in line)
    cells = [cell.strip() for cell in vectors.strip("|").split("|")][1:]
    columns = [cell.strip() for cell in header.strip("|").split("|")][1:]
    by_caller = dict(zip(columns, cells, strict=True))
    assert by_caller["anonymous"].startswith("**deny**")
    assert by_caller["client vectors:read"].startswith("**allow** (articles-vectors-for-partners)")
    reads = next(line for line in lines if "collection_read · `articles`" in line)
    assert "records:internal" in reads and "vectors" in reads
    assert "| `aip-deny-scrapers` | aip_retrieve | deny | enforce |" in result.stdout


def test_the_html_report_is_written_to_a_file(tmp_path: Path):
    out = tmp_path / "access.html"
    assert aigw("policy", "report", "-o", str(out)).returncode == 0
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<table id='access'>" in page
    assert "<td class='deny' title='aip-deny-scrapers'>" in page


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


def test_the_report_renders_in_a_real_browser(admin, tmp_path: Path):
    browser = chromium()
    url = admin.admin_url + "/policy"
    dom = headless(browser, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1>Who can see what</h1>" in dom.stdout
    assert dom.stdout.count('<td class="allow"') > 5 and dom.stdout.count('<td class="deny"') > 5
    shot = tmp_path / "report.png"
    taken = headless(browser, f"--screenshot={shot}", "--window-size=1400,1000",
                     "--hide-scrollbars", url)
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    pixels = png_pixels(shot.read_bytes())
    # Allowed and denied cells are painted in their colours, each over a real area.
    assert pixels.count(ALLOW_RGB) > 2000 and pixels.count(DENY_RGB) > 2000
    text = sum(1 for pixel in pixels if max(pixel) < 0x60)  # dark: the words are drawn
    assert text > 5000, text


def png_pixels(data: bytes) -> list[tuple[int, int, int]]:
    """RGB triples of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
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
    for row in range(height):
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
