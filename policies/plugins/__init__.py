"""Policy plug-ins, one per file, and how they are found: the built-in ones below, a third party's through
the ``propius.policy_plugins`` entry-point group::

    [project.entry-points."propius.policy_plugins"]
    my_rule = "my_package.my_rule:MyRule"

The entry point's name is the name a profile lists the plug-in under; it must equal the class's ``name``.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points

from policies.plugins.availability_aware import AvailabilityAware
from policies.plugins.base import Plugin
from policies.plugins.class_order import ClassOrder
from policies.plugins.deadline_aware import DeadlineAware
from policies.plugins.doom_guard import DoomGuard
from policies.plugins.fastest_wake import FastestWake
from policies.plugins.fifo_floor import FifoFloor
from policies.plugins.fifo_lag import FifoLag
from policies.plugins.hold_for_tight import HoldForTight
from policies.plugins.longest_first import LongestFirst
from policies.plugins.speed_tiers import SpeedTiers
from policies.plugins.srsf import SmallestRemainingFirst
from policies.plugins.starvation_bound import StarvationBound
from policies.plugins.straggler_guard import StragglerGuard
from policies.plugins.wait_for_faster import WaitForFaster

__all__ = ["BUILTIN", "PLUGIN_GROUP", "Plugin", "available_plugins"]

PLUGIN_GROUP = "propius.policy_plugins"

# Built in here rather than through entry points, so a checkout runs without reinstalling its metadata.
BUILTIN: tuple[type[Plugin], ...] = (
    SmallestRemainingFirst, LongestFirst, FifoFloor, FifoLag, StarvationBound, ClassOrder, SpeedTiers, HoldForTight,
    DeadlineAware, AvailabilityAware, DoomGuard, StragglerGuard, WaitForFaster, FastestWake,
)


@cache
def available_plugins() -> dict[str, type[Plugin]]:
    """Plug-in name -> class: the built-in ones and those of the entry-point group, read once per process.

    A plug-in installed while the process runs shows up after ``available_plugins.cache_clear()``.
    """
    found = {plugin.name: plugin for plugin in BUILTIN}
    for entry in entry_points(group=PLUGIN_GROUP):
        target = entry.load()
        if not (isinstance(target, type) and issubclass(target, Plugin)) or target.name != entry.name:
            raise TypeError(f"entry point {entry.name} = {entry.value} is not a Plugin subclass named {entry.name!r}")
        found[entry.name] = target
    return found
