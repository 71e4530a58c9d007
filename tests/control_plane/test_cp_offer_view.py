"""The cached offer view: a periodic re-read that races an event must not undo the event.

Check-ins compute offers from an in-memory view of open rounds, kept current by events and re-read
from Redis every tick. If a re-read that began before a round started lands after the round_started
event, clients that check in until the next tick see no round, wait for a wake-up that already
happened, and are sent away with a long retry_after.
"""

from __future__ import annotations

import asyncio

from control_plane.events import EventBus


async def test_refresh_racing_round_start_keeps_the_round_offered(plane, stubs, wait_for):
    plane.scheduler.stop()  # no periodic re-read besides the one this test controls
    job_id, token = await stubs.register(name="racy-view", demand=2)
    real_rounds = plane.hot.rounds
    read, resume = asyncio.Event(), asyncio.Event()

    async def paused_rounds(job_ids: list[str]):  # the real Redis read, held before it is applied
        states = await real_rounds(job_ids)
        read.set()
        await resume.wait()
        return states

    plane.hot.rounds = paused_rounds
    try:
        refresh = asyncio.create_task(plane.view.refresh_states())
        await asyncio.wait_for(read.wait(), 5)  # it read "no round" ...
    finally:
        plane.hot.rounds = real_rounds
    await stubs.start_round(job_id, token)  # ... then the round starts and its event reaches the view

    async def offered() -> bool:
        return any(offer.job_id == job_id for offer in (await stubs.check_in("first")).offers)

    await wait_for(offered, what="the round_started event to reach the view")
    resume.set()
    await refresh
    late = await stubs.check_in("late")
    assert [offer.job_id for offer in late.offers] == [job_id]


async def test_a_shard_applies_its_own_bind_before_the_accept_is_answered(plane, stubs):
    """The bind event reaches other shards through pub/sub, which on a Redis Cluster can deliver it after the
    client's next call; the binding shard applies it at once, so with its pub/sub stopped its view still holds
    the bind and a full round is offered to no one. Pub/sub's copy names this shard, which skips it."""
    job_id, token = await stubs.register(name="own-binds", demand=1, over_selection=1.0)
    await stubs.start_round(job_id, token)
    checkin = await stubs.check_in("first", wait_s=2.0)
    assert checkin.offers
    other_shard = EventBus(plane.redis, plane.hot.events_channel)
    await other_shard.start()
    try:
        with other_shard.subscribe(job_id) as received:
            plane.scheduler.stop()  # no periodic re-read of the rounds either
            await plane.bus.stop()  # no pub/sub delivery to this shard from here on
            accept = await stubs.accept("first", checkin.session_token, checkin.offers[0].offer_id)
            assert accept.bound
            assert plane.view.bound_to(job_id, "first") and plane.view.snapshot().states[job_id].bound == 1
            assert not (await stubs.check_in("second")).offers, "the round is full"
            event = await asyncio.wait_for(received.get(), 10)
            while event.kind != "client_bound":  # an earlier event of the job that pub/sub delivers late
                event = await asyncio.wait_for(received.get(), 10)
    finally:
        await other_shard.stop()
    assert (event.kind, event.client_id, event.bound, event.origin) == ("client_bound", "first", 1, plane.bus.id)
