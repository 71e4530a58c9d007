"""``propius``, the default policy: the default profile (``policies/profiles/default.yaml``).

Smallest remaining service first, a starvation bound, a bound on what the order costs a job against FIFO
(``fifo_lag``), the fastest waiting clients woken first, and dispatch that refuses binds predicted to be
wasted; each is one plug-in (:mod:`policies.plugins`), listed in the profile file, the one place the
default is defined. Options change the profile: ``doom_guard=false`` drops a plug-in,
``speed_tiers=true`` adds one (IRS's speed-tier pin, outside the default), ``straggler_guard.slack=0.5``
(or ``straggler_guard={"slack": 0.5}``) sets a plug-in's option
(:meth:`policies.profile.Profile.overridden`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from policies.profile import shipped_profile
from policies.profile_policy import ProfilePolicy

__all__ = ["PropiusPolicy"]


class PropiusPolicy(ProfilePolicy):
    """The default profile, with ``overrides`` applied (plug-in name, or ``plugin.option``, -> value)."""

    name: ClassVar[str] = "propius"

    def __init__(self, **overrides: Any) -> None:
        profile = shipped_profile("default").overridden(overrides)
        super().__init__(profile.name, profile.built())
