"""The checker's HTTP client: one origin, bounded in time and size, credentials only there.

`aigw check` may be pointed at a hostile server, so every request has a deadline (the
connection, the headers and the whole body), a body is read up to a byte limit and no
further (gateway/check/bounded.py, which every client of the checker reads through), a
redirect is followed only within the origin (at most five, as the AI Discovery draft §2.2
allows) and never for a request with a body, and a URL a document names on another origin is
never requested: credentials cannot leave the origin they were given for.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2

from gateway.check.bounded import MAX_BYTES, BoundedTransport, TooLarge, Unreadable

MAX_REDIRECTS = 5
MAX_RETRY_AFTER = 2.0  # a 429 is retried once when it asks for at most this many seconds
USER_AGENT = "aigw-check/0.1"
ORIGIN_HEADER = "https://aigw-check.example"  # the Origin a CORS probe claims


class NotJson(ValueError):
    """A body that is not the JSON it should be; the message says why, in a few words."""


@dataclass(frozen=True, slots=True)
class Credentials:
    token: str | None = None
    api_key: str | None = None
    api_key_header: str = "X-API-Key"

    def headers(self) -> dict[str, str]:
        sent = {}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        if self.api_key:
            sent[self.api_key_header] = self.api_key
        return sent

    @property
    def given(self) -> bool:
        return bool(self.token or self.api_key)


@dataclass(frozen=True, slots=True)
class Answer:
    """What one request got: `status` 0 and `error` set when no response arrived."""

    method: str
    url: str
    status: int = 0
    headers: httpx2.Headers = field(default_factory=httpx2.Headers)
    body: bytes = b""
    error: str = ""
    truncated: bool = False

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def is_json_type(self) -> bool:
        """application/json or a +json type (application/aidre+json)."""
        kind = self.media_type
        return kind == "application/json" or (kind.startswith("application/")
                                               and kind.endswith("+json"))

    def json(self) -> Any:
        if self.truncated:
            raise NotJson(f"body larger than {MAX_BYTES} bytes")
        try:
            return json.loads(self.body.decode("utf-8"))
        except UnicodeDecodeError:
            raise NotJson("body is not UTF-8") from None
        except RecursionError:
            raise NotJson("JSON nested too deeply") from None
        except ValueError:
            raise NotJson("body is not JSON") from None

    def json_object(self) -> dict[str, Any]:
        value = self.json()
        if not isinstance(value, dict):
            raise NotJson(f"body is a JSON {type(value).__name__}, not an object")
        return value

    def describe(self) -> str:
        """`GET /path -> 404`, for messages."""
        path = urlsplit(self.url).path or "/"
        if not self.status:
            return f"{self.method} {path} -> {self.error}"
        return f"{self.method} {path} -> {self.status}" + (f" ({self.error})" if self.error
                                                            else "")


class Probe:
    """Requests to one origin (scheme, host, port) with the caller's credentials."""

    def __init__(self, origin: str, credentials: Credentials, timeout: float,
                 client: httpx2.AsyncClient) -> None:
        self.origin = origin_of(origin)
        self.credentials = credentials
        self.timeout = timeout
        self._client = client

    def resolve(self, target: str) -> str | None:
        """The absolute URL of a path or URL, or None when it is on another origin."""
        url = urljoin(self.origin + "/", target)
        return url if origin_of(url) == self.origin else None

    async def get(self, target: str, **options: Any) -> Answer:
        return await self.request("GET", target, **options)

    async def request(self, method: str, target: str, *, auth: bool = True,
                      headers: dict[str, str] | None = None, json_body: Any = None,
                      content: bytes | None = None, params: dict[str, str] | None = None,
                      ) -> Answer:
        url = self.resolve(target)
        if url is None:
            return Answer(method, target, error="on another origin: not requested")
        sent = {"Accept-Encoding": "identity", **(headers or {})}
        if auth:
            sent.update(self.credentials.headers())
        if json_body is not None:
            content = json.dumps(json_body).encode()
            sent.setdefault("Content-Type", "application/json")
        answer = await self._send(method, url, sent, content, params)
        if answer.status == 429 and _retry_after(answer) is not None:
            await asyncio.sleep(_retry_after(answer) or 0)
            answer = await self._send(method, url, sent, content, params)
        return answer

    async def _send(self, method: str, url: str, headers: dict[str, str],
                    content: bytes | None, params: dict[str, str] | None) -> Answer:
        for _ in range(MAX_REDIRECTS + 1):
            answer = await self._once(method, url, headers, content, params)
            location = answer.headers.get("location", "")
            if answer.status not in (301, 302, 303, 307, 308) or not location \
                    or content is not None or method not in ("GET", "HEAD"):
                return answer
            following = self.resolve(urljoin(url, location))
            if following is None:
                return Answer(method, url, answer.status, answer.headers, answer.body,
                              "redirect to another origin: not followed")
            url, params = following, None
        return Answer(method, url, error=f"more than {MAX_REDIRECTS} redirects")

    async def _once(self, method: str, url: str, headers: dict[str, str],
                    content: bytes | None, params: dict[str, str] | None) -> Answer:
        try:
            async with asyncio.timeout(self.timeout):
                request = self._client.build_request(method, url, headers=headers,
                                                     content=content, params=params)
                response = await self._client.send(request, stream=True)
                try:
                    body, truncated = await _read(response)
                finally:
                    await response.aclose()
                    self._client.cookies.clear()
        except (TimeoutError, httpx2.TimeoutException):
            return Answer(method, url, error=f"no answer within {self.timeout:g} s")
        except httpx2.HTTPError as exc:
            return Answer(method, url, error=_transport_error(exc))
        except Unreadable as exc:
            return Answer(method, url, error=str(exc))
        return Answer(method, str(response.url), response.status_code, response.headers, body,
                      truncated=truncated)


async def _read(response: httpx2.Response) -> tuple[bytes, bool]:
    """The body, and whether it was cut at `MAX_BYTES` (the transport stops it there)."""
    chunks: list[bytes] = []
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
    except TooLarge:
        return b"".join(chunks), True
    return b"".join(chunks), False


def _retry_after(answer: Answer) -> float | None:
    value = answer.headers.get("retry-after", "").strip()
    if not value.isdigit() or int(value) > MAX_RETRY_AFTER:
        return None
    return float(value)


def _transport_error(exc: httpx2.HTTPError) -> str:
    kind = {httpx2.ConnectError: "connection refused or failed",
            httpx2.RemoteProtocolError: "the server broke the HTTP protocol"}
    for error, text in kind.items():
        if isinstance(exc, error):
            return text
    return f"transport error ({type(exc).__name__})"


def origin_of(url: str) -> str:
    """scheme://host[:port], lower-cased, without a default port."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")


def new_client(timeout: float, headers: dict[str, str] | None = None,
               transport: BoundedTransport | None = None) -> httpx2.AsyncClient:
    """A client of the checked origin: every answer bounded (BoundedTransport), no redirects
    of its own, no proxy from the environment, no cookies kept between requests. The probes
    share one; the MCP SDK gets its own, with the credentials as default `headers`."""
    return httpx2.AsyncClient(timeout=httpx2.Timeout(timeout), follow_redirects=False,
                              trust_env=False, transport=transport or BoundedTransport(),
                              headers={"User-Agent": USER_AGENT, **(headers or {})})
