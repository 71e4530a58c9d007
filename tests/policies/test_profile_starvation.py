"""The starvation bound: a job past its due time is served first and offered to every client, so one huge job
among a stream of small ones finishes within the bound."""

from __future__ import annotations

from collections.abc import Callable

from policies import ClientEstimate, JobView, ProfilePolicy, SchedulingContext, load_policy
from policies.plugins.class_order import ClassOrder
from policies.plugins.speed_tiers import SpeedTiers
from policies.plugins.srsf import SmallestRemainingFirst
from policies.plugins.starvation_bound import StarvationBound
from propius.simulator import PopulationModel, SimConfig, Simulation, Workload, make_population
from propius.simulator.availability import AvailabilityModel

CLIENT = {"device_class": "edge"}


def huge(view: Callable[..., JobView], job_id: str = "huge", **overrides: object) -> JobView:
    # 100 rounds x demand 300, 2 done; rounds of a 300 s limit (opened at 2,000) that collect in 100 s.
    fields = dict(registered_at=0.0, rounds_total=100, rounds_done=2, demand=300, target=390, opened_at=2000.0,
                  deadline_at=2300.0, recent_schedule_s=10.0, recent_response_s=100.0)
    return view(job_id, **(fields | overrides))


def test_due_time_is_slowdown_x_rounds_x_round_limit(view: Callable[..., JobView]) -> None:
    bound = StarvationBound(slowdown=2)
    assert StarvationBound().slowdown == 8
    assert bound.due_at(huge(view)) == 0.0 + 2 * 3 * 300.0  # 3rd round, limit 300 s
    assert bound.due_at(huge(view, recent_response_s=None, rounds_done=0)) == 2 * 1 * 300.0
    assert bound.due_at(huge(view, registered_at=50.0, opened_at=100.0, deadline_at=200.0)) == 50.0 + 2 * 3 * 100.0
    assert bound.due_at(huge(view, opened_at=None)) is None  # no round limit known: never promoted
    ctx = SchedulingContext(now=1800.0, supply_by_class={"{}": 500})
    assert bound.promote(huge(view), ctx) is None  # due at 1,800, not past it
    late = SchedulingContext(now=1801.0, supply_by_class={"{}": 500})
    assert bound.promote(huge(view), late) == 0.0  # its registration
    # 390 bind slots, 389 recent clients in its class: supply, not the order, starves it; not promoted.
    assert bound.promote(huge(view), SchedulingContext(now=1801.0, supply_by_class={"{}": 389})) is None


def test_an_overdue_job_goes_ahead_of_the_sort_and_promoted_ones_go_oldest_first(
    view: Callable[..., JobView],
) -> None:
    policy = ProfilePolicy("t", [SmallestRemainingFirst(), StarvationBound(slowdown=2)])  # due at 1,800
    small = [view(f"small-{i}", registered_at=2000.0 + i, rounds_total=2, demand=10) for i in range(3)]
    ids = lambda jobs: [j.job_id for j in jobs]  # noqa: E731
    before = SchedulingContext(now=1700.0, supply_by_class={"{}": 500})
    assert ids(policy.order([huge(view), *small], before)) == ["small-0", "small-1", "small-2", "huge"]
    after = SchedulingContext(now=1900.0, supply_by_class={"{}": 500})
    assert ids(policy.order([*small, huge(view)], after)) == ["huge", "small-0", "small-1", "small-2"]
    # Two overdue jobs: the one registered first goes first, whatever their scores (FIFO among promoted).
    older = huge(view, job_id="older", registered_at=-10.0, rounds_total=200)
    assert ids(policy.order([huge(view), older, *small], after)) == ["older", "huge", "small-0", "small-1",
                                                                     "small-2"]


