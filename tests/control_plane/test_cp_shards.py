"""Two control-plane shards on one Redis and one database share jobs and bind atomically across shards."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from propius.proto import propius_pb2 as pb
from tests.control_plane.conftest import Stubs


async def _waiting_on(stubs: Stubs, plane, wait_for) -> asyncio.Task:
    """A client's long poll on ``plane`` (through ``stubs``), once it waits there."""
    waiting = asyncio.create_task(stubs.check_in("early", wait_s=5))

    async def early_waits() -> bool:
        return len(plane.binder.waiting) == 1

    await wait_for(early_waits, what="the early client to wait")
    return waiting


async def _open_round(stubs: Stubs, job_id: str, token: str) -> None:
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros(2, np.float32)})


async def test_a_round_opened_on_one_shard_is_offered_and_bound_on_the_other(planes, wait_for):
    first, second = await planes.start(), await planes.start()
    a, b = Stubs(first.address), Stubs(second.address)
    try:
        job_id, token = await a.register(name="sharded", demand=4, over_selection=1.0)
        waiting = await _waiting_on(b, second, wait_for)  # on shard B, before the job's round exists anywhere
        await _open_round(a, job_id, token)
        early = await asyncio.wait_for(waiting, 5)
        assert [offer.job_id for offer in early.offers] == [job_id]

        async def bind_via(stubs: Stubs, client_id: str) -> bool:
            checkin = await stubs.check_in(client_id, wait_s=2)
            if not checkin.offers:
                return False
            accept = await stubs.clients.Accept(pb.AcceptRequest(
                client_id=client_id, session_token=checkin.session_token, offer_id=checkin.offers[0].offer_id))
            return accept.bound

        bound = await asyncio.gather(*(bind_via(a if i % 2 else b, f"c{i}") for i in range(10)))
        assert sum(bound) == 4  # the target, never more, whichever shard took the Accept
        state = await first.hot.round(job_id)
        assert state.bound == 4 and len(await first.hot.members(job_id, 0, 0)) == 4
    finally:
        await a.close()
        await b.close()


async def test_a_waiter_is_offered_a_round_whose_job_its_shard_loads_while_a_state_refresh_runs(planes, wait_for):
    """Shard B learns a job shard A registered from the event of its round. A state refresh that runs while B
    loads the job reads only the jobs B knew and drops the round; loading the job re-reads it, so the client
    woken for the round is offered it (before, it waited out its poll with no offer)."""
    first, second = await planes.start(), await planes.start()
    a, b = Stubs(first.address), Stubs(second.address)
    loading, gate, load = asyncio.Event(), asyncio.Event(), second.jobs.get

    async def slow_get(job_id: str):
        loading.set()
        await gate.wait()
        return await load(job_id)

    second.jobs.get = slow_get
    try:
        job_id, token = await a.register(name="learned", demand=1, over_selection=1.0)
        waiting = await _waiting_on(b, second, wait_for)
        await _open_round(a, job_id, token)

        async def loading_the_job() -> bool:
            return loading.is_set()

        await wait_for(loading_the_job, what="shard B to load the job from its round's event")
        await second.view.refresh_states()  # B knows no such job yet: the round's state is dropped
        gate.set()
        early = await asyncio.wait_for(waiting, 5)
        assert [offer.job_id for offer in early.offers] == [job_id]
    finally:
        gate.set()
        await a.close()
        await b.close()


@pytest.mark.parametrize("durable", [True, False], ids=["durable-updates", "re-run"])
async def test_a_dead_shards_round_is_taken_over_by_a_live_one(planes, wait_for, durable):
    """Shard A opens a round, accepts one update and dies (no goodbye: its liveness lapses). Shard B takes
    the round over: with durable updates it folds A's accepted update again and the attempt closes with
    both updates; without, the attempt fails and the round runs again as attempt 1."""
    options = {"shard_ttl_s": 0.5, "durable_updates": durable, "lease_s": 30.0}
    first, second = await planes.start(**options), await planes.start(**options)
    a, b = Stubs(first.address), Stubs(second.address)
    try:
        job_id, token = await a.register(name="orphan", demand=2, over_selection=1.0)
        await a.start_round(job_id, token)
        await a.publish(job_id, token, 0, {"w": np.zeros(2, np.float32)})
        checkin, accept = await a.bind("early")
        assert (await a.upload("early", checkin.session_token, accept, {"w": np.full(2, 2, np.float32)}, 1.0)).accepted
        checkin_late, accept_late = await a.bind("late")

        first.scheduler.stop()  # A dies: no more ticks (its liveness lapses), no more calls
        await first.server.stop(0)

        async def taken_over() -> bool:
            return job_id in second.rounds._aggregators

        await wait_for(taken_over, timeout_s=10.0, what="shard B to take the round over")
        if durable:
            reply = await b.upload("late", checkin_late.session_token, accept_late, {"w": np.full(2, 4, np.float32)},
                                   1.0)
            assert reply.accepted
            info, aggregate = await b.aggregate(job_id, token, 0)
            assert (info.attempt, info.results) == (0, 2)
            np.testing.assert_allclose(aggregate["w"], np.full(2, 3, np.float32))  # A's update counted once
        else:
            state = await second.hot.round(job_id)
            assert (state.round, state.attempt, state.state) == (0, 1, "open")  # re-run with the same model
            assert [r.state for r in second.store.rounds(job_id)] == ["failed", "open"]
    finally:
        await a.close()
        await b.close()
