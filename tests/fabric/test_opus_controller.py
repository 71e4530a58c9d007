"""The OCS controller state machine by hand, and the discrete-event simulation: equal to the closed form
when nothing is random; under randomised interleavings of several jobs, no circuit is torn down under
a transfer, no job touches another's ports, on-demand is never faster than speculative; and the
unsafe no-barrier controller is caught by the same checker."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from policies.placement.rail_aligned import RailAlignedPlacement
from propius.fabric import Allocation, CloudRequest, FabricError, FabricState, Parallelism
from propius.fabric.generators import rail_cluster
from propius.fabric.llm_phases import Degrees, derive_phases, llama3_8b
from propius.fabric.ocs_controller import Ack, ControllerStage, OcsController, Reconfigure
from propius.fabric.ocs_sim import JobRun, simulate
from propius.fabric.opus import Plan, plan_job
from propius.fabric.phases import Collective, Phase
from propius.fabric.state import OcsCircuit


def c(tx: int, rx: int, rail: str = "rail0") -> OcsCircuit:
    return OcsCircuit(rail, tx, rx)


def three_hosts() -> tuple[FabricState, Allocation]:
    state = FabricState(rail_cluster(3, 1, rail_kind="ocs"))
    allocation = Allocation(("r0-h0-a0", "r0-h1-a0", "r0-h2-a0"))
    state.allocate("j", allocation)
    return state, allocation


def test_controller_waits_for_the_barrier_then_reconfigures_and_acks() -> None:
    state, _ = three_hosts()
    first, second = frozenset({c(0, 1), c(1, 0)}), frozenset({c(0, 2), c(2, 0)})
    state.reconfigure("j", first)
    ctl = OcsController("j", state, [first, second], {("rail0", p): p for p in range(3)}, reconfig_s=0.1)
    with pytest.raises(FabricError, match="before checking in"):
        ctl.request(2, 1)
    for rank in range(3):
        ctl.check_in(rank)
    assert ctl.request(0, 0) == [Ack(0, 0)]  # already up
    assert ctl.request(2, 1) == [] and ctl.stage == ControllerStage.BARRIER  # 0->1 and 1->0 still in use
    assert ctl.release(0, 1) == []  # rank 1 still holds 1->0
    actions = ctl.request(1, 1)
    assert actions == [Reconfigure(1, first, second, 0.1)] and ctl.stage == ControllerStage.RECONFIGURING
    assert state.circuits("rail0") == {0: 2, 2: 0}
    assert ctl.reconfigured() == [Ack(1, 1), Ack(2, 1)] and ctl.active == 1 and ctl.stage == ControllerStage.IDLE
    with pytest.raises(FabricError, match="without a reconfiguration"):
        ctl.reconfigured()


def llama16(r: float) -> tuple[FabricState, Plan, Plan]:
    state = FabricState(rail_cluster(4, 4, rail_kind="ocs", rail_gbps=200, scale_up_gbps=2400))
    allocation = RailAlignedPlacement().place(CloudRequest(count=16, parallel=Parallelism(tp=4, dp=2, pp=2)), state)
    assert isinstance(allocation, Allocation)
    state.allocate("j", allocation)
    phases = derive_phases(Degrees(tp=4, dp=2, pp=2), llama3_8b())
    return state, plan_job(state, allocation, phases, job="j", reconfig_s=r), \
        plan_job(state, allocation, phases, job="j", always_connected=True)


@pytest.mark.parametrize("r", [0.0, 0.1, 0.25, 1.0])
def test_deterministic_simulation_equals_the_closed_form(r: float) -> None:
    state, plan, ideal = llama16(r)
    base = simulate(state, [JobRun("j", ideal, "ideal")]).iteration_s("j")
    assert base == pytest.approx(ideal.iteration_s())
    for mode in ("on-demand", "speculative"):
        result = simulate(state, [JobRun("j", plan, mode)])
        assert not result.violations and not result.unfinished
        assert result.iteration_s("j") == pytest.approx(plan.iteration_s(mode))
        assert result.reconfigurations["j"] == 2 * 4 - 1  # two per iteration, the first one installed up front


def test_the_checker_catches_a_controller_without_barrier() -> None:
    state, allocation = three_hosts()
    long = Phase("a", "dp", Collective.ALL_REDUCE, ((0, 1),), 5e9)  # ~0.1 s on the circuits 0<->1
    other = Phase("b", "dp", Collective.ALL_REDUCE, ((0, 2),), 1e6)  # rank 2 asks for it at once
    plan = plan_job(state, allocation, [long, other], job="j", reconfig_s=0.01)
    unsafe = simulate(state, [JobRun("j", plan, "speculative", iterations=2)], barrier=False)
    assert any("tore down" in v for v in unsafe.violations)
    state.reconfigure("j", ())
    safe = simulate(state, [JobRun("j", plan, "speculative", iterations=2)])
    assert not safe.violations and not safe.unfinished


def _job_phases(draw, hosts: int) -> list[Phase]:
    """Random phases over a job on ``hosts`` two-GPU hosts; rank = host · 2 + local index. From three hosts
    on, two rings in opposite directions come first, so the job must switch at least twice an iteration."""
    phases = []
    if hosts >= 3:
        for name, order in (("fwd", range(hosts)), ("rev", range(hosts - 1, -1, -1))):
            groups = tuple(tuple(2 * h + idx for h in order) for idx in (0, 1))
            phases.append(Phase(name, "dp", Collective.ALL_REDUCE, groups, draw(st.floats(1e5, 2e9)), 1,
                                draw(st.floats(0, 0.05))))
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["all-reduce", "send-recv", "all-to-all", "tp"]))
        if kind == "tp":
            groups = tuple((2 * h, 2 * h + 1) for h in range(hosts))
            phases.append(Phase(f"tp{i}", "tp", Collective.ALL_REDUCE, groups, 1e6, 1,
                                draw(st.floats(0, 0.05))))
            continue
        members = draw(st.permutations(range(hosts)))[:draw(st.integers(2, hosts))]
        if kind == "send-recv":
            members = members[:2]
        groups = tuple(tuple(2 * h + idx for h in members) for idx in (0, 1))
        phases.append(Phase(f"{kind}{i}", "dp", Collective(kind), groups, draw(st.floats(1e5, 2e9)), 1,
                            draw(st.floats(0, 0.05))))
    return phases


@st.composite
def scenarios(draw):
    sizes = draw(st.sampled_from([(3, 3), (2, 4), (4, 2), (3, 2)]))
    jobs = [(f"job{k}", hosts, _job_phases(draw, hosts), draw(st.sampled_from(["on-demand", "speculative"])))
            for k, hosts in enumerate(sizes)]
    return jobs, draw(st.floats(0, 0.1)), draw(st.floats(0, 1.0)), draw(st.integers(0, 2**16))


def _ar(name: str, groups: tuple[tuple[int, ...], ...], size: float, compute_s: float = 0.0,
        kind: str = "dp") -> Phase:
    return Phase(name, kind, Collective.ALL_REDUCE, groups, size, 1, compute_s)


# Found by the search: a speculative rank's ack arrived while its collective was running, and the rank joined
# that collective a second time, so its group started it twice and the job's other ranks waited for ever.
LATE_ACK = ([("job0", 2, [_ar("all-reduce0", ((0, 2), (1, 3)), 1e5), _ar("tp1", ((0, 1), (2, 3)), 1e6, kind="tp"),
                          _ar("tp2", ((0, 1), (2, 3)), 1e6, kind="tp"), _ar("all-reduce3", ((0, 2), (1, 3)), 1e5),
                          _ar("all-reduce4", ((0, 2), (1, 3)), 1e5)], "on-demand"),
             ("job1", 4, [_ar("fwd", ((0, 2, 4, 6), (1, 3, 5, 7)), 1e5), _ar("rev", ((6, 4, 2, 0), (7, 5, 3, 1)), 1e5),
                          _ar("all-reduce0", ((0, 2), (1, 3)), 499430562.0, 0.011921069363023654),
                          _ar("tp1", ((0, 1), (2, 3), (4, 5), (6, 7)), 1e6, 0.03929240772073267, kind="tp"),
                          _ar("all-reduce2", ((0, 2, 4), (1, 3, 5)), 1e5)], "speculative")],
            0.01961043292264407, 0.0, 0)


@settings(max_examples=40, deadline=None)
@given(scenarios())
@example(LATE_ACK)
def test_random_interleavings_never_tear_down_a_circuit_in_use(scenario) -> None:
    jobs, r, jitter, seed = scenario
    state = FabricState(rail_cluster(6, 2, rail_kind="ocs"))
    runs, host = [], 0
    for name, hosts, phases, mode in jobs:
        allocation = Allocation(tuple(f"r{h // 4}-h{h}-a{i}" for h in range(host, host + hosts) for i in (0, 1)))
        host += hosts
        state.allocate(name, allocation)
        runs.append(JobRun(name, plan_job(state, allocation, phases, job=name, reconfig_s=r), mode, iterations=3))
    result = simulate(state, runs, jitter=jitter, seed=seed)
    assert result.violations == [] and result.unfinished == []
    assert all(result.reconfigurations[name] >= 2 for name, hosts, *_ in jobs if hosts >= 3)
    state.check_invariants()  # every circuit joins ports of one job
    for name, *_ in jobs:
        accs = set(state.allocations[name].accelerators)
        for circuit in state.allocations[name].ocs:
            ports = state.rails[circuit.rail].ports
            assert {ports[circuit.tx], ports[circuit.rx]} <= accs
            assert state.port_owner(circuit.rail, circuit.tx) == state.port_owner(circuit.rail, circuit.rx) == name


@settings(max_examples=30, deadline=None)
@given(st.data(), st.floats(0, 0.3), st.floats(0, 1.0), st.integers(0, 2**16))
def test_on_demand_is_never_faster_than_speculative(data, r, jitter, seed) -> None:
    state = FabricState(rail_cluster(4, 2, rail_kind="ocs"))
    allocation = Allocation(tuple(f"r0-h{h}-a{i}" for h in range(4) for i in (0, 1)))
    state.allocate("j", allocation)
    plan = plan_job(state, allocation, _job_phases(data.draw, 4), job="j", reconfig_s=r)
    times = {}
    for mode in ("on-demand", "speculative"):
        result = simulate(state, [JobRun("j", plan, mode, iterations=3)], jitter=jitter, seed=seed)
        assert not result.violations and not result.unfinished
        times[mode] = result.iteration_ends["j"][-1]
    assert times["on-demand"] >= times["speculative"] - 1e-9