def test_an_overdue_job_is_offered_to_every_client_ahead_of_its_class_group(view: Callable[..., JobView]) -> None:
    policy = ProfilePolicy("t", [SmallestRemainingFirst(), StarvationBound(slowdown=2), ClassOrder(), SpeedTiers()])
    slow = ClientEstimate(s_per_sample=0.03, bandwidth_kbps=1e4)  # not in the fastest tier (< 0.02)
    strict = view("strict", eligibility_key="strict", rounds_total=1, demand=5, registered_at=1700.0)
    loose = huge(view, eligibility_key="loose", supply=5000)
    supply = {"strict": 50, "loose": 5000}
    ids = lambda ctx: [j.job_id for j in policy.rank_for_client(CLIENT, [strict, loose], ctx)]  # noqa: E731
    # Before its due time: the scarce class first, and the huge job, response-dominated, pinned away from slow.
    assert ids(SchedulingContext(now=1750.0, supply_by_class=supply, client=slow, speed_tiers=(0.02, 0.05))) == [
        "strict"]
    # Overdue: first, and not pinned.
    assert ids(SchedulingContext(now=1900.0, supply_by_class=supply, client=slow, speed_tiers=(0.02, 0.05))) == [
        "huge", "strict"]


def _job(name: str, arrival_s: float, demand: int, rounds: int) -> dict:
    # Rounds time out 40 + 60 = 100 s after they open; a task takes about 15 s.
    return {"name": name, "arrival_s": arrival_s, "demand": demand, "rounds": rounds, "over_selection": 1.3,
            "schedule_timeout_s": 40, "execution_timeout_s": 60, "model_size_kbit": 20_000, "local_steps": 5,
            "batch_size": 10}


def test_one_huge_job_among_a_stream_of_small_ones_finishes_within_the_bound() -> None:
    """60 always-online clients; a job of 3 rounds x 45 results among 2-round jobs of 15 arriving every 8 s
    for 2,800 s, which alone keep most clients busy. SRSF always prefers the small jobs. The bound at
    ``slowdown`` 2, so the stream outlasts it; ``fifo_lag``, which would promote the huge job too, is off."""
    workload = Workload.model_validate({"name": "stream", "clients": 60, "jobs": [
        _job("huge", 5.0, 45, 3), *(_job(f"small-{i:03d}", 8.0 * i, 15, 2) for i in range(350))]})
    model = PopulationModel(availability=AvailabilityModel(mode="always"), days=1)
    slowdown, limit, rounds = 2.0, 100.0, 3

    def run(**options: object) -> Simulation:
        sim = Simulation(workload, make_population(60, 0, model), load_policy("propius", fifo_lag=False, **options),
                         SimConfig(seed=0))
        sim.run()
        return sim

    bounded = run(**{"starvation_bound.slowdown": slowdown}, fifo_floor=False)  # the bound alone
    huge_job = next(job for job in bounded.jobs if job.workload.name == "huge")
    closes = [r.closed_at for r in huge_job.history if r.succeeded]
    assert len(closes) == rounds
    # Round k is due by 5 + slowdown x k x limit at the latest, and then takes at most one round limit.
    for k, closed_at in enumerate(closes, start=1):
        assert closed_at <= 5.0 + slowdown * k * limit + limit, (k, closed_at)
    unbounded = run(starvation_bound=False, fifo_floor=False)
    starved = next(job for job in unbounded.jobs if job.workload.name == "huge")
    assert starved.finished_at is not None and starved.finished_at > 5.0 + slowdown * rounds * limit + limit
    assert all(job.finished_at is not None for job in bounded.jobs)  # the small jobs still all finish
    # The FIFO floor alone: the open small jobs registered after it may hold at most half its remaining
    # service (135) ahead of it, two of them (30 each); it finishes among the first, as under FIFO.
    floored = run(starvation_bound=False, fifo_floor=True)
    first = next(job for job in floored.jobs if job.workload.name == "huge")
    assert first.finished_at is not None and first.finished_at <= 5.0 + slowdown * limit + limit
    assert all(job.finished_at is not None for job in floored.jobs)
