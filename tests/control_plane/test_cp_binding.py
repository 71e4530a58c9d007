"""Binding over gRPC: atomic Accept under contention, eligibility and policy order, event-driven wake-up."""

from __future__ import annotations

import asyncio
import math
import time

import grpc

from propius.config import Settings
from propius.proto import propius_pb2 as pb


def retry_while_active(checkin: pb.CheckInResponse, settings: Settings) -> bool:
    """A client offered nothing while a job is active comes back after half to all of max_wait_s (jittered)."""
    return settings.max_wait_s / 2 <= checkin.retry_after_s <= settings.max_wait_s


async def test_concurrent_accepts_never_overfill_a_round(race_plane, wait_for):
    """200 clients race for 50 slots: the Lua bind must admit exactly the target, no more, no fewer."""
    plane, stubs = race_plane
    job_id, token = await stubs.register(name="crowded", demand=50, over_selection=1.0)
    info = await stubs.start_round(job_id, token)
    assert info.target == 50

    # The offer view learns of the round from its round_started event; once it shows, everyone is offered.
    assert (await stubs.check_in("probe", wait_s=2.0)).offers
    client_ids = [f"c{i:03d}" for i in range(200)]
    checkins = await asyncio.gather(*(stubs.check_in(client_id) for client_id in client_ids))
    assert all(len(checkin.offers) == 1 and checkin.offers[0].job_id == job_id for checkin in checkins)
    replies = await asyncio.gather(*(
        stubs.accept(client_id, checkin.session_token, checkin.offers[0].offer_id)
        for client_id, checkin in zip(client_ids, checkins, strict=True)
    ))

    winners = {client_id for client_id, reply in zip(client_ids, replies, strict=True) if reply.bound}
    assert len(winners) == 50
    assert {reply.reason for reply in replies if not reply.bound} == {"round_full"}
    assert sum(not reply.bound for reply in replies) == 150
    state = await plane.hot.round(job_id)
    assert state.bound == 50
    assert await plane.hot.members(job_id, 0, 0) == winners
    # Offers come from a view that bind events update a moment later; binding itself never overfills.
    late = await stubs.check_in("late")
    for offer in late.offers:
        assert (await stubs.accept("late", late.session_token, offer.offer_id)).reason == "round_full"

    async def no_longer_offered() -> bool:
        checkin = await stubs.check_in("later")
        return not checkin.offers and retry_while_active(checkin, plane.settings)

    await wait_for(no_longer_offered, timeout_s=3.0, what="the full round to stop being offered")
    assert (await plane.hot.round(job_id)).bound == 50


async def test_offers_follow_public_requirements_and_fifo_order(stubs, settings):
    """Offers go only to jobs whose public constraints admit the client, in the policy's (FIFO) order."""
    fast, fast_token = await stubs.register(name="fast-cpu", demand=3, requirements={"public": {"cpu_f": {"min": 7}}})
    small, small_token = await stubs.register(name="small-ram", demand=3, requirements={"public": {"ram": {"max": 6}}})
    await stubs.start_round(small, small_token)  # started first: the order must come from registration
    await stubs.start_round(fast, fast_token)

    # wait_s > 0: the offer view learns of each round from its round_started event.
    only_fast = await stubs.check_in("flagship", wait_s=2.0, cpu_f=9, ram=8)
    assert [offer.job_id for offer in only_fast.offers] == [fast]
    only_small = await stubs.check_in("budget", wait_s=2.0, cpu_f=3, ram=4)
    assert [offer.job_id for offer in only_small.offers] == [small]
    both = await stubs.check_in("balanced", cpu_f=8, ram=6)
    assert [offer.job_id for offer in both.offers] == [fast, small]

    neither = await stubs.check_in("neither", cpu_f=3, ram=8)
    assert not neither.offers and retry_while_active(neither, settings)
    missing = await stubs.check_in("no-attributes")
    assert not missing.offers and retry_while_active(missing, settings)

    # An offer for one job cannot be used for the other job's round: it binds where it was offered.
    reply = await stubs.accept("budget", only_small.session_token, only_small.offers[0].offer_id)
    assert reply.bound and reply.job_id == small


