"""The live control plane learns client estimates and round timings from its events, as the simulator does."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import numpy as np
import pytest

from control_plane.events import Event
from control_plane.observations import LiveObservations
from control_plane.scheduling.attempts import Attempt
from control_plane.scheduling.history import ClientHistory
from control_plane.scheduling.round_timings import RoundTimings
from control_plane.scheduling.state import ActiveJob, RoundState, job_view
from policies import load_policy
from propius.specs import JobSpec

SPEC = JobSpec.parse({"name": "seen", "demand": 2, "over_selection": 1.5, "task": {"local_steps": 2, "batch_size": 5}})
WORK = 2 * 3 * 5  # sample passes per task


class OneJob:
    def __init__(self, job: ActiveJob) -> None:
        self.job = job

    def cached(self, job_id: str) -> ActiveJob | None:
        return self.job if job_id == self.job.job_id else None


def state(opened_at: float, round_: int = 0, attempt: int = 0) -> RoundState:
    return RoundState(job_id="j", round=round_, attempt=attempt, state="open", demand=2, target=3, min_results=2,
                      bound=0, results=0, started_at=opened_at, deadline_at=opened_at + 100, closed_at=0.0,
                      model_digest="", aggregate_digest="")


def bound(client: str, at: float, count: int) -> Event:
    return Event("client_bound", "j", 0, 0, client, at=at, bound=count)


@pytest.fixture
def seen() -> LiveObservations:
    return LiveObservations(OneJob(ActiveJob("j", SPEC, "", 0.0, "running", 0)))  # type: ignore[arg-type]


def test_events_teach_what_the_simulator_feeds_directly(seen: LiveObservations) -> None:
    seen.on_event(Event("round_started", "j", 0, 0, at=10.0, state=state(10.0).to_hash()))
    seen.on_event(Event("model_published", "j", 0, 0, at=12.0, model_kbit=800.0))
    for client, at, count in (("a", 11.0, 1), ("b", 13.0, 2), ("c", 14.0, 3)):
        seen.on_event(bound(client, at, count))
    # a: bound before the model was published, so its download counts from 12.0: 4 s for 800 kbit; 6 s training.
    seen.on_event(Event("update_accepted", "j", 0, 0, "a", at=23.0, fetch_end=16.0, train_s=6.0))
    # b claims 30 s of phases (3 s download, 27 s training) but was bound only 10 s: scaled down to fit.
    seen.on_event(Event("update_accepted", "j", 0, 0, "b", at=23.0, fetch_end=16.0, train_s=27.0))
    seen.on_event(Event("client_dropped", "j", 0, 0, "c", at=20.0, bound=2))
    view = seen.annotate(job_view(ActiveJob("j", SPEC, "", 0.0, "running", 0), state(10.0), supply=5))
    seen.on_event(Event("round_closed", "j", 0, 0, at=23.0))

    direct = ClientHistory()
    direct.delivered("a", 4.0, 6.0, WORK, 800.0)
    direct.delivered("b", 1.0, 9.0, WORK, 800.0)
    direct.missed("c", 6.0, WORK, 800.0)
    for client in "abc":
        assert seen.estimate(client) == direct.estimate(client)
    assert seen.estimate("a").task_s(view) == pytest.approx(6.0 + 2 * 4.0)
    assert seen.speed_tiers() == direct.speed_tiers(3)

    timings = RoundTimings()
    timings.finished(Attempt(0, 0, 10.0, 2, filled_at=13.0), 23.0)  # the demand-th (2nd) bind at 13.0
    after = seen.annotate(view)
    assert (after.recent_schedule_s, after.recent_response_s) == (timings.recent_schedule_s, 10.0)
    assert (after.model_size_kbit, after.work_samples) == (800.0, WORK)
    # Before the close: two results, nobody still working (c dropped).
    assert view.expected_results == pytest.approx(2.0)


def test_a_failed_round_is_a_miss_for_who_was_still_working(seen: LiveObservations) -> None:
    seen.on_event(Event("round_started", "j", 0, 0, at=0.0, state=state(0.0).to_hash()))
    seen.on_event(Event("model_published", "j", 0, 0, at=0.0, model_kbit=800.0))
    seen.on_event(bound("late", 1.0, 1))
    seen.on_event(Event("round_failed", "j", 0, 0, at=50.0))
    assert seen.estimate("late").reliability < seen.estimate("never-seen").reliability
    assert seen.annotate(job_view(ActiveJob("j", SPEC, "", 0.0, "running", 0), state(60.0, 0, 1), 5)
                         ).recent_schedule_s == 50.0  # it never held demand clients: all scheduling


def test_who_was_still_working_when_a_round_ended_is_known_to_need_longer(seen: LiveObservations) -> None:
    seen.on_event(Event("round_started", "j", 0, 0, at=10.0, state=state(10.0).to_hash()))
    seen.on_event(bound("slow", 11.0, 1))
    seen.on_event(Event("model_published", "j", 0, 0, at=12.0, model_kbit=800.0))
    seen.on_event(Event("round_closed", "j", 0, 0, at=23.0))
    direct = ClientHistory()
    direct.unfinished("slow", 11.0, WORK, 800.0)  # its task began with the model, at 12.0
    assert seen.estimate("slow") == direct.estimate("slow")
    assert seen.estimate("slow").reliability == seen.estimate("never-seen").reliability  # released, not missed


def test_sessions_follow_check_in_gaps(seen: LiveObservations) -> None:
    for at in (0.0, 10.0, 20.0):
        seen.checked_in("x", at, session_gap_s=30.0)
    seen.checked_in("x", 100.0, session_gap_s=30.0)  # 80 s of silence: the 0-20 s session ended
    estimate = seen.estimate("x")
    assert (estimate.online_since, estimate.session_s) == (100.0, 20.0)


def test_a_long_task_between_check_ins_is_no_absence(seen: LiveObservations) -> None:
    seen.on_event(Event("round_started", "j", 0, 0, at=0.0, state=state(0.0).to_hash()))
    seen.checked_in("busy", 0.0, session_gap_s=30.0)
    seen.on_event(bound("busy", 1.0, 1))
    seen.on_event(Event("update_accepted", "j", 0, 0, "busy", at=600.0))
    seen.checked_in("busy", 601.0, session_gap_s=30.0)
    assert (seen.estimate("busy").online_since, seen.estimate("busy").session_s) == (0.0, None)


def test_clients_not_heard_of_are_forgotten(seen: LiveObservations) -> None:
    seen.on_event(Event("round_started", "j", 0, 0, at=0.0, state=state(0.0).to_hash()))
    seen.on_event(Event("model_published", "j", 0, 0, at=0.0, model_kbit=800.0))
    seen.on_event(bound("old", 1.0, 1))
    seen.on_event(Event("update_accepted", "j", 0, 0, "old", at=9.0, fetch_end=3.0, train_s=6.0))
    seen.checked_in("new", 500.0, session_gap_s=30.0)
    assert seen.estimate("old").s_per_sample == pytest.approx(6.0 / WORK)
    assert seen.forget_before(100.0) == 1
    assert seen.estimate("old").s_per_sample is None and seen.speed_tiers() == ()
    assert seen.estimate("new").online_since == 500.0


def timings_json(fetch_end: float, train_s: float) -> str:
    now = time.time()
    return json.dumps({"fetch_start": fetch_end - 0.001, "fetch_end": fetch_end, "train_start": fetch_end,
                       "train_end": fetch_end + train_s, "upload_start": now})


async def first_round_of_a_fast_and_a_slow_client(stubs, execution_timeout_s: float) -> tuple[str, str]:
    """A job of demand 2 whose first round both serve: "fast" trains 0.01 s, "slow" 1.5 s. (job id, token)"""
    job_id, token = await stubs.register(name="learns", demand=2, over_selection=1.0,
                                         execution_timeout_s=execution_timeout_s,
                                         task={"local_steps": 1, "batch_size": 10})
    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 0, {"w": np.zeros(4, np.float32)})
    (fast_in, fast), (slow_in, slow) = [await stubs.bind(client) for client in ("fast", "slow")]
    for client, checkin, accept, train_s in (("fast", fast_in, fast, 0.01), ("slow", slow_in, slow, 1.5)):
        await stubs.fetch(client, checkin.session_token, job_id, 0)
        fetched = time.time()
        await asyncio.sleep(train_s)
        await stubs.upload(client, checkin.session_token, accept, {"w": np.ones(4, np.float32)}, 1.0,
                           timings_json=timings_json(fetched, train_s))
    info, _ = await stubs.aggregate(job_id, token, 0)
    assert info.results == 2
    return job_id, token


async def test_the_live_plane_skips_a_client_it_learned_is_too_slow_for_the_round(planes, stub_factory) -> None:
    """Deadline-aware dispatch (the `deadline_aware` plug-in added to the default profile), acting on what the
    live plane learned."""
    # The slow task outlasts no lease, whatever the machine's load.
    plane = await planes.start(lease_s=10.0, policy_options={"deadline_aware": True})
    stubs = await stub_factory(plane.address)
    job_id, token = await first_round_of_a_fast_and_a_slow_client(stubs, execution_timeout_s=1.0)

    await stubs.start_round(job_id, token)
    assert (await stubs.check_in("fast", wait_s=2.0)).offers, "the fast client is offered the round"
    view = plane.view.snapshot().views[0]
    assert view.recent_response_s is not None and view.model_size_kbit > 0
    learned = plane.view.observations
    assert learned.estimate("fast").task_s(view) < 1.0 < learned.estimate("slow").task_s(view)
    assert not (await stubs.check_in("slow", wait_s=0.0)).offers, "the slow one would miss its deadline"


async def test_the_live_plane_leaves_a_slow_client_when_a_fast_idle_one_fills_the_round(planes, stub_factory) -> None:
    """``wait_for_faster``, acting on what the live plane learned from a first round of both clients."""
    plane = await planes.start(lease_s=10.0, policy_options={"wait_for_faster": True})
    stubs = await stub_factory(plane.address)
    job_id, token = await first_round_of_a_fast_and_a_slow_client(stubs, execution_timeout_s=60.0)
    await plane.scheduler.refresh()  # who is online (recent check-ins): what the scheduler reads every 5 s

    await stubs.start_round(job_id, token, demand=1)
    assert (await stubs.check_in("fast", wait_s=2.0)).offers, "the fast client is offered the round"
    head = plane.view.snapshot().views[0]
    assert head.fastest_fill_at is not None and head.fastest_fill_at < time.time() + 1.0
    assert not (await stubs.check_in("slow", wait_s=0.0)).offers, "the idle fast client would deliver first"
    plane.view.policy = load_policy("propius")  # the default profile: no wait_for_faster plug-in
    assert (await stubs.check_in("slow", wait_s=0.0)).offers, "without the rule the slow client is offered it"


async def test_the_live_plane_holds_a_client_for_the_next_round_of_a_tight_job(planes, stub_factory) -> None:
    """``hold_for_tight``, on a job whose rounds need both known clients, timed by the live plane."""
    plane = await planes.start(lease_s=10.0, policy_options={"hold_for_tight": True})
    stubs = await stub_factory(plane.address)
    job_id, token = await first_round_of_a_fast_and_a_slow_client(stubs, execution_timeout_s=60.0)
    # Registered later, open-ended like the first: ranked after it. Its task takes "fast" about 30 s.
    other_id, other_token = await stubs.register(name="other", demand=1, task={"local_steps": 3000, "batch_size": 10})
    await stubs.start_round(other_id, other_token)
    await stubs.publish(other_id, other_token, 0, {"w": np.zeros(4, np.float32)})
    await plane.scheduler.refresh()  # the class supply (recent check-ins): two clients

    await stubs.start_round(job_id, token)
    await stubs.publish(job_id, token, 1, {"w": np.zeros(4, np.float32)})
    checkin, accept = await stubs.bind("fast")
    assert accept.job_id == job_id
    await stubs.fetch("fast", checkin.session_token, job_id, 1)
    await stubs.upload("fast", checkin.session_token, accept, {"w": np.ones(4, np.float32)}, 1.0,
                       timings_json=timings_json(time.time(), 0.01))
    tight, later = plane.view.snapshot().views
    assert (tight.job_id, later.job_id) == (job_id, other_id)
    assert tight.demand == 2 and plane.view.snapshot().ctx.supply_by_class[tight.eligibility_key] == 2
    assert tight.recent_response_s is not None and tight.recent_response_s < 30.0
    offers = (await stubs.check_in("fast", wait_s=0.0)).offers
    assert other_id not in {offer.job_id for offer in offers}, "30 s there would outlast the tight job's next opening"
    plane.view.policy = load_policy("propius")  # the default profile: no hold_for_tight plug-in
    offers = (await stubs.check_in("fast", wait_s=0.0)).offers
    assert other_id in {offer.job_id for offer in offers}, "without the rule the other job is offered"


def test_fastest_fill_counts_served_clients_busy_elsewhere_from_when_they_free_up(seen: LiveObservations) -> None:
    """The head's ``fastest_fill_at`` from events, as the simulator computes it (tests/policies: the rule)."""
    seen.on_event(Event("round_started", "j", 0, 0, at=0.0, state=state(0.0).to_hash()))
    seen.on_event(Event("model_published", "j", 0, 0, at=0.0, model_kbit=800.0))
    # Round 0 teaches three task times: download 4 s (800 kbit), so a task is train + 2 x 4 s.
    for client, train_s in (("a", 6.0), ("b", 16.0), ("c", 36.0)):
        seen.on_event(bound(client, 0.0, 1))
        seen.on_event(Event("update_accepted", "j", 0, 0, client, at=8.0 + train_s, fetch_end=4.0, train_s=train_s))
    seen.on_event(Event("round_closed", "j", 0, 0, at=44.0))
    k_state = RoundState(job_id="k", round=0, attempt=0, state="open", demand=1, target=1, min_results=1, bound=0,
                         results=0, started_at=90.0, deadline_at=500.0, closed_at=0.0, model_digest="",
                         aggregate_digest="")
    seen.on_event(Event("round_started", "k", 0, 0, at=90.0, state=k_state.to_hash()))
    seen.on_event(Event("model_published", "k", 0, 0, at=90.0, model_kbit=800.0))
    seen.on_event(Event("client_bound", "k", 0, 0, "b", at=95.0, bound=1))  # b works for k until 95 + 24
    seen.on_event(Event("round_started", "j", 1, 0, at=100.0, state=state(100.0, 1).to_hash()))
    seen.on_event(Event("client_bound", "j", 1, 0, "c", at=100.0, bound=1))  # c delivers at 100 + 44
    head = seen.annotate(job_view(ActiveJob("j", SPEC, "", 0.0, "running", 1), state(100.0, 1), supply=5))
    k = seen.annotate(job_view(ActiveJob("k", SPEC, "", 0.0, "running", 0), k_state, supply=5))
    online = {"a", "b", "c", "d"}  # d never delivered to j: its private constraints may not admit it
    # Target 3, no results: a idle (101 + 14 = 115), b when k's task ends (119 + 24 = 143), c (144).
    assert seen.fastest_fill_at(head, [head, k], online, now=101.0) == 144.0
    assert seen.fastest_fill_at(dataclasses.replace(head, target=2), [head, k], online, now=101.0) == 143.0
    assert seen.fastest_fill_at(head, [head, k], online - {"a"}, now=101.0) is None  # two known clients
    assert seen.fastest_fill_at(dataclasses.replace(head, opened_at=0.0), [head, k], online, now=101.0) is None
