"""Keep each accepted update whole, for jobs whose own server aggregates (``aggregation: collect``).

A Flower ServerApp receives every reply and runs its own strategy, so the data plane hands the replies
back untouched instead of averaging them. ``RoundCollector`` has the interface and the guarantees of
:class:`data_plane.aggregator.RoundAggregator` (both are :class:`data_plane.updates.RoundUpdates`:
validate, claim, then keep; a retry counts once; ``finalize`` closes and is idempotent; ``discard``
deletes the keys) and finalizes to ``client_id -> uint8 payload`` tensors: the round's "aggregate" blob
is the set of replies, read back with the ordinary ``AwaitAggregate``. Memory is the replies of one
round, which the job's server holds anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import numpy as np
import redis.asyncio as aioredis

from data_plane.tensors import decode
from data_plane.updates import Aggregate, Payload, RoundUpdates

__all__ = ["RoundCollector"]


class RoundCollector(RoundUpdates[bytes]):
    def __init__(self, redis: aioredis.Redis, namespace: str, round: int, attempt: int, *,
                 max_update_bytes: int | None = None, ttl_s: float = 86400.0) -> None:
        super().__init__(redis, namespace, round, attempt, max_update_bytes=max_update_bytes, ttl_s=ttl_s)
        self._payloads: dict[str, bytes] = {}

    @property
    def results(self) -> int:
        return len(self._payloads)

    async def _prepare(self, payload: Payload, metrics: Mapping[str, float] | None) -> bytes:
        """A well-formed safetensors payload; replies follow no model schema, and metrics are not kept."""
        data = bytes(payload)
        await asyncio.to_thread(decode, data, max_bytes=self._max_bytes)
        return data

    async def _commit(self, client_id: str, prepared: bytes, weight: float) -> None:
        self._payloads[client_id] = prepared

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
