"""What every way of keeping a round attempt's updates shares: validate, claim, keep, close.

:class:`RoundUpdates` runs one update through the same steps whatever keeps it
(:class:`data_plane.aggregator.RoundAggregator` folds it into FedAvg,
:class:`data_plane.collector.RoundCollector` keeps it whole): refuse it once the round is closed, check
its weight, validate it off the event loop (a rejected update leaves no trace), then claim its client
in Redis and keep it as one task the caller's cancellation cannot cut in half.
"""

from __future__ import annotations

import asyncio
import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import redis.asyncio as aioredis

from data_plane.claims import ClaimSet
from data_plane.tensors import Schema
from propius.specs import MAX_NUM_SAMPLES

__all__ = ["AddResult", "Aggregate", "AggregateFailed", "RoundUpdates", "UpdateRejected", "is_real"]

Payload = bytes | bytearray | memoryview
P = TypeVar("P")  # an update as validated, ready to keep


class UpdateRejected(ValueError):
    """An update that must not count; ``field`` names the request field at fault."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class AggregateFailed(ValueError):
    """The accepted updates do not average to a finite model (their values overflow float64 when
    combined); the round must fail rather than publish it."""


@dataclass(frozen=True)
class AddResult:
    accepted: bool
    duplicate: bool
    results: int


@dataclass(frozen=True)
class Aggregate:
    tensors: dict[str, np.ndarray]  # weighted mean, in each input tensor's dtype (collect: the updates)
    total_weight: float
    results: int
    metrics: dict[str, float]  # weighted mean of each metric over the updates that reported it


class RoundUpdates(ABC, Generic[P]):
    def __init__(self, redis: aioredis.Redis, namespace: str, round: int, attempt: int, *,
                 reference_schema: Schema | None = None, max_update_bytes: int | None = None,
                 ttl_s: float = 86400.0) -> None:
        self._claims = ClaimSet(redis, namespace, round, attempt, ttl_s)
        self.reference_schema = reference_schema  # the model's; None: not known (yet)
        self._max_bytes = max_update_bytes
        self._aggregate: Aggregate | None = None
        self._discarded = False
        self._lock = asyncio.Lock()

    @property
    @abstractmethod
    def results(self) -> int: ...

    @property
    def _closed(self) -> bool:
        return self._aggregate is not None or self._discarded

    async def add(self, client_id: str, payload: Payload, weight: float,
                  metrics: Mapping[str, float] | None = None,
                  store: Callable[[], Awaitable[str]] | None = None) -> AddResult:
        """Validate, claim and keep one client's update; PayloadError or UpdateRejected leave no trace.

        ``store`` (optional) saves the validated update elsewhere before the claim and returns a record of
        where, which the claim keeps (:meth:`kept`): what :meth:`restore` rebuilds the round from."""
        if self._closed:
            raise UpdateRejected("round", "round closed")
        self._check_weight(weight)
        prepared = await self._prepare(payload, metrics)
        return await _shielded(self._keep(client_id, prepared, float(weight), store))

    async def restore(self, client_id: str, payload: Payload, weight: float,
                      metrics: Mapping[str, float] | None = None) -> None:
        """Fold an update that was claimed and kept by another process (whose round this one takes over)."""
        self._check_weight(weight)
        prepared = await self._prepare(payload, metrics)
        async with self._lock:
            self._check(prepared)
            await self._commit(client_id, prepared, float(weight))

    async def kept(self) -> dict[str, str]:
        """Client id -> the record its ``store`` returned, for every claimed update that was stored."""
        return await self._claims.kept()

    @staticmethod
    def _check_weight(weight: float) -> None:
        if not is_real(weight) or not math.isfinite(weight) or not 0 < weight <= MAX_NUM_SAMPLES:
            raise UpdateRejected("num_samples", f"weight must be in (0, {MAX_NUM_SAMPLES:g}], got {weight!r}")

    async def _keep(self, client_id: str, prepared: P, weight: float,
                    store: Callable[[], Awaitable[str]] | None) -> AddResult:
        async with self._lock:
            if self._closed:
                raise UpdateRejected("round", "round closed")
            self._check(prepared)
            record = await store() if store is not None else ""
            if not await self._claims.claim(client_id, record):
                return AddResult(accepted=False, duplicate=True, results=self.results)
            try:
                await self._commit(client_id, prepared, weight)
            except BaseException:
                await self._claims.unclaim(client_id)
                raise
            await self._claims.add_weight(weight)
            return AddResult(accepted=True, duplicate=False, results=self.results)

    @abstractmethod
    async def _prepare(self, payload: Payload, metrics: Mapping[str, float] | None) -> P:
        """Validate an update (before any claim); raise PayloadError or UpdateRejected."""

    def _check(self, prepared: P) -> None:
        """Checks that need the round's state (under its lock, before the claim)."""

    @abstractmethod
    async def _commit(self, client_id: str, prepared: P, weight: float) -> None:
        """Keep a claimed update; a failure gives the claim back."""

    @abstractmethod
    async def finalize(self) -> Aggregate:
        """Close the round; later calls return the same Aggregate."""

    async def discard(self) -> None:
        """Close the round and delete its Redis keys (the Aggregate, if any, stays readable)."""
        async with self._lock:  # after any commit in flight, so it cannot re-create the keys
            self._discarded = True
            await self._claims.delete()


_keeping: set[asyncio.Task[AddResult]] = set()  # strong references to the commits in flight


async def _shielded(keep: Coroutine[Any, Any, AddResult]) -> AddResult:
    """Run ``keep`` as a task of its own: once claimed, an update must be kept and counted whole, so a
    caller that gives up (a cancelled RPC) must not leave a claim without its update."""
    task = asyncio.ensure_future(keep)
    _keeping.add(task)
    task.add_done_callback(_keeping.discard)
    return await asyncio.shield(task)


def is_real(value: object) -> bool:
    """Python and numpy ints and floats; not booleans, strings or None."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
