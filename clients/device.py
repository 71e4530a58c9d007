"""One device's life: check in, accept an offer, fetch the model, train, upload, repeat.

Every failure is local to the device: a restarting control plane (UNAVAILABLE) is waited out with
jittered exponential backoff, a rate limit (RESOURCE_EXHAUSTED with "retry after N s") for the time it
asks, stretched by up to half so devices refused together spread out, a closed round
(FAILED_PRECONDITION / NOT_FOUND) drops the task, an expired session (PERMISSION_DENIED) is replaced at
the next check-in. A stop request ends the loop at the next safe point, but an update that has finished
training is still uploaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

import grpc
import numpy as np
from pydantic import ValidationError

from clients.backoff import Backoff, jittered
from clients.codec import decode, encode
from clients.executors import Executor, Task, TaskResult, UnknownExecutor, load_executor
from clients.identity import DeviceIdentity, derive_seed
from clients.rate_hint import rate_hint, throttled
from clients.transport import CHUNK_BYTES, Stubs, read_blob, upload_messages
from propius.proto import DEVICE_TOKEN_HEADER
from propius.proto import propius_pb2 as pb
from propius.retry_after import RetryBudget, stretched
from propius.specs import Constraints, TaskConfig

__all__ = ["AgentConfig", "DeviceAgent"]

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
BINDING_GONE = frozenset(
    {grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED}
)


@dataclass(frozen=True)
class AgentConfig:
    wait_s: float = 20.0
    max_offers: int = 4
    idle_retry_s: float = 1.0
    """Pause after a check-in that bound nothing, when the server did not say how long."""
    rpc_timeout_s: float = 10.0
    transfer_timeout_s: float = 300.0
    chunk_bytes: int = CHUNK_BYTES
    backoff_initial_s: float = 0.2
    backoff_cap_s: float = 5.0
    stopping_upload_attempts: int = 3
    """Upload tries left to a stopping device whose server is unreachable, so shutdown stays bounded."""
    rate_limit: RetryBudget = RetryBudget(attempts=5, total_s=10.0)
    """How long an Accept waits out the device's rate limit before the device checks in again."""


@dataclass(frozen=True)
class _Binding:
    job_id: str
    round: int
    attempt: int
    lease_s: float
    deadline_unix: float


@dataclass(frozen=True)
class _Choice:
    offer: pb.TaskOffer
    config: TaskConfig
    executor: Executor
    accepted: pb.AcceptResponse
    clock: dict[str, float]  # NTP-style estimate from the Accept round trip: clock_offset_s, rtt_s


