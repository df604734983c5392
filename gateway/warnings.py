"""Config warnings of the core: a config that loads and serves, but not as it should.

`aigw validate` prints them (and fails on them with `--strict`); `aigw run` logs them once.
Spec surfaces add theirs through `Surface.warnings`.
"""

from __future__ import annotations

from ipaddress import ip_address
from urllib.parse import urlsplit

from gateway.settings import Settings

Problem = tuple[str, str]  # (dotted path in the file, message)


def core_warnings(settings: Settings) -> list[Problem]:
    found = []
    url = settings.public_base_url
    if url and urlsplit(url).scheme == "http" and not is_loopback(urlsplit(url).hostname):
        found.append(("public_base_url",
                      f"expected an https:// URL, got {url!r}: discovery documents and the "
                      "URLs they give must be served over HTTPS (AI Discovery §6.4, AIDRE §3.1)"))
    return found


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False
