"""Placement discovery through the ``propius.placement`` entry-point group.

A third party adds a placement without editing Propius: one module with a
:class:`~policies.placement.base.Placement` subclass, declared in its own package's ``pyproject.toml``::

    [project.entry-points."propius.placement"]
    my-placement = "my_package.my_placement:MyPlacement"

Constructor options are validated as the sharing policies' are (:func:`policies.registry.validated_options`).
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any

from policies.errors import UnknownNameError
from policies.placement.base import Placement
from policies.registry import validated_options

__all__ = ["ENTRY_POINT_GROUP", "UnknownPlacementError", "available_placements", "load_placement"]

ENTRY_POINT_GROUP = "propius.placement"


class UnknownPlacementError(UnknownNameError):
    """No installed placement has this name."""

    kind = "placement"


@cache
def available_placements() -> dict[str, type[Placement]]:
    """Entry-point name -> placement class, read once per process (``cache_clear()`` to re-read)."""
    found: dict[str, type[Placement]] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        target = entry.load()
        if not (isinstance(target, type) and issubclass(target, Placement)):
            raise TypeError(f"entry point {entry.name} = {entry.value} is not a Placement subclass")
        found[entry.name] = target
    return found


def load_placement(name: str, **options: Any) -> Placement:
    """Instantiate the placement registered as ``name`` with ``options``, validated against its constructor."""
    placements = available_placements()
    if name not in placements:
        raise UnknownPlacementError(name, list(placements))
    return placements[name](**validated_options(name, placements[name], options))  # type: ignore[arg-type]
