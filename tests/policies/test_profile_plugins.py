"""Each policy plug-in on a case whose answer follows from its definition, alone and in a profile."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from control_plane.scheduling.wake import narrower_classes
from policies import (
    ClientEstimate,
    IrsPolicy,
    JobView,
    ProfilePolicy,
    PropiusPolicy,
    SchedulingContext,
    available_policies,
    load_policy,
)
from policies.irs import fastest_first
from policies.plugins.availability_aware import AvailabilityAware
from policies.plugins.base import Plugin
from policies.plugins.class_order import ClassOrder
from policies.plugins.deadline_aware import DeadlineAware
from policies.plugins.doom_guard import DoomGuard
from policies.plugins.fastest_wake import FastestWake
from policies.plugins.hold_for_tight import HoldForTight
from policies.plugins.longest_first import LongestFirst
from policies.plugins.speed_tiers import SpeedTiers
from policies.plugins.srsf import SmallestRemainingFirst
from policies.plugins.straggler_guard import StragglerGuard
from policies.plugins.wait_for_faster import WaitForFaster

CLIENT = {"device_class": "edge"}
# 1,000 sample passes at 0.1 s plus 2 x 10,000 kbit at 1,000 kbit/s: 100 + 20 = 120 s per task.
TASK = dict(work_samples=1000.0, model_size_kbit=10_000.0)
SLOWISH = ClientEstimate(s_per_sample=0.1, bandwidth_kbps=1000.0)


def composed(*plugins: Plugin) -> ProfilePolicy:
    return ProfilePolicy("test", plugins)


def offered(policy: ProfilePolicy, jobs: list[JobView], client: ClientEstimate | None, now: float = 0.0,
            supply: int = 50) -> list[str]:
    ctx = SchedulingContext(now=now, supply_by_class={"{}": supply}, client=client)
    return [j.job_id for j in policy.rank_for_client(CLIENT, jobs, ctx)]


def test_all_policies_are_registered() -> None:
    assert {"fifo", "random", "srsf", "las", "irs", "fair-share", "propius"} <= set(available_policies())


def test_deadline_aware_skips_rounds_the_client_cannot_finish(view: Callable[..., JobView]) -> None:
    jobs = [view("tight", deadline_at=100.0, **TASK), view("loose", deadline_at=500.0, **TASK)]
    assert offered(composed(DeadlineAware()), jobs, SLOWISH) == ["loose"]  # 0 + 120 > 100
    assert offered(PropiusPolicy(), jobs, SLOWISH) == ["tight", "loose"]  # not in the default profile
    assert offered(PropiusPolicy(deadline_aware=True), jobs, SLOWISH) == ["loose"]
    assert offered(composed(DeadlineAware()), jobs, ClientEstimate()) == ["tight", "loose"]  # unknown speed
    assert offered(composed(DeadlineAware()), jobs, None) == ["tight", "loose"]


def test_availability_aware_skips_clients_about_to_leave(view: Callable[..., JobView]) -> None:
    jobs = [view("j", **TASK)]
    leaving = ClientEstimate(s_per_sample=0.1, bandwidth_kbps=1000.0, online_since=0.0, session_s=1000.0)
    policy = composed(AvailabilityAware())
    assert offered(policy, jobs, leaving, now=950.0) == []  # 50 s left < 120 s task
    assert offered(policy, jobs, leaving, now=800.0) == ["j"]  # 200 s left
    assert offered(policy, jobs, leaving, now=1100.0) == ["j"]  # prediction already wrong
    assert offered(PropiusPolicy(), jobs, leaving, now=950.0) == ["j"]  # not in the default profile
    assert offered(PropiusPolicy(availability_aware=True), jobs, leaving, now=950.0) == []


def test_srsf_and_longest_first_sort_the_global_order(view: Callable[..., JobView]) -> None:
    # Remaining seconds: few slow rounds 5 x (10 + 190) = 1,000; many quick ones 20 x (5 + 40) = 900.
    few_slow = view("few-slow", rounds_total=5, demand=400, recent_schedule_s=10.0, recent_response_s=190.0)
    many_quick = view("many-quick", rounds_total=20, demand=50, recent_schedule_s=5.0, recent_response_s=40.0)
    untimed = view("untimed", rounds_total=1, demand=10)  # no round timed yet: first, so it gets measured
    ctx = SchedulingContext(now=0.0, supply_by_class={"{}": 50})
    jobs = [many_quick, few_slow, untimed]
    assert [j.job_id for j in composed(LongestFirst()).order(jobs, ctx)] == ["untimed", "few-slow", "many-quick"]
    assert [j.job_id for j in PropiusPolicy(longest_first=True).order(jobs, ctx)] == [
        "untimed", "few-slow", "many-quick"]  # replaces srsf: one sort plug-in per profile
    # Smallest remaining service (rounds x demand): 10 < 1,000 < 2,000.
    assert [j.job_id for j in composed(SmallestRemainingFirst()).order(jobs, ctx)] == [
        "untimed", "many-quick", "few-slow"]
    assert [j.job_id for j in composed().order(jobs, ctx)] == ["few-slow", "many-quick", "untimed"]  # FIFO: job_id


def test_fastest_wake_keys_waiters_by_predicted_task_time(view: Callable[..., JobView]) -> None:
    job = view("j", **TASK)
    key = FastestWake().wake_key(job)
    assert key is not None
    fast = ClientEstimate(s_per_sample=0.05, bandwidth_kbps=2000.0)  # 50 + 10 = 60 s
    assert (key(fast), key(SLOWISH), key(ClientEstimate())) == (60.0, 120.0, 0.0)  # unknown, no tier bound: first
    tiered = view("tiered", fast_task_s=90.0, **TASK)  # unknown: at the fastest tier's bound, as IRS ranks it
    tiered_key, irs_key = FastestWake().wake_key(tiered), fastest_first(tiered)
    assert tiered_key is not None and [tiered_key(c) for c in (fast, ClientEstimate(), SLOWISH)] == [60.0, 90.0, 120.0]
    assert [irs_key(c) for c in (fast, ClientEstimate(), SLOWISH)] == [60.0, 90.0, 120.0]
    # Still working after 150 s on a task of this shape when a round ended: never before 150 s, known or not.
    stuck, stuck_fast = ClientEstimate(unfinished=(150.0, 1000.0, 10_000.0)), dataclasses.replace(
        fast, unfinished=(150.0, 1000.0, 10_000.0))
    assert [tiered_key(c) for c in (stuck, stuck_fast, SLOWISH)] == [150.0, 150.0, 120.0]
    assert irs_key(stuck) == 90.0  # IRS's own wake does not read it
    assert PropiusPolicy().wake_key(job) is not None
    assert PropiusPolicy(fastest_wake=False).wake_key(job) is None
    assert PropiusPolicy().wake_key(view("shapeless")) is None  # no task shape: oldest first
    assert load_policy("fifo").wake_key(job) is None


def test_class_order_offers_the_scarcest_class_first(view: Callable[..., JobView]) -> None:
    # The IRS case of test_policy_irs: strict 1 queued / 10 clients > loose 2 / 100, no merge.
    ctx = SchedulingContext(now=0.0, supply_by_class={"strict": 10, "loose": 100})
    jobs = [
        view("loose-small", eligibility_key="loose", rounds_total=1, demand=10),  # remaining 10
        view("strict-big", eligibility_key="strict", rounds_total=5, demand=10),  # remaining 50
        view("loose-big", eligibility_key="loose", rounds_total=9, demand=10),  # remaining 90
    ]
    assert [[j.job_id for j in g] for g in ClassOrder().partition(jobs, ctx)] == [
        ["strict-big"], ["loose-small", "loose-big"]]
    default = PropiusPolicy(speed_tiers=False)
    ordered = default.order(jobs, ctx)
    assert [j.job_id for j in default.rank_for_client(CLIENT, ordered, ctx)] == [
        "loose-small", "strict-big", "loose-big"]  # smallest remaining service, whatever the class
    irs_like = PropiusPolicy(speed_tiers=False, class_order=True)
    assert [j.job_id for j in irs_like.rank_for_client(CLIENT, ordered, ctx)] == [
        "strict-big", "loose-small", "loose-big"]
    # Loose is more contended than strict (3 / 100 > 1 / 50): merged, one order.
    crowded = [*jobs, view("loose-more", eligibility_key="loose", rounds_total=2, demand=10)]
    merged = SchedulingContext(now=0.0, supply_by_class={"strict": 50, "loose": 100})
    assert len(ClassOrder().partition(crowded, merged)) == 1
    assert len(ClassOrder(merge=False).partition(crowded, merged)) == 2


def test_doom_guard_stops_feeding_a_round_that_cannot_fill_in_time(view: Callable[..., JobView]) -> None:
    # Opened at 0, deadline 300, demand 100; the client's task takes 120 s, so binds after 180 s are useless.
    # Offered beside a round never judged (no open time), so a refused round leaves that one to the client.
    def offered_with(policy: ProfilePolicy, bound: int, now: float, supply: int) -> list[str]:
        judged = view("j", demand=100, target=130, bound=bound, expected_results=float(bound), opened_at=0.0,
                      deadline_at=300.0, **TASK)
        return offered(policy, [judged, view("o")], SLOWISH, now=now, supply=supply)

    policy = composed(DoomGuard())
    # Its class has 150 recent clients: enough for the supply test (0.9 x 100), fewer than spare_supply (1.5) x
    # its 130 slots, so its rate is judged. At 100 s with 20 binds (0.2/s): 20 + 0.2 x (300 - 100 - 120) = 36
    # < 100: doomed.
    assert offered_with(policy, 20, now=100.0, supply=150) == ["o"]
    # With 90 binds (0.9/s): 90 + 0.9 x 80 = 162 >= 100: worth feeding.
    assert offered_with(policy, 90, now=100.0, supply=150) == ["j", "o"]
    # Before min_s (60 s) a round is never judged on its rate, even with no binds yet.
    assert offered_with(policy, 0, now=50.0, supply=150) == ["j", "o"]
    assert offered_with(composed(DoomGuard(min_s=120.0)), 20, now=100.0, supply=150) == ["j", "o"]
    assert offered_with(PropiusPolicy(doom_guard=False, straggler_guard=False), 20, now=100.0, supply=150) == [
        "j", "o"]
    # A class with 1.5 x 130 = 195 recent clients holds the clients the round needs: its rate is slow because
    # they are on other rounds, which release them, so it is not judged on it; spare_supply=None judges it.
    assert offered_with(policy, 20, now=100.0, supply=194) == ["o"]
    assert offered_with(policy, 20, now=100.0, supply=195) == ["j", "o"]
    assert offered_with(PropiusPolicy(), 20, now=100.0, supply=195) == ["j", "o"]  # the default's 1.5
    assert offered_with(composed(DoomGuard(spare_supply=None)), 20, now=100.0, supply=500) == ["o"]
    # A snapshot without the round's open time never excludes anyone.
    assert offered(policy, [view("j", demand=100, bound=20, deadline_at=300.0, **TASK)], SLOWISH, now=100.0) == ["j"]


def test_doom_guard_feeds_no_round_its_class_has_too_few_clients_for(view: Callable[..., JobView]) -> None:
    # Demand 100, supply_floor 0.9: fed while its class has at least 90 recent clients (some more may come
    # online before the deadline), not with 89. Offered beside a round never judged (no deadline).
    def rounds(bound: int) -> list[JobView]:
        return [view("j", demand=100, target=130, bound=bound, opened_at=0.0, deadline_at=300.0, **TASK),
                view("o", opened_at=0.0)]

    policy = composed(DoomGuard())
    assert offered(policy, rounds(0), SLOWISH, now=10.0, supply=89) == ["o"]  # judged from the start
    assert offered(policy, rounds(0), SLOWISH, now=10.0, supply=90) == ["j", "o"]
    assert offered(policy, rounds(100), SLOWISH, now=10.0, supply=89) == ["j", "o"]  # demand bound: over-selection
    assert offered(composed(DoomGuard(supply_floor=1.5)), rounds(0), SLOWISH, now=10.0, supply=149) == ["o"]
    assert offered(composed(DoomGuard(supply_floor=None)), rounds(0), SLOWISH, now=10.0, supply=89) == ["j", "o"]
    assert offered(PropiusPolicy(), rounds(0), SLOWISH, now=10.0, supply=89) == ["o"]  # on in the default
    # Not judged: a class with no supply estimate yet, or an estimate of none (made before the checking-in
    # client came: a live scheduler at its start), and a round without a deadline.
    unknown = SchedulingContext(now=10.0, supply_by_class={}, client=SLOWISH)
    assert [j.job_id for j in policy.rank_for_client(CLIENT, rounds(0), unknown)] == ["j", "o"]
    assert offered(policy, rounds(0), SLOWISH, now=10.0, supply=0) == ["j", "o"]
    # A checking-in client the estimate has not counted yet (it came since) counts itself: 89 + 1.
    uncounted = SchedulingContext(now=10.0, supply_by_class={"{}": 89}, client=SLOWISH, client_counted=False)
    assert [j.job_id for j in policy.rank_for_client(CLIENT, rounds(0), uncounted)] == ["j", "o"]
    fewer = dataclasses.replace(uncounted, supply_by_class={"{}": 88})
    assert [j.job_id for j in policy.rank_for_client(CLIENT, rounds(0), fewer)] == ["o"]
    endless = view("j", demand=100, target=130, bound=0, opened_at=0.0, **TASK)
    assert offered(policy, [endless], SLOWISH, now=10.0, supply=89) == ["j"]


def test_doom_guard_holds_a_client_for_another_round_not_for_a_short_class(view: Callable[..., JobView]) -> None:
    def round_(job_id: str, demand: int, **overrides: Any) -> JobView:
        fields = dict(demand=demand, target=demand + 2, opened_at=0.0, deadline_at=300.0, **TASK)
        return view(job_id, **{**fields, **overrides})

    # Class supply 5: a round of demand 6 needs 0.9 x 6 = 5.4 > 5 recent clients (refused), one of demand 5 needs 4.5.
    short, other_short, fillable = round_("a", 6), round_("b", 7), round_("c", 5)
    policy = composed(DoomGuard())
    assert offered(policy, [short, fillable], SLOWISH, now=10.0, supply=5) == ["c"]  # held for round c
    # Every round refused for its class's supply: held, the client would wait idle while the class stays short;
    # it binds to the first.
    assert offered(policy, [short, other_short], SLOWISH, now=10.0, supply=5) == ["a"]
    assert offered(policy, [other_short, short], SLOWISH, now=10.0, supply=5) == ["b"]
    assert offered(PropiusPolicy(), [short, other_short], SLOWISH, now=10.0, supply=5) == ["a"]  # the default
    assert offered(composed(DoomGuard(hold_alone=True)), [short, other_short], SLOWISH, now=10.0, supply=5) == []
    # A round refused for its bind rate alone (the supply is there: 20 + 0.2 x 80 = 36 < 100 results, as in
    # test_doom_guard_stops_feeding_a_round_that_cannot_fill_in_time) holds the client for its next attempt.
    slow = round_("s", 100, target=130, bound=20, expected_results=20.0)
    assert offered(policy, [slow], SLOWISH, now=100.0, supply=150) == []
    assert offered(policy, [], SLOWISH, now=10.0, supply=5) == []


def closing_at_170(view: Callable[..., JobView]) -> Callable[..., JobView]:
    """A round of 13 slots for 10 clients with ``bound`` of them (each expected to deliver unless ``expected``
    says otherwise), its recent rounds 50 s to fill and 100 s to collect: with slack 0.2, expected to close at
    50 + 1.2 x 100 = 170 s."""
    def round_(bound: int, expected: float | None = None) -> JobView:
        return view("j", demand=10, target=13, bound=bound, opened_at=0.0, deadline_at=300.0,
                    expected_results=float(bound) if expected is None else expected,
                    recent_schedule_s=50.0, recent_response_s=100.0, **TASK)
    return round_


def test_straggler_guard_skips_over_selected_binds_that_would_land_after_the_close(
    view: Callable[..., JobView],
) -> None:
    round_ = closing_at_170(view)
    policy = composed(StragglerGuard(margin=None))
    assert offered(policy, [round_(10)], SLOWISH, now=40.0) == ["j"]  # 40 + 120 = 160 <= 170
    assert offered(policy, [round_(10)], SLOWISH, now=60.0) == []  # 180 > 170: a thrown-away result
    assert offered(policy, [round_(9)], SLOWISH, now=60.0) == ["j"]  # still short of demand: needed
    # slack 0.4: the round closes at 190
    assert offered(composed(StragglerGuard(slack=0.4, margin=None)), [round_(10)], SLOWISH, now=60.0) == ["j"]
    assert offered(PropiusPolicy(doom_guard=False, straggler_guard=False), [round_(10)], SLOWISH, now=60.0) == ["j"]
    # A late result is thrown away only if the round closes without it: by default (margin 1) the client is refused
    # only while the round expects at least demand + 1 results without it.
    margin = composed(StragglerGuard())
    assert offered(margin, [round_(11)], SLOWISH, now=60.0) == []  # 11 expected: one to spare
    assert offered(margin, [round_(10)], SLOWISH, now=60.0) == ["j"]  # 10 expected: none to spare
    assert offered(margin, [round_(12, expected=10.8)], SLOWISH, now=60.0) == ["j"]  # unreliable clients
    assert offered(composed(StragglerGuard(margin=0.5)), [round_(12, expected=10.8)], SLOWISH, now=60.0) == []


def test_straggler_guard_keeps_a_known_straggler_from_a_round_that_can_do_without_it(
    view: Callable[..., JobView],
) -> None:
    # The client never delivered (speed unknown) but was still working after 200 s on a task of twice this
    # job's sample passes and the same model: it needs at least 200 x min(1000 / 2000, 10,000 / 10,000) = 100 s.
    round_ = closing_at_170(view)

    straggler = ClientEstimate(unfinished=(200.0, 2000.0, 10_000.0))
    assert straggler.task_s(round_(0)) is None and straggler.task_floor_s(round_(0)) == pytest.approx(100.0)

    def kept(policy: ProfilePolicy, client: ClientEstimate, now: float, supply: int = 50) -> bool:
        ctx = SchedulingContext(now=now, supply_by_class={"{}": supply}, client=client)
        return policy.rank_for_client(CLIENT, [round_(3)], ctx) != []

    guard = composed(StragglerGuard())
    assert kept(guard, straggler, now=60.0)  # 60 + 100 = 160 <= 170: it may still make it
    assert not kept(guard, straggler, now=80.0)  # 180 > 170, and 50 recent clients >= 2 x 13 slots
    assert kept(guard, straggler, now=80.0, supply=25)  # 25 < 26: the round may need every client it can get
    assert kept(composed(StragglerGuard(spare_supply=None)), straggler, now=80.0)
    assert kept(guard, ClientEstimate(), now=80.0)  # nothing known against a new client
    # Below demand a known client's prediction (120 s here) is not grounds to refuse: only a floor is.
    assert kept(guard, SLOWISH, now=80.0)


def test_speed_tiers_pin_only_a_job_the_fastest_tier_can_fill(view: Callable[..., JobView]) -> None:
    slow_rounds = dict(recent_schedule_s=10.0, recent_response_s=100.0)  # responses dominate: pin (as IRS)
    jobs = [view("head", rounds_total=1, target=13, **slow_rounds),
            view("next", eligibility_key="other", rounds_total=2)]
    slow_client = ClientEstimate(s_per_sample=0.03, bandwidth_kbps=1e4)  # middle of tiers (0.02, 0.05)

    def rank(policy: ProfilePolicy, supply: int) -> list[str]:
        ctx = SchedulingContext(now=0.0, supply_by_class={"{}": supply}, client=slow_client, speed_tiers=(0.02, 0.05))
        return [j.job_id for j in policy.rank_for_client(CLIENT, jobs, ctx)]

    assert rank(composed(SpeedTiers()), 50) == ["next"]  # 50 >= 3 tiers x 13: pinned, the slow client skips it
    assert rank(composed(SpeedTiers()), 30) == ["head", "next"]  # 30 < 39: the fastest tier cannot fill it
    assert rank(composed(SpeedTiers(tier_fit=False)), 30) == ["next"]
    assert rank(PropiusPolicy(**{"speed_tiers.tier_fit": False}), 30) == ["next"]
    assert rank(composed(), 50) == ["head", "next"]


def test_speed_tiers_count_only_the_clients_the_class_s_other_rounds_leave(view: Callable[..., JobView]) -> None:
    """In a profile, the fill check is made on the class's supply less the bind targets of its other open
    rounds: those clients are not the pinned round's to take (IRS, alone, counts the whole class)."""
    slow_rounds = dict(recent_schedule_s=10.0, recent_response_s=100.0)
    head = view("head", rounds_total=1, target=13, **slow_rounds)
    slow_client = ClientEstimate(s_per_sample=0.03, bandwidth_kbps=1e4)  # not in the fastest tier (< 0.02)

    def rank(others: list[JobView]) -> list[str]:
        ctx = SchedulingContext(now=0.0, supply_by_class={"{}": 50}, client=slow_client, speed_tiers=(0.02, 0.05))
        return [j.job_id for j in composed(SpeedTiers()).rank_for_client(CLIENT, [head, *others], ctx)]

    assert rank([view("b", rounds_total=2, target=11)]) == ["b"]  # 50 - 11 = 39 >= 3 x 13: pinned
    assert rank([view("b", rounds_total=2, target=12)]) == ["head", "b"]  # 38 < 39: not pinned
    assert rank([view("b", eligibility_key="other", rounds_total=2, target=40)]) == ["b"]  # another class's


