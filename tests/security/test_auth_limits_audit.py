"""Rate limits per key, per device and per address presenting unknown credentials (RESOURCE_EXHAUSTED with
the wait); the SQL audit log of state-changing calls and who made them, bounded; the operator's CLI."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from typer.testing import CliRunner

from control_plane.identity_store import AuditRecord, EnrolmentRefused, IdentityStore
from propius.cli import app
from propius.keys import rate_key
from propius.proto import propius_pb2 as pb
from propius.specs import JobSpec
from tests.conftest import sync_redis
from tests.security.auth_setup import SECRET_SPEC, Stubs, api_key, enrolled, footprint, keyed_plane, refused

EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


async def _details(call: object) -> tuple[grpc.StatusCode, str]:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    raise AssertionError("the call was not refused")


async def test_a_key_over_its_rate_gets_resource_exhausted(settings):
    slow = 0.01  # a token per 100 s: none comes back during the test, however loaded the machine
    async with keyed_plane(settings, key_rate_per_s=slow, key_burst=3, device_rate_per_s=slow, device_burst=2) as plane:
        stubs = Stubs(plane.address)
        alice, bob = api_key(plane, "alice", "submit"), api_key(plane, "bob", "submit")
        for _ in range(3):
            await stubs.jobs.ListJobs(pb.ListJobsRequest(), metadata=alice)
        code, details = await _details(stubs.jobs.ListJobs(pb.ListJobsRequest(), metadata=alice))
        assert code == EXHAUSTED and "retry after" in details
        await stubs.jobs.ListJobs(pb.ListJobsRequest(), metadata=bob)  # another key has its own bucket

        phone = enrolled(plane, "phone")["phone"]
        request = pb.CheckInRequest(profile=pb.ClientProfile(client_id="phone"), wait_s=0.0)
        for _ in range(2):
            await stubs.clients.CheckIn(request, metadata=phone)
        code, details = await _details(stubs.clients.CheckIn(request, metadata=phone))
        assert code == EXHAUSTED and "device 'phone'" in details
        await stubs.close()


async def test_anonymous_registrations_are_refused_and_unknown_keys_throttled(settings):
    async with keyed_plane(settings, auth_failures_per_s=0.01, auth_cache_s=60.0) as plane:  # burst 1, 1 per 100 s
        stubs = Stubs(plane.address)
        alice = api_key(plane, "alice", "submit")
        await stubs.jobs.ListJobs(pb.ListJobsRequest(), metadata=alice)  # her key is now in the plane's cache
        before = await footprint(plane)
        spec = pb.RegisterJobRequest(spec_json=JobSpec.parse({"name": "flood", "demand": 1}).to_json())
        started = time.monotonic()
        codes = await asyncio.gather(*(refused(stubs.jobs.RegisterJob(spec)) for _ in range(500)))
        assert set(codes) == {grpc.StatusCode.UNAUTHENTICATED}
        elapsed = time.monotonic() - started
        guessed = (("authorization", "Bearer pk_0123456789ab_" + "z" * 43),)  # each costs a SQL lookup ...
        codes = [await refused(stubs.jobs.RegisterJob(spec, metadata=guessed)) for _ in range(3)]
        assert codes == [grpc.StatusCode.UNAUTHENTICATED, EXHAUSTED, EXHAUSTED]  # ... until throttled
        await stubs.jobs.ListJobs(pb.ListJobsRequest(), metadata=alice)  # a cached key from that address: served
        assert await footprint(plane) == before
        print(f"500 anonymous RegisterJob refused in {elapsed:.2f} s")
        await stubs.close()


async def test_state_changes_are_audited_with_their_caller(settings):
    async with keyed_plane(settings) as plane:
        stubs = Stubs(plane.address)
        alice, bob = api_key(plane, "alice", "submit"), api_key(plane, "bob", "submit")
        job = await stubs.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=SECRET_SPEC.to_json()), metadata=alice)
        ref = pb.JobRef(job_id=job.job_id, job_token=job.job_token)
        await stubs.jobs.StartRound(pb.StartRoundRequest(job_id=job.job_id, job_token=job.job_token), metadata=alice)
        await refused(stubs.jobs.CancelJob(ref, metadata=bob))
        await refused(stubs.jobs.CancelJob(ref))  # unauthenticated: no identity, no row
        await stubs.jobs.CancelJob(ref, metadata=alice)
        await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=alice)  # a read: not audited
        _, token = plane.identities.create_enrolment(1, 60.0, time.time())
        forged = pb.EnrollRequest(enrolment_token="pe_0123456789ab_" + "q" * 43, client_id="phone")
        await refused(stubs.clients.Enroll(forged))  # an unknown token: no row either
        await stubs.clients.Enroll(pb.EnrollRequest(enrolment_token=str(token), client_id="phone"))
        await plane.audit.flush()
        rows = [(row.actor.split(":")[0], row.actor.split(":")[-1], row.method, row.target, row.outcome)
                for row in plane.identities.audit()]
        assert rows == [
            ("key", "alice", "RegisterJob", job.job_id, "OK"),
            ("key", "alice", "StartRound", job.job_id, "OK"),
            ("key", "bob", "CancelJob", job.job_id, "PERMISSION_DENIED"),
            ("key", "alice", "CancelJob", job.job_id, "OK"),
            ("enrolment", token.id, "Enroll", "phone", "OK"),
        ]
        await stubs.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_audit_log_is_bounded_and_enrolment_is_atomic(backend, request):
    store = IdentityStore.open(request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_database_url"))
    now = time.time()
    store.record_audit([AuditRecord(now - 100, "old", "M", "", "OK")], max_rows=100, older_than=now - 200)
    store.record_audit([AuditRecord(now, "a", "M", str(i), "OK") for i in range(150)], max_rows=100,
                       older_than=now - 50)
    rows = store.audit(limit=1000)
    assert len(rows) == 100 and rows[-1].target == "149" and "old" not in {row.actor for row in rows}
    _, token = store.create_enrolment(2, 60.0, now)
    store.enroll(token, "phone", now)
    with pytest.raises(EnrolmentRefused):
        store.enroll(token, "phone", now)  # taken: refused without spending the token's second use
    assert store.enrolments()[0].uses_left == 1 and [d.client_id for d in store.devices()] == ["phone"]
    store.close()


@pytest.fixture
def cli():
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    return run


def test_operator_cli_creates_lists_and_revokes(cli, sqlite_url):
    database = ("--database-url", sqlite_url)
    created = cli("keys", "create", "--owner", "alice", "--role", "submit", "--role", "read", *database)
    key = created.split()[-1]
    assert key.startswith("pk_")
    key_id = key.split("_")[1]
    listed = cli("keys", "list", *database)
    assert key_id in listed and "read,submit" in listed and key not in listed  # never the secret
    cli("keys", "revoke", key_id, *database)
    store = IdentityStore.open(sqlite_url)
    assert store.key(key_id).revoked_at is not None
    token = cli("devices", "token", "create", "--uses", "3", "--ttl-s", "60", *database).split()[-1]
    assert token.startswith("pe_") and token not in cli("devices", "token", "list", *database)
    store.record_audit([AuditRecord(time.time(), "key:abc:alice", "CancelJob", "job-1", "OK")], 100, 0.0)
    store.close()
    assert "CancelJob" in cli("audit", "--target", "job-1", *database)


@pytest.mark.parametrize("shared", [True, False])
async def test_a_keys_rate_is_shared_by_every_shard(settings, shared):
    """Two shards on one Redis and database: with shared buckets the key's burst of 3 is spent once, whichever
    shard each call reaches; per process (``shared_rate_limits`` off) each shard grants its own 3."""
    limits = {"key_rate_per_s": 0.01, "key_burst": 3, "shared_rate_limits": shared}  # no token back in the test
    async with keyed_plane(settings, **limits) as one, keyed_plane(settings, **limits) as two:
        alice = api_key(one, "alice", "submit")
        stubs = [Stubs(one.address), Stubs(two.address)]
        granted = 0
        for call in range(8):
            try:
                await stubs[call % 2].jobs.ListJobs(pb.ListJobsRequest(), metadata=alice)
                granted += 1
            except grpc.aio.AioRpcError as error:
                assert error.code() == EXHAUSTED
        key_id = one.identities.keys()[0].key_id
        bucket = rate_key(settings.key_prefix, "key", key_id)
        redis = sync_redis(settings.redis_url)
        ttl_ms = redis.pttl(bucket)
        redis.close()
        for stub in stubs:
            await stub.close()
    assert granted == (3 if shared else 6)
    if shared:  # the bucket expires once it would be full again: 3 tokens at 0.01/s, and 1 s
        assert 0 < ttl_ms <= 301_000
    else:
        assert ttl_ms == -2  # no such key: nothing in Redis