class DeviceAgent:
    """Runs one device until ``stop`` is set or it has done ``max_tasks`` tasks."""

    def __init__(
        self,
        identity: DeviceIdentity,
        stubs: Stubs,
        *,
        stop: asyncio.Event,
        max_tasks: int | None = None,
        config: AgentConfig | None = None,
        credential: str = "",
    ) -> None:
        """``credential``: the device's credential from enrolment (:mod:`clients.enrolment`), sent with each
        of its calls; empty: the control plane runs in open mode (or knows the device by its certificate)."""
        self.identity = identity
        self._metadata = ((DEVICE_TOKEN_HEADER, credential),) if credential else ()
        self.tasks_done = 0
        self._stubs = stubs
        self._stop = stop
        self._max_tasks = max_tasks
        self._config = config or AgentConfig()
        self._rng = random.Random(identity.seed)
        self._backoff = Backoff(self._rng, self._config.backoff_initial_s, self._config.backoff_cap_s)
        self._client_id = identity.client_id
        self._session = ""
        self._executors: dict[str, Executor] = {}

    @property
    def client_id(self) -> str:
        return self._client_id

    async def run(self) -> int:
        """The device loop; returns the number of accepted uploads. Never raises but for cancellation."""
        while not self._stop.is_set() and (self._max_tasks is None or self.tasks_done < self._max_tasks):
            try:
                await self._cycle()
            except grpc.aio.AioRpcError as error:
                self._log_rpc_error(error)
                await self._pause(self._retry_wait(error) or self._backoff.next())
            except Exception:
                log.exception("device %s: unexpected error; continuing", self._client_id)
                await self._pause(self._backoff.next())
        return self.tasks_done

    # ---------------------------------------------------------------- one check-in

    async def _cycle(self) -> None:
        response = await self._unless(self._check_in(), self._stop)
        if response is None:
            return
        self._backoff.reset()
        self._client_id = response.client_id or self._client_id
        self._session = response.session_token
        choice = await self._bind(response.offers)
        if choice is None:
            await self._pause(jittered(response.retry_after_s or self._config.idle_retry_s, self._rng))
            return
        await self._work(choice)

    async def _check_in(self) -> pb.CheckInResponse:
        profile = self.identity.profile
        request = pb.CheckInRequest(
            profile=pb.ClientProfile(
                client_id=self._client_id, device_class=profile.device_class.value,
                numeric=profile.numeric, labels=profile.labels,
            ),
            wait_s=self._config.wait_s,
            max_offers=self._config.max_offers,
        )
        return await self._stubs.clients.CheckIn(request, timeout=self._config.wait_s + self._config.rpc_timeout_s,
                                                 metadata=self._metadata)

    async def _bind(self, offers: list[pb.TaskOffer]) -> _Choice | None:
        """Accept the first offer this device admits and can run; a full round moves on to the next."""
        for offer in offers:
            if self._stop.is_set():
                return None
            prepared = self._prepare(offer)
            if prepared is None:
                continue
            config, executor = prepared
            sent = time.time()
            request = pb.AcceptRequest(client_id=self._client_id, session_token=self._session, offer_id=offer.offer_id)
            accepted = await throttled(  # a refused Accept is tried again: a new check-in would spend the token
                lambda: self._stubs.clients.Accept(request, timeout=self._config.rpc_timeout_s,  # noqa: B023
                                                   metadata=self._metadata),
                self._config.rate_limit, self._rng)
            received = time.time()
            if accepted.bound:
                offset = accepted.server_unix - (sent + received) / 2 if accepted.server_unix else 0.0
                return _Choice(offer, config, executor, accepted, {"clock_offset_s": offset, "rtt_s": received - sent})
            log.debug("device %s: offer of job %s not bound: %s", self._client_id, offer.job_id, accepted.reason)
        return None

    def _prepare(self, offer: pb.TaskOffer) -> tuple[TaskConfig, Executor] | None:
        """The offer's task config and executor, or None if the private constraints or the executor rule it out."""
        try:
            if not Constraints.from_json(offer.private_requirements_json).admits(dict(self.identity.private)):
                return None
            config = TaskConfig.model_validate_json(offer.task_json)
            executor = self._executor(config.executor)
            return (config, executor) if executor.admits(config) else None
        except (ValidationError, UnknownExecutor) as error:
            log.warning("device %s: skipping offer of job %s: %s", self._client_id, offer.job_id, error)
            return None

    def _executor(self, name: str) -> Executor:
        if name not in self._executors:
            self._executors[name] = load_executor(name)
        return self._executors[name]

    # ---------------------------------------------------------------- one bound task

    async def _work(self, choice: _Choice) -> None:
        accepted = choice.accepted
        binding = _Binding(
            accepted.job_id or choice.offer.job_id, accepted.round, accepted.attempt,
            accepted.lease_s or 10.0, accepted.deadline_unix,
        )
        lost = asyncio.Event()
        heartbeat = asyncio.create_task(self._heartbeat(binding, lost))
        try:
            timings = {**choice.clock, "fetch_start": time.time()}
            model = await self._unless(self._fetch(binding), lost, self._stop)
            if model is None:
                await self._abandon(binding, "lease lost" if lost.is_set() else "stopping")
                return
            timings["fetch_end"] = timings["train_start"] = time.time()
            task = Task(
                job_id=binding.job_id, round=binding.round, attempt=binding.attempt, config=choice.config,
                model=model, client_id=self._client_id, private=self.identity.private,
                seed=derive_seed(self.identity.seed, binding.round),
            )
            result = await asyncio.to_thread(choice.executor.run, task)
            timings["train_end"] = time.time()
            if lost.is_set():
                log.info("device %s: binding to job %s lost during training; dropping", self._client_id, binding.job_id)
                return
            await self._upload(binding, result, timings)
        except asyncio.CancelledError:
            raise
        except Exception:
            await self._release(binding)
            raise
        finally:
            heartbeat.cancel()

    async def _fetch(self, binding: _Binding) -> dict[str, np.ndarray]:
        """The round's model, retried with backoff while the server is unavailable (a lost lease stops it)."""
        request = pb.FetchModelRequest(
            client_id=self._client_id, session_token=self._session, job_id=binding.job_id, round=binding.round
        )
        while True:
            try:
                payload = await read_blob(self._stubs.data.FetchModel(request, timeout=self._config.transfer_timeout_s,
                                                                           metadata=self._metadata))
                return decode(payload)
            except grpc.aio.AioRpcError as error:
                wait_s = self._retry_wait(error)
                if wait_s is None or (binding.deadline_unix and time.time() > binding.deadline_unix):
                    raise
                log.info("device %s: model fetch failed (%s); retrying", self._client_id, error.code().name)
                await asyncio.sleep(wait_s)

    async def _upload(self, binding: _Binding, result: TaskResult, timings: dict[str, float]) -> None:
        """Upload a finished update, retrying while the server is unreachable and the round may still take it."""
        payload = encode(result.update)
        attempts = 0
        while True:
            timings["upload_start"] = time.time()
            header = pb.UploadUpdateRequest(
                client_id=self._client_id, session_token=self._session, job_id=binding.job_id,
                round=binding.round, attempt=binding.attempt, num_samples=result.num_samples,
                metrics_json=json.dumps(result.metrics), timings_json=json.dumps(timings),
            )
            try:
                reply = await self._stubs.data.UploadUpdate(
                    upload_messages(header, payload, self._config.chunk_bytes), timeout=self._config.transfer_timeout_s,
                    metadata=self._metadata,
                )
                break
            except grpc.aio.AioRpcError as error:
                attempts += 1
                wait_s = self._retry_wait(error)
                if wait_s is None or not self._may_retry_upload(binding, attempts):
                    raise
                log.info("device %s: upload failed (%s); retrying", self._client_id, error.code().name)
                await asyncio.sleep(wait_s)
        where = f"device {self._client_id}: job {binding.job_id} round {binding.round}"
        if reply.accepted or reply.duplicate:
            self.tasks_done += 1
            log.info("%s: update uploaded (%d results)", where, reply.results)
        else:
            log.warning("%s: update not accepted", where)

    def _retry_wait(self, error: grpc.aio.AioRpcError) -> float | None:
        """How long to wait before trying a failed call again: a rate limit's hint (stretched), backoff for an
        unreachable server; None when trying again cannot help."""
        if (hint_s := rate_hint(error)) is not None:
            return stretched(hint_s, self._rng)
        return self._backoff.next() if error.code() in RETRYABLE else None

    def _may_retry_upload(self, binding: _Binding, attempts: int) -> bool:
        if binding.deadline_unix and time.time() > binding.deadline_unix:
            return False
        return not self._stop.is_set() or attempts < self._config.stopping_upload_attempts

    async def _heartbeat(self, binding: _Binding, lost: asyncio.Event) -> None:
        """Keep the lease alive; set ``lost`` when the server says the binding is gone."""
        period = binding.lease_s / 3
        request = pb.HeartbeatRequest(
            client_id=self._client_id, session_token=self._session, job_id=binding.job_id, round=binding.round
        )
        delay = period
        while True:
            await asyncio.sleep(delay)
            delay = period
            try:
                reply = await self._stubs.clients.Heartbeat(request, timeout=max(period, 1.0), metadata=self._metadata)
            except grpc.aio.AioRpcError as error:
                if error.code() in BINDING_GONE:
                    lost.set()
                    return
                log.debug("device %s: heartbeat failed: %s", self._client_id, error.code().name)
                if (hint_s := rate_hint(error)) is not None:  # again as soon as allowed, not a period later
                    delay = min(period, stretched(hint_s, self._rng))
                continue
            if not reply.valid:
                lost.set()
                return
            if reply.lease_s > 0:
                period = reply.lease_s / 3

    async def _abandon(self, binding: _Binding, why: str) -> None:
        log.info("device %s: abandoning job %s round %d: %s", self._client_id, binding.job_id, binding.round, why)
        await self._release(binding)

    async def _release(self, binding: _Binding) -> None:
        """Best effort: free the slot now rather than when the lease runs out."""
        request = pb.ReleaseRequest(
            client_id=self._client_id, session_token=self._session, job_id=binding.job_id, round=binding.round
        )
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self._stubs.clients.Release(request, timeout=min(self._config.rpc_timeout_s, 2.0),
                                              metadata=self._metadata)

    # ---------------------------------------------------------------- helpers

    async def _unless(self, awaitable: Awaitable[T], *events: asyncio.Event) -> T | None:
        """``awaitable``'s result, or None (and it cancelled) if one of ``events`` is set first."""
        work = asyncio.ensure_future(awaitable)
        watchers = [asyncio.ensure_future(event.wait()) for event in events]
        try:
            await asyncio.wait([work, *watchers], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for watcher in watchers:
                watcher.cancel()
            interrupted = not work.done()
            if interrupted:
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await work
        return None if interrupted else work.result()

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once on stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    def _log_rpc_error(self, error: grpc.aio.AioRpcError) -> None:
        code = error.code()
        if code in RETRYABLE:
            log.info("device %s: server unreachable (%s); backing off", self._client_id, code.name)
        elif rate_hint(error) is not None:
            log.info("device %s: rate limited (%s)", self._client_id, error.details())
        elif code == grpc.StatusCode.PERMISSION_DENIED:
            log.info("device %s: session expired; checking in again", self._client_id)
        elif code in BINDING_GONE:
            log.info("device %s: task dropped (%s: %s)", self._client_id, code.name, error.details())
        else:
            log.warning("device %s: %s: %s", self._client_id, code.name, error.details())
