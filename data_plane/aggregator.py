"""Streaming, weighted, idempotent FedAvg for one (job, round, attempt).

Each accepted update is folded into a float64 running sum as it arrives, so memory is one model (plus a
2 MiB scratch buffer) however many clients report. An update is validated first, then its client is
claimed in Redis (:class:`data_plane.claims.ClaimSet`), then folded: a retried upload counts once, also
when two copies race, and a rejected upload never counts.
"""

from __future__ import annotations

import asyncio
import math
import numbers
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from data_plane.claims import ClaimSet
from data_plane.tensors import Schema, check_finite, decode, schema

__all__ = ["AddResult", "Aggregate", "RoundAggregator", "UpdateRejected", "check_weight", "shielded"]

# Elements per multiply-add step. 2 MiB of float64 stays in cache between the multiply and the add; measured
# on 2 cores this folds float32 at ~2.6 GB/s against ~1.6 GB/s for a whole-tensor temporary.
_FOLD_BLOCK = 1 << 18


class UpdateRejected(ValueError):
    """An update that must not count; ``field`` names the request field at fault."""

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
    tensors: dict[str, np.ndarray]  # weighted mean, in each input tensor's dtype
    total_weight: float
    results: int
    metrics: dict[str, float]  # weighted mean of each metric over the updates that reported it


class RoundAggregator:
    def __init__(self, redis: aioredis.Redis, namespace: str, round: int, attempt: int, *,
                 reference_schema: Schema | None = None, max_update_bytes: int | None = None,
                 ttl_s: float = 86400.0) -> None:
        self._claims = ClaimSet(redis, namespace, round, attempt, ttl_s)
        self.reference_schema = reference_schema  # None: the first accepted update sets it
        self._max_bytes = max_update_bytes
        self._sums: dict[str, np.ndarray] = {}
        self._schema: Schema | None = None
        self._scratch = np.empty(_FOLD_BLOCK, np.float64)
        self._weight = 0.0
        self._metric_sums: dict[str, float] = {}
        self._metric_weights: dict[str, float] = {}
        self._results = 0
        self._aggregate: Aggregate | None = None
        self._discarded = False
        self._lock = asyncio.Lock()

    @property
    def results(self) -> int:
        return self._results

    @property
    def _closed(self) -> bool:
        return self._aggregate is not None or self._discarded

    async def add(self, client_id: str, payload: bytes | bytearray | memoryview, weight: float,
                  metrics: Mapping[str, float] | None = None) -> AddResult:
        """Validate, claim and fold one client's update; PayloadError or UpdateRejected leave no trace."""
        if self._closed:
            raise UpdateRejected("round", "round closed")
        check_weight(weight)
        clean_metrics = _check_metrics(metrics)
        tensors = await asyncio.to_thread(self._decode, payload)
        return await shielded(self._commit(client_id, tensors, float(weight), clean_metrics))

    def _decode(self, payload: bytes | bytearray | memoryview) -> dict[str, np.ndarray]:
        tensors = decode(payload, max_bytes=self._max_bytes)
        check_finite(tensors)
        return tensors

    async def _commit(self, client_id: str, tensors: dict[str, np.ndarray], weight: float,
                      metrics: dict[str, float]) -> AddResult:
        async with self._lock:
            if self._closed:
                raise UpdateRejected("round", "round closed")
            expected = self.reference_schema if self.reference_schema is not None else self._schema
            if expected is not None and schema(tensors) != expected:
                raise UpdateRejected("data", "schema mismatch: tensor names, dtypes or shapes differ from the model")
            if not await self._claims.claim(client_id):
                return AddResult(accepted=False, duplicate=True, results=self._results)
            try:
                await asyncio.to_thread(self._fold, tensors, weight)
            except BaseException:
                await self._claims.unclaim(client_id)
                raise
            self._weight += weight
            for name, value in metrics.items():
                self._metric_sums[name] = self._metric_sums.get(name, 0.0) + weight * value
                self._metric_weights[name] = self._metric_weights.get(name, 0.0) + weight
            self._results += 1
            await self._claims.add_weight(weight)
            return AddResult(accepted=True, duplicate=False, results=self._results)

    def _fold(self, tensors: dict[str, np.ndarray], weight: float) -> None:
        """sum += weight * update in float64, a cache-sized block at a time."""
        if not self._sums:
            # The first update initialises the sum: writing fresh pages once faults them in half the time of
            # zeros-then-add (which maps the zero page on the read, then copies it on the write).
            self._sums = {name: np.multiply(array, weight, out=np.empty(array.shape), dtype=np.float64)
                          for name, array in tensors.items()}
            self._schema = schema(tensors)
            return
        for name, array in tensors.items():
            flat_sum, flat = self._sums[name].reshape(-1), array.reshape(-1)
            for start in range(0, flat.size, _FOLD_BLOCK):
                part = flat[start: start + _FOLD_BLOCK]
                scratch = self._scratch[: part.size]
                np.multiply(part, weight, out=scratch, dtype=np.float64)
                flat_sum[start: start + part.size] += scratch

    async def finalize(self) -> Aggregate:
        """Close the round and return the weighted mean; later calls return the same Aggregate."""
        async with self._lock:
            if self._aggregate is not None:
                return self._aggregate
            if not self._results:
                raise ValueError("no update was accepted")
            tensors = await asyncio.to_thread(self._mean)
            metrics = {name: self._metric_sums[name] / self._metric_weights[name] for name in self._metric_sums}
            self._aggregate = Aggregate(tensors=tensors, total_weight=self._weight, results=self._results,
                                        metrics=metrics)
            return self._aggregate

    def _mean(self) -> dict[str, np.ndarray]:
        """Divide in place and free each sum as it is cast, so the peak stays one model in float64."""
        assert self._schema is not None
        mean = {}
        for name, (dtype, _) in self._schema.items():
            total = self._sums.pop(name)
            np.divide(total, self._weight, out=total)
            if np.dtype(dtype).kind in "iu":  # counters (e.g. batch-norm steps): round, do not truncate
                np.rint(total, out=total)
            mean[name] = total.astype(dtype)
        return mean

    async def discard(self) -> None:
        """Close the round and delete its Redis keys (the Aggregate, if any, stays readable)."""
        async with self._lock:  # after any fold in flight, so it cannot re-create the keys
            self._discarded = True
            await self._claims.delete()