def test_speed_tiers_pin_to_the_job_s_class_tiers_as_irs_does(view: Callable[..., JobView]) -> None:
    """Global bounds (0.05, 0.12), the slow class's own (0.12, 0.14): a client at 0.11 s per sample is in the
    class's fastest tier, not the global one; one at exactly 0.12 is on the bound, so in the second tier."""
    head = view("head", eligibility_key="slow", rounds_total=1, target=2, recent_schedule_s=10.0,
                recent_response_s=100.0)
    jobs = [head, view("next", eligibility_key="other", rounds_total=2)]

    def rank(policy: ProfilePolicy | IrsPolicy, speed: float, supply: int = 6) -> list[str]:
        ctx = SchedulingContext(now=0.0, supply_by_class={"slow": supply}, speed_tiers=(0.05, 0.12),
                                client=ClientEstimate(s_per_sample=speed, bandwidth_kbps=1e4),
                                class_speed_tiers={"slow": (0.12, 0.14)})
        return [j.job_id for j in policy.rank_for_client(CLIENT, jobs, ctx)]

    for policy in (composed(SpeedTiers()), PropiusPolicy(speed_tiers=True), IrsPolicy()):  # one rule
        assert rank(policy, 0.11) == ["head", "next"]
        assert rank(policy, 0.12) == ["next"]  # pinned: 6 clients >= 3 tiers x 2
        assert rank(policy, 0.12, supply=5) == ["head", "next"]  # 5 < 6: the fastest tier cannot fill it
    assert rank(composed(SpeedTiers(tier_fit=False)), 0.12, supply=5) == ["next"]  # no fill check


