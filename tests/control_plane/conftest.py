"""A live control plane on the real Redis (own key prefix) and a SQLite file, plus a raw gRPC client."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import numpy as np
import pytest

from control_plane.app import ControlPlane
from control_plane.job_service import TraceExporter
from data_plane.tensors import decode, encode
from propius.config import Settings
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.sdk import channel_options
from propius.specs import JobSpec


def make_settings(redis_url: str, key_prefix: str, database_url: str, tmp_path, **overrides) -> Settings:
    base = dict(redis_url=redis_url, key_prefix=key_prefix, database_url=database_url, data_dir=tmp_path,
                port=0, lease_s=2.0, scheduler_period_s=0.2, max_wait_s=5.0, chunk_bytes=64 * 1024, auth="open")
    return Settings(**{**base, **overrides})


@pytest.fixture
def settings(redis_url, key_prefix, sqlite_url, tmp_path) -> Settings:
    return make_settings(redis_url, key_prefix, sqlite_url, tmp_path)


class Planes:
    """Starts control planes with overridden settings (restarts, small limits); stops leftovers at teardown."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._running: list[ControlPlane] = []

    async def start(self, *, trace_exporter: TraceExporter | None = None, **overrides) -> ControlPlane:
        plane = ControlPlane(Settings(**{**self.settings.model_dump(), **overrides}), trace_exporter=trace_exporter)
        await plane.start()
        self._running.append(plane)
        return plane

    async def stop(self, plane: ControlPlane, grace_s: float = 0.1) -> None:
        self._running.remove(plane)
        await plane.stop(grace_s)

    async def close(self) -> None:
        for plane in list(self._running):
            await self.stop(plane)


@pytest.fixture
async def planes(settings) -> AsyncIterator[Planes]:
    manager = Planes(settings)
    yield manager
    await manager.close()


