"""Speed tiers per eligibility class, on a hand-built population: why IRS needs them (Venn cuts them so).

Twelve clients. Six "fast" ones (0.01 ... 0.06 s per sample) qualify only for the loose class; six "slow"
ones (0.10 ... 0.15 s) qualify for the loose class and for a slow window class. With 3 tiers:

- over all twelve, the bounds are the 4th and 8th speeds: (0.05, 0.12); the fastest tier (< 0.05) is
  a0 ... a3, and holds none of the slow class;
- over the slow class alone, the bounds are (0.12, 0.14); its fastest tier (< 0.12) is b0, b1: 1 in 3.

So a slow-class job pinned to the global fastest tier is offered to none of the clients that may serve it
(its rounds fail), and pinned to its class's fastest tier to a third of them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from control_plane.scheduling.history import ClientHistory
from control_plane.scheduling.tiers import ClassTiers
from policies import ClientEstimate, IrsPolicy, JobView, SchedulingContext
from policies.irs import fastest_first

FAST = {f"a{i}": 0.01 * (i + 1) for i in range(6)}
SLOW = {f"b{i}": 0.10 + 0.01 * i for i in range(6)}
CLASSES = {**{c: ("loose",) for c in FAST}, **{c: ("loose", "slow") for c in SLOW}}


@pytest.fixture
def tiers() -> ClassTiers:
    history = ClientHistory()
    for client, speed in (FAST | SLOW).items():
        history.delivered(client, fetch_s=1.0, train_s=100.0 * speed, work_samples=100.0, model_size_kbit=1000.0)
    found = ClassTiers(history, tiers=3)
    found.refresh(CLASSES.items())
    return found


def test_class_tiers_are_cut_over_the_class_s_own_clients(tiers: ClassTiers) -> None:
    assert tiers.speed_tiers() == pytest.approx((0.05, 0.12))
    assert tiers.bounds["loose"] == pytest.approx((0.05, 0.12))
    assert tiers.bounds["slow"] == pytest.approx((0.12, 0.14))
    tiers.refresh([(client, CLASSES[client]) for client in ("a0", "b0")])  # fewer recent clients than tiers
    assert set(tiers.bounds) == set()


def test_a_pinned_slow_class_job_reaches_a_third_of_its_class_only_with_class_tiers(
    tiers: ClassTiers, view: Callable[..., JobView],
) -> None:
    # Responses dominate (100 > 3 x 10) and the class's 6 clients fill 3 x a target of 2: pinned.
    head = view("slow-head", eligibility_key="slow", target=2, demand=2, recent_schedule_s=10.0,
                recent_response_s=100.0)
    supply = {"slow": 6, "loose": 12}

    def offered(class_tiers: dict[str, tuple[float, ...]]) -> set[str]:
        policy = IrsPolicy()
        served = set()
        for client in SLOW:
            estimate = tiers.history.estimate(client)
            ctx = SchedulingContext(now=0.0, supply_by_class=supply, client=estimate,
                                    speed_tiers=tiers.speed_tiers(), class_speed_tiers=class_tiers)
            if [job.job_id for job in policy.rank_for_client({}, [head], ctx)] == ["slow-head"]:
                served.add(client)
        return served

    assert offered({}) == set()  # the global fastest tier is a0 ... a3
    assert offered(dict(tiers.bounds)) == {"b0", "b1"}


def test_tiers_for_falls_back_to_the_global_bounds(view: Callable[..., JobView]) -> None:
    ctx = SchedulingContext(now=0.0, supply_by_class={}, speed_tiers=(0.05, 0.12),
                            class_speed_tiers={"slow": (0.12, 0.14)})
    assert ctx.tiers_for(view("s", eligibility_key="slow")) == (0.12, 0.14)
    assert ctx.tiers_for(view("o", eligibility_key="other")) == (0.05, 0.12)


def test_no_pin_when_the_fastest_tier_cannot_fill_the_round(tiers: ClassTiers, view: Callable[..., JobView]) -> None:
    """6 clients in the class, 3 tiers: the fastest holds 2, fewer than a target of 3, so b5 is offered it."""
    head = view("slow-head", eligibility_key="slow", target=3, recent_schedule_s=10.0, recent_response_s=100.0)
    ctx = SchedulingContext(now=0.0, supply_by_class={"slow": 6}, client=tiers.history.estimate("b5"),
                            class_speed_tiers=dict(tiers.bounds))
    assert [job.job_id for job in IrsPolicy().rank_for_client({}, [head], ctx)] == ["slow-head"]


def test_fast_task_s_is_per_class_and_falls_back_to_the_global_estimate(view: Callable[..., JobView]) -> None:
    history = ClientHistory()
    # 40 fast clients in "loose" only, 40 slow ones in "slow" (and "loose"); all on a 1,000 kbit/s link.
    for i in range(40):
        history.delivered(f"a{i}", 1.0, 1.0, 100.0, 1000.0)  # 0.01 s per sample
        history.delivered(f"b{i}", 1.0, 10.0, 100.0, 1000.0)  # 0.1 s per sample
    tiers = ClassTiers(history, tiers=3)
    tiers.refresh([(f"a{i}", ("loose",)) for i in range(40)] + [(f"b{i}", ("loose", "slow")) for i in range(40)])
    # 100 samples x 0.1 s + 2 x 1,000 kbit x 0.001 s/kbit: every slow-class task takes 12 s.
    assert tiers.fast_task_s("slow", 100.0, 1000.0) == pytest.approx(12.0)
    assert tiers.fast_task_s("loose", 100.0, 1000.0) == pytest.approx(3.0)  # its fastest third are a-clients
    assert tiers.fast_task_s("unseen", 100.0, 1000.0) == history.fast_task_s(100.0, 1000.0, 3)


def test_the_wake_puts_clients_of_unknown_time_at_the_fastest_tier_bound(view: Callable[..., JobView]) -> None:
    """A client never measured (it may be one whose private requirements refuse the job) is woken after the
    clients known to be in the fastest tier, not before every one of them."""
    job = view("j", work_samples=100.0, model_size_kbit=1000.0, fast_task_s=5.0)
    key = fastest_first(job)
    fast, slow = ClientEstimate(s_per_sample=0.01, bandwidth_kbps=1000.0), ClientEstimate(0.1, 1000.0)
    assert (key(fast), key(ClientEstimate()), key(slow)) == pytest.approx((3.0, 5.0, 12.0))
    assert IrsPolicy().wake_key(job) is not None and IrsPolicy(speed_tiers=False).wake_key(job) is None
