"""Validate before you write, statuses as documented, bounded resources, and reads that never write.

Each refusal is checked for its status and field, and for leaving nothing behind: no job row, no
Redis key. A bad row already in the store never stops a restart or a listing.
"""

from __future__ import annotations

import asyncio
import json
import math
import time

import grpc
import numpy as np
import pytest

from control_plane.hot_state import token_hash
from control_plane.redis_client import connect
from data_plane.tensors import encode
from propius.keys import global_key
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec

INVALID = grpc.StatusCode.INVALID_ARGUMENT


async def refused(call, code: grpc.StatusCode, field: str = "") -> str:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    details = info.value.details() or ""
    assert info.value.code() == code, f"{info.value.code()}: {details}"
    assert details.startswith(field), details
    return details


def spec_json(**fields) -> str:
    return json.dumps({"name": "j", "demand": 1, **fields})


async def test_register_refuses_non_json_numbers_and_out_of_range_values_without_a_row(plane, stubs):
    register = stubs.jobs.RegisterJob
    cases = {
        "priority": spec_json(priority=math.nan),  # what json.dumps writes by default: NaN
        "schedule_timeout_s": spec_json(schedule_timeout_s=math.inf),
        "rounds": spec_json(rounds=2**63),
        "demand": spec_json(demand=10**6),
        "execution_timeout_s": spec_json(execution_timeout_s=1e12),
        "task.local_steps": spec_json(task={"local_steps": 2**40}),
        "requirements.public.cpu.min": spec_json(requirements={"public": {"cpu": {"min": -math.inf}}}),
        "owner": spec_json(owner="al\x00ice"),
    }
    for field, text in cases.items():
        await refused(register(pb.RegisterJobRequest(spec_json=text)), INVALID, field)
    assert plane.store.list_jobs() == []  # nothing was stored
    job_id, _ = await stubs.register(name="fine", priority=-5.0, rounds=1_000_000)
    listed = await stubs.jobs.ListJobs(pb.ListJobsRequest(include_finished=True))
    assert [job.job_id for job in listed.jobs] == [job_id]


async def test_a_bad_row_in_the_store_is_skipped_on_restart_and_in_listings(planes, stub_factory):
    plane = await planes.start()
    good = JobSpec.parse({"name": "good", "demand": 1}).to_json()
    bad = good.replace('"priority":0.0', '"priority":null')  # what an unchecked NaN was stored as
    assert bad != good
    plane.store.create_job("b" * 32, "bad", "alice", bad, token_hash("t"), time.time())
    plane.store.create_job("a" * 32, "good", "alice", good, token_hash("t"), time.time())
    await planes.stop(plane)

    plane = await planes.start()  # recovery loads the good job and logs the bad one
    stubs = await stub_factory(plane.address)
    listed = await stubs.jobs.ListJobs(pb.ListJobsRequest(include_finished=True))
    assert [job.job_id for job in listed.jobs] == ["a" * 32]
    await refused(stubs.jobs.GetJob(pb.GetJobRequest(job_id="b" * 32)), grpc.StatusCode.NOT_FOUND)
    assert (await stubs.start_round("a" * 32, "t")).state == pb.ROUND_STATE_OPEN


async def test_nul_in_names_and_ids_is_refused_on_postgresql(planes, stub_factory, pg_database_url):
    plane = await planes.start(database_url=pg_database_url)
    stubs = await stub_factory(plane.address)
    await refused(stubs.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=spec_json(owner="a\u0000b"))), INVALID,
                  "owner")
    await refused(stubs.jobs.GetJob(pb.GetJobRequest(job_id="ab\x00c")), INVALID, "job_id")
    await refused(stubs.start_round("ab\x00c", "t"), INVALID, "job_id")
    beat = pb.HeartbeatRequest(client_id="c", session_token="s", job_id="a\x00")
    await refused(stubs.clients.Heartbeat(beat), INVALID, "job_id")
    await refused(stubs.check_in("c\x00"), INVALID, "profile.client_id")
    assert plane.store.list_jobs() == []
    job_id, _ = await stubs.register(name="after")  # still serving
    assert (await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job_id))).name == "after"