class ClientPool:
    """Simulated clients over raw gRPC that serve whatever they are offered: each returns model + ``delta``.

    Errors (a stopped control plane, a stale round) are recorded and the client checks in again, so a
    pool keeps serving across a restart. While ``hold`` is unset, bound clients heartbeat instead of
    uploading, which keeps a round open with live bindings for as long as a test needs.
    """

    def __init__(self, address: str, size: int, *, delta: float = 1.0, hold: asyncio.Event | None = None,
                 prefix: str = "pool", **numeric: float) -> None:
        self.address = address
        self.client_ids = [f"{prefix}{i}" for i in range(size)]
        self.delta = delta
        self.hold = hold
        self.numeric = numeric
        self.binds: list[tuple[str, str, int, int]] = []  # client, job, round, attempt
        self.uploads: list[tuple[str, int, int, bool]] = []  # client, round, attempt, accepted
        self.errors: list[tuple[str, grpc.StatusCode]] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stubs: Stubs | None = None

    async def __aenter__(self) -> ClientPool:
        self._stubs = Stubs(self.address)
        self._tasks = [asyncio.create_task(self._serve(client_id)) for client_id in self.client_ids]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        assert self._stubs is not None
        await self._stubs.close()

    async def _serve(self, client_id: str) -> None:
        assert self._stubs is not None
        while not self._stop.is_set():
            try:
                await self._cycle(self._stubs, client_id)
            except grpc.aio.AioRpcError as error:
                self.errors.append((client_id, error.code()))
                await asyncio.sleep(0.05)

    async def _cycle(self, stubs: Stubs, client_id: str) -> None:
        checkin = await stubs.check_in(client_id, wait_s=1.0, **self.numeric)
        token = checkin.session_token
        for offer in checkin.offers:
            accept = await stubs.clients.Accept(
                pb.AcceptRequest(client_id=client_id, session_token=token, offer_id=offer.offer_id))
            if not accept.bound:
                continue
            self.binds.append((client_id, accept.job_id, accept.round, accept.attempt))
            model = await stubs.fetch(client_id, token, accept.job_id, accept.round)
            if self.hold is not None:
                await self._heartbeat_until(stubs, client_id, token, accept, self.hold)
            update = {name: value + np.float32(self.delta) for name, value in model.items()}
            reply = await self._upload(stubs, client_id, token, accept, update)
            self.uploads.append((client_id, accept.round, accept.attempt, reply.accepted))
            return

    @staticmethod
    async def _upload(stubs: Stubs, client_id: str, token: str, accept: pb.AcceptResponse,
                      update: dict[str, np.ndarray]) -> pb.UploadUpdateResponse:
        """Like a real device: a finished update is retried while the server is unreachable."""
        deadline = time.monotonic() + 10.0
        while True:
            try:
                return await stubs.upload(client_id, token, accept, update, 1.0)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)

    @staticmethod
    async def _heartbeat_until(stubs: Stubs, client_id: str, token: str, accept: pb.AcceptResponse,
                               release: asyncio.Event) -> None:
        request = pb.HeartbeatRequest(client_id=client_id, session_token=token, job_id=accept.job_id,
                                      round=accept.round)
        while not release.is_set():
            with contextlib.suppress(grpc.aio.AioRpcError):
                await stubs.clients.Heartbeat(request, timeout=1.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(release.wait(), accept.lease_s / 4)


@pytest.fixture
def client_pool() -> type[ClientPool]:
    return ClientPool


class Stubs:
    def __init__(self, address: str) -> None:
        self.channel = grpc.aio.insecure_channel(address, options=channel_options())
        self.jobs = pb_grpc.JobServiceStub(self.channel)
        self.clients = pb_grpc.ClientServiceStub(self.channel)
        self.data = pb_grpc.DataServiceStub(self.channel)

    async def register(self, **spec) -> tuple[str, str]:
        spec.setdefault("name", "job")
        spec.setdefault("demand", 2)
        reply = await self.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=JobSpec.parse(spec).to_json()))
        return reply.job_id, reply.job_token

    async def start_round(self, job_id: str, token: str, demand: int = 0) -> pb.RoundInfo:
        return await self.jobs.StartRound(pb.StartRoundRequest(job_id=job_id, job_token=token, demand=demand))

    async def accept(self, client_id: str, token: str, offer_id: str) -> pb.AcceptResponse:
        return await self.clients.Accept(pb.AcceptRequest(client_id=client_id, session_token=token,
                                                          offer_id=offer_id))

    async def publish(self, job_id: str, token: str, round_: int, tensors: dict[str, np.ndarray]) -> str:
        payload = encode(tensors)
        step = 64 * 1024
        messages = [pb.PublishModelRequest(job_id=job_id, job_token=token, round=round_, data=payload[:step])]
        messages += [pb.PublishModelRequest(data=payload[i: i + step]) for i in range(step, len(payload), step)]
        return (await self.data.PublishModel(iter(messages))).digest

    async def check_in(self, client_id: str, wait_s: float = 0.0, **numeric: float) -> pb.CheckInResponse:
        profile = pb.ClientProfile(client_id=client_id, device_class="edge", numeric=numeric)
        return await self.clients.CheckIn(pb.CheckInRequest(profile=profile, wait_s=wait_s, max_offers=4))

    async def bind(self, client_id: str, **numeric: float) -> tuple[pb.CheckInResponse, pb.AcceptResponse]:
        # wait_s > 0: the offer view learns of a just-started round from its event a moment after StartRound
        checkin = await self.check_in(client_id, wait_s=2.0, **numeric)
        assert checkin.offers, "expected an offer"
        accept = await self.clients.Accept(pb.AcceptRequest(
            client_id=client_id, session_token=checkin.session_token, offer_id=checkin.offers[0].offer_id))
        return checkin, accept

    async def fetch(self, client_id: str, token: str, job_id: str, round_: int) -> dict[str, np.ndarray]:
        buffer = bytearray()
        request = pb.FetchModelRequest(client_id=client_id, session_token=token, job_id=job_id, round=round_)
        async for chunk in self.data.FetchModel(request):
            buffer += chunk.data
        return decode(bytes(buffer))

    async def upload(self, client_id: str, token: str, accept: pb.AcceptResponse, tensors, num_samples: float,
                     metrics_json: str = "{}", payload: bytes | None = None,
                     timings_json: str = "") -> pb.UploadUpdateResponse:
        payload = encode(tensors) if payload is None else payload
        step = 64 * 1024
        header = pb.UploadUpdateRequest(client_id=client_id, session_token=token, job_id=accept.job_id,
                                        round=accept.round, attempt=accept.attempt, num_samples=num_samples,
                                        metrics_json=metrics_json, timings_json=timings_json, data=payload[:step])
        rest = [pb.UploadUpdateRequest(data=payload[i: i + step]) for i in range(step, len(payload), step)]
        return await self.data.UploadUpdate(iter([header, *rest]))

    async def aggregate(self, job_id: str, token: str, round_: int, timeout_s: float = 10.0):
        info, buffer = None, bytearray()
        request = pb.AwaitAggregateRequest(job_id=job_id, job_token=token, round=round_, timeout_s=timeout_s)
        async for chunk in self.data.AwaitAggregate(request):
            if info is None:
                info = chunk.round
            buffer += chunk.data
        return info, (decode(bytes(buffer)) if buffer else None)

    async def close(self) -> None:
        await self.channel.close()


@pytest.fixture
async def stubs(plane) -> AsyncIterator[Stubs]:
    s = Stubs(plane.address)
    yield s
    await s.close()


@pytest.fixture
async def stub_factory() -> AsyncIterator[Callable[[str], Awaitable[Stubs]]]:
    """Stubs for planes started by ``planes``; closed at teardown."""
    made: list[Stubs] = []

    async def make(address: str) -> Stubs:
        made.append(Stubs(address))
        return made[-1]

    yield make
    for stubs in made:
        await stubs.close()


@pytest.fixture
async def race_plane(planes, stub_factory) -> tuple[ControlPlane, Stubs]:
    """A plane for a 200-client accept race, and its stubs. Its lease outlasts the race: with the suite's 2 s, a
    loaded machine let winners' leases expire before the last accepts, and the freed slots went to later clients
    (87 winners over time)."""
    plane = await planes.start(lease_s=60.0)
    return plane, await stub_factory(plane.address)