def test_task_tiers_pin_by_predicted_task_time_not_training_speed_alone(view: Callable[..., JobView]) -> None:
    # The head job's fastest tier finishes a task within 110 s. Both clients train in the fastest speed
    # tier (0.05 < 0.06); the one on a slow link needs 50 + 2 x 10,000 / 200 = 150 s for a task.
    head = view("head", rounds_total=1, target=13, recent_schedule_s=10.0, recent_response_s=100.0,
                fast_task_s=110.0, **TASK)
    jobs = [head, view("next", eligibility_key="other", rounds_total=2)]
    good_link = ClientEstimate(s_per_sample=0.05, bandwidth_kbps=1000.0)  # 50 + 20 = 70 s
    slow_link = ClientEstimate(s_per_sample=0.05, bandwidth_kbps=200.0)

    def rank(policy: ProfilePolicy, client: ClientEstimate) -> list[str]:
        ctx = SchedulingContext(now=0.0, supply_by_class={"{}": 50}, client=client, speed_tiers=(0.06, 0.12))
        return [j.job_id for j in policy.rank_for_client(CLIENT, jobs, ctx)]

    assert rank(composed(SpeedTiers()), good_link) == ["head", "next"]
    assert rank(composed(SpeedTiers()), slow_link) == ["next"]  # would be the round's straggler
    assert rank(composed(SpeedTiers(task_tiers=False)), slow_link) == ["head", "next"]  # IRS's rule: speed alone


