"""The starvation bound: a job past its due time is served first and offered to every client."""

from __future__ import annotations

from collections.abc import Callable

from policies import ClientEstimate, JobView, ProfilePolicy, SchedulingContext
from policies.plugins.class_order import ClassOrder
from policies.plugins.speed_tiers import SpeedTiers
from policies.plugins.srsf import SmallestRemainingFirst
from policies.plugins.starvation_bound import StarvationBound

CLIENT = {"device_class": "edge"}


def huge(view: Callable[..., JobView], job_id: str = "huge", **overrides: object) -> JobView:
    # 100 rounds x demand 300, 2 done; rounds of a 300 s limit (opened at 2,000) that collect in 100 s.
    fields = dict(registered_at=0.0, rounds_total=100, rounds_done=2, demand=300, target=390, opened_at=2000.0,
                  deadline_at=2300.0, recent_schedule_s=10.0, recent_response_s=100.0)
    return view(job_id, **(fields | overrides))


def test_due_time_is_slowdown_x_rounds_x_pace(view: Callable[..., JobView]) -> None:
    bound = StarvationBound()  # slowdown 8
    assert bound.due_at(huge(view)) == 0.0 + 8 * 3 * 100.0  # pace: the response time
    assert bound.due_at(huge(view, recent_response_s=None)) == 8 * 3 * 300.0  # untimed: the round's limit
    assert bound.due_at(huge(view, recent_response_s=900.0)) == 8 * 3 * 300.0  # never above the limit
    assert StarvationBound(slowdown=2).due_at(huge(view)) == 2 * 3 * 100.0
    assert bound.due_at(huge(view, opened_at=None)) is None  # no round limit known: never promoted
    ctx = SchedulingContext(now=2400.0, supply_by_class={"{}": 500})
    assert bound.promote(huge(view), ctx) is None  # due at 2,400, not past it
    assert bound.promote(huge(view), SchedulingContext(now=2401.0, supply_by_class={})) == 0.0  # its registration


def test_an_overdue_job_goes_ahead_of_the_sort_and_promoted_ones_go_oldest_first(
    view: Callable[..., JobView],
) -> None:
    policy = ProfilePolicy("t", [SmallestRemainingFirst(), StarvationBound()])
    small = [view(f"small-{i}", registered_at=2000.0 + i, rounds_total=2, demand=10) for i in range(3)]
    ids = lambda jobs: [j.job_id for j in jobs]  # noqa: E731
    before = SchedulingContext(now=2300.0, supply_by_class={"{}": 500})
    assert ids(policy.order([huge(view), *small], before)) == ["small-0", "small-1", "small-2", "huge"]
    after = SchedulingContext(now=2500.0, supply_by_class={"{}": 500})
    assert ids(policy.order([*small, huge(view)], after)) == ["huge", "small-0", "small-1", "small-2"]
    # Two overdue jobs: the one registered first goes first, whatever their scores (FIFO among promoted).
    older = huge(view, job_id="older", registered_at=-10.0, rounds_total=200)
    assert ids(policy.order([huge(view), older, *small], after)) == ["older", "huge", "small-0", "small-1",
                                                                     "small-2"]


def test_an_overdue_job_is_offered_to_every_client_ahead_of_its_class_group(view: Callable[..., JobView]) -> None:
    policy = ProfilePolicy("t", [SmallestRemainingFirst(), StarvationBound(), ClassOrder(), SpeedTiers()])
    slow = ClientEstimate(s_per_sample=0.03, bandwidth_kbps=1e4)  # not in the fastest tier (< 0.02)
    strict = view("strict", eligibility_key="strict", rounds_total=1, demand=5, registered_at=2400.0)
    loose = huge(view, eligibility_key="loose", supply=5000)
    supply = {"strict": 50, "loose": 5000}
    ids = lambda ctx: [j.job_id for j in policy.rank_for_client(CLIENT, [strict, loose], ctx)]  # noqa: E731
    # Before its due time: the scarce class first, and the huge job, response-dominated, pinned away from slow.
    assert ids(SchedulingContext(now=2300.0, supply_by_class=supply, client=slow, speed_tiers=(0.02, 0.05))) == [
        "strict"]
    # Overdue: first, and not pinned.
    assert ids(SchedulingContext(now=2500.0, supply_by_class=supply, client=slow, speed_tiers=(0.02, 0.05))) == [
        "huge", "strict"]
