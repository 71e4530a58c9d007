"""Placement plug-ins: where a cloud request's accelerators go on the fabric (``propius.placement`` entry points)."""

from policies.placement.base import Allocation, Placement, Unplaceable
from policies.placement.first_fit import FirstFitPlacement
from policies.placement.rail_aligned import RailAlignedPlacement
from policies.placement.registry import ENTRY_POINT_GROUP, UnknownPlacementError, available_placements, load_placement
from policies.placement.torus import TorusPlacement

__all__ = [
    "ENTRY_POINT_GROUP",
    "Allocation",
    "FirstFitPlacement",
    "Placement",
    "RailAlignedPlacement",
    "TorusPlacement",
    "Unplaceable",
    "UnknownPlacementError",
    "available_placements",
    "load_placement",
]