_commits: set[asyncio.Task[AddResult]] = set()  # strong references to the commits in flight


async def shielded(commit: Coroutine[Any, Any, AddResult]) -> AddResult:
    """Run a commit as a task of its own that the caller's cancellation does not reach.

    Once claimed, an update must be kept and counted whole: a caller that gives up (a cancelled RPC) must
    not leave a claim without its update, or an update without its count.
    """
    task = asyncio.ensure_future(commit)
    _commits.add(task)
    task.add_done_callback(_commits.discard)
    return await asyncio.shield(task)


def check_weight(weight: float) -> None:
    if not _is_real(weight) or not math.isfinite(weight) or weight <= 0:
        raise UpdateRejected("num_samples", f"weight must be positive and finite, got {weight!r}")


def _check_metrics(metrics: Mapping[str, float] | None) -> dict[str, float]:
    """Numeric metrics only, checked before the claim; a NaN metric is dropped rather than poisoning the mean."""
    clean = {}
    for name, value in (metrics or {}).items():
        if not isinstance(name, str) or not _is_real(value):
            raise UpdateRejected("metrics_json", f"metric {name!r} is not a number: {value!r}")
        if math.isfinite(value):
            clean[name] = float(value)
    return clean


def _is_real(value: object) -> bool:
    """Python and numpy ints and floats; not booleans, strings or None."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
