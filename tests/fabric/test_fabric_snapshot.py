"""A fabric state rebuilt from its snapshot (through its JSON, as SQL and the wire carry it) is the same
state, after any sequence of placements, releases, failures with recovery and repairs (hypothesis)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.placement import Placement, RailAlignedPlacement, TorusPlacement
from propius.fabric import AcceleratorState, CloudRequest, FabricState, load_fabric
from propius.fabric.generators import rail_cluster, torus_racks
from propius.fabric.recovery import RecoveryParams, recover
from propius.fabric.snapshot import FabricSnapshot, restore, snapshot
from propius.fabric.state import Allocation
from tests.fabric.observed import observed

RAILS = rail_cluster(4, 4, rail_kind="ocs", hosts_per_rack=2)
TORUS = torus_racks(1, 4, 4, 2, fibres=8)
# declares an allocation and a spare itself
SMALL = load_fabric(Path(__file__).resolve().parents[2] / "propius/examples/fabric-small.yaml")




def rebuilt(state: FabricState) -> FabricState:
    return restore(state.fabric, FabricSnapshot.model_validate_json(snapshot(state).model_dump_json()))


def relocator(placement: Placement) -> Callable[[FabricState, int], Allocation | None]:
    def relocate(state: FabricState, n: int) -> Allocation | None:
        found = placement.place(CloudRequest(count=n), state)
        return found if isinstance(found, Allocation) else None

    return relocate


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_restore_of_a_snapshot_is_the_same_state(data: st.DataObject) -> None:
    for fabric, placement in ((RAILS, RailAlignedPlacement()), (TORUS, TorusPlacement(time_budget_s=0.2)),
                              (SMALL, RailAlignedPlacement())):
        state = FabricState(fabric)
        ids = [a.id for a in fabric.accelerators]
        for step in range(data.draw(st.integers(1, 8))):
            action = data.draw(st.sampled_from(["place", "release", "fail", "repair", "spare"]))
            if action == "place":
                found = placement.place(CloudRequest(count=data.draw(st.sampled_from([1, 2, 4]))), state)
                if isinstance(found, Allocation):
                    state.allocate(f"job{step}", found)
            elif action == "release" and state.allocations:
                state.release(data.draw(st.sampled_from(sorted(state.allocations))))
            elif action == "fail":
                acc = data.draw(st.sampled_from(ids))
                if state.state(acc) != AcceleratorState.FAILED:
                    recover(state, acc, RecoveryParams(), relocator(placement))
            elif action in ("repair", "spare"):
                idle = [a for a in ids if state.state(a) != AcceleratorState.ALLOCATED]
                if idle:
                    state.set_state(data.draw(st.sampled_from(idle)), AcceleratorState.FREE if action == "repair"
                                    else AcceleratorState.SPARE)
            again = rebuilt(state)
            again.check_invariants()
            assert observed(again) == observed(state)
