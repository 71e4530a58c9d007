"""What ``propius fabric plan`` reads about a job: its phases (given, or derived from its degrees and
model size), where it runs, and the switching parameters; and :func:`plan_for`, which plans it.

A job description file (YAML or JSON)::

    request: {count: 16, parallel: {tp: 4, dp: 2, pp: 2}}   # degrees; placement when the job holds nothing
    model: {params: 8.03e9, layers: 32, hidden: 4096}         # or: phases: [{name, kind, collective, ...}]
    ep: 1
    reconfig_ms: 100

The job's accelerators come from the fabric file (accelerators in state ``allocated`` with this job, in
fabric order, or in the order ``ranks`` gives); a job that holds none is placed rail-aligned from
``request``.
"""

from __future__ import annotations

from typing import Annotated, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from propius.fabric.llm_phases import Degrees, ModelShape, derive_phases
from propius.fabric.model import FabricError
from propius.fabric.opus import Plan, plan_job
from propius.fabric.phases import Phase, PhaseSpec
from propius.fabric.request import CloudRequest
from propius.fabric.state import Allocation, FabricState, Unplaceable

__all__ = ["JobDescription", "Placer", "plan_for"]


class Placer(Protocol):
    """A placement plug-in (``policies.placement``), seen from this floor."""

    def place(self, request: CloudRequest, state: FabricState) -> Allocation | Unplaceable: ...


class JobDescription(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    request: CloudRequest | None = None
    ranks: list[str] | None = None
    model: ModelShape | None = None
    ep: Annotated[int, Field(ge=1)] = 1
    phases: list[PhaseSpec] | None = Field(default=None, min_length=1, max_length=10_000)
    reconfig_ms: Annotated[float, Field(ge=0)] = 100.0
    control_ms: Annotated[float, Field(ge=0)] = 0.5
    merge: bool = True

    @model_validator(mode="after")
    def _phases_or_model(self) -> JobDescription:
        if (self.model is None) == (self.phases is None):
            raise ValueError("give exactly one of 'phases' (explicit) or 'model' (derived with the request's degrees)")
        if self.model is not None and self.request is None:
            raise ValueError("'model' needs 'request' for the parallel degrees")
        if self.request is not None:
            p = self.request.degrees
            Degrees(tp=p.tp, dp=p.dp, pp=p.pp, ep=self.ep)  # ep must divide dp
        return self

    def iteration(self) -> list[Phase]:
        if self.phases is not None:
            return [spec.phase() for spec in self.phases]
        assert self.request is not None and self.model is not None
        p = self.request.degrees
        return derive_phases(Degrees(tp=p.tp, dp=p.dp, pp=p.pp, ep=self.ep), self.model)


def plan_for(state: FabricState, job: str, description: JobDescription,
             place: Placer | None = None) -> tuple[Plan, Plan]:
    """The job's plan and its always-connected baseline. ``place`` (a placement plug-in) is used only when
    the job holds nothing in ``state``; it must then return an allocation for ``description.request``."""
    allocation = state.allocations.get(job)
    if allocation is None:
        if description.request is None or place is None:
            raise FabricError(f"job {job!r}", "holds no accelerators in the fabric file and the job description "
                                              "gives no request to place it")
        found = place.place(description.request, state)
        if not isinstance(found, Allocation):
            raise FabricError(f"job {job!r}", f"cannot be placed: {found.reason}")
        state.allocate(job, found)
        allocation = found
    if description.ranks is not None:
        if sorted(description.ranks) != sorted(allocation.accelerators):
            raise FabricError(f"job {job!r}", "'ranks' must list exactly the job's accelerators")
        allocation = Allocation(tuple(description.ranks), allocation.ocs, how="ranks from the job description")
    phases = description.iteration()
    needed = 1 + max(r for phase in phases for group in phase.groups for r in group)
    if needed > len(allocation.accelerators):
        raise FabricError(f"job {job!r}", f"its phases name {needed} ranks; it holds {len(allocation.accelerators)}")
    kw = {"job": job, "reconfig_s": description.reconfig_ms / 1e3, "control_s": description.control_ms / 1e3}
    plan = plan_job(state, allocation, phases, merge=description.merge, **kw)
    return plan, plan_job(state, allocation, phases, always_connected=True, **kw)
