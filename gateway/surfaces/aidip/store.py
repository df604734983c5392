"""Where registrations live: process memory, or Redis shared by every replica.

A record is {"metadata": agent metadata as clients see it, "owner": who registered it,
"endpoints": {operation: upstream URL}}; the upstream URLs never leave the gateway.
A store that cannot answer raises `RegistryUnavailable`; the surface fails closed with a 503.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from gateway.errors import GatewayError

Record = dict[str, Any]


class RegistryUnavailable(GatewayError):
    def __init__(self) -> None:
        super().__init__(503, "registry_unavailable", "The agent registry is unavailable.")


class AgentStore(Protocol):
    async def get(self, agent_id: str) -> Record | None: ...

    async def all(self) -> list[Record]: ...

    async def put(self, agent_id: str, record: Record) -> bool:
        """Store the record; True when it is new."""

    async def delete(self, agent_id: str) -> bool: ...

    async def count(self) -> int: ...

    async def aclose(self) -> None: ...


class MemoryStore:
    def __init__(self) -> None:
        self._records: dict[str, bytes] = {}  # serialized, so callers never share a dict

    async def get(self, agent_id: str) -> Record | None:
        raw = self._records.get(agent_id)
        return None if raw is None else orjson.loads(raw)

    async def all(self) -> list[Record]:
        return [orjson.loads(raw) for raw in self._records.values()]

    async def put(self, agent_id: str, record: Record) -> bool:
        new = agent_id not in self._records
        self._records[agent_id] = orjson.dumps(record)
        return new

    async def delete(self, agent_id: str) -> bool:
        return self._records.pop(agent_id, None) is not None

    async def count(self) -> int:
        return len(self._records)

    async def aclose(self) -> None:
        pass


class RedisStore:
    """One hash, `{prefix}agents`, field = agent id, value = the record as JSON.

    One key, so one cluster slot: every command here works unchanged on a Redis Cluster.
    """

    def __init__(self, url: str, prefix: str, timeout: float) -> None:
        from gateway.redis_url import connect

        self._redis = connect(url, timeout)
        self._key = f"{prefix}agents"

    async def get(self, agent_id: str) -> Record | None:
        raw = await self._call(self._redis.hget(self._key, agent_id))
        return None if raw is None else orjson.loads(raw)

    async def all(self) -> list[Record]:
        raw = await self._call(self._redis.hvals(self._key))
        return [orjson.loads(value) for value in raw]

    async def put(self, agent_id: str, record: Record) -> bool:
        added = await self._call(self._redis.hset(self._key, agent_id, orjson.dumps(record)))
        return bool(added)

    async def delete(self, agent_id: str) -> bool:
        return bool(await self._call(self._redis.hdel(self._key, agent_id)))

    async def count(self) -> int:
        return int(await self._call(self._redis.hlen(self._key)))

    async def aclose(self) -> None:
        await self._redis.aclose()

    async def _call(self, pending: Any) -> Any:
        from redis.exceptions import RedisError

        try:
            return await pending
        except (RedisError, OSError):
            raise RegistryUnavailable() from None


def create_store(redis_url: str | None, prefix: str, timeout: float) -> AgentStore:
    if redis_url is None:
        return MemoryStore()
    return RedisStore(redis_url, prefix, timeout)
