"""The Opus planner on fabrics small enough to check by hand: circuits per collective, the all-to-all
choice, merging (and its correctness on random phase lists), the analytic exposure, and that a
reconfiguration cannot touch another job's ports."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from propius.fabric import Allocation, FabricError, FabricState
from propius.fabric.generators import rail_cluster
from propius.fabric.opus import compatible, plan_job
from propius.fabric.phases import Collective, Phase
from propius.fabric.state import OcsCircuit


def one_rail(hosts: int = 4) -> tuple[FabricState, Allocation]:
    """``hosts`` single-GPU hosts on one OCS rail: rank i is host i's GPU, on port i."""
    state = FabricState(rail_cluster(hosts, 1, rail_kind="ocs"))
    allocation = Allocation(tuple(f"r{h // 4}-h{h}-a0" for h in range(hosts)))
    state.allocate("j", allocation)
    return state, allocation


def ring(name: str, *groups: tuple[int, ...], compute_s: float = 0.0) -> Phase:
    return Phase(name, "dp", Collective.ALL_REDUCE, groups, 1e6, 1, compute_s)


def c(tx: int, rx: int) -> OcsCircuit:
    return OcsCircuit("rail0", tx, rx)


def test_ring_collective_is_one_cyclic_permutation() -> None:
    state, allocation = one_rail()
    plan = plan_job(state, allocation, [ring("dp", (0, 1, 2, 3))])
    assert plan.steps[0].circuits == {c(0, 1), c(1, 2), c(2, 3), c(3, 0)}
    # 2(n-1)(α + S/(nB)) on a 400 Gb/s rail with the NIC's 2 µs latency
    assert plan.steps[0].seconds == pytest.approx(6 * (2e-6 + 1e6 / 4 / 50e9))


def test_send_recv_pairs_are_single_circuits_and_pp_stage_paths() -> None:
    state, allocation = one_rail()
    fwd = Phase("pp-fwd", "pp", Collective.SEND_RECV, ((0, 1), (1, 2), (2, 3)), 1e6)
    plan = plan_job(state, allocation, [fwd])
    assert plan.steps[0].circuits == {c(0, 1), c(1, 2), c(2, 3)}


def test_merge_joins_compatible_phases_and_splits_conflicting_ones() -> None:
    state, allocation = one_rail()
    a, b, x = ring("a", (0, 1)), ring("b", (2, 3)), ring("x", (0, 2))
    plan = plan_job(state, allocation, [a, b, x])
    assert [cfg.circuits for cfg in plan.configs] == [{c(0, 1), c(1, 0), c(2, 3), c(3, 2)}, {c(0, 2), c(2, 0)}]
    assert plan.config_of == (0, 0, 1) and plan.reconfigurations() == 2  # a+b -> x, and x -> a+b next iteration
    unmerged = plan_job(state, allocation, [a, b, x], merge=False)
    assert len(unmerged.configs) == 3 and unmerged.reconfigurations() == 3


def test_last_configuration_wraps_into_the_first() -> None:
    state, allocation = one_rail()
    plan = plan_job(state, allocation, [ring("a", (0, 1)), ring("x", (0, 2)), ring("b", (2, 3))])
    assert plan.config_of == (0, 1, 0) and plan.reconfigurations() == 2  # b runs with a: no third switch


def test_all_to_all_relay_or_direct_by_cost() -> None:
    state, allocation = one_rail()
    a2a = Phase("ep", "ep", Collective.ALL_TO_ALL, ((0, 1, 2, 3),), 4e9, count=1)
    slow = plan_job(state, allocation, [a2a], reconfig_s=0.1)
    assert len(slow.steps) == 1 and slow.steps[0].circuits == {c(0, 1), c(1, 2), c(2, 3), c(3, 0)}
    assert slow.steps[0].seconds == pytest.approx(3 * 2e-6 + 4e9 * 3 / 2 / 50e9)  # relay: S(n-1)/2 per circuit
    fast = plan_job(state, allocation, [a2a], reconfig_s=0.0, control_s=0.0)
    assert [s.phase.name for s in fast.steps] == ["ep.0.s1", "ep.0.s2", "ep.0.s3"]
    assert fast.steps[1].circuits == {c(0, 2), c(1, 3), c(2, 0), c(3, 1)}
    assert sum(s.seconds for s in fast.steps) == pytest.approx(3 * (2e-6 + 1e9 / 50e9))
    assert "direct" in fast.steps[0].note and "relay" in slow.steps[0].note


