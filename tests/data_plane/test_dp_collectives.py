"""StragglAR schedules, the α-β model and the selector (no processes; see test_dp_collectives_gloo.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from data_plane.collectives import cost
from data_plane.collectives.cost import LinkCost
from data_plane.collectives.schedule import (
    Op,
    ScheduleError,
    Transfer,
    check_schedule,
    round_bound,
    stragglar_schedule,
)
from data_plane.collectives.selector import Algorithm, Selector, StragglerTracker
from propius.fabric.model import Accelerator, Fabric, Host, Link, Rack, Rail, SharedRisk, Site

GIB = 2**30
PAPER = LinkCost(3e-6, 1 / (450 * GIB))


@pytest.mark.parametrize("n", range(2, 65))
def test_schedule_passes_the_checker(n: int) -> None:
    s = stragglar_schedule(n)
    check_schedule(s)
    assert len(s.prephase) == n - 2
    assert round_bound(n) <= s.completion_rounds <= round_bound(n) + 1


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32, 64])
def test_powers_of_two_meet_the_papers_bound(n: int) -> None:
    assert stragglar_schedule(n).completion_rounds == round_bound(n)


@pytest.mark.parametrize("n", [8, 16, 32])
def test_power_of_two_rounds_leave_no_rank_idle(n: int) -> None:
    """Between the start-up and the last swap every ready rank but the straggler's partner sends one chunk and
    receives one it lacked: the bound leaves no slack there."""
    s = stragglar_schedule(n)
    top = n.bit_length() - 1
    for r in range(top, n - 1):
        copies = [tr for tr in s.completion[r] if tr.op is Op.COPY]
        others = sorted(set(range(n - 1)) - {r})
        assert sorted(tr.src for tr in copies) == others
        assert sorted(tr.dst for tr in copies) == others


def _broken(n: int, which: str):
    s = stragglar_schedule(n)
    rounds = [list(r) for r in s.completion]
    if which == "drop":  # the last round's last copy never happens
        rounds[-1].pop()
    elif which == "twice":  # rank 0 also sends in the straggler's first swap round
        rounds[0].append(Transfer(0, 2, 0, Op.COPY))
    elif which == "double-count":  # the straggler adds chunk 0 twice
        rounds.insert(1, [Transfer(0, n - 1, 0, Op.REDUCE)])
    elif which == "straggler-early":
        return replace(s, prephase=((Transfer(n - 1, 0, 0, Op.REDUCE),), *s.prephase))
    return replace(s, completion=tuple(tuple(r) for r in rounds))


@pytest.mark.parametrize(("which", "message"), [("drop", "lacks"), ("twice", "sends twice"),
                                                 ("double-count", "twice in chunk 0"),
                                                 ("straggler-early", "prephase")])
def test_checker_fails_on_broken_schedules(which: str, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        check_schedule(_broken(8, which))


def test_receiving_twice_is_refused() -> None:
    s = stragglar_schedule(4)
    bad = replace(s, completion=((*s.completion[0], Transfer(1, 0, 1, Op.COPY)), *s.completion[1:]))
    with pytest.raises(ScheduleError, match="rank 0 receives twice"):
        check_schedule(bad)


@pytest.mark.parametrize(("n", "paper"), [(8, 1.36), (256, 1.94)])
def test_closed_form_speedup_matches_the_paper(n: int, paper: float) -> None:
    speedup = cost.ring(n, GIB, PAPER) / cost.stragglar_completion(n, GIB, PAPER)
    assert speedup == pytest.approx(paper, rel=0.01)


@pytest.mark.parametrize("n", [4, 8, 16, 64])
def test_schedule_simulation_matches_the_closed_form_at_powers_of_two(n: int) -> None:
    s = stragglar_schedule(n)
    chunk = GIB / (n - 1)
    simulated = sum(PAPER.transfer(chunk) for _ in s.completion)
    assert simulated == pytest.approx(cost.stragglar_completion(n, GIB, PAPER), rel=0.01)


def test_break_even_delay_and_hidden_reduce_scatter() -> None:
    n = 8
    d = cost.break_even_delay(n, GIB, PAPER)
    best = min(cost.ring(n, GIB, PAPER), cost.rhd(n, GIB, PAPER))
    assert cost.stragglar(n, GIB, PAPER, d) == pytest.approx(best)
    assert cost.stragglar(n, GIB, PAPER, 10 * d) == pytest.approx(cost.stragglar_completion(n, GIB, PAPER))
    assert cost.break_even_delay(3, GIB, PAPER) == math.inf  # 3 rounds of S/2 never beat Ring


def test_link_costs_from_the_fabric() -> None:
    link = LinkCost.from_link(Link(kind="scale-up", a="a", b="b", bandwidth_gbps=800.0, latency_us=0.5))
    assert link.alpha_s == pytest.approx(0.5e-6) and link.beta_s_per_byte == pytest.approx(1e-11)
    assert LinkCost.from_rail(Rail(id="r", index=0, kind="ocs"), 2.0).ocs


def test_placement_link_is_the_rings_slowest_hop() -> None:
    """Shards on two hosts: h0's pair has NVLink, the hops between hosts go over the sender's rail."""
    fabric = Fabric(
        sites=[Site(id="dc")], racks=[Rack(id="r0", site="dc")],
        hosts=[Host(id=h, rack="r0", srg=SharedRisk(power=h, board=h, tor="t")) for h in ("h0", "h1")],
        accelerators=[Accelerator(id=f"{h}-g{i}", host=h, index=i, domain=h) for h in ("h0", "h1") for i in (0, 1)],
        links=[Link(kind="scale-up", a="h0-g0", b="h0-g1", bandwidth_gbps=900.0, latency_us=2.0),
               Link(kind="nic-rail", a="h0-g1", b="rail1", bandwidth_gbps=100.0, latency_us=7.0)],
        rails=[Rail(id="rail0", index=0, kind="eps", bandwidth_gbps=400.0),
               Rail(id="rail1", index=1, kind="eps", bandwidth_gbps=200.0)])
    nvlink = LinkCost.of(2.0, 900.0)
    assert cost.placement_link(fabric, ["h0-g0", "h0-g1"]) == nvlink
    # h0-g0 -> h0-g1 (NVLink), h0-g1 -> h1-g0 (rail1, 200 Gb/s, its NIC link's 7 µs), h1-g0 -> h0-g0 (rail0)
    assert cost.placement_link(fabric, ["h0-g0", "h0-g1", "h1-g0"]) == LinkCost.of(7.0, 200.0)
    assert cost.placement_link(fabric, ["h0-g0", "h1-g0"]) == LinkCost.of(1.0, 400.0)
    assert cost.placement_link(fabric, ["h0-g0", "gone"]) == LinkCost.of(1.0, 400.0)  # the sender's rail
    assert cost.placement_link(fabric.model_copy(update={"rails": []}), ["h0-g0", "h1-g0"]) is None


def _tracker(n: int, late: int | None, delay: float, rounds: int = 32) -> StragglerTracker:
    tracker = StragglerTracker()
    for k in range(rounds):
        tracker.observe({m: (delay if m == late else 1e-6 * ((m + k) % n)) for m in range(n)})
    return tracker


def test_tracker_lags_and_persistence() -> None:
    t = _tracker(8, 5, 0.02)
    assert t.persistent_member == 5 and t.persistence == 1.0
    assert t.predicted_delay(0.25) == pytest.approx(0.02 - 7e-6, rel=0.01)
    assert t.ewma[5] > 0.019 and t.ewma[0] == 0.0
    rotating = _tracker(8, None, 0.0)
    assert rotating.persistence == pytest.approx(4 / 32)


def test_selector_picks_ring_or_rhd_without_a_straggler() -> None:
    choice = Selector().choose(8, GIB, PAPER, _tracker(8, None, 0.0))
    assert choice.algorithm in (Algorithm.RING, Algorithm.RHD)


def test_selector_picks_stragglar_for_a_persistent_straggler_but_never_over_ocs() -> None:
    n = 8
    delay = 5 * cost.reduce_scatter(n - 1, GIB, PAPER)
    tracker = _tracker(n, 3, delay)
    assert Selector().choose(n, GIB, PAPER, tracker).algorithm is Algorithm.STRAGGLAR
    assert Selector().form_group(list(range(n)), tracker)[-1] == 3
    ocs = replace(PAPER, ocs=True)
    assert Selector().choose(n, GIB, ocs, tracker).algorithm is not Algorithm.STRAGGLAR
    short = _tracker(n, 3, 0.1 * cost.break_even_delay(n, GIB, PAPER))
    assert Selector().choose(n, GIB, PAPER, short).algorithm is not Algorithm.STRAGGLAR


def test_intermittent_straggler_is_not_bound() -> None:
    tracker = StragglerTracker()
    for k in range(32):
        tracker.observe({m: (0.05 if m == (3 if k % 2 else 6) else 0.0) for m in range(8)})
    assert tracker.persistence == 0.5
    assert Selector().form_group(list(range(8)), tracker) == list(range(8))
    assert Selector().choose(8, GIB, PAPER, tracker).algorithm is not Algorithm.STRAGGLAR


@pytest.mark.parametrize("n", [4, 8, 16, 64])
@pytest.mark.parametrize("link", [PAPER, LinkCost.of(20.0, 100.0), LinkCost.of(5000.0, 10.0)])
def test_wrong_guess_loses_at_most_one_reduce_scatter(n: int, link: LinkCost) -> None:
    t_rs = cost.reduce_scatter(n - 1, GIB, link)
    choice = Selector().choose(n, GIB, link, _tracker(n, n - 1, 3 * t_rs))
    if choice.algorithm is not Algorithm.STRAGGLAR:
        return
    # another member is late: the ready ranks' ReduceScatter waits for it, nothing of it is hidden
    realised = cost.stragglar(n, GIB, link, 0.0)
    best = min(choice.predicted_s[Algorithm.RING], choice.predicted_s[Algorithm.RHD])
    assert realised - best <= t_rs