def test_wait_for_faster_leaves_a_slow_client_to_others_when_the_head_round_fills_sooner(
    view: Callable[..., JobView],
) -> None:
    policy = composed(WaitForFaster())
    assert policy.wants_fastest_fill and not PropiusPolicy().wants_fastest_fill
    assert PropiusPolicy(wait_for_faster=True).wants_fastest_fill
    # SLOWISH would deliver at 0 + 120 s; the fastest eligible clients fill the round by 100 s.
    assert offered(policy, [view("head", fastest_fill_at=100.0, **TASK), view("next", **TASK)], SLOWISH) == ["next"]
    assert offered(policy, [view("head", fastest_fill_at=120.0, **TASK)], SLOWISH) == ["head"]  # one of them
    assert offered(policy, [view("head", **TASK)], SLOWISH) == ["head"]  # not estimated
    assert offered(policy, [view("head", fastest_fill_at=100.0, **TASK)], ClientEstimate()) == ["head"]  # unknown
    assert offered(PropiusPolicy(), [view("head", fastest_fill_at=100.0, **TASK)], SLOWISH) == ["head"]


def test_hold_for_tight_keeps_a_client_for_the_next_round_of_a_job_that_needs_its_whole_class(
    view: Callable[..., JobView],
) -> None:
    policy = composed(HoldForTight())  # tight_fraction 0.75, hold_slack 0.5
    slow = ClientEstimate(s_per_sample=0.18, bandwidth_kbps=1000.0)  # 180 + 20 = 200 s per task
    # Demand 40 of a class of 50 clients: tight. Its round opened at 0 and is expected to close at
    # 10 + 80 = 90 s; the hold lasts until 90 + 0.5 x 80 = 130 s.
    timed = dict(opened_at=0.0, recent_schedule_s=10.0, recent_response_s=80.0, **TASK)
    big = view("big", demand=40, target=48, **timed)
    assert offered(policy, [big, view("next", **TASK)], SLOWISH) == ["big", "next"]  # back at 120 s
    assert offered(policy, [big, view("next", **TASK)], slow) == ["big"]  # back at 200 s
    assert offered(composed(HoldForTight(hold_slack=1.0)), [big, view("next", **TASK)], slow) == ["big"]  # 170 s
    assert offered(composed(HoldForTight(tight_fraction=0.9)), [big, view("next", **TASK)], slow) == ["big", "next"]
    # Overdue (now 100 s, past the expected close): held until now + 40 s.
    assert offered(policy, [big, view("next", **TASK)], SLOWISH, now=100.0) == ["big"]
    assert offered(policy, [view("next", **TASK), big], slow) == ["next", "big"]  # only jobs ranked after it
    assert offered(policy, [view("big", demand=30, **timed), view("next", **TASK)], slow) == ["big", "next"]
    assert offered(policy, [view("big", demand=40, **TASK), view("next", **TASK)], slow) == ["big", "next"]  # untimed
    assert offered(policy, [big, view("next", **TASK)], ClientEstimate()) == ["big", "next"]  # unknown client
    assert offered(PropiusPolicy(), [big, view("next", **TASK)], slow) == ["big", "next"]