async def test_long_polling_check_in_wakes_when_a_round_starts(plane, stubs, wait_for):
    """A waiting client is woken by the round_started event, not by its wait_s running out."""
    job_id, token = await stubs.register(name="wake", demand=1)
    began = time.monotonic()
    poll = asyncio.create_task(stubs.check_in("sleeper", wait_s=5.0, cpu_f=8))

    async def waiting() -> bool:
        return len(plane.binder.waiting) == 1

    await wait_for(waiting, what="the check-in to start waiting")
    assert not poll.done()

    started = time.monotonic()
    await stubs.start_round(job_id, token)
    checkin = await asyncio.wait_for(poll, 5.0)
    woke = time.monotonic()

    assert [offer.job_id for offer in checkin.offers] == [job_id]
    assert checkin.retry_after_s == 0
    assert woke - started < 1.5
    assert woke - began < 4.0  # well before wait_s
    reply = await stubs.accept("sleeper", checkin.session_token, checkin.offers[0].offer_id)
    assert reply.bound and reply.round == 0


async def three_waiters(plane, stubs, wait_for) -> dict[str, asyncio.Task]:
    """Clients of known speed waiting in this order: slow (longest), fast, mid."""
    history = plane.view.observations.history
    for client, s_per_sample in (("slow", 1.0), ("fast", 0.01), ("mid", 0.1)):
        history.delivered(client, 1.0, 30 * s_per_sample, 30, 1000.0)  # learned from an earlier job's task
    polls = {}
    for count, client in enumerate(("slow", "fast", "mid"), start=1):
        polls[client] = asyncio.create_task(stubs.check_in(client, wait_s=5.0, cpu_f=8))

        async def queued(count: int = count) -> bool:
            return len(plane.binder.waiting) == count

        await wait_for(queued, what=f"{client} to wait")
    return polls


async def test_a_round_start_wakes_the_fastest_waiting_clients(plane, stubs, wait_for):
    """The default policy's wake key: of three waiters, a 1-slot round (2 wake-ups) wakes the two
    predicted fastest, although the slowest has waited longest."""
    job_id, token = await stubs.register(name="fastest", demand=1, over_selection=1.0)
    polls = await three_waiters(plane, stubs, wait_for)
    await stubs.start_round(job_id, token)
    done, pending = await asyncio.wait([polls["fast"], polls["mid"]], timeout=3.0)
    assert not pending and all(poll.result().offers for poll in done)
    assert not polls["slow"].done() and len(plane.binder.waiting) == 1
    polls["slow"].cancel()


async def test_a_woken_client_that_declines_hands_its_slot_to_a_waiter_not_woken_yet(plane, stubs, wait_for):
    """The 1-slot round wakes the two fastest; both decline it (as a device whose private requirements rule
    the job out does: it checks in again without accepting), so the round wakes the third waiter, the slowest,
    instead of leaving its slot to the deadline, and does not wake the decliners again."""
    job_id, token = await stubs.register(name="declined", demand=1, over_selection=1.0)
    polls = await three_waiters(plane, stubs, wait_for)
    await stubs.start_round(job_id, token)
    done, pending = await asyncio.wait([polls["fast"], polls["mid"]], timeout=3.0)
    assert not pending and not polls["slow"].done()
    for client in ("fast", "mid"):  # back without accepting: each hands its wake back
        again = await stubs.check_in(client, wait_s=0.0, cpu_f=8)
        assert [offer.job_id for offer in again.offers] == [job_id]
    slow = await asyncio.wait_for(polls["slow"], 3.0)
    assert [offer.job_id for offer in slow.offers] == [job_id]
    assert len(plane.binder.waiting) == 0
    order = plane.binder._woken.rank(job_id, plane.view.wake_key(job_id))  # the job's later wakes: decliners last
    assert order("slow") < order("fast") == order("mid") == math.inf


