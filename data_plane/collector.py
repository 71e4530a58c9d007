"""Keep each accepted update whole, for jobs whose own server aggregates (``aggregation: collect``).

A Flower ServerApp receives every reply and runs its own strategy, so the data plane hands the replies
back untouched instead of averaging them. ``RoundCollector`` has the interface and the guarantees of
:class:`data_plane.aggregator.RoundAggregator` (validate, claim in the same :class:`ClaimSet`, then
keep; a retry counts once; ``finalize`` closes and is idempotent; ``discard`` deletes the keys) and
finalizes to ``client_id -> uint8 payload`` tensors: the round's "aggregate" blob is the set of replies,
read back with the ordinary ``AwaitAggregate``. Memory is the replies of one round, which the job's
server holds anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import numpy as np
import redis.asyncio as aioredis

from data_plane.aggregator import AddResult, Aggregate, UpdateRejected, check_weight, shielded
from data_plane.claims import ClaimSet
from data_plane.tensors import Schema, decode

__all__ = ["RoundCollector"]


class RoundCollector:
    def __init__(self, redis: aioredis.Redis, namespace: str, round: int, attempt: int, *,
                 max_update_bytes: int | None = None, ttl_s: float = 86400.0) -> None:
        self._claims = ClaimSet(redis, namespace, round, attempt, ttl_s)
        self._max_bytes = max_update_bytes
        self.reference_schema: Schema | None = None  # replies follow no model schema; set and ignored
        self._payloads: dict[str, bytes] = {}
        self._aggregate: Aggregate | None = None
        self._discarded = False
        self._lock = asyncio.Lock()

    @property
    def results(self) -> int:
        return len(self._payloads)

    @property
    def _closed(self) -> bool:
        return self._aggregate is not None or self._discarded

    async def add(self, client_id: str, payload: bytes | bytearray | memoryview, weight: float,
                  metrics: Mapping[str, float] | None = None) -> AddResult:
        """Validate (a well-formed safetensors payload), claim and keep one client's update."""
        if self._closed:
            raise UpdateRejected("round", "round closed")
        check_weight(weight)
        data = bytes(payload)
        await asyncio.to_thread(decode, data, max_bytes=self._max_bytes)
        return await shielded(self._commit(client_id, data, float(weight)))

    async def _commit(self, client_id: str, data: bytes, weight: float) -> AddResult:
        async with self._lock:
            if self._closed:
                raise UpdateRejected("round", "round closed")
            if not await self._claims.claim(client_id):
                return AddResult(accepted=False, duplicate=True, results=self.results)
            self._payloads[client_id] = data
            await self._claims.add_weight(weight)
            return AddResult(accepted=True, duplicate=False, results=self.results)

    async def finalize(self) -> Aggregate:
        """Close the round; the payloads by client. Later calls return the same Aggregate."""
        async with self._lock:
            if self._aggregate is None:
                if not self._payloads:
                    raise ValueError("no update was accepted")
                tensors = {client: np.frombuffer(data, np.uint8) for client, data in self._payloads.items()}
                self._aggregate = Aggregate(tensors=tensors, total_weight=float(len(tensors)), results=len(tensors),
                                            metrics={})
            return self._aggregate

    async def discard(self) -> None:
        async with self._lock:
            self._discarded = True
            await self._claims.delete()
