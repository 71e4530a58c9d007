"""Streaming, weighted, idempotent FedAvg for one (job, round, attempt).

Each accepted update is folded into a float64 running sum as it arrives, so memory is one model (plus
one scratch tensor) however many clients report. Idempotency is claimed in Redis (SADD of the client
id) after the update validated and before it is folded: a retried upload is counted once, also when two
copies race, and a rejected upload never counts.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import redis.asyncio as aioredis

from data_plane.tensors import check_finite, decode, schema

__all__ = ["AddResult", "Aggregate", "RoundAggregator", "UpdateRejected"]

Schema = dict[str, tuple[str, tuple[int, ...]]]
_FOLD_BLOCK = 1 << 18  # 2 MiB of float64: stays in cache between the multiply and the add


class UpdateRejected(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class AddResult:
    accepted: bool
    duplicate: bool
    results: int


@dataclass(frozen=True)
class Aggregate:
    tensors: dict[str, np.ndarray]
    total_weight: float
    results: int
    metrics: dict[str, float]


class RoundAggregator:
    def __init__(self, redis: aioredis.Redis, namespace: str, round: int, attempt: int, *,
                 reference_schema: Schema | None = None, max_update_bytes: int | None = None,
                 ttl_s: float = 86400.0) -> None:
        self._redis = redis
        self._accepted_key = f"{namespace}:r{round}:a{attempt}:accepted"
        self._progress_key = f"{namespace}:r{round}:a{attempt}:agg"
        self._ttl_ms = int(ttl_s * 1000)
        self.reference_schema = reference_schema
        self._max_bytes = max_update_bytes
        self._sums: dict[str, np.ndarray] = {}
        self._scratch = np.empty(_FOLD_BLOCK, np.float64)
        self._dtypes: dict[str, np.dtype] = {}
        self._weight = 0.0
        self._metric_sums: dict[str, float] = {}
        self._metric_weights: dict[str, float] = {}
        self._results = 0
        self._closed = False
        self._lock = asyncio.Lock()

    @property
    def results(self) -> int:
        return self._results

    async def add(self, client_id: str, payload: bytes | bytearray | memoryview, weight: float,
                  metrics: Mapping[str, float] | None = None) -> AddResult:
        if self._closed:
            raise UpdateRejected("round", "round closed")
        if not math.isfinite(weight) or weight <= 0:
            raise UpdateRejected("num_samples", f"weight must be positive and finite, got {weight}")
        tensors = await asyncio.to_thread(self._validate, payload)
        async with self._lock:
            if self._closed:
                raise UpdateRejected("round", "round closed")
            expected = self.reference_schema
            if expected is None and self._results:
                expected = {name: (self._dtypes[name].str, s.shape) for name, s in self._sums.items()}
            if expected is not None and schema(tensors) != expected:
                raise UpdateRejected("data", "schema mismatch: tensor names, dtypes or shapes differ from the model")
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.sadd(self._accepted_key, client_id)
                pipe.pexpire(self._accepted_key, self._ttl_ms)
                claimed, _ = await pipe.execute()
            if not claimed:
                return AddResult(accepted=False, duplicate=True, results=self._results)
            try:
                await asyncio.to_thread(self._fold, tensors, weight)
            except BaseException:
                await self._redis.srem(self._accepted_key, client_id)
                raise
            self._weight += weight
            for name, value in (metrics or {}).items():
                if math.isfinite(value):
                    self._metric_sums[name] = self._metric_sums.get(name, 0.0) + weight * value
                    self._metric_weights[name] = self._metric_weights.get(name, 0.0) + weight
            self._results += 1
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.hset(self._progress_key, mapping={"results": self._results, "weight": self._weight})
                pipe.pexpire(self._progress_key, self._ttl_ms)
                await pipe.execute()
            return AddResult(accepted=True, duplicate=False, results=self._results)

    def _validate(self, payload: bytes | bytearray | memoryview) -> dict[str, np.ndarray]:
        tensors = decode(payload, max_bytes=self._max_bytes)
        check_finite(tensors)
        return tensors

    def _fold(self, tensors: dict[str, np.ndarray], weight: float) -> None:
        """acc += weight * update in float64, through a small cache-sized scratch buffer."""
        if not self._sums:
            self._sums = {name: np.zeros(array.shape, np.float64) for name, array in tensors.items()}
            self._dtypes = {name: array.dtype for name, array in tensors.items()}
        scratch = self._scratch
        for name, array in tensors.items():
            flat_sum, flat = self._sums[name].reshape(-1), array.reshape(-1)
            for start in range(0, flat.size, _FOLD_BLOCK):
                part = flat[start: start + _FOLD_BLOCK]
                tmp = scratch[: part.size]
                np.multiply(part, weight, out=tmp, dtype=np.float64)
                flat_sum[start: start + part.size] += tmp

    async def finalize(self) -> Aggregate:
        async with self._lock:
            if not self._results:
                raise ValueError("no update was accepted")
            self._closed = True
            total = self._weight
            tensors = await asyncio.to_thread(
                lambda: {name: (s / total).astype(self._dtypes[name]) for name, s in self._sums.items()}
            )
            self._sums.clear()
            metrics = {name: self._metric_sums[name] / self._metric_weights[name] for name in self._metric_sums}
            return Aggregate(tensors=tensors, total_weight=total, results=self._results, metrics=metrics)

    async def discard(self) -> None:
        self._closed = True
        await self._redis.delete(self._accepted_key, self._progress_key)
