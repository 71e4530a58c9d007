"""The placement interface: where a cloud request's accelerators go.

A placement plug-in reads a :class:`~propius.fabric.state.FabricState` and returns an
:class:`~propius.fabric.state.Allocation` (accelerators in rank order, the circuits they need, their
rings) or an :class:`~propius.fabric.state.Unplaceable` saying why not now. It never changes the state:
the caller commits the allocation with ``state.allocate(job, allocation)``, which re-checks every
invariant, so a plug-in cannot break one. Callers ask through :meth:`Placement.allocation_for`, which
applies the spare rule for every plug-in: a plug-in only ever places on what its state shows free. The
same plug-ins drive the benchmarks and the control plane.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace

from propius.fabric.request import CloudRequest
from propius.fabric.state import Allocation, FabricState, Unplaceable

__all__ = ["Allocation", "Placement", "Unplaceable"]


class Placement(ABC):
    """One placement algorithm; ``name`` is its entry-point name."""

    name: str = ""

    @abstractmethod
    def place(self, request: CloudRequest, state: FabricState) -> Allocation | Unplaceable:
        """An allocation for ``request`` on the free accelerators of ``state``."""

    def allocation_for(self, request: CloudRequest, state: FabricState) -> Allocation | Unplaceable:
        """:meth:`place` on the free accelerators; a preemptible request that does not fit there is placed
        again with the racks' spares shown free (:meth:`FabricState.spares_as_free`), so it borrows spares
        only when it must. A non-preemptible request never sees a spare (and ``allocate`` refuses one)."""
        found = self.place(request, state)
        if isinstance(found, Allocation):
            return replace(found, preemptible=request.preemptible)
        if not request.preemptible:
            return found
        borrowing = self.place(request, state.spares_as_free())
        return replace(borrowing, preemptible=True) if isinstance(borrowing, Allocation) else found