def test_speed_tiers_pin_only_the_first_pin_share_of_a_round_s_scheduling_window(view: Callable[..., JobView]) -> None:
    # A round opened at 0 with a 300 s limit, 180 s of it the execution timeout: 120 s to schedule.
    head = view("head", rounds_total=1, target=13, recent_schedule_s=10.0, recent_response_s=100.0, opened_at=0.0,
                deadline_at=300.0, execution_timeout_s=180.0)
    jobs = [head, view("next", eligibility_key="other", rounds_total=2)]
    slow_client = ClientEstimate(s_per_sample=0.03, bandwidth_kbps=1e4)  # not in the fastest tier (< 0.02)

    def rank(policy: ProfilePolicy, now: float) -> list[str]:
        ctx = SchedulingContext(now=now, supply_by_class={"{}": 50}, client=slow_client, speed_tiers=(0.02, 0.05))
        return [j.job_id for j in policy.rank_for_client(CLIENT, jobs, ctx)]

    assert rank(composed(SpeedTiers(pin_share=0.25)), 29.0) == ["next"]  # pinned for the first 30 s
    assert rank(composed(SpeedTiers(pin_share=0.25)), 30.0) == ["head", "next"]  # then offered to every client
    assert rank(composed(SpeedTiers(pin_share=1.0)), 119.0) == ["next"]  # the whole window


