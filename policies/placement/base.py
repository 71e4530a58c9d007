"""The placement interface: where a cloud request's accelerators go.

A placement plug-in reads a :class:`~propius.fabric.state.FabricState` and returns an
:class:`~propius.fabric.state.Allocation` (accelerators in rank order, the circuits they need, their
rings) or an :class:`~propius.fabric.state.Unplaceable` saying why not now. It never changes the state:
the caller commits the allocation with ``state.allocate(job, allocation)``, which re-checks every
invariant, so a plug-in cannot break one. The same plug-ins drive the benchmarks and, later, the
control plane.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from propius.fabric.request import CloudRequest
from propius.fabric.state import Allocation, FabricState, Unplaceable

__all__ = ["Allocation", "Placement", "Unplaceable"]


class Placement(ABC):
    """One placement algorithm; ``name`` is its entry-point name."""

    name: str = ""

    @abstractmethod
    def place(self, request: CloudRequest, state: FabricState) -> Allocation | Unplaceable:
        """An allocation for ``request`` on the free (and spare, where the plug-in says so) accelerators."""
