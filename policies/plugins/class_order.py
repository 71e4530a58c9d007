"""``class_order`` (partition): IRS's scarce-class protection, the scarcest eligibility class first.

A client is offered the jobs of the scarcest class it qualifies for first, then looser classes; a
looser class whose contention (queued jobs per client) exceeds the scarcer group's is merged into it
and competes in one order (:func:`policies.irs.class_groups`). Off in the default profile: on
policy-20jobs it lets strict classes' large jobs overtake small jobs of looser classes (docs/policies.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.irs import class_groups
from policies.plugins.base import PartitionPlugin

__all__ = ["ClassOrder"]


class ClassOrder(PartitionPlugin):
    """Options: ``merge`` (default true), the contention-aware merge of a looser class into a scarcer group."""

    name: ClassVar[str] = "class_order"
    merge: bool = True

    def partition(self, jobs: Sequence[JobView], ctx: SchedulingContext) -> list[list[JobView]]:
        by_class: dict[str, list[JobView]] = {}
        for job in jobs:
            by_class.setdefault(job.eligibility_key, []).append(job)
        queued = {key: len(members) for key, members in by_class.items()}
        supply = {key: ctx.supply_by_class.get(key, members[0].supply) for key, members in by_class.items()}
        return [by_class[group[0]] if len(group) == 1 else [job for job in jobs if job.eligibility_key in group]
                for group in class_groups(queued, supply, self.merge)]
