"""FedAvg for one (job, round, attempt) over the job's live aggregator shards.

The same steps as :class:`data_plane.aggregator.RoundAggregator` (validate here, claim in Redis, keep),
but keeping an update means sending its safetensors bytes to the client's shard
(:meth:`ShardPool.shard_of`), which folds it at once; :meth:`finalize` AllReduces the shards' partial sums
and returns the same :class:`Aggregate` the single-process aggregator gives (bit-identical when the
arithmetic is exact; see :mod:`data_plane.collectives.tier`). Metrics are averaged here, with the same
arithmetic (:class:`data_plane.fold.MetricMeans`). Each shard's cohort completion time (its last fold,
from the attempt's opening) feeds the pool's straggler tracker at the close.

A broken pool loses the updates folded in it: an add raises :class:`ShardsFailed` (the claim is given
back) and :meth:`finalize` raises :class:`AggregateFailed`, so the attempt fails and is re-run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import numpy as np
import redis.asyncio as aioredis

from data_plane.aggregator import check_metrics
from data_plane.collectives.shard_pool import ShardPool, ShardsFailed
from data_plane.fold import MetricMeans
from data_plane.tensors import Schema, check_finite, decode, schema
from data_plane.updates import Aggregate, AggregateFailed, Payload, RoundUpdates, UpdateRejected

__all__ = ["ShardedAggregator"]

_Prepared = tuple[Payload, Schema, dict[str, float]]


class ShardedAggregator(RoundUpdates[_Prepared]):
    def __init__(self, redis: aioredis.Redis, namespace: str, round: int, attempt: int, pool: ShardPool, *,
                 reference_schema: Schema | None = None, max_update_bytes: int | None = None,
                 ttl_s: float = 86400.0) -> None:
        super().__init__(redis, namespace, round, attempt, reference_schema=reference_schema,
                         max_update_bytes=max_update_bytes, ttl_s=ttl_s)
        self.pool = pool
        self._round, self._attempt, self._generation = round, attempt, pool.generation()
        self._schema: Schema | None = None  # the first update's, when the model's is not known
        self._metrics = MetricMeans()
        self._counts = [0] * pool.n
        self._opened = time.time()
        self._completed: dict[int, float] = {}  # shard -> its last fold
        self._results = 0

    @property
    def results(self) -> int:
        return self._results

    async def _prepare(self, payload: Payload, metrics: Mapping[str, float] | None) -> _Prepared:
        clean = check_metrics(metrics)
        return payload, await asyncio.to_thread(self._validate, payload), clean

    def _validate(self, payload: Payload) -> Schema:
        tensors = decode(payload, max_bytes=self._max_bytes)
        check_finite(tensors)
        return schema(tensors)

    def _check(self, prepared: _Prepared) -> None:
        expected = self.reference_schema if self.reference_schema is not None else self._schema
        if expected is not None and prepared[1] != expected:
            raise UpdateRejected("data", "schema mismatch: tensor names, dtypes or shapes differ from the model")

    async def _commit(self, client_id: str, prepared: _Prepared, weight: float) -> None:
        payload, found, metrics = prepared
        shard = self.pool.shard_of(client_id)
        await self.pool.fold(shard, self._round, self._attempt, self._generation, payload, weight)
        self._schema = self._schema or found
        self._metrics.add(metrics, weight)
        self._counts[shard] += 1
        self._completed[shard] = time.time()
        self._results += 1

    async def finalize(self) -> Aggregate:
        """AllReduce the shards' sums and return the weighted mean; later calls return the same Aggregate.

        AggregateFailed (and the round closed) when the mean is not finite or the shards broke."""
        async with self._lock:
            if self._aggregate is not None:
                return self._aggregate
            if not self._results:
                raise ValueError("no update was accepted")
            model = self.reference_schema if self.reference_schema is not None else self._schema
            assert model is not None
            arrivals = {shard: self._completed.get(shard, self._opened) for shard in range(self.pool.n)}
            try:
                tensors, total_weight = await self.pool.reduce(self._round, self._attempt, self._generation,
                                                               self._counts, model, arrivals)
            except ShardsFailed as error:
                self._discarded = True
                raise AggregateFailed(f"the aggregator shards broke; the attempt's updates are lost: {error}"
                                      ) from error
            if not all(np.isfinite(array).all() for array in tensors.values() if array.dtype.kind == "f"):
                self._discarded = True
                raise AggregateFailed(f"the mean of {self._results} updates is not finite: some values overflow")
            self._aggregate = Aggregate(tensors=tensors, total_weight=total_weight, results=self._results,
                                        metrics=self._metrics.means())
            return self._aggregate