def test_scale_up_and_eps_groups_need_no_circuits() -> None:
    state = FabricState(rail_cluster(2, 2, rail_kind="eps"))
    allocation = Allocation(("r0-h0-a0", "r0-h0-a1", "r0-h1-a0", "r0-h1-a1"))
    state.allocate("j", allocation)
    plan = plan_job(state, allocation, [ring("tp", (0, 1), (2, 3)), ring("dp", (0, 2), (1, 3))])
    assert [s.path for s in plan.steps] == ["scale-up", "eps"] and not plan.configs[0].circuits
    assert plan.reconfigurations() == 0


def test_a_group_across_rails_is_refused_by_name() -> None:
    state = FabricState(rail_cluster(2, 2, rail_kind="ocs"))
    allocation = Allocation(("r0-h0-a0", "r0-h1-a1"))
    state.allocate("j", allocation)
    with pytest.raises(FabricError, match=r"phase 'dp' group \[0, 1\]: spans hosts on local indices \[0, 1\]"):
        plan_job(state, allocation, [ring("dp", (0, 1))])


def test_analytic_exposure_on_demand_and_speculative() -> None:
    state, allocation = one_rail()
    phases = [ring("a", (0, 1), compute_s=0.3), ring("x", (0, 2), compute_s=0.05)]
    plan = plan_job(state, allocation, phases, reconfig_s=0.1, control_s=0.001)
    assert plan.exposed_s("on-demand") == pytest.approx(2 * 0.102)
    assert plan.exposed_s("speculative") == pytest.approx(0.0 + (0.102 - 0.05))


def test_reconfigure_never_touches_another_jobs_ports() -> None:
    state, allocation = one_rail()
    state.release("j")
    state.allocate("a", Allocation(allocation.accelerators[:2]))
    state.allocate("b", Allocation(allocation.accelerators[2:], ocs=(c(2, 3), c(3, 2))))
    with pytest.raises(FabricError, match="port 2 is not a port of this job's accelerators"):
        state.reconfigure("a", [c(0, 2)])
    assert state.circuits("rail0") == {2: 3, 3: 2} and state.allocations["a"].ocs == ()
    state.reconfigure("a", [c(0, 1), c(1, 0)])
    assert state.circuits("rail0") == {0: 1, 1: 0, 2: 3, 3: 2}
    state.check_invariants()


groups = st.lists(st.integers(0, 5), min_size=2, max_size=6, unique=True)
phase_lists = st.lists(st.tuples(st.sampled_from(["all-reduce", "send-recv", "all-to-all"]), groups),
                       min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(phase_lists, st.booleans())
def test_every_configuration_is_a_partial_permutation_holding_its_phases(spec, merge) -> None:
    state, allocation = one_rail(6)
    phases = [Phase(f"p{i}", "dp", Collective(kind), (tuple(g[:2]),) if kind == "send-recv" else (tuple(g),), 1e6)
              for i, (kind, g) in enumerate(spec)]
    plan = plan_job(state, allocation, phases, merge=merge, reconfig_s=0.1)
    for i, step in enumerate(plan.steps):
        assert step.circuits <= plan.configs[plan.config_of[i]].circuits
    for config in plan.configs:
        assert compatible(config.circuits)
    if merge:  # consecutive configurations could not have been merged
        for k in range(1, len(plan.configs)):
            assert not compatible(plan.configs[k - 1].circuits | plan.configs[k].circuits)


def test_direct_all_to_all_is_bounded_in_steps() -> None:
    state, allocation = one_rail()
    huge = Phase("ep", "ep", Collective.ALL_TO_ALL, ((0, 1, 2, 3),), 4e9, count=5000)
    plan = plan_job(state, allocation, [huge], reconfig_s=0.0, control_s=0.0, all_to_all="direct")
    assert len(plan.steps) == 1 and "relay" in plan.steps[0].note
