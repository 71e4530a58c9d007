"""First-fit: the topology-blind baseline. The first free accelerators in fabric order, ranks in that order,
no circuits: what a scheduler that sees a cloud server as a bag of devices does."""

from __future__ import annotations

from policies.placement.base import Allocation, Placement, Unplaceable
from propius.fabric.request import CloudRequest
from propius.fabric.state import FabricState


class FirstFitPlacement(Placement):
    name = "first-fit"

    def place(self, request: CloudRequest, state: FabricState) -> Allocation | Unplaceable:
        free = state.free()
        n = request.accelerators
        if len(free) < n:
            return Unplaceable(f"{n} accelerators requested, {len(free)} free")
        return Allocation(tuple(free[:n]), how="first-fit")
