from __future__ import annotations

from collections.abc import Callable

from policies import FairSharePolicy, JobView, SchedulingContext


def test_tenants_are_served_by_usage_over_entitlement(view: Callable[..., JobView]) -> None:
    ctx = SchedulingContext(now=0.0, supply_by_class={"{}": 100})
    jobs = [
        view("a1", owner="alice", bound=30, registered_at=1.0),
        view("a2", owner="alice", bound=10, registered_at=2.0),
        view("b1", owner="bob", bound=30, registered_at=3.0),
    ]
    # Equal weights: each entitled to 50. alice uses 40 (0.8), bob 30 (0.6): bob first, then alice FIFO.
    assert [j.job_id for j in FairSharePolicy().order(jobs, ctx)] == ["b1", "a1", "a2"]
    # alice weight 3: entitled to 75, 40/75 = 0.53 < bob 30/25 = 1.2.
    assert [j.job_id for j in FairSharePolicy(weights={"alice": 3}).order(jobs, ctx)] == ["a1", "a2", "b1"]


def test_caps_and_borrowing(view: Callable[..., JobView]) -> None:
    ctx = SchedulingContext(now=0.0, supply_by_class={"{}": 100})
    jobs = [view("a", owner="alice", bound=60), view("b", owner="bob", bound=10)]
    # alice holds 60 > her entitlement 50: served after bob while borrowing, not at all without it.
    assert [j.job_id for j in FairSharePolicy().order(jobs, ctx)] == ["b", "a"]
    assert [j.job_id for j in FairSharePolicy(borrowing=False).order(jobs, ctx)] == ["b"]
    # A cap of 0.6 x 100 = 60 clients: alice has reached it.
    assert [j.job_id for j in FairSharePolicy(caps={"alice": 0.6}).order(jobs, ctx)] == ["b"]


def test_shares_are_per_eligibility_class(view: Callable[..., JobView]) -> None:
    ctx = SchedulingContext(now=0.0, supply_by_class={"strict": 10, "loose": 100})
    jobs = [view("a", owner="alice", bound=8, eligibility_key="strict"),
            view("b", owner="bob", bound=40, eligibility_key="loose")]
    # alice alone in strict: 8 / 10 = 0.8; bob alone in loose: 40 / 100 = 0.4.
    assert [j.job_id for j in FairSharePolicy().order(jobs, ctx)] == ["b", "a"]
