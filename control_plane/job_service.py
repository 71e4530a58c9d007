"""JobService: the job-facing gRPC API (register, drive rounds, complete, watch)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Protocol

import grpc

from control_plane.audit import AuditLog
from control_plane.auth import Guard, check_drive, check_read, owned_spec
from control_plane.convert import fabric_recovery, job_info, job_placement, round_info
from control_plane.errors import InvalidArgument, require_id, rpc_errors
from control_plane.events import Event, EventBus
from control_plane.fabric_manager import FabricManager
from control_plane.hot_state import HotState
from control_plane.jobs import JobRegistry
from control_plane.journal import Journal
from control_plane.rounds import RoundManager
from control_plane.scheduling.state import ActiveJob
from control_plane.store import Store
from data_plane.collectives.shard_pool import PoolTrace
from propius.fabric.model import Fabric
from propius.fabric.request import CloudRequest
from propius.fabric.state import Allocation
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec

__all__ = ["JobService", "TraceExporter"]

log = logging.getLogger(__name__)

_MAX_SPEC_BYTES = 256 * 1024

class TraceExporter(Protocol):
    """Writes a completed job's trace, read from the durable store, out of the control plane (e.g. as a CCL-Bench
    data point, :func:`propius.trace.export.data_point_exporter`); returns where it went, or None when nothing was
    written. ``placement``: a cloud job's fabric and allocation, read before CompleteJob releases them (its card's
    hardware section comes from them). ``tier``: what a sharded job's aggregator shards recorded (real
    collectives, a data point of their own beside the job's), read before CompleteJob stops them. Called after
    the journal is flushed: a failed export is logged, never raised."""

    def __call__(self, store: Store, job_id: str, *, placement: tuple[Fabric, Allocation] | None = None,
                 tier: PoolTrace | None = None) -> Awaitable[Path | None]: ...


class JobService(pb_grpc.JobServiceServicer):
    def __init__(
        self, jobs: JobRegistry, rounds: RoundManager, hot: HotState, bus: EventBus, journal: Journal,
        finished_ttl_s: float, *, store: Store, exporter: TraceExporter | None = None, export_every_job: bool = False,
        policy: str = "", guard: Guard, audit: AuditLog, fabric: FabricManager,
    ) -> None:
        """``exporter``: writes a completed job's trace where ``export_every_job`` or the CompleteJob request
        asks for it; None: such requests are answered without a trace (``JobInfo.trace_dir`` empty).
        ``policy``: the sharing policy's name, recorded with each job's ``job_registered`` event (a trace export
        reads it there). ``fabric``: places jobs' cloud requests and releases them when they finish."""
        self._jobs = jobs
        self._rounds = rounds
        self._hot = hot
        self._bus = bus
        self._journal = journal
        self._finished_ttl_s = finished_ttl_s
        self._store = store
        self._exporter = exporter
        self._export_every_job = export_every_job
        self._policy = policy
        self._guard = guard
        self._audit = audit
        self._fabric = fabric

    @rpc_errors
    async def RegisterJob(self, request: pb.RegisterJobRequest, context: grpc.aio.ServicerContext):
        caller = await self._guard.job_caller(context)
        async with self._audit.call(caller.actor, "RegisterJob", "") as entry:
            caller.require("submit")
            if len(request.spec_json) > _MAX_SPEC_BYTES:
                raise InvalidArgument("spec_json", f"larger than {_MAX_SPEC_BYTES} bytes")
            if not request.spec_json:
                raise InvalidArgument("spec_json", "required")
            spec = owned_spec(JobSpec.parse(request.spec_json), caller)
            if spec.cloud is not None:
                await self._fabric.check(spec.cloud)
            job, token = await self._jobs.register(spec)
            entry.target = job.job_id
            if spec.cloud is not None:
                await self._place(job, spec.cloud)
        self._journal.event("job_registered", job.job_id, name=spec.name, owner=spec.owner, policy=self._policy)
        await self._bus.publish(Event("job_registered", job.job_id))
        return pb.RegisterJobResponse(job_id=job.job_id, job_token=token)

    async def _place(self, job: ActiveJob, request: CloudRequest) -> None:
        """Place the new job (or queue it); if that cannot be written, the job is cancelled, not left unplaced."""
        try:
            await self._fabric.place(job.job_id, request)
        except BaseException:
            with contextlib.suppress(Exception):
                await self._jobs.update(job.job_id, state="cancelled")
            raise

    def _placement(self, job: ActiveJob) -> pb.JobPlacement | None:
        if job.spec.cloud is None:
            return None
        allocation, pending, state = self._fabric.placement_of(job.job_id)
        return job_placement(job.job_id, job.spec.cloud.accelerators, allocation,
                             pending.reason if pending else "", pending.since if pending else 0.0, state)

    @rpc_errors
    async def StartRound(self, request: pb.StartRoundRequest, context: grpc.aio.ServicerContext):
        caller = await self._guard.job_caller(context)
        async with self._audit.call(caller.actor, "StartRound", request.job_id):
            job = await self._jobs.require_live(require_id(request.job_id), request.job_token)
            check_drive(caller, job)
            return round_info(await self._rounds.start_round(job, request.demand))

    @rpc_errors
    async def EndRound(self, request: pb.EndRoundRequest, context: grpc.aio.ServicerContext):
        caller = await self._guard.job_caller(context)
        async with self._audit.call(caller.actor, "EndRound", request.job_id):
            job = await self._jobs.require_live(require_id(request.job_id), request.job_token)
            check_drive(caller, job)
            state = await self._hot.round(job.job_id)
            if state is None or state.round != request.round:
                raise InvalidArgument("round", f"job {job.job_id!r} has no round {request.round}")
            return round_info(await self._rounds.close(job.job_id, state.round, state.attempt))

    async def _finish(self, request: pb.JobRef, state: str, context: grpc.aio.ServicerContext) -> pb.JobInfo:
        caller = await self._guard.job_caller(context)
        method = "CompleteJob" if state == "completed" else "CancelJob"
        async with self._audit.call(caller.actor, method, request.job_id):
            job = await self._jobs.authorize(require_id(request.job_id), request.job_token)
            check_drive(caller, job)
            return await self._finished(job, request, state)

    async def _finished(self, job: ActiveJob, request: pb.JobRef, state: str) -> pb.JobInfo:
        if not job.finished:
            export = state == "completed" and (self._export_every_job or request.export_trace)
            tier = await self._rounds.abort(job.job_id, keep_trace=export and self._exporter is not None)
            job = await self._jobs.update(job.job_id, state=state)
            self._journal.event(f"job_{state}", job.job_id)
            exported = await self._export_trace(job.job_id, tier) if export else None
            await self._hot.expire_job(job.job_id, self._finished_ttl_s)
            if job.spec.cloud is not None:
                await self._fabric.release(job.job_id)
            await self._bus.publish(Event(f"job_{state}", job.job_id))
            info = job_info(job, await self._hot.round(job.job_id), placement=self._placement(job))
            info.trace_dir = str(exported or "")
            return info
        return job_info(job, await self._hot.round(job.job_id), placement=self._placement(job))

    async def _export_trace(self, job_id: str, tier: PoolTrace | None) -> Path | None:
        """Export the completed job's trace (and its shards' recorded collectives, ``tier``); a failed export
        is logged, never the RPC's error."""
        if self._exporter is None:
            log.info("trace export of job %s skipped: this control plane has no trace exporter", job_id,
                     extra={"job_id": job_id})
            return None
        await self._journal.flush()  # the last round's spans are still write-behind
        allocation, _, state = self._fabric.placement_of(job_id)
        placement = (state.fabric, allocation) if allocation is not None and state is not None else None
        try:
            return await self._exporter(self._store, job_id, placement=placement, tier=tier)
        except Exception:
            log.exception("trace export of job %s failed", job_id, extra={"job_id": job_id})
            return None

    @rpc_errors
    async def CompleteJob(self, request: pb.JobRef, context: grpc.aio.ServicerContext):
        return await self._finish(request, "completed", context)

    @rpc_errors
    async def CancelJob(self, request: pb.JobRef, context: grpc.aio.ServicerContext):
        return await self._finish(request, "cancelled", context)

    @rpc_errors
    async def GetJob(self, request: pb.GetJobRequest, context: grpc.aio.ServicerContext):
        caller = await self._guard.job_caller(context)
        job = await self._jobs.get(require_id(request.job_id))
        check_read(caller, job)
        return job_info(job, await self._hot.round(job.job_id), redact=not caller.owns(job),
                        placement=self._placement(job))

    @rpc_errors
    async def ListJobs(self, request: pb.ListJobsRequest, context: grpc.aio.ServicerContext):
        caller = await self._guard.job_caller(context)
        jobs = [job for job in await self._jobs.list(request.include_finished) if caller.may_read(job)]
        states = await self._hot.rounds([job.job_id for job in jobs])
        return pb.ListJobsResponse(jobs=[job_info(job, states.get(job.job_id), redact=not caller.owns(job),
                                                  placement=self._placement(job)) for job in jobs])

    @rpc_errors
    async def WatchJob(
        self, request: pb.GetJobRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.JobEvent]:
        caller = await self._guard.job_caller(context)
        job = await self._jobs.get(require_id(request.job_id))
        check_read(caller, job)
        redact = not caller.owns(job)
        with self._bus.subscribe(job.job_id) as events:
            yield pb.JobEvent(kind="snapshot", job=job_info(job, await self._hot.round(job.job_id), redact=redact,
                                                            placement=self._placement(job)))
            while not job.finished:
                try:
                    batch = [await asyncio.wait_for(events.get(), 30)]
                except TimeoutError:
                    continue
                while not events.empty():  # a burst (a round's binds or uploads) shares one state read
                    batch.append(events.get_nowait())
                job = await self._jobs.get(job.job_id)
                state = await self._hot.round(job.job_id)
                info = job_info(job, state, redact=redact, placement=self._placement(job))
                current = round_info(state)
                for event in batch:
                    recovery = fabric_recovery(job.job_id, event.detail) if event.detail is not None else None
                    yield pb.JobEvent(kind=event.kind, job=info, round=current, client_id=event.client_id,
                                      at_unix=event.at, recovery=recovery)