def test_speed_tiers_try_a_client_of_unknown_task_time_only_while_it_is_reliable(view: Callable[..., JobView]) -> None:
    head = view("head", rounds_total=1, target=13, recent_schedule_s=10.0, recent_response_s=100.0,
                fast_task_s=110.0, **TASK)
    jobs = [head, view("next", eligibility_key="other", rounds_total=2)]

    def rank(policy: ProfilePolicy, reliability: float) -> list[str]:
        unknown = ClientEstimate(reliability=reliability)  # never delivered: no speed, no bandwidth
        ctx = SchedulingContext(now=0.0, supply_by_class={"{}": 50}, client=unknown, speed_tiers=(0.06, 0.12))
        return [j.job_id for j in policy.rank_for_client(CLIENT, jobs, ctx)]

    assert rank(composed(SpeedTiers(trial_reliability=0.5)), 0.6) == ["head", "next"]  # tried, as in IRS
    # Missed twice, never delivered (prior 2 x 0.9: 1.8 / 4): not tried again on a pinned round.
    assert rank(composed(SpeedTiers(trial_reliability=0.5)), 0.45) == ["next"]
    assert rank(composed(SpeedTiers(trial_reliability=0.0)), 0.0) == ["head", "next"]


def test_the_narrower_classes_are_the_other_open_rounds_of_smaller_classes(view: Callable[..., JobView]) -> None:
    job = view("broad", eligibility_key="all", supply=100)
    views = [
        job,
        view("narrow", eligibility_key="fast", supply=20),
        view("narrow-full", eligibility_key="big-ram", supply=10, bound=13),  # no free slot: needs nobody
        view("wider", eligibility_key="any-os", supply=300),
        view("same", eligibility_key="all", supply=100),
    ]
    assert narrower_classes(job, views) == {"fast"}
    assert narrower_classes(views[1], views) == set()


def test_fastest_wake_counts_the_waiters_narrower_rounds_need_slower_unless_told_not_to() -> None:
    assert FastestWake().wake_narrower_penalty == 1.5 and FastestWake(narrower_penalty=1.0).wake_narrower_penalty == 1.0
    assert PropiusPolicy().wake_narrower_penalty == 1.5
    assert load_policy("fifo").wake_narrower_penalty == 1.0 and load_policy("irs").wake_narrower_penalty == 1.0
    with pytest.raises(ValueError, match="narrower_penalty"):
        FastestWake(narrower_penalty=0.5)
