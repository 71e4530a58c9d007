"""Round lifecycle: open a round, take the model, fold delivered updates, close or fail it.

A round's running aggregate lives in the memory of the control-plane process that opened it (the
data plane folds updates as they stream in, so memory is one model, not one per client). A process
that restarts finds open rounds without an aggregate and re-opens them as a new attempt: accepted
updates of the lost attempt are not silently mixed with new ones, and the job simply continues.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time

import redis.asyncio as aioredis

from control_plane.errors import Conflict, InvalidArgument, NotFound, PermissionDenied
from control_plane.events import Event, EventBus
from control_plane.hot_state import HotState
from control_plane.jobs import JobRegistry
from control_plane.journal import Journal
from control_plane.metrics import Metrics
from control_plane.scheduling.rounds import plan_round
from control_plane.scheduling.state import ActiveJob, RoundState
from control_plane.store import RoundRecord, Store
from control_plane.tracing import ClientTimings, TraceRecorder
from data_plane import (
    AddResult,
    Aggregate,
    AggregateFailed,
    BlobRef,
    BlobStore,
    PayloadError,
    RoundAggregator,
    RoundCollector,
    RoundUpdates,
    UpdateRejected,
    accepted_key,
)
from data_plane.tensors import check_finite, decode, encode, schema
from propius.config import Settings

__all__ = ["RoundManager"]

log = logging.getLogger(__name__)


class RoundManager:
    def __init__(
        self, settings: Settings, hot: HotState, raw_redis: aioredis.Redis, store: Store, journal: Journal,
        bus: EventBus, jobs: JobRegistry, metrics: Metrics,
    ) -> None:
        self._metrics = metrics
        self._settings = settings
        self._raw_redis = raw_redis
        self.blobs = BlobStore(raw_redis, chunk_bytes=settings.chunk_bytes, ttl_s=settings.blob_ttl_s)
        self._hot = hot
        self._store = store
        self._journal = journal
        self._bus = bus
        self._jobs = jobs
        self.trace = TraceRecorder(journal, max_rounds=settings.trace_max_rounds, max_ranks=settings.trace_max_ranks)
        self._aggregators: dict[str, RoundUpdates] = {}
        self._last_metrics: dict[str, tuple[int, int, dict[str, float]]] = {}  # job -> last closed round's
        self._closing: dict[str, asyncio.Lock] = {}

    # ---------------------------------------------------------------- opening

    async def start_round(self, job: ActiveJob, demand: int) -> RoundState:
        spec = job.spec
        if demand < 0 or demand > 100_000:
            raise InvalidArgument("demand", "must be between 0 and 100000")
        demand = demand or spec.demand
        current = await self._hot.round(job.job_id)
        if current is not None and current.state == "open":
            raise Conflict(f"round {current.round} of job {job.job_id!r} is still open")
        if spec.rounds is not None and job.rounds_done >= spec.rounds:
            raise Conflict(f"job {job.job_id!r} has run all {spec.rounds} rounds")
        round_ = job.rounds_done
        retry = current is not None and current.round == round_
        attempt = current.attempt + 1 if retry else 0
        model_digest = current.model_digest if retry else ""
        return await self._open(job, round_, attempt, demand, model_digest)

    async def _open(self, job: ActiveJob, round_: int, attempt: int, demand: int, model_digest: str) -> RoundState:
        plan = plan_round(job.spec, demand, time.time())
        now = plan.opened_at
        state = RoundState(
            job_id=job.job_id, round=round_, attempt=attempt, state="open", demand=plan.demand, target=plan.target,
            min_results=plan.min_results, bound=0, results=0, started_at=now, deadline_at=plan.deadline_at,
            closed_at=0.0, model_digest=model_digest, aggregate_digest="",
        )
        await self._hot.open_round(state)
        self._aggregators[job.job_id] = await self._round_updates(job, round_, attempt, model_digest)
        self.trace.round_started(job.job_id, round_, attempt, now)
        if job.state == "registered":
            await self._jobs.update(job.job_id, state="running")
        await asyncio.to_thread(
            self._store.start_round,
            RoundRecord(job_id=job.job_id, round=round_, attempt=attempt, demand=demand, target=state.target,
                        state="open", results=0, started_at=now, deadline_at=state.deadline_at, closed_at=None,
                        metrics_json="{}", model_digest=model_digest),
        )
        self._journal.event("round_started", job.job_id, round=round_, attempt=attempt, demand=demand)
        await self._bus.publish(
            Event("round_started", job.job_id, round_, attempt, slots=state.target, state=state.to_hash())
        )
        return state

    async def _round_updates(self, job: ActiveJob, round_: int, attempt: int, model_digest: str) -> RoundUpdates:
        """What keeps a round's updates: a FedAvg fold, or the replies whole for a self-aggregating job."""
        namespace = self._hot.namespace(job.job_id)
        limits = {"max_update_bytes": self._settings.max_update_bytes, "ttl_s": self._settings.blob_ttl_s}
        if job.spec.aggregation == "collect":
            return RoundCollector(self._raw_redis, namespace, round_, attempt, **limits)
        reference = schema(decode(await self.blobs.get(namespace, model_digest))) if model_digest else None
        return RoundAggregator(self._raw_redis, namespace, round_, attempt, reference_schema=reference, **limits)

    async def recover(self) -> None:
        """After a restart: re-open, as a new attempt, every open round whose aggregate was lost."""
        await self._jobs.refresh()
        for job in self._jobs.active():
            state = await self._hot.round(job.job_id)
            if state is None or state.state != "open" or job.job_id in self._aggregators:
                continue
            log.info("re-opening round %d of job %s after restart", state.round, job.job_id)
            await self._fail(job.job_id, state, "failed")
            await self._open(job, state.round, state.attempt + 1, state.demand, state.model_digest)

    # ---------------------------------------------------------------- model and updates

    async def publish_model(self, job: ActiveJob, round_: int, payload: bytes, received_from: float) -> BlobRef:
        """Store the round's model; ``received_from`` is when its upload began (for the trace)."""
        state = await self._require_open(job.job_id, round_)
        try:
            tensors = decode(payload, max_bytes=self._settings.max_model_bytes)
            check_finite(tensors)
        except PayloadError as error:
            raise InvalidArgument(error.field, str(error)) from None
        ref = await self.blobs.put(self._hot.namespace(job.job_id), payload)
        await self._hot.set_model_digest(job.job_id, ref.digest)
        self.trace.model_published(job.job_id, round_, received_from, time.time(), ref.size)
        aggregator = self._aggregators.get(job.job_id)
        if aggregator is not None and aggregator.results == 0:
            aggregator.reference_schema = schema(tensors)
        await asyncio.to_thread(self._store.set_round_model, job.job_id, round_, state.attempt, ref.digest)
        await self._bus.publish(Event("model_published", job.job_id, round_, state.attempt,
                                      model_kbit=ref.size * 8 / 1000))
        return ref

    async def deliver(
        self, job_id: str, client_id: str, round_: int, attempt: int, payload: bytes, weight: float,
        metrics: dict[str, float], timings: ClientTimings | None = None,
    ) -> AddResult:
        """Fold one client's update; the round closes when enough results are in.

        A retry of an update that was already counted is answered ``duplicate`` even after its round
        closed (the accepted set outlives the round), so a device whose reply was lost does not drop it.
        """
        state = await self._hot.round(job_id)
        if state is None or (state.round, state.attempt, state.state) != (round_, attempt, "open"):
            if await self._raw_redis.sismember(accepted_key(self._hot.namespace(job_id), round_, attempt), client_id):
                return AddResult(accepted=False, duplicate=True, results=state.results if state else 0)
            state = await self._require_open(job_id, round_)
            raise Conflict(f"attempt {attempt} of round {round_} is over (now attempt {state.attempt})")
        if not state.model_digest:
            raise Conflict(f"the model of round {round_} is not published yet")
        aggregator = self._aggregators.get(job_id)
        if aggregator is None:
            raise Conflict(f"round {round_} of job {job_id!r} is being re-opened; check in again")
        if not await self._hot.is_member(job_id, round_, attempt, client_id):
            raise PermissionDenied(f"client {client_id!r} is not bound to round {round_} (lease lost or never bound)")
        received_at = time.time()
        try:
            result = await aggregator.add(client_id, payload, weight, metrics)
        except PayloadError as error:
            self._metrics.updates.labels("rejected").inc()
            raise InvalidArgument(error.field, str(error)) from None
        except UpdateRejected as error:
            self._metrics.updates.labels("rejected").inc()
            if error.field == "round":
                raise Conflict(str(error)) from None
            raise InvalidArgument(error.field, str(error)) from None
        if not result.accepted:
            self._metrics.updates.labels("duplicate").inc()
            return result
        folded_at = time.time()
        self._metrics.updates.labels("accepted").inc()
        self._metrics.update_bytes.inc(len(payload))
        self._metrics.fold_seconds.observe(folded_at - received_at)
        model_bytes = await self._model_size(job_id, state.model_digest)
        results = await self._hot.mark_delivered(job_id, round_, attempt, client_id)
        # No await between the count and the trace: a close that this count triggers elsewhere sees its spans.
        self.trace.update_delivered(job_id, round_, client_id, timings, received_at, received_at, folded_at,
                                    len(payload), model_bytes)
        self._journal.finished(job_id, round_, attempt, client_id, "completed", weight)
        phases = {"fetch_end": timings.fetch_end, "train_s": timings.train_end - timings.train_start} if timings else {}
        await self._bus.publish(Event("update_accepted", job_id, round_, attempt, client_id, **phases))
        if results >= state.min_results:
            await self.close(job_id, round_, attempt)
        return AddResult(accepted=True, duplicate=False, results=max(results, result.results))

    # ---------------------------------------------------------------- closing

    async def close(self, job_id: str, round_: int, attempt: int) -> RoundState:
        """Finalize the aggregate and close the round (or fail it when nothing arrived)."""
        async with self._closing.setdefault(job_id, asyncio.Lock()):
            state = await self._current(job_id)
            if state.state != "open" or (state.round, state.attempt) != (round_, attempt):
                return state
            aggregator = self._aggregators.get(job_id)
            if aggregator is None or aggregator.results == 0:
                return await self._fail(job_id, state, "failed")
            finalize_start = time.time()
            try:
                aggregate: Aggregate = await aggregator.finalize()
            except AggregateFailed as error:  # never publish a non-finite model: the round is re-run
                log.error("job %s round %d attempt %d failed: %s", job_id, round_, attempt, error)
                return await self._fail(job_id, state, "failed")
            payload = await asyncio.to_thread(encode, aggregate.tensors)
            ref = await self.blobs.put(self._hot.namespace(job_id), payload)
            if not await self._hot.finish_round(job_id, round_, attempt, "closed", ref.digest):
                return await self._current(job_id)
            self._aggregators.pop(job_id, None)  # its Redis keys stay until their TTL: late retries see them
            self.trace.round_closed(
                job_id, round_, attempt, time.time(), finalize_start, aggregate.results, state.bound
            )
            self._last_metrics[job_id] = (round_, attempt, aggregate.metrics)
            job = await self._jobs.update(job_id, rounds_done=round_ + 1)
            await asyncio.to_thread(
                self._store.finish_round, job_id, round_, attempt, "closed", aggregate.results, time.time(),
                json.dumps(aggregate.metrics),
            )
            await self._release_unfinished(job_id, round_, attempt)
            self._metrics.rounds.labels("closed").inc()
            self._journal.event("round_closed", job_id, round=round_, attempt=attempt, results=aggregate.results)
            closed = await self._current(job_id)
            await self._bus.publish(Event("round_closed", job_id, round_, attempt, state=closed.to_hash()))
            log.info("job %s round %d closed with %d results", job.spec.name, round_, aggregate.results)
            return closed

    async def _fail(self, job_id: str, state: RoundState, outcome: str) -> RoundState:
        if await self._hot.finish_round(job_id, state.round, state.attempt, outcome, ""):
            aggregator = self._aggregators.pop(job_id, None)
            if aggregator is not None:
                await aggregator.discard()
            self.trace.round_failed(job_id)
            await asyncio.to_thread(
                self._store.finish_round, job_id, state.round, state.attempt, outcome, state.results, time.time(), "{}"
            )
            await self._release_unfinished(job_id, state.round, state.attempt)
            self._metrics.rounds.labels(outcome).inc()
            self._journal.event("round_failed", job_id, round=state.round, attempt=state.attempt)
            failed = await self._current(job_id)
            await self._bus.publish(Event("round_failed", job_id, state.round, state.attempt, state=failed.to_hash()))
            return failed
        return await self._current(job_id)

    async def _release_unfinished(self, job_id: str, round_: int, attempt: int) -> None:
        """Clients still working on a finished round are told so by their next heartbeat; log them."""
        for client_id in await self._hot.expired_leases(job_id, round_, attempt, float("inf")):
            self._journal.finished(job_id, round_, attempt, client_id, "released")

    async def abort(self, job_id: str) -> None:
        """A completed or cancelled job: fail its open round, if any."""
        state = await self._hot.round(job_id)
        if state is not None and state.state == "open":
            await self._fail(job_id, state, "failed")

    async def sweep_deadlines(self, now: float) -> None:
        """Close rounds whose deadline passed: with the results they have if enough, else fail them."""
        for job in self._jobs.active():
            if job.job_id not in self._aggregators:
                continue
            state = await self._hot.round(job.job_id)
            if state is None or state.state != "open" or state.deadline_at > now:
                continue
            if state.results >= state.min_results:
                await self.close(job.job_id, state.round, state.attempt)
            else:
                await self._fail(job.job_id, state, "failed")

    # ---------------------------------------------------------------- reading results

    async def wait_finished(self, job_id: str, round_: int, timeout: float) -> RoundState:
        """Block until ``round_`` of the job is closed or failed (event-driven), or ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._bus.subscribe(job_id) as events:
            while True:
                state = await self._hot.round(job_id)
                if state is None:
                    raise NotFound(f"job {job_id!r} has no round")
                if state.round > round_ or (state.round == round_ and state.state != "open"):
                    return state
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return state
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(events.get(), remaining)

    async def wait_model(self, job_id: str, round_: int, timeout: float) -> RoundState:
        """Block until the job has published the model of the open round ``round_``."""
        deadline = time.monotonic() + timeout
        with self._bus.subscribe(job_id) as events:
            while True:
                state = await self._require_open(job_id, round_)
                if state.model_digest:
                    return state
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Conflict(f"the model of round {round_} is not published yet; retry")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(events.get(), remaining)

    async def metrics_of(self, job_id: str, state: RoundState) -> dict[str, float]:
        """Client metrics of a closed round: from memory if this process closed it, else the store."""
        cached = self._last_metrics.get(job_id)
        if cached is not None and cached[:2] == (state.round, state.attempt):
            return cached[2]
        for record in await asyncio.to_thread(self._store.rounds, job_id):
            if (record.round, record.attempt) == (state.round, state.attempt):
                return json.loads(record.metrics_json or "{}")
        return {}

    async def _model_size(self, job_id: str, digest: str) -> int:
        ref = await self.blobs.ref(self._hot.namespace(job_id), digest) if digest else None
        return ref.size if ref else 0

    async def _current(self, job_id: str) -> RoundState:
        """The job's current round; NOT_FOUND when it has none (its hot state expired or was lost)."""
        state = await self._hot.round(job_id)
        if state is None:
            raise NotFound(f"job {job_id!r} has no round")
        return state

    async def _require_open(self, job_id: str, round_: int) -> RoundState:
        state = await self._hot.round(job_id)
        if state is None:
            raise NotFound(f"job {job_id!r} has no round {round_}")
        if state.round != round_ or state.state != "open":
            raise Conflict(f"round {round_} of job {job_id!r} is not open (current round {state.round}, {state.state})")
        return state
