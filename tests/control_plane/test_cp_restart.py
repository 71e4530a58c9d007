"""A control plane that stops mid-round and comes back on the same state: the SDK job just continues."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import numpy as np
import pytest

from control_plane.redis_client import connect
from data_plane.tensors import decode
from propius.proto import propius_pb2 as pb
from propius.sdk import AsyncJob
from propius.specs import JobSpec
from tests.conftest import REDIS_MODE


async def test_job_continues_after_restart_mid_round(planes, client_pool, stub_factory, wait_for):
    plane_a = await planes.start()
    port = plane_a.port  # settings say port 0; plane B must take A's port so that everyone reconnects
    spec = JobSpec.parse({"name": "phoenix", "demand": 2, "over_selection": 1.0, "rounds": 2})
    job = AsyncJob(spec, plane_a.address)
    uploads_allowed = asyncio.Event()

    async def drive() -> dict[str, np.ndarray]:
        weights = {"w": np.zeros(3, np.float32)}
        async with job:
            for _ in range(spec.rounds):
                weights = (await job.run_round(weights, timeout_s=120)).tensors
        return weights

    async with client_pool(plane_a.address, 3, hold=uploads_allowed) as pool:
        driver = asyncio.create_task(drive())

        def first_binds() -> set[str]:
            return {client for client, _, round_, attempt in pool.binds if (round_, attempt) == (0, 0)}

        async def round_zero_full() -> bool:
            state = await plane_a.hot.round(job.job_id) if job.job_id else None
            return state is not None and state.bound == 2 and bool(state.model_digest) and len(first_binds()) == 2

        await wait_for(round_zero_full, timeout_s=60.0, what="two clients bound to round 0 on plane A")
        assert (await plane_a.hot.round(job.job_id)).results == 0
        held = first_binds()

        await planes.stop(plane_a)
        plane_b = await planes.start(port=port)
        reopened = await plane_b.hot.round(job.job_id)
        assert (reopened.round, reopened.attempt, reopened.state) == (0, 1, "open")
        assert reopened.model_digest  # the retry serves the same model without the job publishing again

        uploads_allowed.set()  # the attempt-0 uploads now reach plane B, which must refuse them
        weights = await asyncio.wait_for(driver, 120)

    np.testing.assert_array_equal(weights["w"], np.full(3, 2.0, np.float32))  # each round folded exactly once
    assert (0, 0, True) not in {(r, a, ok) for _, r, a, ok in pool.uploads}
    assert {client for client, code in pool.errors if code == grpc.StatusCode.FAILED_PRECONDITION} >= held
    assert {(round_, attempt) for _, _, round_, attempt in pool.binds} == {(0, 0), (0, 1), (1, 0)}

    stubs = await stub_factory(plane_b.address)
    info = await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job.job_id))
    assert info.state == pb.JOB_STATE_COMPLETED
    assert info.rounds_done == info.rounds_total == 2
    rounds = [(r.round, r.attempt, r.state) for r in plane_b.store.rounds(job.job_id)]
    assert rounds == [(0, 0, "failed"), (0, 1, "closed"), (1, 0, "closed")]
    await plane_b.journal.flush()
    attempt_zero = {b.client_id for b in plane_b.store.bindings(job.job_id, round=0) if b.attempt == 0}
    assert attempt_zero == held


UPDATE = {"w": np.ones(3, np.float32)}


async def _bound_clients(stubs, names: list[str]) -> list[tuple[str, pb.AcceptResponse]]:
    bound = []
    for name in names:
        checkin, accept = await stubs.bind(name)
        assert accept.bound
        bound.append((checkin.session_token, accept))
    return bound


async def test_database_outage_during_a_close_ends_the_round_once(planes, stub_factory, wait_for, pg_database_url):
    """The closing upload meets a dead database: it is still accepted (never INTERNAL), the round stays
    open until the database is back, then closes once, advances the job, and the next StartRound opens
    round 1 instead of running round 0 again. The journal keeps what it could not write meanwhile."""
    from benchmarks.chaos_proxy import TcpProxy

    proxy = TcpProxy("127.0.0.1", 5432)
    port = proxy.start()
    try:
        plane = await planes.start(database_url=pg_database_url.replace(":5432/", f":{port}/"))
        stubs = await stub_factory(plane.address)
        job_id, token = await stubs.register(name="outage", demand=2, over_selection=1.0, rounds=2)
        await stubs.start_round(job_id, token)
        await stubs.publish(job_id, token, 0, {"w": np.zeros(3, np.float32)})
        (token_a, accept_a), (token_b, accept_b) = await _bound_clients(stubs, ["a", "b"])
        assert (await stubs.upload("a", token_a, accept_a, UPDATE, 1.0)).accepted
        await plane.journal.flush()

        proxy.cut()
        reply = await stubs.upload("b", token_b, accept_b, UPDATE, 1.0)
        assert reply.accepted and reply.results == 2
        assert (await plane.hot.round(job_id)).state == "open"  # not closed in Redis alone
        with contextlib.suppress(grpc.aio.AioRpcError):
            await stubs.start_round(job_id, token)  # refused while round 0 is open
        assert plane.journal.pending > 0
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stubs.jobs.ListJobs(pb.ListJobsRequest())  # a read that needs the database
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

        proxy.restore()

        async def closed_once() -> bool:
            state = await plane.hot.round(job_id)
            return state.state == "closed"

        await wait_for(closed_once, timeout_s=10.0, what="the deferred close replayed by the tick")
        info = await stubs.start_round(job_id, token)
        assert (info.round, info.attempt) == (1, 0)
        await wait_for(lambda: _flushed(plane), timeout_s=5.0, what="the journal written after the outage")
        rounds = [(r.round, r.attempt, r.state, r.results) for r in plane.store.rounds(job_id)]
        assert rounds == [(0, 0, "closed", 2), (1, 0, "open", 0)]
        assert plane.store.get_job(job_id).rounds_done == 1
        outcomes = {(b.client_id, b.outcome) for b in plane.store.bindings(job_id, round=0)}
        assert outcomes == {("a", "completed"), ("b", "completed")}
    finally:
        proxy.stop()


async def _flushed(plane) -> bool:
    await plane.journal.flush()
    return plane.journal.pending == 0


async def test_redis_restarted_empty_reopens_the_round_from_the_durable_record(
    planes, stub_factory, wait_for, redis_url, key_prefix,
):
    """Redis loses everything mid-round: the plane rebuilds the job's round from SQL as a new attempt with
    the checkpointed model, and the job completes all its rounds (a closed round is not run again)."""
    plane = await planes.start()
    stubs = await stub_factory(plane.address)
    job_id, token = await stubs.register(name="amnesia", demand=1, over_selection=1.0, rounds=2)
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros(3, np.float32)})
    ((session, accept),) = await _bound_clients(stubs, ["c0"])
    assert (await stubs.upload("c0", session, accept, UPDATE, 1.0)).accepted
    await stubs.start_round(job_id, token)
    model_1 = await stubs.publish(job_id, token, 1, {"w": np.full(3, 5.0, np.float32)})

    wiped = connect(redis_url, decode_responses=False, max_connections=4)
    keys = [key async for key in wiped.scan_iter(match=f"{key_prefix}:*", count=1000)]
    for key in keys:  # this plane's whole hot state: what an empty Redis looks like to it
        await wiped.delete(key)
    await wiped.aclose()

    async def reopened() -> bool:
        state = await plane.hot.round(job_id)
        return state is not None and (state.round, state.attempt, state.state) == (1, 1, "open")

    await wait_for(reopened, timeout_s=10.0, what="round 1 re-opened as attempt 1")
    assert (await plane.hot.round(job_id)).model_digest == model_1
    closed = plane.store.rounds(job_id)[0]  # round 0's aggregate is checkpointed under its digest
    np.testing.assert_array_equal(decode(plane.rounds.checkpoints.load(job_id, closed.aggregate_digest))["w"],
                                  np.ones(3, np.float32))

    ((session, accept),) = await _bound_clients(stubs, ["c1"])
    assert (accept.round, accept.attempt) == (1, 1)
    assert np.array_equal((await stubs.fetch("c1", session, job_id, 1))["w"], np.full(3, 5.0, np.float32))
    assert (await stubs.upload("c1", session, accept, UPDATE, 1.0)).accepted
    job = await stubs.jobs.GetJob(pb.GetJobRequest(job_id=job_id))
    assert job.rounds_done == 2
    rounds = [(r.round, r.attempt, r.state) for r in plane.store.rounds(job_id)]
    assert rounds == [(0, 0, "closed"), (1, 0, "failed"), (1, 1, "closed")]
    last = plane.store.latest_round(job_id)
    kept = {path.name for path in (plane.settings.data_dir / "checkpoints" / job_id).iterdir()}
    assert kept == {last.model_digest, last.aggregate_digest} == {model_1, last.aggregate_digest}


@pytest.mark.skipif(REDIS_MODE == "cluster", reason="a proxy stands for one server; tests/cluster kills a primary")
async def test_a_redis_outage_answers_unavailable(planes, stub_factory, redis_url):
    """Redis unreachable: the SDK's and the daemon's calls get UNAVAILABLE (retried), never INTERNAL."""
    from benchmarks.chaos_proxy import TcpProxy

    host, port = redis_url.removeprefix("redis://").split("/")[0].split(":")
    proxy = TcpProxy(host, int(port))
    proxy_port = proxy.start()
    try:
        plane = await planes.start(redis_url=f"redis://127.0.0.1:{proxy_port}/0")
        stubs = await stub_factory(plane.address)
        job_id, token = await stubs.register(name="blackout", demand=1)
        proxy.cut()
        calls = {
            "CheckIn": stubs.check_in("c0"),
            "StartRound": stubs.start_round(job_id, token),
            "GetJob": stubs.jobs.GetJob(pb.GetJobRequest(job_id=job_id)),
        }
        for name, call in calls.items():
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, name
        proxy.restore()
        assert (await stubs.start_round(job_id, token)).round == 0
    finally:
        proxy.stop()