async def test_undecodable_messages_are_invalid_argument_on_every_kind_of_rpc(plane, stubs):
    channel, junk = stubs.channel, b"\xff\xff\xff"
    await refused(channel.unary_unary("/propius.v1.JobService/GetJob")(junk), INVALID, "request")
    await refused(channel.unary_unary("/propius.v1.ClientService/CheckIn")(junk), INVALID, "request")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for _ in channel.unary_stream("/propius.v1.DataService/FetchModel")(junk):
            pass
    assert info.value.code() == INVALID
    await refused(channel.stream_unary("/propius.v1.DataService/UploadUpdate")(iter([junk])), INVALID, "request")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        async for _ in channel.stream_stream("/propius.v1.ClientService/Multiplex")(iter([junk])):
            pass
    assert info.value.code() == INVALID
    await stubs.register(name="still-serving")


async def test_list_clients_is_a_read(plane, stubs, wait_for):
    job_id, token = await stubs.register(name="listed", demand=1)
    await stubs.start_round(job_id, token)
    for client_id in ("c1", "c2"):
        await stubs.check_in(client_id)
    await plane.view.estimate_supply(plane.settings.client_ttl_s)
    supply_before = dict(plane.view.supply)
    assert supply_before == {plane.jobs.cached(job_id).eligibility_key: 2}

    tiny = await stubs.clients.ListClients(pb.ListClientsRequest(active_within_s=1e-9))
    assert list(tiny.clients) == [] and dict(tiny.supply_by_job) == {job_id: 0}
    assert plane.view.supply == supply_before  # the scheduler's estimate is untouched
    full = await stubs.clients.ListClients(pb.ListClientsRequest())
    assert sorted(c.profile.client_id for c in full.clients) == ["c1", "c2"]  # nothing was forgotten
    assert dict(full.supply_by_job) == {job_id: 2}


async def test_an_unbound_upload_is_refused_before_its_body_is_read(planes, stub_factory):
    plane = await planes.start(max_update_bytes=4096)
    stubs = await stub_factory(plane.address)
    job_id, token = await stubs.register(name="unbound", demand=1)
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros(4, np.float32)})
    stranger = await stubs.check_in("stranger")  # a valid session, but never bound
    target = pb.AcceptResponse(job_id=job_id, round=0, attempt=0)
    # Over max_update_bytes (would be RESOURCE_EXHAUSTED) but one message: the client has nothing left to
    # write when the server ends the call early, which grpc aio clients can misreport as INTERNAL
    # (grpc/grpc#36066).
    huge = encode({"w": np.zeros(16_000, np.float32)})
    assert 4096 < len(huge) <= 64 * 1024
    await refused(stubs.upload("stranger", stranger.session_token, target, None, 1.0, payload=huge),
                  grpc.StatusCode.PERMISSION_DENIED, "client 'stranger' is not bound")
    assert (await plane.hot.round(job_id)).results == 0


async def test_a_large_profile_is_refused_without_a_trace(planes, stub_factory, redis_url):
    plane = await planes.start(max_profile_bytes=1024)
    stubs = await stub_factory(plane.address)
    labels = {f"label{i}": "x" * 64 for i in range(32)}
    request = pb.CheckInRequest(profile=pb.ClientProfile(client_id="fat", labels=labels))
    await refused(stubs.clients.CheckIn(request), grpc.StatusCode.RESOURCE_EXHAUSTED, "profile")
    redis = connect(redis_url, decode_responses=False, max_connections=4)
    try:
        assert not await redis.hexists(global_key(plane.settings.key_prefix, "clients", "profiles"), "fat")
    finally:
        await redis.aclose()
    assert (await stubs.check_in("slim")).session_token


