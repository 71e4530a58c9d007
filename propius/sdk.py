"""The job-submission SDK: a federated job is a plain loop.

    with Job(spec, server="127.0.0.1:50051") as job:
        for _ in range(spec.rounds):
            result = job.run_round(weights, timeout_s=300)
            weights = result.tensors

``AsyncJob`` is the asyncio variant and ``Job`` a synchronous facade over it. Leaving the ``with``
block completes the job, or cancels it if the block raised. Calls survive a control-plane restart:
UNAVAILABLE, DEADLINE_EXCEEDED and CANCELLED by a stopping server are retried with jittered exponential
backoff, and a round that the restarted control plane re-opened is awaited again. A rate limit's
RESOURCE_EXHAUSTED is waited out as its "retry after" hint asks, within a ``RetryBudget`` (then
``RateLimited``, still a RESOURCE_EXHAUSTED ``AioRpcError``). Other gRPC errors are raised as
``grpc.aio.AioRpcError`` with the server's status: INVALID_ARGUMENT naming the field (a bad spec),
PERMISSION_DENIED (another job's token), FAILED_PRECONDITION (a round still open, a stale round),
RESOURCE_EXHAUSTED without a hint (a model over the server's limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import numpy as np

from clients.rate_hint import RateLimited, throttled
from data_plane.tensors import decode, encode
from propius.channels import async_channel
from propius.config import ChannelSecurity
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.retry_after import RetryBudget
from propius.specs import JobSpec

__all__ = ["API_KEY_ENV", "API_KEY_FILE_ENV", "AsyncJob", "ChannelSecurity", "Job", "RateLimited", "RetryBudget",
           "RoundFailed", "RoundResult", "api_key_metadata"]

T = TypeVar("T")
ProgressCallback = Callable[[pb.RoundInfo], None]
# A call this process cancels raises asyncio.CancelledError, so CANCELLED here is the server's: a control plane
# stopping cancels its open streams once its grace period ends, and its successor can answer the call again.
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
CHUNK_BYTES = 1 << 20
API_KEY_ENV = "PROPIUS_API_KEY"
API_KEY_FILE_ENV = "PROPIUS_API_KEY_FILE"  # a file holding the key (a container's mounted secret)


def api_key_metadata(api_key: str | None = None) -> tuple[tuple[str, str], ...]:
    """The call metadata that presents ``api_key`` (default: ``$PROPIUS_API_KEY``, else the contents of the
    file ``$PROPIUS_API_KEY_FILE`` names); none without a key (a control plane in open mode needs none)."""
    key = os.environ.get(API_KEY_ENV, "") if api_key is None else api_key
    if api_key is None and not key and (path := os.environ.get(API_KEY_FILE_ENV)):
        key = Path(path).read_text().strip()
    return (("authorization", f"Bearer {key}"),) if key else ()


class RoundFailed(RuntimeError):
    """A round attempt ended without enough results; the round may be retried with ``start_round``.

    Attributes
    ----------
    info : propius_pb2.RoundInfo
        The failed attempt: ``round``, ``attempt``, ``results``, ``state``.
    """

    def __init__(self, info: pb.RoundInfo) -> None:
        super().__init__(f"round {info.round} attempt {info.attempt} failed with {info.results} results")
        self.info = info


@dataclass(frozen=True)
class RoundResult:
    """A closed round: its info, the aggregate and the clients' metrics.

    Attributes
    ----------
    info : propius_pb2.RoundInfo
        The round that closed (``round``, ``attempt``, ``results``, ...).
    tensors : dict of str to numpy.ndarray
        The sample-weighted FedAvg of the clients' updates (new weights, not deltas), writable.
    metrics : dict of str to float
        Each executor metric's sample-weighted mean over the accepted updates.
    """
    info: pb.RoundInfo
    tensors: dict[str, np.ndarray]
    metrics: dict[str, float]


def channel_options() -> list[tuple[str, int]]:
    size = CHUNK_BYTES + (1 << 20)
    return [("grpc.max_receive_message_length", size), ("grpc.max_send_message_length", size)]


async def retrying(call: Callable[[], Awaitable[T]], *, attempts: int = 40, max_delay_s: float = 3.0,
                   rate_limit: RetryBudget = RetryBudget()) -> T:  # noqa: B008 - frozen, shared safely
    """Retry a call on UNAVAILABLE / DEADLINE_EXCEEDED / CANCELLED by the server with jittered exponential backoff,
    and on a rate limit's RESOURCE_EXHAUSTED after its hint, within ``rate_limit`` (then :class:`RateLimited`)."""
    delay = 0.1
    for attempt in range(attempts):
        try:
            return await throttled(call, rate_limit)
        except grpc.aio.AioRpcError as error:
            if error.code() not in _RETRYABLE or attempt == attempts - 1:
                raise
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, max_delay_s)
    raise AssertionError("unreachable")


