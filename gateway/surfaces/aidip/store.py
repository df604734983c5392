"""Where registrations live: process memory, or Redis shared by every replica.

A record is {"metadata": agent metadata as clients see it, "owner": who registered it (typed,
owners.py), "format": 2, "endpoints": {operation: upstream URL}, "methods": {operation: GET,
POST or PUT}} (records without "methods" are called with POST); the upstream URLs and methods
never leave the gateway.
A store that cannot answer raises `RegistryUnavailable`; the surface fails closed with a 503.

Every write is atomic in the store itself, never a read in the handler followed by a write:
`create` claims an id only when it is free (and the registry has room), `replace` and `delete`
apply only while the record is still the one read (its `stamp`, the stored bytes), so two
owners racing for one id, or an owner change between a check and a write, cannot overwrite.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import orjson

from gateway.errors import GatewayError

Record = dict[str, Any]


class RegistryUnavailable(GatewayError):
    def __init__(self) -> None:
        super().__init__(503, "registry_unavailable", "The agent registry is unavailable.")


class Created(StrEnum):
    CREATED = "created"
    TAKEN = "taken"  # the id is in use
    FULL = "full"  # the registry holds its limit of agents


@dataclass(frozen=True, slots=True)
class Stored:
    record: Record
    stamp: bytes  # the record as stored: what `replace` and `delete` compare against


class AgentStore(Protocol):
    async def get(self, agent_id: str) -> Stored | None: ...

    async def all(self) -> list[Record]: ...

    async def create(self, agent_id: str, record: Record, limit: int) -> Created:
        """Store the record only if no agent has this id and fewer than `limit` exist."""

    async def replace(self, agent_id: str, record: Record, stamp: bytes) -> bool:
        """Store the record only if the stored one is still `stamp`; False otherwise."""

    async def delete(self, agent_id: str, stamp: bytes) -> bool:
        """Delete only if the stored record is still `stamp`; False otherwise."""

    async def aclose(self) -> None: ...


class MemoryStore:
    """One dict; every method below runs without awaiting, so each is atomic on the loop."""

    def __init__(self) -> None:
        self._records: dict[str, bytes] = {}  # serialized, so callers never share a dict

    async def get(self, agent_id: str) -> Stored | None:
        raw = self._records.get(agent_id)
        return None if raw is None else Stored(orjson.loads(raw), raw)

    async def all(self) -> list[Record]:
        return [orjson.loads(raw) for raw in self._records.values()]

    async def create(self, agent_id: str, record: Record, limit: int) -> Created:
        if agent_id in self._records:
            return Created.TAKEN
        if len(self._records) >= limit:
            return Created.FULL
        self._records[agent_id] = orjson.dumps(record)
        return Created.CREATED

    async def replace(self, agent_id: str, record: Record, stamp: bytes) -> bool:
        if self._records.get(agent_id) != stamp:
            return False
        self._records[agent_id] = orjson.dumps(record)
        return True

    async def delete(self, agent_id: str, stamp: bytes) -> bool:
        if self._records.get(agent_id) != stamp:
            return False
        del self._records[agent_id]
        return True

    async def aclose(self) -> None:
        pass


# KEYS[1] the hash; ARGV[1] the agent id, ARGV[2] the record, ARGV[3] the limit.
_CREATE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'taken' end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 'full' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 'created'
"""
# KEYS[1] the hash; ARGV[1] the agent id, ARGV[2] the stamp, ARGV[3] the record ('' deletes).
_COMPARE_AND_SET = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], ARGV[1])
else redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
return 1
"""


class RedisStore:
    """One hash, `{prefix}agents`, field = agent id, value = the record as JSON.

    One key, so one cluster slot: every command and script here works unchanged on a Redis
    Cluster. The writes are Lua scripts, which Redis runs atomically.
    """

    def __init__(self, url: str, prefix: str, timeout: float) -> None:
        from gateway.redis_url import connect

        self._redis = connect(url, timeout)
        self._key = f"{prefix}agents"
        self._create = self._redis.register_script(_CREATE)
        self._compare_and_set = self._redis.register_script(_COMPARE_AND_SET)

    async def get(self, agent_id: str) -> Stored | None:
        raw = await self._call(self._redis.hget(self._key, agent_id))
        return None if raw is None else Stored(orjson.loads(raw), raw)

    async def all(self) -> list[Record]:
        raw = await self._call(self._redis.hvals(self._key))
        return [orjson.loads(value) for value in raw]

    async def create(self, agent_id: str, record: Record, limit: int) -> Created:
        outcome = await self._call(self._create(
            keys=[self._key], args=[agent_id, orjson.dumps(record), limit]))
        return Created(outcome.decode() if isinstance(outcome, bytes) else outcome)

    async def replace(self, agent_id: str, record: Record, stamp: bytes) -> bool:
        return bool(await self._call(self._compare_and_set(
            keys=[self._key], args=[agent_id, stamp, orjson.dumps(record)])))

    async def delete(self, agent_id: str, stamp: bytes) -> bool:
        return bool(await self._call(self._compare_and_set(
            keys=[self._key], args=[agent_id, stamp, b""])))

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
