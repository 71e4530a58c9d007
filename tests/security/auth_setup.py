"""A control plane with auth on (API keys, enrolled devices) on the test's Redis and SQLite, and its callers."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import sqlalchemy as sa

from control_plane.app import ControlPlane
from control_plane.identity_store import Role
from propius.config import Settings
from propius.proto import DEVICE_TOKEN_HEADER
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec
from tests.conftest import sync_redis

Metadata = tuple[tuple[str, str], ...]

SECRET_SPEC = JobSpec.parse({
    "name": "secretive", "demand": 1, "owner": "alice", "schedule_timeout_s": 3600,
    "requirements": {"public": {"ram": {"max": 64}}, "private": {"hospital_ward": {"in": ["oncology"]}}},
    "task": {"options": {"dataset_url": "s3://alice-private/bucket"}},
})


@asynccontextmanager
async def keyed_plane(settings: Settings, **overrides: object) -> AsyncIterator[ControlPlane]:
    """``settings`` with auth on; credentials are re-read from SQL on every call (a revocation is immediate)."""
    changes = {"auth": "keys", "auth_cache_s": 0.0, **overrides}
    async with ControlPlane(settings.model_copy(update=changes)) as plane:
        yield plane


def api_key(plane: ControlPlane, owner: str, *roles: Role) -> Metadata:
    _, key = plane.identities.create_key(owner, roles, time.time())
    return (("authorization", f"Bearer {key}"),)


def enrolled(plane: ControlPlane, *client_ids: str) -> dict[str, Metadata]:
    """A device credential per client id, enrolled with one token."""
    _, token = plane.identities.create_enrolment(len(client_ids), 60.0, time.time())
    return {client_id: ((DEVICE_TOKEN_HEADER, str(plane.identities.enroll(token, client_id, time.time())[1])),)
            for client_id in client_ids}


class Stubs:
    def __init__(self, address: str) -> None:
        self.channel = grpc.aio.insecure_channel(address)
        self.jobs = pb_grpc.JobServiceStub(self.channel)
        self.clients = pb_grpc.ClientServiceStub(self.channel)
        self.data = pb_grpc.DataServiceStub(self.channel)

    async def close(self) -> None:
        await self.channel.close()


async def refused(call: object) -> grpc.StatusCode:
    """The status a call that must fail answers with (a call that succeeds fails the test)."""
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code()
    raise AssertionError("the call was not refused")


async def footprint(plane: ControlPlane) -> tuple[int, dict[str, int]]:
    """Redis keys under the plane's prefix but the rate limits' buckets (they expire once refilled), and rows
    of the job tables."""
    redis = sync_redis(plane.settings.redis_url)  # a single server's client or a cluster's
    try:
        keys = len([key for key in redis.scan_iter(match=f"{plane.settings.key_prefix}:*", count=1000)
                    if b"{rate:" not in key])
    finally:
        redis.close()
    with plane.store.engine.connect() as conn:
        rows = {table: conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
                for table in ("jobs", "rounds", "bindings", "device_credentials")}
    return keys, rows