class AsyncJob:
    """One federated job on a Propius control plane, driven from asyncio.

    Parameters
    ----------
    spec : JobSpec
        The job; validated locally when it was built, and again by the server.
    server : str, default "127.0.0.1:50051"
        The control plane's address, ``host:port``.
    export_trace : bool, default False
        On completion, the control plane writes the job's CCL-Bench data point
        (``completed.trace_dir`` names it).
    security : ChannelSecurity or None, default None
        TLS settings of the channel: ``ChannelSecurity(tls_ca=..., tls_cert=..., tls_key=...)``, or
        ``ChannelSecurity(insecure=True)`` for plaintext; None: from ``PROPIUS_TLS_CA``, ``PROPIUS_TLS_CERT``,
        ``PROPIUS_TLS_KEY``, ``PROPIUS_INSECURE`` (TLS with the system's roots when none is set).
    api_key : str or None, default None
        The submitter's API key (``propius keys create``); None: ``$PROPIUS_API_KEY``, else the file
        ``$PROPIUS_API_KEY_FILE`` names, if set.
    rate_limit : RetryBudget, default RetryBudget()
        How long each call waits out the control plane's rate limit (RESOURCE_EXHAUSTED with "retry after
        N s"): 10 refusals or 30 s of waiting, then :class:`RateLimited`.

    Attributes
    ----------
    job_id, token : str
        Set by ``register``; the token authorises this job's calls and is never shown to clients.
    completed : propius_pb2.JobInfo or None
        The job as ``complete`` left it.

    Examples
    --------
    >>> async def train(spec, weights):                                  # doctest: +SKIP
    ...     async with AsyncJob(spec, "127.0.0.1:50051") as job:
    ...         for _ in range(spec.rounds):
    ...             info = await job.start_round()
    ...             await job.publish_model(info.round, weights)
    ...             result = await job.await_aggregate(info.round, timeout_s=120, progress=print)
    ...             weights = result.tensors
    ...     return weights
    """
    def __init__(self, spec: JobSpec, server: str = "127.0.0.1:50051", *, export_trace: bool = False,
                 security: ChannelSecurity | None = None, api_key: str | None = None,
                 rate_limit: RetryBudget = RetryBudget()) -> None:  # noqa: B008 - frozen, shared safely
        """Prepare the job; nothing is sent until ``register`` (or ``async with``)."""
        self._metadata = api_key_metadata(api_key)
        self._rate_limit = rate_limit
        self.spec = spec
        self.server = server
        self.security = security if security is not None else ChannelSecurity()
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
        """Open a channel and register the job.

        Returns
        -------
        str
            The job's id (also ``self.job_id``).

        Raises
        ------
        grpc.aio.AioRpcError
            INVALID_ARGUMENT naming the field when the server refuses the spec.
        """
        self._channel = async_channel(self.server, self.security, channel_options())
        self._jobs = pb_grpc.JobServiceStub(self._channel)
        self._data = pb_grpc.DataServiceStub(self._channel)
        request = pb.RegisterJobRequest(spec_json=self.spec.to_json())
        reply = await self._retrying(lambda: self._jobs.RegisterJob(request, metadata=self._metadata))
        self.job_id, self.token = reply.job_id, reply.job_token
        return self.job_id

    async def close(self) -> None:
        """Close the channel; the job stays as it is on the server. Idempotent."""
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        return await retrying(call, rate_limit=self._rate_limit)

    def _ref(self) -> pb.JobRef:
        return pb.JobRef(job_id=self.job_id, job_token=self.token)

    async def info(self) -> pb.JobInfo:
        """The job as the control plane sees it now.

        Returns
        -------
        propius_pb2.JobInfo
            State, rounds done, the current round and its counts.
        """
        request = pb.GetJobRequest(job_id=self.job_id)
        return await self._retrying(lambda: self._jobs.GetJob(request, metadata=self._metadata))

    async def start_round(self, demand: int = 0) -> pb.RoundInfo:
        """Open the job's next round, or a new attempt of a round that failed.

        Parameters
        ----------
        demand : int, default 0
            Results wanted this round; 0 means the spec's ``demand``.

        Returns
        -------
        propius_pb2.RoundInfo
            The open round: ``round``, ``attempt``, ``demand``, ``target`` (bind slots), ``deadline_unix``.

        Raises
        ------
        grpc.aio.AioRpcError
            FAILED_PRECONDITION when a round of the job is still open or every round has run;
            INVALID_ARGUMENT for a demand outside [0, 100000].
        """
        request = pb.StartRoundRequest(job_id=self.job_id, job_token=self.token, demand=demand)
        return await self._retrying(lambda: self._jobs.StartRound(request, metadata=self._metadata))

    async def publish_model(self, round_: int, tensors: Mapping[str, np.ndarray]) -> str:
        """Publish the model clients of round ``round_`` train on.

        Clients bound to the round fetch it as soon as it is published. The tensors are encoded as safetensors
        and streamed in 1 MiB chunks; the data plane stores them once, by digest.

        Parameters
        ----------
        round_ : int
            The open round (``start_round``'s ``round``).
        tensors : Mapping[str, numpy.ndarray]
            The model's weights by name.

        Returns
        -------
        str
            The model's content digest.

        Raises
        ------
        grpc.aio.AioRpcError
            FAILED_PRECONDITION for a round that is not open; RESOURCE_EXHAUSTED for a model over the server's
            limit.
        """
        payload = await asyncio.to_thread(encode, tensors)

        def chunks() -> Any:
            yield pb.PublishModelRequest(job_id=self.job_id, job_token=self.token, round=round_,
                                         data=payload[:CHUNK_BYTES])
            for offset in range(CHUNK_BYTES, len(payload), CHUNK_BYTES):
                yield pb.PublishModelRequest(data=payload[offset: offset + CHUNK_BYTES])

        reply = await self._retrying(lambda: self._data.PublishModel(chunks(), metadata=self._metadata))
        return reply.digest

    async def await_aggregate(
        self, round_: int, timeout_s: float = 600.0, progress: ProgressCallback | None = None
    ) -> RoundResult:
        """Wait for round ``round_`` to close and read its aggregate.

        Parameters
        ----------
        round_ : int
            The round to wait for.
        timeout_s : float, default 600.0
            How long to wait in all.
        progress : callable, optional
            Called with each ``propius_pb2.RoundInfo`` update of the job (binds, results) while waiting.

        Returns
        -------
        RoundResult
            The aggregate and metrics of the round.

        Raises
        ------
        RoundFailed
            The attempt ended without enough results (start a new attempt to retry).
        TimeoutError
            The round did not close within ``timeout_s``.
        """
        watcher = asyncio.create_task(self._watch_progress(progress)) if progress else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError(f"round {round_} of {self.spec.name} did not finish in {timeout_s} s")
                wait_s = min(remaining, 60.0)
                result = await self._retrying(lambda: self._read_aggregate(round_, wait_s))  # noqa: B023
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
        async for chunk in self._data.AwaitAggregate(request, timeout=timeout_s + 30, metadata=self._metadata):
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
        """The job's events as they happen.

        Yields
        ------
        propius_pb2.JobEvent
            First a ``snapshot`` of the job, then one event per change (``round_started``, ``client_bound``,
            ``update_accepted``, ``client_dropped``, ``round_closed``, ``round_failed``, ...), each with the
            job's and the round's state after it. The stream ends when the job has finished. A rate limit that
            refuses the stream before its first event is waited out within the job's ``rate_limit`` budget.
        """
        async def opened() -> tuple[Any, Any]:
            stream = self._jobs.WatchJob(pb.GetJobRequest(job_id=self.job_id), metadata=self._metadata)
            return stream, await stream.read()  # a refused opening raises here, before any event

        stream, event = await throttled(opened, self._rate_limit)
        while event is not grpc.aio.EOF:  # read() throughout: grpc refuses mixing it with async iteration
            yield event
            event = await stream.read()

    async def run_round(
        self, tensors: Mapping[str, np.ndarray], *, demand: int = 0, timeout_s: float = 600.0,
        max_attempts: int = 3, progress: ProgressCallback | None = None,
    ) -> RoundResult:
        """Run one round: start it, publish the model, await the aggregate; failed attempts are retried.

        Parameters
        ----------
        tensors : Mapping[str, numpy.ndarray]
            The model clients train on this round.
        demand : int, default 0
            Results wanted; 0 means the spec's ``demand``.
        timeout_s : float, default 600.0
            How long each attempt is awaited.
        max_attempts : int, default 3
            Attempts before a failed round is raised.
        progress : callable, optional
            As in ``await_aggregate``.

        Returns
        -------
        RoundResult
            The round's aggregate and metrics.

        Raises
        ------
        RoundFailed
            Every attempt ended without enough results.
        TimeoutError
            An attempt did not close within ``timeout_s``.
        """
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
        """Mark the job completed; ``async with`` does it on a clean exit.

        Returns
        -------
        propius_pb2.JobInfo
            The completed job; with ``export_trace``, ``trace_dir`` names its CCL-Bench data point.
        """
        request = pb.JobRef(job_id=self.job_id, job_token=self.token, export_trace=self.export_trace)
        self.completed = await self._retrying(lambda: self._jobs.CompleteJob(request, metadata=self._metadata))
        return self.completed

    async def cancel(self) -> pb.JobInfo:
        """Cancel the job and abort its open round; ``async with`` does it when the block raised.

        Returns
        -------
        propius_pb2.JobInfo
            The cancelled job.
        """
        return await self._retrying(lambda: self._jobs.CancelJob(self._ref(), metadata=self._metadata))


