"""Upstream URLs in redirects never reach the client: client -> in-process aigw -> echo upstream."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from inprocess import InProcessGateway
from processes import Gateway

from gateway.redirects import UpstreamOrigin, public_base, rewrite_field

PUBLIC = "https://api.example.com"


def redirect(gateway: Gateway, fields: list[tuple[str, str]],
             headers: dict[str, str] | None = None) -> httpx.Response:
    """Ask the echo upstream, through the gateway, for a 302 carrying `fields`."""
    response = httpx.get(gateway.url + "/redirect", params=fields, headers=headers, timeout=10)
    assert response.status_code == 302, response.text
    return response


@pytest.fixture(scope="module")
def gateway(echo: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    config = {"public_base_url": PUBLIC, "upstreams": {"legacy": {"url": echo}},
              "default_upstream": "legacy"}
    started = InProcessGateway(config, tmp_path_factory.mktemp("redirects"))
    yield started
    started.stop()


def test_location_naming_the_upstream_becomes_the_public_url(gateway: Gateway, echo: str):
    response = redirect(gateway, [("location", f"{echo}/login?next=%2Fa#top")])
    assert response.headers["location"] == f"{PUBLIC}/login?next=%2Fa#top"


def test_every_url_field_is_rewritten(gateway: Gateway, echo: str):
    link = f'<{echo}/p/2>; rel="next", <https://cdn.example/x.css>; rel="preload"'
    response = redirect(gateway, [("content-location", f"{echo}/doc/1"),
                                  ("refresh", f"5; url={echo}/later"), ("link", link)])
    assert response.headers["content-location"] == f"{PUBLIC}/doc/1"
    assert response.headers["refresh"] == f"5; url={PUBLIC}/later"
    assert response.headers["link"] == \
        f'<{PUBLIC}/p/2>; rel="next", <https://cdn.example/x.css>; rel="preload"'
    assert echo not in str(response.headers)


def test_forms_browsers_normalise_are_rewritten_too(gateway: Gateway, echo: str):
    authority = echo.removeprefix("http://")
    response = redirect(gateway, [("location", f"http:\\\\{authority}/a"),
                                  ("refresh", f"0;url='{echo}/b")])
    assert response.headers["location"] == f"{PUBLIC}/a"
    assert response.headers["refresh"] == f"0;url='{PUBLIC}/b"
    assert authority not in str(response.headers)


@pytest.mark.parametrize("location", [
    "https://login.example.org/sso?from=x", "/relative/path?q=1", "next", "http://127.0.0.1:9/x",
])
def test_other_origins_and_relative_urls_pass_unchanged(gateway: Gateway, location: str):
    assert redirect(gateway, [("location", location)]).headers["location"] == location


def test_without_public_base_url_the_host_the_client_used(echo: str, inprocess_factory):
    plain = inprocess_factory({"upstreams": {"legacy": {"url": echo}},
                             "default_upstream": "legacy"})
    spoofed = {"x-forwarded-host": "evil.example", "x-forwarded-proto": "https"}
    response = redirect(plain, [("location", f"{echo}/x")], spoofed)
    assert response.headers["location"] == f"http://127.0.0.1:{plain.port}/x"
    named = redirect(plain, [("location", f"{echo}/x")], {"host": "shop.example:8443"})
    assert named.headers["location"] == "http://shop.example:8443/x"
    odd = redirect(plain, [("location", f"{echo}/x")], {"host": "a@evil.example"})
    assert odd.headers["location"] == "/x"  # no usable Host: a path the client resolves


def test_forwarded_host_and_proto_from_a_trusted_proxy_are_honoured(echo: str, inprocess_factory):
    behind = inprocess_factory({"upstreams": {"legacy": {"url": echo}},
                              "default_upstream": "legacy",
                              "proxy": {"trusted_proxies": ["127.0.0.0/8"]}})
    forwarded = {"x-forwarded-host": "www.example.com", "x-forwarded-proto": "https"}
    response = redirect(behind, [("location", f"{echo}/x")], forwarded)
    assert response.headers["location"] == "https://www.example.com/x"


def test_of_forwarded_lists_the_value_the_nearest_proxy_added_counts(echo: str,
                                                                    inprocess_factory):
    behind = inprocess_factory({"upstreams": {"legacy": {"url": echo}},
                              "default_upstream": "legacy",
                              "proxy": {"trusted_proxies": ["127.0.0.0/8"]}})
    forwarded = {"x-forwarded-host": "evil.example, www.example.com",
                 "x-forwarded-proto": "http, https"}
    response = redirect(behind, [("location", f"{echo}/x")], forwarded)
    assert response.headers["location"] == "https://www.example.com/x"


def test_the_upstream_base_path_maps_onto_the_public_path(echo: str, inprocess_factory):
    based = inprocess_factory({"public_base_url": f"{PUBLIC}/shop/",
                             "upstreams": {"legacy": {"url": f"{echo}/base"}},
                             "default_upstream": "legacy"})
    under = redirect(based, [("location", f"{echo}/base/cart?id=1")])
    assert under.headers["location"] == f"{PUBLIC}/shop/cart?id=1"
    outside = redirect(based, [("location", f"{echo}/basement")])
    assert outside.headers["location"] == f"{echo}/basement"  # not a path the gateway serves


def test_rewriting_can_be_turned_off_per_upstream(echo: str, inprocess_factory):
    raw = inprocess_factory({"public_base_url": PUBLIC, "default_upstream": "legacy",
                           "upstreams": {"legacy": {"url": echo, "rewrite_redirects": False}}})
    response = redirect(raw, [("location", f"{echo}/x"), ("link", f"<{echo}/y>")])
    assert response.headers["location"] == f"{echo}/x"
    assert response.headers["link"] == f"<{echo}/y>"


# --------------------------------------------------------------------------- unit


@pytest.mark.parametrize(("upstream", "reference", "expected"), [
    ("http://up:80", "HTTP://UP/x", "https://pub/x"),  # case-insensitive, default port
    ("http://up", "http://up:80/x", "https://pub/x"),
    ("https://up", "https://up:443", "https://pub/"),
    ("http://up:81", "http://up/x", "http://up/x"),  # another port is another origin
    ("http://up", "https://up/x", "https://up/x"),  # and so is another scheme
    ("http://up:81", "//up:81/x", "https://pub/x"),  # scheme-relative naming the upstream
    ("http://[::1]:81", "http://[::1]:81/x", "https://pub/x"),
    ("http://up/base", "http://up/base", "https://pub/"),
    ("http://up/base", "http://up/base?x=1", "https://pub/?x=1"),
    ("http://up", "http://up:bad/x", "http://up:bad/x"),
    ("http://up", "/up/x", "/up/x"),
    # what browsers read as the upstream (WHATWG URL parsing of http and https)
    ("http://up:81", "http:\\\\up:81/a", "https://pub/a"),
    ("http://up:81", "http:/\\up:81\\a", "https://pub/a"),
    ("http://up:81", "http:up:81/a", "https://pub/a"),
    ("http://up:81", "HTTP:///up:81/a", "https://pub/a"),
    ("http://up:81", "\\\\up:81/a", "https://pub/a"),
    ("http://up:81", "/\\up:81/a", "https://pub/a"),
    ("http://up:81", " \x00http://u\tp:81/a\n", "https://pub/a"),
    ("http://up:81", "\\other/a", "\\other/a"),
])
def test_upstream_origin_rewrite(upstream: str, reference: str, expected: str):
    assert UpstreamOrigin.from_url(upstream).rewrite(reference, "https://pub") == expected


@pytest.mark.parametrize(("value", "expected"), [
    (b"0;URL='http://up/a'", b"0;URL='https://pub/a'"),
    (b"3, http://up/a", b"3, https://pub/a"),
    (b"10", b"10"),
    (b"0;url='http://up/a", b"0;url='https://pub/a"),  # unbalanced: the URL runs to the end
    (b"0; url=\"http://up/a\" trailing", b"0; url=\"https://pub/a\" trailing"),
    (b"0 http:\\\\up/a", b"0 https://pub/a"),
])
def test_refresh_forms(value: bytes, expected: bytes):
    upstream = UpstreamOrigin.from_url("http://up")
    assert rewrite_field(b"refresh", value, upstream, "https://pub") == expected


def test_public_base_ignores_non_http_forwarded_proto():
    assert public_base(None, "http", b"h:1", b"javascript", b"x.example") == "http://x.example"
    assert public_base(None, "http", b"", None, None) == ""
