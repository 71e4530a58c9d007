"""ClientService: the client-facing gRPC API (check-in, accept, heartbeat, release, listing)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator

import grpc

from control_plane.audit import AuditLog
from control_plane.auth import Caller, Guard
from control_plane.binding import Binder
from control_plane.convert import profile_from_pb, profile_to_pb
from control_plane.errors import InvalidArgument, ResourceExhausted, error_status, require_id, rpc_errors
from control_plane.hot_state import HotState
from control_plane.jobs import JobRegistry
from control_plane.scheduler import SchedulerView
from control_plane.store import Store
from propius.config import Settings
from propius.multiplex import take_batch
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc

__all__ = ["ClientService"]


def _finite(value: float, field: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise InvalidArgument(field, "must be a finite, non-negative number")
    return value


def _job_round(request: pb.HeartbeatRequest | pb.ReleaseRequest) -> tuple[str, int]:
    return require_id(request.job_id), request.round


class ClientService(pb_grpc.ClientServiceServicer):
    def __init__(
        self, settings: Settings, binder: Binder, hot: HotState, jobs: JobRegistry, view: SchedulerView,
        store: Store, *, guard: Guard, audit: AuditLog,
    ) -> None:
        self._settings = settings
        self._binder = binder
        self._hot = hot
        self._jobs = jobs
        self._view = view
        self._store = store
        self.guard = guard
        self._audit = audit

    @property
    def max_stream_calls(self) -> int:
        """Calls in flight on one Multiplex stream; one more is answered RESOURCE_EXHAUSTED."""
        return self._settings.max_stream_calls

    # The handlers proper: plain coroutines that raise ServiceError. The unary RPCs and Multiplex both
    # run them, so a call answers the same on either path.

    async def check_in(self, request: pb.CheckInRequest, caller: Caller) -> pb.CheckInResponse:
        if not caller.open and not request.profile.client_id:
            request.profile.client_id = caller.client_id  # an enrolled device checks in as itself
        Guard.require_client(caller, request.profile.client_id)
        if request.profile.ByteSize() > self._settings.max_profile_bytes:
            raise ResourceExhausted(f"profile: larger than {self._settings.max_profile_bytes} bytes encoded")
        profile = profile_from_pb(request.profile)
        wait_s = _finite(request.wait_s, "wait_s")
        result = await self._binder.check_in(profile, wait_s, request.max_offers)
        return pb.CheckInResponse(
            client_id=result.client_id,
            session_token=result.session_token,
            retry_after_s=result.retry_after_s,
            server_unix=time.time(),
            offers=[
                pb.TaskOffer(
                    offer_id=offer.offer_id, job_id=offer.job.job_id, job_name=offer.job.spec.name,
                    round=offer.state.round, attempt=offer.state.attempt,
                    private_requirements_json=offer.job.private_json, task_json=offer.job.task_json,
                    expires_unix=offer.expires_at,
                )
                for offer in result.offers
            ],
        )

    async def accept(self, request: pb.AcceptRequest, caller: Caller) -> pb.AcceptResponse:
        Guard.require_client(caller, request.client_id)
        if not request.offer_id:
            raise InvalidArgument("offer_id", "required")
        job_id, round_, attempt, outcome = await self._binder.accept(
            request.client_id, request.session_token, request.offer_id
        )
        if not outcome.bound:
            return pb.AcceptResponse(bound=False, reason=outcome.reason, server_unix=time.time())
        return pb.AcceptResponse(
            bound=True, reason=outcome.reason, job_id=job_id, round=round_, attempt=attempt,
            lease_s=self._settings.lease_s, deadline_unix=outcome.deadline_at, model_digest=outcome.model_digest,
            server_unix=time.time(),
        )

    async def heartbeat(self, request: pb.HeartbeatRequest, caller: Caller) -> pb.HeartbeatResponse:
        Guard.require_client(caller, request.client_id)
        job_id, round_ = _job_round(request)
        valid = await self._binder.heartbeat(request.client_id, request.session_token, job_id, round_)
        return pb.HeartbeatResponse(valid=valid, lease_s=self._settings.lease_s, server_unix=time.time())

    async def release(self, request: pb.ReleaseRequest, caller: Caller) -> pb.ReleaseResponse:
        Guard.require_client(caller, request.client_id)
        job_id, round_ = _job_round(request)
        released = await self._binder.release(request.client_id, request.session_token, job_id, round_)
        return pb.ReleaseResponse(released=released)

    # ---------------------------------------------------------------- unary RPCs

    @rpc_errors
    async def CheckIn(self, request: pb.CheckInRequest, context: grpc.aio.ServicerContext):
        return await self.check_in(request, await self.guard.device_caller(context))

    @rpc_errors
    async def Accept(self, request: pb.AcceptRequest, context: grpc.aio.ServicerContext):
        return await self.accept(request, await self.guard.device_caller(context))

    @rpc_errors
    async def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext):
        return await self.heartbeat(request, await self.guard.device_caller(context))

    @rpc_errors
    async def Release(self, request: pb.ReleaseRequest, context: grpc.aio.ServicerContext):
        return await self.release(request, await self.guard.device_caller(context))

    # ---------------------------------------------------------------- many devices on one stream

    async def Multiplex(self, request_iterator: AsyncIterator[pb.ClientCalls], context: grpc.aio.ServicerContext):
        """Run each call of the stream as its own task (a check-in may long-poll); send the replies that
        are ready in one message, so a busy stream costs one message per batch rather than one per call."""
        await _Multiplexer(self, request_iterator, context).run()

    @rpc_errors
    async def Enroll(self, request: pb.EnrollRequest, context: grpc.aio.ServicerContext):
        """Trade an enrolment token for a credential bound to the client id (see :meth:`Guard.enroll`)."""
        client_id = require_id(request.client_id, "client_id")
        token = await self.guard.enrolment_token(context, request.enrolment_token)
        async with self._audit.call(f"enrolment:{token.id}", "Enroll", client_id):
            credential = await self.guard.enroll(context, token, client_id)
        return pb.EnrollResponse(client_id=client_id, device_token=credential)

    @rpc_errors
    async def ListClients(self, request: pb.ListClientsRequest, context: grpc.aio.ServicerContext):
        """A read: the registry and the scheduler's supply estimates are left as they are (forgetting
        clients is the scheduler's periodic work), whatever the window asked for. Client ids and profiles
        are for the operator: the 'read' role."""
        await self.guard.job_caller(context, "read")
        window = _finite(request.active_within_s, "active_within_s") or self._settings.client_ttl_s
        recent = await self._hot.recent_clients(time.time() - window)
        done = await asyncio.to_thread(self._store.tasks_done_by_client)
        supply = await self._view.count_supply(window)
        bound = await self._hot.bound_clients(
            (await self._hot.rounds([job.job_id for job in self._jobs.active()])).values())
        return pb.ListClientsResponse(
            clients=[
                pb.ClientInfo(profile=profile_to_pb(profile), last_seen_unix=seen,
                              tasks_done=done.get(profile.client_id, 0), bound_job_id=bound.get(profile.client_id, ""))
                for profile, seen in recent
            ],
            supply_by_job={
                job.job_id: supply.get(job.eligibility_key, 0) for job in self._jobs.active()
            },
        )


MAX_BATCH_BYTES = 1 << 20  # well under gRPC's default 4 MiB receive limit


class _Multiplexer:
    """One Multiplex stream: a reader that starts a task per call, and this writer of reply batches."""

    def __init__(self, service: ClientService, calls: AsyncIterator[pb.ClientCalls],
                 context: grpc.aio.ServicerContext) -> None:
        self._handlers = {"check_in": service.check_in, "accept": service.accept, "heartbeat": service.heartbeat,
                          "release": service.release}
        self._max_calls = service.max_stream_calls
        self._guard = service.guard
        self._calls = calls
        self._context = context
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._ready: list[pb.ClientReply] = []
        self._wake = asyncio.Event()
        self._reading = True

    async def run(self) -> None:
        reader = asyncio.create_task(self._read())
        try:
            while self._reading or self._tasks or self._ready:
                await self._wake.wait()
                self._wake.clear()
                while self._ready:
                    await self._context.write(pb.ClientReplies(replies=take_batch(self._ready, MAX_BATCH_BYTES)))
        finally:
            reader.cancel()
            for task in list(self._tasks.values()):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def _read(self) -> None:
        try:
            async for message in self._calls:
                for call in message.calls:
                    if call.cancel:
                        task = self._tasks.pop(call.call_id, None)
                        if task is not None:
                            task.cancel()
                        continue
                    if call.call_id in self._tasks:
                        self._reply(pb.ClientReply(
                            call_id=call.call_id, status_code=grpc.StatusCode.INVALID_ARGUMENT.value[0],
                            status_details="call_id: already in flight on this stream"))
                        continue
                    if len(self._tasks) >= self._max_calls:
                        self._reply(pb.ClientReply(
                            call_id=call.call_id, status_code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0],
                            status_details=f"calls: {self._max_calls} already in flight on this stream"))
                        continue
                    self._tasks[call.call_id] = asyncio.create_task(self._serve(call))
        finally:
            self._reading = False  # the caller closed its side: finish the calls in flight, then end
            self._wake.set()

    async def _serve(self, call: pb.ClientCall) -> None:
        call_id = call.call_id
        try:
            kind = call.WhichOneof("request")
            if kind is None:
                raise InvalidArgument("request", "one of check_in, accept, heartbeat, release is required")
            caller = await self._guard.device_caller(self._context, call.device_token)
            response = await self._handlers[kind](getattr(call, kind), caller)
            reply = pb.ClientReply(call_id=call_id, **{kind: response})
        except asyncio.CancelledError:
            return
        except Exception as error:  # noqa: BLE001 - every failure must become the call's status
            code, message = error_status(error)
            reply = pb.ClientReply(call_id=call_id, status_code=code.value[0], status_details=message)
        finally:
            if self._tasks.get(call_id) is asyncio.current_task():
                del self._tasks[call_id]
        self._reply(reply)

    def _reply(self, reply: pb.ClientReply) -> None:
        self._ready.append(reply)
        self._wake.set()
