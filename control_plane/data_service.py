"""DataService: model fan-out and update upload, streamed in chunks over gRPC.

Payloads are safetensors bytes (never pickles). Uploads are bounded while they stream: an update
larger than the limit is refused with RESOURCE_EXHAUSTED before it is buffered, and an upload's header
(session, binding, weight, metrics) is checked before any of its body is read.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator

from control_plane.audit import AuditLog
from control_plane.auth import Guard, check_drive
from control_plane.binding import Binder
from control_plane.convert import round_info
from control_plane.errors import (
    Conflict,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    require_id,
    rpc_errors,
)
from control_plane.hot_state import HotState
from control_plane.jobs import JobRegistry
from control_plane.rounds import RoundManager
from control_plane.tracing import ClientTimings
from propius.config import Settings
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import MAX_NUM_SAMPLES

__all__ = ["DataService", "strict_json"]

_MAX_NUMBERS_BYTES = 16 * 1024  # metrics_json, timings_json: 64 numbers fit many times over


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def strict_json(text: str, field: str) -> object:
    """Parse JSON from a client: strict (no NaN/Infinity), and a nesting too deep to parse is refused,
    never an internal error."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise InvalidArgument(field, "not valid JSON (NaN and Infinity are not JSON)") from None


async def _collect(first: bytes, rest: AsyncIterator, limit: int, field: str) -> bytes:
    """Join a streamed payload, refusing it as soon as it outgrows ``limit`` (nothing larger is buffered)."""
    parts, size = [first], len(first)
    async for message in rest:
        parts.append(message.data)
        size += len(message.data)
        if size > limit:
            raise ResourceExhausted(f"{field}: payload exceeds {limit} bytes")
    if size > limit:
        raise ResourceExhausted(f"{field}: payload exceeds {limit} bytes")
    return b"".join(parts)


def _numbers(text: str, field: str) -> dict[str, float]:
    """A small JSON object of finite numbers (client metrics, phase timings)."""
    if not text:
        return {}
    if len(text) > _MAX_NUMBERS_BYTES:
        raise InvalidArgument(field, f"longer than {_MAX_NUMBERS_BYTES} characters")
    raw = strict_json(text, field)
    if not isinstance(raw, dict) or len(raw) > 64:
        raise InvalidArgument(field, "must be an object of at most 64 numbers")
    numbers = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidArgument(f"{field}.{name}", "must be a finite number")
        numbers[str(name)] = float(value)
    return numbers


class DataService(pb_grpc.DataServiceServicer):
    def __init__(self, settings: Settings, rounds: RoundManager, binder: Binder, hot: HotState, jobs: JobRegistry,
                 *, guard: Guard, audit: AuditLog):
        self._guard = guard
        self._audit = audit
        self._settings = settings
        self._rounds = rounds
        self._binder = binder
        self._hot = hot
        self._jobs = jobs

    @rpc_errors
    async def PublishModel(self, request_iterator: AsyncIterator[pb.PublishModelRequest], context):
        started = time.time()
        caller = await self._guard.job_caller(context)
        header = await anext(aiter(request_iterator), None)
        if header is None:
            raise InvalidArgument("data", "empty stream")
        async with self._audit.call(caller.actor, "PublishModel", header.job_id):
            job = await self._jobs.require_live(header.job_id, header.job_token)
            check_drive(caller, job)
            payload = await _collect(header.data, request_iterator, self._settings.max_model_bytes, "data")
            ref = await self._rounds.publish_model(job, header.round, payload, started)
            return pb.PublishModelResponse(digest=ref.digest, size=ref.size)

    @rpc_errors
    async def FetchModel(self, request: pb.FetchModelRequest, context) -> AsyncIterator[pb.BlobChunk]:
        Guard.require_client(await self._guard.device_caller(context), request.client_id)
        await self._binder.authenticate(request.client_id, request.session_token)
        state = await self._hot.round(request.job_id)
        if state is None or state.round != request.round or state.state != "open":
            raise Conflict(f"round {request.round} of job {request.job_id!r} is not open")
        if not await self._hot.is_member(request.job_id, state.round, state.attempt, request.client_id):
            raise Conflict(f"client {request.client_id!r} is not bound to this round")
        if not state.model_digest:
            state = await self._rounds.wait_model(request.job_id, request.round, self._settings.offer_ttl_s)
        namespace = self._hot.namespace(request.job_id)
        ref = await self._rounds.blobs.ref(namespace, state.model_digest)
        if ref is None:
            raise NotFound(f"model of round {request.round} is not available")
        first = True
        async for chunk in self._rounds.blobs.iter_chunks(namespace, ref.digest):
            if first:
                yield pb.BlobChunk(data=chunk, total_size=ref.size, digest=ref.digest)
                first = False
            else:
                yield pb.BlobChunk(data=chunk)

    @rpc_errors
    async def UploadUpdate(self, request_iterator: AsyncIterator[pb.UploadUpdateRequest], context):
        caller = await self._guard.device_caller(context)
        header = await anext(aiter(request_iterator), None)
        if header is None:
            raise InvalidArgument("data", "empty stream")
        Guard.require_client(caller, header.client_id)
        await self._binder.authenticate(header.client_id, header.session_token)
        require_id(header.job_id)
        if not math.isfinite(header.num_samples) or not 0 < header.num_samples <= MAX_NUM_SAMPLES:
            raise InvalidArgument("num_samples", f"must be a number in (0, {MAX_NUM_SAMPLES:g}]")
        metrics = _numbers(header.metrics_json, "metrics_json")
        timings = ClientTimings.parse(_numbers(header.timings_json, "timings_json"))
        # The binding before the body: an unbound client never gets to stream an update.
        if not await self._hot.is_member(header.job_id, header.round, header.attempt, header.client_id):
            raise PermissionDenied(f"client {header.client_id!r} is not bound to attempt {header.attempt} of round "
                                   f"{header.round} of job {header.job_id!r} (lease lost or never bound)")
        payload = await _collect(header.data, request_iterator, self._settings.max_update_bytes, "data")
        result = await self._rounds.deliver(
            header.job_id, header.client_id, header.round, header.attempt, payload, header.num_samples, metrics,
            timings,
        )
        return pb.UploadUpdateResponse(accepted=result.accepted, duplicate=result.duplicate, results=result.results)

    @rpc_errors
    async def AwaitAggregate(self, request: pb.AwaitAggregateRequest, context) -> AsyncIterator[pb.AggregateChunk]:
        caller = await self._guard.job_caller(context)
        job = await self._jobs.authorize(request.job_id, request.job_token)
        check_drive(caller, job)
        timeout = request.timeout_s if math.isfinite(request.timeout_s) and request.timeout_s > 0 else 60.0
        state = await self._rounds.wait_finished(job.job_id, request.round, timeout)
        metrics = await self._rounds.metrics_of(job.job_id, state)
        yield pb.AggregateChunk(round=round_info(state), metrics_json=json.dumps(metrics))
        if state.round != request.round or state.state != "closed":
            return
        namespace = self._hot.namespace(job.job_id)
        ref = await self._rounds.blobs.ref(namespace, state.aggregate_digest)
        if ref is None:
            raise NotFound(f"aggregate of round {request.round} expired")
        async for chunk in self._rounds.blobs.iter_chunks(namespace, ref.digest):
            yield pb.AggregateChunk(data=chunk, total_size=ref.size)
