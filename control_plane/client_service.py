"""ClientService: the client-facing gRPC API (check-in, accept, heartbeat, release, listing)."""

from __future__ import annotations

import asyncio
import math
import time

import grpc

from control_plane.binding import Binder
from control_plane.convert import profile_from_pb, profile_to_pb
from control_plane.errors import InvalidArgument, rpc_errors
from control_plane.hot_state import HotState
from control_plane.jobs import JobRegistry
from control_plane.scheduler import SchedulerView
from control_plane.store import Store
from propius.config import Settings
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc

__all__ = ["ClientService"]


def _finite(value: float, field: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise InvalidArgument(field, "must be a finite, non-negative number")
    return value


def _job_round(request: pb.HeartbeatRequest | pb.ReleaseRequest) -> tuple[str, int]:
    if not request.job_id or len(request.job_id) > 64:
        raise InvalidArgument("job_id", "required (at most 64 characters)")
    return request.job_id, request.round


class ClientService(pb_grpc.ClientServiceServicer):
    def __init__(
        self, settings: Settings, binder: Binder, hot: HotState, jobs: JobRegistry, view: SchedulerView,
        store: Store,
    ) -> None:
        self._settings = settings
        self._binder = binder
        self._hot = hot
        self._jobs = jobs
        self._view = view
        self._store = store

    @rpc_errors
    async def CheckIn(self, request: pb.CheckInRequest, context: grpc.aio.ServicerContext):
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

    @rpc_errors
    async def Accept(self, request: pb.AcceptRequest, context: grpc.aio.ServicerContext):
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

    @rpc_errors
    async def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext):
        job_id, round_ = _job_round(request)
        valid = await self._binder.heartbeat(request.client_id, request.session_token, job_id, round_)
        return pb.HeartbeatResponse(valid=valid, lease_s=self._settings.lease_s, server_unix=time.time())

    @rpc_errors
    async def Release(self, request: pb.ReleaseRequest, context: grpc.aio.ServicerContext):
        job_id, round_ = _job_round(request)
        released = await self._binder.release(request.client_id, request.session_token, job_id, round_)
        return pb.ReleaseResponse(released=released)

    @rpc_errors
    async def ListClients(self, request: pb.ListClientsRequest, context: grpc.aio.ServicerContext):
        window = _finite(request.active_within_s, "active_within_s") or self._settings.client_ttl_s
        recent = await self._hot.recent_clients(time.time() - window)
        done = await asyncio.to_thread(self._store.tasks_done_by_client)
        supply = await self._view.estimate_supply(window)
        return pb.ListClientsResponse(
            clients=[
                pb.ClientInfo(profile=profile_to_pb(profile), last_seen_unix=seen,
                              tasks_done=done.get(profile.client_id, 0))
                for profile, seen in recent
            ],
            supply_by_job={
                job.job_id: supply.get(job.eligibility_key, 0) for job in self._jobs.active()
            },
        )
