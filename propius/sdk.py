"""The job-submission SDK: a federated job is a plain loop.

    with Job(spec, server="127.0.0.1:50051") as job:
        for _ in range(spec.rounds):
            result = job.run_round(weights, timeout_s=300)
            weights = result.tensors

``AsyncJob`` is the asyncio variant. Leaving the ``with`` block completes the job, or cancels it if
the block raised. Calls survive a control-plane restart: UNAVAILABLE is retried with backoff, and a
round that the restarted control plane re-opened is awaited again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import numpy as np

from data_plane.tensors import decode, encode
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec

__all__ = ["AsyncJob", "Job", "RoundFailed", "RoundResult"]

T = TypeVar("T")
ProgressCallback = Callable[[pb.RoundInfo], None]
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
CHUNK_BYTES = 1 << 20


class RoundFailed(RuntimeError):
    """A round ended without enough results (it may be retried)."""

    def __init__(self, info: pb.RoundInfo) -> None:
        super().__init__(f"round {info.round} attempt {info.attempt} failed with {info.results} results")
        self.info = info


@dataclass(frozen=True)
class RoundResult:
    info: pb.RoundInfo
    tensors: dict[str, np.ndarray]
    metrics: dict[str, float]


def channel_options() -> list[tuple[str, int]]:
    size = CHUNK_BYTES + (1 << 20)
    return [("grpc.max_receive_message_length", size), ("grpc.max_send_message_length", size)]


async def retrying(call: Callable[[], Awaitable[T]], *, attempts: int = 40, max_delay_s: float = 3.0) -> T:
    """Retry a call on UNAVAILABLE / DEADLINE_EXCEEDED with jittered exponential backoff."""
    delay = 0.1
    for attempt in range(attempts):
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            if error.code() not in _RETRYABLE or attempt == attempts - 1:
                raise
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, max_delay_s)
    raise AssertionError("unreachable")


class AsyncJob:
    def __init__(self, spec: JobSpec, server: str = "127.0.0.1:50051", *, export_trace: bool = False) -> None:
        """``export_trace``: on completion, the control plane writes the job's CCL-Bench data point."""
        self.spec = spec
        self.server = server
        self.export_trace = export_trace
        self.job_id = ""
        self.token = ""
        self.completed: pb.JobInfo | None = None
        self._channel: grpc.aio.Channel | None = None
        self._jobs: pb_grpc.JobServiceStub
        self._data: pb_grpc.DataServiceStub

    async def __aenter__(self) -> AsyncJob:
        await self.register()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            if exc_type is None:
                await self.complete()
            else:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await self.cancel()
        finally:
            await self.close()

    async def register(self) -> str:
        self._channel = grpc.aio.insecure_channel(self.server, options=channel_options())
        self._jobs = pb_grpc.JobServiceStub(self._channel)
        self._data = pb_grpc.DataServiceStub(self._channel)
        reply = await retrying(lambda: self._jobs.RegisterJob(pb.RegisterJobRequest(spec_json=self.spec.to_json())))
        self.job_id, self.token = reply.job_id, reply.job_token
        return self.job_id

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    def _ref(self) -> pb.JobRef:
        return pb.JobRef(job_id=self.job_id, job_token=self.token)

    async def info(self) -> pb.JobInfo:
        return await retrying(lambda: self._jobs.GetJob(pb.GetJobRequest(job_id=self.job_id)))

    async def start_round(self, demand: int = 0) -> pb.RoundInfo:
        request = pb.StartRoundRequest(job_id=self.job_id, job_token=self.token, demand=demand)
        return await retrying(lambda: self._jobs.StartRound(request))

    async def publish_model(self, round_: int, tensors: Mapping[str, np.ndarray]) -> str:
        payload = await asyncio.to_thread(encode, tensors)

        def chunks() -> Any:
            yield pb.PublishModelRequest(job_id=self.job_id, job_token=self.token, round=round_,
                                         data=payload[:CHUNK_BYTES])
            for offset in range(CHUNK_BYTES, len(payload), CHUNK_BYTES):
                yield pb.PublishModelRequest(data=payload[offset: offset + CHUNK_BYTES])

        reply = await retrying(lambda: self._data.PublishModel(chunks()))
        return reply.digest

    async def await_aggregate(
        self, round_: int, timeout_s: float = 600.0, progress: ProgressCallback | None = None
    ) -> RoundResult:
        """Wait for the round to close and read its aggregate. Raises RoundFailed, TimeoutError."""
        watcher = asyncio.create_task(self._watch_progress(progress)) if progress else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError(f"round {round_} of {self.spec.name} did not finish in {timeout_s} s")
                wait_s = min(remaining, 60.0)
                result = await retrying(lambda: self._read_aggregate(round_, wait_s))  # noqa: B023
                if result is not None:
                    return result
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await watcher

    async def _read_aggregate(self, round_: int, timeout_s: float) -> RoundResult | None:
        request = pb.AwaitAggregateRequest(job_id=self.job_id, job_token=self.token, round=round_,
                                           timeout_s=timeout_s)
        info: pb.RoundInfo | None = None
        metrics: dict[str, float] = {}
        buffer = bytearray()
        async for chunk in self._data.AwaitAggregate(request, timeout=timeout_s + 30):
            if info is None:
                info, metrics = chunk.round, json.loads(chunk.metrics_json or "{}")
            buffer += chunk.data
        if info is None or info.state == pb.ROUND_STATE_OPEN:
            return None
        if info.state == pb.ROUND_STATE_FAILED:
            raise RoundFailed(info)
        return RoundResult(info, await asyncio.to_thread(decode, buffer), metrics)  # writable views

    async def _watch_progress(self, progress: ProgressCallback) -> None:
        async for event in self.watch():
            if event.round.job_id:
                progress(event.round)

    async def watch(self) -> AsyncIterator[pb.JobEvent]:
        async for event in self._jobs.WatchJob(pb.GetJobRequest(job_id=self.job_id)):
            yield event

    async def run_round(
        self, tensors: Mapping[str, np.ndarray], *, demand: int = 0, timeout_s: float = 600.0,
        max_attempts: int = 3, progress: ProgressCallback | None = None,
    ) -> RoundResult:
        """Start a round, publish the model, await the aggregate; failed attempts are retried."""
        for attempt in range(max_attempts):
            info = await self.start_round(demand)
            await self.publish_model(info.round, tensors)
            try:
                return await self.await_aggregate(info.round, timeout_s, progress)
            except RoundFailed:
                if attempt == max_attempts - 1:
                    raise
        raise AssertionError("unreachable")

    async def complete(self) -> pb.JobInfo:
        """Complete the job; with ``export_trace``, ``JobInfo.trace_dir`` names its CCL-Bench data point."""
        request = pb.JobRef(job_id=self.job_id, job_token=self.token, export_trace=self.export_trace)
        self.completed = await retrying(lambda: self._jobs.CompleteJob(request))
        return self.completed

    async def cancel(self) -> pb.JobInfo:
        return await retrying(lambda: self._jobs.CancelJob(self._ref()))


class Job:
    """Synchronous facade over :class:`AsyncJob`; runs its own event loop in a background thread."""

    def __init__(self, spec: JobSpec, server: str = "127.0.0.1:50051", *, export_trace: bool = False) -> None:
        self._async = AsyncJob(spec, server, export_trace=export_trace)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="propius-job", daemon=True)
        self._thread.start()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def job_id(self) -> str:
        return self._async.job_id

    def __enter__(self) -> Job:
        self._run(self._async.register())
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        try:
            self._run(self._async.__aexit__(exc_type, *rest))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    def run_round(self, tensors: Mapping[str, np.ndarray], **kwargs: Any) -> RoundResult:
        return self._run(self._async.run_round(tensors, **kwargs))

    def info(self) -> pb.JobInfo:
        return self._run(self._async.info())
