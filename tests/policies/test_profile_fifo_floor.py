"""The FIFO floor: the later-registered jobs the sort puts ahead of a job, among those that compete for its clients,
hold at most ``overtake x`` its remaining service; it is never moved ahead of a job registered before it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from policies import JobView, ProfilePolicy, SchedulingContext
from policies.plugins.fifo_floor import FifoFloor, compete
from policies.plugins.srsf import SmallestRemainingFirst
from propius.specs import Constraint, Constraints

CTX = SchedulingContext(now=1000.0, supply_by_class={})
FAST = Constraints({"cpu_f": Constraint(min=2.0)})
SLOW = Constraints({"cpu_f": Constraint(max=1.5)})


def ids(jobs: Sequence[JobView]) -> list[str]:
    return [job.job_id for job in jobs]


def policy(overtake: float = 0.5) -> ProfilePolicy:
    return ProfilePolicy("t", [SmallestRemainingFirst(), FifoFloor(overtake=overtake)])


def batch(view: Callable[..., JobView], **small: object) -> list[JobView]:
    # big: 10 rounds x demand 10 = 100 of service, registered first; eight 1-round jobs of 10 after it.
    big = view("big", registered_at=0.0, rounds_total=10, demand=10)
    return [big, *(view(f"s{i}", registered_at=1.0 + i, rounds_total=1, demand=10, **small) for i in range(8))]


def test_later_jobs_overtake_a_job_for_at_most_overtake_x_its_remaining_service(view: Callable[..., JobView]) -> None:
    jobs = batch(view)
    # SRSF alone puts all 80 of later service ahead of big; overtake 0.5 allows 50: five of them.
    assert ids(ProfilePolicy("t", [SmallestRemainingFirst()]).order(jobs, CTX))[-1] == "big"
    assert ids(policy(0.5).order(jobs, CTX)) == ["s0", "s1", "s2", "s3", "s4", "big", "s5", "s6", "s7"]
    assert ids(policy(0.25).order(jobs, CTX)) == ["s0", "s1", "big", "s2", "s3", "s4", "s5", "s6", "s7"]
    assert ids(policy(0.0).order(jobs, CTX))[0] == "big"  # FIFO for a job nothing may overtake
    # Half done, big's budget halves too (5 rounds left: 25).
    half = [dataclasses.replace(jobs[0], rounds_done=5), *jobs[1:]]
    assert ids(policy(0.5).order(half, CTX)) == ["s0", "s1", "big", "s2", "s3", "s4", "s5", "s6", "s7"]


def test_jobs_of_a_disjoint_class_are_not_counted(view: Callable[..., JobView]) -> None:
    big = view("big", registered_at=0.0, rounds_total=10, demand=10, eligibility_key="fast", public=FAST)
    slow = [view(f"s{i}", registered_at=1.0 + i, rounds_total=1, demand=10, eligibility_key="slow", public=SLOW)
            for i in range(8)]
    assert ids(policy().order([big, *slow], CTX))[-1] == "big"  # no slow client can serve big: nothing lost


def test_a_job_is_never_moved_ahead_of_an_older_one(view: Callable[..., JobView]) -> None:
    # elder (registered first, 1,000 of service) may be overtaken by 500: big and the eight small jobs hold 180.
    elder = view("elder", registered_at=-1.0, rounds_total=100, demand=10)
    order = ids(policy().order([elder, *batch(view)], CTX))
    assert order == ["s0", "s1", "s2", "s3", "s4", "big", "s5", "s6", "s7", "elder"]


def test_an_open_ended_job_is_never_moved_and_always_too_much_to_be_overtaken_by(
    view: Callable[..., JobView],
) -> None:
    endless = view("endless", registered_at=0.0, rounds_total=None, demand=10)
    small = view("small", registered_at=1.0, rounds_total=1, demand=10)
    assert ids(policy().order([endless, small], CTX)) == ["small", "endless"]  # SRSF's order, kept
    job = view("job", registered_at=0.0, rounds_total=100, demand=10)
    later_endless = view("endless", registered_at=1.0, rounds_total=None, demand=10)
    assert ids(policy(0.0).order([later_endless, job], CTX)) == ["job", "endless"]
    assert ids(policy(100.0).order([later_endless, job], CTX)) == ["job", "endless"]  # SRSF puts it last anyway


def test_compete_is_false_only_for_disjoint_constraints_on_a_shared_attribute() -> None:
    assert not compete(FAST, SLOW)
    assert compete(FAST, Constraints({"cpu_f": Constraint(min=1.0, max=2.0)}))  # touch at 2.0
    assert compete(FAST, Constraints({"ram": Constraint(max=1.0)}))  # different attributes: some client may have both
    assert compete(FAST, Constraints())
    assert not compete(Constraints({"os": Constraint(in_={"a"})}), Constraints({"os": Constraint(in_={"b"})}))
    assert compete(Constraints({"os": Constraint(in_={"a", "b"})}), Constraints({"os": Constraint(in_={"b"})}))
