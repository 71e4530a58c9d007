"""``srsf`` (sort): smallest remaining service first, ``remaining rounds x demand``; open-ended jobs last.

Finishing the jobs closest to done first minimises mean JCT when jobs compete for one pool (the
``srsf`` policy's and IRS's order).
"""

from __future__ import annotations

from typing import ClassVar

from policies.base import JobView, SchedulingContext
from policies.plugins.base import SortPlugin
from policies.srsf import remaining_service

__all__ = ["SmallestRemainingFirst"]


class SmallestRemainingFirst(SortPlugin):
    name: ClassVar[str] = "srsf"

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        return remaining_service(job)
