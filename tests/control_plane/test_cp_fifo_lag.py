"""The live control plane learns what the order cost a job against FIFO from its events: the binding shard
names the job a bind passed over on the ``client_bound`` event, and every shard counts it as the simulator
does."""

from __future__ import annotations

import pytest

from control_plane.events import Event
from control_plane.observations import LiveObservations
from control_plane.scheduling.attempts import Attempt
from control_plane.scheduling.round_timings import RoundTimings
from control_plane.scheduling.state import ActiveJob, RoundState, job_view
from propius.specs import JobSpec

SPEC = JobSpec.parse({"name": "old", "demand": 2, "over_selection": 1.0})


class Jobs:
    def cached(self, job_id: str) -> ActiveJob | None:
        return ActiveJob(job_id, SPEC, "", 0.0, "running", 0)


def opened(job_id: str, at: float) -> Event:
    state = RoundState(job_id=job_id, round=0, attempt=0, state="open", demand=2, target=2, min_results=2, bound=0,
                       results=0, started_at=at, deadline_at=at + 100, closed_at=0.0, model_digest="",
                       aggregate_digest="")
    return Event("round_started", job_id, 0, 0, at=at, state=state.to_hash())


def test_events_naming_a_passed_over_round_add_to_its_lost_time_as_the_simulator_counts_it() -> None:
    seen = LiveObservations(Jobs())  # type: ignore[arg-type]
    seen.on_event(opened("old", 0.0))
    seen.on_event(opened("new", 1.0))
    # Two clients go to the newer job while the old round waits; its own two binds come at 10 and 30 s.
    seen.on_event(Event("client_bound", "new", 0, 0, "a", at=2.0, bound=1, passed_over="old"))
    assert seen.short_under_fifo("old")
    seen.on_event(Event("client_bound", "new", 0, 0, "b", at=4.0, bound=2, passed_over="old"))
    # FIFO would have filled it with those two: the binder credits the next pass to a younger round.
    assert not seen.short_under_fifo("old") and not seen.short_under_fifo("new")  # "new" filled for real
    assert seen.short_under_fifo("unheard-of")  # no round told of yet: as before the spill rule
    seen.on_event(Event("client_bound", "old", 0, 0, "c", at=10.0, bound=1))
    seen.on_event(Event("client_bound", "old", 0, 0, "d", at=30.0, bound=2))
    seen.on_event(Event("round_closed", "old", 0, 0, at=50.0))
    view = seen.annotate(job_view(ActiveJob("old", SPEC, "", 0.0, "running", 1), opened_state(), supply=5))
    # Under FIFO its 2nd client would have come at 4 s, not 30 s.
    assert view.lost_to_newer_s == pytest.approx(26.0)

    direct = Attempt(0, 0, 0.0, 2)
    direct.passed_over(2.0)
    direct.passed_over(4.0)
    direct.bound("c", 10.0, 1.0, 1)
    direct.bound("d", 30.0, 1.0, 2)
    timings = RoundTimings()
    timings.finished(direct, 50.0)
    assert timings.lost_to_newer_s == view.lost_to_newer_s


def opened_state() -> RoundState:
    return RoundState(job_id="old", round=1, attempt=0, state="open", demand=2, target=2, min_results=2, bound=0,
                      results=0, started_at=50.0, deadline_at=150.0, closed_at=0.0, model_digest="",
                      aggregate_digest="")


async def test_an_accept_names_the_older_round_it_passed_over_on_its_event(plane, stubs):
    """The default policy ranks the newer, smaller job first; a client that takes it passes the older round
    over, and the binding shard says so on the ``client_bound`` event every shard receives."""
    older, older_token = await stubs.register(name="older", demand=1, rounds=10)
    newer, newer_token = await stubs.register(name="newer", demand=1, rounds=1)
    await stubs.start_round(older, older_token)
    await stubs.start_round(newer, newer_token)
    events: list[Event] = []
    plane.bus.add_listener(events.append)
    checkin = await stubs.check_in("c", wait_s=2.0, cpu_f=8)
    assert [offer.job_id for offer in checkin.offers] == [newer, older]
    await plane.view.estimate_supply(60.0)  # the scheduler places the client in its eligibility classes
    reply = await stubs.accept("c", checkin.session_token, checkin.offers[0].offer_id)
    assert reply.bound and reply.job_id == newer
    bound = [event for event in events if event.kind == "client_bound"]
    assert [(event.job_id, event.passed_over) for event in bound] == [(newer, older)]

    # A bind to the older round passes nobody over.
    other = await stubs.check_in("d", wait_s=0.0, cpu_f=8)
    await plane.view.estimate_supply(60.0)
    reply = await stubs.accept("d", other.session_token, other.offers[-1].offer_id)
    assert reply.bound and reply.job_id == older
    assert [(event.job_id, event.passed_over) for event in events if event.kind == "client_bound"][-1] == (older, "")
