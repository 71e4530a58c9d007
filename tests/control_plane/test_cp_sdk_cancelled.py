"""The SDK retries a call the server cancelled (a control plane stopping cancels its open streams once its grace
period ends), as it retries UNAVAILABLE, but never one this process cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import numpy as np
import pytest

from data_plane.tensors import encode
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.sdk import AsyncJob
from propius.specs import JobSpec

AGGREGATE = {"w": np.arange(3, dtype=np.float32)}


class StoppingDataService(pb_grpc.DataServiceServicer):
    """Cancels the first ``cancels`` AwaitAggregate streams as a stopping server does, then serves a closed round."""

    def __init__(self, cancels: int) -> None:
        self.cancels = cancels
        self.calls = 0
        self.started = asyncio.Event()

    async def AwaitAggregate(self, request: pb.AwaitAggregateRequest, context) -> AsyncIterator[pb.AggregateChunk]:
        self.calls += 1
        self.started.set()
        if self.calls <= self.cancels:
            await context.abort(grpc.StatusCode.CANCELLED, "server shutting down")
        payload = encode(AGGREGATE)
        yield pb.AggregateChunk(round=pb.RoundInfo(job_id=request.job_id, round=request.round,
                                                   state=pb.ROUND_STATE_CLOSED, results=2),
                                metrics_json="{}", total_size=len(payload), data=payload)


class Serving:
    def __init__(self, service: StoppingDataService) -> None:
        self.server = grpc.aio.server()
        pb_grpc.add_DataServiceServicer_to_server(service, self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"

    async def __aenter__(self) -> str:
        await self.server.start()
        return self.address

    async def __aexit__(self, *_: object) -> None:
        await self.server.stop(None)


def connected_job(address: str) -> AsyncJob:
    """A job whose channel is open without registering (only the data service runs here)."""
    job = AsyncJob(JobSpec.parse({"name": "cancelled", "demand": 2}), address)
    job._channel = grpc.aio.insecure_channel(address)
    job._data = pb_grpc.DataServiceStub(job._channel)
    job.job_id, job.token = "j", "t"
    return job


async def test_await_aggregate_retries_a_stream_the_server_cancelled():
    service = StoppingDataService(cancels=2)
    async with Serving(service) as address:
        job = connected_job(address)
        try:
            result = await asyncio.wait_for(job.await_aggregate(0, timeout_s=30), 30)
        finally:
            await job.close()
    assert service.calls == 3
    assert (result.info.round, result.info.results) == (0, 2)
    np.testing.assert_array_equal(result.tensors["w"], AGGREGATE["w"])


async def test_a_call_this_process_cancelled_is_not_retried():
    service = StoppingDataService(cancels=0)
    service.AwaitAggregate = _never_answers(service)  # type: ignore[method-assign]
    async with Serving(service) as address:
        job = connected_job(address)
        waiting = asyncio.create_task(job.await_aggregate(0, timeout_s=30))
        await asyncio.wait_for(service.started.wait(), 30)
        channel = job._channel
        job._channel = None
        await channel.close()  # cancels the open stream locally
        with pytest.raises(asyncio.CancelledError):  # grpc.aio's local cancellation, never an AioRpcError
            await asyncio.wait_for(waiting, 30)
    assert service.calls == 1


def _never_answers(service: StoppingDataService):
    async def handler(request: pb.AwaitAggregateRequest, context) -> AsyncIterator[pb.AggregateChunk]:
        service.calls += 1
        service.started.set()
        await asyncio.Event().wait()
        yield pb.AggregateChunk()

    return handler
