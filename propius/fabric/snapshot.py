"""The run-time state of a fabric as plain data, and the state rebuilt from it exactly.

A :class:`FabricState` is the fabric file plus what happened since: accelerators failed, repaired or set
aside as spares, and the allocations made and released. A :class:`FabricSnapshot` holds exactly that
difference, against the file's *bare* form (every accelerator's state as the file says, except that
allocated ones count as free, and no circuit up): per-accelerator states where they differ, and every
allocation whole (accelerators in rank order, OCS and fibre circuits, rings, how it was made, whether it
is preemptible and the spares it borrows). The
control plane keeps it in SQL (:mod:`control_plane.fabric_store`) and sends it on the wire, so that a
restarted control plane, and the CLI drawing the fabric, rebuild the very same state.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from propius.fabric.model import Accelerator, AcceleratorState, Fabric, FabricError, Rail
from propius.fabric.state import Allocation, FabricState, FibreCircuit, OcsCircuit, RingShare

__all__ = ["AllocationDoc", "FabricSnapshot", "bare", "restore", "snapshot"]

_Id = str


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class AllocationDoc(_Frozen):
    """An :class:`Allocation` as data: circuits as ``(rail, tx, rx)``, light paths as ``(hosts, width)``,
    rings as ``(name, links, bandwidth_gbps)``."""

    accelerators: list[_Id]
    ocs: list[tuple[_Id, int, int]] = Field(default_factory=list)
    fibre: list[tuple[list[_Id], int]] = Field(default_factory=list)
    rings: list[tuple[str, float, float]] = Field(default_factory=list)
    how: str = ""
    preemptible: bool = False
    lent: list[_Id] = Field(default_factory=list)  # spares it borrows: spare again when it is released

    @classmethod
    def of(cls, allocation: Allocation) -> AllocationDoc:
        return cls(accelerators=list(allocation.accelerators),
                   ocs=[(c.rail, c.tx, c.rx) for c in allocation.ocs],
                   fibre=[(list(c.path), c.width) for c in allocation.fibre],
                   rings=[(r.name, r.links, r.bandwidth_gbps) for r in allocation.rings], how=allocation.how,
                   preemptible=allocation.preemptible, lent=list(allocation.lent))

    def allocation(self) -> Allocation:
        return Allocation(tuple(self.accelerators), tuple(OcsCircuit(*c) for c in self.ocs),
                          tuple(FibreCircuit(tuple(path), width) for path, width in self.fibre),
                          tuple(RingShare(*r) for r in self.rings), self.how, self.preemptible, tuple(self.lent))


class FabricSnapshot(_Frozen):
    """What changed since the file: states (free, spare, failed) differing from the bare fabric's, and
    every allocation by job."""

    states: dict[_Id, AcceleratorState] = Field(default_factory=dict)
    allocations: dict[str, AllocationDoc] = Field(default_factory=dict)


def bare(fabric: Fabric) -> Fabric:
    """The fabric with its allocations taken back: allocated accelerators free, no circuit up."""
    accelerators = [acc if acc.state != AcceleratorState.ALLOCATED
                    else Accelerator(**{**acc.model_dump(), "state": AcceleratorState.FREE, "job": None})
                    for acc in fabric.accelerators]
    rails = [Rail(**{**rail.model_dump(), "circuits": {}}) if rail.circuits else rail for rail in fabric.rails]
    return fabric.model_copy(update={"accelerators": accelerators, "rails": rails})


def snapshot(state: FabricState) -> FabricSnapshot:
    """The difference between ``state`` and its fabric's bare form."""
    held = {acc for allocation in state.allocations.values() for acc in allocation.accelerators}
    base = {acc.id: acc.state for acc in bare(state.fabric).accelerators}
    states = {acc: state.state(acc) for acc in state.accelerators
              if acc not in held and state.state(acc) != base[acc]}
    return FabricSnapshot(states=states,
                          allocations={job: AllocationDoc.of(a) for job, a in sorted(state.allocations.items())})


def restore(fabric: Fabric, snap: FabricSnapshot) -> FabricState:
    """The state ``snap`` describes on ``fabric``; FabricError (naming the element) if it does not fit, e.g.
    an allocation naming an accelerator the fabric lacks or two allocations sharing a port."""
    state = FabricState(bare(fabric))
    for job, doc in snap.allocations.items():
        for acc in doc.accelerators:
            if acc not in state.accelerators:
                raise FabricError(f"accelerator {acc!r}", f"held by job {job!r} is not in the fabric")
            if acc in doc.lent:  # a lent spare: allocate lends it again
                state.set_state(acc, AcceleratorState.SPARE)
            elif state.state(acc) in (AcceleratorState.FAILED, AcceleratorState.SPARE):
                state.set_state(acc, AcceleratorState.FREE)
    for acc, acc_state in snap.states.items():
        if acc not in state.accelerators:
            raise FabricError(f"accelerator {acc!r}", "is not in the fabric")
        state.set_state(acc, acc_state)
    for job, doc in snap.allocations.items():
        state.allocate(job, doc.allocation())
    return state
