"""The simulator's wait pool: who a free slot wakes, answers derived by hand, and the live queue agrees."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.scheduling.wake import WakeRule, sparing_narrower
from control_plane.waiters import WaitQueue
from policies import load_policy
from propius.simulator import PopulationModel, SimConfig, Simulation, Workload, make_population
from propius.simulator.waitpool import WaitPool
from propius.specs import Constraints

STRICT, LOOSE = 0b01, 0b10  # class bits; a strict-class client is eligible for both


def test_oldest_first_across_eligibility_masks() -> None:
    pool = WaitPool(WakeRule(overwake=1.0))
    for client, mask in [(1, LOOSE), (2, STRICT | LOOSE), (3, LOOSE), (4, STRICT | LOOSE), (5, STRICT)]:
        pool.add(client, mask)
    assert pool.wake(LOOSE, 3) == [1, 2, 3]  # arrival order over both masks that have the bit
    assert pool.wake(STRICT, 1) == [4]
    assert len(pool) == 1 and 5 in pool and 1 not in pool


def test_a_wake_key_picks_the_lowest_keys_and_the_oldest_among_equals() -> None:
    pool = WaitPool(WakeRule(overwake=1.0))
    task_s = {1: 90.0, 2: 30.0, 3: 60.0, 4: 30.0, 5: 10.0}
    for client, mask in [(1, LOOSE), (2, STRICT | LOOSE), (3, LOOSE), (4, LOOSE), (5, STRICT)]:
        pool.add(client, mask)
    assert pool.wake(LOOSE, 3, task_s.__getitem__) == [2, 4, 3]  # 5 is not eligible; 2 before 4 (older)
    assert pool.wake(LOOSE | STRICT, 5, task_s.__getitem__) == [5, 1]  # what is left
    assert len(pool) == 0


def test_a_keyed_wake_ranks_only_the_oldest_scan_x_budget() -> None:
    pool = WaitPool(WakeRule(overwake=1.0, scan=2, scan_floor=0))
    task_s = {1: 40.0, 2: 30.0, 3: 20.0, 4: 10.0}
    for client in task_s:
        pool.add(client, LOOSE)
    assert pool.wake(LOOSE, 1, task_s.__getitem__) == [2]  # the faster of the two oldest
    assert pool.wake(LOOSE, 2, task_s.__getitem__) == [4, 3]  # scan 4: all that are left, fastest first


def test_a_small_keyed_wake_after_a_large_one_still_ranks_the_scan_floor() -> None:
    """scan 2, floor 6: a 3-slot wake ranks the 6 oldest and takes the fastest 3; a 1-slot wake after it
    ranks the next 6 oldest, not only the 2 at the head that the large wake left (the slow ones)."""
    pool = WaitPool(WakeRule(overwake=1.0, scan=2, scan_floor=6))
    task_s = {1: 90.0, 2: 10.0, 3: 80.0, 4: 20.0, 5: 70.0, 6: 30.0, 7: 60.0, 8: 50.0, 9: 15.0}
    for client in task_s:
        pool.add(client, LOOSE)
    assert pool.wake(LOOSE, 3, task_s.__getitem__) == [2, 4, 6]  # of 1-6
    assert pool.wake(LOOSE, 1, task_s.__getitem__) == [9]  # of 1, 3, 5, 7, 8, 9; scan 2 alone: 3 (of 1, 3)


def test_a_wake_passes_over_the_clients_it_is_told_to_skip() -> None:
    pool = WaitPool(WakeRule(overwake=1.0))
    task_s = {1: 10.0, 2: 20.0, 3: 30.0}
    for client in task_s:
        pool.add(client, LOOSE)
    assert pool.wake(LOOSE, 1, task_s.__getitem__, skip=frozenset({1})) == [2]  # 1 is faster, but skipped
    assert pool.wake(LOOSE, 2, skip=frozenset({1, 3})) == []
    assert 1 in pool and 3 in pool


def test_the_live_queue_wakes_the_clients_the_simulator_wakes(tiny: Workload, day: PopulationModel,
                                                               wait_for) -> None:
    sim = Simulation(tiny, make_population(400, 2, day), load_policy("propius"), SimConfig(seed=2))
    sim.run()  # clients learned: the wake key differs between them
    job = sim.jobs[0]
    job.open_round(sim.now, token=99)
    score = sim.policy.wake_key(sim.view_of(job))
    assert score is not None
    waiting = list(range(0, 400, 3))
    keys = {c: score(sim.history.estimate(c)) for c in waiting}
    eligible = [c for c in waiting if sim.class_mask[c] & job.wake_bit]
    assert len(set(keys[c] for c in eligible)) > 10 and len(eligible) < len(waiting)

    pool = WaitPool()
    for client in waiting:
        pool.add(client, sim.class_mask[client])
    simulated = pool.wake(job.wake_bit, 5, keys.__getitem__)
    # Budget overwake 2 x 5 slots = 10, ranked among every eligible waiter (fewer than the scan floor).
    assert len(eligible) < WakeRule().scan_floor
    assert simulated == sorted(eligible, key=lambda c: (keys[c], waiting.index(c)))[:10]

    async def live() -> list[int]:
        queue = WaitQueue()
        waits = {c: asyncio.create_task(queue.wait(str(c), dict(sim.population.profiles[c]), 5.0)) for c in waiting}

        async def all_waiting() -> bool:
            return len(queue) == len(waiting)

        await wait_for(all_waiting, what="every client to wait, in this order")
        woken = queue.wake(job.key, job.spec.requirements.public, 5, lambda client_id: keys[int(client_id)])

        async def woken_returned() -> bool:
            return sum(wait.done() for wait in waits.values()) >= len(woken)

        await wait_for(woken_returned, what="the woken waits to return")
        done = [c for c, wait in waits.items() if wait.done() and wait.result()]
        for wait in waits.values():
            wait.cancel()
        assert sorted(map(int, woken)) == sorted(done)
        return done

    assert sorted(asyncio.run(live())) == sorted(simulated)


def test_a_sparing_key_counts_the_waiters_a_narrower_round_needs_slower(wait_for) -> None:
    """A loose round's wake, keyed by task time, penalty 2: a strict-class client (needed by an open strict
    round) of 10 s counts 20 s, of 20 s counts 40 s; the live queue picks the same."""
    pool = WaitPool(WakeRule(overwake=1.0))
    task_s = {1: 90.0, 2: 10.0, 3: 60.0, 4: 20.0, 5: 30.0}
    masks = {1: LOOSE, 2: STRICT | LOOSE, 3: LOOSE, 4: STRICT | LOOSE, 5: LOOSE}
    for client, mask in masks.items():
        pool.add(client, mask)
    key = sparing_narrower(task_s.__getitem__, lambda client: bool(masks[client] & STRICT), 2.0)
    assert pool.wake(LOOSE, 3, key) == [2, 5, 4]  # 20 (2), 30 (5), 40 (4); then 60 (3), 90 (1)
    assert pool.wake(LOOSE, 2, key) == [3, 1]

    queue = WaitQueue(WakeRule(overwake=1.0))

    async def live() -> list[str]:
        waits = [asyncio.create_task(queue.wait(str(c), {"strict": float(masks[c] & STRICT)}, 5.0)) for c in masks]

        async def all_waiting() -> bool:
            return len(queue) == len(masks)

        await wait_for(all_waiting, what="every client to wait, in this order")
        live_key = sparing_narrower(lambda c: task_s[int(c)], lambda c: bool(masks[int(c)] & STRICT), 2.0)
        woken = queue.wake(Constraints().to_json(), Constraints(), 3, live_key)
        for wait in waits:
            wait.cancel()
        return woken

    assert asyncio.run(live()) == ["2", "5", "4"]


@settings(max_examples=300, deadline=None)
@given(
    clients=st.permutations(range(40)), masks=st.lists(st.integers(1, 7), min_size=40, max_size=40),
    wakes=st.lists(st.tuples(st.integers(1, 7), st.integers(0, 6), st.booleans(), st.integers(0, 4)), max_size=6),
    scan=st.integers(1, 3), floor=st.sampled_from([0, 0, 4, 12]),
)
def test_a_wake_picks_what_the_rule_picks_over_every_eligible_waiter_in_arrival_order(
    clients: list[int], masks: list[int], wakes: list[tuple[int, int, bool, int]], scan: int, floor: int,
) -> None:
    """Against the rule applied to the whole queue, oldest first: the pool's wake reads only the heads of its
    per-mask queues, and must come to the same waiters, whoever it is told to skip."""
    rule = WakeRule(overwake=1.0, scan=scan, scan_floor=floor)
    pool = WaitPool(rule)
    waiters = list(zip(clients, masks, strict=True))
    queue = list(waiters)  # (client, mask), arrival order
    for client, mask in waiters:
        pool.add(client, mask)
    task_s = {client: float((client * 7) % 5) for client, _ in waiters}  # ties, broken by arrival
    for bit, slots, keyed, skip_every in wakes:
        skip = frozenset(client for client, _ in queue if skip_every and client % skip_every == 0)
        key = task_s.__getitem__ if keyed else None
        eligible = [client for client, mask in queue if mask & bit and client not in skip]
        expected = rule.choose(eligible, slots, key)
        assert pool.wake(bit, slots, key, skip) == expected
        queue = [(client, mask) for client, mask in queue if client not in expected]
    assert len(pool) == len(queue)
