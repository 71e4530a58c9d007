"""Everything a fabric state shows from outside, as plain data: two states are the same state when these are
equal (the invariant and snapshot tests compare states this way)."""

from __future__ import annotations

from typing import Any

from propius.fabric.state import FabricState


def observed(state: FabricState) -> dict[str, Any]:
    return {
        "states": {a.id: state.state(a.id) for a in state.fabric.accelerators},
        "jobs": {a.id: state.job_of(a.id) for a in state.fabric.accelerators},
        "circuits": {r.id: state.circuits(r.id) for r in state.fabric.rails},
        "owners": {(r.id, p): state.port_owner(r.id, p) for r in state.fabric.rails for p in r.ports},
        "loads": state.edge_loads(),
        "allocations": state.allocations,
    }
