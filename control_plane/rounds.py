"""Round lifecycle: open a round, take the model, fold delivered updates, close or fail it.

A round's running aggregate lives in the memory of the control-plane process that opened it (the
data plane folds updates as they stream in, so memory is one model, not one per client). A process
that restarts finds open rounds without an aggregate and re-opens them as a new attempt: accepted
updates of the lost attempt are not silently mixed with new ones, and the job simply continues.

SQL is the commit point of a round's life: an attempt is inserted before Redis shows it open, and it
ends (closed with its aggregate, or failed) in one SQL transaction that also advances the job's
``rounds_done``; Redis, the registry, the journal and the event bus then follow that record. A step that
fails after the commit (or an outage that fails the commit itself) leaves the round open in Redis, and
the scheduler tick replays the end until it lands, so a round ends exactly once. Every model and
aggregate is checkpointed on disk first (:mod:`control_plane.checkpoints`), so when Redis comes back
empty :meth:`RoundManager.recover` rebuilds each job's round from the durable record.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis.asyncio as aioredis

from control_plane.checkpoints import Checkpoints
from control_plane.errors import (
    Conflict,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ServiceError,
    Unavailable,
    is_outage,
)
from control_plane.events import Event, EventBus
from control_plane.hot_state import HotState
from control_plane.jobs import JobRegistry
from control_plane.journal import Journal
from control_plane.metrics import Metrics
from control_plane.scheduling.rounds import plan_round
from control_plane.scheduling.state import ActiveJob, RoundState
from control_plane.shards import ShardRegistry
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
from data_plane.collectives.cost import LinkCost
from data_plane.collectives.shard_pool import PoolTrace, ShardPool, ShardPools, ShardsFailed, ShardsRefused
from data_plane.collectives.tier import LOOPBACK
from data_plane.sharded import ShardedAggregator
from data_plane.tensors import check_finite, decode, encode, schema
from propius.config import Settings
from propius.keys import global_key

__all__ = ["RoundManager"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _PendingClose:
    """A finalized aggregate whose close has not reached SQL yet (kept so a replay does not finalize twice)."""

    round: int
    attempt: int
    aggregate: Aggregate
    payload: bytes
    finalize_start: float


class RoundManager:
    def __init__(
        self, settings: Settings, hot: HotState, raw_redis: aioredis.Redis, store: Store, journal: Journal,
        bus: EventBus, jobs: JobRegistry, metrics: Metrics, link_of: Callable[[str], LinkCost | None] = lambda _: None,
    ) -> None:
        """``link_of(job)``: the α-β of the job's placement on the fabric, for its aggregator shards' selector
        (None: not placed; the shards then assume loopback)."""
        self._metrics = metrics
        self._link_of = link_of
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
        self._pending: dict[str, _PendingClose] = {}
        self._told_refused: set[str] = set()
        self.checkpoints = Checkpoints(settings.data_dir / "checkpoints")
        # Present while Redis holds this plane's hot state; gone after Redis restarted empty.
        self._alive_key = global_key(hot.prefix, "alive")
        self.shards = ShardRegistry(hot.redis, hot.prefix, bus.id, ttl_s=settings.shard_ttl_s,
                                    keep_s=settings.blob_ttl_s)
        self.pools = ShardPools(settings.data_dir / "shards", settings.max_shard_processes)

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
        # First: a job's first round may wait here for its aggregator shards to start (a torch import each).
        updates = await self._round_updates(job, round_, attempt, model_digest)
        plan = plan_round(job.spec, demand, time.time())
        now = plan.opened_at
        state = RoundState(
            job_id=job.job_id, round=round_, attempt=attempt, state="open", demand=plan.demand, target=plan.target,
            min_results=plan.min_results, bound=0, results=0, started_at=now, deadline_at=plan.deadline_at,
            closed_at=0.0, model_digest=model_digest, aggregate_digest="",
        )
        await asyncio.to_thread(
            self._store.start_round,
            RoundRecord(job_id=job.job_id, round=round_, attempt=attempt, demand=demand, target=state.target,
                        state="open", results=0, started_at=now, deadline_at=state.deadline_at, closed_at=None,
                        metrics_json="{}", model_digest=model_digest),
        )
        await self.shards.own(job.job_id)  # before the round shows open: no other shard takes it for an orphan
        await self._hot.open_round(state)
        self._aggregators[job.job_id] = updates
        self.trace.round_started(job.job_id, round_, attempt, now)
        if job.state == "registered":
            await self._jobs.update(job.job_id, state="running")
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
        if (pool := await self._pool(job)) is not None:
            return ShardedAggregator(self._raw_redis, namespace, round_, attempt, pool, reference_schema=reference,
                                     **limits)
        return RoundAggregator(self._raw_redis, namespace, round_, attempt, reference_schema=reference, **limits)

    async def _pool(self, job: ActiveJob) -> ShardPool | None:
        """The live aggregator shards of a job that asks for them (``cloud.shards`` > 1), started and joined;
        None when it does not ask, or cannot have them here (then said once, and the job runs unsharded)."""
        cloud = job.spec.cloud
        if cloud is None or cloud.shards is None or cloud.shards < 2:
            return None
        link = self._link_of(job.job_id) or LOOPBACK
        try:
            pool = await self.pools.acquire(job.job_id, cloud.shards, link)
            await pool.ready()
        except (ShardsRefused, ShardsFailed) as error:
            self._refused_pool(job.job_id, str(error))
            return None
        pool.link = link  # the placement may have moved (a recovery) since the pool started
        return pool

    def _refused_pool(self, job_id: str, reason: str) -> None:
        """Say once per job that its aggregation runs in this process instead of on its shards."""
        if job_id in self._told_refused:
            return
        self._told_refused.add(job_id)
        log.warning("job %s: aggregated in one process, not on its shards: %s", job_id, reason,
                    extra={"job_id": job_id})
        self._journal.event("shards_refused", job_id, reason=reason)

    async def retire_pools(self, _now: float) -> None:
        """Scheduler tick: stop the aggregator shards of jobs no longer live (finished on another shard of
        the control plane, or expired)."""
        live = {job.job_id for job in self._jobs.active()}
        self._told_refused &= live
        await self.pools.retire(live)

    async def recover(self) -> None:
        """Rebuild every live job's round from the durable record (after a restart, or Redis lost).

        An attempt SQL still shows open lost its aggregate: it fails and the round re-opens as a new
        attempt with its checkpointed model. An attempt that ended in SQL is shown ended in Redis, with
        its checkpointed aggregate, whatever Redis held. One job that cannot be recovered is logged and
        the others go on.
        """
        await self._jobs.refresh()
        await self.shards.heartbeat()
        jobs = [job for job in self._jobs.active() if job.job_id not in self._aggregators]
        states = await self._hot.rounds([job.job_id for job in jobs])
        orphans = await self.shards.orphans([job_id for job_id, state in states.items() if state.state == "open"])
        for job in jobs:
            try:
                state = states.get(job.job_id)
                if state is not None and state.state == "open":
                    previous = orphans.get(job.job_id)
                    if previous is None or not await self.shards.claim(job.job_id, previous):
                        continue  # a live shard serves it
                    await self._take_over(job, state)
                else:
                    await self._recover_job(job)
            except Exception:  # noqa: BLE001 - one bad job must not stop the plane from starting
                log.exception("cannot recover the round of job %s; it stays as it is", job.job_id,
                              extra={"job_id": job.job_id})
        await self._raw_redis.set(self._alive_key, "1")

    async def take_over_orphans(self, _now: float) -> None:
        """Scheduler tick: renew this shard's liveness, and take over the open rounds of dead shards."""
        await self.shards.heartbeat()
        jobs = {job.job_id: job for job in self._jobs.active() if job.job_id not in self._aggregators}
        states = {job_id: state for job_id, state in (await self._hot.rounds(list(jobs))).items()
                  if state.state == "open"}
        for job_id, previous in (await self.shards.orphans(list(states))).items():
            job, state = jobs[job_id], states[job_id]
            try:
                if job_id in self._aggregators or not await self.shards.claim(job_id, previous):
                    continue
                log.warning("job %s: shard %s is gone; taking over round %d.%d", job.job_id, previous or "?",
                            state.round, state.attempt)
                if adopted := self._journal.adopt_orphans():  # its journal, where shards share a data_dir
                    log.info("journal: writing %d records the dead shard left on disk", adopted)
                await self._take_over(job, state)
            except Exception as error:  # noqa: BLE001 - the next tick retries; other jobs go on
                if not is_outage(error):
                    raise
                log.warning("job %s: take-over deferred (%s)", job.job_id, error)

    async def _take_over(self, job: ActiveJob, state: RoundState) -> None:
        """Serve an open round whose shard died: fold its kept updates again and continue the attempt
        (``durable_updates``), else fail the attempt and re-open the round as a new one."""
        if self._settings.durable_updates and state.model_digest:
            namespace = self._hot.namespace(job.job_id)
            updates = await self._round_updates(job, state.round, state.attempt, state.model_digest)
            try:
                for client_id, text in (await updates.kept()).items():
                    kept = json.loads(text)
                    payload = await self.blobs.get(namespace, kept["digest"])
                    await updates.restore(client_id, payload, kept["weight"], kept["metrics"])
            except (KeyError, ShardsFailed) as error:  # a kept update is lost, or the shards broke: re-run it
                log.warning("job %s: cannot continue round %d.%d (%s); re-running it", job.job_id, state.round,
                            state.attempt, error)
            else:
                self._aggregators[job.job_id] = updates
                log.info("job %s: continuing round %d.%d with %d kept updates", job.job_id, state.round,
                         state.attempt, updates.results)
                return
        await self._recover_job(job)

    async def _admit(self, job_id: str, client_id: str, round_: int, attempt: int, payload: bytes, weight: float,
                     metrics: dict[str, float]) -> str:
        """Just before a validated update is claimed: pin the client's lease, so the reaper cannot free the
        slot of a client whose update counts, and with ``durable_updates`` keep the update in Redis; returns
        the record the claim carries (empty: not kept)."""
        if not await self._hot.pin_lease(job_id, round_, attempt, client_id):
            raise PermissionDenied(f"client {client_id!r} lost its lease on round {round_}")
        if not self._settings.durable_updates:
            return ""
        ref = await self.blobs.put(self._hot.namespace(job_id), payload)
        return json.dumps({"digest": ref.digest, "weight": weight, "metrics": metrics})

    async def _drop_kept(self, job_id: str, updates: RoundUpdates, record: RoundRecord) -> None:
        """An ended attempt's kept updates are no longer needed (a blob that is also the model or the
        aggregate, the same content, stays)."""
        namespace = self._hot.namespace(job_id)
        for text in (await updates.kept()).values():
            digest = json.loads(text)["digest"]
            if digest not in (record.model_digest, record.aggregate_digest):
                await self.blobs.delete(namespace, digest)

    async def _recover_job(self, job: ActiveJob) -> None:
        record = await asyncio.to_thread(self._store.latest_round, job.job_id)
        if record is None:
            return
        if record.state == "open":
            record = await asyncio.to_thread(
                self._store.finish_round, job.job_id, record.round, record.attempt, "failed", 0, time.time())
            if record.state == "failed":
                self._journal.attempt_ended(job.job_id, record.round, record.attempt)
                log.info("re-opening round %d of job %s as attempt %d", record.round, job.job_id, record.attempt + 1,
                         extra={"job_id": job.job_id, "round": record.round, "attempt": record.attempt + 1})
                await self._show_ended(job, record)
                digest = record.model_digest if await self._restore_blob(job.job_id, record.model_digest) else ""
                await self._open(job, record.round, record.attempt + 1, record.demand, digest)
                return
        await self._show_ended(job, record)

    async def _show_ended(self, job: ActiveJob, record: RoundRecord) -> None:
        """Make Redis show the ended attempt ``record`` as the job's round, with its blobs."""
        state = await self._hot.round(job.job_id)
        if state is not None and (state.round, state.attempt, state.state) == (record.round, record.attempt,
                                                                               record.state):
            return
        await self._restore_blob(job.job_id, record.model_digest)
        await self._restore_blob(job.job_id, record.aggregate_digest)
        plan = plan_round(job.spec, record.demand, record.started_at)
        await self._hot.open_round(RoundState(
            job_id=job.job_id, round=record.round, attempt=record.attempt, state=record.state, demand=plan.demand,
            target=record.target, min_results=plan.min_results, bound=state.bound if state else 0,
            results=record.results, started_at=record.started_at, deadline_at=record.deadline_at,
            closed_at=record.closed_at or 0.0, model_digest=record.model_digest,
            aggregate_digest=record.aggregate_digest,
        ))

    async def _restore_blob(self, job_id: str, digest: str) -> bool:
        """Put a checkpoint back into Redis if Redis lost it; False when there is none to put back."""
        if not digest:
            return False
        namespace = self._hot.namespace(job_id)
        if await self.blobs.ref(namespace, digest) is not None:
            return True
        payload = await asyncio.to_thread(self.checkpoints.load, job_id, digest)
        if payload is None:
            log.warning("job %s: checkpoint %s is missing", job_id, digest, extra={"job_id": job_id})
            return False
        await self.blobs.put(namespace, payload)
        return True

    async def check_hot_state(self, _now: float) -> None:
        """Scheduler tick: when Redis came back empty, drop the lost attempts and rebuild from SQL."""
        if await self._raw_redis.exists(self._alive_key):
            return
        log.warning("redis lost its state: rebuilding rounds from the durable store")
        for job_id in list(self._aggregators):
            await self._aggregators.pop(job_id).discard()
        self._pending.clear()
        await self.recover()

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
        await asyncio.to_thread(self.checkpoints.save, job.job_id, ref.digest, payload)
        await asyncio.to_thread(self._store.set_round_model, job.job_id, round_, state.attempt, ref.digest)
        await self._hot.set_model_digest(job.job_id, ref.digest)
        self.trace.model_published(job.job_id, round_, received_from, time.time(), ref.size)
        aggregator = self._aggregators.get(job.job_id)
        if aggregator is not None and aggregator.results == 0:
            aggregator.reference_schema = schema(tensors)
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
        if aggregator is None or not await self.shards.owns(job_id):
            if aggregator is not None:  # taken over by another shard while this one was presumed dead
                self._aggregators.pop(job_id, None)
            raise Unavailable(f"round {round_} of job {job_id!r} is served by another shard or being taken over; "
                              "retry")
        if not await self._hot.is_member(job_id, round_, attempt, client_id):
            raise PermissionDenied(f"client {client_id!r} is not bound to round {round_} (lease lost or never bound)")
        received_at = time.time()
        try:
            admit = functools.partial(self._admit, job_id, client_id, round_, attempt, payload, weight, metrics)
            result = await aggregator.add(client_id, payload, weight, metrics, store=admit)
        except PayloadError as error:
            self._metrics.updates.labels("rejected").inc()
            raise InvalidArgument(error.field, str(error)) from None
        except UpdateRejected as error:
            self._metrics.updates.labels("rejected").inc()
            if error.field == "round":
                raise Conflict(str(error)) from None
            raise InvalidArgument(error.field, str(error)) from None
        except ShardsFailed as error:  # the updates folded on the shards are lost: the attempt is re-run
            await self._fail(job_id, state)
            raise Unavailable(f"the aggregator shards of job {job_id!r} failed ({error}); round {round_} "
                              f"attempt {attempt} is over, retry on the next") from None
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
            try:
                await self.close(job_id, round_, attempt)
            except Exception as error:
                if not is_outage(error):
                    raise
                # The update is accepted and journaled; the scheduler tick replays the close.
                log.warning("job %s round %d: close deferred (%s)", job_id, round_, error,
                            extra={"job_id": job_id, "round": round_, "attempt": attempt})
        return AddResult(accepted=True, duplicate=False, results=max(results, result.results))

    # ---------------------------------------------------------------- closing

    async def close(self, job_id: str, round_: int, attempt: int) -> RoundState:
        """Finalize the aggregate and close the round (or fail it when nothing arrived); exactly once."""
        async with self._closing.setdefault(job_id, asyncio.Lock()):
            state = await self._current(job_id)
            if state.state != "open" or (state.round, state.attempt) != (round_, attempt):
                if (pending := self._pending.get(job_id)) and (pending.round, pending.attempt) == (round_, attempt):
                    del self._pending[job_id]  # its close landed; a step after it failed
                return state
            aggregator = self._aggregators.get(job_id)
            if aggregator is None or aggregator.results == 0:
                return await self._end_failed(job_id, state)
            pending = self._pending.get(job_id)
            if pending is None or (pending.round, pending.attempt) != (round_, attempt):
                finalize_start = time.time()
                try:
                    aggregate: Aggregate = await aggregator.finalize()
                except AggregateFailed as error:  # never publish a non-finite model: the round is re-run
                    log.error("job %s round %d attempt %d failed: %s", job_id, round_, attempt, error,
                              extra={"job_id": job_id, "round": round_, "attempt": attempt})
                    return await self._end_failed(job_id, state)
                payload = await asyncio.to_thread(encode, aggregate.tensors)
                pending = _PendingClose(round_, attempt, aggregate, payload, finalize_start)
                self._pending[job_id] = pending
            ref = await self.blobs.put(self._hot.namespace(job_id), pending.payload)
            await asyncio.to_thread(self.checkpoints.save, job_id, ref.digest, pending.payload)
            record = await asyncio.to_thread(
                self._store.finish_round, job_id, round_, attempt, "closed", pending.aggregate.results, time.time(),
                json.dumps(pending.aggregate.metrics), ref.digest,
            )
            closed = await self._follow(job_id, state, record, pending)
            self._pending.pop(job_id, None)  # only now: a replay after a failed step must not finalize again
            return closed

    async def _fail(self, job_id: str, state: RoundState) -> RoundState:
        async with self._closing.setdefault(job_id, asyncio.Lock()):
            current = await self._current(job_id)
            if (current.round, current.attempt, current.state) != (state.round, state.attempt, "open"):
                return current
            return await self._end_failed(job_id, current)

    async def _end_failed(self, job_id: str, state: RoundState) -> RoundState:
        record = await asyncio.to_thread(
            self._store.finish_round, job_id, state.round, state.attempt, "failed", state.results, time.time()
        )
        return await self._follow(job_id, state, record, None)

    async def _follow(self, job_id: str, state: RoundState, record: RoundRecord,
                      closing: _PendingClose | None) -> RoundState:
        """Make Redis, the registry, the journal and the bus follow how SQL ended the attempt ``state``."""
        if not await self._hot.finish_round(job_id, record.round, record.attempt, record.state,
                                            record.aggregate_digest):
            return await self._current(job_id)
        aggregator = self._aggregators.pop(job_id, None)
        if aggregator is not None and self._settings.durable_updates:
            await self._drop_kept(job_id, aggregator, record)
        if record.state == "closed":
            # The aggregator's Redis keys stay until their TTL: late retries see them.
            self._jobs.advanced(job_id, record.round + 1)
            await asyncio.to_thread(self.checkpoints.keep_only, job_id,
                                    {record.model_digest, record.aggregate_digest})
            if closing is not None:
                self.trace.round_closed(job_id, record.round, record.attempt, time.time(), closing.finalize_start,
                                        closing.aggregate.results, state.bound)
                self._last_metrics[job_id] = (record.round, record.attempt, closing.aggregate.metrics)
        else:
            if aggregator is not None:
                await aggregator.discard()
            self.trace.round_failed(job_id)
        await self._release_unfinished(job_id, record.round, record.attempt)
        self._journal.attempt_ended(job_id, record.round, record.attempt)
        self._metrics.rounds.labels(record.state).inc()
        kind = "round_closed" if record.state == "closed" else "round_failed"
        self._journal.event(kind, job_id, round=record.round, attempt=record.attempt, results=record.results)
        ended = await self._current(job_id)
        await self._bus.publish(Event(kind, job_id, record.round, record.attempt, state=ended.to_hash()))
        log.info("job %s round %d.%d %s with %d results", job_id, record.round, record.attempt, record.state,
                 record.results, extra={"job_id": job_id, "round": record.round, "attempt": record.attempt,
                                        "state": record.state, "results": record.results})
        return ended

    async def _release_unfinished(self, job_id: str, round_: int, attempt: int) -> None:
        """Clients still working on a finished round are told so by their next heartbeat; log them."""
        for client_id in await self._hot.expired_leases(job_id, round_, attempt, float("inf")):
            self._journal.finished(job_id, round_, attempt, client_id, "released")

    async def abort(self, job_id: str, *, keep_trace: bool = False) -> PoolTrace | None:
        """A completed or cancelled job: fail its open round, if any, and stop its aggregator shards; with
        ``keep_trace``, what the shards recorded first (None for a job without shards or reduces)."""
        state = await self._hot.round(job_id)
        if state is not None and state.state == "open":
            await self._fail(job_id, state)
        self._told_refused.discard(job_id)
        pool = self.pools.get(job_id)
        recorded = None
        if keep_trace and pool is not None and not pool.broken:
            try:
                recorded = await asyncio.to_thread(pool.recorded)
            except (OSError, ValueError):
                log.exception("job %s: its aggregator shards' traces could not be read", job_id,
                              extra={"job_id": job_id})
        await self.pools.release(job_id)
        return recorded

    async def sweep_deadlines(self, now: float) -> None:
        """Close rounds that have enough results (replaying a close an outage interrupted) and fail those
        whose deadline passed without them."""
        for job in self._jobs.active():
            if job.job_id not in self._aggregators:
                continue
            try:
                state = await self._hot.round(job.job_id)
                if state is None or state.state != "open":
                    continue
                if state.results >= state.min_results:
                    await self.close(job.job_id, state.round, state.attempt)
                elif state.deadline_at <= now:
                    await self._fail(job.job_id, state)
            except Exception as error:  # noqa: BLE001 - the next tick retries; other jobs go on
                if not is_outage(error):
                    raise
                log.warning("job %s: round end deferred (%s)", job.job_id, error, extra={"job_id": job.job_id})

    # ---------------------------------------------------------------- reading results

    async def wait_finished(self, job_id: str, round_: int, timeout: float) -> RoundState:
        """Block until ``round_`` of the job is closed or failed (event-driven), or ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._bus.subscribe(job_id) as events:
            while True:
                state = await self._hot.round(job_id)
                if state is None:
                    raise await self._no_round(job_id)
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
            raise await self._no_round(job_id)
        return state

    async def _no_round(self, job_id: str, round_: int | None = None) -> ServiceError:
        """Why the job has no round in Redis: NOT_FOUND, or UNAVAILABLE while hot state is being rebuilt."""
        if not await self._raw_redis.exists(self._alive_key):
            return Unavailable("hot state is being rebuilt after a Redis restart; retry")
        return NotFound(f"job {job_id!r} has no round" + ("" if round_ is None else f" {round_}"))

    async def _require_open(self, job_id: str, round_: int) -> RoundState:
        state = await self._hot.round(job_id)
        if state is None:
            raise await self._no_round(job_id, round_)
        if state.round != round_ or state.state != "open":
            raise Conflict(f"round {round_} of job {job_id!r} is not open (current round {state.round}, {state.state})")
        return state