async def test_live_jobs_per_owner_are_capped(planes, stub_factory):
    plane = await planes.start(max_jobs_per_owner=2)
    stubs = await stub_factory(plane.address)
    first, first_token = await stubs.register(name="one", owner="alice")
    await stubs.register(name="two", owner="alice")
    await refused(stubs.jobs.RegisterJob(pb.RegisterJobRequest(spec_json=spec_json(owner="alice"))),
                  grpc.StatusCode.RESOURCE_EXHAUSTED, "owner")
    assert len(plane.store.list_jobs()) == 2
    await stubs.register(name="other", owner="bob")  # per owner
    await stubs.jobs.CancelJob(pb.JobRef(job_id=first, job_token=first_token))
    await stubs.register(name="three", owner="alice")  # a finished job no longer counts


async def test_a_job_registered_but_never_started_expires(planes, stub_factory, wait_for):
    plane = await planes.start(job_idle_ttl_s=0.5, supply_period_s=0.2)
    stubs = await stub_factory(plane.address)
    idle, _ = await stubs.register(name="idle")
    started, token = await stubs.register(name="started")
    await stubs.start_round(started, token)

    async def idle_cancelled() -> bool:
        return (await stubs.jobs.GetJob(pb.GetJobRequest(job_id=idle))).state == pb.JOB_STATE_CANCELLED

    await wait_for(idle_cancelled, what="the idle job to expire")
    assert [job.job_id for job in plane.jobs.active()] == [started]
    assert (await stubs.jobs.GetJob(pb.GetJobRequest(job_id=started))).state == pb.JOB_STATE_RUNNING


async def test_a_cancelled_jobs_blobs_expire_with_the_job(planes, stub_factory, redis_url):
    plane = await planes.start(finished_job_ttl_s=30.0)
    stubs = await stub_factory(plane.address)
    job_id, token = await stubs.register(name="cancelled")
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros(50_000, np.float32)})  # several chunks
    await stubs.jobs.CancelJob(pb.JobRef(job_id=job_id, job_token=token))
    redis = connect(redis_url, decode_responses=False, max_connections=4)
    try:
        keys = [key async for key in redis.scan_iter(match=plane.hot.namespace(job_id) + ":*")]
        blobs = [key for key in keys if b":blob:" in key]
        assert blobs
        ttls = [await redis.pttl(key) for key in keys]
        assert all(0 < ttl <= 30_000 for ttl in ttls), ttls
    finally:
        await redis.aclose()


async def test_calls_in_flight_on_one_stream_are_capped(planes, stub_factory, wait_for):
    plane = await planes.start(max_stream_calls=2)
    stubs = await stub_factory(plane.address)
    requests: asyncio.Queue[pb.ClientCalls | None] = asyncio.Queue()

    async def calls():
        while (message := await requests.get()) is not None:
            yield message

    stream = pb_grpc.ClientServiceStub(stubs.channel).Multiplex(calls())
    waiting = [pb.ClientCall(call_id=i, check_in=pb.CheckInRequest(profile=pb.ClientProfile(client_id=f"w{i}"),
                                                                   wait_s=5.0)) for i in (1, 2)]
    await requests.put(pb.ClientCalls(calls=waiting))  # two long-polls: the stream is full

    async def both_waiting() -> bool:
        return len(plane.binder.waiting) == 2

    await wait_for(both_waiting, what="the two long-polls to wait")
    await requests.put(pb.ClientCalls(calls=[pb.ClientCall(call_id=3, check_in=pb.CheckInRequest(
        profile=pb.ClientProfile(client_id="w3")))]))
    replies = await stream.read()
    assert [(r.call_id, grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]) for r in replies.replies] == [
        (3, replies.replies[0].status_code)]
    assert replies.replies[0].status_details.startswith("calls")
    await requests.put(pb.ClientCalls(calls=[pb.ClientCall(call_id=1, cancel=True),
                                             pb.ClientCall(call_id=2, cancel=True)]))
    await requests.put(None)
    stream.cancel()
