"""One Redis client from one URL: a single server, a Redis Cluster, or a primary behind Sentinel.

The schemes are the ones `limits` storage URLs use, so one URL fits every Redis-backed feature:

    redis://[[user]:password@]host:port[/db]        one server (rediss:// for TLS)
    redis+cluster://[[user]:password@]host:port[,host:port...]
                                                    a cluster: the nodes given are seeds, the
                                                    rest is discovered; a failover is followed
    redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]
                                                    the primary the sentinels name `service`,
                                                    found again after a failover

A password in a sentinel URL is sent to the sentinels and to the primary, as `limits` does.
Keys one command or script touches together must share a cluster slot: put the shared part in
a hash tag, `{...}` (`hash_tagged`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:  # redis is imported when a client is made, not when config is checked
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

SCHEMES = ("redis", "rediss", "redis+unix", "unix", "redis+cluster", "redis+sentinel")


class _Auth(TypedDict, total=False):
    username: str
    password: str


class RedisUrlError(ValueError):
    """The URL names no Redis this module can reach; the message says what was expected."""


def connect(url: str, timeout: float) -> Redis | RedisCluster:
    """A client for the URL, with `timeout` seconds for connecting and for each reply."""
    from redis.asyncio import Redis
    from redis.asyncio.cluster import ClusterNode, RedisCluster
    from redis.asyncio.sentinel import Sentinel

    parts = urlsplit(url)
    options: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if parts.scheme == "redis+cluster":
        return RedisCluster(startup_nodes=[ClusterNode(host, port) for host, port in _nodes(url)],
                            **_auth(url), **options)
    if parts.scheme == "redis+sentinel":
        service, db = _service(url)
        sentinel = Sentinel(_nodes(url), sentinel_kwargs={**_auth(url), **options},
                            **_auth(url), **options)
        return sentinel.master_for(service, db=db)
    if parts.scheme in ("redis", "rediss", "unix", "redis+unix"):
        return Redis.from_url(redis_py_url(url), **options)
    raise RedisUrlError(f"expected a URL with a scheme among {', '.join(SCHEMES)}")


def redis_py_url(url: str) -> str:
    """A single server's URL as redis-py reads it (`redis+unix:` is its `unix:`)."""
    return "unix:" + url.removeprefix("redis+unix:") if url.startswith("redis+unix:") else url


def check(url: str) -> str:
    """The URL unchanged, or RedisUrlError naming what is wrong (for config validators)."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise RedisUrlError(f"expected a Redis URL with a scheme among {', '.join(SCHEMES)}")
    if parts.scheme in ("redis+cluster", "redis+sentinel"):
        _nodes(url)
    elif parts.scheme in ("redis", "rediss") and not parts.hostname:
        raise RedisUrlError("expected host:port in the Redis URL")
    if parts.scheme == "redis+sentinel":
        _service(url)
    return url


def hash_tagged(key: str) -> str:
    """`key` as a hash tag, so every key built by appending to it lands on the same slot."""
    return "{" + key.replace("{", "(").replace("}", ")") + "}"


def _nodes(url: str) -> list[tuple[str, int]]:
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    nodes = []
    for hostport in filter(None, netloc.split(",")):
        try:
            parts = urlsplit(f"//{hostport}")
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise RedisUrlError("expected host:port[,host:port...] (valid port numbers) in the "
                                "Redis URL")
        nodes.append((parts.hostname, port))
    if not nodes:
        raise RedisUrlError("expected host:port[,host:port...] in the Redis URL")
    return nodes


def _service(url: str) -> tuple[str, int]:
    service, _, db = urlsplit(url).path.strip("/").partition("/")
    if not service:
        raise RedisUrlError("expected the sentinel service name as the URL path, "
                            "e.g. redis+sentinel://host:26379/mymaster")
    if db and not db.isdigit():
        raise RedisUrlError("expected a database number after the service name")
    return service, int(db or 0)


def _auth(url: str) -> _Auth:
    userinfo, at, _ = urlsplit(url).netloc.rpartition("@")
    if not at:
        return {}
    user, colon, password = userinfo.partition(":")
    auth: _Auth = {"password": unquote(password)} if colon else {}
    if user:
        auth["username"] = unquote(user)
    return auth
