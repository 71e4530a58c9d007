"""A live control plane on the real Redis (own key prefix) and a SQLite file, plus a raw gRPC client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import numpy as np
import pytest

from control_plane.app import ControlPlane
from data_plane.tensors import decode, encode
from propius.config import Settings
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.sdk import channel_options
from propius.specs import JobSpec


def make_settings(redis_url: str, key_prefix: str, database_url: str, tmp_path, **overrides) -> Settings:
    base = dict(redis_url=redis_url, key_prefix=key_prefix, database_url=database_url, data_dir=tmp_path,
                port=0, lease_s=2.0, scheduler_period_s=0.2, max_wait_s=5.0, chunk_bytes=64 * 1024)
    return Settings(**{**base, **overrides})


@pytest.fixture
def settings(redis_url, key_prefix, sqlite_url, tmp_path) -> Settings:
    return make_settings(redis_url, key_prefix, sqlite_url, tmp_path)


@pytest.fixture
async def plane(settings) -> AsyncIterator[ControlPlane]:
    async with ControlPlane(settings) as cp:
        yield cp


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
        checkin = await self.check_in(client_id, **numeric)
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
                     metrics_json: str = "{}", payload: bytes | None = None) -> pb.UploadUpdateResponse:
        payload = encode(tensors) if payload is None else payload
        step = 64 * 1024
        header = pb.UploadUpdateRequest(client_id=client_id, session_token=token, job_id=accept.job_id,
                                        round=accept.round, attempt=accept.attempt, num_samples=num_samples,
                                        metrics_json=metrics_json, data=payload[:step])
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
