"""The cloud half's fabric: a validated model of racks, rails and links, the run-time allocation state over
it, cloud requests, spare sizing and swap recovery. Base floor: no I/O, imported by placement plug-ins,
the control plane and the benchmarks alike."""

from propius.fabric.model import (
    Accelerator,
    AcceleratorState,
    Fabric,
    FabricError,
    Host,
    Link,
    Rack,
    Rail,
    load_fabric,
    parse_fabric,
)
from propius.fabric.request import CloudRequest, Parallelism
from propius.fabric.state import Allocation, FabricState, FibreCircuit, OcsCircuit, RingShare, Unplaceable

__all__ = [
    "Accelerator",
    "AcceleratorState",
    "Allocation",
    "CloudRequest",
    "Fabric",
    "FabricError",
    "FabricState",
    "FibreCircuit",
    "Host",
    "Link",
    "OcsCircuit",
    "Parallelism",
    "Rack",
    "Rail",
    "RingShare",
    "Unplaceable",
    "load_fabric",
    "parse_fabric",
]
