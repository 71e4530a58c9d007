"""``fifo_lag``: the core measures what passing a job over cost it against FIFO, and the plug-in serves a job
first once that puts it more than ``slowdown`` times behind its FIFO pace."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

from control_plane.scheduling.attempts import Attempt
from control_plane.scheduling.fifo_lag import fifo_filled_at, lost_s, passed_over, view_fields
from control_plane.scheduling.matching import ranked_offers
from policies import JobView, ProfilePolicy, SchedulingContext, load_policy
from policies.plugins.doom_guard import DoomGuard
from policies.plugins.fifo_lag import FifoLag
from policies.plugins.srsf import SmallestRemainingFirst
from propius.simulator import PopulationModel, SimConfig, Simulation, Workload, make_population
from propius.simulator.availability import AvailabilityModel
from propius.simulator.jobs import SimJob
from propius.specs import Constraints

SHORT = lambda job_id: True  # noqa: E731 - every round still has a free slot under FIFO


def test_a_bind_passes_over_the_oldest_older_round_ranked_after_it(view: Callable[..., JobView]) -> None:
    ranked = [  # the rounds the policy would offer the client, first offered first
        view("first", registered_at=150.0),
        view("new", registered_at=300.0),
        view("old", registered_at=100.0),
        view("mid", registered_at=200.0),
    ]
    # FIFO would have given the client to "old", the oldest round it could take.
    assert passed_over("new", ranked, SHORT) == "old"
    assert passed_over("mid", ranked, SHORT) is None  # "old" was offered first: the client declined it
    assert passed_over("first", ranked, SHORT) == "old"
    assert passed_over("old", ranked, SHORT) is None  # the oldest it could take: nobody passed over
    assert passed_over("gone", ranked, SHORT) is None  # not among its offers now: nothing to compare with
    # Registration ties go by job id, as FIFO's order does.
    assert passed_over("b", [view("b", registered_at=0.0), view("a", registered_at=0.0)], SHORT) == "a"


def test_a_pass_spills_over_to_the_next_oldest_round_once_fifo_would_have_filled_the_oldest(
        view: Callable[..., JobView]) -> None:
    """Demand 2 each: "old" has one bind and one pass, so FIFO would have filled it; the next client FIFO
    would have given to "mid". Once "mid" is full under FIFO too, a bind to "new" passes nobody over."""
    rounds = {"old": Attempt(0, 0, 0.0, 2), "mid": Attempt(0, 0, 0.0, 2)}
    ranked = [view("new", registered_at=300.0), view("old", registered_at=100.0), view("mid", registered_at=200.0)]

    def short(job_id: str) -> bool:
        return rounds[job_id].short_under_fifo()

    assert passed_over("new", ranked, short) == "old"
    rounds["old"].bound("a", 1.0, 1.0, 1)
    assert passed_over("new", ranked, short) == "old"  # one bind: a slot still free under FIFO
    assert rounds["old"].passed_over(2.0)  # the pass that would have filled it
    assert passed_over("new", ranked, short) == "mid"
    rounds["mid"].passed_over(3.0)
    rounds["mid"].passed_over(4.0)
    assert passed_over("new", ranked, short) is None
    rounds["old"] = Attempt(0, 0, 0.0, 2)
    rounds["old"].bound("a", 1.0, 1.0, 2)  # filled for real (a slot count of 2 from the events)
    assert not rounds["old"].short_under_fifo()


def test_a_round_the_policy_would_not_offer_the_client_is_not_passed_over(view: Callable[..., JobView]) -> None:
    """Only the rounds the client could have taken count: not a full one, nor one of a class that does not
    admit it, nor one it joined, nor one a dispatch rule keeps from it (``doom_guard``: this round, open
    90 s of its 100 with nobody bound while its class has 15 clients for its 13 slots, cannot fill)."""
    jobs = [
        view("old", registered_at=0.0, rounds_total=50, opened_at=0.0, deadline_at=100.0, expected_results=0.0),
        view("full", registered_at=10.0, rounds_total=50, bound=13),
        view("strict", registered_at=20.0, rounds_total=50, public=Constraints.model_validate({"ram": {"min": 8}})),
        view("joined", registered_at=30.0, rounds_total=50),
        view("older", registered_at=40.0, rounds_total=50),
        view("new", registered_at=100.0, rounds_total=1),
    ]
    ctx = SchedulingContext(now=90.0, supply_by_class={"{}": 15})
    joined = lambda v: v.job_id == "joined"  # noqa: E731
    srsf = ProfilePolicy("t", [SmallestRemainingFirst()])
    ranked = ranked_offers({"ram": 4}, srsf.order(jobs, ctx), srsf, ctx, joined)
    assert [v.job_id for v in ranked] == ["new", "old", "older"]
    assert passed_over("new", ranked, SHORT) == "old"
    guarded = ProfilePolicy("t", [SmallestRemainingFirst(), DoomGuard()])
    guarded_ranked = ranked_offers({"ram": 4}, guarded.order(jobs, ctx), guarded, ctx, joined)
    assert passed_over("new", guarded_ranked, SHORT) == "older"


def attempt(binds: list[float], passed: list[float], demand: int = 3) -> Attempt:
    a = Attempt(0, 0, 0.0, demand)
    for at in passed:
        a.passed_over(at)
    for count, at in enumerate(binds, start=1):
        a.bound(f"c{count}", at, 1.0, count)
    return a


def test_a_round_loses_the_time_from_when_the_passed_over_binds_would_have_filled_it() -> None:
    # Demand 3: own binds at 1, 5, 9 s; binds at 2 and 3 s went to newer jobs. Under FIFO its 3rd client
    # would have come at 3 s (1, 2, 3), not 9 s: it lost 6 s.
    filled = attempt([1.0, 5.0, 9.0], [2.0, 3.0])
    assert filled.filled_at == 9.0 and fifo_filled_at(filled) == 3.0
    assert lost_s(filled, 40.0) == 6.0  # fixed once it filled, whenever it closes
    assert view_fields(10.0, filled) == (16.0, None)
    # Not filled yet: the loss grows from 3 s, and the view says when FIFO would have filled it.
    short = attempt([1.0], [2.0, 3.0])
    assert lost_s(short, 30.0) == 27.0  # closed at 30 s short of clients: lost from 3 s to its close
    assert view_fields(10.0, short) == (10.0, 3.0)
    # Even with the passed-over binds it would not have filled: short under FIFO too, nothing lost.
    assert fifo_filled_at(attempt([1.0], [2.0])) is None and lost_s(attempt([1.0], [2.0]), 30.0) == 0.0
    # Never passed over: nothing lost, however slow.
    assert lost_s(attempt([10.0, 20.0, 90.0], []), 100.0) == 0.0
    assert view_fields(0.0, None) == (0.0, None)
    # The binds that passed it over after FIFO would have filled it do not move that time.
    assert fifo_filled_at(attempt([1.0, 5.0, 9.0], [2.0, 3.0, 4.0, 8.0])) == 3.0


def test_a_job_more_than_slowdown_behind_its_fifo_pace_is_promoted(view: Callable[..., JobView]) -> None:
    lag = FifoLag(slowdown=1.25)  # promoted once the loss exceeds 1 - 1/1.25 = 20 % of its time so far
    assert FifoLag().slowdown == pytest.approx(1.35)
    ctx = SchedulingContext(now=1100.0, supply_by_class={"{}": 50})  # registered at 100: 1,000 s so far
    job = functools.partial(view, opened_at=1050.0, deadline_at=1150.0)  # rounds of a 100 s limit
    assert lag.promote(job("j", lost_to_newer_s=200.0), ctx) is None  # 1,000 / 800 = 1.25x: not beyond
    assert lag.promote(job("j", lost_to_newer_s=201.0), ctx) == 100.0  # its registration: FIFO among promoted
    # The open round's loss still growing counts: FIFO would have filled it at 950 s, 150 s ago.
    assert lag.promote(job("j", lost_to_newer_s=60.0, fifo_filled_at=950.0), ctx) == 100.0
    assert lag.promote(job("j", lost_to_newer_s=40.0, fifo_filled_at=950.0), ctx) is None
    assert lag.promote(job("j"), ctx) is None
    # A loss of at most one round limit promotes nobody, however young the job: 90 of its 100 s is noise.
    young = SchedulingContext(now=1100.0, supply_by_class={"{}": 50})
    assert lag.promote(job("j", registered_at=1000.0, lost_to_newer_s=90.0), young) is None
    assert lag.promote(job("j", registered_at=900.0, lost_to_newer_s=101.0), young) == 900.0
    assert lag.promote(view("j", lost_to_newer_s=900.0), ctx) is None  # no open round: nothing to serve first


def test_a_job_with_short_rounds_is_promoted_after_losing_floor_rounds_of_them(view: Callable[..., JobView]) -> None:
    """Rounds of 10 s scheduling + 20 s response against a 100 s limit: the floor is 2 x 30 = 60 s of loss."""
    ctx = SchedulingContext(now=1100.0, supply_by_class={"{}": 50})  # registered at 900: 200 s so far
    job = functools.partial(view, registered_at=900.0, opened_at=1050.0, deadline_at=1150.0, recent_schedule_s=10.0,
                            recent_response_s=20.0)
    assert FifoLag().floor_rounds == pytest.approx(2.0)
    assert FifoLag().promote(job("j", lost_to_newer_s=61.0), ctx) == 900.0  # 200 / 139 = 1.44x its FIFO pace
    assert FifoLag().promote(job("j", lost_to_newer_s=59.0), ctx) is None  # 1.42x, but not yet two of its rounds
    assert FifoLag(floor_rounds=None).promote(job("j", lost_to_newer_s=61.0), ctx) is None  # a round limit: 100 s
    assert FifoLag(floor_rounds=None).promote(job("j", lost_to_newer_s=101.0), ctx) == 900.0
    slow = job("j", lost_to_newer_s=99.0, recent_response_s=200.0)  # rounds longer than the limit: the limit
    assert FifoLag().promote(slow, ctx) is None


def test_a_promoted_job_goes_ahead_of_smaller_newer_ones(view: Callable[..., JobView]) -> None:
    policy = ProfilePolicy("t", [SmallestRemainingFirst(), FifoLag(slowdown=1.25)])
    job = functools.partial(view, opened_at=450.0, deadline_at=550.0)
    big = job("big", registered_at=0.0, rounds_total=50, demand=40, target=52)
    small = [job(f"small-{i}", registered_at=10.0 + i, rounds_total=2, demand=10) for i in range(3)]
    ids = lambda jobs: [j.job_id for j in jobs]  # noqa: E731
    ctx = SchedulingContext(now=500.0, supply_by_class={"{}": 50})
    assert ids(policy.order([big, *small], ctx)) == ["small-0", "small-1", "small-2", "big"]
    behind = job("big", registered_at=0.0, rounds_total=50, demand=40, target=52, lost_to_newer_s=101.0)
    assert ids(policy.order([behind, *small], ctx)) == ["big", "small-0", "small-1", "small-2"]


def _job(name: str, arrival_s: float, demand: int, rounds: int) -> dict:
    # Rounds time out 40 + 60 = 100 s after they open; a task takes about 15 s.
    return {"name": name, "arrival_s": arrival_s, "demand": demand, "rounds": rounds, "over_selection": 1.3,
            "schedule_timeout_s": 40, "execution_timeout_s": 60, "model_size_kbit": 20_000, "local_steps": 5,
            "batch_size": 10}


def test_the_measured_loss_explains_a_passed_over_job_and_the_plug_in_bounds_it() -> None:
    """60 always-online clients; a job of 3 rounds x 45 results, then 2-round jobs of 15 arriving every 8 s,
    which SRSF always prefers (the starvation bound is off, so only this rule acts)."""
    workload = Workload.model_validate({"name": "stream", "clients": 60, "jobs": [
        _job("huge", 5.0, 45, 3), *(_job(f"small-{i:03d}", 8.0 * i, 15, 2) for i in range(350))]})
    model = PopulationModel(availability=AvailabilityModel(mode="always"), days=1)

    def run(policy: str, **options: object) -> tuple[Simulation, SimJob]:
        sim = Simulation(workload, make_population(60, 0, model), load_policy(policy, **options), SimConfig(seed=0))
        sim.run()
        assert all(job.finished_at is not None for job in sim.jobs)
        return sim, next(job for job in sim.jobs if job.workload.name == "huge")

    def jct(job: SimJob) -> float:
        assert job.finished_at is not None
        return job.finished_at - job.workload.arrival_s

    fifo, first = run("fifo")
    assert all(job.timings.lost_to_newer_s == 0.0 for job in fifo.jobs)  # FIFO passes no job over
    _, passed = run("propius", starvation_bound=False, fifo_lag=False)
    # SRSF alone: the huge job waits for the end of the stream, and what it measured lost explains most of it.
    assert jct(passed) > 20 * jct(first)
    assert passed.timings.lost_to_newer_s >= 0.8 * (jct(passed) - jct(first))
    _, promoted = run("propius", starvation_bound=False)
    # With the default's rule it is promoted once its loss passes 26 % of its time (slowdown 1.35) and one round
    # limit (100 s).
    assert jct(promoted) < 0.1 * jct(passed)
    assert promoted.timings.lost_to_newer_s <= (1 - 1 / 1.35) * jct(promoted) + 100.0
