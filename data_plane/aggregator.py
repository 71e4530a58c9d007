"""Streaming, weighted, idempotent FedAvg for one (job, round, attempt).

Each accepted update is folded into a float64 running sum as it arrives (:class:`data_plane.fold.WeightedSum`,
the arithmetic the sharded tier shares), so memory is one model (plus a 2 MiB scratch buffer) however many
clients report; a mean that is still not finite (an update near float64's limits) fails the round
(:class:`AggregateFailed`) rather than being published. An update is validated first, then its client is
claimed in Redis, then folded
(:class:`data_plane.updates.RoundUpdates`): a retried upload counts once, also when two copies race, and
a rejected upload never counts.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping

import numpy as np
import redis.asyncio as aioredis

from data_plane.fold import MetricMeans, WeightedSum
from data_plane.tensors import Schema, check_finite, decode, schema
from data_plane.updates import AddResult, Aggregate, AggregateFailed, Payload, RoundUpdates, UpdateRejected, is_real

__all__ = ["AddResult", "Aggregate", "AggregateFailed", "RoundAggregator", "UpdateRejected", "check_metrics"]


class RoundAggregator(RoundUpdates[tuple[dict[str, np.ndarray], dict[str, float]]]):
    def __init__(self, redis: aioredis.Redis, namespace: str, round: int, attempt: int, *,
                 reference_schema: Schema | None = None, max_update_bytes: int | None = None,
                 ttl_s: float = 86400.0) -> None:
        super().__init__(redis, namespace, round, attempt, reference_schema=reference_schema,
                         max_update_bytes=max_update_bytes, ttl_s=ttl_s)  # no reference: the first update sets it
        self._sum = WeightedSum()
        self._metrics = MetricMeans()
        self._results = 0

    @property
    def results(self) -> int:
        return self._results

    async def _prepare(self, payload: Payload, metrics: Mapping[str, float] | None
                       ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        clean_metrics = check_metrics(metrics)
        return await asyncio.to_thread(self._decode, payload), clean_metrics

    def _decode(self, payload: Payload) -> dict[str, np.ndarray]:
        tensors = decode(payload, max_bytes=self._max_bytes)
        check_finite(tensors)
        return tensors

    def _check(self, prepared: tuple[dict[str, np.ndarray], dict[str, float]]) -> None:
        expected = self.reference_schema if self.reference_schema is not None else self._sum.schema
        if expected is not None and schema(prepared[0]) != expected:
            raise UpdateRejected("data", "schema mismatch: tensor names, dtypes or shapes differ from the model")

    async def _commit(self, client_id: str, prepared: tuple[dict[str, np.ndarray], dict[str, float]],
                      weight: float) -> None:
        tensors, metrics = prepared
        await asyncio.to_thread(self._fold, tensors, weight)
        self._metrics.add(metrics, weight)
        self._results += 1

    def _fold(self, tensors: dict[str, np.ndarray], weight: float) -> None:
        self._sum.fold(tensors, weight)

    async def finalize(self) -> Aggregate:
        """Close the round and return the weighted mean; later calls return the same Aggregate.

        AggregateFailed (and the round closed) when the mean is not finite."""
        async with self._lock:
            if self._aggregate is not None:
                return self._aggregate
            if not self._results:
                raise ValueError("no update was accepted")
            tensors = await asyncio.to_thread(self._sum.mean)
            if not all(np.isfinite(array).all() for array in tensors.values() if array.dtype.kind == "f"):
                self._discarded = True
                raise AggregateFailed(f"the mean of {self._results} updates is not finite: some values overflow")
            self._aggregate = Aggregate(tensors=tensors, total_weight=self._sum.weight * self._sum.scale,
                                        results=self._results, metrics=self._metrics.means())
            return self._aggregate


def check_metrics(metrics: Mapping[str, float] | None) -> dict[str, float]:
    """Numeric metrics only, checked before the claim; a NaN metric is dropped rather than poisoning the mean."""
    clean = {}
    for name, value in (metrics or {}).items():
        if not isinstance(name, str) or not is_real(value):
            raise UpdateRejected("metrics_json", f"metric {name!r} is not a number: {value!r}")
        if math.isfinite(value):
            clean[name] = float(value)
    return clean