async def test_a_woken_client_that_lost_the_race_is_woken_again_when_the_slot_frees(plane, stubs, wait_for):
    """The 1-slot round wakes the two fastest; fast binds, mid finds the round full and waits again. When fast
    releases its slot, the round's wake includes mid, the fastest waiter, not only clients it never woke."""
    job_id, token = await stubs.register(name="raced", demand=1, over_selection=1.0)
    polls = await three_waiters(plane, stubs, wait_for)
    await stubs.start_round(job_id, token)
    fast, mid = await asyncio.wait_for(asyncio.gather(polls["fast"], polls["mid"]), 3.0)
    bound = await stubs.accept("fast", fast.session_token, fast.offers[0].offer_id)
    assert bound.bound
    assert not (await stubs.accept("mid", mid.session_token, mid.offers[0].offer_id)).bound
    again = asyncio.create_task(stubs.check_in("mid", wait_s=5.0, cpu_f=8))

    async def both_waiting() -> bool:
        return len(plane.binder.waiting) == 2

    await wait_for(both_waiting, what="mid to wait beside slow")
    released = await stubs.clients.Release(pb.ReleaseRequest(client_id="fast", session_token=fast.session_token,
                                                             job_id=job_id, round=bound.round))
    assert released.released
    woken = await asyncio.wait_for(again, 3.0)  # well before its wait_s: the freed slot woke it
    assert [offer.job_id for offer in woken.offers] == [job_id]
    polls["slow"].cancel()


async def test_a_burst_of_unary_check_ins_is_served_whole(stubs):
    """2,000 check-ins at once on one channel: every one is answered (gRPC's queue of calls not yet taken
    up by the event loop used to cancel its overflow with CANCELLED, logging nothing)."""
    client_ids = [f"burst{i}" for i in range(2000)]
    replies = await asyncio.gather(*(stubs.check_in(client_id) for client_id in client_ids), return_exceptions=True)
    assert [reply.code() for reply in replies if isinstance(reply, grpc.aio.AioRpcError)] == []
    assert {reply.client_id for reply in replies} == set(client_ids)


async def test_a_broad_rounds_wake_spares_the_waiters_a_narrower_open_round_needs(plane, stubs, wait_for):
    """Two open rounds: "narrow" admits cpu_f >= 7 (one of the two known clients), "broad" every client. The
    default policy's wake key for the broad round counts the cpu_f-8 client, which the narrow round still
    needs, 1.5x slower, so a cpu_f-2 client 1.2x slower goes first; the narrow round's own key ranks by speed."""
    narrow, narrow_token = await stubs.register(name="narrow", demand=5, requirements={"public": {"cpu_f": {"min": 7}}})
    broad, broad_token = await stubs.register(name="broad", demand=5)
    history = plane.view.observations.history
    for client, s_per_sample in (("fast", 1.0), ("slow", 1.2)):
        history.delivered(client, 1.0, 30 * s_per_sample, 30, 1000.0)
    await stubs.check_in("fast", cpu_f=8)
    await stubs.check_in("slow", cpu_f=2)
    await stubs.start_round(narrow, narrow_token)
    await stubs.start_round(broad, broad_token)

    async def spared() -> bool:
        await plane.view.estimate_supply(3600.0)
        key = plane.view.wake_key(broad)
        return key is not None and key("fast") > key("slow")

    await wait_for(spared, what="the broad round's wake key to spare the narrow round's client")
    own = plane.view.wake_key(narrow)
    assert own is not None and own("fast") < own("slow")


async def test_a_round_its_class_has_too_few_clients_for_is_offered_once_enough_are_known(plane, stubs):
    """The default's ``doom_guard`` live: a round of demand 2 is offered to no client the supply estimate counted
    while it counts one client of the round's class, which is held for a round of demand 1 instead; a client it
    has not counted yet counts itself, and an estimate of none is stale (a checking-in client is one) and is not
    judged."""
    job_id, token = await stubs.register(name="pair", demand=2, rounds=1)
    await stubs.start_round(job_id, token)
    solo_id, solo_token = await stubs.register(name="solo", demand=1, rounds=1)
    await stubs.start_round(solo_id, solo_token)
    both = {job_id, solo_id}
    plane.view.supply = {"{}": 0}  # the jobs' class (no requirements), as estimated before any client came
    assert {offer.job_id for offer in (await stubs.check_in("a", wait_s=2.0)).offers} == both
    assert await plane.view.estimate_supply(3600.0) == {"{}": 1}
    assert [offer.job_id for offer in (await stubs.check_in("a")).offers] == [solo_id]  # counted, alone: 1 < 2
    assert {offer.job_id for offer in (await stubs.check_in("b")).offers} == both  # 1 + itself
    await plane.view.estimate_supply(3600.0)
    assert {offer.job_id for offer in (await stubs.check_in("a")).offers} == both
