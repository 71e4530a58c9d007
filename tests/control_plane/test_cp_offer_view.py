"""The cached offer view: a periodic re-read that races an event must not undo the event.

Check-ins compute offers from an in-memory view of open rounds, kept current by events and re-read
from Redis every tick. If a re-read that began before a round started lands after the round_started
event, clients that check in until the next tick see no round, wait for a wake-up that already
happened, and are sent away with a long retry_after.
"""

from __future__ import annotations

import asyncio


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
