"""``srsf`` (sort): smallest remaining service first, ``remaining rounds x demand``; open-ended jobs last.

Finishing the jobs closest to done first minimises mean JCT when jobs compete for one pool (the
``srsf`` policy's and IRS's order).
"""

from __future__ import annotations

import math
from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.plugins.base import SortPlugin

__all__ = ["SmallestRemainingFirst"]


class SmallestRemainingFirst(SortPlugin):
    name: ClassVar[str] = "srsf"

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        remaining = job.remaining_rounds
        return math.inf if remaining is None else float(remaining * job.demand)
