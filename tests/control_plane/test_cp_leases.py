"""Dropouts: a bound client that stops heart-beating loses its slot, and the round refills and completes."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest

from propius.proto import propius_pb2 as pb


async def next_event(watch, kind: str, timeout_s: float) -> pb.JobEvent:
    """The next event of ``kind`` on a WatchJob stream (others are skipped)."""
    async def read() -> pb.JobEvent:
        while True:
            event = await watch.read()
            assert event is not grpc.aio.EOF, f"watch ended before {kind}"
            if event.kind == kind:
                return event

    return await asyncio.wait_for(read(), timeout_s)


async def test_lease_expiry_frees_the_slot_for_a_new_client(plane, stubs, wait_for):
    job_id, token = await stubs.register(name="dropout", demand=2, over_selection=1.0)
    watch = stubs.jobs.WatchJob(pb.GetJobRequest(job_id=job_id))
    assert (await watch.read()).kind == "snapshot"
    await stubs.start_round(job_id, token)
    model = {"w": np.zeros(4, np.float32)}
    await stubs.publish(job_id, token, 0, model)

    ghost, ghost_accept = await stubs.bind("ghost")  # never heartbeats
    steady, steady_accept = await stubs.bind("steady")
    steady_update = {"w": np.full(4, 2.0, np.float32)}
    assert (await stubs.upload("steady", steady.session_token, steady_accept, steady_update, 1.0)).results == 1
    assert (await plane.hot.round(job_id)).bound == 2

    async def looks_full() -> bool:  # the offer view catches up with the bind events a moment later
        return not (await stubs.check_in("probe")).offers

    await wait_for(looks_full, what="the offer view to show the round full")
    # The round is full, so a newcomer long-polls until the ghost's lease (2 s) runs out.
    refill = asyncio.create_task(stubs.check_in("refill", wait_s=5.0))

    async def refill_waiting() -> bool:
        return len(plane.binder.waiting) == 1

    await wait_for(refill_waiting, what="the newcomer to wait for a slot")
    dropped = await next_event(watch, "client_dropped", timeout_s=6.0)
    assert dropped.round.bound == 1 and dropped.client_id == "ghost"
    assert await plane.hot.members(job_id, 0, 0) == {"steady"}

    beat = await stubs.clients.Heartbeat(pb.HeartbeatRequest(
        client_id="ghost", session_token=ghost.session_token, job_id=job_id, round=0))
    assert not beat.valid
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await stubs.upload("ghost", ghost.session_token, ghost_accept, {"w": np.ones(4, np.float32)}, 1.0)
    assert late.value.code() == grpc.StatusCode.PERMISSION_DENIED  # its lease was lost: no longer bound

    checkin = await asyncio.wait_for(refill, 5.0)
    assert [offer.job_id for offer in checkin.offers] == [job_id]
    accept = await stubs.accept("refill", checkin.session_token, checkin.offers[0].offer_id)
    assert accept.bound
    await stubs.fetch("refill", checkin.session_token, job_id, 0)
    refill_update = {"w": np.full(4, 4.0, np.float32)}
    reply = await stubs.upload("refill", checkin.session_token, accept, refill_update, 1.0)
    assert reply.accepted and reply.results == 2

    info, aggregate = await stubs.aggregate(job_id, token, 0)
    assert info.state == pb.ROUND_STATE_CLOSED and info.results == 2
    np.testing.assert_array_equal(aggregate["w"], np.full(4, 3.0, np.float32))  # the ghost's data is absent
    with pytest.raises(grpc.aio.AioRpcError) as after_close:
        await stubs.upload("ghost", ghost.session_token, ghost_accept, {"w": np.ones(4, np.float32)}, 1.0)
    assert after_close.value.code() == grpc.StatusCode.PERMISSION_DENIED

    await plane.journal.flush()
    outcomes = {b.client_id: b.outcome for b in plane.store.bindings(job_id)}
    assert outcomes == {"ghost": "dropped", "steady": "completed", "refill": "completed"}
    watch.cancel()


async def test_heartbeats_keep_a_lease_alive(planes, stub_factory):
    """The other side of the coin: a client that heartbeats past lease_s keeps its slot and may deliver."""
    plane = await planes.start(lease_s=0.6)
    stubs = await stub_factory(plane.address)
    job_id, token = await stubs.register(name="alive", demand=1)
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros(2, np.float32)})
    checkin, accept = await stubs.bind("worker")
    request = pb.HeartbeatRequest(client_id="worker", session_token=checkin.session_token, job_id=job_id, round=0)
    loop = asyncio.get_running_loop()
    until = loop.time() + 2 * accept.lease_s
    while loop.time() < until:
        assert (await stubs.clients.Heartbeat(request)).valid
        await asyncio.sleep(accept.lease_s / 4)
    assert await plane.hot.is_member(job_id, 0, 0, "worker")
    reply = await stubs.upload("worker", checkin.session_token, accept, {"w": np.ones(2, np.float32)}, 1.0)
    assert reply.accepted and reply.results == 1


async def test_a_task_longer_than_the_session_ttl_keeps_its_binding_while_it_heartbeats(planes, stub_factory):
    """The session outlives its check-in while the client heartbeats: a 3 s task on a 1 s client TTL
    keeps its binding and its upload counts (the binding is lost only by a missed lease)."""
    plane = await planes.start(client_ttl_s=1.0, lease_s=1.0)
    stubs = await stub_factory(plane.address)
    job_id, token = await stubs.register(name="long-task", demand=1, over_selection=1.0)
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros(4, np.float32)})
    checkin, accept = await stubs.bind("slow")
    model = await stubs.fetch("slow", checkin.session_token, job_id, 0)

    beat = pb.HeartbeatRequest(client_id="slow", session_token=checkin.session_token, job_id=job_id, round=0)
    task_end = asyncio.get_running_loop().time() + 3.0  # the task itself: three session TTLs long
    while asyncio.get_running_loop().time() < task_end:
        assert (await stubs.clients.Heartbeat(beat)).valid
        await asyncio.sleep(0.2)
    reply = await stubs.upload("slow", checkin.session_token, accept, {"w": model["w"] + 1}, 1.0)
    assert reply.accepted and reply.results == 1
    info, aggregate = await stubs.aggregate(job_id, token, 0)
    assert info.state == pb.ROUND_STATE_CLOSED
    np.testing.assert_array_equal(aggregate["w"], np.ones(4, np.float32))