class Job:
    """Synchronous facade over :class:`AsyncJob`; runs its own event loop in a background thread.

    Parameters
    ----------
    spec : JobSpec
        The job.
    server : str, default "127.0.0.1:50051"
        The control plane's address, ``host:port``.
    export_trace : bool, default False
        On completion, the control plane writes the job's CCL-Bench data point.
    security : ChannelSecurity or None, default None
        TLS settings of the channel, as for :class:`AsyncJob`.
    api_key : str or None, default None
        The submitter's API key; None: ``$PROPIUS_API_KEY``, if set.
    rate_limit : RetryBudget, default RetryBudget()
        How long each call waits out the control plane's rate limit, as for :class:`AsyncJob`.

    Examples
    --------
    >>> from propius.specs import JobSpec                                # doctest: +SKIP
    >>> from clients.executors.models import initial_weights
    >>> spec = JobSpec.from_yaml("propius/examples/flagship-job.yaml")
    >>> weights = initial_weights(spec.task, seed=0)
    >>> with Job(spec, server="127.0.0.1:50051") as job:
    ...     for _ in range(spec.rounds):
    ...         weights = job.run_round(weights, timeout_s=120).tensors
    """

    def __init__(self, spec: JobSpec, server: str = "127.0.0.1:50051", *, export_trace: bool = False,
                 security: ChannelSecurity | None = None, api_key: str | None = None,
                 rate_limit: RetryBudget = RetryBudget()) -> None:  # noqa: B008 - frozen, shared safely
        self._async = AsyncJob(spec, server, export_trace=export_trace, security=security, api_key=api_key,
                               rate_limit=rate_limit)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="propius-job", daemon=True)
        self._thread.start()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def job_id(self) -> str:
        """The job's id; empty until the ``with`` block registered it."""
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
        """Run one round; see :meth:`AsyncJob.run_round` for the keyword arguments.

        Returns
        -------
        RoundResult
            The round's aggregate and metrics.

        Raises
        ------
        RoundFailed
            Every attempt ended without enough results.
        TimeoutError
            An attempt did not close within its timeout.
        """
        return self._run(self._async.run_round(tensors, **kwargs))

    def info(self) -> pb.JobInfo:
        """The job as the control plane sees it now (:meth:`AsyncJob.info`)."""
        return self._run(self._async.info())
