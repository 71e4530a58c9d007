"""The allocation state's invariants hold under any sequence of changes (hypothesis):

every OCS port in at most one circuit (as sender, as receiver) and only between one job's ports; an
accelerator in exactly one state; per-edge circuit load <= fibre count; a refused change leaves no
trace; a release returns every port and edge count to where it was.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from policies.placement import FirstFitPlacement, RailAlignedPlacement, TorusPlacement
from propius.fabric import (
    AcceleratorState,
    Allocation,
    CloudRequest,
    Fabric,
    FabricError,
    FabricState,
    FibreCircuit,
    OcsCircuit,
)
from propius.fabric.generators import rail_cluster, torus_racks
from propius.fabric.recovery import RecoveryParams, recover
from tests.fabric.observed import observed

RAILS = rail_cluster(4, 4, rail_kind="ocs", hosts_per_rack=2)
TORUS = torus_racks(1, 4, 4, 2, fibres=8)




def random_allocation(fabric: Fabric, data: st.DataObject) -> Allocation:
    ids = [a.id for a in fabric.accelerators]
    accs = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=6))
    ocs = []
    for rail in fabric.rails:
        if rail.ports and data.draw(st.booleans()):
            ports = sorted(rail.ports)
            ocs.append(OcsCircuit(rail.id, data.draw(st.sampled_from(ports)), data.draw(st.sampled_from(ports))))
    fibre = []
    hosts = {h.id: h for h in fabric.hosts}
    for _ in range(data.draw(st.integers(0, 3))):
        path = [data.draw(st.sampled_from(sorted(hosts)))]
        for _ in range(data.draw(st.integers(1, 3))):
            spec = hosts[path[-1]].interposer
            if spec is None:
                break
            path.append(data.draw(st.sampled_from(sorted(spec.fibres))))
        if len(path) > 1:
            fibre.append(FibreCircuit(tuple(path), data.draw(st.integers(1, 6))))
    return Allocation(tuple(accs), tuple(ocs), tuple(fibre))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_allocation_is_either_refused_without_trace_or_keeps_the_invariants(data: st.DataObject) -> None:
    for fabric in (RAILS, TORUS):
        state = FabricState(fabric)
        for job in ("a", "b", "c"):
            before = observed(state)
            allocation = random_allocation(fabric, data)
            try:
                state.allocate(job, allocation)
            except FabricError:
                assert observed(state) == before
                continue
            state.check_invariants()
        for job in list(state.allocations):
            state.release(job)
            state.check_invariants()
        assert state.edge_loads() == {} and all(not state.circuits(r.id) for r in fabric.rails)


class FabricMachine(RuleBasedStateMachine):
    """Placements by every plug-in, releases, failures with recovery, spares: invariants after each step."""

    jobs = Bundle("jobs")

    fabric: Fabric = RAILS

    def __init__(self) -> None:
        super().__init__()
        self.state = FabricState(self.fabric)
        self.counter = 0
        self.before: dict[str, dict[str, Any]] = {}

    @rule(target=jobs, count=st.sampled_from([1, 2, 4, 8]), which=st.sampled_from(["first-fit", "rail", "torus"]))
    def place(self, count: int, which: str) -> str:
        placement = {"first-fit": FirstFitPlacement(), "rail": RailAlignedPlacement(),
                     "torus": TorusPlacement(time_budget_s=0.2)}[which]
        self.counter += 1
        job = f"j{self.counter}"
        if which == "torus" and not any(r.torus for r in self.state.fabric.racks):
            return job
        found = placement.place(CloudRequest(count=count), self.state)
        if isinstance(found, Allocation):
            self.before[job] = observed(self.state)
            self.state.allocate(job, found)
        return job

    @rule(job=consumes(jobs))
    def release(self, job: str) -> None:
        if job not in self.state.allocations:
            return
        allocation = self.state.allocations[job]
        loads, circuits = self.state.edge_loads(), {r.id: self.state.circuits(r.id) for r in self.state.fabric.rails}
        self.state.release(job)
        for circuit in allocation.fibre:
            for edge in circuit.edges():
                loads[edge] -= circuit.width
        for circuit in allocation.ocs:
            del circuits[circuit.rail][circuit.tx]
        assert self.state.edge_loads() == {e: n for e, n in loads.items() if n}
        assert {r.id: self.state.circuits(r.id) for r in self.state.fabric.rails} == circuits
        if len(self.state.allocations) == 0:
            assert self.state.edge_loads() == {}

    @rule(pick=st.integers(0, 10_000))
    def reserve_spare(self, pick: int) -> None:
        free = self.state.free()
        if free:
            self.state.set_state(free[pick % len(free)], AcceleratorState.SPARE)

    @rule(pick=st.integers(0, 10_000))
    def fail_and_recover(self, pick: int) -> None:
        healthy = [a.id for a in self.state.fabric.accelerators if self.state.state(a.id) != AcceleratorState.FAILED]
        if healthy:
            recover(self.state, healthy[pick % len(healthy)], RecoveryParams())

    @invariant()
    def invariants_hold(self) -> None:
        self.state.check_invariants()
        states = [self.state.state(a.id) for a in self.state.fabric.accelerators]
        assert all(isinstance(s, AcceleratorState) for s in states)


class TorusMachine(FabricMachine):
    fabric = TORUS


MACHINE_SETTINGS = settings(max_examples=30, stateful_step_count=25, deadline=None,
                            suppress_health_check=[HealthCheck.too_slow])
FabricMachine.TestCase.settings = MACHINE_SETTINGS
TorusMachine.TestCase.settings = MACHINE_SETTINGS
TestRailMachine = FabricMachine.TestCase
TestTorusMachine = TorusMachine.TestCase


def test_a_placement_then_its_release_restores_the_state_exactly() -> None:
    state = FabricState(rail_cluster(4, 4, rail_kind="ocs"))
    before = observed(state)
    state.allocate("x", RailAlignedPlacement().place(CloudRequest(count=8), state))  # type: ignore[arg-type]
    assert observed(state) != before
    state.release("x")
    assert observed(state) == before

