"""Smallest remaining service first: the job closest to done is served first.

Remaining service is ``remaining_rounds x demand``, the client-tasks a job still needs. Finishing
short jobs first minimises the mean job completion time when jobs compete for one pool. Open-ended
jobs have no end to get closer to, so they score infinity and go last; ties fall back to FIFO.
"""

from __future__ import annotations

import math
from typing import ClassVar

from policies.base import JobView, Policy, SchedulingContext

__all__ = ["SrsfPolicy", "remaining_service"]


def remaining_service(job: JobView) -> float:
    """``remaining_rounds x demand``; infinite for an open-ended job."""
    remaining = job.remaining_rounds
    return math.inf if remaining is None else float(remaining * job.demand)


class SrsfPolicy(Policy):
    name: ClassVar[str] = "srsf"

    def score(self, job: JobView, ctx: SchedulingContext) -> float:
        return remaining_service(job)
