"""IRS on hand-made classes: scarce-class protection, the contention-aware merge, speed tiers."""

from __future__ import annotations

from collections.abc import Callable

from policies import ClientEstimate, IrsPolicy, JobView, SchedulingContext, load_policy
from policies.irs import class_groups
from propius.config import DEFAULT_POLICY

CLIENT = {"device_class": "edge"}


def ids(jobs: list[JobView]) -> list[str]:
    return [j.job_id for j in jobs]


def test_groups_go_scarcest_first_and_merge_only_when_more_contended() -> None:
    # strict: 1 queued job / 10 clients = 0.1; loose: 1 / 100 = 0.01 < 0.1, so it waits behind strict.
    assert class_groups({"loose": 1, "strict": 1}, {"loose": 100, "strict": 10}) == [["strict"], ["loose"]]
    # loose with 20 queued jobs: 20 / 100 = 0.2 > 0.1, so it takes over a share of strict's clients.
    assert class_groups({"loose": 20, "strict": 1}, {"loose": 100, "strict": 10}) == [["strict", "loose"]]
    # equal contention (10 / 100 = 1 / 10) is not "more": no merge.
    assert class_groups({"loose": 10, "strict": 1}, {"loose": 100, "strict": 10}) == [["strict"], ["loose"]]
    assert class_groups({"loose": 20, "strict": 1}, {"loose": 100, "strict": 10}, merge=False) == [
        ["strict"], ["loose"]]


def test_a_client_in_both_classes_serves_the_scarce_class_first(view: Callable[..., JobView]) -> None:
    ctx = SchedulingContext(now=0.0, supply_by_class={"strict": 10, "loose": 100})
    policy = IrsPolicy(speed_tiers=False)
    # loose-small has the least remaining service (1 x 10), so a global SRSF order puts it first.
    jobs = [
        view("loose-small", eligibility_key="loose", rounds_total=1, demand=10),
        view("strict-big", eligibility_key="strict", rounds_total=5, demand=10),
        view("loose-big", eligibility_key="loose", rounds_total=9, demand=10),
    ]
    ordered = policy.order(jobs, ctx)
    assert ids(ordered) == ["loose-small", "strict-big", "loose-big"]

    # One queued job per class: strict 1/10 > loose 2/100, no merge, strict is protected.
    assert ids(policy.rank_for_client(CLIENT, ordered, ctx)) == ["strict-big", "loose-small", "loose-big"]


def test_a_more_contended_loose_class_merges_and_srsf_decides(view: Callable[..., JobView]) -> None:
    ctx = SchedulingContext(now=0.0, supply_by_class={"strict": 10, "loose": 20})
    policy = IrsPolicy(speed_tiers=False)
    jobs = policy.order([
        view("loose-small", eligibility_key="loose", rounds_total=1, demand=10),
        view("strict-big", eligibility_key="strict", rounds_total=5, demand=10),
        view("loose-big", eligibility_key="loose", rounds_total=9, demand=10),
    ], ctx)

    # loose: 2 queued / 20 = 0.1 vs strict 1 / 10 = 0.1: equal, no merge yet.
    assert ids(policy.rank_for_client(CLIENT, jobs, ctx)) == ["strict-big", "loose-small", "loose-big"]
    # With supply 15, loose is 2 / 15 = 0.13 > 0.1: merged, so the group is in SRSF order.
    ctx = SchedulingContext(now=0.0, supply_by_class={"strict": 10, "loose": 15})
    assert ids(policy.rank_for_client(CLIENT, jobs, ctx)) == ["loose-small", "strict-big", "loose-big"]


def test_the_head_job_is_pinned_to_the_fastest_tier_when_responses_dominate(view: Callable[..., JobView]) -> None:
    policy = IrsPolicy()
    slow_rounds = dict(recent_schedule_s=10.0, recent_response_s=100.0)  # 100 > 3 tiers x 10
    jobs = [view("head", rounds_total=1, **slow_rounds), view("next", rounds_total=2)]
    tiers = (0.02, 0.05)  # s/sample bounds: fast < 0.02 <= mid < 0.05 <= slow

    def rank(speed: float | None) -> list[str]:
        client = ClientEstimate(s_per_sample=speed, bandwidth_kbps=1e4)
        ctx = SchedulingContext(now=0.0, supply_by_class={"{}": 50}, client=client, speed_tiers=tiers)
        return ids(policy.rank_for_client(CLIENT, jobs, ctx))

    assert rank(0.01) == ["head", "next"]
    assert rank(0.03) == ["next"]
    assert rank(None) == ["head", "next"]  # unknown speed: counts as fastest, so it is tried and measured
    # Scheduling-dominated rounds (100 <= 3 x 40) are not pinned.
    jobs[0] = view("head", rounds_total=1, recent_schedule_s=40.0, recent_response_s=100.0)
    assert rank(0.03) == ["head", "next"]


def test_a_pinned_round_is_offered_to_clients_of_unknown_speed(view: Callable[..., JobView]) -> None:
    """One job whose responses dominate (so it is pinned to the fastest tier) and a population whose speed
    is not learned yet: every such client is offered it, under IRS and the default policy, else the round
    never binds anyone and is never measured."""
    jobs = [view("only", rounds_total=3, target=13, recent_schedule_s=10.0, recent_response_s=100.0,
                 fast_task_s=60.0, work_samples=1000.0, model_size_kbit=800.0)]
    for policy in (IrsPolicy(), load_policy(DEFAULT_POLICY)):
        for client in (None, ClientEstimate(), ClientEstimate(s_per_sample=None, bandwidth_kbps=1e4),
                       ClientEstimate(s_per_sample=0.01, bandwidth_kbps=None)):
            ctx = SchedulingContext(now=0.0, supply_by_class={"{}": 14}, client=client, speed_tiers=(0.02, 0.05))
            assert ids(policy.rank_for_client(CLIENT, jobs, ctx)) == ["only"], (policy.name, client)
