"""Who one round attempt counted, kept in Redis so that every update counts once.

Both ways of keeping updates (:class:`data_plane.aggregator.RoundAggregator` folds them,
:class:`data_plane.collector.RoundCollector` keeps them whole) validate first, then claim the client
here, then keep the update: a retried upload counts once, also when two copies race, and a rejected one
never counts. The keys outlive the round (until their TTL), so a retry after the close is still a
duplicate. A claim may carry a record of where its update is kept (written in the same transaction), from
which another process can rebuild the round's aggregate::

    {namespace}:r{round}:a{attempt}:accepted   set   client ids whose update counted (SCARD: results)
    {namespace}:r{round}:a{attempt}:agg        hash  weight (HINCRBYFLOAT: total aggregation weight)
    {namespace}:r{round}:a{attempt}:kept       hash  client id -> record of its kept update
"""

from __future__ import annotations

import redis.asyncio as aioredis

__all__ = ["ClaimSet", "accepted_key"]


def accepted_key(namespace: str, round: int, attempt: int) -> str:
    """The Redis set of clients whose update one round attempt counted."""
    return f"{namespace}:r{round}:a{attempt}:accepted"


class ClaimSet:
    def __init__(self, redis: aioredis.Redis, namespace: str, round: int, attempt: int, ttl_s: float) -> None:
        self._redis = redis
        self._accepted_key = accepted_key(namespace, round, attempt)
        self._progress_key = f"{namespace}:r{round}:a{attempt}:agg"
        self._kept_key = f"{namespace}:r{round}:a{attempt}:kept"
        self._ttl_ms = max(1, int(ttl_s * 1000))

    async def claim(self, client_id: str, record: str = "") -> bool:
        """True for the first claim of ``client_id``; False for a duplicate. ``record`` (where the update is
        kept) is stored with a first claim, atomically."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.sadd(self._accepted_key, client_id)
            pipe.pexpire(self._accepted_key, self._ttl_ms)
            if record:
                pipe.hsetnx(self._kept_key, client_id, record)
                pipe.pexpire(self._kept_key, self._ttl_ms)
            claimed = (await pipe.execute())[0]
        return bool(claimed)

    async def unclaim(self, client_id: str) -> None:
        """Undo a claim whose update could not be kept."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.srem(self._accepted_key, client_id)
            pipe.hdel(self._kept_key, client_id)
            await pipe.execute()

    async def kept(self) -> dict[str, str]:
        """Client id -> record, of the claims that carried one."""
        return {_text(client): _text(record) for client, record in (await self._redis.hgetall(self._kept_key)).items()}

    async def add_weight(self, weight: float) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hincrbyfloat(self._progress_key, "weight", weight)
            pipe.pexpire(self._progress_key, self._ttl_ms)
            await pipe.execute()

    async def delete(self) -> None:
        await self._redis.delete(self._accepted_key, self._progress_key, self._kept_key)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
